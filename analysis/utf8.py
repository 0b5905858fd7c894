"""Characters to bytes: the one place where code points become UTF-8.

A character class in a regex is a set of code points; a byte automaton needs
the same set as UTF-8 byte sequences. :func:`utf8_range_sequences` splits a
code-point range into a few *byte-range sequences* such as
``[E1-EC][80-BF][80-BF]``: a byte string of the right length matches the
range exactly when each byte falls in the corresponding byte range. Every
other module that needs bytes from characters calls into this one.
"""

from __future__ import annotations

from typing import Iterator

MAX_CODEPOINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)  # not encodable in UTF-8: never matched

# Largest code point encoded with 1, 2 and 3 bytes.
_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF)

ByteRange = tuple[int, int]          # inclusive (low, high) byte values
CodepointRange = tuple[int, int]     # inclusive (low, high) code points


def encode_codepoint(cp: int) -> bytes:
    return chr(cp).encode("utf-8")


def utf8_range_sequences(low: int, high: int) -> Iterator[tuple[ByteRange, ...]]:
    """Byte-range sequences matching exactly the UTF-8 encodings of [low, high].

    Surrogates inside the range are skipped. The sequences are disjoint and
    come out in increasing code-point order.
    """
    pending = [(low, high)]
    while pending:
        lo, hi = pending.pop()
        if lo > hi:
            continue
        if lo <= SURROGATES[1] and hi >= SURROGATES[0]:
            # Pushed in reverse so that the lower part comes out first.
            pending.append((SURROGATES[1] + 1, hi))
            pending.append((lo, SURROGATES[0] - 1))
            continue
        split = _split_point(lo, hi)
        if split is not None:
            pending.append((split + 1, hi))
            pending.append((lo, split))
            continue
        lo_bytes, hi_bytes = encode_codepoint(lo), encode_codepoint(hi)
        yield tuple(zip(lo_bytes, hi_bytes))


def _split_point(lo: int, hi: int) -> int | None:
    """Where [lo, hi] must be cut so that each byte position is a plain range.

    Two cuts are needed: where the encoded length changes, and where a
    continuation byte would otherwise not span its full 80-BF range (for
    example U+0801..U+0900 is not ``[E0][A0-A4][81-80]``).
    """
    for limit in _LENGTH_LIMITS:
        if lo <= limit < hi:
            return limit
    if hi <= 0x7F:
        return None
    for continuation_bytes in (1, 2, 3):
        low_bits = (1 << (6 * continuation_bytes)) - 1
        if lo & ~low_bits == hi & ~low_bits:
            continue
        if lo & low_bits != 0:
            return lo | low_bits
        if hi & low_bits != low_bits:
            return (hi & ~low_bits) - 1
    return None


def merge_ranges(ranges) -> list[CodepointRange]:
    """Sorted, disjoint, non-adjacent ranges covering the same code points."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def complement_ranges(ranges: list[CodepointRange]) -> list[CodepointRange]:
    """All code points not in ``ranges`` (sorted, non-overlapping input)."""
    result: list[CodepointRange] = []
    next_free = 0
    for lo, hi in ranges:
        if lo > next_free:
            result.append((next_free, lo - 1))
        next_free = max(next_free, hi + 1)
    if next_free <= MAX_CODEPOINT:
        result.append((next_free, MAX_CODEPOINT))
    return result


def ranges_from_codepoints(codepoints: list[int]) -> list[CodepointRange]:
    """Merge code points into sorted inclusive ranges."""
    result: list[CodepointRange] = []
    for cp in sorted(set(codepoints)):
        if result and result[-1][1] + 1 == cp:
            result[-1] = (result[-1][0], cp)
        else:
            result.append((cp, cp))
    return result
