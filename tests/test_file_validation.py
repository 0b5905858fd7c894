"""Index files as untrusted input: forged headers and arrays with valid
checksums, paths that are not regular files, and files replaced under a
live index. Each must end in an IndexFileError (or a working index), never
another exception, a wrong answer or a dead interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from fuzz.mutate import inconsistency, join, seed_vocabulary, split
from tokendfa import Index, IndexFileError
from tokendfa.runtime import files as index_files
from tokendfa.runtime.arrays import IndexArrays


@pytest.fixture(scope="module")
def seed_index() -> Index:
    return Index.from_regex(r'\{"a":[0-9]{1,3}(,"b":"[abc]*")?\}', seed_vocabulary(), lazy=False)


def _forged(index: Index, tmp_path, **arrays) -> str:
    """``index`` with some arrays replaced, written with valid checksums."""
    changed = index.arrays.as_dict()
    changed.update(arrays)
    path = str(tmp_path / "forged.tdfa")
    Index(IndexArrays(**changed), index.metadata).save(path)
    return path


def _with_entry(index: Index, tmp_path, array: str, **changes) -> str:
    header, data = split(index_files.encode_index(index, compress=False))
    next(e for e in header["arrays"] if e["name"] == array).update(changes)
    path = tmp_path / "forged.tdfa"
    path.write_bytes(join(header, data))
    return str(path)


# --- forged headers ----------------------------------------------------------------

@pytest.mark.parametrize("shape,rows", [([True, None], 1), ([2**33, 2**31], 0), ([-1, None], 1),
                                        ([1.0, None], 1), ([1, None, 1], 1)], ids=str)
def test_forged_shape_is_an_index_file_error(seed_index, tmp_path, shape, rows):
    # a msgpack boolean was a TypeError; np.prod wraps [2**33, 2**31] to 0
    # elements, which agreed with nbytes=0 and ended in numpy's ValueError
    words = seed_index.arrays.masks.shape[1]
    shape = [words if n is None else n for n in shape]
    nbytes = rows * words * 4
    with pytest.raises(IndexFileError, match="invalid description"):
        Index.load(_with_entry(seed_index, tmp_path, "masks", shape=shape, nbytes=nbytes,
                               stored_nbytes=nbytes))


@pytest.mark.parametrize("field,value", [("offset", True), ("offset", 8), ("nbytes", False),
                                         ("stored_nbytes", -1), ("dtype", ["<i4"]), ("name", ["x"]),
                                         ("encoding", {"a": 1})])
def test_forged_array_description_is_an_index_file_error(seed_index, tmp_path, field, value):
    with pytest.raises(IndexFileError):
        Index.load(_with_entry(seed_index, tmp_path, "edge_next", **{field: value}))


@pytest.mark.parametrize("change", [
    {"format_version": True}, {"data_size": True}, {"data_size": -5}, {"metadata": {"vocabulary": 3}},
    {"metadata": {"vocabulary": {"size": True}}}, {"metadata": {"pattern": 5, "vocabulary": {}}},
    {"metadata": {"notes": "x", "vocabulary": {}}}], ids=str)
def test_forged_header_field_is_an_index_file_error(seed_index, tmp_path, change):
    header, data = split(index_files.encode_index(seed_index))
    header.update(change)
    path = tmp_path / "forged.tdfa"
    path.write_bytes(join(header, data, fix_data_crc="data_size" not in change))
    with pytest.raises(IndexFileError):
        Index.load(path)


def test_zlib_array_announced_empty_is_not_inflated(seed_index, tmp_path):
    import zlib

    header, data = split(index_files.encode_index(seed_index, compress=False))
    bomb = zlib.compress(bytes(50 << 20), 9)  # 50 MB of zeros in ~50 kB
    entry = next(e for e in header["arrays"] if e["name"] == "forced_tokens")
    entry.update(encoding="zlib", shape=[0], nbytes=0, offset=len(data), stored_nbytes=len(bomb))
    path = tmp_path / "bomb.tdfa"
    path.write_bytes(join(header, data + bomb))
    with pytest.raises(IndexFileError, match="does not inflate"):
        Index.load(path)


# --- forged arrays, valid checksums ------------------------------------------------

@pytest.mark.parametrize("verify", [True, False])
def test_mask_bits_past_the_vocabulary_are_refused(seed_index, tmp_path, verify):
    masks = np.array(seed_index.arrays.masks)
    assert seed_index.vocab_size % 32  # spare bits in the last word
    masks[0, -1] |= np.uint32(1 << 31)
    with pytest.raises(IndexFileError, match="past the vocabulary"):
        Index.load(_forged(seed_index, tmp_path, masks=masks), verify=verify)


def test_masks_that_disagree_with_transitions_are_refused(seed_index, tmp_path):
    # the forgery: state 0 offers every token, advance() refuses most
    masks = np.array(seed_index.arrays.masks)
    mask_id = np.array(seed_index.arrays.mask_id)
    masks = np.vstack([masks, np.full((1, masks.shape[1]), 0xFFFFFFFF, dtype=masks.dtype)])
    masks[-1, -1] &= np.uint32((1 << (seed_index.vocab_size % 32)) - 1)
    mask_id[0] = len(masks) - 1
    path = _forged(seed_index, tmp_path, masks=masks, mask_id=mask_id)
    with pytest.raises(IndexFileError, match="differ from what their transitions allow"):
        Index.load(path)
    loaded = Index.load(path, verify=False)  # documented: verify=False skips this check
    assert inconsistency(loaded) is not None


@pytest.mark.parametrize("what", ["one bit", "shared row", "finality", "eos group"])
def test_every_kind_of_disagreement_is_found(seed_index, tmp_path, what, monkeypatch):
    arrays = {name: np.array(a) for name, a in seed_index.arrays.as_dict().items()}
    if what == "one bit":
        allowed = np.flatnonzero(np.unpackbits(arrays["masks"][0].view(np.uint8), bitorder="little"))
        arrays["masks"][0, allowed[0] >> 5] ^= np.uint32(1 << (allowed[0] & 31))
    elif what == "shared row":  # a state pointed at another state's row
        arrays["mask_id"][0] = (arrays["mask_id"][0] + 1) % len(arrays["masks"])
    elif what == "finality":
        arrays["finals"][0] = not arrays["finals"][0]
    else:  # an EOS token given a group: advance() then follows its edges
        eos = int(arrays["eos_token_ids"][0])
        arrays["token_group"][eos] = 0
    path = _forged(seed_index, tmp_path, **arrays)
    with pytest.raises(IndexFileError, match="transitions allow"):
        Index.load(path)
    # the bit-for-bit check of large vocabularies finds the same
    monkeypatch.setattr(index_files, "_MAX_HASHED_VOCABULARY", 0)
    with pytest.raises(IndexFileError, match="transitions allow"):
        Index.load(path)


@pytest.mark.parametrize("pattern", [r"(ab)+c?", r"[abc]*", r"a|b", r'\{"a":[0-9]{1,3}\}'])
@pytest.mark.parametrize("hashed", [True, False])
def test_real_indexes_pass_both_checks(tmp_path, pattern, hashed, monkeypatch):
    if not hashed:
        monkeypatch.setattr(index_files, "_MAX_HASHED_VOCABULARY", 0)
    path = tmp_path / "real.tdfa"
    Index.from_regex(pattern, seed_vocabulary(), lazy=False).save(path)
    assert inconsistency(Index.load(path)) is None


def test_unsorted_edges_are_refused(seed_index, tmp_path):
    offsets = seed_index.arrays.state_offsets
    state = int(np.flatnonzero(np.diff(offsets) >= 2)[0])
    edge_group = np.array(seed_index.arrays.edge_group)
    low = int(offsets[state])
    edge_group[low], edge_group[low + 1] = edge_group[low + 1], edge_group[low]
    with pytest.raises(IndexFileError, match="not strictly increasing"):
        Index.load(_forged(seed_index, tmp_path, edge_group=edge_group), verify=False)


def test_finals_other_than_booleans_are_refused(seed_index, tmp_path):
    finals = np.array(seed_index.arrays.finals).view(np.uint8).copy()
    finals[0] = 7
    with pytest.raises(IndexFileError, match="finals holds"):
        Index.load(_forged(seed_index, tmp_path, finals=finals.view(bool)), verify=False)


# --- paths that are not regular files ----------------------------------------------

def test_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.tdfa"
    os.mkfifo(fifo)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_error_of(lambda: Index.load(fifo))),
                              daemon=True)
    reader.start()
    reader.join(5)
    assert outcome and isinstance(outcome[0], IndexFileError), outcome
    with pytest.raises(IndexFileError, match="not a regular file|cannot read"):
        Index.load(tmp_path)
    with pytest.raises(IndexFileError, match="not a regular file"):
        index_files.array_encodings("/dev/zero")


def _error_of(call):
    try:
        call()
    except Exception as exc:
        return exc
    return None


# --- a file replaced under a live index --------------------------------------------

_LIVE = textwrap.dedent("""
    import os, sys, numpy as np
    from tokendfa import Index
    path, mode = sys.argv[1], sys.argv[2]
    index = Index.load(path, mmap=mode == "mmap")
    before = [np.array(index.get_mask(s)) for s in range(index.num_states)]
    with open(path, "r+b") as handle:   # what `cp new.tdfa served.tdfa` does
        handle.truncate(0)
    after = [np.array(index.get_mask(s)) for s in range(index.num_states)]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    index.advance(0, int(np.flatnonzero(np.unpackbits(before[0].view(np.uint8), bitorder="little"))[0]))
    print("served after truncation")
