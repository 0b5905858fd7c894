"""The narrow-state walk: tokens walked byte by byte from states with few ways on.

Literals (JSON keys, punctuation) and choices among a few keys leave only a
handful of bytes live in each state. Walking them through byte *classes*
would split the classes that the rest of the automaton shares (every key
letter its own class), so the fast build (:mod:`tokendfa.builder.fast`) walks
these *narrow* states (:func:`tokendfa.analysis.literals.narrow_states`)
exactly instead: the vocabulary's sorted spellings are cut by each live
byte with two bisections, so a prefix that dies discards its whole range of
tokens at once, and a walk that leaves the narrow states finishes its range
with :func:`exact_walk`, vectorised.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..analysis.dfa import DEAD, ByteDFA
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


def narrow_edges(dfa: ByteDFA, narrow: np.ndarray, vocabulary: Vocabulary,
                 max_steps: int | None = None):
    """Every (state, token, end) from the narrow states, found byte by byte.

    From a narrow state only a few bytes go on, so the vocabulary's sorted
    spellings are split by those bytes with two bisections each: a token
    range whose prefix dies is never looked at again. Where the walk reaches
    a wide state, the rest of the range is walked with :func:`exact_walk`.
    Past ``max_steps`` token ranges walked, raises :class:`WalkTooLong`.
    """
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
