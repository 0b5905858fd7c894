"""Array kernels of the lazy engine: the compiled module of a cold row
(its token walk, its walk plan, start states, mask and successors), and the
small numpy passes the rest of the layer shares (distinct values, runs,
groups of ranges, bits set in a token mask, a stable order), and read-only
arrays copied into memory backed by 2 MB pages (:func:`_in_huge_pages`).

The compiled module (``_cwalk.c``, :data:`NATIVE_WALK`) is optional: where
it was not built (no C compiler at install, or ``TOKENDFA_NATIVE=0``) the
numpy code beside each call gives the same arrays. Every module of the layer
that calls it holds its own ``_cwalk`` name, imported from here.
"""

from __future__ import annotations

import mmap

import numpy as np

from ..analysis.dfa import STATE_DTYPE
from ..analysis.native import COMPILED_WALK, native_module
from ..runtime.arrays import MASK_WORD

# The compiled walk (index/lazy/_cwalk.c; see tokendfa.analysis.native).
# The rows are the same either way; the numpy walk is the slower one.
_cwalk = native_module(COMPILED_WALK)
NATIVE_WALK = _cwalk is not None
_INT64 = np.dtype(np.int64)

# A transparent huge page (x86-64 and arm64 with 4 kB pages), and the least
# the arrays of one block hold for it to be worth asking (one huge page).
_HUGE_PAGE = 2 << 20


def _in_huge_pages(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Read-only copies of ``arrays`` in one block of private anonymous
    memory the kernel is asked to back with 2 MB pages
    (``MADV_HUGEPAGE``; Linux only, and only where transparent huge pages
    are not turned off), each at a multiple of 64 bytes; ``arrays`` as
    they are where the block would hold less than one such page, or
    where the platform has no such advice.

    Why: MaskBench (and a server that forks workers) runs each schema in a
    child forked from a prepared parent, and a cold row reads the
    vocabulary's tables (the spellings, their offsets, the tokens by first
    byte, the tail bytes: ~6.5 MB on Qwen) there. The child reads the
    parent's pages through page tables of its own, and on the 2-core VM a
    first read of 8 MB of 4 kB pages cost ~1.2 ms in a fresh child against
    ~0.25 ms for the same bytes in 2 MB pages (a C loop, one read a cache
    line); the tables' passes of a new loop set or counted class read 2-4
    MB of them inside a cold step. The copies are made once per vocabulary,
    in the process that prepares it."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return arrays
    places, size = {}, 0
    for name, array in arrays.items():
        places[name] = size
        size += -(-array.nbytes // 64) * 64
    if size < _HUGE_PAGE:
        return arrays
    # over by one huge page, so that the arrays start at a huge page's boundary
    block = mmap.mmap(-1, size + _HUGE_PAGE, flags=mmap.MAP_PRIVATE)
    try:
        block.madvise(mmap.MADV_HUGEPAGE)  # before the first write, which allocates the pages
    except OSError:
        return arrays  # advice refused (no transparent huge pages): the arrays stay where they are
    memory = np.frombuffer(block, dtype=np.uint8)
    start = -memory.ctypes.data % _HUGE_PAGE
    found = {}
    for name, array in arrays.items():
        at = start + places[name]
        copy = memory[at:at + array.nbytes].view(array.dtype).reshape(array.shape)
        copy[...] = array
        copy.flags.writeable = False
        found[name] = copy
    return found


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for non-negative keys, as 16-bit
    keys when they fit: numpy sorts those by radix (a wide class's ~100k
    runs: ~2 ms by merge sort, ~0.3 by radix)."""
    if len(keys) and 0 <= keys.min() and keys.max() < 1 << 16:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for a 1-d integer array, without its first call's
    import of numpy.ma (10 ms, inside some schema's first mask)."""
    if len(values) < 2:
        return values.copy()
    if _cwalk is not None and len(values) > 64 and values.dtype == STATE_DTYPE:
        # a cold row's ~9k end states, tens of them distinct: marked in C (np.sort was ~150 us)
        marks = np.zeros(int(values.max()) + 1, dtype=np.uint8)
        found = np.empty(len(values), dtype=np.int64)
        count = _cwalk.distinct(np.ascontiguousarray(values), marks, found)
        return np.sort(found[:count]).astype(values.dtype)
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values, how many times each occurs)`` of a 1-d integer array."""
    ordered = np.sort(values)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.diff(np.append(starts, len(ordered)))


def _grouped(items: np.ndarray, offsets: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The ``items`` of ``groups``, where group g is ``items[offsets[g]:offsets[g + 1]]``."""
    if _cwalk is not None and items.dtype == offsets.dtype == groups.dtype == _INT64:
        # one copy a group in C, where the numpy ranges below cost ~6 calls
        # (~6% of the cold steps of 0.25-1.5 ms on the MaskBench sample)
        gathered = _cwalk.grouped(np.ascontiguousarray(items), np.ascontiguousarray(offsets),
                                  np.ascontiguousarray(groups))
        return np.frombuffer(gathered, dtype=_INT64)
    return items[_ranges(offsets[groups], offsets[groups + 1])]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(lo - (ends - lengths), lengths) + np.arange(total)


