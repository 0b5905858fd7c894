"""Index files: round trips, zero-copy loading, and every way a file can be bad."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import msgpack
import numpy as np
import pytest

from cases import CASES
from conftest import cached_index, cached_vocabulary, toy_vocabulary
from index import (
    Index,
    IndexFileError,
    IndexVersionError,
    Vocabulary,
    VocabularyMismatchError,
)
from index import files as index_files

PATTERN = r"-?[0-9]+(\.[0-9]+)?"


@pytest.mark.parametrize("case", CASES[:12], ids=[c.name for c in CASES[:12]])
def test_round_trip_keeps_every_array(case, tmp_path):
    index = cached_index(case.pattern, "qwen2.5")
    path = tmp_path / "index.tdfa"
    index.save(path)
    loaded = Index.load(path, cached_vocabulary("qwen2.5"))
    assert loaded.arrays.equals(index.arrays)
    assert loaded.pattern == case.pattern
    assert loaded.metadata["vocabulary"]["fingerprint"] == cached_vocabulary("qwen2.5").fingerprint
    for state in range(index.num_states):
        assert np.array_equal(loaded.get_mask(state), index.get_mask(state))


def test_loaded_arrays_are_read_only_views_of_the_file(tmp_path):
    path = tmp_path / "index.tdfa"
    cached_index(PATTERN, "qwen2.5").save(path)
    loaded = Index.load(path)
    mask = loaded.get_mask(0)
    assert not mask.flags.writeable and not mask.flags.owndata
    with pytest.raises(ValueError):
        mask[0] = 0


def test_same_pattern_gives_the_same_file(tmp_path):
    vocab = toy_vocabulary()
    first, second = tmp_path / "a.tdfa", tmp_path / "b.tdfa"
    Index.from_regex(r"(ab)+", vocab).save(first)
    Index.from_regex(r"(ab)+", vocab, method="reference").save(second)
    assert first.read_bytes().replace(b"reference", b"fast\0\0\0\0\0") != b""  # both exist
    a = Index.load(first)
    b = Index.load(second)
    assert a.arrays.equals(b.arrays)


def test_loading_needs_neither_interegular_nor_joblib(tmp_path):
    path = tmp_path / "index.tdfa"
    cached_index(PATTERN, "toy").save(path)
    code = (
        "import sys\n"
        "from index import Index, Guide\n"
        f"index = Index.load({str(path)!r})\n"
        "guide = Guide(index)\n"
        "guide.get_mask()\n"
        "heavy = [m for m in ('interegular', 'joblib', 'transformers', 'sentencepiece', 'tiktoken')"
        " if m in sys.modules]\n"
        "print(','.join(heavy) or 'none')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=root, env={**os.environ, "PYTHONPATH": root}, check=True)
    assert result.stdout.strip() == "none"


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
