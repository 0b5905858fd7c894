"""Index files: a versioned msgpack header, then the arrays.

Layout (all integers little-endian)::

    magic        8 bytes   b"TOKENDFA"
    header_size  uint32    length of the msgpack header
    header_crc   uint32    CRC-32 of the header bytes
    header       msgpack   format, version, metadata, array table, data checksum
    padding      to a 64-byte boundary
    data         the arrays back to back, each 64-byte aligned

Each array is stored in one of three encodings:

* ``raw``: its bytes exactly as in memory, wrapped at load with
  ``np.frombuffer`` (read-only). Loading reads the file into memory, so a
  file replaced or truncated under a live index changes nothing;
  ``load_index(..., mmap=True)`` maps it instead (constant time, shared
  between processes through the page cache, for files only ever replaced
  by rename).
* ``zlib``: those bytes deflated, inflated once at load.
* ``runs``: the array as runs of equal elements (all run values, then all
  run lengths, as uint32) deflated. Allowed-token bitsets are long runs of
  all-zero or all-one words, so this is the smallest form of the masks and
  inflates several times faster than ``zlib`` of the same bytes (``np.repeat``
  rebuilds the words).
* ``row-delta-runs``: for a table of rows (the masks), each row first XORed
  with the earlier row it differs from least (whose index is stored, -1 for
  none), then ``runs``. States of one schema allow nearly the same tokens,
  so the differences are mostly zero words: four to five times fewer runs
  than ``runs`` alone where masks hold scattered tokens.

By default (``compress=True``) each array takes whichever of these is
smallest, if that makes it at least four times smaller: a JSON schema's
index shrinks 20-100 times and loads in a few milliseconds. ``compress=False`` writes
every array raw, for very large indexes that many processes map at once
(``mmap=True``).

Nothing in a file is ever executed: no pickle, only msgpack maps of plain
values and raw numbers, and every field is validated before use (inflating
stops at the announced size, so a hostile file cannot balloon in memory):
a malformed or forged file raises :class:`IndexFileError`, never another
exception, and cannot make serving read out of bounds or offer a token past
the vocabulary (tests/fuzz holds the mutants this is tested with).
Writes go to a temporary file in the same folder that is renamed over the
target only once complete, so a failed build never leaves a partial index or
damages an existing one. Version-1 files (every array raw, the first ones
without fast-forward tokens) still load: files written by each earlier
writer are kept under ``tests/data/old_formats`` and loaded by the tests.
"""

from __future__ import annotations

import math
import mmap as mmap_module
import os
import struct
import zlib
from os import PathLike
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from ..analysis.errors import IndexFileError, IndexVersionError, VocabularyMismatchError
from ..analysis.limits import current as current_limits
from ..analysis.regular_files import open_regular_file, replace_file
from .arrays import MASK_WORD, IndexArrays
from .index import Index

if TYPE_CHECKING:  # pragma: no cover
    from ..vocab.vocabulary import Vocabulary

MAGIC = b"TOKENDFA"
FORMAT_NAME = "tokendfa-index"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
ENCODINGS = ("raw", "zlib", "runs", "row-delta-runs")
_DELTA_WINDOW = 64  # earlier rows tried as the base of each row: bounds the save time
_MIN_SAVING = 4  # an array is stored compressed only when that makes it this many times smaller
# Deflating tiny arrays saves nothing worth a decoding step.
_MIN_COMPRESSED_NBYTES = 4096
_ZLIB_LEVEL = 1  # level 6 saves another fifth of the size and doubles the loading time
ALIGNMENT = 64
_PREAMBLE = struct.Struct("<8sII")

# The arrays a file holds, with their possible dtypes (the first is the
# default) and ranks.
ARRAY_LAYOUT = {
    "token_group": (("<i4", "<i2", "|i1"), 1),
    "state_offsets": (("<i8",), 1),
    "edge_group": (("<i4",), 1),
    "edge_next": (("<i4",), 1),
    "finals": (("|b1",), 1),
    "mask_id": (("<i4",), 1),
    "masks": ((MASK_WORD.str,), 2),
    "eos_token_ids": (("<i4",), 1),
    "forced_offsets": (("<i8",), 1),
    "forced_tokens": (("<i4",), 1),
}


