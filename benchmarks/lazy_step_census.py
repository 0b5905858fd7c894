#!/usr/bin/env python
"""What each lazy step over a threshold spends its time on, step by step.

Runs the lazy walks of the MaskBench sample as ``bench_maskbench.py`` does
(each schema in a fresh child forked from a warmed parent, after the untimed
object warm-up) and times, inside each step, the parts of a cold row with
wall-clock wrappers, each part's time *exclusive* of the parts it calls:

* ``enter``: a definition compiled and resolved at its first call
  (``_LazyNFA.enter``);
* ``first row``: a state's 256 cells (``LazyByteDFA.row`` / ``materialise``),
  ``ascii row`` (``ascii_row``), ``class cells`` (``class_successor``,
  ``range_successors``, ``partial_row``);
* ``chain links`` (``LazyByteDFA.class_chain``: the states of a counted
  class discovered), ``chain row`` (``LazyIndex._chain_row`` and ``_chain``'s
  own glue), ``chain plan`` (``_chain_plan``, ``_chain_mask``, ``_class_runs``);
* ``loop set`` (``LazyIndex._loop``, ``_wide_target``, ``_pair``);
* ``plan`` (``_walk_plan``, ``_group_plan``, ``_loop_mask``, ``_loop_bits``,
  ``_tail_tokens``, ``_tail_packed``, ``_pair_rest``, ``_tail_ends``);
* ``walk`` (the compiled walk: ``_cwalk.walk_row``, ``walk_span``,
  ``walk_packed``, ``walk_and_pack``, ``finish_row``) and ``cells`` (the
  cells it hands back to Python, ``LazyByteDFA.step_held`` / ``step``);
* ``other``: the rest of the step (the row's glue, the guide, the commit).

Each step over ``--threshold-us`` is put in the category of its largest
part, and its minor page faults are counted. Prints the count of slow steps
by category, the share of their time in each part, and the faults.

    python benchmarks/lazy_step_census.py                  # 4 a source, 250 us (~20 s)
    python benchmarks/lazy_step_census.py --names sp_0 --json census.json

The wrappers add ~1-2 us a call, so steps near the threshold cross it more
often than unwrapped: read the categories' shares, not the absolute count
(``lazy_slow_steps.py`` counts; one run here moved from 846 to 1,397 steps
over 250 us with the shared machine's load). ``--json`` keeps each step's
parts, faults, new states and compiled walks (function, entries, ns,
states discovered).

Measured on 9c47436 (qwen2.5, 4 a source, 2 shared cores, four runs): of
the slow steps' time, the compiled walk 33-39% (the largest part of
~55-60% of them; a walk_row of ~5-15k entries, ~10 ns an entry warm and
~20-25 cold, discovering ~6 states at the median), the rest of the step
(``other``: the row's Python glue, the guide) 23-29%, first calls
(``enter``) 11-14%, plans 8-11%, first rows 5-8%, loop sets 3-4%, chain
links, chain plans and chain rows ~2-3% each; 37-57 minor faults a slow
step (~100 in a step that makes a plan). Three schemas held about half of
the slow steps (Github_hard o73917, Github_ultra o65424, Snowplow sp_0).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import types
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402

_WARM_UP = {"type": "object", "properties": {  # MaskBench's warm-up
    "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}}, "required": ["name"]}


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _census(record, vocab) -> list[dict]:
    from tokendfa.analysis import lazydfa
    from tokendfa.lazy import index as lazy_index

    spent: Counter = Counter()
    faulted: Counter = Counter()
    stack: list = []   # [name, started, faults at start, children's ns, children's faults]

    def timed(original, name):
        def wrapper(*args, **kwargs):
            frame = [name, time.perf_counter_ns(), _faults(), 0, 0]
            stack.append(frame)
            try:
                return original(*args, **kwargs)
            finally:
                stack.pop()
                elapsed, faults = time.perf_counter_ns() - frame[1], _faults() - frame[2]
                spent[name] += elapsed - frame[3]
                faulted[name] += faults - frame[4]
                if stack:
                    stack[-1][3] += elapsed
                    stack[-1][4] += faults
        return wrapper

    methods = {
        lazydfa._LazyNFA: {"enter": "enter"},
        lazydfa.LazyByteDFA: {"materialise": "first row", "ascii_row": "ascii row", "class_chain": "chain links",
                              "class_successor": "class cells", "range_successors": "class cells",
                              "partial_row": "class cells", "step_held": "cells", "step": "cells"},
        lazy_index.LazyIndex: {"_chain_row": "chain row", "_chain": "chain row", "_loop": "loop set",
                               "_wide_target": "loop set", "_pair": "loop set"},
    }
    for owner, names in methods.items():
        for attribute, name in names.items():
            setattr(owner, attribute, timed(getattr(owner, attribute), name))
    for attribute, name in {"_walk_plan": "plan", "_group_plan": "plan", "_loop_mask": "plan", "_loop_bits": "plan",
                            "_tail_tokens": "plan", "_tail_packed": "plan", "_pair_rest": "plan",
                            "_tail_ends": "plan", "_chain_plan": "chain plan",
                            "_chain_mask": "chain plan", "_class_runs": "chain plan"}.items():
        setattr(lazy_index, attribute, timed(getattr(lazy_index, attribute), name))
    automata: list = []   # the schema's byte automaton (the last made), for its count of states
    walks: list = []      # each compiled walk of the step: (function, tokens walked, ns, states discovered)
    native = lazy_index._cwalk
    if native is not None:
        proxy = types.SimpleNamespace(**{k: getattr(native, k) for k in dir(native) if not k.startswith("__")})
        # the argument that holds the tokens walked (the spans' ranges for walk_span)
        for attribute, at in (("walk_row", 7), ("walk_span", 3), ("walk_packed", 3), ("walk_and_pack", 3),
                              ("finish_row", None)):
            wrapped = timed(getattr(native, attribute), "walk")

            def recorded(*args, _wrapped=wrapped, _name=attribute, _at=at):
                before, started = automata[-1].num_states, time.perf_counter_ns()
                try:
                    return _wrapped(*args)
                finally:
                    if _at is not None:
                        size = int((args[_at][:, 1] - args[_at][:, 0]).sum()) if _name == "walk_span" else len(args[_at])
                        walks.append((_name, size, time.perf_counter_ns() - started,
                                      automata[-1].num_states - before))
            setattr(proxy, attribute, recorded)
        lazy_index._cwalk = proxy

    made = lazydfa.LazyByteDFA.__init__

    def recorded_init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        automata.append(self)

    lazydfa.LazyByteDFA.__init__ = recorded_init

    def start():
        spent.clear()
        faulted.clear()
        walks.clear()
        return time.perf_counter_ns(), _faults(), automata[-1].num_states if automata else 0

    def stop(mark, step):
        ns, faults = time.perf_counter_ns() - mark[0], _faults() - mark[1]
        parts = dict(spent)
        parts["other"] = ns - sum(spent.values())
        part_faults = dict(faulted)
        part_faults["other"] = faults - sum(faulted.values())
        return {"ns": ns, "faults": faults, "parts": parts, "part_faults": part_faults,
                "states": (automata[-1].num_states if automata else 0) - mark[2], "walks": list(walks)}

    return measured_steps(record, vocab, start, stop, warm_up=_WARM_UP)


def _report(found: dict, threshold: float) -> None:
    steps = [s for found_steps in found.values() for s in found_steps]
    slow = [s for s in steps if s["ns"] > threshold]
    total = sum(s["ns"] for s in slow) or 1
    print(f"{len(steps):,} steps, {len(slow)} over {threshold / 1e3:g} us ({total / 1e6:.1f} ms in all), "
          f"{sum(s['faults'] for s in slow) / max(len(slow), 1):.1f} minor faults and "
          f"{sum(s['states'] for s in slow) / max(len(slow), 1):.1f} new states a slow step")
    by, by_ns, by_states, by_faults = Counter(), Counter(), Counter(), Counter()
    for s in slow:
        top = max(s["parts"], key=s["parts"].get)
        by[top] += 1
        by_ns[top] += s["ns"]
        by_states[top] += s["states"]
        by_faults[top] += s["faults"]
    print("slow steps by their largest part: count, their time, new states and faults a step")
    for name, count in by.most_common():
        print(f"  {count:5d}  {by_ns[name] / 1e6:7.1f} ms  {by_states[name] / count:6.1f} states  "
              f"{by_faults[name] / count:6.1f} faults  {name}")
    shares, faults = Counter(), Counter()
    for s in slow:
        shares.update(s["parts"])
        faults.update(s["part_faults"])
    print("share of the slow steps' time by part (exclusive), and the minor faults inside it")
    for name, ns in shares.most_common():
        print(f"  {100 * ns / total:5.1f}%  {ns / 1e6:7.1f} ms  {faults[name]:7,d} faults  {name}")
    sizes = defaultdict(list)
    for name, found_steps in found.items():
        sizes[sum(1 for s in found_steps if s["ns"] > threshold)].append(name)
    worst = sorted(((sum(1 for s in v if s["ns"] > threshold), k) for k, v in found.items()), reverse=True)[:6]
    print("most slow steps: " + ", ".join(f"{name} {count}" for count, name in worst))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold-us", type=float, default=250)
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--json", default=None, help="write every step's record here")
    args = parser.parse_args(argv)
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
    _report(found, args.threshold_us * 1e3)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
