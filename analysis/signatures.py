"""Token signatures: tokens that behave alike from every state.

Map each byte of a token to its byte class (:mod:`analysis.byteclasses`) and
the token becomes a *signature*, a sequence of class ids. Two tokens with the
same signature take every state of the DFA to the same place, so a build only
has to walk each signature once; with the few classes a typical pattern has,
a 150k vocabulary collapses to some thousands of signatures. A token with a
dead byte has no signature: it is never allowed.

Signatures are found by hashing each token's class sequence to one integer
(and checking the rare collision) rather than by sorting padded rows, which
was the slow part of earlier prototypes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_HASH_BASE = np.uint64(0x100000001B3)  # FNV prime: odd, so no class value vanishes


@dataclass(frozen=True, eq=False)
class Signatures:
    """The distinct class sequences of a vocabulary.

    ``token_signature[token]`` is the signature id (-1: no signature: a dead
    byte or no text). Signature ``k`` is ``classes[k, :lengths[k]]``; ids are
    numbered by the smallest token that has them.
    """

    token_signature: np.ndarray  # int32[V]
    classes: np.ndarray          # int32[K, Lmax], padded with -1
    lengths: np.ndarray          # int32[K]

    @property
    def num_signatures(self) -> int:
        return len(self.lengths)


def token_signatures(byte_matrix: np.ndarray, lengths: np.ndarray,
                     class_of: np.ndarray, dead_class: int) -> Signatures:
    """Group tokens by class sequence.

    ``byte_matrix`` is ``uint8[V, Lmax]`` zero-padded, ``lengths`` the true
    lengths (0 for tokens that are never text), ``class_of`` ``int[256]``.
    """
    num_tokens = len(lengths)
    # uint8 is enough (at most 256 classes) and keeps the V x Lmax matrix small.
    classes = class_of.astype(np.uint8)[byte_matrix]
    # Longest first, so the tokens still going at position j are a prefix.
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    sorted_classes = classes[order]
    max_length = int(sorted_lengths[0]) if num_tokens else 0
    hashes = np.zeros(num_tokens, dtype=np.uint64)
    has_dead = np.zeros(num_tokens, dtype=bool)
    with np.errstate(over="ignore"):
        for j in range(max_length):
            count = int(np.searchsorted(-sorted_lengths, -j, side="left"))
            column = sorted_classes[:count, j]
            hashes[:count] = hashes[:count] * _HASH_BASE + (column.astype(np.uint64) + np.uint64(1))
            if dead_class >= 0:
                has_dead[:count] |= column == dead_class
    usable = (sorted_lengths > 0) & ~has_dead
    key = np.stack([hashes.view(np.int64), sorted_lengths.astype(np.int64)], axis=1)[usable]
    usable_tokens = order[usable]
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    representative = usable_tokens[first][inverse]
    # Equal hashes are candidates: check each token against its representative.
    width = max(max_length, 1)
    mismatch = np.zeros(len(usable_tokens), dtype=bool)
    for start in range(0, len(usable_tokens), 65536):
        stop = start + 65536
        rows, reps = usable_tokens[start:stop], representative[start:stop]
        position = np.arange(width)[None, :]
        valid = position < lengths[rows][:, None]
        mismatch[start:stop] = np.any((classes[rows, :width] != classes[reps, :width]) & valid, axis=1)
    if mismatch.any():  # pragma: no cover - a 64-bit collision; fall back to exact rows
        padded = np.where(np.arange(width)[None, :] < lengths[usable_tokens][:, None],
                          classes[usable_tokens, :width], -1)
        _, first, inverse = np.unique(padded, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        representative = usable_tokens[first][inverse]

    # Number signatures by their smallest token so the numbering is stable.
    first_token = np.full(len(first), num_tokens, dtype=np.int64)
    np.minimum.at(first_token, inverse, usable_tokens)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first_token, kind="stable")] = np.arange(len(first))
    token_signature = np.full(num_tokens, -1, dtype=np.int32)
    token_signature[usable_tokens] = rank[inverse]
    reps = np.sort(first_token).astype(np.int64)
    sig_lengths = lengths[reps].astype(np.int32)
    sig_classes = np.where(np.arange(width)[None, :] < sig_lengths[:, None],
                           classes[reps, :width].astype(np.int32), -1).astype(np.int32)
    return Signatures(token_signature, sig_classes, sig_lengths)
