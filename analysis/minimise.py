"""The canonical form of a byte table: trimmed, minimal, numbered breadth-first.

The regex compiler's subset construction (:mod:`tokendfa.analysis.regex_compiler`)
gives a complete table with the dead state 0 and the initial state 1, but
with states that cannot reach a final one, states that accept the same
language, and numbers that depend on how the pattern was written.
:func:`canonical_byte_dfa` removes all three: any DFA for the same language
gives the same arrays, which is what makes index files reproducible and lets
the tests compare builds array for array.

1. **Trim**: states from which no final state is reachable
   (:func:`tokendfa.analysis.graph.live_states`) become the dead state.
2. **Minimise**: the coarsest partition of the states that respects finality
   and the transitions (:func:`_minimise`).
3. **Renumber**: breadth-first from the initial state, bytes in increasing
   order (:func:`tokendfa.analysis.graph.breadth_first`), the dead state 0.

All three run on one column per distinct column of the table
(:func:`tokendfa.analysis.byteclasses.unique_columns`: a few dozen where there
are 256 bytes), widened back at the end. A small table takes the same three
steps with Python lists (:func:`_canonical_small`), where the arrays' fixed
cost would be most of the work.
"""

from __future__ import annotations

import numpy as np

from . import limits
from .byteclasses import hash_weights, unique_columns
from .dfa import DEAD, INITIAL, STATE_DTYPE, ByteDFA
from .graph import breadth_first, concatenated_ranges, distinct, live_states

__all__ = ["canonical_byte_dfa"]


def canonical_byte_dfa(transitions: np.ndarray, finals: np.ndarray, *,
                       pattern: str = "") -> ByteDFA:
    """The canonical :class:`ByteDFA` of a complete table (``int[n, 256]``,
    state 0 dead, state 1 initial) and its final states (``bool[n]``)."""
    limits.check()
    if transitions.shape[0] <= _SMALL_TABLE_STATES:
        return _canonical_small(transitions.tolist(), finals.tolist(), pattern)
    first_byte, column_of_byte = unique_columns(transitions)
    # the refinement keeps about five int64 arrays the size of the column table
    limits.check_memory(transitions.shape[0] * len(first_byte) * 8 * 5,
                        f"minimising the {transitions.shape[0]:,}-state automaton")
    columns = np.ascontiguousarray(transitions[:, first_byte])
    live = live_states(columns, finals)
    limits.check()   # each step below is a few numpy passes over the table: ~30 ms on 300,000 states
    live[DEAD] = False
    columns = np.where(live[columns], columns, DEAD).astype(STATE_DTYPE)
    columns[~live] = DEAD
    limits.check()
    block = _minimise(columns, finals & live, live)
    return _renumber(columns, column_of_byte, finals & live, block, pattern)


# Tables up to this many states are made canonical with Python lists and
# dicts (:func:`_canonical_small`). The array path's fixed cost is ~320
# numpy-level calls (cProfile, numpy's own Python helpers included): on the
# 4-state table of (1|2|...|10) it took 0.19 ms warm and ~1.0 ms (190 page
# faults) in a freshly forked process, against 0.05 ms and 0.2 ms for the
# lists; `bench_build.py --only Handwritten:28` on mistral-sp32k went from
# 1.09-1.16x to 0.91-1.02x outlines-core's time. Warm, the lists are faster
# or about even up to about 40 states ([0-9]{30}: 0.47 ms against 1.4 ms;
# 13 keywords, 40 states: 0.36 against 0.32) and lose past ~100 (a 263-state
# JSON object: 8.5 ms against 2.7 ms): Moore's rounds are quadratic in a chain.
_SMALL_TABLE_STATES = 32


