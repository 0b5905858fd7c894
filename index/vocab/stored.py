"""The vocabulary store: a tokenizer folder's vocabulary, read once per
machine and kept on disk, so that the next process loads it instead of
reading the tokenizer again.

vLLM's front end and its worker each read the model's vocabulary, and a
restarted server reads it again; each read of Gemma 3's 262,144 tokens
parses a 16 MB ``tokenizer.json`` at least. The store keeps, per tokenizer
folder, one file holding the token bytes, the EOS ids and the order of the
spelled tokens by bytes (:meth:`Vocabulary.sorted_spellings`, a Python sort
of every token otherwise).

* **Where**: ``vocabularies/`` in the index cache's folder
  (``$TOKENDFA_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokendfa``, else
  ``~/.cache/tokendfa``); ``TOKENDFA_VOCABULARY_STORE=off`` turns it off.
* **Key**: a SHA-256 of the store's format, the tokendfa and transformers
  versions, the source of the reading modules, and the name and content of
  every file of the folder that decides the vocabulary
  (``tokenizer.json``, ``tokenizer_config.json``, ``generation_config.json``,
  ...; :data:`tokendfa.vocab.tokenizer_json.FOLDER_FILES`), so an edited,
  replaced or upgraded tokenizer is a new entry. Hashing Gemma's files is
  tens of milliseconds.
* **Writes** go to a temporary file in the same folder, renamed into place:
  a reader sees a whole file or none. Two processes that miss together both
  read the tokenizer and write the same entry.
* **Loads are validated**: the magic, the header, the sizes against the file
  length, a SHA-256 of the payload (with the EOS ids and the vocabulary's
  fingerprint, taken from the header), the lengths, and the spelling order's
  range (whether it is the sorted order of the spelled ids is checked when an
  eager build first uses it, :meth:`Vocabulary.adopt_sorted_order`: a wrong
  one is sorted again then). An entry that fails any check
  (truncated, corrupted, a FIFO or device at its name) is read again from
  the tokenizer and rewritten, with a warning; it never stops the caller.
  Only regular files are opened (:mod:`tokendfa.analysis.regular_files`),
  and nothing is unpickled: the file is a JSON header and flat arrays.
* A folder that cannot be written (read-only, full) only costs the speed:
  the vocabulary is returned, with a warning.
* **Size**: at most :data:`MAX_ENTRIES` entries; a write removes the least
  recently used (a hit counts as a use) past that.

Layout, little-endian: ``MAGIC`` (8 bytes), ``u32`` header length, the
header (UTF-8 JSON), zero padding to a multiple of 8, then ``int32[size]``
token lengths (-1 for ids that are not text), ``int32[spelled]`` the spelled
ids in the order of their bytes, and the token bytes in id order.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..analysis.errors import VocabularyError
from ..analysis.regular_files import read_regular_file, replace_file
from .vocabulary import Vocabulary

__all__ = ["load_or_read", "store_dir", "folder_key", "code_digest", "evict_least_recent", "write_entry",
           "STORE_ENVIRONMENT_VARIABLE"]

MAGIC = b"TDFAVOC\x01"
FORMAT = 2
SUFFIX = ".tdvocab"
STORE_ENVIRONMENT_VARIABLE = "TOKENDFA_VOCABULARY_STORE"
# The largest vocabularies hold a few million tokens of a few bytes: an entry
# past this is not one of ours.
MAX_ENTRY_BYTES = 1 << 30
_HEADER_LIMIT = 1 << 20
# A machine serves a few models; an entry is a few megabytes (Gemma 3: 4 MB).
MAX_ENTRIES = 32


class _Damaged(Exception):
    """An entry that does not load; the message says why."""


def store_dir() -> Path | None:
    """The store's folder, or ``None`` when ``TOKENDFA_VOCABULARY_STORE`` is
    ``off`` (or ``0``, ``false``, ``no``)."""
    if os.environ.get(STORE_ENVIRONMENT_VARIABLE, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    configured = os.environ.get("TOKENDFA_CACHE_DIR")
    if configured:
        base = Path(configured).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tokendfa"
    return base / "vocabularies"


def code_digest(distributions: Sequence[str], modules: Sequence[Path]) -> bytes:
    """SHA-256 of what cached data depends on besides its input: the
    installed versions of ``distributions`` and the source of ``modules``,
    so that an entry written by other code is never served (an editable
    install keeps its version number across edits)."""
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for distribution in distributions:
        try:
            parts.append(f"{distribution}={version(distribution)}")
        except PackageNotFoundError:
            parts.append(f"{distribution}=none")
    h = hashlib.sha256("\x00".join(parts).encode())
    for module in modules:
        try:
            h.update(module.read_bytes())
        except OSError:  # pragma: no cover - installed without sources
            h.update(module.name.encode())
    return h.digest()


def _versions() -> bytes:
    """What the reading depends on besides the files: tokendfa and
    transformers (which reads the folders the JSON reader leaves to it), and
    the modules that read."""
    here = Path(__file__).resolve().parent
    return code_digest(("tokendfa", "transformers"),
                       [here / m for m in ("huggingface.py", "tokenizer_json.py", "stored.py",
                                           "vocabulary.py")])


def folder_key(directory: Path) -> str:
    """Hex SHA-256 naming the vocabulary of ``directory``'s tokenizer files."""
    from ._files import read_file
    from .tokenizer_json import FOLDER_FILES

    h = hashlib.sha256(b"tokendfa-vocabulary-store\x00")
    h.update(struct.pack("<I", FORMAT))
    h.update(_versions())
    for name in FOLDER_FILES:
        p = directory / name
        if not p.exists():
            continue
        data = read_file(p, "tokenizer file")
        h.update(name.encode() + b"\x00" + struct.pack("<Q", len(data)))
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def load_or_read(directory: Path, read: Callable[[], Vocabulary]) -> Vocabulary:
    """The vocabulary of the tokenizer folder ``directory``: its store entry
    when there is a sound one, else ``read()``, stored for the next process."""
    folder = store_dir()
    if folder is None:
        return read()
    key = folder_key(directory)
    entry = folder / f"{key}{SUFFIX}"
    if os.path.lexists(entry):
        try:
            vocabulary = _load(entry, key, directory)
            with contextlib.suppress(OSError):
                os.utime(entry)  # recently used: the last to be evicted
            return vocabulary
        except _Damaged as e:
            warnings.warn(f"tokendfa: vocabulary store entry {str(entry)!r} is damaged ({e}); "
                          f"reading the tokenizer again", RuntimeWarning, stacklevel=3)
    vocabulary = read()
    write_entry(lambda: _write(folder, entry, key, vocabulary), entry, SUFFIX, MAX_ENTRIES,
                "vocabulary store entry", "the vocabulary will be read again next time", stacklevel=4)
    return vocabulary


