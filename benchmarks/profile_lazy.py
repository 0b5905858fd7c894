#!/usr/bin/env python
"""Where a lazy schema index's time to first mask goes, schema by schema.

For a deterministic sample of JSONSchemaBench (``--per-source`` schemas from
every source, as bench_maskbench.py picks them), each schema in a forked
child with a time limit: schema -> regex (``regex_from_schema``), the lazy
automaton (NFA construction, ``LazyByteDFA``), the first mask (the rest of
``LazyIndex`` and ``get_mask(1)``), then the token steps of the schema's
valid test instances (cold: first visit of a state; warm: the same walk
again). Prints a table and p50/p90 of each part.

    python benchmarks/profile_lazy.py --per-source 2 [--depth 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from support.data import compact, sample, source_names  # noqa: E402
from support.isolation import run_in_child  # noqa: E402


def measure(record, vocab, depth):
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.lazy import LazyIndex
    from tokendfa.schema.api import regex_from_schema

    t0 = time.perf_counter()
    compiled = regex_from_schema(record.schema, any_depth=depth, state_budget=None, share_free_levels=True)
    t1 = time.perf_counter()
    dfa = LazyByteDFA(compiled.tree, definitions=compiled.tree_definitions or None)
    t2 = time.perf_counter()
    index = LazyIndex(compiled.tree, vocab, definitions=compiled.tree_definitions)
    t3 = time.perf_counter()
    index.get_mask(index.initial_state)
    t4 = time.perf_counter()
    nfa = dfa.num_nfa_states if hasattr(dfa, "num_nfa_states") else len(dfa._eps)
    cold, warm = [], []
    for data in record.instances(True)[:5]:
        ids = vocab.encode(compact(data))
        for steps in (cold, warm):
            state = index.initial_state
            try:
                for token in ids:
                    s = time.perf_counter()
                    index.get_mask(state)
                    state = index.advance(state, token)
                    steps.append(time.perf_counter() - s)
            except Exception:
                break
    return {"regex": t1 - t0, "nfa": t2 - t1, "index_init": t3 - t2 - (t2 - t1), "first_mask": t4 - t3,
            "ttfm": (t1 - t0) + (t4 - t2), "nfa_states": nfa, "cold": cold, "warm": warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-source", type=int, default=2)
    parser.add_argument("--depth", type=int, default=None, help="any_depth (default LAZY_ANY_DEPTH)")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from tokendfa import Index, Vocabulary
    from tokendfa.lazy import LAZY_ANY_DEPTH

    depth = LAZY_ANY_DEPTH if args.depth is None else args.depth
    vocab = Vocabulary.builtin("qwen2.5").prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)  # imports and per-vocabulary tables
    rows = []
    for source in source_names():
        for record in sample(source, args.per_source):
            result = run_in_child(lambda r=record: measure(r, vocab, depth), timeout=args.timeout)
            rows.append((record.label, result))
            shown = ({k: (round(v, 4) if isinstance(v, float) else v) for k, v in result.items()
                      if k not in ("cold", "warm", "pid", "traceback")}
                     if result["status"] == "ok" else {"error": result["error"][:150]})
            print(record.label, shown, flush=True)
    ok = [r for _, r in rows if r["status"] == "ok"]
    print(f"\ndepth {depth}: {len(ok)}/{len(rows)} ok")
    for key in ("regex", "nfa", "index_init", "first_mask", "ttfm", "nfa_states"):
        values = np.array([r[key] for r in ok])
        print(f"  {key:11s} p50 {np.percentile(values, 50):10.4f}  p90 {np.percentile(values, 90):10.4f}"
              f"  max {values.max():10.4f}")
    for key in ("cold", "warm"):
        values = np.array([s for r in ok for s in r[key]])
        if len(values):
            print(f"  {key} steps {len(values)}: p50 {np.percentile(values, 50)*1e6:.1f} us  "
                  f"p90 {np.percentile(values, 90)*1e6:.1f} us  p99 {np.percentile(values, 99)*1e6:.1f} us  "
                  f"max {values.max()*1e3:.1f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh)


if __name__ == "__main__":
    main()
