"""The first mask in a fresh fork with and without the direct schema front end (tokendfa.schema.direct).

MaskBench's method (``ttfm_fork.py``): one warmed parent, each schema in
fresh children of it, ``gc.collect()``/``gc.freeze()`` before each fork,
the warm-up schema built untimed in the child; then ``Index.from_schema``
and the first mask timed (wall, CPU, minor page faults). The children
differ only in a flag: (A) the general path (``direct.ENABLED[0] = False``),
(B) the direct path where it takes the schema; the pairs alternate which
goes first. Prints how many schemas the direct path takes, the medians of
each child's fastest run over the whole sample and over the band
(``--between`` percentiles of A's wall time), the paired ratio B/A over the
schemas taken, the schemas taken that ran slower, and whether the first
masks are equal.

    .venv/bin/python benchmarks/direct_ttfm.py --per-source 4 --pairs 3
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names
from benchmarks.support.isolation import forked
from benchmarks.ttfm_fork import WARM_UP, warm_parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--between", default="25,75")
    parser.add_argument("--names", default="", help="comma-separated labels ('': the whole sample)")
    args = parser.parse_args()

    import numpy as np

    vocab = warm_parent(args.vocab)
    from tokendfa import Guide, Index
    from tokendfa.schema import direct

    records = [r for s in source_names() for r in sample(s, args.per_source or None)]
    if args.names:
        records = [r for r in records if r.label in args.names.split(",")]
    rusage, who, perf, cpu = resource.getrusage, resource.RUSAGE_SELF, time.perf_counter, time.process_time
    original = direct.compile_direct

    def child(record, enabled: bool) -> dict:
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        direct.ENABLED[0] = enabled
        taken = []

        def recording(*a, **k):
            result = original(*a, **k)
            taken.append(result is not None)
            return result

        direct.compile_direct = recording
        f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
        mask = Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
        t1, c1, f1 = perf(), cpu(), rusage(who).ru_minflt
        return {"ms": (t1 - t0) * 1e3, "cpu": (c1 - c0) * 1e3, "faults": f1 - f0,
                "taken": any(taken), "mask": hashlib.sha1(np.asarray(mask).tobytes()).hexdigest()}

    rows = []
    for at, record in enumerate(records):
        runs: dict = {False: [], True: []}
        for pair in range(args.pairs):
            order = (False, True) if (at + pair) % 2 == 0 else (True, False)
            for enabled in order:
                gc.collect()
                gc.freeze()
                out = forked(lambda e=enabled, r=record: child(r, e), describe=repr)
                if "error" in out:
                    break
                runs[enabled].append(out)
        if len(runs[False]) == len(runs[True]) == args.pairs:
            rows.append((record.label, runs[False], runs[True]))
    if not rows:
        print("no schema compiled")
        return 1

    def best(runs, key):
        return min(r[key] for r in runs) if key != "faults" else statistics.median(r[key] for r in runs)

    taken = [row for row in rows if row[2][0]["taken"]]
    print(f"{len(rows)} schemas compiled of {len(records)}; the direct path took {len(taken)}; "
          f"{args.pairs} pair(s) each (per schema the fastest child, faults the median)")
    by_a = sorted(rows, key=lambda row: best(row[1], "ms"))
    lo, hi = (float(x) / 100 for x in args.between.split(","))
    band = by_a[int(lo * len(by_a)):int(hi * len(by_a))]
    for name, chosen in (("whole sample", rows), (f"band p{args.between.replace(',', '-p')}", band)):
        n_taken = sum(row[2][0]["taken"] for row in chosen)
        print(f"  {name} ({len(chosen)} schemas, {n_taken} taken):")
        for key in ("ms", "cpu", "faults"):
            a = [best(row[1], key) for row in chosen]
            b = [best(row[2], key) for row in chosen]
            print(f"    {key:6s} general median {statistics.median(a):7.3f} mean {statistics.mean(a):8.3f}"
                  f" | with direct median {statistics.median(b):7.3f} mean {statistics.mean(b):8.3f}")
    if taken:
        ratios = sorted(best(row[2], "ms") / best(row[1], "ms") for row in taken)
        cpu_ratios = sorted(best(row[2], "cpu") / best(row[1], "cpu") for row in taken)
        print(f"  taken schemas, paired ratio direct/general: wall median {statistics.median(ratios):.3f} "
              f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f}), CPU median {statistics.median(cpu_ratios):.3f}")
        slower = [(row[0], best(row[1], "ms"), best(row[2], "ms")) for row in taken
                  if best(row[2], "ms") > best(row[1], "ms")]
        print(f"  taken schemas slower with the direct path: {len(slower)}"
              + "".join(f"\n    {label}: {a:.3f} -> {b:.3f} ms" for label, a, b in slower))
        for label, a_runs, b_runs in (taken if args.names else []):
            print(f"    {label}: general " + " ".join(f"{r['ms']:.2f}/{r['cpu']:.2f}/{r['faults']}" for r in a_runs)
                  + " | direct " + " ".join(f"{r['ms']:.2f}/{r['cpu']:.2f}/{r['faults']}" for r in b_runs))
    same = sum(all(r["mask"] == row[1][0]["mask"] for r in row[1] + row[2]) for row in rows)
    print(f"  first masks equal in {same} of {len(rows)} schemas")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
