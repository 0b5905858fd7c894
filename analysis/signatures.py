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

from .graph import distinct

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
    matrix: np.ndarray          # uint8[V, Lmax]: the same bytes row by row, by token id


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
    return ByteColumns(order, sorted_lengths, counts, starts, data.astype(np.uint8), byte_matrix)


@dataclass(frozen=True, eq=False)
class ByteOccurrences:
    """Which tokens hold each byte value, for a vocabulary's :class:`ByteColumns`.

    ``positions[starts[b]:starts[b + 1]]`` are the positions (in
    ``ByteColumns.order``, increasing) of the tokens holding byte ``b`` at
    least once; ``distinct[p]`` is how many different bytes the token at
    position ``p`` holds. Built once per vocabulary, it turns "drop every token
    with a dead byte" into reading the lists of a few bytes, so that a small
    pattern's build touches only the tokens it can use: ``(a|b)*c`` keeps a
    few hundred of Qwen2.5's 151k tokens, and grouping all of them by
    signature cost ~35 ms per build.
    """

    starts: np.ndarray     # int64[257]
    positions: np.ndarray  # int32[sum over tokens of distinct bytes]
    distinct: np.ndarray   # int32[V]
    num_text: int          # positions below this have text (length > 0)
    # Each token's lowest and highest byte and its set of bytes (4 x 64 bits),
    # with the positions sorted by lowest byte (``by_low``, cut at
    # ``low_starts[b]``): the tokens whose bytes all lie in [lo, hi] are among
    # a slice of ``by_low`` whatever the byte lists' lengths. (a|b)*c keeps 38
    # tokens of Qwen2.5, but the lists of a, b and c hold 80k positions.
    by_low: np.ndarray     # int32[num_text]
    low_starts: np.ndarray  # int64[257]
    high: np.ndarray       # uint8[num_text]
    bits: np.ndarray       # uint64[num_text, 4]

    def positions_without(self, banned: np.ndarray | None) -> np.ndarray:
        """Positions (increasing) of the tokens with text and no byte where
        ``banned`` (``bool[256]``) is true; every token with text if None.

        When the allowed bytes span a narrow range of values, the tokens
        within that range are checked against the allowed set directly;
        otherwise the lists of the banned bytes or of the others are read,
        whichever are shorter: a token avoids the banned bytes when all its
        distinct bytes are among the others.
        """
        if banned is None or not banned.any():
            return np.arange(self.num_text, dtype=np.int64)
        banned_bytes, allowed_bytes = np.flatnonzero(banned), np.flatnonzero(~banned)
        if len(allowed_bytes) == 0:
            return np.zeros(0, dtype=np.int64)
        lo, hi = int(allowed_bytes[0]), int(allowed_bytes[-1])
        first, last = self.low_starts[lo], self.low_starts[hi + 1]
        if (last - first) * 8 < self.num_text:
            candidates = self.by_low[first:last]
            candidates = candidates[self.high[candidates] <= hi]
            outside = np.packbits(banned, bitorder="little").view(np.uint64)
            fits = ~(self.bits[candidates] & outside).any(axis=1)
            return np.sort(candidates[fits]).astype(np.int64)
        sizes = np.diff(self.starts)
        if sizes[banned_bytes].sum() <= sizes[allowed_bytes].sum():
            hit = np.zeros(self.num_text, dtype=bool)
            hit[self._lists(banned_bytes)] = True
            return np.flatnonzero(~hit)
        lists = self._lists(allowed_bytes)
        if len(lists) * 8 < self.num_text:  # few candidates: skip the pass over every token
            candidates, held = np.unique(lists, return_counts=True)
            return candidates[held == self.distinct[candidates]].astype(np.int64)
        held = np.bincount(lists, minlength=self.num_text)
        return np.flatnonzero(held[:self.num_text] == self.distinct[:self.num_text])

    def _lists(self, byte_values: np.ndarray) -> np.ndarray:
        return np.concatenate([self.positions[self.starts[b]:self.starts[b + 1]]
                               for b in byte_values.tolist()] or [np.zeros(0, np.int32)])


