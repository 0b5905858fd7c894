"""A long-lived process serving many distinct schemas through the lazy path:
its memory, against the bound the README states.

Goes through JSONSchemaBench (every source in turn) until ``--schemas``
distinct schemas have been served: each is compiled to a lazy index
(qwen2.5), and its first valid instance is decoded with a mask at every
step (compact JSON, tokens forced; ``--random-steps`` random allowed tokens
where it has none). The last ``--keep`` indexes stay alive, as in a server's
in-memory cache of recent schemas; older ones are dropped. A schema the
engine refuses, or that passes ``--time-limit``, is passed over. Prints the
resident memory every ``--every`` schemas, the peak, and the largest
``row_bytes`` any index reached.

    .venv/bin/python benchmarks/bench_memory.py --schemas 1000 --keep 64
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from collections import OrderedDict, Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support.data import compact, records, source_names  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def serve(index, vocab, record, rng, random_steps: int) -> int:
    from tokendfa import Guide

    guide = Guide(index)
    words = (vocab.size + 31) // 32
    out = np.zeros(words, dtype=np.int32)
    texts = [compact(x) for x in record.instances(True)]
    if texts:
        tokens = vocab.encode(texts[0])
        for token in tokens:
            guide.write_mask_into(out)
            guide.advance(token)
        guide.write_mask_into(out)
        return len(tokens) + 1
    for step in range(random_steps):
        allowed = guide.get_tokens()
        if not len(allowed):
            return step + 1
        guide.advance(int(allowed[rng.integers(len(allowed))]))
    return random_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=int, default=1000)
    parser.add_argument("--keep", type=int, default=64)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--random-steps", type=int, default=32)
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    from tokendfa import Index, TokenDFAError, Vocabulary

    vocab = Vocabulary.builtin("qwen2.5").prepare()
    Index.from_schema({"type": "object", "properties": {"a": {"type": "string"}}}, vocab).get_mask(1)
    gc.collect()
    print(f"after the vocabulary and a first schema: {rss_mib():.0f} MiB resident", flush=True)
    rng = np.random.default_rng(0)
    kept: OrderedDict[int, object] = OrderedDict()
    seen_schemas: set[str] = set()
    passed: Counter = Counter()
    served = steps = 0
    largest_rows = 0
    started = time.perf_counter()
    iterators = [records(source) for source in source_names()]
    while served < args.schemas and iterators:
        for iterator in list(iterators):
            record = next(iterator, None)
            if record is None:
                iterators.remove(iterator)
                continue
            key = compact(record.schema)
            if key in seen_schemas:
                passed["duplicate"] += 1
                continue
            seen_schemas.add(key)
            try:
                index = Index.from_schema(record.schema, vocab, time_limit=args.time_limit)
                steps += serve(index, vocab, record, rng, args.random_steps)
            except (TokenDFAError, RecursionError) as exc:
                passed[type(exc).__name__] += 1
                continue
            largest_rows = max(largest_rows, index.row_bytes)
            kept[served] = index
            while len(kept) > args.keep:
                kept.popitem(last=False)
            served += 1
            if served % args.every == 0:
                print(f"{served:5d} schemas, {steps:7d} masks, {time.perf_counter() - started:6.0f} s: "
                      f"{rss_mib():6.0f} MiB resident (peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f})",
                      flush=True)
            if served >= args.schemas:
                break
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{served} distinct schemas served ({steps} masks), {args.keep} indexes kept alive; "
          f"passed over: {dict(passed)}")
    print(f"resident now {rss_mib():.0f} MiB, peak {peak:.0f} MiB; largest row_bytes of an index "
          f"{largest_rows / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
