"""The fuzz corpus of index files (tests/fuzz/corpus): each mutant loads into
an IndexFileError or an index consistent throughout, with and without
``verify``. The corpus is structure-aware mutants of small real files
(tests/fuzz/mutate.py; regenerate with ``python tests/fuzz/fuzz_index_files.py
--corpus tests/fuzz/corpus``) and the forgeries of issue #32; the long run
is ``python tests/fuzz/fuzz_index_files.py --loads 100000``."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fuzz.mutate import judge, mutate, seed_files, write_temporary

CORPUS = sorted((Path(__file__).parent / "fuzz" / "corpus").glob("*.tdfa"))


def test_the_corpus_is_there():
    assert len(CORPUS) >= 70


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name[:40])
@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_corpus_file_is_refused_or_consistent(path, verify):
    verdict = judge(str(path), verify=verify)
    assert verdict.outcome != "FINDING", verdict.detail


def test_fresh_mutants(tmp_path):
    """A few hundred new mutants each run (the seed changes with the day,
    so CI explores beyond the committed corpus; a finding names its seed)."""
    import datetime

    seed = datetime.date.today().toordinal()
    rng, seeds = random.Random(seed), seed_files()
    for number in range(300):
        label, raw = mutate(rng, seeds)
        path = write_temporary(raw, str(tmp_path))
        verdict = judge(path, verify=number % 4 != 0)
        assert verdict.outcome != "FINDING", (seed, number, label, verdict.detail)
