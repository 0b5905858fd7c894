"""A prepared process's first schema against its tenth (issue 29's target: within 2x).

``python benchmarks/first_schema.py [VOCAB] [--runs N]``: in each of N fresh
processes, load the vocabulary, ``prepare()`` it, then compile twelve distinct
schemas of the same shape and size with the library's defaults (lazy), timing
``Index.from_schema`` plus the first mask, then a walk of one instance (a mask
and an advance a token). Prints each run's first and tenth schema and the
ratio of their medians over the runs, in wall time and in the CPU time of
the thread (which preemption on a loaded machine does not inflate).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, time
from tokendfa import Guide, Index, Vocabulary

started = time.perf_counter()
vocab = Vocabulary.builtin(sys.argv[1])
loaded = time.perf_counter()
cpu = time.thread_time()
vocab.prepare()
prepared = time.perf_counter()
prepare_cpu = time.thread_time() - cpu

def schema(i):
    return {"type": "object", "properties": {
        f"name{i}": {"type": "string"}, f"age{i}": {"type": "integer", "minimum": i},
        f"score{i}": {"type": "number"}, f"tag{i}": {"type": "string", "maxLength": 10 + i},
        f"ok{i}": {"type": "boolean"}}, "required": [f"name{i}"]}

text = '{"name%d":"Ada Lovelace","age%d":%d,"score%d":1.5,"tag%d":"x","ok%d":true}'
rows = []
for i in range(12):
    begin, cpu = time.perf_counter(), time.thread_time()
    index = Index.from_schema(schema(i), vocab)
    index.get_mask(index.initial_state)
    first, cpu = time.perf_counter(), time.thread_time() - cpu
    guide = Guide(index)
    for token in vocab.encode(text % (i, i, i + 1, i, i, i)):
        guide.get_mask()
        guide.advance(token)
    assert guide.can_end()
    rows.append((first - begin, time.perf_counter() - first, cpu))
print(json.dumps({"load": loaded - started, "prepare": prepared - loaded, "prepare_cpu": prepare_cpu,
                  "schemas": rows}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocab", nargs="?", default="qwen2.5")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    firsts, tenths, first_cpus, tenth_cpus = [], [], [], []
    for run in range(args.runs):
        done = subprocess.run([sys.executable, "-c", CHILD, args.vocab], capture_output=True, text=True,
                              check=True)
        result = json.loads(done.stdout)
        (first, first_walk, first_cpu), (tenth, tenth_walk, tenth_cpu) = result["schemas"][0], result["schemas"][9]
        firsts.append(first)
        tenths.append(tenth)
        first_cpus.append(first_cpu)
        tenth_cpus.append(tenth_cpu)
        print(f"run {run + 1}: prepare {result['prepare']:.2f} s ({result['prepare_cpu']:.2f} s CPU); "
              f"first schema {first * 1e3:.1f} ms ({first_cpu * 1e3:.1f} ms CPU, + walk {first_walk * 1e3:.1f} ms), "
              f"tenth {tenth * 1e3:.1f} ms ({tenth_cpu * 1e3:.1f} ms CPU, + walk {tenth_walk * 1e3:.1f} ms)")
    ratio = statistics.median(firsts) / statistics.median(tenths)
    cpu_ratio = statistics.median(first_cpus) / statistics.median(tenth_cpus)
    # the CPU time of the caller's thread: on a loaded machine, a wall time of ~1 ms
    # gains 4-5 ms whenever the process is preempted inside it
    print(f"median first / tenth (compile + first mask): {ratio:.2f}; in CPU time: {cpu_ratio:.2f}")


if __name__ == "__main__":
    main()
