"""Where a cold lazy step's time goes outside the compiled walk, by kind of row and by function.

Issue #30's TBM p99 turns on MaskBench's steps of 250-1500 us, nearly all
cold rows. This runs the lazy walks of the MaskBench sample as
``bench_maskbench.py`` does (each schema in a fresh child forked from a
warmed parent, after the untimed object warm-up; ``--in-process``: one
process), times each function of a cold row with a wrapper (exclusive
of the wrapped functions it calls, the wrappers' own cost measured at
start and taken off), and puts each step of ``--band`` in a kind:

* ``loop, group plan``: a loop row (a JSON string or key, a pattern's
  class) whose plan is read from the vocabulary's groups (``_group_plan``);
  ``loop, walk plan``: one whose loop's rest is walked from a plan;
* ``chain``: a counted class's chain row (``_chain_row``); ``pair``;
* ``span``: a row with no loop walked over its live bytes' groups
  (``_span_row``); ``walk plan, no loop``: one with a plan kept;
* ``definition compiled (...)``: a step whose row called a definition
  for the first time (``_LazyNFA.enter``).

For each kind it prints the steps, their mean time and minor faults, and
their time in groups: the compiled walk (``_cwalk.walk_row``,
``walk_span``, ``walk_packed``, ``walk_and_pack``, ``finish_row``, with
the cells it hands back); definitions compiled at their first call;
the automaton's discovery (``LazyByteDFA.row``/``materialise``,
``partial_row``, ``ascii_row``, ``wide_target``, ``class_chain``, ...);
plans built in C (``group_plan``, ``walk_plan``, ``chain_plan``,
``loop_bits``, ``tail_split``, ...); and the Python glue around them:
the loop row's (``_loop_row``, ``_loop``, ``_pair``, the plans' and
tables' lookups), the chain row's, the row's own (``_serve``,
``_new_row``, ``_compiled_row``, ``_span_row``), and the guide's with the
mask's copy. ``--functions`` lists every function's share.

    python benchmarks/lazy_row_glue.py                      # 4 a source, 250-1500 us (~30 s)
    python benchmarks/lazy_row_glue.py --in-process --band 100 1500
    python benchmarks/lazy_row_glue.py --names sp_0,o65424 --functions

The wrappers' cost (~0.15-0.3 us inside a call and ~0.5-0.9 us charged to its
caller, measured at start) is taken off, not their effect on the caches:
read the shares, not the absolute times; ``lazy_slow_steps.py`` counts.

Measured on main f393bb2 (qwen2.5, 4 a source, forked, 671-915 steps of
250-1500 us with the load, mean 453-476 us; ``benchmarks/HISTORY.md``,
"a cold step's time outside the compiled walk"): the compiled walk
34-37%, definitions compiled at their first call 16-21%, discovery ~15%,
plans built in C 4%, the Python glue 23-28% (the loop row's ~50 us, the
row's own ~42, the guide's and the copy's 10-15). A loop row with a group
plan: ~390 us, its walk ~190, its glue ~100 and 16-22 faults; in one
process the same rows took 176 us (glue ~35): the fork's first touches
of the parent's pages (~4-5 us a fault) weigh more than the glue's
instructions.

A development aid like ``lazy_step_census.py``, not a benchmark of record.
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

from support.data import named_sample, sample_arguments, warm_vocabulary  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402

_WARM_UP = {"type": "object", "properties": {  # MaskBench's warm-up
    "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}}, "required": ["name"]}

_WALKS = ("walk_row", "walk_span", "walk_packed", "walk_and_pack", "finish_row")
_NOT_TIMED = ("released_ns", "released_count", "count_released")
_METHODS = {  # (module, class) -> methods timed
    ("analysis.lazydfa", "_LazyNFA"): ["enter"],
    ("analysis.lazydfa", "LazyByteDFA"): ["row", "materialise", "ascii_row", "class_chain", "class_successor",
                                          "range_successors", "partial_row", "step_held", "step", "wide_target",
                                          "resolving"],
    ("lazy.index", "LazyIndex"): ["_serve", "_new_row", "_compiled_row", "_span_row", "_loop_row", "_loop",
                                  "_wide_target", "_pair", "_pair_row", "_chain_row", "_chain", "_follow_chain",
                                  "_dead", "_walk_entries", "write_mask_into", "advance"],
    ("runtime.guide", "Guide"): ["write_mask_into", "advance"],
}
_FUNCTIONS = ["_walk_plan", "_group_plan", "_loop_mask", "_loop_bits", "_tail_tokens", "_tail_packed", "_pair_rest",
              "_tail_ends", "_chain_plan", "_chain_mask", "_class_runs", "_start_states", "_outside",
              "_grouped_spellings"]
_FLAGS = {"enter": "enter", "_span_row": "span", "_chain_row": "chain", "_pair_row": "pair", "_group_plan": "group",
          "_walk_plan": "walkplan", "_loop_mask": "loopmask"}
_DISCOVERY = {"materialise", "row", "partial_row", "ascii_row", "wide_target", "class_chain", "class_successor",
              "range_successors", "step", "step_held"}
_GROUPS = ["walk", "enter", "discovery", "plans (C)", "loop glue", "chain glue", "row glue", "guide+copy"]


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _group(name: str) -> str:
    if name == "C:walk":
        return "walk"
    if name == "enter":
        return "enter"
    if name in _DISCOVERY:
        return "discovery"
    if name.startswith("C:") and name not in ("C:copy_mask", "C:advance_token", "C:start_states", "C:chain_links",
                                              "C:ascii_target", "C:row_first", "C:equal_bits", "C:row_runs"):
        return "plans (C)"
    if name.startswith("Guide.") or name in ("write_mask_into", "advance", "C:copy_mask", "C:advance_token"):
        return "guide+copy"
    if name in ("_serve", "_new_row", "_compiled_row", "_span_row", "resolving", "_walk_entries", "_start_states",
                "C:start_states"):
        return "row glue"
    if name in ("_chain_row", "_chain", "_follow_chain", "_chain_plan", "_chain_mask", "_class_runs",
                "C:chain_links"):
        return "chain glue"
    return "loop glue"


class _Timers:
    """Exclusive wall time, calls and wrapped callees of each wrapped function."""

    def __init__(self) -> None:
        self.spent, self.calls, self.callees = Counter(), Counter(), Counter()
        self.flags: set = set()
        self.stack: list = []   # [started, callees' ns, callees]

    def clear(self) -> None:
        self.spent.clear()
        self.calls.clear()
        self.callees.clear()
        self.flags.clear()

    def timed(self, original, name: str, flag: str | None = None):
        clock, stack, spent, calls, callees, flags = (time.perf_counter_ns, self.stack, self.spent, self.calls,
                                                      self.callees, self.flags)

        def wrapper(*args, **kwargs):
            frame = [clock(), 0, 0]
            stack.append(frame)
            try:
                return original(*args, **kwargs)
            finally:
                stack.pop()
                elapsed = clock() - frame[0]
                spent[name] += elapsed - frame[1]
                calls[name] += 1
                callees[name] += frame[2]
                if flag is not None:
                    flags.add(flag)
                if stack:
                    stack[-1][1] += elapsed
                    stack[-1][2] += 1
        return wrapper


def _overhead() -> tuple[float, float]:
    """The wrappers' ns inside a call, and charged to the caller for each
    wrapped call it makes (a wrapped call's whole cost, each loop's best
    of many, less the part inside)."""
    timers = _Timers()

    def nothing():
        pass

    inner = timers.timed(nothing, "inner")
    count = 5000

    def loop(function) -> float:
        started = time.perf_counter_ns()
        for _ in range(count):
            function()
        return time.perf_counter_ns() - started

    plain = wrapped = inside = float("inf")
    for _ in range(30):  # the best of many: a loaded machine's preemptions only add
        plain = min(plain, loop(nothing))
        timers.clear()
        wrapped = min(wrapped, loop(inner))
        inside = min(inside, timers.spent["inner"])
    return inside / count, max(wrapped - plain - inside, 0.0) / count


def _import(name: str):
    import importlib

    return importlib.import_module("tokendfa." + name)


def _instrument():
    """Wrap the functions of a cold row with timers (in this process, once):
    the ``(start, stop)`` of :func:`support.walks.measured_steps`."""
    timers = _Timers()
    for (module, owner), names in _METHODS.items():
        cls = getattr(_import(module), owner)
        for attribute in names:
            prefix = "Guide." if owner == "Guide" else ""
            setattr(cls, attribute, timers.timed(getattr(cls, attribute), prefix + attribute, _FLAGS.get(attribute)))
    lazy_index = _import("lazy.index")
    for attribute in _FUNCTIONS:
        setattr(lazy_index, attribute, timers.timed(getattr(lazy_index, attribute), attribute, _FLAGS.get(attribute)))
    native = lazy_index._cwalk
    if native is not None:
        proxy = types.SimpleNamespace(**{k: getattr(native, k) for k in dir(native) if not k.startswith("__")})
        for attribute in dir(native):
            if not attribute.startswith("__") and attribute not in _NOT_TIMED:
                name = "C:walk" if attribute in _WALKS else "C:" + attribute
                setattr(proxy, attribute, timers.timed(getattr(native, attribute), name))
        for module in ("lazy.index", "lazy.plans", "lazy.tables"):
            _import(module)._cwalk = proxy

    def start():
        timers.clear()
        return time.perf_counter_ns(), _faults()

    def stop(mark, step):
        return {"ns": time.perf_counter_ns() - mark[0], "faults": _faults() - mark[1], "parts": dict(timers.spent),
                "calls": dict(timers.calls), "callees": dict(timers.callees), "flags": sorted(timers.flags)}

    return start, stop


def _record(record, vocab, timed=None) -> list[dict]:
    """The steps of ``record``'s walk, timed by :func:`_instrument`'s
    wrappers (``timed``: those already made in this process)."""
    start, stop = timed or _instrument()
    return measured_steps(record, vocab, start, stop, warm_up=_WARM_UP)


def _kind(step: dict) -> str:
    flags, calls = set(step["flags"]), step["calls"]
    if "_compiled_row" not in calls:
        kind = "no row (numpy row, or none)" if "_new_row" in calls else "no row"
    elif calls["_compiled_row"] > 1:
        kind = "several rows"
    elif "span" in flags:
        kind = "span"
    elif "chain" in flags:
        kind = "chain"
    elif "pair" in flags and not flags & {"loopmask", "group"}:
        kind = "pair"
    elif "group" in flags:
        kind = "loop, group plan"
    elif "loopmask" in flags:
        kind = "loop, walk plan"
    else:
        kind = "walk plan, no loop"
    return f"definition compiled ({kind})" if "enter" in flags else kind


def _report(found: dict, band: tuple[float, float], overhead: tuple[float, float], functions: bool) -> None:
    inside, charged = overhead
    by_kind: dict = defaultdict(list)
    for steps in found.values():
        for step in steps:
            # the wrappers' own time, off each function and off the step
            taken = 0.0
            for name in step["parts"]:
                cost = inside * step["calls"].get(name, 0) + charged * step["callees"].get(name, 0)
                step["parts"][name] -= cost
                taken += cost
            step["ns"] -= taken
            if band[0] <= step["ns"] <= band[1]:
                by_kind[_kind(step)].append(step)
    every = [step for steps in by_kind.values() for step in steps]
    print(f"{len(every)} steps of {band[0] / 1e3:g}-{band[1] / 1e3:g} us; wrappers {inside:.0f} ns a call "
          f"+ {charged:.0f} ns to its caller, taken off; us a step:")
    print(f"  {'kind':38s} {'steps':>5s} {'mean':>5s} {'faults':>6s} {'other':>6s} "
          + " ".join(f"{name:>10s}" for name in _GROUPS))

    def line(kind: str, steps: list) -> None:
        groups, other = Counter(), 0.0
        for step in steps:
            for name, ns in step["parts"].items():
                groups[_group(name)] += ns
            other += step["ns"] - sum(step["parts"].values())
        n = len(steps)
        print(f"  {kind:38s} {n:5d} {sum(s['ns'] for s in steps) / n / 1e3:5.0f} "
              f"{sum(s['faults'] for s in steps) / n:6.1f} {other / n / 1e3:6.1f} "
              + " ".join(f"{groups[name] / n / 1e3:10.1f}" for name in _GROUPS))

    for kind, steps in sorted(by_kind.items(), key=lambda item: -len(item[1])):
        line(kind, steps)
    if every:
        line("all", every)
    if functions and every:
        spent, calls = Counter(), Counter()
        for step in every:
            spent.update(step["parts"])
            calls.update(step["calls"])
        total = sum(step["ns"] for step in every)
        print("by function (exclusive), us a step, share, calls a step:")
        for name, ns in spent.most_common():
            print(f"  {ns / len(every) / 1e3:7.1f} {100 * ns / total:5.1f}%  {calls[name] / len(every):6.2f}  "
                  f"{name}  [{_group(name)}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--band", nargs=2, type=float, default=(250, 1500), metavar=("LOW_US", "HIGH_US"))
    parser.add_argument("--in-process", action="store_true", help="every schema in this process, none forked")
    parser.add_argument("--functions", action="store_true", help="list every function's share too")
    parser.add_argument("--json", default=None, help="write every step's record here")
    args = sample_arguments(parser, argv)
    if not 0 <= args.band[0] < args.band[1]:
        parser.error("--band needs 0 <= LOW_US < HIGH_US")
    overhead = _overhead()
    vocab = warm_vocabulary(args.vocab)
    found: dict = {}
    records = named_sample(args.per_source, args.names)
    if args.in_process:
        timed = _instrument()  # once: a wrapper over a wrapper would time itself
        for record in records:
            found[record.name] = _record(record, vocab, timed)
    else:
        for record in records:
            try:
                found[record.name] = answer_in_child(lambda record=record: _record(record, vocab), 600)
            except ChildFailed:  # a child that died or hung gives no steps
                found[record.name] = []
    if args.json:
        Path(args.json).write_text(json.dumps(found))
    _report(found, (args.band[0] * 1e3, args.band[1] * 1e3), overhead, args.functions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
