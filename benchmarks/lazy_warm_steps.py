#!/usr/bin/env python
"""The lazy engine's warm steps (TBM p50) replayed in a tight loop: a mask and a commit a token, rows already computed.

MaskBench's TBM p50 is a warm step: the state's row was computed by an
earlier step, so the step costs the Python of the benchmark's adapter, the
:class:`tokendfa.Guide`, the lazy index's lookups and the copy of the mask.
This builds each schema of the sample's lazy index in this process, walks
its instances once (computing the rows), then walks them again ``--repeats``
times exactly as ``bench_maskbench.py`` times a step (``TokendfaEngine``'s
``fill_mask`` and ``consume``, between two ``perf_counter_ns``), every row
warm. It reports the p50/p90 of the warm steps of each pass (the best pass
and the median one) and their mean.

``--forked`` measures MaskBench's own steps instead: each schema in a
child forked from the warmed parent (its warm-up schema built first, as
``bench_maskbench.py`` does), every step timed once, cold ones included,
with the minor page faults it took (read between the steps, untimed): the
p50 of those steps is MaskBench's TBM p50, and the faults show what a warm
step pays for its first write to a page the child shares with the parent.

``--loops N --no-timing`` instead runs N untimed passes and prints the steps
walked, for instruction counts that do not move with the machine's load
(callgrind: the difference between ``--loops 2`` and ``--loops 0`` over
twice the steps is a warm step's instructions; ``--names`` keeps it short):

    python benchmarks/lazy_warm_steps.py --per-source 4 --repeats 7
    python benchmarks/lazy_warm_steps.py --per-source 4 --forked
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p python benchmarks/lazy_warm_steps.py \\
        --per-source 1 --loops 2 --no-timing

For an A/B, run this file with another checkout's interpreter (its
``.venv/bin/python``): the engine imported is that checkout's, the walk the same.

Measured (qwen2.5, 2 shared cores at load 3-4, A/B alternating): on
92337d8, ``--per-source 4 --forked`` TBM p50 3.78-3.90 us and ~29,500
instructions a warm step (the callgrind recipe above, ``--sources
Github_easy,Kubernetes,Snowplow``), 7,100 of them numpy's cast loop copying
the mask; with the compiled warm step (``_cwalk.copy_mask``,
``_cwalk.advance_token``) and no ``LazyIndex.__getattr__``, 2.11-2.34 us
and ~9,600 besides the copy's memmove (which callgrind counts a byte an
instruction under ``rep movsb``: ~19,000).

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_maskbench import WARM_UP_SCHEMAS  # noqa: E402
from support.data import SCHEMA_DIR, compact, sample, source_names  # noqa: E402
from support.engines import TokendfaEngine  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402


def walks(records, vocab):
    """(engine, [instance tokens]) for each schema the lazy engine builds."""
    from tokendfa import Index

    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    found = []
    for record in records:
        try:
            engine = TokendfaEngine(Index.from_schema(record.schema, vocab, lazy=True))
        except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
            continue
        found.append((record, engine, [tuple(vocab.encode(compact(case.data))) for case in record.tests]))
    return found


def walk(engine, instances, step_ns: list[int] | None) -> int:
    """One pass, as bench_maskbench.judge walks it; returns the steps taken."""
    pc = time.perf_counter_ns
    steps = 0
    for tokens in instances:
        engine.reset()
        for token in tokens:
            if step_ns is None:
                engine.fill_mask()
                ok = engine.consume(token)
            else:
                t0 = pc()
                engine.fill_mask()
                ok = engine.consume(token)
                step_ns.append(pc() - t0)
            steps += 1
            if not ok:
                break
    return steps


def forked_steps(record, vocab) -> list[tuple[int, int]]:
    """(ns, minor faults) of every step of ``record``'s walk, in a child as
    bench_maskbench.run_engine walks it (its first walk: cold steps included)."""
    from tokendfa import Index

    def work() -> list[tuple[int, int]]:
        warm = TokendfaEngine(Index.from_schema(WARM_UP_SCHEMAS["object"], vocab, lazy=True))
        warm.fill_mask()
        del warm
        try:
            engine = TokendfaEngine(Index.from_schema(record.schema, vocab, lazy=True))
            engine.fill_mask()
        except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
            return []
        pc, usage, me = time.perf_counter_ns, resource.getrusage, resource.RUSAGE_SELF
        found = []
        for case in record.tests:
            engine.reset()
            for token in vocab.encode(compact(case.data)):
                faults = usage(me).ru_minflt
                t0 = pc()
                engine.fill_mask()
                ok = engine.consume(token)
                elapsed = pc() - t0
                found.append((elapsed, usage(me).ru_minflt - faults))
                if not ok:
                    break
        return found

    try:
        return [tuple(step) for step in answer_in_child(work, 60.0)]
    except ChildFailed:
        return []


def report_forked(records, vocab) -> None:
    import tokendfa.builder.fast  # noqa: F401 - loaded before the forks, as bench_maskbench does
    from tokendfa import Index

    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    steps = [step for record in records for step in forked_steps(record, vocab)]
    times = sorted(ns for ns, _ in steps)
    clean = sorted(ns for ns, faults in steps if not faults)
    quick = [faults for ns, faults in steps if ns < 20_000]
    print(f"{len(records)} schemas, {len(steps)} steps: TBM p50 {times[len(times) // 2] / 1e3:.2f} us, "
          f"p90 {times[len(times) * 9 // 10] / 1e3:.2f}; steps under 20 us: {len(quick)}, "
          f"{sum(1 for f in quick if f)} of them with faults ({sum(quick)} faults); "
          f"p50 of the steps with no fault {clean[len(clean) // 2] / 1e3:.2f} us")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-source", type=int, default=4)
    p.add_argument("--sources", default="all")
    p.add_argument("--names", default="", help="comma-separated schema names or source:line labels to keep")
    p.add_argument("--vocab", default="qwen2.5")
    p.add_argument("--schema-dir", type=Path, default=SCHEMA_DIR)
    p.add_argument("--repeats", type=int, default=5, help="timed passes over every warm walk")
    p.add_argument("--loops", type=int, default=0, help="untimed passes (with --no-timing)")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--forked", action="store_true", help="each schema's first walk in a forked child, as MaskBench")
    args = p.parse_args(argv)
    from tokendfa import Vocabulary

    vocab = Vocabulary.from_spec(args.vocab)
    vocab.byte_matrix()
    vocab.prepare()
    sources = source_names(args.schema_dir) if args.sources == "all" else args.sources.split(",")
    records = [r for s in sources for r in sample(s, args.per_source or None, schema_dir=args.schema_dir)]
    if args.names:
        keep = set(args.names.split(","))
        records = [r for r in records if r.name in keep or r.label in keep]
    if args.forked:
        report_forked(records, vocab)
        return 0
    found = walks(records, vocab)
    for _, engine, instances in found:  # every row computed
        walk(engine, instances, None)
    gc.collect()
    if args.no_timing:
        steps = sum(walk(engine, instances, None) for _ in range(args.loops) for _, engine, instances in found)
        print(f"{len(found)} schemas, {args.loops} passes, {steps} warm steps")
        return 0
    p50s, p90s, means = [], [], []
    for _ in range(args.repeats):
        step_ns: list[int] = []
        for _, engine, instances in found:
            walk(engine, instances, step_ns)
        step_ns.sort()
        p50s.append(step_ns[len(step_ns) // 2])
        p90s.append(step_ns[len(step_ns) * 9 // 10])
        means.append(sum(step_ns) / len(step_ns))
    print(f"{len(found)} schemas, {len(step_ns)} warm steps a pass, {args.repeats} passes: "
          f"p50 best {min(p50s) / 1e3:.2f} us, median {statistics.median(p50s) / 1e3:.2f}; "
          f"p90 best {min(p90s) / 1e3:.2f}, median {statistics.median(p90s) / 1e3:.2f}; "
          f"mean best {min(means) / 1e3:.2f}, median {statistics.median(means) / 1e3:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
