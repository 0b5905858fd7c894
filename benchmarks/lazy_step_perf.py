#!/usr/bin/env python
"""perf's C and kernel symbols over the lazy engine's steps in a band of times (MaskBench's p99 band by default).

The signal sampler (``lazy_step_sampler.py``) sees Python lines only and
charges time spent in C to the next line run. This runs the lazy walks of
the MaskBench sample (each schema in a fresh forked process, as
``bench_maskbench.py`` runs it, after an untimed small schema) under
``perf record -k CLOCK_MONOTONIC -g``, records each step's start and end on
the same clock, and keeps the samples that fall inside the steps of the
band: their shares by shared object and by symbol (where the sample was),
and, for each ``--callers`` symbol (a kernel function such as
``do_wp_page``), the first user-space symbols under it (who took the page
fault).

    python benchmarks/lazy_step_perf.py                       # 4 a source, band 250-1500 us (~30 s)
    python benchmarks/lazy_step_perf.py --band 1000 50000 --top 30
    python benchmarks/lazy_step_perf.py --callers do_wp_page,do_anonymous_page --keep /tmp/steps

Measured on 2cea247 (qwen2.5, 2 shared cores; 643 steps in the band, 309
ms): kernel 31.5% (page faults 31%, copy-on-write of the parent's pages
20%), libpython 26%, _cwalk 23% (walk_entries 14.6%), _lazycore 10.6%
(session_fast 3.9%, store_state_of 2.2%), libc 5.7%. Needs ``perf`` on the
PATH and permission to sample this process's children.

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import multiprocessing
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import sample, source_names  # noqa: E402
from support.walks import measured_steps  # noqa: E402

_WARM_UP = {"type": "object", "properties": {"a": {"type": "string"}}}


def _child(record, vocab, queue) -> None:
    clock = time.CLOCK_MONOTONIC

    def start() -> int:
        return time.clock_gettime_ns(clock)

    def stop(mark: int, step: int) -> tuple[int, int]:
        return mark, time.clock_gettime_ns(clock)

    queue.put(measured_steps(record, vocab, start, stop, warm_up=_WARM_UP))


def _walks(per_source: int, vocab_name: str, out: Path) -> None:
    """The walks (run under perf): each step's (start, end) ns, by schema, into ``out``."""
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(vocab_name).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    context = multiprocessing.get_context("fork")
    rows = []
    for record in [r for s in source_names() for r in sample(s, per_source or None)]:
        queue = context.Queue()
        child = context.Process(target=_child, args=(record, vocab, queue))
        child.start()
        try:
            steps = queue.get(timeout=120)
        except Exception:  # noqa: BLE001 - a schema that hangs or crashes has no steps
            steps = []
        child.join(5)
        rows.append((record.name, steps))
    out.write_text(json.dumps(rows))


_HEAD = re.compile(r"\s*(\d+)\s+(\d+)\.(\d+):")
_FRAME = re.compile(r"\s*[0-9a-f]+\s+(.*)\s+\((.*)\)$")


def _samples(script: Path):
    """(time ns, [(symbol, shared object name)], innermost first) of each sample."""
    for block in script.read_text(errors="replace").split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        head = _HEAD.match(lines[0]) if lines else None
        if head is None:
            continue
        frames = []
        for line in lines[1:]:
            frame = _FRAME.match(line)
            if frame:
                frames.append((frame.group(1).split("+0x")[0], frame.group(2).split("/")[-1]))
        if frames:
            yield int(head.group(2)) * 10**9 + int(head.group(3)), frames


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--band", nargs=2, type=float, default=(250, 1500), metavar=("LOW_US", "HIGH_US"))
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--frequency", type=int, default=2999, help="perf samples a second")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--callers", default="do_wp_page,do_anonymous_page,do_huge_pmd_anonymous_page",
                        help="comma-separated symbols whose first user-space callers are shown")
    parser.add_argument("--keep", metavar="DIR", help="keep perf.data, the perf script and the steps here")
    parser.add_argument("--walks", metavar="OUT", help=argparse.SUPPRESS)  # the run under perf
    args = parser.parse_args(argv)
    if args.walks:
        _walks(args.per_source, args.vocab, Path(args.walks))
        return 0
    if shutil.which("perf") is None:
        print("perf is not on the PATH", file=sys.stderr)
        return 2
    where = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lazy_step_perf."))
    where.mkdir(parents=True, exist_ok=True)
    data, steps, script = where / "perf.data", where / "steps.json", where / "perf.txt"
    subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-F", str(args.frequency), "-g",
                    "-o", str(data), "--", sys.executable, __file__, "--walks", str(steps),
                    "--per-source", str(args.per_source), "--vocab", args.vocab], check=True)
    with script.open("w") as out:
        subprocess.run(["perf", "script", "-i", str(data), "-F", "pid,time,ip,sym,dso", "--ns"],
                       stdout=out, stderr=subprocess.DEVNULL, check=True)
    low, high = args.band[0] * 1e3, args.band[1] * 1e3
    windows = sorted((a, b) for _, found in json.loads(steps.read_text()) for a, b in found if low <= b - a <= high)
    starts = [a for a, _ in windows]
    watched = set(filter(None, args.callers.split(",")))
    by_object, by_symbol = collections.Counter(), collections.Counter()
    callers = {name: collections.Counter() for name in watched}
    count = 0
    for at, frames in _samples(script):
        i = bisect.bisect_right(starts, at) - 1
        if i < 0 or at > windows[i][1]:
            continue
        count += 1
        by_object[frames[0][1]] += 1
        by_symbol[frames[0]] += 1
        names = {symbol for symbol, _ in frames}
        for name in watched & names:
            user = next((symbol for symbol, obj in frames if obj != "[kernel.kallsyms]"), "?")
            callers[name][user] += 1
    print(f"{len(windows):,} steps of {args.band[0]:g}-{args.band[1]:g} us, "
          f"{sum(b - a for a, b in windows) / 1e6:.1f} ms; {count:,} samples in them")
    if not count:
        return 1
    for obj, n in by_object.most_common(12):
        print(f"  {100 * n / count:5.1f}%  {obj}")
    print("by symbol (where the sample was):")
    for (symbol, obj), n in by_symbol.most_common(args.top):
        print(f"  {100 * n / count:5.2f}%  {symbol}  [{obj}]")
    for name in sorted(watched):
        total = sum(callers[name].values())
        if total:
            print(f"under {name} ({100 * total / count:.1f}%), by the first user-space symbol:")
            for symbol, n in callers[name].most_common(8):
                print(f"  {100 * n / count:5.2f}%  {symbol}")
    if not args.keep:
        shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
