"""Where a fresh fork's time to first mask goes, phase by phase: wall, CPU and page faults.

``ttfm_fork.py``'s method (a warmed parent that runs ``gc.collect()`` and
``gc.freeze()`` before each fork, as MaskBench's does, unless
``--no-fork-gc``; each schema in a fresh fork of it that builds the warm-up
schema untimed, then ``Index.from_schema(schema,
vocab)`` and the first mask timed), with the phases of the schema path
wrapped in the parent before the fork: each wrapper reads the wall clock,
the CPU clock and ``ru_minflt`` on entry and exit, and a phase is charged
its own share (its time less that of the wrapped phases it called; a
recursive call counts once). The phases:

* ``shape``: ``_schema_shape`` (the walk that finds ``$ref`` and counts values)
* ``meta``: ``_dialect`` (the dialect and the meta-schema check)
* ``resolver``: ``_resolver``; ``compiler-init``: ``Compiler.__init__``
* ``ir``: ``Compiler.value`` (the schema compiled to the regex tree) and
  ``visit``: ``Compiler.visit_each_point`` (deferred recursion's points)
* ``valid``: ``Compiler.valid`` (an enum value or a name checked with
  jsonschema), ``pattern``: ``strings.translate_pattern`` (a user's pattern
  read), ``flat``: ``Flat.__init__``, ``ref``: ``keywords._follow`` (a
  ``$ref`` looked up with ``referencing``; all within ``ir``, each its own share)
* ``result``: ``_result``; ``metadata``: ``_schema_metadata``
* ``nfa``: ``_LazyNFA.__init__`` (the main tree's Thompson NFA);
  ``thompson``: the compiled construction within it and within fragments
  (``thompson_fragment``: the NFA's rows made as Python tuples);
  ``fragment``: ``_LazyNFA._compile`` (a definition's fragment, at its first call)
* ``lazydfa``: the rest of ``LazyByteDFA.__init__`` (the initial closure,
  the table, the native core's context)
* ``index-init``: the rest of ``LazyIndex.__init__`` (tables, liveness)
* ``first-row``: ``LazyIndex.get_mask`` less the fragments it compiled
* ``other``: the timed region less all of the above (``regex_from_schema``'s
  own set-up, ``BuildConfig``, limits, the Guide)

The means are over the schemas whose wall time lies between the
``--between`` percentiles (the median band by default: where p50 is
decided, not the slow schemas that dominate a plain sum). ``--in-process``
builds each schema once in this process instead, no fork: what the fork
adds is the difference. The wrappers cost a few microseconds and a fault
or two per call (their frames), so the total runs above ``ttfm_fork.py``'s
for the same schemas; read the shares and the faults, not the absolute sum.

    .venv/bin/python benchmarks/ttfm_phases.py --per-source 4
    .venv/bin/python benchmarks/ttfm_phases.py --per-source 4 --in-process
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names
from benchmarks.support.isolation import forked
from benchmarks.ttfm_fork import WARM_UP, use_root, warm_parent

PHASES = ("shape", "meta", "resolver", "compiler-init", "ir", "valid", "pattern", "flat", "ref", "visit",
          "result", "metadata",
          "nfa", "thompson", "fragment", "lazydfa", "index-init", "first-row", "other")


class _Meter:
    """Per-phase own wall/CPU/faults, with a stack to charge nested phases
    to themselves only. Its lists are made before the fork and written in
    place, so counting copies few pages of its own."""

    def __init__(self) -> None:
        self.totals = {name: [0.0, 0.0, 0] for name in PHASES}
        self.stack: list = []   # [name, wall0, cpu0, faults0, child wall, child cpu, child faults]
        self.depth = {name: 0 for name in PHASES}

    def reset(self) -> None:
        for total in self.totals.values():
            total[0] = total[1] = 0.0
            total[2] = 0
        self.stack.clear()

    def wrap(self, name: str, function):
        meter = self

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if meter.depth[name]:
                return function(*args, **kwargs)
            meter.depth[name] += 1
            frame = [name, time.perf_counter(), time.process_time(),
                     resource.getrusage(resource.RUSAGE_SELF).ru_minflt, 0.0, 0.0, 0]
            meter.stack.append(frame)
            try:
                return function(*args, **kwargs)
            finally:
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - frame[3]
                cpu = time.process_time() - frame[2]
                wall = time.perf_counter() - frame[1]
                meter.stack.pop()
                meter.depth[name] -= 1
                total = meter.totals[name]
                total[0] += wall - frame[4]
                total[1] += cpu - frame[5]
                total[2] += faults - frame[6]
                if meter.stack:
                    parent = meter.stack[-1]
                    parent[4] += wall
                    parent[5] += cpu
                    parent[6] += faults
        return wrapper


def install(meter: _Meter) -> None:
    """Wrap the schema path's phases (module functions where they are looked up)."""
    from tokendfa.analysis import lazydfa
    from tokendfa.lazy import index as lazy_index
    from tokendfa.runtime import index as runtime_index
    from tokendfa.schema import api, compiler, ir, keywords, strings

    for module, name, phase in ((api, "_schema_shape", "shape"), (api, "_dialect", "meta"),
                                (api, "_resolver", "resolver"), (api, "_result", "result"),
                                (runtime_index, "_schema_metadata", "metadata"),
                                (strings, "translate_pattern", "pattern"),
                                (keywords, "_follow", "ref")):
        setattr(module, name, meter.wrap(phase, getattr(module, name)))
    for cls, name, phase in ((compiler.Compiler, "__init__", "compiler-init"),
                             (compiler.Compiler, "value", "ir"),
                             (compiler.Compiler, "visit_each_point", "visit"),
                             (compiler.Compiler, "valid", "valid"),
                             (ir.Flat, "__init__", "flat"),
                             (lazydfa._LazyNFA, "__init__", "nfa"),
                             (lazydfa._LazyNFA, "_compile", "fragment"),
                             (lazydfa.LazyByteDFA, "__init__", "lazydfa"),
                             (lazy_index.LazyIndex, "__init__", "index-init"),
                             (lazy_index.LazyIndex, "get_mask", "first-row")):
        setattr(cls, name, meter.wrap(phase, getattr(cls, name)))
    lazydfa.thompson_fragment = meter.wrap("thompson", lazydfa.thompson_fragment)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4, help="schemas a source (sample())")
    parser.add_argument("--vocab", default="qwen2.5", help="a builtin vocabulary")
    parser.add_argument("--root", default=None, help="import tokendfa from this checkout")
    parser.add_argument("--between", default="25,75",
                        help="percentiles of the children's wall times whose phases are summed")
    parser.add_argument("--out", default=None, help="rows as JSON")
    parser.add_argument("--in-process", action="store_true",
                        help="each schema built once in this process, no fork (what the fork adds)")
    parser.add_argument("--no-fork-gc", action="store_true",
                        help="the parent forks without first running gc.collect() and gc.freeze() "
                             "(bench_maskbench.py --fork-gc none)")
    args = parser.parse_args()
    if args.root:
        use_root(args.root)
    vocab = warm_parent(args.vocab)
    from tokendfa import Guide, Index

    meter = _Meter()
    install(meter)
    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()  # the wrappers' own first run
    records = [record for source in source_names() for record in sample(source, args.per_source or None)]
    rows = []
    for record in records:
        def child(record=record):
            Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
            meter.reset()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            wall, cpu = time.perf_counter(), time.process_time()
            frame = ["other", wall, cpu, faults, 0.0, 0.0, 0]
            meter.stack.append(frame)
            Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            meter.totals["other"] = [wall - frame[4], cpu - frame[5], faults - frame[6]]
            return {"ms": wall * 1e3, "cpu": cpu * 1e3, "faults": faults,
                    "phases": {k: [v[0] * 1e3, v[1] * 1e3, v[2]] for k, v in meter.totals.items()}}

        if args.in_process:
            try:
                row = child()
            except Exception as exc:  # noqa: BLE001 - reported, as a child's
                row = {"error": type(exc).__name__}
        else:
            if not args.no_fork_gc:
                gc.collect()   # as bench_maskbench.py's parent (--fork-gc freeze)
                gc.freeze()
            row = forked(child, describe=lambda exc: type(exc).__name__)
        row["label"] = f"{record.source}:{record.line}"
        rows.append(row)
    done = sorted((row for row in rows if "ms" in row), key=lambda r: r["ms"])
    lo, hi = (float(x) for x in args.between.split(","))
    kept = done[int(lo / 100 * len(done)):max(int(hi / 100 * len(done)), 1)]
    print(f"{len(rows)} schemas, {len(done)} compiled; phases summed over {len(kept)} "
          f"(percentiles {lo:g}-{hi:g} of wall time)")
    for key, name in (("ms", "wall ms"), ("cpu", "CPU ms "), ("faults", "faults ")):
        values = sorted(row[key] for row in done)
        print(f"  {name}: p50 {statistics.median(values):.2f}  "
              f"p90 {values[min(len(values) - 1, int(0.9 * len(values)))]:.2f}")
    n = len(kept)
    print(f"  {'phase':14s} {'wall ms':>8s} {'CPU ms':>8s} {'faults':>7s}   (mean a schema)  wall share")
    whole = sum(row["ms"] for row in kept) / n
    for phase in PHASES:
        wall = sum(row["phases"][phase][0] for row in kept) / n
        cpu = sum(row["phases"][phase][1] for row in kept) / n
        faults = sum(row["phases"][phase][2] for row in kept) / n
        print(f"  {phase:14s} {wall:8.3f} {cpu:8.3f} {faults:7.1f}   {100 * wall / whole:5.1f}%")
    print(f"  {'total':14s} {whole:8.3f} {sum(r['cpu'] for r in kept) / n:8.3f} "
          f"{sum(r['faults'] for r in kept) / n:7.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
