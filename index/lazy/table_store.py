"""The lazy engine's per-vocabulary tables kept in the cache folder, so that
the next process with the same vocabulary reads them instead of making them.

vLLM's front end and its worker each need the lazy walk's tables of the
model's vocabulary (:func:`tokendfa.lazy.vocabulary_tables`: the byte
matrix, its column layout, the tokens by first byte, each token's first
character and tail bytes). Making them for Gemma 3's 262,144 tokens takes
0.5-0.8 s on the loaded 2-core machine, a Python loop over every token
among it; reading them back from this file takes a few tens of
milliseconds. The worker makes them while the engine starts and writes the
file; the front end's first request then reads it.

* **Where**: the vocabulary store's folder (:func:`tokendfa.vocab.stored.store_dir`),
  ``<key>.tdtables``; ``TOKENDFA_VOCABULARY_STORE=off`` turns both off.
* **Key**: a SHA-256 of this format, the tokendfa version, the source of the
  modules that make the tables, and the vocabulary's fingerprint (its
  size, EOS ids and every token's bytes): tables of other tokens or of
  other code are never read.
* **Writes** go to a temporary file renamed into place (a reader sees a
  whole file or none); at most :data:`MAX_ENTRIES` files are kept, the
  least recently used removed first.
* **Loads are validated**: the magic, the header, every array's place
  inside the file, a SHA-256 of the payload, and the arrays against the
  vocabulary (sizes, token lengths). A file that fails is made again and
  rewritten, with a warning; a folder that cannot be written only costs the
  speed. The file is read, not mapped (a file truncated under a mapping
  kills the process with SIGBUS), and nothing is unpickled.

Layout, little-endian: ``MAGIC`` (8 bytes), ``u32`` header length, the
header (UTF-8 JSON: the key, the mask's word count, each array's name,
dtype, shape and offset in the payload, the payload's SHA-256), zero
padding to a multiple of 64, then the payload: the arrays, each at a
multiple of 64 bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import warnings
from pathlib import Path

import numpy as np

from ..analysis.regular_files import read_regular_file, replace_file
from ..vocab.stored import code_digest, store_dir, write_entry
from ..vocab.vocabulary import Vocabulary
from .tables import adopt_table_arrays, table_arrays, tables_ready

__all__ = ["load_or_make_tables", "MAX_ENTRIES"]

MAGIC = b"TDFATBL\x01"
FORMAT = 1
SUFFIX = ".tdtables"
MAX_ENTRIES = 8          # Gemma 3's file is 42 MB
MAX_FILE_BYTES = 1 << 32
_HEADER_LIMIT = 1 << 20
_ALIGN = 64
_DTYPES = {"|u1", "|i1", "|b1", "<i4", "<i8", "<u8"}


class _Damaged(Exception):
    """A file that does not load; the message says why."""


def load_or_make_tables(vocabulary: Vocabulary) -> Vocabulary:
    """Give ``vocabulary`` its lazy tables: already made, read from the
    cache folder, or made now and written there for the next process.
    Returns ``vocabulary``."""
    if tables_ready(vocabulary):
        return vocabulary
    folder = store_dir()
    if folder is None:
        table_arrays(vocabulary)
        return vocabulary
    key = _key(vocabulary)
    entry = folder / f"{key}{SUFFIX}"
    if os.path.lexists(entry):
        try:
            arrays, num_words = _load(entry, key)
            adopt_table_arrays(vocabulary, arrays, num_words)
            with contextlib.suppress(OSError):
                os.utime(entry)  # recently used: the last to be removed
            return vocabulary
        except (_Damaged, ValueError) as e:
            warnings.warn(f"tokendfa: lazy tables file {str(entry)!r} is damaged ({e}); "
                          f"making the tables again", RuntimeWarning, stacklevel=2)
    arrays, num_words = table_arrays(vocabulary)
    write_entry(lambda: _write(folder, entry, key, arrays, num_words), entry, SUFFIX, MAX_ENTRIES,
                "lazy tables file", "they will be made again next time", stacklevel=3)
    return vocabulary


def _versions() -> bytes:
    """The code the tables depend on: the tokendfa version and the source of
    the modules that make them."""
    package = Path(__file__).resolve().parent.parent
    return code_digest(("tokendfa",), [package / m for m in (
        "lazy/tables.py", "lazy/table_store.py", "vocab/vocabulary.py", "analysis/signatures.py")])


def _key(vocabulary: Vocabulary) -> str:
    h = hashlib.sha256(b"tokendfa-lazy-tables\x00")
    h.update(struct.pack("<I", FORMAT))
    h.update(_versions())
    h.update(vocabulary.fingerprint.encode())
    return h.hexdigest()


def _write(folder: Path, entry: Path, key: str, arrays: dict[str, np.ndarray], num_words: int) -> None:
    described, parts, offset = [], [], 0
    digest = hashlib.sha256()
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        data = data.astype(data.dtype.newbyteorder("<"), copy=False)
        raw = data.tobytes()
        pad = b"\x00" * (-len(raw) % _ALIGN)
        described.append([name, data.dtype.str, list(data.shape), offset])
        parts += [raw, pad]
        digest.update(raw)
        digest.update(pad)
        offset += len(raw) + len(pad)
    header = json.dumps({"format": FORMAT, "key": key, "num_words": int(num_words),
                         "arrays": described, "payload_bytes": offset,
                         "sha256": digest.hexdigest()}).encode()
    head = MAGIC + struct.pack("<I", len(header)) + header
    head += b"\x00" * (-len(head) % _ALIGN)
    folder.mkdir(parents=True, exist_ok=True)
    replace_file(entry, [head, *parts], prefix=f".{key[:16]}.", durable=False)


def _load(entry: Path, key: str) -> tuple[dict[str, np.ndarray], int]:
    data = read_regular_file(entry, "lazy tables file", _Damaged, max_bytes=MAX_FILE_BYTES)
    if len(data) < len(MAGIC) + 4 or data[:len(MAGIC)] != MAGIC:
        raise _Damaged("not a lazy tables file")
    (header_length,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    if header_length > min(_HEADER_LIMIT, len(data) - start):
        raise _Damaged("truncated header")
    try:
        header = json.loads(data[start:start + header_length])
        if header["format"] != FORMAT or header["key"] != key:
            raise _Damaged("a header for another key or format")
        num_words, payload_bytes = int(header["num_words"]), int(header["payload_bytes"])
        described = [(str(name), str(dtype), tuple(int(n) for n in shape), int(offset))
                     for name, dtype, shape, offset in header["arrays"]]
        digest = str(header["sha256"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise _Damaged(f"unreadable header: {e}") from None
    base = start + header_length
    base += -base % _ALIGN
    if len(data) != base + payload_bytes:
        raise _Damaged("a size that does not match the file")
    payload = memoryview(data)[base:]
    if hashlib.sha256(payload).hexdigest() != digest:
        raise _Damaged("its content does not match its checksum")
    arrays = {}
    for name, dtype, shape, offset in described:
        if dtype not in _DTYPES or min(shape, default=0) < 0:
            raise _Damaged(f"array {name!r}: unexpected dtype or shape")
        count = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset % _ALIGN or offset + count * np.dtype(dtype).itemsize > payload_bytes:
            raise _Damaged(f"array {name!r} outside the file")
        arrays[name] = np.frombuffer(payload, dtype=dtype, count=count, offset=offset).reshape(shape)
    return arrays, num_words
