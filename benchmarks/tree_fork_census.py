"""What the schema's regex tree phase (``Compiler.value``) does in a fresh fork: faults by function, calls, objects made.

ttfm_fork.py's method (a warmed parent, gc.collect() + gc.freeze() before
each fork; the child builds the warm-up schema untimed, then the schema):
the child's region is the top-level ``Compiler.value`` call only. Modes:

* ``--mode faults``: a profile hook reads ``ru_minflt`` at every call and
  return (Python and C functions) and charges the difference to the
  function that ran: faults by function (own share), and calls by function.
* ``--mode objects``: nodes interned in the region by class, and
  tracemalloc's allocations by line, still alive at its end.
* ``--mode plain``: the region's faults and time, nodes interned.

``--ab MODULE:NAME`` compares two versions of the code in children of one
parent: NAME is a one-item list the code under test reads (``if FLAG[0]:``
new, else old); each schema runs in ``--pairs`` pairs of children, the
flag False then True, and the paired differences are printed. The parent
runs its warm-up with both values. Fault counts of one code move by +-10
between runs (the parent's heap differs), so versions compared across
checkouts cannot resolve a few faults; paired children can.

``--windows FILE`` writes each region's ``(pid, CLOCK_MONOTONIC start,
end)``, to pick a ``perf record -e page-faults -d -k CLOCK_MONOTONIC``
recording's faults inside the regions; ``--objects-map FILE`` writes the
parent's objects by address (``gc.get_objects()`` and their referents), to
name the objects whose reference counts those faults wrote; ``--pause FILE``
waits after the parent's warm-up until FILE exists (``perf record -p PID``
attached then follows the children, without the warm-up's faults).

The schemas are the median band of a ``ttfm_fork.py --out`` file
(``--rows``, ``--between``), or the whole sample. A development aid.

    .venv/bin/python benchmarks/ttfm_fork.py --per-source 4 --out /tmp/ttfm.json
    .venv/bin/python benchmarks/tree_fork_census.py --rows /tmp/ttfm.json --mode faults
    .venv/bin/python benchmarks/tree_fork_census.py --rows /tmp/ttfm.json --ab tokendfa.schema.ir:FLAG --pairs 2

The profile hook of ``--mode faults`` changes what it measures (its own
frames and counters; ~230 faults a region against ~77 without), and its
charges to a function are suggestive only: the paired ``--ab`` runs and
perf's addresses are what the commits quote.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, use_root, warm_parent  # noqa: E402


def _name(frame_or_fn, event) -> str:
    if event.startswith("c_"):
        fn = frame_or_fn
        owner = getattr(fn, "__self__", None)
        qual = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
        if owner is not None and not isinstance(owner, type(sys)):
            return f"C {type(owner).__name__}.{getattr(fn, '__name__', '?')}"
        return f"C {qual}"
    code = frame_or_fn.f_code
    return f"{Path(code.co_filename).name}:{code.co_firstlineno} {code.co_qualname}"


def _describe(obj) -> str:
    kind = type(obj).__name__
    try:
        if isinstance(obj, str):
            return f"str {obj[:40]!r}"
        if isinstance(obj, type):
            return f"type {obj.__qualname__}"
        if hasattr(obj, "__code__") and hasattr(obj, "__qualname__"):
            return f"function {obj.__module__}.{obj.__qualname__}"
        if kind == "code":
            return f"code {obj.co_filename.rsplit('/', 1)[-1]}:{obj.co_qualname}"
        if isinstance(obj, (int, float, bool)) or obj is None:
            return f"{kind} {obj!r}"
        if isinstance(obj, tuple):
            return f"tuple len {len(obj)} of {type(obj[0]).__name__ if obj else '-'}"
        if isinstance(obj, dict):
            return f"dict len {len(obj)}"
        if kind in ("Text", "Concat", "Alt", "Repeat", "Chars", "Call", "LiteralSet", "Excluding"):
            return f"node {kind} size {obj.size}"
        if kind in ("builtin_function_or_method", "method_descriptor", "wrapper_descriptor",
                    "getset_descriptor", "member_descriptor", "classmethod_descriptor"):
            return f"{kind} {getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"
        if kind == "module":
            return f"module {obj.__name__}"
    except Exception:  # noqa: BLE001
        pass
    return kind


def _dump_objects(path: str) -> None:
    """Every object the collector tracks, and what they refer to, by address."""
    found = {}
    for obj in gc.get_objects():
        found[id(obj)] = obj
        for ref in gc.get_referents(obj):
            found.setdefault(id(ref), ref)
    Path(path).write_text(json.dumps({str(k): _describe(v) for k, v in found.items()}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--rows", default=None, help="ttfm_fork.py --out file: its median band is used")
    parser.add_argument("--between", default="30,70")
    parser.add_argument("--mode", choices=("faults", "objects", "plain"), default="faults")
    parser.add_argument("--root", default=None)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--objects-map", default=None,
                        help="write the parent's objects (address -> what) here after its warm-up")
    parser.add_argument("--ab", default=None,
                        help="MODULE:NAME of a one-item list flag: each schema runs in two children of "
                             "the same parent, flag False then True (paired A/B); the parent warms both")
    parser.add_argument("--pairs", type=int, default=1, help="with --ab: A/B pairs a schema")
    parser.add_argument("--pause", default=None, help="after warming, wait until this file exists (to attach perf)")
    parser.add_argument("--windows", default=None, help="write the regions' (pid, CLOCK_MONOTONIC start, end) here (perf -k CLOCK_MONOTONIC)")
    args = parser.parse_args()
    if args.root:
        use_root(args.root)
    records = [r for s in source_names() for r in sample(s, args.per_source or None)]
    if args.rows:
        rows = [r for r in json.loads(Path(args.rows).read_text()) if "ms" in r
                and r.get("engine", "tokendfa") == "tokendfa"]
        rows.sort(key=lambda r: r["ms"])
        lo, hi = (float(x) / 100 for x in args.between.split(","))
        keep = {r["label"] for r in rows[int(lo * len(rows)):int(hi * len(rows))]}
        records = [r for r in records if r.label in keep]
    from tokendfa.analysis import regex_tree
    from tokendfa.schema import compiler

    # installed before the parent's warm-up: a class changed in the child
    # would void the type's version tag and every specialised site on it
    original = compiler.Compiler.value
    state = {"depth": 0, "active": None}

    def wrapped(self, subs, depth):
        run = state["active"]
        if run is None or state["depth"]:
            return original(self, subs, depth)
        state["depth"] += 1
        try:
            return run(original, self, subs, depth)
        finally:
            state["depth"] -= 1

    compiler.Compiler.value = wrapped
    flag = None
    if args.ab:
        import importlib
        module, _, name = args.ab.partition(":")
        flag = getattr(importlib.import_module(module), name)
        flag[0] = False
    vocab = warm_parent(args.vocab)
    if flag is not None:
        from tokendfa import Guide as _G, Index as _I
        for value in (True, False):
            flag[0] = value
            _G(_I.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    if args.objects_map:
        _dump_objects(args.objects_map)
    if args.pause:
        print(os.getpid(), flush=True)
        while not os.path.exists(args.pause):
            time.sleep(0.1)
    from tokendfa import Guide, Index
    faults_by: Counter = Counter()
    calls_by: Counter = Counter()
    nodes_by: Counter = Counter()
    lines_by: Counter = Counter()
    totals = Counter()
    def child(record):
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        out = {"faults": Counter(), "calls": Counter(), "nodes": Counter(), "lines": Counter(),
               "region_faults": 0, "region_ms": 0.0, "windows": []}
        stack: list = []
        last = [0]

        def hook(frame, event, arg):
            now = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            if stack:
                out["faults"][stack[-1]] += now - last[0]
            if event == "call" or event == "c_call":
                name = _name(arg if event == "c_call" else frame, event)
                out["calls"][name] += 1
                stack.append(name)
            elif stack:
                stack.pop()
            last[0] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

        # read before the region: a module attribute read or a first call inside it
        # would be counted as the region's own fault
        rusage, who, perf, mono, clock = (resource.getrusage, resource.RUSAGE_SELF, time.perf_counter,
                                          time.clock_gettime, time.CLOCK_MONOTONIC)
        pid, setprofile = os.getpid(), sys.setprofile

        def region(original, self, subs, depth):
            mark = len(regex_tree._INTERNED)
            if args.mode == "objects":
                tracemalloc.start(1)
            f0 = rusage(who).ru_minflt
            t0 = perf()
            m0 = mono(clock)
            if args.mode == "faults":
                stack.append("<region>")
                last[0] = rusage(who).ru_minflt
                setprofile(hook)
            try:
                return original(self, subs, depth)
            finally:
                if args.mode == "faults":
                    setprofile(None)
                out["region_ms"] += (perf() - t0) * 1e3
                out["region_faults"] += rusage(who).ru_minflt - f0
                out["windows"].append((pid, m0, mono(clock)))
                for value in list(regex_tree._INTERNED.values())[mark:]:
                    out["nodes"][type(value).__name__] += 1
                if args.mode == "objects":
                    snap = tracemalloc.take_snapshot()
                    tracemalloc.stop()
                    for stat in snap.statistics("lineno"):
                        frame = stat.traceback[0]
                        out["lines"][f"{Path(frame.filename).name}:{frame.lineno}"] += stat.count

        state["active"] = region
        try:
            Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
        finally:
            state["active"] = None
        return {k: (dict(v) if isinstance(v, Counter) else v) for k, v in out.items()}

    done = 0
    windows = []
    per_schema = []
    ab_rows = []
    for record in records:
        if flag is not None:
            pair = {False: [], True: []}
            for _ in range(args.pairs):
                for value in (False, True):
                    flag[0] = value
                    gc.collect()
                    gc.freeze()
                    got = forked(lambda record=record: child(record), describe=lambda exc: type(exc).__name__)
                    if "error" not in got:
                        pair[value].append((got["region_faults"], got["region_ms"]))
            flag[0] = False
            if pair[False] and pair[True]:
                ab_rows.append((record.label, pair))
            continue
        gc.collect()
        gc.freeze()
        row = forked(lambda record=record: child(record), describe=lambda exc: type(exc).__name__)
        if "error" in row:
            continue
        done += 1
        faults_by.update(row["faults"])
        calls_by.update(row["calls"])
        nodes_by.update(row["nodes"])
        lines_by.update(row["lines"])
        totals["faults"] += row["region_faults"]
        totals["ms"] += row["region_ms"]
        windows.extend(row.get("windows", []))
        per_schema.append((row["region_faults"], row["region_ms"], record.label, sum(row["nodes"].values())))
    if flag is not None:
        import statistics
        fa = [statistics.mean(f for f, _ in p[False]) for _, p in ab_rows]
        fb = [statistics.mean(f for f, _ in p[True]) for _, p in ab_rows]
        ma = [min(m for _, m in p[False]) for _, p in ab_rows]
        mb = [min(m for _, m in p[True]) for _, p in ab_rows]
        print(f"A/B over {len(ab_rows)} schemas, {args.pairs} pair(s) each (A: flag False, B: True)")
        print(f"  region faults mean A {statistics.mean(fa):.1f}  B {statistics.mean(fb):.1f}  "
              f"paired diff mean {statistics.mean(b - a for a, b in zip(fa, fb)):+.2f} "
              f"median {statistics.median(b - a for a, b in zip(fa, fb)):+.1f}; B fewer in "
              f"{sum(b < a for a, b in zip(fa, fb))}, more in {sum(b > a for a, b in zip(fa, fb))}")
        print(f"  region ms (fastest of the pairs) median A {statistics.median(ma):.3f}  B {statistics.median(mb):.3f}  "
              f"paired ratio median {statistics.median(b / a for a, b in zip(ma, mb)):.3f}")
        return 0
    print(f"{done} schemas; region (Compiler.value) mean {totals['ms'] / done:.3f} ms, "
          f"{totals['faults'] / done:.1f} faults; nodes interned mean "
          f"{sum(nodes_by.values()) / done:.1f}: " + ", ".join(
              f"{k} {v / done:.1f}" for k, v in nodes_by.most_common()))
    if args.mode == "faults":
        print(f"faults by function (mean a schema; calls a schema), top {args.top}:")
        for name, n in faults_by.most_common(args.top):
            print(f"  {n / done:6.2f}  {calls_by[name] / done:8.1f}  {name}")
        print(f"calls by function, top {args.top} (total {sum(calls_by.values()) / done:.0f} a schema, "
              f"{len(calls_by)} distinct):")
        for name, n in calls_by.most_common(args.top):
            print(f"  {n / done:8.1f}  {faults_by[name] / done:6.2f}  {name}")
    if args.mode == "objects":
        print(f"blocks alive at the region's end by line, top {args.top}:")
        for name, n in lines_by.most_common(args.top):
            print(f"  {n / done:8.1f}  {name}")
    if args.windows:
        Path(args.windows).write_text(json.dumps(windows))
    for f, ms, label, n in sorted(per_schema):
        print(f"  {f:4d} faults {ms:6.3f} ms {n:5d} nodes  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