# Arrays that version-1 files gained without a version change (c95683c): a
# version-1 file may lack them.
_ADDED_IN_VERSION_1 = ("forced_offsets", "forced_tokens")


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def _runs(array: np.ndarray) -> bytes | None:
    """``array`` as uint32 run values then run lengths, or None when its
    elements are not 32-bit."""
    if array.dtype.itemsize != 4 or array.size == 0:
        return None
    words = array.reshape(-1).view("<u4")
    starts = np.flatnonzero(np.concatenate(([True], words[1:] != words[:-1])))
    lengths = np.diff(np.append(starts, len(words))).astype("<u4")
    return words[starts].tobytes() + lengths.tobytes()


def _count_runs(rows: np.ndarray) -> np.ndarray:
    """Runs of equal words in each row of a 2-D array."""
    return 1 + np.count_nonzero(rows[:, 1:] != rows[:, :-1], axis=1)


def _row_delta_runs(array: np.ndarray) -> bytes | None:
    """Base row of each row (int32, -1 for none), then the XOR-ed rows as runs."""
    if array.ndim != 2 or array.dtype.itemsize != 4 or array.shape[0] < 2 or array.shape[1] < 2:
        return None
    rows = array.view("<u4")
    bases = np.full(len(rows), -1, dtype="<i4")
    deltas = rows.copy()
    own_runs = _count_runs(rows)
    for i in range(1, len(rows)):
        low = max(0, i - _DELTA_WINDOW)
        runs = _count_runs(rows[low:i] ^ rows[i])
        best = int(np.argmin(runs))
        if runs[best] < own_runs[i]:
            bases[i] = low + best
            deltas[i] ^= rows[low + best]
    return bases.tobytes() + _runs(deltas)


def _stored_form(array: np.ndarray, compress: bool) -> tuple[str, bytes]:
    raw = array.tobytes()
    if not compress or len(raw) < _MIN_COMPRESSED_NBYTES:
        return "raw", raw
    forms = [("zlib", zlib.compress(raw, _ZLIB_LEVEL))]
    runs = _runs(array)
    if runs is not None:
        forms.append(("runs", zlib.compress(runs, _ZLIB_LEVEL)))
    delta_runs = _row_delta_runs(array)
    if delta_runs is not None:
        forms.append(("row-delta-runs", zlib.compress(delta_runs, _ZLIB_LEVEL)))
    encoding, stored = min(forms, key=lambda form: len(form[1]))
    # Inflating costs load time that a mapped raw array does not: worth it
    # only for a large saving.
    return (encoding, stored) if _MIN_SAVING * len(stored) <= len(raw) else ("raw", raw)


def _file_dtype(name: str, array: np.ndarray) -> np.dtype:
    allowed = ARRAY_LAYOUT[name][0]
    dtype = np.dtype(array.dtype).newbyteorder("<")
    return dtype if dtype.str in allowed else np.dtype(allowed[0])


def encode_index(index: Index, *, compress: bool = True) -> bytes:
    """The bytes of an index file (see the module docstring)."""
    table, chunks, offset = [], [], 0
    for name in ARRAY_LAYOUT:
        array = getattr(index.arrays, name)
        array = np.ascontiguousarray(array, dtype=_file_dtype(name, array))
        encoding, stored = _stored_form(array, compress)
        table.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape),
                      "encoding": encoding, "offset": offset, "stored_nbytes": len(stored),
                      "nbytes": array.nbytes})
        chunks.append(stored + b"\0" * (_aligned(len(stored)) - len(stored)))
        offset += _aligned(len(stored))
    data = b"".join(chunks)
    header = msgpack.packb({
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "byte_order": "little",
        "metadata": index.metadata,
        "arrays": table,
        "data_size": len(data),
        "data_crc": zlib.crc32(data),
    }, use_bin_type=True)
    preamble = _PREAMBLE.pack(MAGIC, len(header), zlib.crc32(header))
    head = preamble + header
    return head + b"\0" * (_aligned(len(head)) - len(head)) + data


def save_index(index: Index, path: str | PathLike, *, compress: bool = True) -> None:
    """Write ``index`` to ``path`` atomically: all of it or nothing.
    ``compress=False`` stores every array raw (mapped, not copied, at load)."""
    payload = encode_index(index, compress=compress)
    replace_file(os.fspath(path), [payload])