def write_entry(write: Callable[[], None], entry: Path, suffix: str, count: int, what: str,
                otherwise: str, stacklevel: int = 2) -> None:
    """Write the cache file ``entry`` with ``write()``, then keep the
    ``count`` most recently used files named ``*suffix`` in its folder
    (:func:`evict_least_recent`). A folder that cannot be written only
    warns: ``what`` names the file, ``otherwise`` says what that costs."""
    try:
        write()
        evict_least_recent(entry.parent, suffix, count, keep=entry)
    except OSError as e:
        warnings.warn(f"tokendfa: cannot write {what} {str(entry)!r} ({e.strerror or e}); "
                      f"{otherwise}", RuntimeWarning, stacklevel=stacklevel)


def evict_least_recent(folder: Path, suffix: str, count: int, keep: Path) -> None:
    """Remove the least recently used files named ``*suffix`` in ``folder``
    past the ``count`` newest, never ``keep``."""
    entries = []
    for p in folder.glob(f"*{suffix}"):
        with contextlib.suppress(OSError):
            entries.append((p.stat().st_mtime_ns, p))
    entries.sort(reverse=True)
    for _, p in entries[count:]:
        if p != keep:
            with contextlib.suppress(OSError):
                p.unlink()


def _encoder_kind(vocabulary: Vocabulary) -> str:
    from .tokenizer_json import TokenizerFileEncoder

    return "tokenizers" if isinstance(vocabulary.encoder, TokenizerFileEncoder) else "transformers"


def _write(folder: Path, entry: Path, key: str, vocabulary: Vocabulary) -> None:
    tokens = vocabulary.tokens
    lengths = np.fromiter((-1 if t is None else len(t) for t in tokens), dtype="<i4", count=len(tokens))
    _, order = vocabulary.sorted_spellings()
    data = b"".join(t for t in tokens if t is not None)
    payload = [lengths.tobytes(), order.astype("<i4").tobytes(), data]
    digest = hashlib.sha256()
    for part in payload:
        digest.update(part)
    digest.update(_checked_fields(vocabulary.eos_token_ids, vocabulary.fingerprint))
    header = json.dumps({
        "format": FORMAT, "key": key, "name": vocabulary.name, "size": len(tokens),
        "eos": list(vocabulary.eos_token_ids), "spelled": int(order.size), "data_bytes": len(data),
        "encoder": _encoder_kind(vocabulary), "sha256": digest.hexdigest(),
        "fingerprint": vocabulary.fingerprint,
    }).encode()
    head = MAGIC + struct.pack("<I", len(header)) + header
    head += b"\x00" * (-len(head) % 8)
    folder.mkdir(parents=True, exist_ok=True)
    replace_file(entry, [head, *payload], prefix=f".{key[:16]}.", durable=False)


