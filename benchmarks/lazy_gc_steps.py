#!/usr/bin/env python
"""Python's full collections (generation 2) that land inside MaskBench steps of the lazy engine.

``bench_maskbench.py`` times each step (mask + commit); a full pass of the
cyclic collector walks every object the process's collector tracks (~40 ms
with torch and the peers loaded) and, when it lands inside a step, is that
step's time. This runs the lazy engine as ``bench_maskbench.py`` does (the
same parent: vocabulary prepared, the peers' setup for ``--peers``, each
schema in a forked child after the untimed warm-up schema; its
``run_engine``), with a ``gc.callbacks`` hook that counts the full passes
inside steps, and reports the steps' p50, p99 and worst, and for each
schema with a full pass or a step over 10 ms: the passes, their times, and
the objects the collector tracks after the walk that it did not before.

    python benchmarks/lazy_gc_steps.py                      # 4 per source, llguidance's setup too (~2 min)
    python benchmarks/lazy_gc_steps.py --sources Kubernetes --names kb_376,kb_188

What starts a full pass (CPython 3.11): ten collections of the middle
generation since the last full one, each after ten of the youngest, each
after 700 more container objects made than freed -- objects taken off the
collector's lists count too, since the count is kept at allocation -- and
then only if the objects moved to the oldest generation since the last full
pass are a quarter of those it kept. MaskBench's parent has run seven full
passes and moved enough since, so a child's first pass is due once it has
made some tens of thousands of containers more than it freed. The lazy
automaton's own are kernels, full closures, NFA rows and shapes' cuts (its
step keys, cut ranges, single targets and byte edges are ints and bytes):
on sp_0, 71k containers for 8.2k DFA states, from 158k when those were
tuples and lists (none of the sample's steps meets a full pass since; three
did).

A development aid like ``lazy_slow_steps.py``, not the benchmark of record.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_maskbench as mb  # noqa: E402
from support.data import sample, source_names  # noqa: E402
from support.engines import LLGUIDANCE, TOKENDFA_LAZY, EngineSetup  # noqa: E402
from support.isolation import run_in_child  # noqa: E402


class _Watched:
    """A matcher whose steps (fill_mask .. consume) the collector hook can see."""

    def __init__(self, matcher, flags: dict) -> None:
        self._matcher, self._flags = matcher, flags

    def reset(self) -> None:
        self._matcher.reset()

    def fill_mask(self) -> None:
        self._flags["in_step"] = True
        self._matcher.fill_mask()

    def consume(self, token: int) -> bool:
        try:
            return self._matcher.consume(token)
        finally:
            self._flags["in_step"] = False

    def allowed(self):
        return self._matcher.allowed()


class _WatchedSetup:
    def __init__(self, setup, flags: dict) -> None:
        self._setup, self._flags, self.vocab = setup, flags, setup.vocab

    def from_schema(self, engine: str, schema):
        return _Watched(self._setup.from_schema(engine, schema), self._flags)


def _run(setup, task) -> dict:
    flags = {"in_step": False, "started": 0, "passes": []}

    def watch(phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            flags["started"] = time.perf_counter_ns()
        else:
            flags["passes"].append([(time.perf_counter_ns() - flags["started"]) / 1e6, flags["in_step"]])

    before = {id(o) for o in gc.get_objects()}
    gc.callbacks.append(watch)
    found = mb.run_engine(_WatchedSetup(setup, flags), TOKENDFA_LAZY, task)
    gc.callbacks.remove(watch)
    new = Counter(type(o).__name__ for o in gc.get_objects() if id(o) not in before)
    return {"steps": found.get("step_ns", []), "passes": flags["passes"],
            "tracked": sum(new.values()), "kinds": new.most_common(6)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default="all")
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--peers", default=LLGUIDANCE, help="peers set up in the parent, as MaskBench does ('' none)")
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    from tokendfa import Vocabulary

    vocab = Vocabulary.from_spec(args.vocab)
    vocab.byte_matrix()
    vocab.prepare()
    import tokendfa.builder.fast  # noqa: F401 - as bench_maskbench's parent

    setup = EngineSetup.prepare(vocab, [p for p in args.peers.split(",") if p], xgrammar_threads=1,
                                log=lambda *_: None)
    sources = source_names() if args.sources == "all" else args.sources.split(",")
    names = [n for n in args.names.split(",") if n]
    tasks = [mb.tokenize(record, vocab) for source in sources for record in sample(source, args.per_source or None)
             if not names or any(n in record.name for n in names)]
    print(f"parent before the forks: {len(gc.get_objects()):,} tracked objects, "
          f"{gc.get_stats()[2]['collections']} full passes so far, counts {gc.get_count()}", flush=True)
    pooled, inside = [], 0
    for task in tasks:
        result = run_in_child(lambda: _run(setup, task), 600)
        if result["status"] != "ok":
            print(f"{task.record.name}: {result['status']} {result.get('error', '')}")
            continue
        steps = np.asarray(result["steps"], dtype=float)
        pooled.append(steps)
        passes = result["passes"]
        inside += sum(1 for _, in_step in passes if in_step)
        if passes or (len(steps) and steps.max() > 1e7):
            shown = ", ".join(f"{ms:.1f} ms{' in a step' if in_step else ''}" for ms, in_step in passes)
            print(f"{task.record.name}: {len(steps)} steps, worst {steps.max() / 1e6 if len(steps) else 0:.1f} ms; "
                  f"full passes: {shown or 'none'}; {result['tracked']:,} new tracked objects {result['kinds']}",
                  flush=True)
    steps = np.concatenate(pooled) / 1e3 if pooled else np.zeros(1)
    print(f"{len(tasks)} schemas, {len(steps):,} steps: p50 {np.percentile(steps, 50):.1f} us, "
          f"p99 {np.percentile(steps, 99):,.0f} us, worst {steps.max() / 1e3:.1f} ms; "
          f"full collections inside steps: {inside}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