def load_index(path: str | PathLike, vocabulary: "Vocabulary | None" = None, *,
               verify: bool = True, mmap: bool = False) -> Index:
    """Read an index file into memory (inflating its compressed arrays).

    Every field later code indexes with is checked (shapes, counts, id
    ranges, bits past the vocabulary), so a malformed file raises
    :class:`IndexFileError` and never serves out of bounds. ``verify`` also
    checks the data checksum and that every state's mask is exactly what its
    transitions allow (a few milliseconds on a large schema index).

    ``mmap=True`` maps the file instead of copying it: raw arrays are then
    shared between processes through the page cache, but the file must only
    ever be replaced by renaming another over it (as tokendfa writes do):
    a file truncated or rewritten in place under a mapping kills the process
    with SIGBUS at its next read, which no Python code can catch."""
    path = os.fspath(path)
    return decode_index(_read_file(path, mapped=mmap), vocabulary, verify=verify, name=path)


def _read_file(path: str, *, mapped: bool):
    """The bytes of the regular file at ``path`` (or a read-only map of it).
    Opened without blocking (:func:`~tokendfa.analysis.regular_files.open_regular_file`),
    so a FIFO or device there is refused, not waited on."""
    descriptor = open_regular_file(path, "index file", IndexFileError)
    try:
        info = os.fstat(descriptor)
        if info.st_size == 0:
            raise IndexFileError(f"{path}: the file is empty, not a tokendfa index")
        if mapped:
            return mmap_module.mmap(descriptor, 0, access=mmap_module.ACCESS_READ)
        budget = current_limits().memory
        if info.st_size > budget:  # a sparse file of terabytes is a regular file too
            raise IndexFileError(
                f"{path}: {info.st_size:,} bytes, more than the memory budget of {budget:,} bytes "
                "to read it into (load it with mmap=True, for a file only ever replaced by rename, "
                "or under tokendfa.analysis.limits.limits(memory_budget=...))")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()  # one allocation of the size fstat gives
    except OSError as exc:
        raise IndexFileError(f"cannot read index file {path}: {exc.strerror or exc}") from None
    except (MemoryError, OverflowError):
        raise IndexFileError(f"{path}: {info.st_size:,} bytes do not fit in memory") from None
    finally:
        os.close(descriptor)


def array_encodings(path: str | PathLike | bytes) -> dict[str, str]:
    """How each array of an index file is stored (``raw`` or ``zlib``);
    ``path`` may also be the file's bytes, already read."""
    if isinstance(path, bytes):
        data, name = path, "<bytes>"
    else:
        name = os.fspath(path)
        data = _read_file(name, mapped=False)
    header, _ = _read_header(data, name)
    _check_array_table(header, name)
    return {entry["name"]: entry.get("encoding", "raw") for entry in header["arrays"]}


def decode_index(buffer, vocabulary: "Vocabulary | None" = None, *, verify: bool = True,
                 name: str = "<bytes>") -> Index:
    """An :class:`Index` over ``buffer`` (bytes or a read-only mmap)."""
    header, data_start = _read_header(buffer, name)
    arrays = _read_arrays(buffer, header, data_start, name, verify)
    metadata = header["metadata"]
    _check_vocabulary(metadata, arrays, vocabulary, name)
    return Index(arrays, metadata, vocabulary)


