"""One state numbering from a lazy index to its completed index.

A lazy index numbers its states as its lazy byte automaton discovers them;
the completed (eager) index numbers the minimised automaton's states
breadth-first. :func:`_byte_state_map` pairs each explored lazy state with
its minimal byte state, and :func:`_index_states_of_byte_states` each
minimal byte state with the index state built from it; composed, they are
:meth:`tokendfa.lazy.index.LazyIndex.state_map`.
"""

from __future__ import annotations

import numpy as np

from ..analysis.dfa import DEAD, INITIAL
from .kernels import _distinct

def _byte_state_map(lazy_table: np.ndarray, minimal: np.ndarray) -> np.ndarray:
    """For each state of an explored lazy byte automaton (``int[n, 256]``,
    dead 0, initial 1), the state of its minimal automaton it is
    (``minimal``, the same numbering convention), found by walking both from
    their initial states in lockstep, a whole row at a time; -1 for the dead
    state and the states the minimal automaton trimmed."""
    found = np.full(len(lazy_table), -1, dtype=np.int64)
    found[INITIAL] = INITIAL
    queue = [INITIAL]
    for state in queue:  # grows while we go
        following, partner = lazy_table[state], minimal[found[state]]
        fresh = np.flatnonzero((found[following] < 0) & (partner != DEAD))
        if len(fresh):
            found[following[fresh]] = partner[fresh]
            queue.extend(_distinct(following[fresh]).tolist())
    found[DEAD] = -1
    return found


def _index_states_of_byte_states(dfa, arrays, tokens) -> np.ndarray:
    """For each state of the minimal byte automaton ``dfa``, the state of
    the index ``arrays`` built from it (-1 where the index has none), found
    by following, from each index state in order, one token of each new
    successor's group through ``dfa`` (the index numbers its states
    breadth-first, so each state's first parent comes before it)."""
    num_states = len(arrays.finals)
    byte_of = np.full(num_states, -1, dtype=np.int64)
    byte_of[0] = dfa.initial
    token_group = np.asarray(arrays.token_group)
    grouped = np.flatnonzero(token_group >= 0)
    example = np.full(int(token_group.max(initial=-1)) + 1, -1, dtype=np.int64)
    example[token_group[grouped][::-1]] = grouped[::-1]  # the smallest token of each group
    offsets, groups, targets = arrays.state_offsets, arrays.edge_group, arrays.edge_next
    for state in range(num_states):
        lo, hi = int(offsets[state]), int(offsets[state + 1])
        new = np.flatnonzero(byte_of[targets[lo:hi]] < 0)
        for at in new.tolist():
            target = int(targets[lo + at])
            if byte_of[target] < 0:
                byte_of[target] = dfa.walk(int(byte_of[state]), tokens[int(example[groups[lo + at]])])
    found = np.full(dfa.num_states, -1, dtype=np.int64)
    found[byte_of] = np.arange(num_states)
    return found
