"""From raw token transitions to the canonical, compressed index arrays.

Both builds (the brute-force reference and the fast signature walk) end the
same way: a list of edges ``(dfa state, token group, dfa state)`` found from
the states reachable from the initial one, where a *group* is a set of tokens
the builder knows to behave alike (one token each for the reference, one
byte-class signature each for the fast build). This module turns such edges
into :class:`IndexArrays`, and does it canonically, so that any two builds of
the same pattern and vocabulary give identical arrays:

1. States from which no sequence of tokens reaches a final state are dropped
   with every edge into them: the vocabulary could never finish a match from
   there. If that leaves nothing, the vocabulary cannot express the pattern.
2. Groups whose columns (their edges from every state) are equal are merged,
   groups with no edge left are dropped (their tokens are never allowed), and
   groups are numbered by their smallest token id.
3. States are numbered breadth-first from the initial state (0), following
   edges in group order.
4. Each state's allowed tokens become a bitset; identical bitsets are stored
   once.

A build with few edges (a small pattern's) follows the same steps with
Python lists (:func:`_assemble_small`): the arrays' fixed cost was most of
its assembly.
"""

from __future__ import annotations

import mmap
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..analysis.dfa import ByteDFA
from ..analysis.errors import VocabularyCoverageError
from ..analysis.graph import (breadth_first, concatenated_ranges, distinct,
                              distinct_successor_lists, reachable)
from ..runtime.arrays import MASK_WORD, IndexArrays
from .fastforward import ForcedRuns, PendingForcedTokens


@dataclass(frozen=True, eq=False)
class RawEdges:
    """Token transitions as found by a builder, in the byte DFA's state ids."""

    source: np.ndarray      # int32[E]
    group: np.ndarray       # int32[E]
    target: np.ndarray      # int32[E]
    # The tokens with a group (increasing ids) and the builder's group of each;
    # the others are never allowed. Sparse, not an array as long as the
    # vocabulary: a small pattern groups a few hundred tokens.
    grouped: np.ndarray     # int64[G]
    grouped_group: np.ndarray  # int32[G]


def assemble(dfa: ByteDFA, raw: RawEdges, vocabulary) -> IndexArrays:
    """Canonical :class:`IndexArrays` from a builder's raw edges."""
    arrays, forced_later = assemble_without_forced(dfa, raw, vocabulary)
    return forced_later(arrays)


