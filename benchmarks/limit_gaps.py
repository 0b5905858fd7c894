"""The longest stretches between two time-limit checks in a build, and where they are.

A build stops at the first ``limits.check()`` after its deadline, so how late a
time limit fires is bounded by the longest stretch of work between two checks
(on a loaded machine, that stretch times the slowdown). This script runs cases
of the hostile corpus (``tests/hostile/cases.py``, by name) with every
``limits.check()`` recorded, and prints the longest gaps with the code on
both sides of each (the recorder's own cost is outside the gaps, but its
records make the collector's passes longer).

    python benchmarks/limit_gaps.py schema-const-huge schema-enum-30k-objects
    python benchmarks/limit_gaps.py schema-const-huge --mode lazy --top 5
    python benchmarks/limit_gaps.py schema-enum-30k-objects --mode lazy --sample 4   # what ran in each gap
    python benchmarks/limit_gaps.py schema-const-huge --overshoot 3 --limits 0.5,1.5,2.5,4

The vocabulary is prepared first (its tables are the process's, outside the
limit: ``limits.excluded``), and the build runs under the corpus's time limit
(``--time-limit``). ``--overshoot N`` runs each case N times for each limit
of ``--limits`` (a limit for each phase of the build), each in a fresh
process without the recorder, and reports how long after the deadline the
TimeLimitError came (the build's seconds less the excluded ones less the limit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")


def _case(name: str):
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hostile.cases import ALL_CASES

    return next(c for c in ALL_CASES if c.name == name)


def _corpus_time_limit() -> float:
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hostile.cases import TIME_LIMIT

    return TIME_LIMIT


def _site(frame, depth: int) -> str:
    parts = []
    for _ in range(depth):
        if frame is None:
            break
        code = frame.f_code
        parts.append(f"{os.path.basename(code.co_filename)}:{frame.f_lineno}({code.co_name})")
        frame = frame.f_back
    return " < ".join(parts)


class Sampler:
    """The main thread's stack every ``interval`` seconds, from a thread of its
    own (it runs when the main thread lets go of the interpreter lock, at
    least every switch interval, 5 ms): what ran inside a long gap."""

    def __init__(self, interval: float, depth: int) -> None:
        import threading

        self.samples: list[tuple[float, str]] = []
        self._main = threading.main_thread().ident
        self._interval, self._depth = interval, depth
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            frame = sys._current_frames().get(self._main)
            if frame is not None:
                self.samples.append((time.perf_counter(), _site(frame, self._depth)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def within(self, start: float, end: float) -> list[tuple[int, str]]:
        from collections import Counter

        found = Counter(site for at, site in self.samples if start <= at <= end)
        return [(count, site) for site, count in found.most_common(6)]


def record(name: str, mode: str, time_limit: float, depth: int, sampler_depth: int = 0):
    """(gaps, outcome, seconds): every gap between consecutive checks as
    (seconds, site before, site after, started); with ``sampler_depth``, also
    the stacks sampled inside the gaps (a :class:`Sampler`)."""
    from tokendfa import Vocabulary
    from tokendfa.analysis import limits

    case = _case(name)
    text = case.make()
    vocab = Vocabulary.from_spec(case.vocab if case.vocab != "toy" else "qwen2.5")
    vocab.prepare(eager=mode == "lib")
    original = limits.check
    last = [time.perf_counter(), "start of the build"]
    gaps: list[tuple[float, str, str]] = []

    def recording_check() -> None:
        now = time.perf_counter()
        site = _site(sys._getframe(1), depth)
        gaps.append((now - last[0], last[1], site, last[0]))
        last[0], last[1] = time.perf_counter(), site
        original()

    limits.check = recording_check
    sampler = Sampler(0.002, sampler_depth) if sampler_depth else None
    excluded = limits.excluded_seconds()
    started = time.perf_counter()
    last[0] = started
    try:
        outcome = _build(case, text, vocab, mode, time_limit)
        if outcome == "ok":
            gaps.append((time.perf_counter() - last[0], last[1], "end of the build", last[0]))
    finally:
        limits.check = original
        if sampler is not None:
            sampler.stop()
    seconds = time.perf_counter() - started - (limits.excluded_seconds() - excluded)
    return gaps, outcome, seconds, sampler


def _build(case, text, vocab, mode: str, time_limit: float) -> str:
    """Build ``case`` (and, lazy, its first mask): "ok" or the tokendfa error's name."""
    from tokendfa import Index, TokenDFAError

    try:
        build = Index.from_regex if case.kind == "regex" else Index.from_schema
        index = build(text, vocab, time_limit=time_limit, lazy=mode == "lazy")
        if mode == "lazy":
            index.get_mask(index.initial_state)
        return "ok"
    except TokenDFAError as exc:
        return type(exc).__name__


