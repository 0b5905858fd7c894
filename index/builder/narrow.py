"""The narrow-state walk: tokens walked byte by byte from states with few ways on.

Literals (JSON keys, punctuation) and choices among a few keys leave only a
handful of bytes live in each state. Walking them through byte *classes*
would split the classes that the rest of the automaton shares (every key
letter its own class), so the fast build (:mod:`tokendfa.builder.fast`) walks
these *narrow* states (:func:`tokendfa.analysis.literals.narrow_states`)
exactly instead, against the trie of the vocabulary's spellings
(:class:`TokenTrie`): every walk takes a step a round, a prefix that dies
discards its whole subtree of tokens at once, and a walk that leaves the
narrow states finishes its subtree with :func:`exact_walk`, vectorised.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import numpy as np

from ..analysis import limits
from ..analysis.dfa import DEAD, ByteDFA
from ..analysis.graph import concatenated_ranges
from ..analysis.literal_sets import prefix_trie
from ..analysis.native import COMPILED_WALK, native_module
from ..vocab.vocabulary import Vocabulary

# The compiled walk (index/lazy/_cwalk.c, the lazy engine's extension, whose
# walk_table serves this build; see tokendfa.analysis.native).
_cwalk = native_module(COMPILED_WALK)


def exact_walk(transitions: np.ndarray, vocabulary: Vocabulary,
               states: np.ndarray, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Walk the bytes of ``tokens[i]`` from position ``offsets[i]`` on, from
    ``states[i]``, through the full byte table; returns each end state (0 if
    the walk dies). Compiled where ``_cwalk`` is built (token by token: a
    74-character schema's build on a 32k vocabulary spent 14 of its 35 ms
    in the numpy walk's levels); else vectorised over the pairs, a byte a
    level, dead pairs dropping out at once."""
    if _cwalk is not None:
        spellings, spelling_offsets = _spellings(vocabulary)
        ends = np.empty(len(tokens), dtype=np.int32)
        _cwalk.walk_table(np.ascontiguousarray(transitions, dtype=np.int32), spellings, spelling_offsets,
                          np.ascontiguousarray(tokens, dtype=np.int64), np.ascontiguousarray(states, dtype=np.int64),
                          np.ascontiguousarray(offsets, dtype=np.int64), ends)
        return ends
    matrix, lengths = vocabulary.byte_matrix()
    current = states.astype(np.int32)
    position = offsets.astype(np.int64)
    ends = np.zeros(len(current), dtype=np.int32)
    active = np.arange(len(current))
    while len(active):
        finished = position[active] >= lengths[tokens[active]]
        done = active[finished]
        ends[done] = current[done]
        active = active[~finished]
        if not len(active):
            break
        current[active] = transitions[current[active], matrix[tokens[active], position[active]]]
        position[active] += 1
        active = active[current[active] != DEAD]
    return ends


