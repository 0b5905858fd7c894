#!/usr/bin/env python
"""Container objects the lazy engine keeps per DFA state, schema by schema.

CPython starts a collection after a count of *container* objects (tuples,
lists, dicts, sets, frozensets, class instances; not ints, floats, str or
bytes) made and not yet freed, and a full one (generation 2) every hundred
or so of those; ``lazy_gc_steps.py`` shows such a pass (~25-40 ms in
MaskBench's parent) landing inside a step. This counts what the lazy engine
makes: each schema runs as ``bench_maskbench.py`` runs it (a forked child,
the untimed warm-up schema first), with the collector off, and the count of
the youngest generation before and after the walk of its instances is the
number of containers made and still alive. It reports that, the lazy
automata's new DFA states, and their ratio, for the schemas over
``--at-least`` containers (and the total over all).

    python benchmarks/lazy_containers.py                        # 4 per source (~1 min)
    python benchmarks/lazy_containers.py --names sp_0,o65424 --at-least 0

Measured (qwen2.5, 4 per source): sp_0 158k containers for 8.2k states
(19.4 a state) with step keys, cut ranges, single targets and byte edges
as tuples and lists, 71k (8.7) as ints and bytes; o65424 101k -> 42k, o73917
86k -> 35k, kb_209 66k -> 31k; all 84 schemas 732k -> 405k containers for
40k states (18.3 -> 10.1 a state; the rest is mostly NFA rows and the
schema front end's trees, not per state).

A development aid like ``lazy_slow_steps.py``, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_maskbench as mb  # noqa: E402
from support.data import sample, source_names  # noqa: E402
from support.engines import TOKENDFA_LAZY, EngineSetup  # noqa: E402
from support.isolation import run_in_child  # noqa: E402


def _count(setup, task) -> dict:
    from tokendfa.analysis import lazydfa

    made = []  # (automaton, its states when made: the warm-up's are not this schema's)
    original = lazydfa.LazyByteDFA.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append((self, self.num_states))

    lazydfa.LazyByteDFA.__init__ = init
    gc.disable()  # the count then only grows with what is made and kept
    before = gc.get_count()[0]
    mb.run_engine(setup, TOKENDFA_LAZY, task)
    kept = gc.get_count()[0] - before
    return {"containers": kept, "states": sum(dfa.num_states - first for dfa, first in made)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default="all")
    parser.add_argument("--names", default="", help="comma-separated parts of schema names (default: all)")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--at-least", type=int, default=30_000, help="containers a schema shown needs")
    parser.add_argument("--vocab", default="qwen2.5")
    args = parser.parse_args(argv)
    from tokendfa import Vocabulary

    vocab = Vocabulary.from_spec(args.vocab)
    vocab.byte_matrix()
    vocab.prepare()
    setup = EngineSetup.prepare(vocab, [], xgrammar_threads=1, log=lambda *_: None)
    sources = source_names() if args.sources == "all" else args.sources.split(",")
    names = [n for n in args.names.split(",") if n]
    tasks = [mb.tokenize(record, vocab) for source in sources for record in sample(source, args.per_source or None)
             if not names or any(n in record.name for n in names)]
    containers = states = 0
    for task in tasks:
        result = run_in_child(lambda: _count(setup, task), 600)
        if result["status"] != "ok":
            print(f"{task.record.name}: {result['status']} {result.get('error', '')}")
            continue
        containers += result["containers"]
        states += result["states"]
        if result["containers"] >= args.at_least:
            print(f"{task.record.name}: {result['containers']:,} containers, {result['states']:,} states, "
                  f"{result['containers'] / max(result['states'], 1):.1f} a state", flush=True)
    print(f"{len(tasks)} schemas: {containers:,} containers, {states:,} states, "
          f"{containers / max(states, 1):.1f} a state")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