def _read_header(buffer, name: str) -> tuple[dict[str, Any], int]:
    if len(buffer) < _PREAMBLE.size:
        raise IndexFileError(f"{name}: truncated: {len(buffer)} bytes is too short for an index file")
    magic, header_size, header_crc = _PREAMBLE.unpack_from(buffer, 0)
    if magic != MAGIC:
        raise IndexFileError(f"{name}: not a tokendfa index file (bad magic {magic!r})")
    end = _PREAMBLE.size + header_size
    if end > len(buffer):
        raise IndexFileError(f"{name}: truncated inside the header")
    raw = bytes(buffer[_PREAMBLE.size:end])
    if zlib.crc32(raw) != header_crc:
        raise IndexFileError(f"{name}: corrupted header (checksum mismatch)")
    try:
        header = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise IndexFileError(f"{name}: unreadable header: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise IndexFileError(f"{name}: not a tokendfa index header")
    version = header.get("format_version")
    if type(version) is not int:  # a msgpack boolean too: True == 1 in Python
        raise IndexFileError(f"{name}: header field 'format_version' is missing or malformed")
    if version not in READABLE_VERSIONS:
        raise IndexVersionError(
            f"{name}: index format version {version!r}; this tokendfa reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (rebuild the index with this version)")
    if header.get("byte_order") != "little":
        raise IndexFileError(f"{name}: unsupported byte order {header.get('byte_order')!r}")
    for key, kind in (("metadata", dict), ("arrays", list), ("data_size", int), ("data_crc", int)):
        if not isinstance(header.get(key), kind) or type(header.get(key)) is bool:
            raise IndexFileError(f"{name}: header field {key!r} is missing or malformed")
    if header["data_size"] < 0:
        raise IndexFileError(f"{name}: header field 'data_size' is negative")
    _check_metadata(header["metadata"], name)
    return header, _aligned(end)


# Metadata keys that tokendfa reads back, and the type each must have.
_METADATA_TYPES = {"pattern": str, "kind": str, "schema": str, "whitespace": str,
                   "widenings": list, "notes": list, "shared": list, "vocabulary": dict,
                   "build": dict}
_VOCABULARY_TYPES = {"name": str, "size": int, "fingerprint": str, "source": str}


def _check_metadata(metadata: dict, name: str) -> None:
    """The metadata fields that tokendfa itself reads have the types it
    expects (anything else in the metadata is only carried)."""
    for key, kind in _METADATA_TYPES.items():
        if key in metadata and not isinstance(metadata[key], kind):
            raise IndexFileError(f"{name}: metadata field {key!r} is a {type(metadata[key]).__name__}, "
                                 f"not a {kind.__name__}")
    for key in ("widenings", "notes", "shared"):
        if not all(isinstance(item, str) for item in metadata.get(key, ())):
            raise IndexFileError(f"{name}: metadata field {key!r} holds something other than text")
    vocabulary = metadata.get("vocabulary")
    if not isinstance(vocabulary, dict):
        raise IndexFileError(f"{name}: the header does not describe the vocabulary")
    for key, kind in _VOCABULARY_TYPES.items():
        value = vocabulary.get(key)
        if value is not None and (not isinstance(value, kind) or type(value) is bool):
            raise IndexFileError(f"{name}: metadata field 'vocabulary.{key}' is a "
                                 f"{type(value).__name__}, not a {kind.__name__}")


def _is_count(value) -> bool:
    """A non-negative int (msgpack booleans are Python bools, which are ints)."""
    return type(value) is int and value >= 0


def _check_array_table(header: dict[str, Any], name: str) -> None:
    """Every array's description is well-formed and inside the data: its
    name, dtype and rank are the layout's, its sizes are counts that agree
    (computed with Python integers, which cannot wrap as ``np.prod`` does)."""
    data_size = header["data_size"]
    seen = set()
    for entry in header["arrays"]:
        if not isinstance(entry, dict):
            raise IndexFileError(f"{name}: malformed array table")
        array_name = entry.get("name")
        if not isinstance(array_name, str) or array_name not in ARRAY_LAYOUT or array_name in seen:
            raise IndexFileError(f"{name}: unexpected array {array_name!r}")
        seen.add(array_name)
        dtypes, rank = ARRAY_LAYOUT[array_name]
        dtype = entry.get("dtype")
        shape, offset, nbytes = entry.get("shape"), entry.get("offset"), entry.get("nbytes")
        encoding = entry.get("encoding", "raw")             # version 1: always raw
        stored_nbytes = entry.get("stored_nbytes", nbytes)
        if (not isinstance(dtype, str) or dtype not in dtypes or not isinstance(shape, list)
                or len(shape) != rank or not all(_is_count(n) for n in shape)
                or not isinstance(encoding, str) or encoding not in ENCODINGS
                or not all(_is_count(n) for n in (offset, nbytes, stored_nbytes))
                or nbytes != math.prod(shape) * np.dtype(dtype).itemsize
                or (encoding == "raw" and stored_nbytes != nbytes)
                # every writer aligns arrays; a misaligned one would be served
                # through memoryviews that cannot index it
                or offset % ALIGNMENT or offset + stored_nbytes > data_size):
            raise IndexFileError(f"{name}: array {array_name!r} has an invalid description")


def _read_arrays(buffer, header, data_start: int, name: str, verify: bool) -> IndexArrays:
    data_size = header["data_size"]
    if data_start + data_size > len(buffer):
        raise IndexFileError(
            f"{name}: truncated: the header announces {data_start + data_size} bytes, "
            f"the file has {len(buffer)}")
    if verify and zlib.crc32(memoryview(buffer)[data_start:data_start + data_size]) != header["data_crc"]:
        raise IndexFileError(f"{name}: corrupted data (checksum mismatch)")
    found: dict[str, np.ndarray] = {}
    _check_array_table(header, name)
    _check_inflated_size(header["arrays"], name)
    for entry in header["arrays"]:
        array_name, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
        offset, nbytes = entry["offset"], entry["nbytes"]
        encoding = entry.get("encoding", "raw")
        stored_nbytes = entry.get("stored_nbytes", nbytes)
        start = data_start + offset
        if encoding == "raw":
            count = nbytes // np.dtype(dtype).itemsize
            array = np.frombuffer(buffer, dtype=np.dtype(dtype), count=count, offset=start)
        elif encoding == "zlib":
            inflated = _inflate(buffer[start:start + stored_nbytes], nbytes, nbytes, array_name, name)
            array = np.frombuffer(inflated, dtype=np.dtype(dtype))
        elif encoding == "runs":
            array = _from_runs(buffer[start:start + stored_nbytes], np.dtype(dtype), nbytes,
                               array_name, name)
        else:
            array = _from_row_delta_runs(buffer[start:start + stored_nbytes], np.dtype(dtype),
                                         shape, array_name, name)
        found[array_name] = array.reshape(shape)
    missing = set(ARRAY_LAYOUT) - set(found)
    if missing == set(_ADDED_IN_VERSION_1) and header["format_version"] == 1 and "finals" in found:
        # Written before fast-forward tokens existed (still version 1): such
        # an index forces nothing, which is always safe to say.
        found["forced_offsets"] = np.zeros(len(found["finals"]) + 1, dtype="<i8")
        found["forced_tokens"] = np.zeros(0, dtype="<i4")
        for added in _ADDED_IN_VERSION_1:
            found[added].flags.writeable = False  # read-only, like every loaded array
        missing = set()
    if missing:
        raise IndexFileError(f"{name}: missing arrays {sorted(missing)}")
    arrays = IndexArrays(**found)
    _check_consistency(arrays, name, full=verify)
    return arrays


def _check_inflated_size(entries, name: str) -> None:
    """Refuse a file whose compressed arrays announce more memory than the
    budget (:mod:`tokendfa.analysis.limits`): a run of 10**9 equal words
    takes a few bytes to store, and inflating it would take 4 GB. Raw arrays
    are mapped, not copied, so they do not count."""
    total = 0
    for entry in entries:
        if isinstance(entry, dict) and entry.get("encoding", "raw") != "raw":
            nbytes = entry.get("nbytes")
            total += nbytes if isinstance(nbytes, int) and nbytes > 0 else 0
    budget = current_limits().memory
    if total > budget:
        raise IndexFileError(
            f"{name}: its compressed arrays announce {total:,} bytes once inflated, more than "
            f"the memory budget of {budget:,} bytes")


def _inflate(stored, limit: int, expected: int | None, array_name: str, name: str) -> bytes:
    """The inflated bytes of one array: at most ``limit`` of them, exactly
    ``expected`` when given."""
    inflater = zlib.decompressobj()
    try:
        # max_length 0 means no limit to zlib: ask for one byte more than an
        # empty array may have, so a bomb announced as empty stays refused.
        raw = inflater.decompress(stored, max(limit, 1))
    except zlib.error as exc:
        raise IndexFileError(f"{name}: array {array_name!r} does not inflate: {exc}") from None
    if (len(raw) > limit or (expected is not None and len(raw) != expected) or not inflater.eof
            or inflater.unconsumed_tail):
        raise IndexFileError(
            f"{name}: array {array_name!r} does not inflate to its announced {expected or limit} bytes")
    return raw


def _from_runs(stored, dtype: np.dtype, nbytes: int, array_name: str, name: str) -> np.ndarray:
    """Decode ``runs``; the result is read-only."""
    array, _ = _decode_runs(stored, dtype, nbytes, array_name, name)
    array.flags.writeable = False
    return array


def _decode_runs(stored, dtype: np.dtype, nbytes: int, array_name: str, name: str,
                 *, prefix: int = 0) -> tuple[np.ndarray, bytes]:
    """The run-coded elements after ``prefix`` leading bytes (the row bases
    of ``row-delta-runs``), and those leading bytes."""
    if dtype.itemsize != 4:
        raise IndexFileError(f"{name}: array {array_name!r}: runs need 32-bit elements, not {dtype}")
    count = nbytes // dtype.itemsize
    # Every element its own run is the longest a valid stream can be.
    payload = _inflate(stored, prefix + 8 * count, None, array_name, name)
    head, runs = payload[:prefix], payload[prefix:]
    if len(head) != prefix or len(runs) % 8:
        raise IndexFileError(f"{name}: array {array_name!r} has a malformed run table")
    values, lengths = np.frombuffer(runs, dtype="<u4").reshape(2, -1)
    if int(lengths.sum(dtype=np.int64)) != count or (count and lengths.min() == 0):
        raise IndexFileError(
            f"{name}: array {array_name!r}: its runs do not add up to its announced {count} elements")
    return np.repeat(values, lengths).view(dtype), head


def _from_row_delta_runs(stored, dtype: np.dtype, shape: list[int], array_name: str,
                         name: str) -> np.ndarray:
    if len(shape) != 2:
        raise IndexFileError(f"{name}: array {array_name!r}: row deltas need a table of rows")
    num_rows = shape[0]
    flat, head = _decode_runs(stored, dtype, num_rows * shape[1] * dtype.itemsize, array_name,
                              name, prefix=4 * num_rows)
    bases = np.frombuffer(head, dtype="<i4")
    if np.any((bases < -1) | (bases >= np.arange(num_rows))):
        raise IndexFileError(f"{name}: array {array_name!r}: a row's base is not an earlier row")
    rows = flat.reshape(shape).view("<u4")
    for row, base in zip(np.flatnonzero(bases >= 0).tolist(), bases[bases >= 0].tolist()):
        rows[row] ^= rows[base]  # bases come earlier, so each is already whole
    array = rows.view(dtype)
    array.flags.writeable = False
    return array


def _check_consistency(arrays: IndexArrays, name: str, *, full: bool) -> None:
    """Every field serving indexes with is in range, always: shapes, id
    ranges, offsets, sorted edges, no mask bit past the vocabulary (so a
    forged file cannot make serving read out of bounds or offer a token the
    tokenizer lacks). With ``full``, also that each state's mask is exactly
    the set its transitions allow (:func:`_check_masks_match_transitions`)."""
    problems = _shape_problems(arrays) or _range_problems(arrays)
    if not problems and full:
        problems = _check_masks_match_transitions(arrays)
    if problems:
        raise IndexFileError(f"{name}: inconsistent index: {'; '.join(problems)}")


def _shape_problems(arrays: IndexArrays) -> list[str]:
    vocab_size = len(arrays.token_group)
    num_states = len(arrays.finals)
    problems = []
    if vocab_size == 0:
        problems.append("an empty vocabulary")
    if num_states == 0:
        problems.append("no states")
    if len(arrays.state_offsets) != num_states + 1:
        problems.append("state_offsets does not match the number of states")
    if len(arrays.edge_next) != len(arrays.edge_group):
        problems.append("edge_group and edge_next differ in length")
    if len(arrays.mask_id) != num_states:
        problems.append("mask_id does not match the number of states")
    if arrays.masks.shape[1] != (vocab_size + 31) // 32:
        problems.append("mask width does not match the vocabulary size")
    if len(arrays.masks) == 0:
        problems.append("no masks")
    if len(arrays.forced_offsets) != num_states + 1:
        problems.append("forced_offsets does not match the number of states")
    return problems


def _range_problems(arrays: IndexArrays) -> list[str]:
    """Id ranges, offsets and sortedness: each a pass over one array."""
    vocab_size = len(arrays.token_group)
    num_states = len(arrays.finals)
    num_edges = len(arrays.edge_group)
    problems = []
    offsets = arrays.state_offsets
    num_groups = int(arrays.token_group.max(initial=-1)) + 1
    if offsets[0] != 0 or offsets[-1] != num_edges or np.any(offsets[1:] < offsets[:-1]):
        problems.append("state_offsets are not increasing from 0 to the number of edges")
    if arrays.token_group.min(initial=-1) < -1:
        problems.append("token_group holds ids below -1")
    if num_edges and (arrays.edge_group.min() < 0 or arrays.edge_group.max() >= num_groups):
        problems.append("edge_group holds unknown groups")
    if num_edges and (arrays.edge_next.min() < 0 or arrays.edge_next.max() >= num_states):
        problems.append("edge_next holds unknown states")
    if arrays.mask_id.min() < 0 or arrays.mask_id.max() >= len(arrays.masks):
        problems.append("mask_id holds unknown masks")
    if arrays.finals.view(np.uint8).max() > 1:
        problems.append("finals holds values other than true and false")
    if not problems and num_edges > 1:
        # advance() bisects a state's edges: they must increase within it
        increasing = arrays.edge_group[1:] > arrays.edge_group[:-1]
        boundaries = offsets[1:-1]
        boundaries = boundaries[(boundaries > 0) & (boundaries < num_edges)] - 1
        increasing[boundaries] = True
        if not increasing.all():
            problems.append("a state's edge groups are not strictly increasing")
    spare = arrays.masks.shape[1] * 32 - vocab_size
    if spare and len(arrays.masks) and np.any(arrays.masks[:, -1] >> MASK_WORD.type(32 - spare)):
        problems.append("masks allow ids past the vocabulary")
    eos = arrays.eos_token_ids
    if len(eos) and (eos.min() < 0 or eos.max() >= vocab_size):
        problems.append("eos_token_ids are outside the vocabulary")
    forced_offsets, forced = arrays.forced_offsets, arrays.forced_tokens
    if (forced_offsets[0] != 0 or forced_offsets[-1] != len(forced)
            or np.any(forced_offsets[1:] < forced_offsets[:-1])):
        problems.append("forced_offsets are not increasing from 0 to the number of forced tokens")
    if len(forced) and (forced.min() < 0 or forced.max() >= vocab_size):
        problems.append("forced_tokens are outside the vocabulary")
    return problems


# The masks-against-transitions check hashes bitsets modulo this prime with
# _HASHES independent random key vectors: a mask that differs from what its
# state's transitions allow hashes equal with probability _HASH_PRIME ** -2,
# about 2**-44, for keys drawn afresh at each load (a forger cannot aim at
# them). The prime is below 2**22 so that every sum stays an integer below
# 2**53, exact in float64, up to vocabularies of 2**31 / 2**16 * 16 = 2**19 tokens
# (a half's value below 2**16, times a key, summed over the halves of a row):
# the masks are hashed by one product.
_HASH_PRIME = 4_194_301
_HASHES = 2
_MAX_HASHED_VOCABULARY = 1 << 19


def _check_masks_match_transitions(arrays: IndexArrays) -> list[str]:
    """Each state's mask is exactly what :meth:`Index.advance` accepts from
    it: the tokens whose group has an edge there, and EOS (the tokens with
    no group among ``eos_token_ids``) in final states.

    Both sides are hashed with one random linear function over the
    vocabulary's bits rather than compared bit for bit: a mask row as its
    16-bit halves times a key per half; a state as the sum over its edges of
    its group's key (the sum of its tokens' keys, a bincount), plus EOS's in
    a final state. That reads each mask row once and each edge once,
    O(rows x words + edges + vocabulary): ~19 ms of CPU on a Qwen2.5 schema
    index of 7,159 states, 483 masks and 774k edges (whose load takes ~21 ms
    without it), where rebuilding every row's bits (73 million booleans) took
    ~80 ms; ~0.8 ms on the index of a small regex. Vocabularies past _MAX_HASHED_VOCABULARY are
    checked bit for bit instead (:func:`_rebuilt_masks_problems`)."""
    token_group, offsets, finals = arrays.token_group, arrays.state_offsets, arrays.finals
    masks, edge_group = arrays.masks, arrays.edge_group
    vocab_size, halves = len(token_group), 2 * masks.shape[1]
    if vocab_size > _MAX_HASHED_VOCABULARY:
        return _rebuilt_masks_problems(arrays)
    # os.urandom rather than numpy.random, whose import alone costs a first load ~10 ms
    keys = (np.frombuffer(os.urandom(8 * _HASHES * halves), dtype=np.uint64) % _HASH_PRIME)
    keys = keys.astype(np.int64).reshape(_HASHES, halves)
    # token t is bit t % 16 of half t // 16; each hash's values are one
    # contiguous row (a sum along a row is several times faster than down a
    # column of a (n, 2) array).
    # Only tokens with a group, and EOS, can be allowed: a small pattern has a
    # few hundred of them, and weighing just those (not the whole vocabulary)
    # took its check on Qwen2.5 from ~10 ms to well under 1.
    grouped = np.flatnonzero(token_group >= 0)
    if 4 * len(grouped) < vocab_size:
        weight = keys[:, grouped >> 4] << (grouped & 15)
        column = token_group[grouped].astype(np.intp) + 1
    else:  # most tokens (a schema's free strings): no gather, each half's 16 weights at once
        weight = (keys[:, :, None] << np.arange(16)).reshape(_HASHES, -1)[:, :vocab_size]
        column = token_group.astype(np.intp) + 1  # 0: no group
    weight %= _HASH_PRIME  # below 2**38 before
    num_groups = int(token_group.max(initial=-1)) + 2
    group_key = np.stack([np.bincount(column, weights=weight[k], minlength=num_groups)
                          for k in range(_HASHES)]).astype(np.float64) % _HASH_PRIME
    group_key[:, 0] = 0  # tokens without a group
    eos = arrays.eos_token_ids
    # an EOS token with a group follows its edges; a set, not np.unique, whose
    # first call in a process costs ~4 ms
    eos = np.array(sorted(set(eos[token_group[eos] < 0].tolist())), dtype=np.int64)
    eos_key = ((keys[:, eos >> 4] << (eos & 15)) % _HASH_PRIME).sum(axis=1) % _HASH_PRIME
    # each state's sum over its edges: reduceat over the state's first edges
    # (~5 x faster than a cumulative sum), with a zero edge at the end so
    # that trailing states without edges still index inside
    edge_keys = np.zeros((_HASHES, len(edge_group) + 1))
    for k in range(_HASHES):  # a 1-D take per hash: ~4 x faster than one 2-D fancy index
        np.take(group_key[k, 1:], edge_group, out=edge_keys[k, :-1])
    state_hash = np.add.reduceat(edge_keys, offsets[:-1], axis=1)
    state_hash[:, offsets[1:] == offsets[:-1]] = 0  # reduceat gives an empty slice its first element
    state_hash = (state_hash % _HASH_PRIME + eos_key[:, None] * finals) % _HASH_PRIME
    # einsum's own loop, not a BLAS product: OpenBLAS's threads took 18 ms for
    # 119 rows on a busy 2-core machine where this takes ~1 ms
    mask_hash = np.einsum("ij,kj->ki", masks.view("<u2"), keys, dtype=np.float64,
                          casting="unsafe") % _HASH_PRIME
    differs = np.flatnonzero((mask_hash[:, arrays.mask_id] != state_hash).any(axis=0))
    if len(differs):
        return [f"the masks of {len(differs):,} state(s) differ from what their transitions allow "
                f"(state {int(differs[0])} first)"]
    return []


def _rebuilt_masks_problems(arrays: IndexArrays) -> list[str]:
    """The same check bit for bit, for vocabularies too large for the hash's
    exact float sums: each state's mask row rebuilt from its edges, a batch
    of states at a time."""
    token_group, offsets, finals = arrays.token_group, arrays.state_offsets, arrays.finals
    masks, edge_group = arrays.masks, arrays.edge_group
    column = token_group.astype(np.intp) + 1  # 0: no group
    num_groups = int(column.max()) + 1
    eos = arrays.eos_token_ids
    eos = eos[token_group[eos] < 0]
    for low in range(0, len(finals), _REBUILD_BATCH):
        states = np.arange(low, min(low + _REBUILD_BATCH, len(finals)))
        counts = offsets[states + 1] - offsets[states]
        edges = np.repeat(offsets[states] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        allowed_group = np.zeros((len(states), num_groups), dtype=bool)
        allowed_group[np.repeat(np.arange(len(states)), counts), edge_group[edges] + 1] = True
        allowed_group[:, 0] = False
        allowed = np.zeros((len(states), masks.shape[1] * 32), dtype=bool)
        allowed[:, :len(token_group)] = allowed_group[:, column]
        allowed[np.ix_(finals[states], eos)] = True
        expected = np.packbits(allowed, axis=1, bitorder="little").view(MASK_WORD)
        differs = np.flatnonzero((expected != masks[arrays.mask_id[states]]).any(axis=1))
        if len(differs):
            return [f"state {low + int(differs[0])}'s mask differs from what its transitions allow"]
    return []


_REBUILD_BATCH = 16


def _check_vocabulary(metadata, arrays: IndexArrays, vocabulary, name: str) -> None:
    stored = metadata.get("vocabulary")
    if not isinstance(stored, dict):
        raise IndexFileError(f"{name}: the header does not describe the vocabulary")
    if stored.get("size") != len(arrays.token_group):
        raise IndexFileError(f"{name}: the header's vocabulary size does not match the arrays")
    if vocabulary is None:
        return
    if stored.get("fingerprint") != vocabulary.fingerprint:
        raise VocabularyMismatchError(
            f"{name} was built for vocabulary {stored.get('name')!r} "
            f"({stored.get('size')} tokens, fingerprint {str(stored.get('fingerprint'))[:12]}), "
            f"not for {vocabulary.name!r} ({vocabulary.size} tokens, fingerprint "
            f"{vocabulary.fingerprint[:12]})")