def _canonical_small(rows: list[list[int]], finals: list[bool], pattern: str) -> ByteDFA:
    """:func:`canonical_byte_dfa` of a small table given as lists: the same
    three steps, the same arrays.

    Minimisation is Moore's refinement as in the textbook (a state's
    signature is its block and its successors' blocks, rounds until the
    number of blocks stays put): at most one round per state, each over a
    few dozen distinct columns.
    """
    num_states = len(rows)
    # The distinct columns, in the order of their smallest byte.
    column_id: dict[tuple, int] = {}
    column_of_byte = [column_id.setdefault(column, len(column_id)) for column in zip(*rows)]
    successors = list(zip(*column_id))  # successors[state][k]: its target in column k
    # Trim: walk the edges backwards from the final states.
    predecessors: list[list[int]] = [[] for _ in range(num_states)]
    for state, targets in enumerate(successors):
        for target in set(targets):
            predecessors[target].append(state)
    live = [bool(final) for final in finals]
    stack = [state for state in range(num_states) if live[state]]
    while stack:
        for state in predecessors[stack.pop()]:
            if not live[state]:
                live[state] = True
                stack.append(state)
    live[DEAD] = False
    dead_row = (DEAD,) * len(column_id)
    successors = [tuple(target if live[target] else DEAD for target in targets) if live[state]
                  else dead_row for state, targets in enumerate(successors)]
    finals = [bool(final) and alive for final, alive in zip(finals, live)]
    # Minimise: the dead state's block (0) holds every state that is not live.
    block = [(2 if final else 1) if alive else 0 for final, alive in zip(finals, live)]
    count = len(set(block))
    while True:
        signature_id: dict[tuple, int] = {}
        refined = [signature_id.setdefault((block[state], *[block[t] for t in targets]),
                                           len(signature_id))
                   for state, targets in enumerate(successors)]
        if len(signature_id) == count:
            break
        block, count = refined, len(signature_id)
    # Renumber breadth-first from the initial state, columns in byte order.
    first_state: dict[int, int] = {}
    for state, state_block in enumerate(block):
        first_state.setdefault(state_block, state)
    number = {block[DEAD]: DEAD}
    order = []
    if block[INITIAL] not in number:
        number[block[INITIAL]] = INITIAL
        order.append(block[INITIAL])
    for state_block in order:  # grows while we iterate
        for target in successors[first_state[state_block]]:
            if block[target] not in number:
                number[block[target]] = len(number)
                order.append(block[target])
    new_table = np.zeros((INITIAL + len(order), 256), dtype=STATE_DTYPE)
    new_finals = np.zeros(INITIAL + len(order), dtype=bool)
    if order:
        quotient = [[number[block[target]] for target in successors[first_state[state_block]]]
                    for state_block in order]
        new_table[INITIAL:] = np.array(quotient, dtype=STATE_DTYPE)[:, column_of_byte]
        new_finals[INITIAL:] = [finals[first_state[state_block]] for state_block in order]
    new_table.flags.writeable = False
    new_finals.flags.writeable = False
    return ByteDFA(new_table, new_finals, pattern)


def _minimise(columns: np.ndarray, finals: np.ndarray, live: np.ndarray) -> np.ndarray:
    """The coarsest partition of the states that respects finality and the
    transitions; returns each state's block number (the dead state's block
    holds every state that cannot reach a final one).

    One algorithm, :func:`_refine`, whose hashed signatures are checked
    afterwards: every split it makes is real (different hashes mean
    different signatures), so its partition is never finer than the minimal
    one, and if it is a congruence (:func:`_is_congruence`) it is not
    coarser either. A hash collision (odds about 2**-64 per pair of
    signatures) can only leave a block unsplit, which the check sees; the
    refinement then runs again with other hash weights.
    """
    for seed in _HASH_SEEDS:
        block = _refine(columns, finals, live, _hash_weights(seed, columns.shape[1] + 1))
        if _is_congruence(columns, block, live):
            return block
    raise AssertionError(  # pragma: no cover - several 64-bit collisions in a row
        f"no congruence after {len(_HASH_SEEDS)} hashed refinements")


_HASH_SEEDS = (0x5EED, 1, 2, 3)


def _hash_weights(seed: int, size: int) -> np.ndarray:
    """Odd pseudo-random 64-bit weights of the signature hash (block, then each column)."""
    return hash_weights(seed, size)


