"""What a fresh fork's child wrote on each parent page it copied: objects made, freed, or only touched.

``fork_pages.py`` counts the pages a child copies while it builds a schema
and serves its first mask, by kind; this names what is on them. After the
schema the child copies its heap's mappings aside (buffers made
beforehand), then diffs each copied page against the parent's same page,
read from ``/proc/<parent>/mem``, slot by slot on pymalloc's pools:

* ``new T``: a live object of type T where the parent had none, or another;
* ``transient T``: a slot free in both, written meanwhile (T: the type its
  last object left behind); a tuple on CPython's free list counts here;
* ``refcnt T`` / ``mutated T``: the parent's object, its count or more changed
  (a str's cached hash, a code object's specialised bytecode);
* ``nochange``: the page was copied but reads the same (a count raised and
  lowered again, an object made and freed in place);

and each ``[heap]`` page by what its changed words lie in (a code object, a
dict's table, a list's items, a type), found from the objects reachable from
the modules and the collector. Printed: pages a reason appears in and pages
it alone explains, slots by reason, and the contents of new and transient
tuples (their items' types), averaged over the schemas whose faults lie in
``--faults``.

    .venv/bin/python benchmarks/fork_slots.py --per-source 4 --faults 40,300

Linux and CPython 3.11 only (pool layout, object headers), reading another
process's memory (same user). A development aid, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import resource
import struct
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fork_pages import (  # noqa: E402
    _EXCLUSIVE,
    _POOL,
    _POOL_HEADER,
    _PRESENT,
    settled_readers,
)
from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, warm_parent  # noqa: E402

_HEAP_LIMIT = 48 << 20      # anonymous mappings copied aside: the arenas, not the vocabulary's arrays


def _types() -> dict[int, type]:
    found: dict[int, type] = {}
    stack = [object]
    while stack:
        t = stack.pop()
        if id(t) in found:
            continue
        found[id(t)] = t
        try:
            stack.extend(type.__subclasses__(t))
        except TypeError:
            pass
    for obj in gc.get_objects():
        if isinstance(obj, type):
            found.setdefault(id(obj), obj)
    return found


class _Names:
    """Types, code objects, functions and module dicts by address."""

    def __init__(self) -> None:
        self.types = _types()
        self.codes: dict[int, str] = {}
        self.named: dict[int, str] = {}
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType):
                self._code(obj.__code__)
                self.named[id(obj)] = "function " + obj.__qualname__
            elif isinstance(obj, types.ModuleType):
                self.named[id(obj.__dict__)] = "module dict " + obj.__name__
        self.small0 = id(0)

    def _code(self, code) -> None:
        if id(code) not in self.codes:
            self.codes[id(code)] = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_qualname}"
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    self._code(const)

    def type_name(self, address: int) -> str | None:
        t = self.types.get(address)
        return None if t is None else t.__name__


class _Snapshot:
    """The heap's mappings copied aside at once, into a buffer made beforehand."""

    def __init__(self) -> None:
        regions = []
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                start, end = (int(x, 16) for x in parts[0].split("-"))
                name = parts[5] if len(parts) > 5 else "[anon]"
                if parts[1].startswith("rw") and (name == "[heap]" or (name == "[anon]" and end - start <= _HEAP_LIMIT)):
                    regions.append((start, end))
        self.starts = np.array([r[0] for r in regions], dtype=np.int64)
        self.ends = np.array([r[1] for r in regions], dtype=np.int64)
        total = int((self.ends - self.starts).sum())
        self.buffer = bytearray(total)
        self.buffer[::4096] = b"\x01" * len(self.buffer[::4096])
        self.base = ctypes.addressof((ctypes.c_char * total).from_buffer(self.buffer))

    def take(self) -> None:
        at = self.base
        for i in range(len(self.starts)):
            size = int(self.ends[i] - self.starts[i])
            ctypes.memmove(at, int(self.starts[i]), size)
            at += size

    def holds(self, address: int, size: int) -> bool:
        return bool(((self.starts <= address) & (address + size <= self.ends)).any())

    def read(self, address: int, size: int) -> bytes:
        at = 0
        for i in range(len(self.starts)):
            start, end = int(self.starts[i]), int(self.ends[i])
            if start <= address and address + size <= end:
                return bytes(self.buffer[at + address - start:at + address - start + size])
            at += end - start
        return ctypes.string_at(address, size)


