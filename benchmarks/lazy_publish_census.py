#!/usr/bin/env python
"""How much of the native state store reaches the Python containers, on the MaskBench sample.

The native store (``analysis/_lazycore.c``) is the record of the states and
call stacks it finds; a kernel goes into ``LazyByteDFA._kernels`` and
``_ids``, a stack into ``_stack_parent``/``_stack_top``/``_stack_depth``/
``_pushes``, only when Python needs it (``analysis/lazydfa.py``'s
docstring). This walks each schema of the sample as
``lazy_slow_steps.py`` does (a fresh forked child a schema, after the
vocabulary and a trivial schema) and sums, over the automata of every child,
the states and stacks the automata have against those in the Python
containers, the store's counters (``_lazycore.store_info``: publishes,
kernels lent, store ids read), and the Python memory that publishing the
rest would take (traced around ``LazyByteDFA._publish``). Counts, not
times: they do not move with the machine's load.

    python benchmarks/lazy_publish_census.py                 # 4 per source (~1 min)
    python benchmarks/lazy_publish_census.py --per-source 2
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import sample, source_names  # noqa: E402
from support.isolation import ChildFailed, answer_in_child  # noqa: E402
from support.walks import measured_steps  # noqa: E402


def _census(record, vocab) -> dict:
    """The counts over every lazy automaton alive after the record's walk."""
    from tokendfa.analysis import lazydfa

    made = []  # the walk drops its index: each automaton is kept as it is made
    init = lazydfa.LazyByteDFA.__init__

    def kept(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    lazydfa.LazyByteDFA.__init__ = kept
    measured_steps(record, vocab, time.perf_counter_ns, lambda started, _: 0)
    found: Counter = Counter()
    for dfa in made:
        found["automata"] += 1
        found["num_states"] += dfa.num_states
        found["num_stacks"] += dfa.num_stacks
        found["kernels_in_python"] += len(dfa._kernels)  # noqa: SLF001 - the census reads them
        found["stacks_in_python"] += len(dfa._stack_parent)  # noqa: SLF001
        if dfa._core_context is not None:  # noqa: SLF001
            info = lazydfa._lazycore.store_info(dfa._core_context)  # noqa: SLF001
            for key, value in info.items():
                if isinstance(value, (list, tuple)):
                    for at, part in enumerate(value):
                        found[f"{key}[{at}]"] += part
                else:
                    found[key] += value
            # what publishing the rest would hold (LazyByteDFA._publish): the
            # Python memory a state and a stack left to the store saves
            tracemalloc.start()
            dfa._publish()  # noqa: SLF001
            found["bytes_to_publish_the_rest"] += tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
    return dict(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--per-source", type=int, default=4)
    args = parser.parse_args()
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    total: Counter = Counter()
    failed = 0
    for source in source_names():
        for record in sample(source, args.per_source or None):
            try:
                total.update(answer_in_child(lambda: _census(record, vocab), 120))
            except ChildFailed:
                failed += 1
    for key in sorted(total):
        print(f"{key:>24} {total[key]:>10,}")
    print(f"{'children failed':>24} {failed:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