_PRINT_K1, _PRINT_K2, _PRINT_K3 = np.uint64(0x9E3779B9), np.uint64(0x85EBCA6B), np.uint64(0x68E31DA4)
_LOW32, _LOW64 = np.uint64(0xFFFFFFFF), (1 << 64) - 1


def _mask_fingerprint(mask: np.ndarray) -> int:
    """The 64-bit fingerprint of a ``uint32`` mask by which the lazy index
    finds the kept masks that may equal it (compared bytewise after): the
    twin of ``_cwalk``'s ``mask_fingerprint``, which ``finish_row``,
    ``walk_row`` and ``walk_span`` return with the mask (a sum of 32x32-bit
    products of the words in pairs, keyed by the pair's position, then
    murmur3's finaliser; Python's hash of the 18,960 bytes of a qwen2.5 mask
    cost ~5.4 us a cold row)."""
    words = np.asarray(mask, dtype=np.uint64)
    num_words = len(words)
    if num_words & 1:
        words = np.concatenate((words, np.zeros(1, np.uint64)))
    pair = np.arange(len(words) // 2, dtype=np.uint64)
    low = (words[0::2] + pair * _PRINT_K1) & _LOW32
    high = (words[1::2] + pair * _PRINT_K2 + _PRINT_K3) & _LOW32
    h = int(np.sum(low * high, dtype=np.uint64)) ^ num_words  # the products and their sum wrap at 2**64
    for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        h ^= h >> 33
        h = h * multiplier & _LOW64
    return h ^ h >> 33


def _set_bits(mask: np.ndarray, tokens: np.ndarray) -> None:
    """Set the bits of ``tokens`` in a ``uint32`` mask (a few tokens: sorted,
    each word's bits reduced first, one OR a word; many: packed from a bool
    per token)."""
    if not len(tokens):
        return
    if _cwalk is not None:
        _cwalk.set_bits(mask, tokens.astype(np.int64, copy=False))
        return
    if len(tokens) > 256:
        # Many tokens: a bool per token packed into words costs about the same
        # whatever their number (a loop row's ~3k walked tokens: 36 -> 12 us).
        allowed = np.zeros(len(mask) * 32, dtype=bool)
        allowed[tokens] = True
        mask |= np.packbits(allowed, bitorder="little").view(MASK_WORD)
        return
    ordered = np.sort(tokens)
    words = ordered >> 5
    bits = np.left_shift(np.uint32(1), (ordered & 31).astype(np.uint32))
    starts = np.flatnonzero(np.concatenate(([True], words[1:] != words[:-1])))
    mask[words[starts]] |= np.bitwise_or.reduceat(bits, starts)
