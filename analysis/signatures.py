"""Token signatures: tokens that behave alike from every state.

Map each byte of a token to its byte class (:mod:`tokendfa.analysis.byteclasses`) and
the token becomes a *signature*, a sequence of class ids. Two tokens with the
same signature take every state of the DFA to the same place, so a build only
has to walk each signature once; with the few classes a typical pattern has,
a 150k vocabulary collapses to some thousands of signatures. A token with a
dead byte has no signature: it is never allowed.

Signatures are found by hashing each token's class sequence to one integer
(and checking every token against its representative, so a collision can
never merge two different signatures) rather than by sorting padded rows,
which was the slow part of earlier prototypes. The vocabulary is read in a
column layout (:class:`ByteColumns`, built once per vocabulary) so the work
is proportional to the total number of bytes, not to tokens x longest token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_HASH_BASE = np.uint64(0x100000001B3)  # FNV prime: odd, so no class value vanishes


@dataclass(frozen=True, eq=False)
class ByteColumns:
    """A vocabulary's bytes, column by column, longest tokens first.

    ``order`` lists token ids by decreasing length (stable), so the tokens
    that still have a byte at position ``j`` are ``order[:counts[j]]``, and
    those bytes are ``data[starts[j] : starts[j] + counts[j]]``.
    """

    order: np.ndarray           # int64[V]
    sorted_lengths: np.ndarray  # int32[V]
    counts: np.ndarray          # int64[Lmax]
    starts: np.ndarray          # int64[Lmax + 1]
    data: np.ndarray            # uint8[total bytes]


def byte_columns(byte_matrix: np.ndarray, lengths: np.ndarray) -> ByteColumns:
    """The column layout of a zero-padded ``uint8[V, Lmax]`` byte matrix."""
    order = np.argsort(-lengths.astype(np.int64), kind="stable")
    sorted_lengths = lengths[order].astype(np.int32)
    max_length = int(sorted_lengths[0]) if len(order) else 0
    counts = np.array([np.count_nonzero(sorted_lengths > j) for j in range(max_length)],
                      dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    data = np.concatenate([byte_matrix[order[:count], j] for j, count in enumerate(counts)]
                          ) if max_length else np.zeros(0, dtype=np.uint8)
    for array in (order, sorted_lengths, counts, starts, data):
        array.flags.writeable = False
    return ByteColumns(order, sorted_lengths, counts, starts, data.astype(np.uint8))


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


def token_signatures(columns: ByteColumns, class_of: np.ndarray, dead_class: int) -> Signatures:
    """Group the tokens of ``columns`` by class sequence."""
    num_tokens = len(columns.order)
    classes = class_of.astype(np.uint8)[columns.data]  # at most 256 classes
    hashes = np.zeros(num_tokens, dtype=np.uint64)
    has_dead = np.zeros(num_tokens, dtype=bool)
    with np.errstate(over="ignore"):
        for j, count in enumerate(columns.counts.tolist()):
            column = classes[columns.starts[j]:columns.starts[j] + count]
            hashes[:count] = hashes[:count] * _HASH_BASE + (column.astype(np.uint64) + np.uint64(1))
            if dead_class >= 0:
                has_dead[:count] |= column == dead_class
        # Fold the length in, so sequences that are prefixes of each other differ.
        hashes = hashes * _HASH_BASE + columns.sorted_lengths.astype(np.uint64)
    # Positions (in length order) of the tokens that have a signature.
    usable = np.flatnonzero((columns.sorted_lengths > 0) & ~has_dead)
    _, first, inverse = np.unique(hashes[usable], return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    representative = usable[first][inverse]
    if not _same_sequences(columns, classes, usable, representative):
        # pragma: no cover - a 64-bit hash collision: fall back to exact rows
        inverse, representative = _exact_groups(columns, classes, usable)
        first = np.unique(inverse, return_index=True)[1]

    # Number signatures by their smallest token so the numbering is stable.
    token_ids = columns.order[usable]
    first_token = np.full(len(first), num_tokens, dtype=np.int64)
    np.minimum.at(first_token, inverse, token_ids)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first_token, kind="stable")] = np.arange(len(first))
    token_signature = np.full(num_tokens, -1, dtype=np.int32)
    token_signature[token_ids] = rank[inverse]

    # One representative position per signature, in signature order.
    position_of_token = np.empty(num_tokens, dtype=np.int64)
    position_of_token[columns.order] = np.arange(num_tokens)
    rep_positions = position_of_token[np.sort(first_token)]
    sig_lengths = columns.sorted_lengths[rep_positions].astype(np.int32)
    width = max(int(sig_lengths.max(initial=0)), 1)
    sig_classes = np.full((len(rep_positions), width), -1, dtype=np.int32)
    for j, count in enumerate(columns.counts.tolist()):
        going = np.flatnonzero(rep_positions < count)
        if len(going) == 0:
            break
        sig_classes[going, j] = classes[columns.starts[j] + rep_positions[going]]
    return Signatures(token_signature, sig_classes, sig_lengths)


def _same_sequences(columns, classes, positions, representative) -> bool:
    """Whether every token's class sequence equals its representative's."""
    if np.any(columns.sorted_lengths[positions] != columns.sorted_lengths[representative]):
        return False
    for j, count in enumerate(columns.counts.tolist()):
        # positions is increasing, so the tokens still going are a prefix of it.
        going = int(np.searchsorted(positions, count))
        start = columns.starts[j]
        if np.any(classes[start + positions[:going]] != classes[start + representative[:going]]):
            return False
    return True


def _exact_groups(columns, classes, positions):  # pragma: no cover - collision fallback
    width = len(columns.counts)
    padded = np.full((len(positions), width), -1, dtype=np.int32)
    for j, count in enumerate(columns.counts.tolist()):
        going = int(np.searchsorted(positions, count))
        padded[:going, j] = classes[columns.starts[j] + positions[:going]]
    _, first, inverse = np.unique(padded, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    return inverse, positions[first][inverse]