def _checked_fields(eos, fingerprint: str) -> bytes:
    """The header's fields that the checksum covers with the payload: the
    EOS ids and the fingerprint, which the reader takes without hashing the
    tokens again."""
    return json.dumps([[int(i) for i in eos], str(fingerprint)]).encode()


def _load(entry: Path, key: str, directory: Path) -> Vocabulary:
    # Read whole rather than mapped: a Vocabulary holds its tokens as Python
    # bytes, so every byte is copied out of the file either way (Gemma 3's
    # entry is 4 MB).
    data = read_regular_file(entry, "vocabulary store entry", _Damaged, max_bytes=MAX_ENTRY_BYTES)
    if len(data) < len(MAGIC) + 4:
        raise _Damaged(f"{len(data)} bytes")
    return _decode(memoryview(data), key, directory)


def _decode(view: memoryview, key: str, directory: Path) -> Vocabulary:
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise _Damaged("not a vocabulary store entry")
    (header_length,) = struct.unpack_from("<I", view, len(MAGIC))
    start = len(MAGIC) + 4
    if header_length > min(_HEADER_LIMIT, len(view) - start):
        raise _Damaged("truncated header")
    try:
        header = json.loads(bytes(view[start:start + header_length]))
        size, spelled, data_bytes = int(header["size"]), int(header["spelled"]), int(header["data_bytes"])
        eos = [int(i) for i in header["eos"]]
        name, encoder_kind, digest = str(header["name"]), header["encoder"], str(header["sha256"])
        fingerprint = str(header["fingerprint"])
        if header["format"] != FORMAT or header["key"] != key:
            raise _Damaged("a header for another key or format")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise _Damaged(f"unreadable header: {e}") from None
    offset = start + header_length
    offset += -offset % 8
    if min(size, spelled, data_bytes) < 0 or spelled > size or \
            len(view) != offset + 4 * size + 4 * spelled + data_bytes:
        raise _Damaged("sizes that do not match the file")
    payload = view[offset:]
    checksum = hashlib.sha256(payload)
    checksum.update(_checked_fields(eos, fingerprint))
    if checksum.hexdigest() != digest:
        raise _Damaged("its content does not match its checksum")
    lengths = np.frombuffer(payload, dtype="<i4", count=size)
    order = np.frombuffer(payload, dtype="<i4", count=spelled, offset=4 * size).astype(np.int64)
    data = bytes(payload[4 * (size + spelled):])
    if lengths.size and (lengths.min() < -1 or (lengths == 0).any()):
        raise _Damaged("bad token lengths")
    if int(lengths[lengths > 0].sum()) != data_bytes or int((lengths > 0).sum()) != spelled:
        raise _Damaged("token lengths that do not match the bytes")
    if spelled and (order.min() < 0 or order.max() >= size):
        raise _Damaged("spelling order out of range")
    # C-level loops throughout: a Python loop per token was 0.9 s of a 1.1 s
    # load of Gemma's 262,144 tokens on the loaded 2-core machine.
    ends = np.cumsum(np.maximum(lengths, 0))
    starts = ends - np.maximum(lengths, 0)
    # b"" for the ids that are not text: the Vocabulary makes them None.
    tokens = list(map(data.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    if encoder_kind == "tokenizers":
        from .tokenizer_json import TokenizerFileEncoder
        encoder = TokenizerFileEncoder(str(directory / "tokenizer.json"))
    elif encoder_kind == "transformers":
        from .huggingface import FolderTransformersEncoder
        encoder = FolderTransformersEncoder(str(directory))
    else:
        raise _Damaged(f"unknown encoder {encoder_kind!r}")
    try:
        vocabulary = Vocabulary(tokens, eos, name=name, source=str(directory), encoder=encoder)
    except VocabularyError as e:
        raise _Damaged(str(e)) from None
    # The spelling order is checked where it is used (Vocabulary.sorted_spellings):
    # only eager builds read it, and the check is 0.3 s of Gemma's load.
    vocabulary.adopt_sorted_order(order)
    # Written from these tokens and EOS ids (the payload's checksum holds):
    # hashing every token again is 0.1 s of Gemma's load.
    vocabulary.adopt_fingerprint(fingerprint)
    return vocabulary
