"""The pages a fresh fork's child copies from its parent, each compared with the parent's copy: what the child wrote there.

``fork_pages.py`` counts the pages a child makes its own by kind; this
reads the parent's version of each copied page (``/proc/PPID/mem``; the
parent waits on the child meanwhile) and says what the write was:

- ``[heap] free``: every changed word lies in a chunk that is free in the
  parent's malloc heap (its chunks walked from the heap's start): the child
  allocated there. ``[heap] used``: in chunks in use in the parent (a live
  buffer written, or a tcache/fastbin chunk reused: glibc marks those in
  use). ``free+used``: both. ``same``: copied, contents equal again.
- ``pool N: changed``: a pymalloc pool page of size class N whose blocks
  changed (objects made, freed or mutated there); ``pool N: same``: its
  contents equal the parent's (a reference count raised and dropped again,
  a transient read of a parent object, such as ``LOAD_CONST`` or an
  attribute read), or only reference counts / GC links changed.
- another mapping by name; ``new`` pages (absent in the parent) are counted apart.

The region is the schema's build and first mask (MaskBench's time to first
mask, after the child's untimed warm-up), or with ``--walk`` the walk of
its instances after an untimed build (MaskBench's steps). The parent's
chunks of 64 kB or more that the child wrote are listed with their pages:
a per-thread scratch kept in the parent shows there.

    .venv/bin/python benchmarks/fork_page_diff.py --names o1.json,kb_484 --walk
    .venv/bin/python benchmarks/fork_page_diff.py --per-source 4 --faults 40,300

Linux and glibc only (pagemap, the heap's chunk layout); needs to read the
parent's memory (same user; ptrace access). A development aid, not a benchmark.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import os
import resource
import struct
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fork_pages import settled_readers  # noqa: E402
from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.support.walks import walk_instances  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, warm_parent  # noqa: E402

_PRESENT = np.uint64(1 << 63)    # pagemap: page present
_EXCLUSIVE = np.uint64(1 << 56)  # pagemap: mapped by this process alone
_POOL = 16 * 1024                # CPython 3.10+ on 64 bits: 16 KiB pymalloc pools
_POOL_HEADER = struct.Struct("IxxxxQQQIIII")
_SNAPSHOT = 96 << 20             # the copied pages' contents, kept before the analysis writes


def _heap_chunks(read, start: int, end: int) -> list[tuple[int, int, bool]]:
    """(address, size, in use) of each chunk of the parent's main heap: a
    chunk is free when the next one's PREV_INUSE bit is clear."""
    raw = read(start, end - start)
    chunks, at = [], 0
    while at + 16 <= len(raw):
        size = struct.unpack_from("Q", raw, at + 8)[0] & ~7
        if size < 16 or at + size > len(raw):
            break
        after = at + size
        used = after + 16 > len(raw) or bool(struct.unpack_from("Q", raw, after + 8)[0] & 1)
        chunks.append((start + at, size, used))
        at = after
    return chunks


