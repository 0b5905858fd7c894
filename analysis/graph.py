"""The one walk: which nodes of a graph held as arrays a set of nodes reaches.

Automata here are numpy arrays, either a table (``int32[states, bytes]``,
row ``s`` listing where each byte leads) or an edge list (the token edges a
build finds). Every question the library asks of their shape is one
breadth-first walk over *successor lists* in compressed form (``starts``,
``successors``: node ``q``'s successors are
``successors[starts[q]:starts[q + 1]]``, in the order they are stored):

* *liveness*, the states from which a final state can be reached, is the
  walk from the final states along reversed edges (:func:`live_states`);
  a state that is not live is as good as dead;
* *reachability* from a set of states (:func:`reachable`), the states a
  build can actually be in;
* a *breadth-first numbering* (:func:`breadth_first`), which is how a
  minimal DFA and an index get canonical state numbers.

A whole breadth-first level is one numpy step, not one step per node: a DFA
from a schema can have 100k states, and chains of counted repeats make
hundreds of levels. The order within a level is the one a first-in
first-out queue would give, so the numbering is the textbook one.
"""

from __future__ import annotations

import numpy as np

from . import limits


def concatenated_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])``, vectorised."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(total)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` (sorted distinct values) by one sort.

    numpy 2.3's ``np.unique`` without ``return_*`` goes through a hash table
    that is pathologically slow on many distinct values: 1.5 s on a million
    distinct int64 where sorting takes 23 ms, 39 ms against 0.7 ms on 100k.
    """
    ordered = np.sort(values, axis=None)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def distinct_successor_lists(origin: np.ndarray, destination: np.ndarray,
                             num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, successors)`` with each node's distinct successors in
    increasing order: a few per node even when the edges number millions."""
    pairs = distinct(origin.astype(np.int64) * num_nodes + destination)
    origins, successors = np.divmod(pairs, num_nodes)
    return np.searchsorted(origins, np.arange(num_nodes + 1)), successors


def breadth_first(starts: np.ndarray, successors: np.ndarray, roots: np.ndarray, *,
                  closed: np.ndarray | None = None) -> np.ndarray:
    """The nodes reached from ``roots`` (distinct; they come first), in the
    order a first-in first-out queue meets them: level by level, a level's
    nodes in the order of their first appearance among the current level's
    successor lists. Nodes marked in the boolean mask ``closed`` are never
    entered (the dead state, say)."""
    num_nodes = len(starts) - 1
    if len(successors) <= _SMALL_GRAPH_EDGES:
        return _breadth_first_small(starts, successors, roots, closed)
    seen = np.zeros(num_nodes, dtype=bool) if closed is None else closed.copy()
    frontier = np.asarray(roots, dtype=np.int64)
    seen[frontier] = True
    levels = [frontier]
    while len(frontier):
        limits.check()
        met = successors[concatenated_ranges(starts[frontier], starts[frontier + 1])]
        met = met[~seen[met]]
        _, first = np.unique(met, return_index=True)
        frontier = met[np.sort(first)].astype(np.int64, copy=False)
        seen[frontier] = True
        levels.append(frontier)
    return np.concatenate(levels)


# Up to this many edges a graph is walked with a plain queue: each level of
# the vectorised walk costs ~40 us of numpy calls, which is the whole walk of
# a small automaton (a build of a 3-state pattern made ~20 such levels).
_SMALL_GRAPH_EDGES = 4096


def _breadth_first_small(starts, successors, roots, closed) -> np.ndarray:
    """:func:`breadth_first` with a first-in first-out queue of Python ints
    (the limits are checked once: the walk takes at most a millisecond or two)."""
    limits.check()
    starts, successors = starts.tolist(), successors.tolist()
    seen = [False] * (len(starts) - 1) if closed is None else closed.tolist()
    order = [int(root) for root in np.asarray(roots).tolist()]
    for root in order:
        seen[root] = True
    for node in order:  # grows while we iterate
        for successor in successors[starts[node]:starts[node + 1]]:
            if not seen[successor]:
                seen[successor] = True
                order.append(successor)
    return np.array(order, dtype=np.int64)


def reachable(origin: np.ndarray, destination: np.ndarray, seeds: np.ndarray,
              num_nodes: int) -> np.ndarray:
    """Boolean mask of the nodes reached from ``seeds`` (a boolean mask, seeds
    included) along the edges ``origin -> destination``."""
    starts, successors = distinct_successor_lists(origin, destination, num_nodes)
    mask = np.zeros(num_nodes, dtype=bool)
    mask[breadth_first(starts, successors, np.flatnonzero(seeds))] = True
    return mask


def live_states(transitions: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """Boolean mask of the states of a table from which some path reaches a final state.

    ``transitions`` may hold one column per byte or only one per distinct
    column (see :func:`tokendfa.analysis.byteclasses.unique_columns`): the
    answer is the same. The walk follows the edges backwards from the final states.
    """
    num_states = transitions.shape[0]
    sources = np.repeat(np.arange(num_states, dtype=np.int64), transitions.shape[1])
    return reachable(transitions.ravel(), sources, finals, num_states)  # edges reversed
