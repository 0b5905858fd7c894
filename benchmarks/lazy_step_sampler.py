#!/usr/bin/env python
"""Where the lazy engine's steps in a band of times (MaskBench's p99 band by default) spend it, sampled.

``TBM p99`` turns on the ~175 slowest of MaskBench's ~17,500 steps, and the
steps around it are ordinary cold rows of 0.25-1.5 ms: a profile weighted by
time over all steps is led instead by the few steps of tens of ms (a big
definition compiled at its first call, a full collection). This runs the
lazy engine as ``bench_maskbench.py`` does (each schema in a forked child,
after the untimed warm-up schema), samples the Python stack every
``--interval`` microseconds of wall time inside each step (``SIGALRM``),
keeps the samples of the steps whose time falls in ``--band``, and prints
the share of those samples each function is on the stack of (inclusive),
and each line at the top of (self).

A signal is handled between two bytecodes: time inside C code is counted at
the next Python line run, which is the line after the call in the Python
function that made it, or, when the C code calls back into Python, that
callback: in a cold row, the compiled walk's ``LazyByteDFA.table`` (read
after each cell it resolves) and the compiled core's ``limits.check`` (once
a new state) stand for the time of the compiled walk and core before them.
The sampler's own work is left out of the shares but not out of the steps'
times (~10 us a sample).

    python benchmarks/lazy_step_sampler.py                       # 4 per source, steps of 250-1500 us (~2 min)
    python benchmarks/lazy_step_sampler.py --band 1000 100000 --names sp_0,o65424

Measured on 8282b2a (qwen2.5, 84 schemas, ~20k samples in the steps of
250-1500 us, a loaded 2-core machine): the compiled walk and core
(``table``, ``limits.check``) 33%; ``_loop_row`` 32% inclusive, of which
making walk plans (fresh in each forked child) 10%; ``successors`` 8%;
definitions compiled at their first call 4%; the rest in numpy calls and
Python around them, none over 3%.

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402

_DEPTH = 40  # frames kept a sample


def _sampled(record, vocab, interval: float, band: tuple[float, float]) -> list[list[str]]:
    """Every sample (innermost frame first, ``file:function:line``) taken
    inside a step of the record's walk whose time is within ``band`` (ns)."""
    taken: list = []
    outer = measured_steps.__code__  # the stack is cut here: the frames below are the harness's

    def take(signum, frame) -> None:
        stack = []
        while frame is not None and frame.f_code is not outer and len(stack) < _DEPTH:
            stack.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        taken.append(stack)

    def start() -> int:
        taken.clear()
        signal.setitimer(signal.ITIMER_REAL, interval, interval)
        return time.perf_counter_ns()

    def stop(started: int, step: int) -> None:
        elapsed = time.perf_counter_ns() - started
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        if band[0] <= elapsed < band[1]:
            kept.extend([f"{os.path.basename(code.co_filename)}:{code.co_qualname}:{line}"
                         for code, line in stack] for stack in taken)

    signal.signal(signal.SIGALRM, take)
    kept: list = []
    measured_steps(record, vocab, start, stop, warm_up={"type": "object"})  # MaskBench's untimed warm-up schema
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--band", type=float, nargs=2, default=[250, 1500], metavar=("LOW_US", "HIGH_US"))
    parser.add_argument("--interval", type=float, default=50, help="microseconds between samples")
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    if not 0 <= args.band[0] < args.band[1] or args.interval <= 0 or args.per_source < 0:
        parser.error("--band needs 0 <= LOW < HIGH, --interval a positive time and --per-source at least 0")
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    records = named_sample(args.per_source, args.names)
    band = (args.band[0] * 1e3, args.band[1] * 1e3)
    inclusive, own, total = Counter(), Counter(), 0
    for record in records:
        try:
            stacks = answer_in_child(lambda record=record: _sampled(record, vocab, args.interval * 1e-6, band), 600)
        except ChildFailed:  # a child that failed, died or hung gives no samples
            stacks = []
        for stack in stacks:
            if not stack:
                continue
            total += 1
            own[stack[0]] += 1
            inclusive.update({frame.rsplit(":", 1)[0] for frame in stack})
    if not total:
        print("no samples: no step in the band")
        return 1
    print(f"{total:,} samples in steps of {args.band[0]:g}-{args.band[1]:g} us, {len(records)} schemas")
    print("on the stack (inclusive):")
    for frame, count in inclusive.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {frame}")
    print("at the top (self, by line):")
    for frame, count in own.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
