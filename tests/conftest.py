"""Shared fixtures: a toy vocabulary small enough to check by hand, the real
built-in vocabularies, and cached indexes.

The toy vocabulary (ids on the left, bytes on the right)::

     0 a      6 1      12 "      18 abc     24 \\xc3 (first byte of é)
     1 b      7 2      13 {      19 1.      25 \\xa9 (second byte of é)
     2 c      8 5      14 }      20 .5      26 é    (both bytes)
     3 x      9 0      15 :      21 12      27 日
     4 -     10 .      16 ,      22 ab      28 ab   (same bytes as 22)
     5 ␠     11 <eos>  17 <pad>  23 "a      29 a.

``<eos>`` (11) is the EOS token and ``<pad>`` (17) a special token: neither
is ever text. Every test regex that the toy vocabulary cannot spell is
expected to raise, not to give a silently smaller index.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

# Failing examples hypothesis finds are kept in the repository (tests/hypothesis-db),
# so a find made once on any machine is replayed by every later run.
settings.register_profile("tokendfa", database=DirectoryBasedExampleDatabase(
    os.path.join(os.path.dirname(__file__), "hypothesis-db")))
settings.load_profile("tokendfa")

from tokendfa import Index, Vocabulary

TOY_TOKENS: list[bytes | None] = [
    b"a", b"b", b"c", b"x", b"-", b" ", b"1", b"2", b"5", b"0",
    b".", None, b'"', b"{", b"}", b":", b",", None, b"abc", b"1.",
    b".5", b"12", b"ab", b'"a', b"\xc3", b"\xa9", "é".encode(), "日".encode(), b"ab", b"a.",
]
TOY_EOS = 11


def toy_vocabulary() -> Vocabulary:
    return Vocabulary(TOY_TOKENS, eos_token_ids=TOY_EOS, name="toy")


@pytest.fixture(scope="session")
def toy_vocab() -> Vocabulary:
    return toy_vocabulary()


@pytest.fixture(scope="session")
def qwen_vocab() -> Vocabulary:
    return Vocabulary.builtin("qwen2.5")


@pytest.fixture(scope="session")
def sp32k_vocab() -> Vocabulary:
    return Vocabulary.builtin("mistral-sp32k")


@functools.lru_cache(maxsize=None)
def cached_vocabulary(name: str) -> Vocabulary:
    return toy_vocabulary() if name == "toy" else Vocabulary.builtin(name)


class JsonStringChain(NamedTuple):
    """A JSON string's character class as the lazy engine's chain rows see
    it on a vocabulary: its class key, its runs, the first bytes into it
    (ASCII characters of the class and UTF-8 lead bytes) and the bytes
    that end it (``"`` and ``\\``)."""

    key: object
    runs: object
    first: "np.ndarray"
    others: "np.ndarray"


def json_string_chain(tables) -> JsonStringChain:
    """:class:`JsonStringChain` on ``tables`` (``tokendfa.lazy.tables.vocabulary_tables``)."""
    import numpy as np
    from tokendfa.lazy import tables as lazy_tables

    string = np.ones(128, dtype=bool)
    string[:0x20] = string[ord('"')] = string[ord("\\")] = False
    key = lazy_tables._class_key(string, True)
    first = np.zeros(256, dtype=bool)
    first[:128] = string
    first[0xC2:0xF5] = True
    return JsonStringChain(key, lazy_tables._class_runs(tables, key), first,
                           np.array([ord('"'), ord("\\")], np.int64))


@pytest.fixture
def parallel_always(monkeypatch):
    """Builds asked for n_jobs != 1 walk in parallel however small (the
    tests of the parallel walk; by default a small one stays in process)."""
    from tokendfa.builder import config

    monkeypatch.setattr(config, "PARALLEL_MIN_WORK", 0)


@functools.lru_cache(maxsize=256)
def cached_index(pattern: str, vocab_name: str, method: str = "fast", n_jobs: int = 1) -> Index:
    """The eager build (the tests of its arrays use these); indexes are
    immutable, so tests share them across the session."""
    return Index.from_regex(pattern, cached_vocabulary(vocab_name), method=method, n_jobs=n_jobs,
                            lazy=False)


def masks_along(index, vocab, texts, *, endings: bool = False) -> list[bytes]:
    """The mask at every step of each text's canonical tokens through a
    :class:`tokendfa.Guide` of ``index`` and after the last (with
    ``endings``, whether it may end there too): what two indexes of the
    same language must give alike."""
    from tokendfa import Guide

    seen = []
    for text in texts:
        guide = Guide(index)
        for token in vocab.encode(text):
            seen.append(guide.get_mask().tobytes())
            guide.advance(token)
        seen.append(guide.get_mask().tobytes())
        if endings:
            seen.append(bytes([guide.can_end()]))
    return seen


@pytest.fixture(scope="session")
def gemma_dir():
    """The bf16 transformers folder of the real Gemma 3 270M, built once per
    machine by ``examples/gemma_model.py`` (from the PyPI GGUF package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "gemma_model.py"
    spec = importlib.util.spec_from_file_location("gemma_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.gemma3_270m()
    except ImportError as exc:
        pytest.skip(str(exc))