def _spellings(vocabulary: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Every token's bytes one after another (``uint8``) and where each
    starts (``int64[V + 1]``), computed once per vocabulary."""
    def make(vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
        spellings = np.frombuffer(b"".join(data or b"" for data in vocab.tokens), dtype=np.uint8)
        offsets = np.zeros(vocab.size + 1, dtype=np.int64)
        np.cumsum(vocab.byte_matrix()[1], out=offsets[1:])
        return spellings, offsets

    return vocabulary.derived("concatenated-spellings", make)


class WalkTooLong(Exception):
    """:func:`narrow_edges` went past the steps it was given."""


# At most this many narrow states are walked one at a time in Python
# (_narrow_edges_small): a round of the array walk costs ~50 us whatever its
# size. Measured on qwen2.5: a JSON key's 25 narrow states 0.15-0.8 ms one
# at a time, 1.1 ms in rounds; a five-property schema's 904, 37-41 ms and
# 22-24 ms.
SMALL_NARROW = 64


class TokenTrie(NamedTuple):
    """The vocabulary's spellings as a trie over their sorted order
    (:func:`tokendfa.analysis.literal_sets.prefix_trie`): the child of node
    ``v`` by byte ``b`` is ``child[k]`` where ``key[k] == v * 256 + b``;
    the tokens spelled exactly by ``v`` are positions ``exact_lo[v]:exact_hi[v]``
    of :meth:`Vocabulary.sorted_spellings`, and those that are longer and
    start with its prefix ``exact_hi[v]:below_hi[v]``."""

    key: np.ndarray       # int64[E], increasing
    child: np.ndarray     # int64[E]
    exact_lo: np.ndarray  # int64[N]
    exact_hi: np.ndarray  # int64[N]
    below_hi: np.ndarray  # int64[N]


def token_trie(vocabulary: Vocabulary) -> TokenTrie:
    """The vocabulary's :class:`TokenTrie`, made once (~0.1 s on qwen2.5's
    976k bytes of spellings, 0.5M nodes)."""
    def make(vocab: Vocabulary) -> TokenTrie:
        spellings, _ = vocab.sorted_spellings()
        trie = prefix_trie(spellings)
        num_nodes = len(trie.parent)
        key = trie.parent[1:] * 256 + trie.label[1:]
        order = np.argsort(key, kind="stable")
        # nodes are numbered in pre-order, so node v's subtree is v .. v + size - 1
        size = np.ones(num_nodes, dtype=np.int64)
        levels = np.searchsorted(trie.depth[trie.by_depth], np.arange(int(trie.depth.max()) + 2))
        for depth in range(len(levels) - 2, 0, -1):
            nodes = trie.by_depth[levels[depth]:levels[depth + 1]]
            np.add.at(size, trie.parent[nodes], size[nodes])
        nodes = np.arange(num_nodes)
        return TokenTrie(key[order], order + 1, np.searchsorted(trie.end, nodes, "left"),
                         np.searchsorted(trie.end, nodes, "right"),
                         np.searchsorted(trie.end, nodes + size, "left"))

    return vocabulary.derived("token-trie", make)


def narrow_edges(dfa: ByteDFA, narrow: np.ndarray, vocabulary: Vocabulary,
                 max_steps: int | None = None):
    """Every (state, token, end) from the narrow states, found byte by byte.

    Each walk is a (narrow state it started from, node of the vocabulary's
    :class:`TokenTrie`, state it is in); a round takes every walk one byte
    on, over each live byte of its state that a longer spelling has, so a
    prefix that dies discards its whole subtree of tokens at once, and the
    tokens spelled by the nodes reached end there. A walk that reaches a
    wide state finishes its subtree's tokens with :func:`exact_walk`,
    vectorised. Past ``max_steps`` walk steps, raises :class:`WalkTooLong`.
    All walks go a round at a time: a 60,000-value enum (97k states, each
    walked from) took 1 s one walk and one bisection at a time in Python,
    ~0.1 s this way.
    """
    origin = np.flatnonzero(narrow)
    if len(origin) <= SMALL_NARROW:
        return _narrow_edges_small(dfa, narrow, vocabulary, max_steps)
    trie = token_trie(vocabulary)
    ids = vocabulary.sorted_spellings()[1]
    table = dfa.transitions
    # the live bytes of the narrow states, as CSR rows (one pass over the table:
    # copying the narrow rows out first cost as much again). The flat cells of a
    # boolean copy: np.nonzero of the 2-D int32 table took 60 ms on a 60,000-value
    # enum's (97k states), this 12 ms (CPU).
    live_state, live_byte = np.divmod(np.flatnonzero(table.reshape(-1) != 0), table.shape[1])
    if len(origin) < dfa.num_states - 1:
        keep = narrow[live_state]
        live_state, live_byte = live_state[keep], live_byte[keep]
    live_count = np.bincount(live_state, minlength=dfa.num_states)
    live_start = np.cumsum(live_count) - live_count
    live_byte = live_byte.astype(np.int64)
    node = np.zeros(len(origin), dtype=np.int64)
    state = origin.astype(np.int64)
    found_source, found_token, found_target = [], [], []
    pending = []  # (origin, state, lo, hi, depth): ranges to walk in bulk
    steps, depth = 0, 0
    last_edge = max(len(trie.key) - 1, 0)
    while len(origin):
        limits.check()
        degree = live_count[state]
        total = int(degree.sum())
        steps += total
        if max_steps is not None and steps > max_steps:
            raise WalkTooLong(max_steps)
        walk = np.repeat(np.arange(len(origin)), degree)
        byte = live_byte[concatenated_ranges(live_start[state], live_start[state] + degree)]
        key = node[walk] * 256 + byte
        at = np.minimum(np.searchsorted(trie.key, key), last_edge)
        hit = trie.key[at] == key if len(trie.key) else np.zeros(len(key), dtype=bool)
        walk, byte, child = walk[hit], byte[hit], trie.child[at[hit]]
        origin, state, node = origin[walk], table[state[walk], byte].astype(np.int64), child
        depth += 1
        lo, hi = trie.exact_lo[node], trie.exact_hi[node]
        spelled = hi - lo
        found_source.append(np.repeat(origin, spelled))
        found_token.append(ids[concatenated_ranges(lo, hi)])
        found_target.append(np.repeat(state, spelled))
        longer = trie.below_hi[node] > hi
        wide = longer & ~narrow[state]
        if wide.any():
            pending.append((origin[wide], state[wide], hi[wide], trie.below_hi[node][wide], depth))
        going = longer & narrow[state]
        origin, state, node = origin[going], state[going], node[going]
    sources = [np.concatenate(found_source).astype(np.int32) if found_source else np.zeros(0, np.int32)]
    tokens = [np.concatenate(found_token).astype(np.int64) if found_token else np.zeros(0, np.int64)]
    targets = [np.concatenate(found_target).astype(np.int32) if found_target else np.zeros(0, np.int32)]
    if pending:
        start = np.concatenate([p[0] for p in pending])
        at_state = np.concatenate([p[1] for p in pending])
        lo = np.concatenate([p[2] for p in pending])
        hi = np.concatenate([p[3] for p in pending])
        at_depth = np.concatenate([np.full(len(p[0]), p[4], dtype=np.int64) for p in pending])
        sizes = hi - lo
        token = ids[concatenated_ranges(lo, hi)]
        ends = exact_walk(table, vocabulary, np.repeat(at_state, sizes), token, np.repeat(at_depth, sizes))
        alive = ends != DEAD
        sources.append(np.repeat(start, sizes)[alive].astype(np.int32))
        tokens.append(token[alive])
        targets.append(ends[alive])
    return np.concatenate(sources), np.concatenate(tokens), np.concatenate(targets)


def _narrow_edges_small(dfa: ByteDFA, narrow: np.ndarray, vocabulary: Vocabulary,
                        max_steps: int | None = None):
    """:func:`narrow_edges` one walk at a time, the tokens of each live byte
    found by two bisections of the sorted spellings."""
    spellings, ids = vocabulary.sorted_spellings()
    table = dfa.transitions
    found_source, found_token, found_target = [], [], []
    pending = []  # (origin, state, lo, hi, depth): ranges to walk in bulk
    live_bytes = {int(s): np.flatnonzero(table[s]).tolist() for s in np.flatnonzero(narrow)}
    steps = 0
    for origin in np.flatnonzero(narrow).tolist():
        stack = [(0, len(spellings), 0, origin)]
        if max_steps is not None:
            steps += len(live_bytes[origin])
            if steps > max_steps:
                raise WalkTooLong(max_steps)
        while stack:
            lo, hi, depth, state = stack.pop()
            if depth:
                # Tokens that are exactly the prefix sort first in the range.
                while lo < hi and len(spellings[lo]) == depth:
                    found_source.append(origin)
                    found_token.append(int(ids[lo]))
                    found_target.append(state)
                    lo += 1
                if lo >= hi:
                    continue
                if not narrow[state]:
                    pending.append((origin, state, lo, hi, depth))
                    continue
            prefix = spellings[lo][:depth]
            if max_steps is not None:
                steps += len(live_bytes[state])
                if steps > max_steps:
                    raise WalkTooLong(max_steps)
            for byte in live_bytes[state]:
                sub_lo = bisect.bisect_left(spellings, prefix + bytes([byte]), lo, hi)
                sub_hi = (bisect.bisect_left(spellings, prefix + bytes([byte + 1]), sub_lo, hi)
                          if byte < 255 else hi)
                if sub_lo < sub_hi:
                    stack.append((sub_lo, sub_hi, depth + 1, int(table[state, byte])))
    sources = [np.asarray(found_source, dtype=np.int32)]
    tokens = [np.asarray(found_token, dtype=np.int64)]
    targets = [np.asarray(found_target, dtype=np.int32)]
    if pending:
        sizes = np.array([hi - lo for _, _, lo, hi, _ in pending])
        origin = np.repeat([p[0] for p in pending], sizes)
        state = np.repeat([p[1] for p in pending], sizes)
        depth = np.repeat([p[4] for p in pending], sizes)
        token = np.concatenate([ids[lo:hi] for _, _, lo, hi, _ in pending])
        ends = exact_walk(table, vocabulary, state, token, depth)
        alive = ends != DEAD
        sources.append(origin[alive].astype(np.int32))
        tokens.append(token[alive])
        targets.append(ends[alive])
    return np.concatenate(sources), np.concatenate(tokens), np.concatenate(targets)


def escaped_edges(dfa: ByteDFA, vocabulary: Vocabulary, tokens: np.ndarray,
                  token_behaviour: np.ndarray, escaped_behaviour: np.ndarray,
                  escaped_start: np.ndarray):
    """Every (state, token, end) of the coarse walks that ran into a narrow state.

    The coarse walk stops at a narrow state (the behaviour vector says
    "escaped" there); the tokens of each such behaviour ``escaped_behaviour[i]``
    (``tokens``, in any order, with their behaviours ``token_behaviour``) are
    walked again exactly, from their start ``escaped_start[i]``.
    """
    order = np.argsort(token_behaviour, kind="stable")
    sorted_behaviour = token_behaviour[order]
    order = tokens[order]
    lo = np.searchsorted(sorted_behaviour, escaped_behaviour, side="left")
    hi = np.searchsorted(sorted_behaviour, escaped_behaviour, side="right")
    sizes = hi - lo
    start = np.repeat(escaped_start, sizes).astype(np.int32)
    token = order[np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])] if sizes.sum() \
        else np.zeros(0, dtype=np.int64)
    ends = exact_walk(dfa.transitions, vocabulary, start, token, np.zeros(len(token), dtype=np.int64))
    alive = ends != DEAD
    return start[alive], token[alive], ends[alive]
