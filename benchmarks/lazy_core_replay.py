#!/usr/bin/env python
"""The lazy automaton's own cost in MaskBench's cold steps: its cell resolutions replayed alone.

A cold step of the lazy engine spends its time in many places (the walk of
the vocabulary, the loop sets and walk plans, the masks, compiling a
definition at its first call) and one run moves by tens of percent with a
shared machine's load. This isolates one of them, the subset construction
(:class:`tokendfa.analysis.lazydfa.LazyByteDFA`: cuts, closures, kernels,
state discovery; ``_lazycore.c`` or its Python reference): for each schema,
in a forked child as ``bench_maskbench.py`` runs it, the lazy engine walks
the schema's instances while every call that resolves cells is recorded
(``step_held``, ``step``, ``successors``, ``row``, ``partial_row``,
``range_successors``, ``class_successor``, ``wide_target``; the outermost
only; the walk is numpy's, as the compiled walk resolves its cells inside
C, unseen); then the calls are replayed, in order, on fresh automata of the same
schema whose definitions are all compiled first (untimed), and the best of
``--repeats`` replays is reported: calls, states discovered, and the time a
call and a state. The replay checks that it discovers the same number of
states as the walk did.

    python benchmarks/lazy_core_replay.py                    # five of the sample's heaviest schemas
    python benchmarks/lazy_core_replay.py --names o73917,kb_209 --repeats 9
    TOKENDFA_NATIVE=0 python benchmarks/lazy_core_replay.py  # the Python reference

Measured on 8282b2a (qwen2.5, 2 shared cores, best of 5): the five
schemas, 55,685 calls, 26,459 states, 244 ms (9.2 us a state: o65424 6.6,
sp_0 8.9, kb_209 8.2, o73917 14.9); the Python reference (``TOKENDFA_NATIVE=0``)
25.5 us a state on o73917 and kb_209. Inside MaskBench's walk a cell that
finds a known state took ~6 us and one that discovers a state ~15 us
(instrumented, loaded machine).

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import walk_instances  # noqa: E402

_DEFAULT = "sp_0_,o65424,kb_209_,o73917,kb_484_"
# The automaton's methods that resolve cells, as the lazy index calls them.
_RECORDED = ("step_held", "step", "successors", "row", "partial_row", "range_successors", "class_successor",
             "class_chain", "wide_target")


def _record(dfa, calls: list) -> None:
    """Make ``dfa`` append ``(name, args)`` to ``calls`` for each outermost
    call of the ``_RECORDED`` methods (instance attributes over them)."""
    depth = [0]
    for name in _RECORDED:
        method = getattr(dfa, name)

        def recorded(*args, _name=name, _method=method):
            if not depth[0]:
                calls.append((_name, tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)))
            depth[0] += 1
            try:
                return _method(*args)
            finally:
                depth[0] -= 1
        setattr(dfa, name, recorded)


@contextlib.contextmanager
def numpy_walk():
    """The lazy engine's token rows walked by numpy, not the compiled walk
    (which resolves cells inside C, where ``_record`` does not see them: a
    replay of what it recorded missed states and failed)."""
    from tokendfa.lazy import index, kernels, plans, tables

    holders = (kernels, plans, tables, index)
    saved = [holder._cwalk for holder in holders]
    for holder in holders:
        holder._cwalk = None
    try:
        yield
    finally:
        for holder, module in zip(holders, saved):
            holder._cwalk = module


def _measure(record, vocab, repeats: int) -> dict:
    from tokendfa import Index

    Index.from_schema({"type": "object"}, vocab, lazy=True)  # MaskBench's untimed warm-up schema
    index = Index.from_schema(record.schema, vocab, lazy=True)
    calls: list = []
    _record(index.byte_dfa, calls)
    with numpy_walk():
        walk_instances(index, record, vocab)
    walked = index.byte_dfa.num_states
    best = None
    for _ in range(repeats):
        dfa = Index.from_schema(record.schema, vocab, lazy=True).byte_dfa
        with dfa.resolving():
            dfa._nfa.compile_everything()  # noqa: SLF001 - a development aid: compiling is not the core's cost
        started = time.perf_counter_ns()
        for name, args in calls:
            if name == "step_held":
                with dfa.resolving():
                    if dfa.table[args[0], args[1]] == -1:  # a cell the walk found UNKNOWN
                        dfa.step_held(*args)
            else:
                getattr(dfa, name)(*args)
        elapsed = time.perf_counter_ns() - started
        best = elapsed if best is None else min(best, elapsed)
    return {"calls": len(calls), "states": walked, "replayed": dfa.num_states, "ns": best}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default=_DEFAULT, help="comma-separated parts of schema names ('' all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.per_source < 0:
        parser.error("--repeats must be at least 1 and --per-source at least 0 (0: every schema)")
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    records = named_sample(args.per_source, args.names)
    total_ns = total_calls = total_states = 0
    for record in records:
        try:  # an error is reported, and the next schema goes on
            found = answer_in_child(lambda record=record: _measure(record, vocab, args.repeats), 600)
        except ChildFailed as failed:
            print(f"{record.name}: {failed}")
            continue
        same = "" if found["replayed"] == found["states"] else f" (replay diverged: {found['replayed']:,} states)"
        print(f"{record.name}: {found['calls']:,} calls, {found['states']:,} states, {found['ns'] / 1e6:,.1f} ms, "
              f"{found['ns'] / 1e3 / max(found['calls'], 1):.2f} us a call, "
              f"{found['ns'] / 1e3 / max(found['states'], 1):.2f} us a state{same}", flush=True)
        total_ns, total_calls, total_states = (total_ns + found["ns"], total_calls + found["calls"],
                                               total_states + found["states"])
    if total_calls:
        print(f"all: {total_calls:,} calls, {total_states:,} states, {total_ns / 1e6:,.1f} ms "
              f"({total_ns / 1e3 / total_states:.2f} us a state)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
