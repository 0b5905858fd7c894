#!/usr/bin/env python
"""How much of MaskBench's slow band repeats a called fragment under another return stack, compiled path.

Issue #30's Deliver 2 asks that a called fragment's states be computed once
whatever the stack under them. ``lazy_shared_states.py`` counts the repeats
on the numpy walk and the Python core (a replay); this one times what the
served path does: each schema of the sample walked as ``lazy_slow_steps.py``
walks it (a fresh forked child a schema, after the vocabulary and a trivial
schema), each step timed and each new token row (``LazyIndex._new_row``,
the compiled row where the vocabulary covers the pattern) timed inside it.
Afterwards the automaton's states are published (``LazyByteDFA._publish``)
and each state's *shape* (its NFA states, its stacks numbered by slot) is
read: a state, or a row, is *again* when its shape was met before under
other stacks. Prints, summed over the sample (each schema's run with the
least band time of ``--rounds``): the states and the again ones; the rows
and the again ones with their time; and the same for the rows computed in
the band's steps (over ``--threshold-ms``).

    python benchmarks/lazy_shared_band.py                 # 4 per source, 1 round (~20 s)
    python benchmarks/lazy_shared_band.py --rounds 3

A development aid, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import sample, source_names  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402
from lazy_shared_states import kernel_shape  # noqa: E402


def _measure(record, vocab, threshold_ns: float) -> dict:
    from tokendfa.lazy.index import LazyIndex

    rows = []  # (index, state, ns, step)
    step = [0]
    new_row = LazyIndex._new_row

    def timed_row(self, state):
        started = time.perf_counter_ns()
        try:
            return new_row(self, state)
        finally:
            rows.append((self, state, time.perf_counter_ns() - started, step[0]))

    LazyIndex._new_row = timed_row

    def start() -> int:
        step[0] += 1
        return time.perf_counter_ns()

    steps = measured_steps(record, vocab, start, lambda started, _: time.perf_counter_ns() - started)
    band = {i + 1 for i, ns in enumerate(steps) if ns > threshold_ns}
    found = Counter(steps=len(steps), band_steps=len(band),
                    band_ns=sum(ns for ns in steps if ns > threshold_ns))
    by_index: dict = {}
    for index, state, ns, at in rows:
        by_index.setdefault(id(index), (index, []))[1].append((state, ns, at))
    for index, made in by_index.values():
        dfa = index.byte_dfa
        dfa._publish()  # noqa: SLF001 - the store's states, into _kernels (lazydfa's docstring)
        stride, kernels = dfa._stride, dfa._kernels  # noqa: SLF001
        first: dict = {}
        for state in range(1, dfa.num_states):
            shape, stacks = kernel_shape(kernels[state], stride)
            found["states"] += 1
            found["states_again"] += first.setdefault(shape, stacks) != stacks
        first = {}
        for state, ns, at in made:
            shape, stacks = kernel_shape(kernels[state], stride)
            again = first.setdefault(shape, stacks) != stacks
            for prefix in ("", "band_") if at in band else ("",):
                found[prefix + "rows"] += 1
                found[prefix + "rows_ns"] += ns
                found[prefix + "rows_again"] += again
                found[prefix + "rows_again_ns"] += ns * again
    return dict(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threshold-ms", type=float, default=0.25)
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    total: Counter = Counter()
    for source in source_names():
        for record in sample(source, args.per_source or None):
            best = None
            for _ in range(args.rounds):
                try:
                    got = answer_in_child(lambda: _measure(record, vocab, args.threshold_ms * 1e6), 120)
                except ChildFailed:
                    continue
                if best is None or got["band_ns"] < best["band_ns"]:
                    best = got
            total.update(best or {})
    for key in sorted(total):
        value = total[key]
        print(f"{key:>20} {value / 1e6:>12,.1f} ms" if key.endswith("_ns") else f"{key:>20} {value:>12,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