def assemble_without_forced(dfa: ByteDFA, raw: RawEdges,
                            vocabulary) -> tuple[IndexArrays, PendingForcedTokens]:
    """:func:`assemble`'s arrays with an empty fast-forward table, and what
    fills it in when called with them (the byte DFA is not kept for it)."""
    if len(raw.source) <= _SMALL_EDGES and len(raw.grouped) <= _SMALL_GROUPED:
        return _assemble_small(dfa, raw, vocabulary)
    source, group, target = raw.source, raw.group, raw.target
    num_states = int(max(source.max(initial=0), target.max(initial=0), dfa.initial)) + 1
    # Both searches run on the distinct state pairs, found once: a few per
    # state even when the token edges number millions.
    pairs = distinct(source.astype(np.int64) * num_states + target)
    pair_source, pair_target = pairs // num_states, pairs % num_states
    keep = reachable(pair_target, pair_source, dfa.finals[:num_states], num_states)
    if not keep[dfa.initial]:
        raise _coverage_error(dfa, raw)
    useful_pair = keep[pair_source] & keep[pair_target]
    initial = np.zeros(num_states, dtype=bool)
    initial[dfa.initial] = True
    reached = reachable(pair_source[useful_pair], pair_target[useful_pair], initial, num_states)
    useful = keep[target] & keep[source] & reached[source]
    source, group, target = source[useful], group[useful], target[useful]

    token_group, grouped, source, group, target = _canonical_groups(
        raw.grouped, raw.grouped_group, vocabulary.size, source, group, target)
    states, source, group, target = _breadth_first_numbering(source, group, target, dfa.initial)
    num_states = len(states)
    offsets = np.searchsorted(source, np.arange(num_states + 1)).astype(np.int64)
    finals = dfa.finals[states].copy()
    eos = np.asarray(sorted(set(int(t) for t in vocabulary.eos_token_ids)), dtype=np.int32)
    mask_id, masks = _unique_masks(offsets, group, finals, token_group, grouped, eos,
                                   vocabulary.size)
    no_forced = (np.zeros(num_states + 1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    arrays = IndexArrays(token_group,
                         offsets, group.astype(np.int32),
                         target.astype(np.int32), finals, mask_id, masks, eos, *no_forced)
    return _read_only(arrays), _forced_later(dfa, states, vocabulary)


def _forced_later(dfa: ByteDFA, states, vocabulary) -> PendingForcedTokens:
    """Fast-forward tokens are found by walking the arrays just made, when
    first wanted (:class:`PendingForcedTokens`)."""
    return PendingForcedTokens(ForcedRuns.of(dfa, np.asarray(states)), vocabulary)


def _read_only(arrays: IndexArrays) -> IndexArrays:
    for array in arrays.as_dict().values():
        array.flags.writeable = False
    return arrays


def _order_by(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` for non-negative ints, as one sort of a
    combined key (half the work of two stable passes on millions of edges)."""
    if len(major) == 0:
        return np.zeros(0, dtype=np.int64)
    span = int(minor.max()) + 1
    return np.argsort(major.astype(np.int64) * span + minor, kind="stable")


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads pairs of small ints over 64 bits."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_index=True, return_inverse=True)[1:]``
    for a 2-D int64 array: the same rows in the same (lexicographic) order,
    found with one stable lexsort. ``np.unique`` with ``axis`` goes through a
    structured dtype, 40-50 us per call even on a few rows, a tenth of a tiny
    pattern's whole assembly."""
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(key.T[::-1])
    ordered = key[order]
    starts_run = np.ones(len(key), dtype=bool)
    starts_run[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[order] = np.cumsum(starts_run) - 1
    return order[starts_run], inverse


def group_dtype(num_groups: int) -> np.dtype:
    """The narrowest signed integer holding group ids and -1: the per-token
    group table is the one array as long as the vocabulary, and most indexes
    have a few hundred groups, so int16 halves it (int8 quarters it)."""
    for dtype in (np.int8, np.int16):
        if num_groups <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int32)


def _canonical_groups(grouped, grouped_group, vocab_size, source, group, target):
    """Merge groups with equal columns and number them by smallest token.

    ``grouped`` are the tokens with a group (increasing), ``grouped_group``
    their groups. Returns the new token -> group array, the tokens that have
    a group in it (increasing), and the edges of the surviving groups,
    relabelled.
    """
    with np.errstate(over="ignore"):
        order = _order_by(group, source)
        source, group, target = source[order], group[order], target[order]
        num_old = int(max(grouped_group.max(initial=-1), group.max(initial=-1))) + 1
        starts = np.searchsorted(group, np.arange(num_old + 1))
        counts = np.diff(starts)
        pair_hash = _mix64((source.astype(np.uint64) << np.uint64(32)) | target.astype(np.uint64))
        column_hash = np.zeros(num_old, dtype=np.uint64)
        np.add.at(column_hash, group, pair_hash)
    has_edges = counts > 0
    key = np.stack([column_hash.view(np.int64), counts], axis=1)
    first, klass = unique_rows(key)
    representative = first[klass]
    # Hash equality is only a candidate: check column by column, aligned.
    position = np.arange(len(group)) - starts[group]
    partner = starts[representative[group]] + position
    same = (source[partner] == source) & (target[partner] == target)
    bad_groups = distinct(group[~same])
    if len(bad_groups):  # a hash collision: keep those groups apart
        representative[bad_groups] = bad_groups
    representative[~has_edges] = -1

    # Number the surviving representatives by the smallest token they cover.
    # Only the tokens with a group are read: a small pattern's few hundred,
    # not the whole vocabulary twice over.
    token_rep = representative[grouped_group]
    alive = token_rep >= 0
    reps_in_token_order, first = np.unique(token_rep[alive], return_index=True)
    first_token = grouped[alive][first]
    rank_order = np.argsort(first_token, kind="stable")
    new_id = np.full(num_old, -1, dtype=np.int64)
    new_id[reps_in_token_order[rank_order]] = np.arange(len(rank_order))
    # Made in the index's own dtype (a few hundred groups: int8 or int16), so
    # the array as long as the vocabulary is written once.
    new_token_group = np.full(vocab_size, -1, dtype=group_dtype(len(rank_order)))
    new_token_group[grouped] = np.append(new_id, -1)[token_rep]
    still_grouped = grouped[new_token_group[grouped] >= 0]

    keep = (representative[group] == group) & (new_id[group] >= 0)
    return new_token_group, still_grouped, source[keep], new_id[group[keep]], target[keep]


def _breadth_first_numbering(source, group, target, initial):
    """Number states 0.. breadth-first from ``initial``; edges in group order
    (each state's edges sorted by group are its successor list)."""
    if len(source) == 0:
        return np.array([initial]), source, group, target
    num_states = int(max(source.max(), target.max(), initial)) + 1
    order = _order_by(source, group)
    source, group, target = source[order], group[order], target[order]
    starts = np.searchsorted(source, np.arange(num_states + 1))
    states = breadth_first(starts, target, np.array([initial]))
    number = np.full(num_states, -1, dtype=np.int64)
    number[states] = np.arange(len(states))
    # Each state's edges, moved as blocks into the new state order, come out
    # sorted by (new state, group) without sorting again.
    block_order = concatenated_ranges(starts[states], starts[states + 1])
    return (states, number[source[block_order]], group[block_order],
            number[target[block_order]])


_MASK_BATCH = 32  # rows made at once: 32 x a 250k vocabulary of booleans is 8 MB
_SPARSE_MASK_FRACTION = 4  # masks set word by word when fewer tokens than this part have a group


def _unique_masks(offsets, group, finals, token_group, grouped, eos, vocab_size):
    """One bitset per distinct allowed set; ``mask_id`` maps states to rows.
    ``grouped``: the tokens with a group (increasing)."""
    num_states = len(finals)
    num_words = (vocab_size + 31) // 32
    with np.errstate(over="ignore"):
        state_of_edge = np.repeat(np.arange(num_states), np.diff(offsets))
        edge_hash = _mix64(group.astype(np.uint64))
        state_hash = np.zeros(num_states, dtype=np.uint64)
        np.add.at(state_hash, state_of_edge, edge_hash)
    key = np.stack([state_hash.view(np.int64), np.diff(offsets), finals.astype(np.int64)], axis=1)
    first, mask_id = unique_rows(key)
    # A hash collision would give two states one row: compare each state's
    # groups with its row's first state's, edge for edge (equal counts are
    # part of the key, so the ranges align).
    edge_number = np.arange(len(group))
    partner = offsets[first[mask_id]][state_of_edge] + (edge_number - offsets[state_of_edge])
    if not np.array_equal(group[partner], group):
        raise AssertionError("mask hash collision")  # pragma: no cover - 2**-64
    num_groups = int(token_group[grouped].max(initial=-1)) + 1
    row_degree = np.diff(offsets)[first]
    if (num_groups + 1) * num_words <= _GROUP_BITS_MAX_WORDS and \
            (num_groups + 1 + int(row_degree.sum())) * num_words < len(first) * _masks_width(grouped, vocab_size):
        return mask_id.astype(np.int32), _masks_from_group_bits(
            offsets, group, first, row_degree, finals, token_group, grouped, eos, num_groups, num_words)
    # Only tokens with a group can be allowed; a small pattern has a few
    # hundred of them, and reading just those (not a column per token of the
    # vocabulary) took the masks of (a|b)*c on Qwen2.5 from ~1.5 ms to ~0.2 ms.
    sparse = len(grouped) * _SPARSE_MASK_FRACTION < vocab_size
    if sparse:
        column = token_group[grouped].astype(np.int64) + 1
        # Only the words holding a grouped token are made: the rows of
        # booleans span those words, not the vocabulary (32 kB a row on a
        # 32k vocabulary, each page faulted in by a freshly forked process).
        used_words = distinct(grouped >> 5)
        position = np.searchsorted(used_words, grouped >> 5) * 32 + (grouped & 31)
        width = len(used_words) * 32
    else:
        column = token_group.astype(np.int64) + 1  # column 0 of a row's groups is "no group"
        width = num_words * 32
    masks = _zeroed_masks(len(first), num_words)
    for low in range(0, len(first), _MASK_BATCH):
        rows = first[low:low + _MASK_BATCH]
        edges = concatenated_ranges(offsets[rows], offsets[rows + 1])
        allowed_group = np.zeros((len(rows), num_groups + 1), dtype=bool)
        allowed_group[np.repeat(np.arange(len(rows)), np.diff(offsets)[rows]), group[edges] + 1] = True
        allowed = np.zeros((len(rows), width), dtype=bool)
        part = masks[low:low + len(rows)]
        if sparse:
            allowed[:, position] = allowed_group[:, column]
            part[:, used_words] = np.packbits(allowed, axis=1, bitorder="little").view(MASK_WORD)
            final_rows = np.flatnonzero(finals[rows])
            for token in eos.tolist():
                part[final_rows, token >> 5] |= MASK_WORD.type(1 << (token & 31))
        else:
            allowed[:, :vocab_size] = allowed_group[:, column]
            allowed[np.ix_(np.flatnonzero(finals[rows]), eos)] = True
            part[:] = np.packbits(allowed, axis=1, bitorder="little").view(MASK_WORD)
    return mask_id.astype(np.int32), masks


# Mask tables past this size are zeroed memory of ordinary 4 kB pages (below).
_SMALL_PAGES_FROM = 32 << 20


def _zeroed_masks(rows: int, words: int) -> np.ndarray:
    """``np.zeros((rows, words), MASK_WORD)``; past ``_SMALL_PAGES_FROM``
    bytes, an anonymous mapping of 4 kB pages rather than numpy's memory,
    which numpy asks the kernel to back with 2 MB pages. Those are 5x
    cheaper to fault in when the kernel has free 2 MB blocks, and far
    dearer when it must first compact memory to make them (defrag on
    madvise): with a 60,000-value enum's 128 MB of masks (qwen2.5, 6,925
    rows), this function took 77-79 ms in a forked child that found the 2 MB
    blocks its sibling had freed and 346 ms in the first child of a fresh
    process; in 4 kB pages 126-137 ms in every child, and the enum's eager
    build in bench_literals.py 649-712 ms against 818-1,043 ms."""
    size = rows * words * MASK_WORD.itemsize
    if size < _SMALL_PAGES_FROM or not hasattr(mmap, "MAP_PRIVATE"):
        return np.zeros((rows, words), dtype=MASK_WORD)
    block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)   # anonymous: zero pages, no advice
    return np.frombuffer(block, dtype=MASK_WORD).reshape(rows, words)


def _masks_width(grouped, vocab_size) -> int:
    """The width of the rows of booleans :func:`_unique_masks` makes: the
    words holding a grouped token when they are few, else the vocabulary."""
    if len(grouped) * _SPARSE_MASK_FRACTION < vocab_size:
        return len(distinct(grouped >> 5)) * 32
    return (vocab_size + 31) // 32 * 32


# Words of group bitsets gathered at once by _masks_from_group_bits (256 KiB),
# and at most this many words of bitsets (16 MiB: 880 groups on a 151k vocabulary).
_GROUP_BITS_BATCH_WORDS = 1 << 16
_GROUP_BITS_MAX_WORDS = 1 << 22


def _masks_from_group_bits(offsets, group, first, row_degree, finals, token_group, grouped, eos,
                           num_groups, num_words):
    """The rows of :func:`_unique_masks` as the OR of their groups' bitsets,
    each group's made once: what it does when the bitsets of the groups and
    of the rows' edges, gathered, are fewer words than its rows of booleans
    have bytes. A gathered word costs a copy where a boolean costs an
    indexed read: on mistral-sp32k, JME:0 (52 rows, 117 groups, 422 edges
    from the rows, 31.8k grouped tokens) took 4.2 ms the boolean way, 0.7
    ms this way, and a 20-character JSON string (40 rows, 1,104 edges) 3.6
    against 2.6 ms (timeit, machine at load ~5)."""
    bits = np.zeros((num_groups + 1) * num_words, dtype=MASK_WORD)  # row 0: no group, empty
    # A token's bit is in one word of its group's row, and no two tokens share
    # a bit: adding is or-ing, and np.add.at on equal types is numpy's fast path.
    np.add.at(bits, (token_group[grouped].astype(np.int64) + 1) * num_words + (grouped >> 5),
              np.left_shift(MASK_WORD.type(1), (grouped & 31).astype(MASK_WORD)))
    bits = bits.reshape(num_groups + 1, num_words)
    masks = np.zeros((len(first), num_words), dtype=MASK_WORD)
    rows = np.flatnonzero(row_degree)  # a row without edges allows only EOS, if any
    ends = np.cumsum(row_degree[rows])
    batch = max(1, _GROUP_BITS_BATCH_WORDS // num_words)
    # One buffer for every batch's gathered bitsets: a freshly forked process
    # faults in each new page, and a new array per batch is new pages.
    gathered = np.empty((min(max(batch, int(row_degree.max(initial=0))), int(ends[-1]) if len(ends) else 0),
                         num_words), dtype=MASK_WORD)
    low = 0
    while low < len(rows):
        high = max(low + 1, int(np.searchsorted(ends, (ends[low - 1] if low else 0) + batch, "right")))
        part = rows[low:high]
        edges = concatenated_ranges(offsets[first[part]], offsets[first[part] + 1])
        starts = np.cumsum(row_degree[part]) - row_degree[part]
        np.take(bits, group[edges] + 1, axis=0, out=gathered[:len(edges)])
        masks[part] = np.bitwise_or.reduceat(gathered[:len(edges)], starts, axis=0)
        low = high
    final_rows = np.flatnonzero(finals[first])
    for token in eos.tolist():
        masks[final_rows, token >> 5] |= MASK_WORD.type(1 << (token & 31))
    return masks


# --- few edges: the same assembly with Python lists --------------------------
#
# The steps above cost ~340 numpy-level calls whatever the size (cProfile). On
# Handwritten:28 of JSONSchemaBench, (1|2|...|10) on the 32k mistral-sp32k
# vocabulary (20 raw edges), they took ~0.9 ms and ~150 page faults of a
# ~2.5 ms first build in a freshly forked process (each numpy function's first
# use there copies the pages it touches). Up to _SMALL_EDGES raw edges the
# same definition is followed with lists, sets and dicts, and each array is
# made once at the end (up to _SMALL_GROUPED tokens with a group too).
# tests/test_build.py holds the two to identical arrays.

# The lists' cost grows with the edges and with the tokens set in the masks;
# the arrays' is ~0.25 ms warm whatever the size. Warm on mistral-sp32k: 20
# edges / 20 tokens 0.07 ms against 0.22; 142 / 36 ([0-9]{3}-[0-9]{4}) 0.15
# against 0.27; 600 / 20 ([0-9]{30}) 0.34 against 0.28; 153 / 809 (13
# keywords) 0.76 against 0.76; 66 / 7644 (email) 4.9 ms against 0.7.
_SMALL_EDGES = 256
_SMALL_GROUPED = 256
_MASK64 = (1 << 64) - 1


def _mix64_int(value: int) -> int:
    """:func:`_mix64` of one non-negative Python int."""
    z = (value + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _assemble_small(dfa: ByteDFA, raw: RawEdges, vocabulary) -> tuple[IndexArrays, PendingForcedTokens]:
    """:func:`assemble` with lists, sets and dicts: the same four steps, the same arrays."""
    source, group, target = raw.source.tolist(), raw.group.tolist(), raw.target.tolist()
    initial = dfa.initial
    is_final = dfa.finals.tolist()

    # 1. Trim: backwards from the final states, then forwards from the initial one.
    forward: dict[int, list[int]] = {}
    backward: dict[int, list[int]] = {}
    for s, t in set(zip(source, target)):
        forward.setdefault(s, []).append(t)
        backward.setdefault(t, []).append(s)
    keep = {s for s in forward.keys() | backward.keys() | {initial} if is_final[s]}
    stack = list(keep)
    while stack:
        for s in backward.get(stack.pop(), ()):
            if s not in keep:
                keep.add(s)
                stack.append(s)
    if initial not in keep:
        raise _coverage_error(dfa, raw)
    reached = {initial}
    stack = [initial]
    while stack:
        for t in forward.get(stack.pop(), ()):
            if t in keep and t not in reached:
                reached.add(t)
                stack.append(t)

    # 2. Groups: each column sorted by source (a stable sort, as the arrays' is).
    order = sorted((i for i in range(len(source)) if source[i] in reached and target[i] in keep),
                   key=lambda i: (group[i], source[i]))
    columns: dict[int, list[tuple[int, int]]] = {}
    for i in order:
        columns.setdefault(group[i], []).append((source[i], target[i]))
    first_with_column: dict[tuple, int] = {}
    representative = {g: first_with_column.setdefault(tuple(column), g)
                      for g, column in columns.items()}  # groups in increasing order
    new_id: dict[int, int] = {}
    token_ids, token_groups = [], []
    for token, old in zip(raw.grouped.tolist(), raw.grouped_group.tolist()):
        rep = representative.get(old)
        if rep is not None:
            token_groups.append(new_id.setdefault(rep, len(new_id)))  # by smallest token
            token_ids.append(token)
    token_group = np.full(vocabulary.size, -1, dtype=group_dtype(len(new_id)))
    token_group[token_ids] = token_groups

    # 3. States breadth-first; each state's edges by group (stable, as above).
    out: dict[int, list[tuple[int, int]]] = {}
    for i in order:
        g = group[i]
        if representative[g] == g and g in new_id:
            out.setdefault(source[i], []).append((new_id[g], target[i]))
    for edges in out.values():
        edges.sort(key=lambda edge: edge[0])
    states = [initial]
    number = {initial: 0}
    for s in states:  # grows while we iterate
        for _, t in out.get(s, ()):
            if t not in number:
                number[t] = len(states)
                states.append(t)
    offsets = [0]
    edge_group: list[int] = []
    edge_next: list[int] = []
    for s in states:
        for g, t in out.get(s, ()):
            edge_group.append(g)
            edge_next.append(number[t])
        offsets.append(len(edge_group))
    finals = [is_final[s] for s in states]

    # 4. One row per distinct allowed set, rows in the order of their keys
    # (signed 64-bit hash of the groups, number of edges, final).
    keys = []
    for index, final in enumerate(finals):
        groups = edge_group[offsets[index]:offsets[index + 1]]
        hashed = sum(_mix64_int(g) for g in groups) & _MASK64
        keys.append((hashed - (1 << 64) if hashed >> 63 else hashed, len(groups), int(final)))
    row_of_key = {key: row for row, key in enumerate(sorted(set(keys)))}
    mask_id = [row_of_key[key] for key in keys]
    first_state = {}
    for index, row in enumerate(mask_id):
        first_state.setdefault(row, index)
    for index, row in enumerate(mask_id):
        first = first_state[row]
        if edge_group[offsets[index]:offsets[index + 1]] != edge_group[offsets[first]:offsets[first + 1]]:
            raise AssertionError("mask hash collision")  # pragma: no cover - 2**-64
    tokens_of_group: dict[int, list[int]] = {}
    for token, g in zip(token_ids, token_groups):
        tokens_of_group.setdefault(g, []).append(token)
    eos = sorted(set(int(t) for t in vocabulary.eos_token_ids))
    cell_rows, cell_words, cell_bits = [], [], []
    for row in range(len(row_of_key)):
        first = first_state[row]
        words: dict[int, int] = {}
        allowed = [t for g in edge_group[offsets[first]:offsets[first + 1]] for t in tokens_of_group[g]]
        if finals[first]:
            allowed += eos
        for token in allowed:
            words[token >> 5] = words.get(token >> 5, 0) | (1 << (token & 31))
        cell_rows += [row] * len(words)
        cell_words += words.keys()
        cell_bits += words.values()
    masks = np.zeros((len(row_of_key), (vocabulary.size + 31) // 32), dtype=MASK_WORD)
    masks[cell_rows, cell_words] = cell_bits

    arrays = IndexArrays(token_group, np.array(offsets, dtype=np.int64),
                         np.array(edge_group, dtype=np.int32), np.array(edge_next, dtype=np.int32),
                         np.array(finals, dtype=bool), np.array(mask_id, dtype=np.int32), masks,
                         np.array(eos, dtype=np.int32), np.zeros(len(states) + 1, dtype=np.int64),
                         np.zeros(0, dtype=np.int32))
    return _read_only(arrays), _forced_later(dfa, states, vocabulary)


def _coverage_error(dfa: ByteDFA, raw: RawEdges) -> VocabularyCoverageError:
    """Name the first state where the vocabulary leaves generation stuck.

    Called only when the initial state cannot reach a final one through
    tokens, so every state reachable from it is just as hopeless; the most
    useful one to name is the first (breadth-first) with no token at all.
    """
    num_states = int(max(raw.source.max(initial=0), raw.target.max(initial=0), dfa.initial)) + 1
    starts, successors = distinct_successor_lists(raw.source, raw.target, num_states)
    order = breadth_first(starts, successors, np.array([dfa.initial]))  # successors by number
    stuck = order[starts[order + 1] == starts[order]].tolist()
    state = stuck[0] if stuck else dfa.initial
    needed = bytes(np.flatnonzero(dfa.transitions[state] != 0).tolist())
    return VocabularyCoverageError(
        f"the vocabulary cannot express the pattern {dfa.pattern!r}: at byte-DFA state {state} "
        f"(after {_shortest_bytes_to(dfa, state)!r}) it needs one of the bytes "
        f"{_show_bytes(needed)}, and no token spelling them leads on to a match",
        state=state, needed_bytes=needed)


def _shortest_bytes_to(dfa: ByteDFA, goal: int) -> bytes:
    """The shortest byte string leading from the initial state to ``goal``."""
    path = {dfa.initial: b""}
    queue = deque([dfa.initial])
    while queue:
        state = queue.popleft()
        if state == goal:
            return path[state]
        for byte in range(256):
            nxt = int(dfa.transitions[state, byte])
            if nxt and nxt not in path:
                path[nxt] = path[state] + bytes([byte])
                queue.append(nxt)
    return b""


def _show_bytes(data: bytes, limit: int = 12) -> str:
    shown = ", ".join(repr(bytes([b])) for b in data[:limit])
    return shown + (f" and {len(data) - limit} more" if len(data) > limit else "")
