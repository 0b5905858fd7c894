"""Real recursive schemas: the lazy index, recursion deferred, completes to the eager index.

The smallest JSONSchemaBench schemas with a recursive ``$ref`` (found by
scanning the benchmark for references that reach themselves), with the Qwen
2.5 vocabulary: ``Index.from_schema(..., lazy=True)`` defers every value
that enters the recursion (``tokendfa.schema.compiler``) and its completion
must be the eager build array for array. A schema the eager build refuses
is passed over; the count compared is asserted.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from conftest import cached_vocabulary
from tokendfa import Index
from tokendfa.analysis.errors import TokenDFAError

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))
# (source, 0-based line): recursive schemas of 341 to 1,223 bytes
# Left out: Github_easy 687, 688 and 1031, whose lazy automata pass 200,000 states
# before minimisation (with or without deferral), Github_medium 52 (186,044 states,
# seconds to explore), and Github_medium 356, which the eager build refuses.
RECURSIVE = [("Github_easy", 116), ("Github_easy", 425), ("JsonSchemaStore", 249), ("Github_easy", 1291),
             ("Github_easy", 172), ("Github_medium", 1166), ("Github_medium", 636),
             ("Github_medium", 201), ("Github_easy", 927)]


def _schema(source: str, line: int):
    with gzip.open(BENCH / f"{source}.jsonl.gz", "rt", encoding="utf-8") as handle:
        for i, text in enumerate(handle):
            if i == line:
                return json.loads(text)["schema"]
    raise LookupError((source, line))


@pytest.mark.slow
def test_completed_lazy_index_is_the_eager_index_on_recursive_schemas():
    if not BENCH.exists():
        pytest.skip("JSONSchemaBench not found (set TOKENDFA_JSONSCHEMABENCH)")
    vocab = cached_vocabulary("qwen2.5")
    compared, deferred = 0, 0
    for source, line in RECURSIVE:
        schema = _schema(source, line)
        try:
            eager = Index.from_schema(schema, vocab, any_depth=2, lenient=True, max_states=20_000,
                                      lazy=False)
        except TokenDFAError:
            continue
        lazy = Index.from_schema(schema, vocab, any_depth=2, lenient=True, lazy=True)
        deferred += lazy._dfa._nfa.source is not None
        assert lazy.complete().arrays.equals(eager.arrays), (source, line)
        compared += 1
    assert compared >= 8 and deferred >= 8, (compared, deferred)