def _refine(columns: np.ndarray, finals: np.ndarray, live: np.ndarray,
            weights: np.ndarray) -> np.ndarray:
    """Moore's refinement on hashed signatures, made incremental.

    Moore's refinement splits a block when its states' successors lie in
    different blocks, until nothing splits. Here it is made incremental the
    way Hopcroft's algorithm is: each live state carries a hash of its
    *signature* (its block and its successors' blocks), a block keeps its
    number for the largest part when it splits and only the smaller parts
    get new numbers, and a round looks only at the states whose hash moved,
    the renamed states and their predecessors. Schema patterns have long
    counted chains (``{0,256}``), so Moore needs hundreds of rounds; rehashing
    every state in each round took a minute on a 100k-state table.

    The hash is linear in the block numbers, so a renamed state updates its
    predecessors by one addition per edge. Equal hashes are trusted here;
    :func:`_minimise` checks the result.
    """
    num_states = columns.shape[0]
    columns = columns.astype(np.int64)
    block = np.where(live, 1 + finals.astype(np.int64), 0)
    live_ids = np.flatnonzero(live)
    if len(live_ids) == 0:
        return block
    with np.errstate(over="ignore"):
        signature_hash = (block.astype(np.uint64) * weights[0]
                          + (block[columns].astype(np.uint64) * weights[1:]).sum(
                              axis=1, dtype=np.uint64))
    # (the set-up is a few numpy passes over every edge: the deadline between them)
    limits.check()
    # Edges between live states, by target: whose hash a renamed state moves.
    edge_source, edge_column = np.nonzero(live[columns] & live[:, None])
    edge_target = columns[edge_source, edge_column]
    limits.check()
    by_target = np.argsort(edge_target, kind="stable")
    limits.check()
    edge_source = edge_source[by_target]
    edge_weight = weights[1:][edge_column[by_target]]
    edge_starts = np.searchsorted(edge_target[by_target], np.arange(num_states + 1))
    del edge_column, edge_target, by_target

    capacity = num_states + 3
    block_size = np.bincount(block[live_ids], minlength=capacity).astype(np.int64)
    # The hash every member of a block holds, except those being looked at;
    # no value at first, since every live state is looked at in round one.
    block_hash = np.zeros(capacity, dtype=np.uint64)
    next_block = 3
    looked_at = np.zeros(num_states, dtype=bool)
    candidates = live_ids
    while len(candidates):
        limits.check()  # a round takes at most a few tens of milliseconds on 400k states
        looked_at[candidates] = True
        cand_block = block[candidates]
        touched, cand_count = np.unique(cand_block, return_counts=True)
        rest_count = block_size[touched] - cand_count
        has_rest = rest_count > 0
        # One record per candidate, one per block for its other members.
        rec_block = np.concatenate([cand_block, touched[has_rest]])
        rec_hash = np.concatenate([signature_hash[candidates], block_hash[touched[has_rest]]])
        rec_count = np.concatenate([np.ones(len(candidates), np.int64), rest_count[has_rest]])
        order = np.lexsort((rec_hash, rec_block))
        rec_block, rec_hash, rec_count = rec_block[order], rec_hash[order], rec_count[order]
        starts_group = np.ones(len(order), dtype=bool)
        starts_group[1:] = (rec_block[1:] != rec_block[:-1]) | (rec_hash[1:] != rec_hash[:-1])
        group_of_record = np.cumsum(starts_group) - 1
        group_block = rec_block[starts_group]
        group_hash = rec_hash[starts_group]
        group_size = np.bincount(group_of_record, weights=rec_count).astype(np.int64)
        # The largest part of each block keeps its number.
        by_size = np.lexsort((-group_size, group_block))
        keeps = np.zeros(len(group_block), dtype=bool)
        first_of_block = np.ones(len(by_size), dtype=bool)
        first_of_block[1:] = group_block[by_size][1:] != group_block[by_size][:-1]
        keeps[by_size[first_of_block]] = True
        group_id = group_block.copy()
        movers = np.flatnonzero(~keeps)
        group_id[movers] = next_block + np.arange(len(movers))
        next_block += len(movers)
        block_hash[group_id] = group_hash
        block_size[group_id] = group_size  # kept groups: the block's new size

        record_group = np.empty(len(order), dtype=np.int64)
        record_group[order] = group_of_record
        new_block = group_id[record_group[:len(candidates)]]
        renamed = candidates[new_block != cand_block]
        renamed_to = new_block[new_block != cand_block]
        # A block's non-candidate members move when their part was not the largest.
        rest_group = record_group[len(candidates):]
        rest_moves = ~keeps[rest_group]
        if rest_moves.any():
            destination = np.zeros(capacity, dtype=np.int64)
            destination[touched[has_rest][rest_moves]] = group_id[rest_group[rest_moves]]
            moving = np.flatnonzero(live & ~looked_at & (destination[block] > 0))
            renamed = np.concatenate([renamed, moving])
            renamed_to = np.concatenate([renamed_to, destination[block[moving]]])
        looked_at[candidates] = False
        if len(renamed) == 0:
            break
        with np.errstate(over="ignore"):
            delta = renamed_to.astype(np.uint64) - block[renamed].astype(np.uint64)
            block[renamed] = renamed_to
            signature_hash[renamed] += delta * weights[0]
            edges = concatenated_ranges(edge_starts[renamed], edge_starts[renamed + 1])
            moved_delta = np.repeat(delta, edge_starts[renamed + 1] - edge_starts[renamed])
            np.add.at(signature_hash, edge_source[edges], edge_weight[edges] * moved_delta)
        candidates = distinct(np.concatenate([renamed, edge_source[edges]]))
    return block


