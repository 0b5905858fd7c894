#!/usr/bin/env python
"""Python's full collections inside a fresh process's first lazy steps, with and without ``gc.freeze()``.

A lazy index's cold rows allocate many small Python objects (the automaton's
states, their rows), and in a fresh process the cyclic collector's full pass
(generation 2) then walks everything alive: the vocabulary's tables too. One
such pass lands inside some step of the first generation. ``gc.freeze()``
after start-up moves what is alive then out of the collector's passes; it is
a process-wide setting, so the library leaves it to the application and the
README says when it pays. This measures it: each schema runs in a new
interpreter (the vocabulary prepared, a trivial schema built first), once
without and once with ``gc.freeze()`` called after that, and reports the
collector's time inside the steps of the schema's MaskBench instances.

    python benchmarks/lazy_gc_freeze.py                 # five of the MaskBench sample's heaviest schemas
    python benchmarks/lazy_gc_freeze.py sp_0 o65424     # schemas whose names hold these

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_DEFAULT = ["sp_0_", "o65424", "kb_209_", "o73917", "Github_medium/o1.json"]

_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, {here!r})
from support.data import sample, source_names
from support.walks import walk_instances
from tokendfa import Index, Vocabulary
vocab = Vocabulary.builtin({vocab!r}).prepare()
record = [r for s in source_names() for r in sample(s, 4) if {name!r} in r.name][0]
Index.from_schema({{"type": "boolean"}}, vocab, lazy=True)
if {freeze}:
    gc.freeze()
seen = {{"total": 0, "full": 0, "worst_full": 0, "started": 0}}
def watch(phase, info):
    if phase == "start":
        seen["started"] = time.perf_counter_ns()
        return
    spent = time.perf_counter_ns() - seen["started"]
    seen["total"] += spent
    if info["generation"] == 2:
        seen["full"] += 1
        seen["worst_full"] = max(seen["worst_full"], spent)
index = Index.from_schema(record.schema, vocab, lazy=True)
gc.callbacks.append(watch)
walk_instances(index, record, vocab)
print(json.dumps({{"name": record.name, "total": seen["total"], "full": seen["full"],
                  "worst_full": seen["worst_full"]}}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=_DEFAULT, help="parts of schema names (MaskBench sample)")
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    print("| schema | collector ms in steps | full passes | longest full pass ms |")
    print("|---|---|---|---|")
    for name in args.names:
        cells = []
        for freeze in (False, True):
            code = _CHILD.format(here=str(_HERE), vocab=args.vocab, name=name, freeze=freeze)
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                print(f"| {name} | failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode} |")
                break
            cells.append(json.loads(done.stdout.strip().splitlines()[-1]))
        else:
            plain, frozen = cells
            print(f"| {plain['name']} | {plain['total'] / 1e6:.1f} -> {frozen['total'] / 1e6:.1f} "
                  f"| {plain['full']} -> {frozen['full']} "
                  f"| {plain['worst_full'] / 1e6:.1f} -> {frozen['worst_full'] / 1e6:.1f} |")
    print("(without -> with gc.freeze() after start-up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
