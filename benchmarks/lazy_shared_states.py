#!/usr/bin/env python
"""How much of the lazy engine's cold work repeats a called fragment under another return stack.

A state of the lazy automaton (:class:`tokendfa.analysis.lazydfa.LazyByteDFA`)
is a kernel of configurations ``(stack, NFA state)``. A definition called
from many places gives, under each stack that reaches it, states whose
kernels are the same NFA states on that one stack: the same *shape*
(kernels on several stacks: the NFA states numbered by slot, the stacks in
order). This counts, on MaskBench's sample, for each schema in a forked
child as ``bench_maskbench.py`` runs it:

- the states discovered, and those whose shape was discovered before under
  other stacks (*again*);
- the cell-resolution time spent on them: the automaton's cell calls of a
  walk are recorded (the numpy walk, whose calls are all seen: the compiled
  walk resolves cells inside C), replayed on a fresh automaton whose
  definitions are compiled first (untimed), and each call's time is shared
  among the states it discovers, the *again* ones counted apart;
- the cold token rows (``LazyIndex._raw_row``: the numpy row, the one whose
  row object a translation can read; the compiled row makes the mask bytes
  in C), and those
  of a state whose shape had a row already under another stack: what
  sharing rows across stacks could save;
- of those rows' walked tokens, how many end where the earlier row's token
  ends with the stacks translated (each of the earlier state's stacks to
  the later one's, slot by slot, and stacks pushed above them alike), how
  many end where the stack decides (the walk returned below the fragment,
  or the token is in one row only), and how many translate to another
  state (a walk that returned and called again: a row shared across stacks
  must know where its walks left the fragment, not only where they end).

    python benchmarks/lazy_shared_states.py                 # 4 per source (~2 min)
    python benchmarks/lazy_shared_states.py --names kb_209,o65424

Measured on 2e9c97f (qwen2.5, 4 per source, 79 schemas that compile; a
shared 2-core machine; two runs): 39,917 states, 21,911 again (55%); the
replayed cell calls 533-545 ms, 209-219 ms (38-41%) on the again states;
4,234 cold rows in 921-953 ms, of which 1,590 rows (38%) and 186-194 ms
(20%) are of a shape that had a row under another stack; of those rows'
walked tokens (a later run), 2,101,022 (94%) end where the earlier row's
do, stacks translated, 99,917 (4.5%) where the stack decides, and 36,575
(1.6%) elsewhere. The replay goes
through ``successors`` (a Python loop over the core's functions on the
Python containers); the compiled walk resolves its cells in the native
state store instead, at well under a microsecond a cell (perf: ``_lazycore``
~1.2% of the samples of the walks of o65424 and sp_0, ~1.8 us a state with
publishing), and moves shared across stacks inside the store (branch
s24-share-moves-experiment) changed no step's time: what repeats at a cost
is the token rows.

A development aid like ``lazy_core_replay.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample, sample_arguments, warm_vocabulary  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import walk_instances  # noqa: E402
from lazy_core_replay import _record, numpy_walk  # noqa: E402


def kernel_shape(kernel, stride: int):
    """``(shape, stacks)`` of a kernel: its NFA states on one stack, or by slot on several."""
    stacks = sorted({config // stride for config in kernel})
    if len(stacks) == 1:
        return frozenset(config % stride for config in kernel), tuple(stacks)
    slot = {stack: i for i, stack in enumerate(stacks)}
    return tuple(sorted(slot[c // stride] * stride + c % stride for c in kernel)), tuple(stacks)


def _translated(dfa, state: int, slots: dict) -> "int | None":
    """The state whose kernel is ``state``'s with each stack in ``slots``
    (a row's stacks) replaced by its image, and each stack pushed above one
    of them pushed the same way above the image; None when a configuration
    lies on no such stack (the token's walk returned below the row's
    fragment: its end depends on the stack) or the image is not a state."""
    stride, parent, top, pushes = dfa._stride, dfa._stack_parent, dfa._stack_top, dfa._pushes
    images = dict(slots)

    def image(stack: int) -> "int | None":
        if stack in images:
            return images[stack]
        if stack == 0:
            return None
        below = image(parent[stack])
        found = None if below is None else pushes.get(below * stride + top[stack])
        images[stack] = found
        return found

    configs = []
    for config in dfa._kernels[state]:
        stack = image(config // stride)
        if stack is None:
            return None
        configs.append(stack * stride + config % stride)
    return dfa._ids.get(frozenset(configs))


def _row_pairs(dfa, first_row, first_state: int, row, state: int) -> tuple[int, int, int]:
    """Of ``row``'s walked tokens (state ``state``), how many end where
    ``first_row``'s (state ``first_state``, the same shape under other stacks)
    do, stacks translated; how many end where the stack decides (a walk out
    of the fragment, or in one row only); how many disagree."""
    stride = dfa._stride
    slots = dict(zip(sorted({c // stride for c in dfa._kernels[first_state]}),
                     sorted({c // stride for c in dfa._kernels[state]})))
    before = dict(zip(first_row.tokens.tolist(), first_row.ends.tolist()))
    same = stacked = wrong = 0
    for token, end in zip(row.tokens.tolist(), row.ends.tolist()):
        other = before.pop(token, None)
        image = None if other is None else _translated(dfa, other, slots)
        if image is None:
            stacked += 1
        elif image == end:
            same += 1
        else:
            wrong += 1
    return same, stacked + len(before), wrong


def _measure(record, vocab) -> dict:
    from tokendfa import Index
    from tokendfa.lazy.index import LazyIndex

    Index.from_schema({"type": "object"}, vocab, lazy=True)  # MaskBench's untimed warm-up schema
    index = Index.from_schema(record.schema, vocab, lazy=True)
    dfa = index.byte_dfa
    rows = []  # (state, ns, row)

    def timed_row(state, _raw=LazyIndex._raw_row, _index=index):
        if state in _index._raw_rows:
            return _raw(_index, state)
        started = time.perf_counter_ns()
        row = _raw(_index, state)
        rows.append((state, time.perf_counter_ns() - started, row))
        return row

    index._raw_row = timed_row
    with numpy_walk():
        walk_instances(index, record, vocab)
    dfa._publish()  # noqa: SLF001 - the store's states, into _kernels (lazydfa's docstring)
    stride, kernels = dfa._stride, dfa._kernels
    row_shapes: dict = {}
    rows_again = rows_again_ns = tokens_same = tokens_stacked = tokens_wrong = 0
    for state, ns, row in rows:
        shape, stacks = kernel_shape(kernels[state], stride)
        first = row_shapes.setdefault(shape, (stacks, state, row))
        if first[0] != stacks:
            rows_again, rows_again_ns = rows_again + 1, rows_again_ns + ns
            same, stacked, wrong = _row_pairs(dfa, first[2], first[1], row, state)
            tokens_same, tokens_stacked, tokens_wrong = (tokens_same + same, tokens_stacked + stacked,
                                                         tokens_wrong + wrong)

    walked = Index.from_schema(record.schema, vocab, lazy=True)
    calls: list = []
    _record(walked.byte_dfa, calls)
    with numpy_walk():
        walk_instances(walked, record, vocab)
    fresh = Index.from_schema(record.schema, vocab, lazy=True).byte_dfa
    with fresh.resolving():
        fresh._nfa.compile_everything()  # noqa: SLF001 - a development aid: compiling is not the core's cost
    shapes: dict = {}
    replay_ns = again_ns = 0.0
    again = 0
    for name, args in calls:
        before = fresh.num_states
        started = time.perf_counter_ns()
        if name == "step_held":
            with fresh.resolving():
                if fresh.table[args[0], args[1]] == -1:
                    fresh.step_held(*args)
        else:
            getattr(fresh, name)(*args)
        ns = time.perf_counter_ns() - started
        replay_ns += ns
        after = fresh.num_states
        if after > before:
            fresh._publish()  # noqa: SLF001
            found = 0
            for state in range(before, after):
                shape, stacks = kernel_shape(fresh._kernels[state], stride)
                found += shapes.setdefault(shape, stacks) != stacks
            again += found
            again_ns += ns * found / (after - before)
    return {"states": fresh.num_states, "again": again, "replay_ns": replay_ns, "again_ns": again_ns,
            "rows": len(rows), "rows_ns": sum(ns for _, ns, _ in rows), "rows_again": rows_again,
            "rows_again_ns": rows_again_ns, "tokens_same": tokens_same, "tokens_stacked": tokens_stacked,
            "tokens_wrong": tokens_wrong}


def main(argv: list[str] | None = None) -> int:
    args = sample_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), argv)
    vocab = warm_vocabulary(args.vocab)
    records = named_sample(args.per_source, args.names)
    total: dict[str, float] = {}
    for record in records:
        try:  # an error is reported, and the next schema goes on
            found = answer_in_child(lambda record=record: _measure(record, vocab), 600)
        except ChildFailed as failed:
            print(f"{record.name}: {failed}")
            continue
        print(f"{record.name}: {found['states']:,} states, {found['again']:,} again; cells "
              f"{found['replay_ns'] / 1e6:,.1f} ms, {found['again_ns'] / 1e6:,.1f} on them; rows {found['rows']:,} "
              f"in {found['rows_ns'] / 1e6:,.1f} ms, {found['rows_again']:,} again in "
              f"{found['rows_again_ns'] / 1e6:,.1f} ms", flush=True)
        for key, value in found.items():
            total[key] = total.get(key, 0) + value
    if total.get("states"):
        print(f"all: {total['states']:,.0f} states, {total['again']:,.0f} again "
              f"({100 * total['again'] / total['states']:.0f}%); cells {total['replay_ns'] / 1e6:,.0f} ms, "
              f"{total['again_ns'] / 1e6:,.0f} ms on them ({100 * total['again_ns'] / total['replay_ns']:.0f}%); "
              f"rows {total['rows']:,.0f} in {total['rows_ns'] / 1e6:,.0f} ms, {total['rows_again']:,.0f} again "
              f"({100 * total['rows_again'] / max(total['rows'], 1):.0f}%) in {total['rows_again_ns'] / 1e6:,.0f} ms "
              f"({100 * total['rows_again_ns'] / max(total['rows_ns'], 1):.0f}%); their walked tokens: "
              f"{total['tokens_same']:,.0f} end where the earlier row's do, stacks translated, "
              f"{total['tokens_stacked']:,.0f} where the stack decides, {total['tokens_wrong']:,.0f} elsewhere")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
