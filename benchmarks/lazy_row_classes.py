#!/usr/bin/env python
"""MaskBench's cold token rows by the kind of state they are for, and the slow ones among them.

A lazy state's kernel lies on the empty stack (*root*: the schema's own
fragment), on one other stack, or on several. A state on one or several
stacks is *again* when a state of the same shape (``lazy_shared_states``'s
``kernel_shape``: its NFA states, its stacks numbered by slot) had a row
before under other stacks, else *first*. Sharing a called fragment's rows
across return stacks (issue #30, Deliver 2) can only speed up the *again*
rows, and only their walks (``_cwalk.walk_row`` and ``walk_span``): this
counts, over the sample (each schema walked as ``bench_maskbench.py`` walks
it, in a fresh forked child after the vocabulary and a trivial schema), the
rows of each kind, their time (``LazyIndex._new_row``) and their walks'
time, and the same for the rows over ``--threshold-ms``. Rows are classed
outside the timed calls.

    python benchmarks/lazy_row_classes.py                 # 4 per source (~30 s)

Measured on 92337d8 (qwen2.5, 4 per source; three runs on a shared 2-core
machine at load 3-4, which about doubles every time): rows root 682, single
first 1,267, single again 982, multi first 695, multi again 608; over 0.25
ms: 189-201, 181-217, 52, 316-346 and 128-165 rows (the again kinds 180-217
of 896-956, 20-23% of the slow rows' time). The again rows' walks are
80-99 ms of their 189-219 (single) and 111-147 of 194-266 (multi): what a
row shared across stacks could save at most.

A development aid, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import walk_instances  # noqa: E402
from lazy_shared_states import kernel_shape  # noqa: E402

KINDS = ("root", "single first", "single again", "multi first", "multi again")
_WALKS = ("walk_row", "walk_span")


def _measure(record, vocab, threshold_ns: float) -> dict:
    from tokendfa import Index
    from tokendfa.lazy import LazyIndex
    from tokendfa.lazy import index as index_module

    found: dict[str, float] = {}
    current = [None]
    seen: dict = {}

    def add(key: str, value: float) -> None:
        found[key] = found.get(key, 0) + value

    def kind_of(index, state: int) -> str:
        dfa = index.byte_dfa
        dfa._publish()  # noqa: SLF001 - the store's states, into _kernels (lazydfa's docstring)
        kernel = dfa._kernels[state]  # noqa: SLF001
        shape, stacks = kernel_shape(kernel, dfa._stride)  # noqa: SLF001
        if stacks == (0,):
            return "root"
        many = "multi" if len(stacks) > 1 else "single"
        return f"{many} {'first' if seen.setdefault((id(index), shape), stacks) == stacks else 'again'}"

    new_row = LazyIndex._new_row

    def classed_row(self, state):
        kind = kind_of(self, state)
        current[0] = kind
        started = time.perf_counter_ns()
        try:
            return new_row(self, state)
        finally:
            ns = time.perf_counter_ns() - started
            current[0] = None
            add(f"{kind}|rows", 1)
            add(f"{kind}|ns", ns)
            if ns > threshold_ns:
                add(f"{kind}|slow rows", 1)
                add(f"{kind}|slow ns", ns)

    compiled = index_module._cwalk

    class TimedWalks:
        def __getattr__(self, name):
            function = getattr(compiled, name)
            if name not in _WALKS:
                return function

            def timed(*args):
                started = time.perf_counter_ns()
                try:
                    return function(*args)
                finally:
                    if current[0] is not None:
                        add(f"{current[0]}|walk ns", time.perf_counter_ns() - started)
            return timed

    LazyIndex._new_row = classed_row
    if compiled is not None:
        index_module._cwalk = TimedWalks()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    try:
        index = Index.from_schema(record.schema, vocab, lazy=True)
    except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no rows
        return {}
    walk_instances(index, record, vocab)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default="", help="comma-separated parts of schema names ('': all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--threshold-ms", type=float, default=0.25)
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    if args.per_source < 0 or args.threshold_ms <= 0:
        parser.error("--per-source must be at least 0 and --threshold-ms positive")
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    total: dict[str, float] = {}
    for record in named_sample(args.per_source, args.names):
        try:
            found = answer_in_child(lambda record=record: _measure(record, vocab, args.threshold_ms * 1e6), 600)
        except ChildFailed as failed:
            print(f"{record.name}: {failed}")
            continue
        for key, value in found.items():
            total[key] = total.get(key, 0) + value
    print(f"{'kind':<14}{'rows':>8}{'ms':>9}{'walk ms':>9}{'slow rows':>11}{'slow ms':>9}")
    for kind in KINDS:
        get = lambda what: total.get(f"{kind}|{what}", 0)  # noqa: E731
        print(f"{kind:<14}{get('rows'):>8,.0f}{get('ns') / 1e6:>9.1f}{get('walk ns') / 1e6:>9.1f}"
              f"{get('slow rows'):>11,.0f}{get('slow ns') / 1e6:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
