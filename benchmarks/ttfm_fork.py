"""Time to first mask, lazy, on MaskBench's sample: a warm process and a fresh fork per schema.

MaskBench's TTFM method (``bench_maskbench.py``) for tokendfa alone, quick to
rerun before and after a change: the parent prepares the vocabulary and
builds the warm-up object schema; each schema runs in a fork of it, which
builds the same warm-up untimed (as MaskBench's children do) and then times
``Index.from_schema(schema, vocab)`` and the first mask. Prints p50/p90/max
of the child's wall and CPU time, the slowest schemas, and writes the rows as
JSON. ``faults`` is the child's minor page faults over the timed region
(copy-on-write copies of the parent's pages, ~2 us each): less noisy than
times on a loaded machine, and moved by what a change allocates, not only
by what it computes.

``--root`` runs another checkout's code in this one's environment (an A/B
against, say, ``git archive`` of the base commit unpacked with its built
extensions); ``--rounds`` repeats the sample and keeps each schema's fastest
round, which steadies the quantiles on a shared machine.

Two diagnostics say what a fresh fork adds to the work itself.
``--child-prealloc`` has each child allocate and free ~60,000 small
objects of every size class, untimed, before its warm-up: the allocator's
pages are then the child's own when the timed schema allocates (on
MaskBench's median schemas, faults p50 183 -> 34 and CPU p50 1.47 -> 1.02 ms
in one run: about 30% of the time to first mask is those page copies, paid
once per process; not a change to ship, as it only moves them out of the
timed region). ``--in-process`` builds each schema once in the parent, no
fork, in sample order (what a server that never forks pays for a new schema;
with ``--llguidance``, llguidance's schemas are built in the same process).

``--llguidance`` also times llguidance on each schema, the same way and
interleaved with tokendfa's children (its tokenizer made in the parent, its
warm-up the same object schema, ``LLMatcher`` and one bitmask timed): the
target of issue #29 (TTFM p50 at or below llguidance's) read from one run
on the same loaded machine. ``--time-limit 0`` is MaskBench's setting (no
time limit); the default's limit runs the meta-schema check of a schema of
more than 256 values in a thread.

Comparing two checkouts (``--root``), the parent's heap differs with the
code it runs, and where its free slots lie decides which pages a child's
first allocations copy: a change of a few hundred transient objects moves
the faults by less than that noise (a rewrite of ``regex_tree.concat`` that
made ~180 fewer objects a schema changed neither time nor faults, in
children of one parent with and without it). Effects of ~5% need several
runs, or children of one parent that differ only after their warm-up.

    .venv/bin/python benchmarks/ttfm_fork.py --per-source 4 --rounds 3 --time-limit 0 --llguidance
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402

# bench_maskbench.WARM_UP_SCHEMAS["object"]
WARM_UP = {"type": "object", "properties": {
    "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}},
    "required": ["name"]}


def use_root(root: str) -> None:
    """Import ``tokendfa`` from ``root`` instead of this checkout (editable install's mapping)."""
    import importlib

    finder = importlib.import_module("__editable___tokendfa_0_1_0_finder")
    finder.MAPPING.update({"tokendfa": f"{root}/index", "tokendfa.analysis": f"{root}/analysis"})


def warm_parent(vocab_name: str):
    """The parent MaskBench forks from: the vocabulary prepared, the
    warm-up schema's first mask served, the builder imported. Returns the
    vocabulary."""
    from tokendfa import Guide, Index, Vocabulary

    vocab = Vocabulary.builtin(vocab_name)
    vocab.byte_matrix()
    vocab.prepare()
    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    import tokendfa.builder.fast  # noqa: F401 - what a server has imported
    return vocab


def _allocate_and_free() -> None:
    """Small objects of most size classes made and dropped (see --child-prealloc)."""
    kept = []
    for n in range(1, 64):
        kept.append([tuple(range(n % 16)) for _ in range(300)])
        kept.append([object() for _ in range(300)])
        kept.append([[None] * (n % 8) for _ in range(300)])
        kept.append([{} for _ in range(100)])
    del kept


def _timed(build, engine: str, schema, time_limit) -> dict:
    """``build(engine, schema, time_limit)`` timed: wall and CPU ms and the
    minor page faults over it, or the error's name."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        build(engine, schema, time_limit)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return {"error": type(exc).__name__}
    return {"ms": (time.perf_counter() - wall) * 1e3, "cpu": (time.process_time() - cpu) * 1e3,
            "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4, help="schemas a source (sample())")
    parser.add_argument("--sources", default="all", help="comma-separated source names, or 'all'")
    parser.add_argument("--vocab", default="qwen2.5", help="a builtin vocabulary")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds a schema; 0: none, as MaskBench (no time limit: no thread for the meta-schema check)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of the sample; each schema's fastest counts")
    parser.add_argument("--slowest", type=int, default=15, help="slowest schemas to list")
    parser.add_argument("--root", default=None, help="import tokendfa from this checkout")
    parser.add_argument("--out", default=None, help="rows as JSON")
    parser.add_argument("--no-fork-gc", action="store_true",
                        help="the parent forks without first running gc.collect() and gc.freeze() "
                             "(bench_maskbench.py --fork-gc none)")
    parser.add_argument("--child-prealloc", action="store_true",
                        help="diagnostic: each child allocates and frees small objects before its warm-up")
    parser.add_argument("--llguidance", action="store_true",
                        help="also time llguidance on each schema (forked the same way)")
    parser.add_argument("--in-process", action="store_true",
                        help="build each schema once in this process, without forking")
    args = parser.parse_args()
    if args.root:
        use_root(args.root)

    vocab = warm_parent(args.vocab)
    from tokendfa import Guide, Index

    engines = ["tokendfa"]
    # llguidance's tokenizer is made before the sample is read, as MaskBench does: what
    # the parent allocated and freed last decides where a child's small objects land
    # (its free slots spread over many pages, each copied at its first write): made
    # after the sample, it moved tokendfa's p50 1.5 -> 5.3 ms, faults 215 -> 520.
    if args.llguidance:
        from benchmarks.support.engines import LLGUIDANCE, EngineSetup

        setup = EngineSetup.prepare(vocab, engines=(LLGUIDANCE,))
        engines.append("llguidance")
    sources = source_names() if args.sources == "all" else args.sources.split(",")
    records = [record for source in sources for record in sample(source, args.per_source or None)]
    best: dict[str, dict] = {}

    def build(engine: str, schema, time_limit=None) -> None:
        if engine == "llguidance":
            setup.from_schema(LLGUIDANCE, schema).fill_mask()
        else:
            Guide(Index.from_schema(schema, vocab, lazy=True, time_limit=time_limit)).get_mask()
    if args.in_process:
        for record in records:
            for engine in engines:
                row = _timed(build, engine, record.schema, args.time_limit or None)
                row["label"] = f"{record.source}:{record.line}"
                row["engine"] = engine
                best[f"{engine} {row['label']}"] = row
    for _ in range(0 if args.in_process else args.rounds):
        for record in records:
            for engine in engines:
                def child(record=record, engine=engine):
                    if args.child_prealloc:
                        _allocate_and_free()
                    build(engine, WARM_UP)
                    return _timed(build, engine, record.schema, args.time_limit or None)

                if not args.no_fork_gc:
                    gc.collect()   # as bench_maskbench.py's parent (--fork-gc freeze)
                    gc.freeze()
                row = forked(child, describe=lambda exc: type(exc).__name__)
                row["label"] = f"{record.source}:{record.line}"
                row["engine"] = engine
                key = f"{engine} {row['label']}"
                old = best.get(key)
                if old is None or ("ms" in row and ("ms" not in old or row["ms"] < old["ms"])):
                    best[key] = row
    rows = list(best.values())
    for engine in engines:
        mine = [row for row in rows if row.get("engine", "tokendfa") == engine]
        done = [row for row in mine if "ms" in row]
        print(f"{engine}: {len(mine)} schemas, {len(done)} compiled; "
              f"errors: {sorted(row['error'] for row in mine if 'error' in row)}")
        for key, name in (("ms", "wall ms"), ("cpu", "CPU ms "), ("faults", "faults ")):
            values = sorted(row[key] for row in done)
            if values:
                print(f"  {name}: p50 {statistics.median(values):.2f}  "
                      f"p90 {values[min(len(values) - 1, int(0.9 * len(values)))]:.2f}  max {values[-1]:.1f}")
    done = [row for row in rows if "ms" in row and row.get("engine", "tokendfa") == "tokendfa"]
    for row in sorted(done, key=lambda r: -r["ms"])[:args.slowest]:
        print(f"  {row['ms']:8.2f} ms  {row['label']}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
