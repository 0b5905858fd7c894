"""Fuzz the index-file loader: many structure-aware mutants, each loaded and judged.

``python tests/fuzz/fuzz_index_files.py --loads 100000`` runs the mutants
(tests/fuzz/mutate.py) in batches, each batch in a child process so that
an interpreter crash (a signal, an abort) is seen and counted, not fatal.
Each load must end in an ``IndexFileError`` or an index consistent
throughout (every mask agreeing with ``advance()``); anything else is a
finding, printed with its mutation. ``--save-findings DIR`` keeps the files
of the findings; ``--corpus DIR --corpus-size N`` writes N mutants, chosen
to cover every mutation kind and outcome, for tests/fuzz/corpus.

Exits 1 when there is any crash or finding. The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def run_batch(seed: int, count: int, verify_share: float, findings_dir: str | None) -> dict:
    """In this process: ``count`` mutants from ``seed``."""
    from fuzz.mutate import judge, mutate, seed_files, write_temporary

    seeds = seed_files()
    rng = random.Random(seed)
    outcomes: collections.Counter = collections.Counter()
    findings = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(count):
            label, raw = mutate(rng, seeds)
            path = write_temporary(raw, folder)
            verify = rng.random() < verify_share
            verdict = judge(path, verify=verify)
            outcomes[verdict.outcome] += 1
            if verdict.outcome == "FINDING":
                findings.append({"seed": seed, "number": number, "mutation": label,
                                 "verify": verify, "detail": verdict.detail})
                if findings_dir:
                    os.replace(path, os.path.join(findings_dir, f"finding-{seed}-{number}.tdfa"))
                    continue
            os.unlink(path)
    return {"outcomes": dict(outcomes), "findings": findings}


def write_corpus(folder: str, size: int, seed: int) -> int:
    """The committed corpus: mutants named by number and mutation."""
    import re

    from fuzz.mutate import corpus_mutants

    os.makedirs(folder, exist_ok=True)
    for number, (label, raw) in enumerate(corpus_mutants(size, seed)):
        name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)[:60]
        with open(os.path.join(folder, f"{number:03d}-{name}.tdfa"), "wb") as handle:
            handle.write(raw)
    print(f"wrote {len(os.listdir(folder))} files to {folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify-share", type=float, default=0.8,
                        help="share of loads with verify=True (the rest verify=False)")
    parser.add_argument("--jobs", type=int, default=1, help="batches run at once")
    parser.add_argument("--save-findings", metavar="DIR")
    parser.add_argument("--corpus", metavar="DIR", help="write a corpus of mutants there and stop")
    parser.add_argument("--corpus-size", type=int, default=70)
    parser.add_argument("--child", nargs=2, type=int, metavar=("SEED", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_batch(*args.child, args.verify_share, args.save_findings)))
        return 0
    if args.corpus:
        return write_corpus(args.corpus, args.corpus_size, args.seed)
    if args.save_findings:
        os.makedirs(args.save_findings, exist_ok=True)
    started = time.perf_counter()
    batches = [(args.seed * 1_000_003 + i, min(args.batch, args.loads - i * args.batch))
               for i in range(-(-args.loads // args.batch))]
    outcomes: collections.Counter = collections.Counter()
    crashes, findings = [], []
    running: list = []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

    def collect(seed, child):
        stdout, stderr = child.communicate()
        if child.returncode != 0:
            crashes.append({"seed": seed, "returncode": child.returncode, "stderr": stderr[-2000:]})
            print(f"batch {seed}: CRASH, exit {child.returncode}\n{stderr[-2000:]}", flush=True)
            return
        result = json.loads(stdout.strip().splitlines()[-1])
        outcomes.update(result["outcomes"])
        findings.extend(result["findings"])
        print(f"batch {seed}: {result['outcomes']} ({time.perf_counter() - started:.0f} s)", flush=True)

    for seed, count in batches:
        command = [sys.executable, os.path.abspath(__file__), "--child", str(seed), str(count),
                   "--verify-share", str(args.verify_share)]
        if args.save_findings:
            command += ["--save-findings", args.save_findings]
        running.append((seed, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True, env=env)))
        if len(running) >= args.jobs:
            collect(*running.pop(0))
    for job in running:
        collect(*job)
    for finding in findings[:50]:
        print("FINDING", json.dumps(finding))
    summary = {"loads": sum(outcomes.values()), "outcomes": dict(outcomes), "crashes": len(crashes),
               "foreign_or_inconsistent": len(findings),
               "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(summary))
    return 1 if crashes or findings else 0


if __name__ == "__main__":
    sys.exit(main())
