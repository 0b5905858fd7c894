"""Which of the parent's pages a fresh fork's child copies while it builds a schema and serves its first mask.

MaskBench's method (``ttfm_fork.py``): the parent prepares the vocabulary and
builds the warm-up schema; each schema runs in a fork of it, which builds the
warm-up again untimed. Here the child reads ``/proc/self/pagemap`` before and
after the schema (into buffers allocated and touched beforehand, so that the
reading itself copies few pages: ``--noop`` counts them) and counts the pages that became its
own: present before and shared with the parent (a copy on write), or new.
Mappings made during the schema (new arenas, a grown heap's new part) are
not read: their pages are new, not copied, and count only in the faults.
Each page is put in a kind: a pymalloc pool of a size class (the pool's
header names it), the C heap (``[heap]``: malloc's larger blocks, code
objects, heap types, dict tables), a library's data, another mapping.

``ru_minflt`` over the same region is printed beside (a fault can map
several file pages). The
summary averages the schemas whose faults lie within ``--faults``, the
median band the time to first mask is read at.

    .venv/bin/python benchmarks/fork_pages.py --per-source 4 --faults 40,300

Linux only (``/proc/self/pagemap``, whose "exclusively mapped" bit 56 needs
kernel 4.2+). A development aid, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import struct
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, warm_parent  # noqa: E402

_PRESENT = np.uint64(1 << 63)
_EXCLUSIVE = np.uint64(1 << 56)
_POOL = 16 * 1024           # CPython 3.10+ on 64 bits: 16 KiB pools
_POOL_HEADER = struct.Struct("IxxxxQQQIIII")


def _maps() -> list[tuple[int, int, str]]:
    found = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else "[anon]"
            if name != "[vsyscall]":
                found.append((start, end, name))
    return found


_libc = ctypes.CDLL(None, use_errno=True)
_libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_libc.pread.restype = ctypes.c_ssize_t


class _Reader:
    """Pagemap reads into a buffer allocated and touched beforehand. It keeps
    no small objects of its own (the mappings as two numpy arrays): objects
    a child keeps before the schema would take the free slots the schema's
    objects would otherwise take, and hide the very pages to be counted."""

    def __init__(self, size: int) -> None:
        self.buffer = bytearray(size)
        self.buffer[::4096] = b"\x01" * len(self.buffer[::4096])
        self.address = ctypes.addressof((ctypes.c_char * size).from_buffer(self.buffer))
        self.starts = np.zeros(4096, dtype=np.int64)
        self.ends = np.zeros(4096, dtype=np.int64)
        self.known = 0

    def read(self, maps) -> None:
        """The pagemap of ``maps`` (start, end, name), the mappings of the last
        read first (their order and places in the buffer kept)."""
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
        try:
            at = 0
            for i in range(self.known):
                start, end = int(self.starts[i]), int(self.ends[i])
                _libc.pread(fd, self.address + at, (end - start) // 4096 * 8, start // 4096 * 8)
                at += (end - start) // 4096 * 8
            for start, end, _name in maps[self.known:] if self.known == 0 else ():
                if self.known == len(self.starts):
                    break
                _libc.pread(fd, self.address + at, (end - start) // 4096 * 8, start // 4096 * 8)
                self.starts[self.known], self.ends[self.known] = start, end
                self.known += 1
                at += (end - start) // 4096 * 8
        finally:
            os.close(fd)

    def entries(self) -> list[tuple[int, int, str, np.ndarray]]:
        """What the last read found, each mapping with its name (the names
        read now: made only after the reads that count)."""
        now = _maps()
        out = []
        at = 0
        for i in range(self.known):
            start, end = int(self.starts[i]), int(self.ends[i])
            count = (end - start) // 4096
            name = next((n for s, e, n in now if s <= start < e), "[gone]")
            out.append((start, end, name,
                        np.frombuffer(self.buffer, dtype=np.uint64, count=count, offset=at)))
            at += count * 8
        return out


def _pool_class(address: int, start: int) -> int | None:
    """The size class of the pymalloc pool holding ``address``, or None."""
    pool = address & ~(_POOL - 1)
    if pool < start:
        return None
    _count, _free, _next, _prev, _arena, index, offset, limit = _POOL_HEADER.unpack(ctypes.string_at(pool, 48))
    size = (index + 1) * 16
    if index < 32 and limit == _POOL - size and offset <= _POOL:
        return size
    return None


def _kinds(before, after) -> Counter:
    old = {(s, e): v for s, e, _, v in before}
    kinds: Counter = Counter()
    for start, end, name, entries in after:
        prior = old.get((start, end))
        if prior is None:       # grown or new: look each page up in the old maps
            prior = np.zeros(len(entries), dtype=np.uint64)
            for s, e, _, v in before:
                lo, hi = max(start, s), min(end, e)
                if lo < hi:
                    prior[(lo - start) // 4096:(hi - start) // 4096] = v[(lo - s) // 4096:(hi - s) // 4096]
        mine = (entries & _PRESENT != 0) & (entries & _EXCLUSIVE != 0)
        was_mine = (prior & _PRESENT != 0) & (prior & _EXCLUSIVE != 0)
        for page in np.nonzero(mine & ~was_mine)[0]:
            how = "copied" if prior[page] & _PRESENT else "new"
            address = start + int(page) * 4096
            size = _pool_class(address, start) if name in ("[anon]", "[heap]") else None
            where = f"pool {size:3d} B" if size else name.rsplit("/", 1)[-1]
            kinds[f"{how} {where}"] += 1
    return kinds


def settled_readers() -> tuple["_Reader", "_Reader"]:
    """Two readers of this process's pagemap, sized for its mappings and
    each run until their own objects have settled, so that a reading after
    the measured region copies few pages itself (what ``--noop`` counts)."""
    maps = _maps()
    size = sum((e - s) // 4096 * 8 for s, e, _ in maps) + (64 << 20)
    first, second = _Reader(size), _Reader(size)
    first.read(maps)
    second.read(maps)
    del maps
    first.read(())
    second.read(())
    first.read(())              # the earlier reads' own objects settled
    return first, second


def _child(schema, vocab, noop: bool = False) -> dict:
    from tokendfa import Guide, Index

    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    first, second = settled_readers()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    try:
        if not noop:
            Guide(Index.from_schema(schema, vocab, lazy=True, time_limit=10)).get_mask()
    except Exception as exc:  # noqa: BLE001 - reported
        return {"error": type(exc).__name__}
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    second.read(())
    return {"faults": faults, "kinds": dict(_kinds(first.entries(), second.entries()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--sources", default="all")
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--faults", default="40,300", help="the band of faults the summary averages (lo,hi)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default=None, help="each schema's faults and pages by kind, as JSON")
    parser.add_argument("--noop", action="store_true",
                        help="build nothing in the timed region: the pages the reading itself takes")
    args = parser.parse_args()
    low, high = (int(x) for x in args.faults.split(","))
    vocab = warm_parent(args.vocab)
    sources = source_names() if args.sources == "all" else args.sources.split(",")
    total: Counter = Counter()
    band = []
    rows = {}
    for record in [r for s in sources for r in sample(s, args.per_source or None)]:
        row = forked(lambda record=record: _child(record.schema, vocab, args.noop))
        if "error" in row:
            print(f"{record.label:28s} {row['error']}")
            continue
        print(f"{record.label:28s} faults {row['faults']:6d}  pages {sum(row['kinds'].values()):6d}")
        rows[record.label] = row
        if low <= row["faults"] <= high:
            band.append(row["faults"])
            total.update(row["kinds"])
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    if band:
        print(f"\n{len(band)} schemas with {low}-{high} faults: mean faults {sum(band) / len(band):.1f}, "
              f"pages a schema by kind:")
        for kind, count in total.most_common(args.top):
            print(f"  {count / len(band):7.1f}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
