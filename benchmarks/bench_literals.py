"""Large literal sets: compile + first mask of a big ``enum`` and of a regex
alternation of words, lazy and eager, on qwen2.5.

Usage: python benchmarks/bench_literals.py [--sizes 1000,60000] [--words 500]
       [--modes lazy,eager] [--time-limit 60]

The values are realistic codes and names, 5-30 characters, drawn from a
fixed seed (``f"{code}-{word}"`` codes, capitalised names, some non-ASCII).
Each measurement runs in a fresh forked child of a warmed process (its
vocabulary prepared, one trivial schema compiled), as MaskBench does. Wall
time and the child's CPU time (``time.process_time``) are printed: on a
shared, loaded machine the CPU time is the one to compare. The last figure
is the first ``forced_tokens`` call after the first mask: where an eager
index makes its fast-forward table (a lazy index serves none).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.isolation import forked  # noqa: E402

WORDS = ("alpha beta gamma delta omega river stone cloud market harbor silver north south "
         "east west garden tower bridge forest meadow canyon valley island desert ocean lake "
         "summit ridge prairie glacier orchard vineyard quarry harbour citadel bazaar").split()
ACCENTS = ["é", "ü", "ñ", "ø", "ç", "å", "日本", "ß"]


def values(count: int, seed: int = 29) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < count:
        kind = rng.random()
        if kind < 0.5:
            code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(rng.randint(2, 4)))
            text = f"{code}{rng.randint(0, 9999):04d}-{rng.choice(WORDS)}"
        elif kind < 0.9:
            text = " ".join(rng.choice(WORDS).capitalize() for _ in range(rng.randint(1, 3)))
            text += f" {rng.randint(1, 999)}"
        else:
            word = rng.choice(WORDS)
            i = rng.randint(0, len(word))
            text = word[:i] + rng.choice(ACCENTS) + word[i:] + f"-{rng.randint(0, 99)}"
        if 5 <= len(text) <= 30:
            out.add(text)
    result = sorted(out)
    rng.shuffle(result)
    return result


def words(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    letters = "abcdefghijklmnopqrstuvwxyz"
    while len(out) < count:
        out.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(out)


def measure(kind: str, mode: str, size: int, vocab, time_limit: float) -> str:
    from tokendfa import Guide, Index
    t0 = time.perf_counter()
    try:
        if kind == "enum":
            schema = {"type": "string", "enum": values(size)}
            t0, c0 = time.perf_counter(), time.process_time()
            index = Index.from_schema(schema, vocab, lazy=(mode == "lazy"), time_limit=time_limit)
        else:
            pattern = "(?:" + "|".join(words(size)) + ")"
            t0, c0 = time.perf_counter(), time.process_time()
            index = Index.from_regex(pattern, vocab, lazy=(mode == "lazy"), time_limit=time_limit)
        t1, c1 = time.perf_counter(), time.process_time()
        Guide(index).get_mask()
        t2, c2 = time.perf_counter(), time.process_time()
        index.forced_tokens(index.initial_state)  # an eager index makes its fast-forward table here
        t3 = time.perf_counter()
        return (f"{kind:5} {size:6} {mode:5}  compile {1000 * (t1 - t0):9.1f} ms  "
                f"first mask {1000 * (t2 - t1):7.2f} ms  total {1000 * (t2 - t0):9.1f} ms  "
                f"(CPU: compile {1000 * (c1 - c0):7.1f} ms, first mask {1000 * (c2 - c1):6.2f} ms; "
                f"then the first forced tokens {1000 * (t3 - t2):6.1f} ms)")
    except Exception as exc:  # reported, not raised: the row says what happened
        return f"{kind:5} {size:6} {mode:5}  FAILED after {time.perf_counter() - t0:.1f} s: {type(exc).__name__}: {str(exc)[:120]}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,60000")
    parser.add_argument("--words", default="500")
    parser.add_argument("--modes", default="lazy,eager")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    from tokendfa import Guide, Index, Vocabulary
    vocab = Vocabulary.builtin("qwen2.5")
    vocab.prepare()
    Guide(Index.from_schema({"type": "boolean"}, vocab, lazy=True)).get_mask()  # warm
    Index.from_schema({"type": "boolean"}, vocab, lazy=False)
    jobs = [("enum", int(s)) for s in args.sizes.split(",") if s] + \
           [("regex", int(s)) for s in args.words.split(",") if s]
    for kind, size in jobs:
        for mode in args.modes.split(","):
            row = forked(lambda kind=kind, mode=mode, size=size:
                         {"line": measure(kind, mode, size, vocab, args.time_limit)})
            print(row.get("line") or f"{kind:5} {size:6} {mode:5}  {row['error']}", flush=True)


if __name__ == "__main__":
    main()
