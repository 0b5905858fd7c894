#!/usr/bin/env python
"""A definition's first call in a fresh fork, part by part, paired on a flag.

MaskBench's method for the lazy engine's steps: a warmed parent
(``ttfm_fork.warm_parent``) runs ``gc.collect()`` and ``gc.freeze()`` before
each fork; each schema of the sample runs in a fresh fork that builds the
warm-up object schema untimed, then the schema, and walks its instances
(``support.walks.measured_steps``). From the record's own
``Index.from_schema`` on (its construction, first mask and walk; not the
warm-up), every outermost ``_LazyNFA.enter`` of a definition not resolved
yet (a *first call*) is timed by thread CPU time and by minor page faults, and so is each part
inside it (the outermost call of each wrapped function, inclusive of what it
calls): the schema side's tree (``Compiler.define``), ``_compile``,
``_build``, ``thompson_fragment`` and its C ``_thompson.build``, ``_shape``,
``_template``, ``_stamp_template``, ``_decide`` of the callees, ``_alive``,
``_prune``.

``--flag NAME`` pairs two versions of the code in children of one parent:
each schema runs twice, in alternating order, once with the module
attribute ``tokendfa.analysis.lazydfa.NAME`` (``MODULE.NAME``: of
``tokendfa.analysis.MODULE``) set False ("old") and once True ("new"); the flag is set in the child, after the fork, so both sides
fork from the same heap. Without it, one side ("main"). Prints per side the
first calls' count, mean CPU us and faults, the mean of each part a call,
and the steps over 250 us (wall; load moves it, the pairing keeps the
sides in the same minutes). ``--in-process`` walks each schema in this
process instead (what the fork adds).

    .venv/bin/python benchmarks/lazy_enter_parts.py                      # ~10-30 s on 2 shared cores
    .venv/bin/python benchmarks/lazy_enter_parts.py --flag _ENTER_FAST --rounds 2

A development aid like ``lazy_define_census.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.support.data import named_sample  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.support.walks import measured_steps  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, warm_parent  # noqa: E402

PARTS = ("define", "_compile", "_build", "thompson_fragment", "_thompson.build", "_shape", "_template",
         "_stamp_template", "_decide", "_alive", "_prune")


class _Meter:
    """The first calls of one child: [CPU ns, faults, {part: [ns, faults]}] each."""

    def __init__(self) -> None:
        self.calls: list = []
        self.depth = {name: 0 for name in ("enter",) + PARTS}
        self.current: dict | None = None   # the parts of the first call under way
        self.active = False   # counting: from the record's schema on, not its warm-up

    def wrap_enter(self, function):
        meter = self

        def enter(nfa, d):
            if meter.depth["enter"] or nfa.resolved[d] or not meter.active:
                return function(nfa, d)
            meter.depth["enter"] = 1
            meter.current = {}
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            started = time.thread_time_ns()
            try:
                return function(nfa, d)
            finally:
                ns = time.thread_time_ns() - started
                meter.calls.append((ns, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
                                    meter.current))
                meter.current = None
                meter.depth["enter"] = 0
        return enter

    def wrap(self, name: str, function):
        meter = self

        def wrapper(*args, **kwargs):
            if meter.current is None or meter.depth[name]:
                return function(*args, **kwargs)
            meter.depth[name] = 1
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            started = time.thread_time_ns()
            try:
                return function(*args, **kwargs)
            finally:
                ns = time.thread_time_ns() - started
                part = meter.current.setdefault(name, [0, 0])
                part[0] += ns
                part[1] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
                meter.depth[name] = 0
        return wrapper


def install(meter: _Meter) -> None:
    from tokendfa.analysis import lazydfa, regex_compiler
    from tokendfa.schema import compiler

    cls = lazydfa._LazyNFA
    cls.enter = meter.wrap_enter(cls.enter)
    for name in ("_compile", "_build", "_shape", "_template", "_stamp_template", "_decide", "_alive", "_prune"):
        setattr(cls, name, meter.wrap(name, getattr(cls, name)))
    compiler.Compiler.define = meter.wrap("define", compiler.Compiler.define)
    lazydfa.thompson_fragment = meter.wrap("thompson_fragment", lazydfa.thompson_fragment)
    native = regex_compiler._thompson
    if native is not None:
        regex_compiler._thompson = type("_Wrapped", (), {
            "build": staticmethod(meter.wrap("_thompson.build", native.build)),
            "relocated": staticmethod(native.relocated), "__getattr__": lambda self, n: getattr(native, n)})()


def _child(record, vocab, meter: _Meter, flag: str | None, value: bool) -> dict:
    import importlib

    if flag:
        module, _, name = flag.rpartition(".")
        setattr(importlib.import_module(f"tokendfa.analysis.{module or 'lazydfa'}"), name, value)
    from tokendfa import Index

    meter.calls.clear()
    meter.active = False
    slow = [0, 0]
    original = Index.__dict__["from_schema"]
    build = original.__func__

    def from_schema(cls, schema, *args, **kwargs):
        # the record's own index on: its construction, first mask and walk
        # (the warm-up schema measured_steps builds first is left out)
        meter.active = meter.active or schema is record.schema
        return build(cls, schema, *args, **kwargs)

    Index.from_schema = classmethod(from_schema)   # put back below (--in-process walks in this process)

    def start() -> int:
        return time.perf_counter_ns()

    def stop(started: int, step: int) -> None:
        slow[0] += 1
        slow[1] += time.perf_counter_ns() - started > 250_000

    try:
        measured_steps(record, vocab, start, stop, warm_up=WARM_UP)
    finally:
        Index.from_schema = original
    return {"calls": meter.calls, "steps": slow[0], "slow": slow[1]}


def _report(side: str, rows: list) -> None:
    calls = [c for row in rows for c in row.get("calls", ())]
    n = len(calls) or 1
    print(f"{side}: {len(calls)} first calls, {sum(c[0] for c in calls) / n / 1e3:.1f} us CPU and "
          f"{sum(c[1] for c in calls) / n:.1f} faults a call; steps {sum(r.get('steps', 0) for r in rows):,}, "
          f"over 250 us {sum(r.get('slow', 0) for r in rows)}; failed children "
          f"{sum(1 for r in rows if 'error' in r)}")
    print("   " + "  ".join(f"{name} {sum(c[2].get(name, (0, 0))[0] for c in calls) / n / 1e3:.1f}"
                            f"/{sum(c[2].get(name, (0, 0))[1] for c in calls) / n:.1f}" for name in PARTS)
          + "  (us/faults a call, inclusive)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--flag", default=None, help="a module attribute of tokendfa.analysis, False vs True "
                                                       "(NAME: lazydfa's; MODULE.NAME: another module's)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--in-process", action="store_true", help="no fork: each schema walked in this process")
    parser.add_argument("--json", default=None, help="write each side's children's rows here")
    args = parser.parse_args(argv)
    vocab = warm_parent(args.vocab)
    meter = _Meter()
    install(meter)
    records = list(named_sample(args.per_source, args.names))
    sides = [("old", False), ("new", True)] if args.flag else [("main", False)]
    rows: dict = {side: [] for side, _ in sides}
    turn = 0
    for _ in range(args.rounds):
        for record in records:
            order = sides if turn % 2 == 0 else sides[::-1]
            turn += 1
            for side, value in order:
                def child(record=record, value=value):
                    return _child(record, vocab, meter, args.flag, value)

                if args.in_process:
                    rows[side].append(child())
                else:
                    gc.collect()   # as bench_maskbench.py's parent (--fork-gc freeze)
                    gc.freeze()
                    rows[side].append(forked(child, describe=lambda exc: type(exc).__name__))
    for side, _ in sides:
        _report(side, rows[side])
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
