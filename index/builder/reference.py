"""The reference build: every token walked from every reachable state.

This is the definition of the index, written to be obviously right rather
than fast, and kept forever as the oracle that every optimisation is tested
against. From each state reachable from the initial one, each token's whole
byte string is walked through the byte DFA; the token is allowed when the walk
stays alive, and leads to the state where it ends. (The walk is vectorised
over tokens with numpy, but it visits every token from every state.)
"""

from __future__ import annotations

import numpy as np

from ..analysis.dfa import DEAD, ByteDFA
from ..vocab.vocabulary import Vocabulary
from .assemble import RawEdges


def reference_edges(dfa: ByteDFA, vocab: Vocabulary) -> RawEdges:
    """Every (state, token, next state) with a live walk, one group per token."""
    matrix, lengths = vocab.byte_matrix()
    # Longest tokens first: at byte position j the tokens still walking are a
    # prefix of this order, so each step is a plain slice.
    order = np.argsort(-lengths, kind="stable")
    sorted_bytes, sorted_lengths = matrix[order], lengths[order]
    max_length = int(sorted_lengths[0]) if len(sorted_lengths) else 0
    active = [int(np.count_nonzero(sorted_lengths > j)) for j in range(max_length)]
    has_text = sorted_lengths > 0

    sources, tokens, targets = [], [], []
    seen, frontier = {dfa.initial}, [dfa.initial]
    for state in frontier:  # grows while we iterate
        current = np.full(len(order), state, dtype=np.int32)
        for j, count in enumerate(active):
            current[:count] = dfa.transitions[current[:count], sorted_bytes[:count, j]]
        allowed = has_text & (current != DEAD)
        token_ids, ends = order[allowed], current[allowed]
        sources.append(np.full(len(token_ids), state, dtype=np.int32))
        tokens.append(token_ids.astype(np.int32))
        targets.append(ends)
        for nxt in np.unique(ends).tolist():
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    with_text = np.flatnonzero(lengths > 0)
    return RawEdges(np.concatenate(sources), np.concatenate(tokens),
                    np.concatenate(targets), with_text, with_text.astype(np.int32))
