"""Where the time to first mask goes in a fresh fork: a sampled profile of ttfm_fork's timed region.

cProfile in a forked child multiplies the cost of every call and hides what
a fork adds (copy-on-write faults, cold caches), and a profile of a warm
process loop measures another thing. This samples instead: each child
builds the warm-up schema untimed (as ``ttfm_fork.py`` and MaskBench do),
then a wall-clock timer interrupts ``Index.from_schema(schema, vocab)`` and
the first mask every ``--interval-us`` microseconds and records the Python
stack. The stacks of every child are summed: the share of samples a
function is on the stack (inclusive) and on top of it (exclusive; time in C
is charged to the Python function that called it). A single-threaded child
on a loaded machine also collects samples while it waits for a core, spread
like the rest.

``--rows`` (``ttfm_fork.py --out``) with ``--between 20,80`` keeps the
schemas between those percentiles of its times: the middle of the
distribution, where p50 is decided, rather than the slow schemas that
dominate a plain sum.

    .venv/bin/python benchmarks/ttfm_fork.py --per-source 8 --out /tmp/ttfm.json
    .venv/bin/python benchmarks/ttfm_sample.py --rows /tmp/ttfm.json --between 20,80 --rounds 3
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names  # noqa: E402
from benchmarks.support.isolation import forked  # noqa: E402
from benchmarks.ttfm_fork import WARM_UP, use_root, warm_parent  # noqa: E402


def _name(code) -> str:
    path = code.co_filename.split("site-packages/")[-1]
    root = str(Path(__file__).resolve().parents[1]) + "/"
    return f"{path.replace(root, '')}:{code.co_firstlineno}:{code.co_name}"


def _sampled(schema, vocab, interval: float) -> list[list[str]]:
    """The stacks sampled every ``interval`` seconds over ``schema``'s
    Index.from_schema and first mask, after the warm-up schema's, in this
    process (a fresh fork); the frames from this function down left out."""
    from tokendfa import Guide, Index

    Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
    stacks: list = []
    outer = _sampled.__code__

    def take(signum, frame) -> None:
        codes = []
        while frame is not None and frame.f_code is not outer:  # code objects only: names are made after
            codes.append(frame.f_code)
            frame = frame.f_back
        stacks.append(codes)

    signal.signal(signal.SIGALRM, take)
    signal.setitimer(signal.ITIMER_REAL, interval, interval)
    try:
        Guide(Index.from_schema(schema, vocab, lazy=True)).get_mask()
    except Exception:  # noqa: BLE001 - a refused schema: its samples are left out
        stacks = []
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    return [[_name(code) for code in codes] for codes in stacks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=8, help="schemas a source (sample())")
    parser.add_argument("--vocab", default="qwen2.5", help="a builtin vocabulary")
    parser.add_argument("--rounds", type=int, default=3, help="runs of the sample (more samples)")
    parser.add_argument("--interval-us", type=float, default=41.0, help="sampling interval")
    parser.add_argument("--rows", default=None, help="ttfm_fork.py --out rows, to select by time")
    parser.add_argument("--between", default="0,100", help="percentiles of --rows' times kept")
    parser.add_argument("--top", type=int, default=50, help="functions listed, each way")
    parser.add_argument("--root", default=None, help="import tokendfa from this checkout")
    args = parser.parse_args()
    if args.root:
        use_root(args.root)

    vocab = warm_parent(args.vocab)
    records = [record for source in source_names() for record in sample(source, args.per_source or None)]
    if args.rows:
        times = {row["label"]: row["ms"] for row in json.loads(Path(args.rows).read_text()) if "ms" in row}
        ordered = sorted(times.values())
        low, high = (float(p) for p in args.between.split(","))
        lo = ordered[min(len(ordered) - 1, int(low / 100 * len(ordered)))]
        hi = ordered[min(len(ordered) - 1, int(high / 100 * len(ordered)))]
        records = [r for r in records if lo <= times.get(f"{r.source}:{r.line}", -1) <= hi]
    interval = args.interval_us * 1e-6
    inclusive: collections.Counter = collections.Counter()
    exclusive: collections.Counter = collections.Counter()
    total = 0
    for _ in range(args.rounds):
        for record in records:
            row = forked(lambda record=record: {"stacks": _sampled(record.schema, vocab, interval)})
            for stack in row.get("stacks", []):
                if stack:
                    total += 1
                    exclusive[stack[0]] += 1
                    inclusive.update(set(stack))
    print(f"{total} samples, {len(records)} schemas, {args.rounds} rounds")
    for title, counts in (("inclusive", inclusive), ("exclusive", exclusive)):
        print(f"--- {title}")
        for name, count in counts.most_common(args.top):
            print(f"{100 * count / max(total, 1):5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
