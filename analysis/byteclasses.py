"""Byte classes: bytes that no state of the automaton can tell apart.

Two bytes whose columns in the transition table are equal lead every state to
the same place, so whether a byte string is accepted never depends on which
of them it holds. The 256 bytes therefore fall into a few *classes*; a regex
over JSON typically has a dozen or two. The class whose column is all dead
holds the *dead bytes*: a token containing one is never allowed anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bytedfa import DEAD, ByteDFA, unique_columns


@dataclass(frozen=True, eq=False)
class ByteClasses:
    """``class_of[byte]`` for the 256 bytes, classes numbered by smallest byte.

    ``dead_class`` is the class of the dead bytes, or -1 when every byte is
    used somewhere. ``representatives[k]`` is the smallest byte of class k.
    """

    class_of: np.ndarray
    representatives: np.ndarray
    dead_class: int

    @property
    def num_classes(self) -> int:
        return len(self.representatives)

    def dead_bytes(self) -> bytes:
        if self.dead_class < 0:
            return b""
        return bytes(np.flatnonzero(self.class_of == self.dead_class).tolist())

    def members(self, klass: int) -> bytes:
        return bytes(np.flatnonzero(self.class_of == klass).tolist())


def byte_classes(dfa: ByteDFA, states: np.ndarray | None = None) -> ByteClasses:
    """Partition the bytes by their columns in ``dfa.transitions``.

    With ``states`` (a boolean mask), only those rows count: bytes that only
    the other states tell apart share a class. The build uses this to keep
    literal states from splitting the classes of everything else.
    """
    rows = dfa.transitions if states is None else dfa.transitions[states]
    # Classes come numbered by smallest byte, so the numbering is stable and readable.
    first_byte, inverse = unique_columns(rows)
    class_of = inverse.astype(np.int32)
    representatives = first_byte.astype(np.int32)
    dead = np.flatnonzero((rows[:, representatives] == DEAD).all(axis=0))
    class_of.flags.writeable = False
    representatives.flags.writeable = False
    return ByteClasses(class_of, representatives, int(dead[0]) if len(dead) else -1)


def class_table(dfa: ByteDFA, classes: ByteClasses) -> np.ndarray:
    """``transitions`` restricted to one byte per class: ``int32[states, classes]``."""
    return np.ascontiguousarray(dfa.transitions[:, classes.representatives])