def _is_congruence(columns: np.ndarray, block: np.ndarray, live: np.ndarray) -> bool:
    """Whether every live state's successors lie in the same blocks as those
    of the first state of its block."""
    states = np.flatnonzero(live)
    _, first = np.unique(block[states], return_index=True)
    representative = np.zeros(int(block.max()) + 1, dtype=np.int64)
    representative[block[states[first]]] = states[first]
    return bool(np.array_equal(block[columns[states]],
                               block[columns[representative[block[states]]]]))


def _renumber(columns, column_of_byte, finals, block, pattern) -> ByteDFA:
    """Breadth-first numbering of the minimal DFA: dead 0, initial 1, bytes
    in increasing order.

    The walk runs on the distinct columns, which gives the byte order's
    numbering: the columns are sorted by their smallest byte, so the first
    column leading to a state holds the first byte leading there.
    """
    _, compact = np.unique(block, return_inverse=True)  # blocks as 0..B-1
    compact = compact.ravel()
    num_blocks = int(compact.max()) + 1
    order_states = np.argsort(compact, kind="stable")
    first_state = order_states[np.searchsorted(compact[order_states], np.arange(num_blocks))]
    quotient = compact[columns[first_state]]  # int[B, columns]: block to block
    dead = np.zeros(num_blocks, dtype=bool)
    dead[compact[DEAD]] = True
    roots = [] if dead[compact[INITIAL]] else [compact[INITIAL]]
    width = quotient.shape[1]
    in_order = breadth_first(np.arange(num_blocks + 1) * width, quotient.ravel(), np.array(roots),
                             closed=dead)  # the blocks that become states 1, 2, ...
    number = np.zeros(num_blocks, dtype=np.int64)  # the dead block: state 0
    number[in_order] = INITIAL + np.arange(len(in_order))
    count = INITIAL + len(in_order)
    new_table = np.zeros((count, 256), dtype=STATE_DTYPE)
    new_finals = np.zeros(count, dtype=bool)
    new_table[1:] = number[quotient[in_order]][:, column_of_byte]
    new_finals[1:] = finals[first_state[in_order]]
    new_table.flags.writeable = False
    new_finals.flags.writeable = False
    return ByteDFA(new_table, new_finals, pattern)