def byte_occurrences(columns: ByteColumns) -> ByteOccurrences:
    """The :class:`ByteOccurrences` of a vocabulary in column layout."""
    num_tokens = len(columns.order)
    keys = np.concatenate(
        [columns.data[columns.starts[j]:columns.starts[j] + count].astype(np.int64) * num_tokens
         + np.arange(count) for j, count in enumerate(columns.counts.tolist())]
        or [np.zeros(0, np.int64)])
    keys = distinct(keys)  # (byte, position) pairs, each once, by byte then position
    positions = (keys % num_tokens).astype(np.int32)
    starts = np.searchsorted(keys // num_tokens, np.arange(257)).astype(np.int64)
    bytes_held = np.bincount(positions, minlength=num_tokens).astype(np.int32)
    num_text = int(columns.counts[0]) if len(columns.counts) else 0
    byte_of = keys // num_tokens
    # The pairs by position, bytes increasing: each token's first and last.
    by_position = np.sort(positions.astype(np.int64) * 256 + byte_of)
    token_start = np.searchsorted(by_position, np.arange(num_text + 1) * 256)
    low = (by_position[token_start[:-1]] & 255).astype(np.uint8)
    high = (by_position[token_start[1:] - 1] & 255).astype(np.uint8)
    bits = np.zeros(num_text * 4, dtype=np.uint64)  # distinct bytes: adding is or-ing
    np.add.at(bits, positions.astype(np.int64) * 4 + (byte_of >> 6),
              np.left_shift(np.uint64(1), (byte_of & 63).astype(np.uint64)))
    bits = bits.reshape(num_text, 4)
    by_low = np.argsort(low, kind="stable").astype(np.int32)
    low_starts = np.searchsorted(low[by_low], np.arange(257)).astype(np.int64)
    for array in (starts, positions, bytes_held, by_low, low_starts, high, bits):
        array.flags.writeable = False
    return ByteOccurrences(starts, positions, bytes_held, num_text, by_low, low_starts, high, bits)


@dataclass(frozen=True, eq=False)
class Signatures:
    """The distinct class sequences of a vocabulary.

    ``tokens`` are the tokens with a signature (the others hold a dead byte
    or no text) and ``signature[i]`` is the id of ``tokens[i]``'s: kept
    sparse, since a small pattern leaves a few hundred tokens of 150k, and a
    table as long as the vocabulary is memory a build has to touch. Signature
    ``k`` is ``classes[k, :lengths[k]]``; ids are numbered by the smallest
    token that has them.
    """

    classes: np.ndarray          # int32[K, Lmax], padded with -1
    lengths: np.ndarray          # int32[K]
    tokens: np.ndarray           # int64[T]: the tokens with one (longest first), not a scan of V
    signature: np.ndarray        # int32[T]: the signature of each of tokens

    @property
    def num_signatures(self) -> int:
        return len(self.lengths)


def token_signatures(columns: ByteColumns, class_of: np.ndarray, dead_class: int,
                     occurrences: ByteOccurrences | None = None,
                     banned: np.ndarray | None = None,
                     known: tuple[np.ndarray, np.ndarray] | None = None) -> Signatures:
    """Group the tokens of ``columns`` by class sequence.

    Tokens holding a byte of ``dead_class`` (if >= 0) or a byte where
    ``banned`` (``bool[256]``) is true get no signature; they are found from
    ``occurrences`` (computed here when not given), so the rest of the work
    is proportional to the bytes of the tokens kept. ``known``, a pair
    ``(drop, positions)`` with ``positions = occurrences.positions_without(drop)``
    that the caller already has, is used when ``drop`` is this call's.
    """
    num_tokens = len(columns.order)
    drop = None if banned is None else np.asarray(banned, dtype=bool)
    if dead_class >= 0:
        drop = (class_of == dead_class) if drop is None else drop | (class_of == dead_class)
    if occurrences is None:
        occurrences = byte_occurrences(columns)
    if known is not None and drop is not None and np.array_equal(known[0], drop):
        usable = known[1]
    else:
        usable = occurrences.positions_without(drop)  # positions in length order, increasing
    lookup = class_of.astype(np.uint8)  # at most 256 classes
    token_ids = columns.order[usable]
    longest = int(columns.sorted_lengths[usable[0]]) if len(usable) else 0
    # Indices below are into usable.
    if len(usable) * longest <= _PADDED_CELLS:
        # Few tokens: their padded rows at once, rather than a loop over up to
        # a hundred columns holding a handful of tokens each (a run of dashes
        # is one token of 64 bytes); [0-9]{3}-[0-9]{4} on Qwen2.5 went from
        # ~0.9 ms to ~0.2 ms here.
        padded = _padded_classes(columns.matrix, class_of, token_ids,
                                 columns.sorted_lengths[usable], longest)
        first, inverse = _equal_rows(padded)
        class_columns = None
    else:
        first, inverse, class_columns = _hashed_groups(columns, lookup, usable)

    # Number signatures by their smallest token so the numbering is stable.
    first_token = np.full(len(first), num_tokens, dtype=np.int64)
    np.minimum.at(first_token, inverse, token_ids)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first_token, kind="stable")] = np.arange(len(first))
    signature = rank[inverse].astype(np.int32)

    # One representative per signature (its smallest token), in signature order:
    # the index into usable where each group's smallest token sits.
    is_first = token_ids == first_token[inverse]
    smallest = np.empty(len(first), dtype=np.int64)
    smallest[inverse[is_first]] = np.flatnonzero(is_first)
    representative = smallest[np.argsort(first_token, kind="stable")]
    sig_lengths = columns.sorted_lengths[usable[representative]].astype(np.int32)
    width = max(int(sig_lengths.max(initial=0)), 1)
    if class_columns is None:
        # back to int32 with -1 padding, as wide as the longest token
        classes = padded[representative, :max(longest, 1)].astype(np.int32) - 1
        return Signatures(classes, sig_lengths, token_ids, signature)
    sig_classes = np.full((len(representative), width), -1, dtype=np.int32)
    for j, column in enumerate(class_columns):
        still = np.flatnonzero(representative < len(column))
        if len(still) == 0:
            break
        sig_classes[still, j] = column[representative[still]]
    return Signatures(sig_classes, sig_lengths, token_ids, signature)