def measure_once(name: str, mode: str, time_limit: float) -> dict:
    """One build under ``time_limit`` in this process (the vocabulary prepared
    first): its outcome, and how late a TimeLimitError came."""
    from tokendfa import Vocabulary
    from tokendfa.analysis import limits

    case = _case(name)
    text = case.make()
    vocab = Vocabulary.from_spec(case.vocab if case.vocab != "toy" else "qwen2.5")
    vocab.prepare(eager=mode == "lib")
    excluded = limits.excluded_seconds()
    started = time.perf_counter()
    outcome = _build(case, text, vocab, mode, time_limit)
    seconds = time.perf_counter() - started - (limits.excluded_seconds() - excluded)
    return {"outcome": outcome, "seconds": round(seconds, 3), "late": round(seconds - time_limit, 3)}


def overshoot(name: str, mode: str, time_limit: float, runs: int) -> list[dict]:
    """:func:`measure_once` ``runs`` times, each in a fresh process."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), name, "--mode", mode,
                               "--time-limit", str(time_limit), "--once"],
                              capture_output=True, text=True, env=env, timeout=300)
        lines = done.stdout.strip().splitlines()
        out.append(json.loads(lines[-1]) if lines else {"outcome": f"exit {done.returncode}",
                                                          "stderr": done.stderr[-500:]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", help="names of cases in tests/hostile/cases.py")
    parser.add_argument("--mode", choices=("lib", "lazy"), default="lib",
                        help="lib: the eager build; lazy: the lazy index and its first mask")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds (default: the corpus's TIME_LIMIT)")
    parser.add_argument("--top", type=int, default=8, help="gaps shown per case")
    parser.add_argument("--depth", type=int, default=2, help="frames shown per site")
    parser.add_argument("--sample", type=int, default=0, metavar="DEPTH",
                        help="sample the stack (DEPTH frames) every 2 ms, and show what ran in each gap shown")
    parser.add_argument("--overshoot", type=int, default=0, metavar="N",
                        help="instead: N builds per case and limit, each in a fresh process, "
                             "and how late each TimeLimitError came")
    parser.add_argument("--limits", default=None,
                        help="with --overshoot: comma-separated time limits, to stop the build "
                             "in each of its phases (default: the corpus's)")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit = _corpus_time_limit() if args.time_limit is None else args.time_limit
    if args.once:
        print(json.dumps(measure_once(args.cases[0], args.mode, limit)))
        return
    if args.overshoot:
        chosen = [float(v) for v in args.limits.split(",")] if args.limits else [limit]
        for name in args.cases:
            worst = []
            for each in chosen:
                results = overshoot(name, args.mode, each, args.overshoot)
                late = [r["late"] for r in results if r["outcome"] == "TimeLimitError"]
                others = [r["outcome"] for r in results if r["outcome"] != "TimeLimitError"]
                worst += late
                print(f"{name} {args.mode} at {each:g} s: late by {late} s"
                      + (f"; other outcomes {others}" if others else ""), flush=True)
            print(f"{name} {args.mode}: worst {max(worst, default=float('nan')):.3f} s "
                  f"over {len(worst)} stopped builds", flush=True)
        return
    for name in args.cases:
        gaps, outcome, seconds, sampler = record(name, args.mode, limit, args.depth, args.sample)
        gaps.sort(key=lambda g: -g[0])
        print(f"{name} ({args.mode}, limit {limit:g} s): {outcome} after {seconds:.3f} s, "
              f"{len(gaps)} checks")
        for gap, before, after, at in gaps[:args.top]:
            print(f"  {gap * 1000:8.1f} ms  {before}\n             -> {after}")
            if sampler is not None:
                for count, site in sampler.within(at, at + gap):
                    print(f"        {count:4d} x {site}")


if __name__ == "__main__":
    main()