""")


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "compressed"])
def test_truncating_the_file_under_a_live_index_does_not_kill_it(tmp_path, compress):
    from conftest import cached_index

    path = tmp_path / "served.tdfa"
    cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5").save(path, compress=compress)
    done = subprocess.run([sys.executable, "-c", _LIVE, str(path), "copy"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "served after truncation" in done.stdout


def test_a_mapped_index_is_only_for_files_replaced_by_rename(tmp_path):
    """What the docs warn of: mmap=True over a raw file dies by SIGBUS if
    the file is truncated in place (shown so the warning stays true)."""
    from conftest import cached_index

    path = tmp_path / "served.tdfa"
    cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5").save(path, compress=False)
    done = subprocess.run([sys.executable, "-c", _LIVE, str(path), "mmap"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -7, (done.returncode, done.stderr[-500:])  # SIGBUS
    # tokendfa's own writes rename over the file: the mapping keeps the old inode
    cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5").save(path, compress=False)
    index = Index.load(path, mmap=True)
    before = np.array(index.get_mask(0))
    cached_index("[0-9]", "qwen2.5").save(path, compress=False)
    time.sleep(0.01)
    assert np.array_equal(index.get_mask(0), before)


def test_a_file_larger_than_the_memory_budget_is_not_read(seed_index, tmp_path):
    from tokendfa.analysis.limits import limits

    path = tmp_path / "sparse.tdfa"
    seed_index.save(path, compress=False)
    size = path.stat().st_size
    with open(path, "r+b") as handle:  # a sparse tail: a regular file of a terabyte costs nothing
        handle.truncate(1 << 40)
    with pytest.raises(IndexFileError, match="more than the memory budget"):
        Index.load(path)
    assert Index.load(path, mmap=True).num_states == seed_index.num_states  # mapped, not read
    with open(path, "r+b") as handle:
        handle.truncate(size)
    with limits(memory_budget=size - 1), pytest.raises(IndexFileError, match="memory budget"):
        Index.load(path)
    with limits(memory_budget=size):
        assert Index.load(path).num_states == seed_index.num_states