# Up to this many cells (tokens x longest token) the tokens kept are grouped
# by their padded rows of classes; past it, column by column with a hash.
_PADDED_CELLS = 1 << 18


def _padded_classes(matrix, class_of, token_ids, lengths, longest) -> np.ndarray:
    """``uint[n, w]``: each token's classes plus one, padded with 0, in the
    narrowest unsigned type that holds them, with ``w >= max(longest, 1)``
    cells making whole 64-bit words (:func:`_equal_rows` reads them so).

    Not ``int32`` with -1 padding: four times the memory, and on a 7.6k-token
    pattern (``email`` on a 32k vocabulary) the int32 rows and their copies
    were ~500 page faults, a third of the build, in a freshly forked process."""
    dtype = np.uint8 if len(class_of) == 0 or int(class_of.max()) < 255 else np.uint16
    width = max(longest, 1)
    per_word = 8 // np.dtype(dtype).itemsize
    padded = np.zeros((len(token_ids), -(-width // per_word) * per_word), dtype=dtype)
    shifted = (class_of.astype(np.int64) + 1).astype(dtype)
    cells = shifted[matrix[token_ids, :width]]
    cells[np.arange(width) >= lengths[:, None]] = 0
    padded[:, :width] = cells
    return padded


def _equal_rows(padded):
    """``(first, inverse)`` of the distinct rows of ``padded`` (rows of whole
    64-bit words): grouped by a hash of the words, every row checked against
    its group's first, exact rows sorted only on a collision."""
    words = np.ascontiguousarray(padded).view(np.uint64)
    hashes = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        hashes *= _HASH_BASE  # integer arrays wrap silently
        hashes ^= words[:, j]
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(words, words[first[inverse]]):  # pragma: no cover - a 64-bit collision
        rows = words.view(np.dtype((np.void, words.shape[1] * 8))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    return first, inverse


def _hashed_groups(columns, lookup, usable):
    """``(first, inverse, class_columns)``: the tokens at positions ``usable``
    grouped by a hash of their class sequences, read column by column
    (``class_columns[j]``: the classes at column j of the tokens still going),
    every token checked against its group's first."""
    # The tokens still going at column j are a prefix of usable (longest first).
    going = np.searchsorted(usable, columns.counts).tolist()
    class_columns = []
    hashes = np.zeros(len(usable), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j, count in enumerate(going):
            if count == 0:
                break
            column = lookup[columns.data[columns.starts[j] + usable[:count]]]
            class_columns.append(column)
            hashes[:count] = hashes[:count] * _HASH_BASE + (column.astype(np.uint64) + np.uint64(1))
        # Fold the length in, so sequences that are prefixes of each other differ.
        hashes = hashes * _HASH_BASE + columns.sorted_lengths[usable].astype(np.uint64)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not _same_sequences(columns.sorted_lengths[usable], class_columns, first[inverse]):
        # pragma: no cover - a 64-bit hash collision: fall back to exact rows
        inverse = _exact_groups(class_columns, len(usable))
        first = np.unique(inverse, return_index=True)[1]
    return first, inverse, class_columns


def _same_sequences(lengths, class_columns, representative) -> bool:
    """Whether every token's class sequence equals its representative's
    (``class_columns[j]``: the classes at column j of the tokens still going)."""
    if np.any(lengths != lengths[representative]):
        return False
    for column in class_columns:
        # Equal lengths: a token's representative is still going where it is.
        partner = representative[:len(column)]
        if np.any(column != column[partner]):
            return False
    return True


def _exact_groups(class_columns, num_tokens):  # pragma: no cover - collision fallback
    padded = np.full((num_tokens, max(len(class_columns), 1)), -1, dtype=np.int32)
    for j, column in enumerate(class_columns):
        padded[:len(column), j] = column
    _, inverse = np.unique(padded, axis=0, return_inverse=True)
    return inverse.ravel()
