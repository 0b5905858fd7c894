#!/usr/bin/env python
"""Which per-vocabulary plan keys a prepared process's schemas build, and how often a key recurs.

Each schema of a sample that is not MaskBench's (``sample(source, N,
shift=0.5)``; the names are checked disjoint from ``sample(source, 4)``)
runs in a fresh fork of a process that called ``Vocabulary.prepare()`` and
built ``{"type": "object"}`` (as MaskBench's children do), and walks its
test instances. The child reports the keys its steps added to the lazy
engine's per-vocabulary caches (walk plans, chain plans, loop masks, tail
sets, class runs, chain masks); the parent counts, per cache, the keys built
and in how many schemas each recurs, so that what ``prepare()`` makes ahead
is chosen from the keys many schemas share.

    python benchmarks/warm_plan_keys.py --per-source 6
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import sample, source_names  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import walk_instances  # noqa: E402

_CACHES = ("walk_plans", "chain_plans", "loop_masks", "tail_sets", "class_runs", "chain_masks")


def _bytes_text(data: bytes, width: int = 8) -> str:
    """Live first bytes (int64 each, as a plan key holds them) as text."""
    import numpy as np

    values = np.frombuffer(data, dtype=np.int64) if len(data) % 8 == 0 else np.frombuffer(data, dtype=np.uint8)
    text = "".join(chr(v) if 32 < v < 127 else f"\\x{v:02x}" for v in values.tolist()[:40])
    return text + ("..." if len(values) > 40 else "") + f" ({len(values)})"


def _describe(name: str, key) -> str:
    if name == "walk_plans":
        return ("live " + _bytes_text(key[0])) if len(key) == 1 else f"loop {key[1]} live {_bytes_text(key[2])}"
    return repr(key)[:100]


def _keys(tables, described: dict | None = None) -> dict[str, set[str]]:
    found = {}
    for name in _CACHES:
        cache = getattr(tables, name)
        keys = cache._plans if hasattr(cache, "_plans") else cache
        found[name] = set()
        for key in list(keys):
            digest = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
            found[name].add(digest)
            if described is not None:
                described[digest] = _describe(name, key)
    return found


def _new_keys(record, vocab) -> tuple[dict, dict]:
    """The keys (digests) each cache gained over the record's build and walk,
    and what each digest stands for."""
    from tokendfa import Index
    from tokendfa.lazy import vocabulary_tables

    tables = vocabulary_tables(vocab)
    before = _keys(tables)
    try:
        walk_instances(Index.from_schema(record.schema, vocab, lazy=True), record, vocab)
    except Exception:  # noqa: BLE001 - a refused schema builds nothing
        pass
    described: dict = {}
    after = _keys(tables, described)
    return {name: sorted(after[name] - before[name]) for name in _CACHES}, described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--per-source", type=int, default=6)
    parser.add_argument("--shift", type=float, default=0.5)
    parser.add_argument("--eager-prepare", action="store_true")
    parser.add_argument("--no-warm-up", action="store_true", help="prepare() without tokendfa.lazy.warmup's walk")
    parser.add_argument("--maskbench", action="store_true",
                        help="MaskBench's own sample instead (to see what is left there, not to choose from)")
    parser.add_argument("--show", type=int, default=0, help="print the N walk-plan keys most schemas build")
    args = parser.parse_args()
    from tokendfa import Index, Vocabulary

    if args.no_warm_up:
        import tokendfa.lazy

        tokendfa.lazy.WARM_UP = ()   # what the runtime's preparer walks

    vocab = Vocabulary.builtin(args.vocab).prepare(eager=args.eager_prepare)
    Index.from_schema({"type": "object"}, vocab, lazy=True)
    bench = {r.name for source in source_names() for r in sample(source, 4)}
    records = [r for source in source_names() for r in sample(source, args.per_source, shift=args.shift)]
    overlap = [r.name for r in records if r.name in bench]
    records = [r for r in records if r.name not in bench]
    if args.maskbench:
        records, overlap = [r for source in source_names() for r in sample(source, 4)], []
    recur = {name: Counter() for name in _CACHES}
    described: dict = {}
    for record in records:
        try:
            found, names = answer_in_child(lambda record=record: _new_keys(record, vocab), 120)
            described.update(names)
        except ChildFailed:
            found = {}
        for name, keys in found.items():
            recur[name].update(keys)
    print(f"{len(records)} schemas ({len(overlap)} of MaskBench's sample left out)")
    for name in _CACHES:
        counts = recur[name]
        built = sum(counts.values())
        shared = sum(c for c in counts.values() if c >= 2)
        top = sorted(counts.values(), reverse=True)[:10]
        print(f"{name:12s} builds {built:5d}, distinct keys {len(counts):5d}, builds of keys in >=2 schemas "
              f"{shared:5d}, in >=5 {sum(c for c in counts.values() if c >= 5):5d}; most shared: {top}")
    for digest, count in recur["walk_plans"].most_common(args.show):
        print(f"{count:3d} {described.get(digest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