def _child(record, vocab, walk: bool, own_schema: bool = False) -> dict:
    import copy

    from tokendfa import Guide, Index

    schema = copy.deepcopy(record.schema) if own_schema else record.schema

    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    index = Index.from_schema(schema, vocab, lazy=True) if walk else None
    snapshot = bytearray(_SNAPSHOT)  # made (and its objects) before the first reading
    snapshot[::4096] = b"\x01" * len(snapshot[::4096])
    snapshot_at = ctypes.addressof((ctypes.c_char * _SNAPSHOT).from_buffer(snapshot))
    first, second = settled_readers()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    try:
        if walk:
            walk_instances(index, record, vocab)
        else:
            Guide(Index.from_schema(schema, vocab, lazy=True, time_limit=10)).get_mask()
    except Exception as exc:  # noqa: BLE001 - reported
        return {"error": type(exc).__name__}
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    second.read(())
    # the copied pages' contents now, before this analysis writes anywhere
    before = {(s, e): v for s, e, _, v in first.entries()}
    copied, new = [], Counter()
    for start, end, name, entries in second.entries():
        prior = before.get((start, end))
        if prior is None:
            continue
        mine = (entries & _PRESENT != 0) & (entries & _EXCLUSIVE != 0)
        was_mine = (prior & _PRESENT != 0) & (prior & _EXCLUSIVE != 0)
        copied.append((start, end, name, np.nonzero(mine & ~was_mine & (prior & _PRESENT != 0))[0]))
        new[name.rsplit("/", 1)[-1]] += int((mine & (prior & _PRESENT == 0)).sum())
    kept: dict[int, int] = {}
    used = 0
    for start, _end, _name, pages in copied:
        for page in pages.tolist():
            address = start + page * 4096
            for at in (address, address & ~(_POOL - 1)):
                if at >= start and at not in kept and used + 4096 <= _SNAPSHOT:
                    ctypes.memmove(snapshot_at + used, at, 4096)
                    kept[at] = used
                    used += 4096

    def child_bytes(address: int, count: int) -> bytes:
        return b"".join(bytes(snapshot[kept[a]:kept[a] + 4096]) if a in kept else ctypes.string_at(a, 4096)
                        for a in range(address, address + count, 4096))

    parent_memory = f"/proc/{os.getppid()}/mem"

    def parent_bytes(address: int, count: int) -> bytes:
        with open(parent_memory, "rb", buffering=0) as memory:
            memory.seek(address)
            return memory.read(count)

    heaps = [(s, e) for s, e, n, _ in copied if n == "[heap]"]
    chunks = _heap_chunks(parent_bytes, min(s for s, _ in heaps), max(e for _, e in heaps)) if heaps else []
    starts = [c[0] for c in chunks]
    kinds, big = Counter(), Counter()
    for start, _end, name, pages in copied:
        for page in pages.tolist():
            address = start + page * 4096
            pool = address & ~(_POOL - 1)
            size = None
            if name in ("[anon]", "[heap]") and pool >= start:
                _c, _f, _n, _p, _a, index, offset, limit = _POOL_HEADER.unpack(child_bytes(pool, 4096)[:48])
                if index < 32 and limit == _POOL - (index + 1) * 16 and offset <= _POOL:
                    size = (index + 1) * 16
            if size is not None:
                old, now = parent_bytes(pool, _POOL), child_bytes(pool, _POOL)
                low = address - pool
                changed = False
                for block in range(48, _POOL - size + 1, size):
                    if block + size <= low or block >= low + 4096 or old[block:block + size] == now[block:block + size]:
                        continue
                    words = {w for w in range(0, size, 8) if old[block + w:block + w + 8] != now[block + w:block + w + 8]}
                    if not words <= {0, 8, 16}:  # beyond a reference count (offset 0, or 16 after GC links)
                        changed = True
                        break
                kinds[f"pool {size:3d}: {'changed' if changed else 'same'}"] += 1
                continue
            if name != "[heap]":
                kinds[name.rsplit("/", 1)[-1]] += 1
                continue
            old, now = parent_bytes(address, 4096), child_bytes(address, 4096)
            where, written = set(), set()
            for word in range(0, 4096, 8):
                if old[word:word + 8] != now[word:word + 8]:
                    i = bisect.bisect_right(starts, address + word) - 1
                    if i >= 0:
                        chunk, size_of, in_use = chunks[i]
                        where.add("used" if in_use else "free")
                        if in_use and size_of >= 65536:
                            written.add(f"{size_of >> 10} kB chunk at {chunk:#x}")
            big.update(written)
            kinds["[heap] " + ("+".join(sorted(where)) or "same")] += 1
    return {"faults": faults, "kinds": dict(kinds), "new": {k: v for k, v in new.items() if v},
            "big": dict(big.most_common(5))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--names", help="only the schemas whose name holds one of these (comma-separated)")
    parser.add_argument("--walk", action="store_true", help="the walk of the instances, after an untimed build")
    parser.add_argument("--own-schema", action="store_true",
                        help="the child builds a deep copy of the schema made before the region, not the parent's objects")
    parser.add_argument("--faults", default="0,1000000", help="the band of faults the summary sums (lo,hi)")
    args = parser.parse_args(argv)
    low, high = (int(x) for x in args.faults.split(","))
    vocab = warm_parent(args.vocab)
    names = args.names.split(",") if args.names else None
    records = [r for s in source_names() for r in sample(s, args.per_source)
               if names is None or any(n in r.name for n in names)]
    total, new, counted, faults = Counter(), Counter(), 0, 0
    for record in records:
        found = forked(lambda record=record: _child(record, vocab, args.walk, args.own_schema))
        if "error" in found:
            print(f"{record.name:60s} {found['error']}")
            continue
        print(f"{record.name:60s} faults {found['faults']:6d}  copied {sum(found['kinds'].values()):6d}  "
              f"new {sum(found['new'].values()):5d}  {found['big'] or ''}")
        if low <= found["faults"] <= high:
            total.update(found["kinds"])
            new.update(found["new"])
            counted += 1
            faults += found["faults"]
    print(f"\n{counted} schemas with {low}-{high} faults: {faults:,} faults, "
          f"{sum(total.values()):,} pages copied, {sum(new.values()):,} new")
    for kind, count in total.most_common(24):
        print(f"  {count:7d}  {kind}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
