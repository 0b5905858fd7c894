#!/usr/bin/env python
"""Lazy steps over 1 ms on the MaskBench sample, each step's best of several rounds.

One MaskBench run moves by a hundred slow steps with the shared machine's
load, which hides a change to the lazy index that saves ~0.1 ms a cold row.
This runs the lazy engine alone over the same schemas and instances as
``bench_maskbench.py`` (each schema in a fresh forked process, the
vocabulary prepared and a trivial schema built first, untimed), ``--rounds``
times, keeps each step's minimum over the rounds, and counts the steps over
1 ms. A step's minimum is its cost on a quiet machine; the count is what
issue #13's "TBM p99 <= 1 ms" target turns on (175 of 17,540 steps at most).
Compare two versions by running it for each, the older one through
``PYTHONPATH`` (a directory holding a ``tokendfa`` package of that commit).

    python benchmarks/lazy_slow_steps.py                    # 3 rounds, 4 per source (~40 s)
    python benchmarks/lazy_slow_steps.py --rounds 5 --out steps.json

This is a development aid, not the benchmark of record: MaskBench's tables
come from ``bench_maskbench.py``, one run with every engine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import compact, sample, source_names  # noqa: E402


def _steps(record, vocab) -> list[int]:
    """Every step's nanoseconds (mask + commit) over the record's instances."""
    from tokendfa import Guide, Index

    try:
        Index.from_schema({"type": "boolean"}, vocab, lazy=True)
        index = Index.from_schema(record.schema, vocab, lazy=True)
    except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
        return []
    row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    found = []
    for valid in (True, False):
        for instance in record.instances(valid):
            guide = Guide(index)
            for token in vocab.encode(compact(instance)):
                started = time.perf_counter_ns()
                try:
                    guide.write_mask_into(row)
                    guide.advance(token)
                    accepted = True
                except Exception:  # noqa: BLE001 - a refused token ends the instance, as in MaskBench
                    accepted = False
                found.append(time.perf_counter_ns() - started)
                if not accepted:
                    break
    return found


def _child(record, vocab, queue) -> None:
    queue.put(_steps(record, vocab))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--out", help="write each schema's per-step minima (ns) as JSON here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.per_source < 0:
        parser.error("--rounds must be at least 1 and --per-source at least 0 (0: every schema)")
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)  # the lazy tables, once, before the forks
    records = [record for source in source_names() for record in sample(source, args.per_source or None)]
    context = multiprocessing.get_context("fork")
    best: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for record in records:
            queue = context.Queue()
            child = context.Process(target=_child, args=(record, vocab, queue))
            child.start()
            try:
                steps = np.array(queue.get(timeout=120), dtype=float)
            except Exception:  # noqa: BLE001 - a child that died or hung counts no steps
                steps = np.zeros(0)
            child.join(5)
            if child.is_alive():
                child.kill()
            known = best.get(record.name)
            best[record.name] = steps if known is None or len(known) != len(steps) else np.minimum(known, steps)
    pooled = np.concatenate(list(best.values())) if best else np.zeros(0)
    if not len(pooled):
        print("no steps: no schema compiled")
        return 1
    worst = sorted(((name, int((steps > 1e6).sum())) for name, steps in best.items()), key=lambda item: -item[1])
    print(f"{len(pooled):,} steps, {int((pooled > 1e6).sum())} over 1 ms, "
          f"p99 {np.percentile(pooled, 99) / 1e3:,.0f} us (each step's best of {args.rounds})")
    for name, count in worst[:6]:
        print(f"  {count:4d}  {name}")
    if args.out:
        Path(args.out).write_text(json.dumps({name: steps.tolist() for name, steps in best.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
