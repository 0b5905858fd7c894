"""A completed lazy index is the eager index, array for array, on real schemas.

The lazy index serves rows computed on demand (cached loop rows, partial
automaton rows, resume points: :mod:`tokendfa.lazy`); completing it
explores its automaton to the end and must give exactly what the eager build
gives. This checks that on JSONSchemaBench schemas with the Qwen 2.5
vocabulary: the first schemas of every source (in file order) that the eager
build takes at free-value depth 2 within a small state bound, until 50 or
more are compared. A schema the eager build refuses (unsupported keyword,
state bound) is passed over, and the count of compared schemas is asserted,
so a regression that refuses everything cannot pass.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import cached_vocabulary
from tokendfa import Guide, Index
from tokendfa.analysis.errors import TokenDFAError

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))
PER_SOURCE = 5
WANTED = 50
# Eager builds past this many states take seconds each on Qwen: passed over.
MAX_STATES = 3000


def _records():
    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            taken = 0
            for line in handle:
                if taken == PER_SOURCE:
                    break
                record = json.loads(line)
                yield record
                taken += 1


def _walk(index, vocab, record) -> list[bytes]:
    """The mask at every step of the record's valid instances (as far as each goes)."""
    seen = []
    for case in record["tests"]:
        if not case["valid"]:
            continue
        guide = Guide(index)
        text = json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False)
        for token in vocab.encode(text):
            seen.append(guide.get_mask().tobytes())
            if not index.is_allowed(guide.state, token):
                break
            guide.advance(token)
    return seen


@pytest.mark.slow
def test_completed_lazy_index_is_the_eager_index_on_real_schemas():
    vocab = cached_vocabulary("qwen2.5")
    compared, passed_over = [], []
    for record in _records():
        if len(compared) >= WANTED:
            break
        try:
            eager = Index.from_schema(record["schema"], vocab, any_depth=2, max_states=MAX_STATES,
                                      time_limit=20, lazy=False)
        except TokenDFAError as error:
            passed_over.append((record["name"], type(error).__name__))
            continue
        lazy = Index.from_schema(record["schema"], vocab, any_depth=2, lazy=True)
        # served lazily first (cold rows through every shortcut), then completed
        assert _walk(lazy, vocab, record) == _walk(eager, vocab, record), record["name"]
        completed = lazy.complete()
        assert completed.arrays.equals(eager.arrays), record["name"]
        assert np.array_equal(completed.get_mask(completed.initial_state), eager.get_mask(eager.initial_state))
        compared.append(record["name"])
    assert len(compared) >= WANTED, (len(compared), passed_over)
