"""Literals: runs of bytes the automaton forces.

A state is *forced* when it is not final and exactly one byte keeps it alive:
whatever the model writes next, that byte is the only way on. Runs of forced
states spell *literals*: JSON keys and punctuation, fixed words, separators.
They matter twice: at serving time the forced bytes can be emitted without
asking the model (fast-forward), and at build time a literal's bytes, each
distinguished from every other byte by just one state, are what splits the
byte classes of everything else.
"""

from __future__ import annotations

import numpy as np

from .dfa import DEAD, ByteDFA

NOT_FORCED = -1
# The longest run forced_run gives (a fast-forward of a long literal stops there).
FORCED_RUN_LIMIT = 4096
_ROWS_AT_ONCE = 4096


def forced_bytes(dfa: ByteDFA) -> np.ndarray:
    """``int16[num_states]``: the one live byte of each forced state, else -1."""
    single = dfa.live_bytes == 1
    forced = np.flatnonzero(single & ~dfa.finals)
    result = np.full(dfa.num_states, NOT_FORCED, dtype=np.int16)
    # the one cell that is not DEAD holds a state id > 0, the row's maximum; a
    # few thousand rows at a time, so the copy stays small (80k rows at once
    # are 80 MB to fault in)
    for low in range(0, len(forced), _ROWS_AT_ONCE):
        rows = forced[low:low + _ROWS_AT_ONCE]
        result[rows] = np.argmax(dfa.transitions[rows], axis=1)
    return result


def forced_run(dfa: ByteDFA, state: int, forced: np.ndarray | None = None,
               limit: int = FORCED_RUN_LIMIT) -> tuple[bytes, int]:
    """The bytes forced from ``state`` on, and the state after them."""
    forced = forced_bytes(dfa) if forced is None else forced
    run = bytearray()
    while forced[state] != NOT_FORCED and len(run) < limit:
        byte = int(forced[state])
        run.append(byte)
        state = int(dfa.transitions[state, byte])
    return bytes(run), state


def narrow_states(dfa: ByteDFA, max_bytes: int) -> np.ndarray:
    """Live states where at most ``max_bytes`` bytes go on (``bool[num_states]``).

    Forced states are the narrowest; states choosing among a few keys or
    enum values are narrow too. Each byte that only such states distinguish
    would get a byte class of its own; the build walks narrow states byte by
    byte against the vocabulary instead, and keeps the classes coarse.
    """
    live_bytes = dfa.live_bytes
    narrow = live_bytes <= max_bytes
    narrow[DEAD] = False
    return narrow
