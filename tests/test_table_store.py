"""The lazy engine's tables kept in the cache folder (tokendfa.lazy.table_store):
a process that reads them serves exactly what one that made them serves,
and a damaged, foreign or missing file is made again."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import cached_vocabulary
from test_lazy import PERSON, lockstep
from tokendfa import Index, Vocabulary
from tokendfa.lazy import load_or_make_tables, table_store, tables, tables_ready

PATTERNS = [r"[0-9]{3}-[0-9]{4}", r'"([^"\\]|\\.){0,12}"', r"(ab|é日)*x?", r"\w+ \w+"]


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDFA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TOKENDFA_VOCABULARY_STORE", raising=False)
    return tmp_path / "cache" / "vocabularies"


def fresh(name: str) -> Vocabulary:
    """A vocabulary object of the same tokens with nothing made yet."""
    v = cached_vocabulary(name)
    return Vocabulary(v.tokens, v.eos_token_ids, name=v.name)


def files(store):
    return sorted(store.glob(f"*{table_store.SUFFIX}"))


def never_made(monkeypatch):
    monkeypatch.setattr(tables, "_vocabulary_tables",
                        lambda vocabulary: pytest.fail("made the tables instead of reading them"))


@pytest.mark.parametrize("name", ["toy", "qwen2.5"])
def test_read_tables_serve_what_made_ones_serve(store, monkeypatch, name):
    made = load_or_make_tables(fresh(name))
    (entry,) = files(store)
    arrays, words = tables.table_arrays(made)
    with monkeypatch.context() as patch:
        never_made(patch)
        read = load_or_make_tables(fresh(name))
        assert tables_ready(read)
        again, again_words = tables.table_arrays(read)
    assert words == again_words and arrays.keys() == again.keys()
    for key in arrays:
        assert arrays[key].dtype == again[key].dtype and np.array_equal(arrays[key], again[key]), key
    assert read.byte_matrix()[0] is again["columns.matrix"]   # the vocabulary took them too
    reference = cached_vocabulary(name)
    for pattern in PATTERNS:
        try:
            eager = Index.from_regex(pattern, reference, lazy=False, method="reference")
        except Exception:  # noqa: BLE001 - a pattern this vocabulary cannot spell
            continue
        lockstep(Index.from_regex(pattern, read, lazy=True), eager, max_pairs=200)
    if name == "qwen2.5":
        lockstep(Index.from_schema(PERSON, read, lazy=True),
                 Index.from_schema(PERSON, reference, lazy=False), max_pairs=300)


def _flip(path):
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-100])


def _garbage(path):
    path.write_bytes(b"\x00" * 9)


def _header(path):
    data = bytearray(path.read_bytes())
    data[14] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_flip, _truncate, _garbage, _header])
def test_a_damaged_file_is_made_again_with_a_warning(store, damage):
    expected, _ = tables.table_arrays(load_or_make_tables(fresh("toy")))
    (entry,) = files(store)
    damage(entry)
    with pytest.warns(RuntimeWarning, match="damaged"):
        vocab = load_or_make_tables(fresh("toy"))
    got, _ = tables.table_arrays(vocab)
    assert all(np.array_equal(expected[k], got[k]) for k in expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # rewritten over the damage
        load_or_make_tables(fresh("toy"))


def test_each_vocabulary_has_its_own_file(store):
    toy = fresh("toy")
    other = Vocabulary(list(toy.tokens[:-1]) + [b"zz"], toy.eos_token_ids)
    load_or_make_tables(toy)
    load_or_make_tables(other)
    assert len(files(store)) == 2
    assert tables.table_arrays(other)[0]["lengths"][-1] == 2


def test_no_file_with_the_store_off(store, monkeypatch):
    monkeypatch.setenv("TOKENDFA_VOCABULARY_STORE", "off")
    assert tables_ready(load_or_make_tables(fresh("toy")))
    assert not store.exists()


def test_the_most_recent_files_are_kept(store, monkeypatch):
    monkeypatch.setattr(table_store, "MAX_ENTRIES", 2)
    toy = fresh("toy")
    for k in range(3):
        load_or_make_tables(Vocabulary(list(toy.tokens[:-1]) + [b"z" * (k + 1)], toy.eos_token_ids))
    assert len(files(store)) == 2


def test_a_folder_that_cannot_be_written_only_costs_speed(store):
    store.parent.mkdir(parents=True)
    store.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="cannot write"):
        assert tables_ready(load_or_make_tables(fresh("toy")))


def test_an_eager_build_over_read_tables_is_the_reference(store, monkeypatch):
    """The byte matrix and column layout the vocabulary takes from the file
    serve the eager build too (signatures, byte occurrences)."""
    load_or_make_tables(fresh("qwen2.5"))
    never_made(monkeypatch)
    read = load_or_make_tables(fresh("qwen2.5"))
    reference = cached_vocabulary("qwen2.5")
    for pattern in PATTERNS[:2]:
        built = Index.from_regex(pattern, read, lazy=False)
        expected = Index.from_regex(pattern, reference, lazy=False, method="reference")
        lockstep(built, expected, max_pairs=200)


def test_tables_whose_offsets_do_not_match_the_lengths_are_refused():
    # A file forged with a valid checksum: spelling offsets that leave the
    # spellings would make the compiled walk read outside them.
    arrays, num_words = tables.table_arrays(fresh("toy"))
    forged = dict(arrays, spelling_offsets=arrays["spelling_offsets"].copy())
    forged["spelling_offsets"][1] = -4096
    with pytest.raises(ValueError, match="do not hold together"):
        tables.adopt_table_arrays(fresh("toy"), forged, num_words)
    tables.adopt_table_arrays(fresh("toy"), dict(arrays), num_words)   # the real ones are taken
