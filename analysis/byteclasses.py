"""Byte classes: bytes that no state of the automaton can tell apart.

Two bytes whose columns in the transition table are equal lead every state to
the same place, so whether a byte string is accepted never depends on which
of them it holds. The 256 bytes therefore fall into a few *classes*; a regex
over JSON typically has a dozen or two. The class whose column is all dead
holds the *dead bytes*: a token containing one is never allowed anywhere.

:func:`unique_columns` finds the equal columns of any table; the minimiser
(:mod:`tokendfa.analysis.minimise`) also uses it, to work on one column per
class instead of 256.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import limits
from .dfa import DEAD, ByteDFA


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


def byte_classes(dfa: ByteDFA, states: np.ndarray | None = None,
                 within: ByteClasses | None = None) -> ByteClasses:
    """Partition the bytes by their columns in ``dfa.transitions``.

    With ``states`` (a boolean mask), only those rows count: bytes that only
    the other states tell apart share a class. The build uses this to keep
    literal states from splitting the classes of everything else.
    ``within``, the classes of all the rows (``byte_classes(dfa)``), is read
    instead of the 256 columns when given: the classes over some rows only
    merge whole classes of all of them.
    """
    rows = dfa.transitions if states is None else dfa.transitions[states]
    if within is not None:
        rows = rows[:, within.representatives]
    # Classes come numbered by smallest byte, so the numbering is stable and readable
    # (with ``within``: whole classes, themselves numbered by smallest byte).
    first_column, inverse = unique_columns(rows)
    dead = np.flatnonzero((rows[:, first_column] == DEAD).all(axis=0))
    if within is not None:
        inverse, first_column = inverse[within.class_of], within.representatives[first_column]
    class_of = inverse.astype(np.int32)
    representatives = first_column.astype(np.int32)
    class_of.flags.writeable = False
    representatives.flags.writeable = False
    return ByteClasses(class_of, representatives, int(dead[0]) if len(dead) else -1)


def class_table(dfa: ByteDFA, classes: ByteClasses) -> np.ndarray:
    """``transitions`` restricted to one byte per class: ``int32[states, classes]``."""
    return np.ascontiguousarray(dfa.transitions[:, classes.representatives])


# --- equal columns of a table ------------------------------------------------

def unique_columns(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes with equal columns: ``(first, inverse)`` where ``first[k]`` is the
    smallest byte of the k-th distinct column (increasing) and
    ``table[:, b]`` equals ``table[:, first[inverse[b]]]``.

    Large tables group their columns by a hash (one pass, no transposed copy)
    and check every column against its group's first; small ones, and a
    hash collision, compare whole columns as byte strings.
    ``np.unique(table, axis=1)`` compares them as records of one field per
    state, which took 20 s on a 100k-state table.
    """
    if table.shape[0] >= _HASHED_COLUMNS_FROM:
        found = _unique_columns_hashed(table)
        if found is not None:
            return found
    transposed = np.ascontiguousarray(table.T)
    rows = transposed.view(np.dtype((np.void, transposed.shape[1] * transposed.itemsize)))
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    return _in_byte_order(first, inverse.ravel())


_HASHED_COLUMNS_FROM = 2048  # states; below this the transposed copy is cheap
_ROWS_PER_PASS = 8192


def hash_weights(seed: int, size: int) -> np.ndarray:
    """``size`` odd pseudo-random 64-bit weights for a linear hash (``uint64``):
    splitmix64 of ``seed * 2**32 + i``, a fixed sequence for each seed.

    Plain array arithmetic rather than numpy's ``Generator``: making one
    cost ~0.5 ms and ~100 page faults in a freshly forked process (its
    modules' pages are copied on first touch), a sixth of a whole build of
    a small pattern on a 32k vocabulary; this costs ~20 us."""
    z = (np.uint64(seed) << np.uint64(32)) + np.arange(1, size + 1, dtype=np.uint64)
    z *= np.uint64(0x9E3779B97F4A7C15)  # integer arrays wrap silently
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z | np.uint64(1)


def _unique_columns_hashed(table: np.ndarray):
    """``unique_columns`` by a random linear hash of each column; None on a collision."""
    weights = ((hash_weights(0, table.shape[0]) >> np.uint64(2)) | np.uint64(1)).view(np.int64)  # < 2**62
    hashes = np.zeros(table.shape[1], dtype=np.int64)
    for start in range(0, table.shape[0], _ROWS_PER_PASS):  # a 64-bit copy of a slice only
        # a pass takes ~8 ms: a 120,000-state table took 0.25 s without a check
        limits.check()
        part = slice(start, start + _ROWS_PER_PASS)
        hashes += weights[part] @ table[part].astype(np.int64)  # wraps around: fine for a hash
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    representative = first[inverse]
    for start in range(0, table.shape[0], _ROWS_PER_PASS):
        limits.check()
        rows = table[start:start + _ROWS_PER_PASS]
        if not np.array_equal(rows, rows[:, representative]):
            return None
    return _in_byte_order(first, inverse)


def _in_byte_order(first: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse]
