#!/usr/bin/env python
"""Minor page faults per lazy step on the MaskBench sample, in forked children.

Each schema runs in a fresh child forked from a warmed parent (vocabulary
prepared, a trivial schema built), as ``bench_maskbench.py`` does, its first
mask made untimed (``support.walks.measured_steps``); every step
(mask + commit) records its nanoseconds and its minor faults
(``getrusage(RUSAGE_SELF).ru_minflt``). Prints the faults of the steps in the
250-1500 us band (p50/p90 and their share of the band's time at ``--fault-us``
a fault) and the worst steps with their faults.

    python benchmarks/lazy_step_faults.py --per-source 8 [--out faults.json]
    PYTHONPATH=DIR python benchmarks/lazy_step_faults.py   # the tokendfa package in DIR

Fault counts move little from run to run (unlike the times on a shared
machine), so two versions compare on one run each. glibc's
``mallopt(M_MMAP_THRESHOLD / M_TRIM_THRESHOLD = 1 GB)`` set in the parent
before the forks left the count unchanged (103.6k -> 104.2k on
``--per-source 4``): the faults are first writes to pages new to the child
(fresh or inherited), not blocks malloc unmaps and maps again.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import sample, source_names  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402


def _steps(record, vocab) -> list[tuple[int, int, int]]:
    """(step index, ns, minor faults) of every step over the record's instances."""
    def start() -> tuple[int, int]:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter_ns()

    def stop(mark: tuple[int, int], step: int) -> tuple[int, int, int]:
        elapsed = time.perf_counter_ns() - mark[1]
        return step, elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - mark[0]

    return measured_steps(record, vocab, start, stop)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--fault-us", type=float, default=1.0, help="assumed cost of one fault")
    parser.add_argument("--only", help="run only the schemas whose name contains this")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    records = [r for s in source_names() for r in sample(s, args.per_source or None)
               if not args.only or args.only in r.name]
    rows = []
    for record in records:
        try:
            steps = answer_in_child(lambda record=record: _steps(record, vocab), 120)
        except ChildFailed:
            steps = []
        # one array a schema: a list of tuples in this process would be
        # tens of thousands of objects that a collection in each later child
        # writes to (a copy-on-write fault a page), ~3,000 faults of one step
        rows.append((record.name, np.array(steps, dtype=np.int64).reshape(-1, 3)))
    if args.out:
        Path(args.out).write_text(json.dumps([(name, *step) for name, found in rows for step in found.tolist()]))
    names = [name for name, found in rows for _ in range(len(found))]
    found = np.concatenate([found for _, found in rows]) if rows else np.zeros((0, 3), dtype=np.int64)
    steps_at, ns, flt = found[:, 0], found[:, 1].astype(float), found[:, 2].astype(float)
    band = (ns >= 2.5e5) & (ns <= 1.5e6)
    print(f"{len(ns):,} steps; p50 {np.percentile(ns, 50) / 1e3:.2f} us, p99 {np.percentile(ns, 99) / 1e3:.0f} us, "
          f"max {ns.max() / 1e6:.1f} ms; faults in all {int(flt.sum()):,}")
    if band.any():
        print(f"band 250-1500 us: {int(band.sum())} steps, faults p50 {np.percentile(flt[band], 50):.0f} "
              f"p90 {np.percentile(flt[band], 90):.0f}, {flt[band].sum() * args.fault_us / 1e3:.1f} ms of "
              f"{ns[band].sum() / 1e6:.1f} ms at {args.fault_us:g} us a fault")
    slow = ns > 1.5e6
    if slow.any():
        print(f"over 1.5 ms: {int(slow.sum())} steps, faults p50 {np.percentile(flt[slow], 50):.0f}, "
              f"{flt[slow].sum() * args.fault_us / 1e3:.1f} ms of {ns[slow].sum() / 1e6:.1f} ms")
    for i in np.argsort(-ns)[:8]:
        print(f"  {ns[i] / 1e6:6.2f} ms {int(flt[i]):5d} faults  {names[i]} step {steps_at[i]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