def _copied(before, after) -> list[tuple[int, str, int]]:
    old = {(s, e): v for s, e, _, v in before}
    out = []
    for start, end, name, entries in after:
        prior = old.get((start, end))
        if prior is None:
            continue
        mine = (entries & _PRESENT != 0) & (entries & _EXCLUSIVE != 0)
        was_mine = (prior & _PRESENT != 0) & (prior & _EXCLUSIVE != 0)
        for page in np.nonzero(mine & ~was_mine & (prior & _PRESENT != 0))[0]:
            out.append((start + int(page) * 4096, name, start))
    return out


class _Diff:
    def __init__(self, names: _Names, snapshot: _Snapshot, parent_mem) -> None:
        self.names, self.snap, self.mem = names, snapshot, parent_mem
        self.ranges: list | None = None
        self.tuples: Counter = Counter()

    def _parent(self, address: int, size: int) -> bytes:
        self.mem.seek(address)
        return self.mem.read(size)

    def _item(self, address: int):
        n = self.names
        if n.small0 - 5 * 32 <= address <= n.small0 + 256 * 32 and (address - n.small0) % 32 == 0:
            return (address - n.small0) // 32
        if address in n.types:
            return "type " + n.type_name(address)
        if not self.snap.holds(address, 16):    # a stale pointer may lead anywhere
            return "?"
        words = struct.unpack("2Q", self.snap.read(address, 16))
        kind = n.type_name(words[1])
        return "?" if kind is None else kind + (" (freed)" if words[0] > 1 << 40 else "")

    def _kind(self, words) -> tuple[int | None, str | None]:
        """Where an object's header starts in a slot (0, or 2 after a GC
        header) and its type, or (None, None)."""
        t = self.names.type_name
        if len(words) > 1 and t(words[1]) and 0 < words[0] < 1 << 40:
            return 0, t(words[1])
        if len(words) > 3 and t(words[3]) and 0 < words[2] < 1 << 40:
            return 2, t(words[3])
        return None, None

    def pool_page(self, address: int, start: int) -> tuple[int, Counter] | None:
        pool = address & ~(_POOL - 1)
        if pool < start:
            return None
        _c, _f, _n, _p, _a, index, offset, limit = _POOL_HEADER.unpack(ctypes.string_at(pool, 48))
        size = (index + 1) * 16
        if not (index < 32 and limit == _POOL - size and offset <= _POOL):
            return None
        parent, child = self._parent(address, 4096), self.snap.read(address, 4096)
        reasons: Counter = Counter()
        if address == pool and parent[:48] != child[:48]:
            reasons["pool header"] += 1
        first = pool + 48
        slot = first + max(0, (address - first) // size) * size
        while slot < address + 4096:
            lo, hi = max(slot, address), min(slot + size, address + 4096)
            if hi > lo and parent[lo - address:hi - address] != child[lo - address:hi - address]:
                pw = struct.unpack(f"{size // 8}Q", self._parent(slot, size))
                cw = struct.unpack(f"{size // 8}Q", self.snap.read(slot, size))
                at_p, type_p = self._kind(pw)
                at_c, type_c = self._kind(cw)
                if type_c is None:
                    if type_p:
                        reasons[f"freed {type_p}"] += 1
                    else:
                        last = self.names.type_name(cw[3]) or self.names.type_name(cw[1]) or "?"
                        reasons[f"transient {last}"] += 1
                        if last == "tuple":
                            items = [self._item(x) for x in cw[6:6 + min(cw[4], 5) - 1]]
                            self.tuples[f"transient {cw[4]}-tuple {tuple(items)}"] += 1
                elif type_p != type_c or at_p != at_c:
                    reasons[f"new {type_c}"] += 1
                    if type_c == "tuple":
                        items = [self._item(x) for x in cw[5:5 + min(cw[4], 5)]]
                        self.tuples[f"new {cw[4]}-tuple {tuple(items)}"] += 1
                else:
                    changed = [j for j in range(len(pw)) if pw[j] != cw[j] and j != at_c and not (at_c == 2 and j < 2)]
                    name = self.names.named.get(slot + at_c * 8, "")
                    if changed:
                        reasons[f"mutated {type_c} {name}".rstrip()] += 1
                    elif pw[at_c] != cw[at_c]:
                        reasons[f"refcnt {type_c} {name}".rstrip()] += 1
                    else:
                        reasons[f"gc-link {type_c}"] += 1
            slot += size
        return size, reasons

    def _heap_ranges(self) -> list:
        found = []
        seen: set = set()

        def table(d, name: str) -> None:
            if type(d) is not dict or id(d) in seen:   # the exact layout read below
                return
            seen.add(id(d))
            keys = struct.unpack("6Q", ctypes.string_at(id(d), 48))[4]
            if not keys:
                return
            header = ctypes.string_at(keys, 32)
            usable = ((1 << header[8]) * 2) // 3
            total = 32 + (1 << header[9]) + usable * (24 if header[10] == 0 else 16)
            if total > 512:
                found.append((keys, keys + total, f"dict table {name}"))

        for module_name, module in list(sys.modules.items()):
            if module is None:
                continue
            try:
                names = vars(module)
            except TypeError:
                continue
            table(names, f"globals {module_name}")
            for key, value in list(names.items()):
                if isinstance(value, dict):
                    table(value, f"{module_name}.{key}")
        for obj in gc.get_objects():
            if isinstance(obj, dict):
                table(obj, "(a dict)")
            elif isinstance(obj, list) and len(obj) > 60:
                items, allocated = struct.unpack("5Q", ctypes.string_at(id(obj), 40))[3:5]
                found.append((items, items + 8 * allocated, "list items"))
            elif isinstance(obj, type):
                found.append((id(obj), id(obj) + type.__sizeof__(obj), f"type {obj.__qualname__}"))
        for address, name in self.names.codes.items():
            code = ctypes.cast(address, ctypes.py_object).value
            found.append((address, address + code.__sizeof__(), "code " + name))
        found.sort()
        return found

    def heap_page(self, address: int) -> Counter:
        if self.ranges is None:
            self.ranges = self._heap_ranges()
        parent = np.frombuffer(self._parent(address, 4096), dtype=np.uint64)
        child = np.frombuffer(self.snap.read(address, 4096), dtype=np.uint64)
        changed = np.nonzero(parent != child)[0]
        found: Counter = Counter()
        for j in changed:
            word = address + int(j) * 8
            found[next((name for lo, hi, name in self.ranges if lo <= word < hi), "?")] = 1
        if list(found) == ["?"]:
            n = len(changed)
            found = Counter({f"? ({'1 word' if n == 1 else '2-4 words' if n <= 4 else '5-32 words' if n <= 32 else 'more words'})": 1})
        return found or Counter({"nochange": 1})


def _child(schema, vocab, names: _Names, band: tuple[int, int]) -> dict:
    from tokendfa import Guide, Index

    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    snapshot = _Snapshot()
    first, second = settled_readers()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    Guide(Index.from_schema(schema, vocab, lazy=True, time_limit=10)).get_mask()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    second.read(())
    snapshot.take()
    if not band[0] <= faults <= band[1]:
        return {"faults": faults}   # outside the band: not diffed (a large schema's pages take minutes)
    with open(f"/proc/{os.getppid()}/mem", "rb") as mem:
        diff = _Diff(names, snapshot, mem)
        pages, slots, alone, heap = Counter(), Counter(), Counter(), Counter()
        for address, name, start in _copied(first.entries(), second.entries()):
            found = diff.pool_page(address, start) if name in ("[anon]", "[heap]") else None
            if found is None:
                pages[name.rsplit("/", 1)[-1]] += 1
                if name == "[heap]":
                    heap.update(diff.heap_page(address))
                continue
            size, reasons = found
            for reason, count in reasons.items():
                slots[f"{size:3d} B {reason}"] += count
                pages[f"{size:3d} B {reason}"] += 1
            if not reasons:
                pages[f"{size:3d} B nochange"] += 1
            if len(reasons) <= 1:
                alone[f"{size:3d} B {next(iter(reasons), 'nochange')}"] += 1
    return {"faults": faults, "pages": pages, "alone": alone, "slots": slots, "heap": heap,
            "tuples": diff.tuples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--sources", default="all")
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--faults", default="40,300", help="the band of faults the summary averages (lo,hi)")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    low, high = (int(x) for x in args.faults.split(","))
    vocab = warm_parent(args.vocab)
    names = _Names()    # in the parent: made in each child, its objects would copy the pages to count
    records = [r for s in (source_names() if args.sources == "all" else args.sources.split(","))
               for r in sample(s, args.per_source or None)]
    totals = {key: Counter() for key in ("pages", "alone", "slots", "heap", "tuples")}
    band = 0
    for record in records:
        row = forked(lambda record=record: _child(record.schema, vocab, names, (low, high)), describe=repr)
        if "error" in row or not low <= row["faults"] <= high:
            continue
        band += 1
        for key, total in totals.items():
            total.update(row[key])
    print(f"{band} schemas with {low}-{high} faults; a schema's average:")
    for key, title in (("pages", "copied pages a reason appears on"), ("alone", "copied pages one reason alone explains"),
                       ("slots", "slots by reason"), ("heap", "[heap] pages by what their changed words lie in"),
                       ("tuples", "new and transient tuples on copied pages")):
        print(f"== {title}")
        for reason, count in totals[key].most_common(args.top):
            print(f"  {count / max(band, 1):7.1f}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
