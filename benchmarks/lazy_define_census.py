#!/usr/bin/env python
"""What the lazy engine's steps pay to compile definitions at their first call, counted.

Runs the lazy engine as ``bench_maskbench.py`` does (each schema in a forked
child, after the untimed object warm-up) and, inside each step, times with
wall-clock wrappers the first call of a definition (``_LazyNFA.enter`` of a
definition not resolved yet) and its parts: the schema side's tree
(``DeferredDefinitions.tree``: a deferred piece such as an object's
undeclared keys, or a deferred recursive value), the Thompson construction
(``_build``, ``thompson_fragment``), the renaming into a shape, the copy of a
template (``_stamp_template``), the template kept, the alive and prune
passes; and the minor page faults inside each part. Each fragment compiled
is recorded with its key's kind, its tree's class and size, its NFA states,
whether it was built or stamped from a template, and whether the same tree
was compiled in an earlier schema's child (a process-wide cache could only
serve it from a parent that prepared it: MaskBench forks each schema from a
parent that compiled none).

Prints the minor faults of each part over every step (load does not move
them: compare two versions by these), then, for the steps in ``--band``
(which load does move): the share of their time in each part,
the compiles by kind, the schema side's trees (pieces and values) with their
count, sizes and time, the faults, and the steps whose compile is one piece
alone.

    python benchmarks/lazy_define_census.py                     # 4 per source (~15 s)
    python benchmarks/lazy_define_census.py --names sp_0,kb_209 --json census.json

Measured on 2cea247 (qwen2.5, --per-source 4, 84 schemas, a loaded 2-core
machine; the wrappers add ~2-5 us a call): ~530 steps of 250-1500 us, ~20%
of their time in first calls (``enter``), of which the Thompson construction
~7 points, shapes and stamps ~4.5, the schema side's trees ~1.5-1.8 (pieces:
~55 ``keys_except`` of ~60 us each in a fresh fork, ~10-20 us once its code
ran; values: 1-3); 36-46 minor faults a first-call step. 84 trees computed by
the schema side in the whole sample, none twice in one schema, 7 seen in an
earlier schema. 34-38 steps over 250 us compiled one piece alone (~465 us
on average, ~260 us of it in ``enter``): the first piece of a schema ~320 us
in ``enter`` (median), the later ones ~230 us.

A development aid like ``lazy_step_sampler.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402

# (owner, attribute, part name): timed at their outermost call in a step
_PARTS = (("_LazyNFA", "enter", "enter"), ("_LazyNFA", "_compile", "_compile"),
          ("_LazyNFA", "_tree", "_tree"), ("_LazyNFA", "_build", "_build"),
          ("_LazyNFA", "_shape", "_shape"), ("_LazyNFA", "_stamp_template", "_stamp_template"),
          ("_LazyNFA", "_template", "_template"), ("_LazyNFA", "_decide", "_decide"),
          ("_LazyNFA", "_alive", "_alive"), ("_LazyNFA", "_prune", "_prune"),
          ("_SharedFragments", "keep", "fragments.keep"), ("lazydfa", "thompson_fragment", "thompson_fragment"),
          ("strings", "_keys_except", "keys_except"))


# a part's minor faults are kept in its step's parts under its name and this suffix
_FAULTS = " faults"


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _census(record, vocab) -> list[dict]:
    """Each step of the record's walk: its time, its parts, its trees and compiles."""
    from tokendfa.analysis import lazydfa
    from tokendfa.schema import compiler, strings

    owners = {"_LazyNFA": lazydfa._LazyNFA, "_SharedFragments": lazydfa._SharedFragments,
              "lazydfa": lazydfa, "strings": strings}
    parts: dict = defaultdict(int)
    trees: list = []
    compiles: list = []
    depth: Counter = Counter()

    def timed(original, name):
        def wrapper(*args, **kwargs):
            depth[name] += 1
            faults = _faults()
            started = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                depth[name] -= 1
                if not depth[name]:
                    parts[name] += time.perf_counter_ns() - started
                    parts[name + _FAULTS] += _faults() - faults
        return wrapper

    for owner, attribute, name in _PARTS:
        setattr(owners[owner], attribute, timed(getattr(owners[owner], attribute), name))

    define = compiler.Compiler.define

    def recorded_define(self, key):
        kind = "piece" if key in self.pieces else "value"
        started = time.perf_counter_ns()
        tree = define(self, key)
        trees.append((kind, tree.size, time.perf_counter_ns() - started))
        return tree

    compiler.Compiler.define = recorded_define
    compile_ = lazydfa._LazyNFA._compile
    stamp = lazydfa._LazyNFA._stamp_template
    stamped = [False]

    def recorded_stamp(self, *args):
        stamped[0] = True
        return stamp(self, *args)

    def recorded_compile(self, d):
        base, stamped[0] = len(self.eps), False
        started = time.perf_counter_ns()
        compile_(self, d)
        elapsed = time.perf_counter_ns() - started
        key, tree = self.placeholders[d], self.texts[d]
        kind = "placeholder" if isinstance(key, str) else type(key).__name__
        compiles.append((kind, type(tree).__name__, tree.size if hasattr(tree, "size") else len(tree), len(self.eps) - base,
                         elapsed, "stamped" if stamped[0] else "built", hash(tree)))

    lazydfa._LazyNFA._stamp_template = recorded_stamp
    lazydfa._LazyNFA._compile = recorded_compile
    steps: list = []

    def start() -> int:
        parts.clear()
        trees.clear()
        compiles.clear()
        return time.perf_counter_ns()

    def stop(started: int, step: int) -> None:
        steps.append({"ns": time.perf_counter_ns() - started, "parts": dict(parts),
                      "trees": list(trees), "compiles": list(compiles)})

    measured_steps(record, vocab, start, stop, warm_up={"type": "object", "properties": {  # MaskBench's warm-up
        "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}}, "required": ["name"]})
    return steps


def _report(found: dict, band: tuple[float, float]) -> None:
    low, high = band
    seen_before: dict = {}
    in_band = [s for steps in found.values() for s in steps if low <= s["ns"] < high]
    everything = sorted(s["ns"] for steps in found.values() for s in steps)
    total = sum(s["ns"] for s in in_band) or 1
    print(f"{len(everything):,} steps, {sum(1 for ns in everything if ns > 250e3)} over 250 us; "
          f"{len(in_band)} in {low / 1e3:g}-{high / 1e3:g} us ({total / 1e6:.1f} ms)")
    shares = Counter()
    for step in in_band:
        shares.update({k: v for k, v in step["parts"].items() if not k.endswith(_FAULTS)})
    print("share of the band's time (outermost calls, wall clock):")
    for name, ns in shares.most_common():
        print(f"  {100 * ns / total:5.1f}%  {ns / 1e6:7.1f} ms  {name}")
    # Faults do not move with the machine's load (the band's steps do):
    # these are over every step, the number to compare two versions by.
    faults = Counter()
    for steps in found.values():
        for step in steps:
            faults.update({k[:-len(_FAULTS)]: v for k, v in step["parts"].items() if k.endswith(_FAULTS)})
    print("minor faults over all steps, by part (outermost calls):",
          ", ".join(f"{name} {count:,}" for name, count in faults.most_common()))
    with_enter = [s for s in in_band if s["parts"].get("enter")]
    if with_enter:
        faults = sum(s["parts"].get("enter faults", 0) for s in with_enter)
        print(f"{len(with_enter)} band steps call enter; {faults / len(with_enter):.1f} minor faults inside it a step")
    kinds, kind_ns, kind_states = Counter(), Counter(), Counter()
    novelty = Counter()
    for name, steps in found.items():
        seen_here: set = set()
        for step in steps:
            for kind, cls, size, states, ns, how, digest in step["compiles"]:
                new = "again in this schema" if digest in seen_here else (
                    "seen in an earlier schema" if digest in seen_before else "new")
                seen_here.add(digest)
                seen_before.setdefault(digest, name)
                if low <= step["ns"] < high:
                    kinds[(kind, cls, how)] += 1
                    kind_ns[(kind, cls, how)] += ns
                    kind_states[(kind, cls, how)] += states
                    novelty[new] += ns
    print("compiles in the band (key, tree, how): count, time, NFA states")
    for key, count in kinds.most_common():
        print(f"  {count:4d} {kind_ns[key] / 1e6:7.1f} ms {kind_states[key]:7,d} states  {key}")
    print("their trees:", ", ".join(f"{k} {v / 1e6:.1f} ms" for k, v in novelty.most_common()))
    trees = [t for s in in_band for t in s["trees"]]
    every_tree = [t for steps in found.values() for s in steps for t in s["trees"]]
    for kind in ("piece", "value"):
        mine = [t for t in trees if t[0] == kind]
        if mine:
            sizes = sorted(t[1] for t in mine)
            print(f"schema side, {kind}s in the band: {len(mine)}, {sum(t[2] for t in mine) / 1e6:.1f} ms, "
                  f"tree size p50 {sizes[len(sizes) // 2]} max {sizes[-1]}")
    print(f"schema side, trees in the whole sample: {len(every_tree)}")
    alone = [s for s in in_band if len(s["compiles"]) == 1 and any(t[0] == "piece" for t in s["trees"])]
    if alone:
        print(f"{len(alone)} band steps compile one piece alone: {sum(s['ns'] for s in alone) / len(alone) / 1e3:.0f} us "
              f"a step, {sum(s['parts'].get('enter', 0) for s in alone) / len(alone) / 1e3:.0f} us of it in enter")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--band", type=float, nargs=2, default=[250, 1500], metavar=("LOW_US", "HIGH_US"))
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--json", default=None, help="write every step's record here")
    args = parser.parse_args(argv)
    if not 0 <= args.band[0] < args.band[1] or args.per_source < 0:
        parser.error("--band needs 0 <= LOW < HIGH and --per-source at least 0")
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    found: dict = {}
    for record in named_sample(args.per_source, args.names):
        try:
            found[record.name] = answer_in_child(lambda record=record: _census(record, vocab), 600)
        except ChildFailed:  # a child that died or hung gives no steps
            found[record.name] = []
    if args.json:
        Path(args.json).write_text(json.dumps(found))
    _report(found, (args.band[0] * 1e3, args.band[1] * 1e3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
