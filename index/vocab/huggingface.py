"""Hugging Face tokenizers: transformers tokenizers, ``tokenizers.Tokenizer``
objects and saved tokenizer directories.

How token strings are written depends on the tokenizer's decoder:

* **GPT-2 byte-level BPE**: every byte is drawn as a printable character
  (space is ``Ġ``, newline ``Ċ``), so a token string is mapped back character
  by character through the inverse of ``bytes_to_unicode``.
* **SentencePiece-style** (Metaspace / Replace decoders): ``▁`` is a space and
  ``<0xNN>`` pieces are raw bytes when the decoder has ``ByteFallback``. A
  slow tokenizer with an ``sp_model`` is read through
  :mod:`tokendfa.vocab.sentencepiece`.
* **Added tokens**: special ones are ``None``; non-special ones are text,
  their content as UTF-8, because the tokenizer produces them for exactly
  that text and decodes them back to it.

EOS is the tokenizer's, plus any extra EOS ids in ``generation_config.json``.

A saved folder is read from its JSON files where
:mod:`tokendfa.vocab.tokenizer_json` knows the result is transformers' own
(Gemma 3: 2.6 s against 17.7 s through transformers on the loaded 2-core
machine), through transformers otherwise, and either way kept in the
vocabulary store (:mod:`tokendfa.vocab.stored`) for the next process. A
tokenizer object the caller built is read as it is.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis import limits
from ..analysis.errors import VocabularyError, import_optional
from ._files import check_tokenizer_folder
from .sentencepiece import BYTE_PIECE, exact_model, load_processor, processor_tokens
from .vocabulary import Vocabulary

__all__ = ["from_pretrained", "read_folder", "piece_scheme", "PieceScheme", "FolderTransformersEncoder"]


@functools.lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``.

    Byte-level BPE draws each byte as one printable character so that its
    merges operate on strings: bytes that are printable Latin-1 (``!``..``~``,
    ``¡``..``¬``, ``®``..``ÿ``) stand for themselves, and the other 68 are
    given the characters U+0100, U+0101, ... in byte order. Hence space
    (0x20, the 33rd such byte) is ``Ġ`` U+0120 and newline ``Ċ`` U+010A.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in set(printable)]
    table.update({chr(0x100 + k): b for k, b in enumerate(others)})
    return table


def _byte_level_bytes(token: str) -> bytes:
    table = _byte_level_decoder()
    # A character outside the map keeps its UTF-8 bytes, as the Hugging Face
    # ByteLevel decoder does.
    return b"".join(bytes([table[c]]) if c in table else c.encode("utf-8") for c in token)


@functools.lru_cache(maxsize=1)
def _byte_level_translation() -> dict[int, int]:
    """``str.translate`` table taking each byte-level character to the
    Latin-1 character of its byte, so that ``.encode("latin-1")`` gives the
    bytes of a whole vocabulary in one call. The Latin-1 characters that are
    not in the map (controls, space, soft hyphen) go to U+FFFF, which Latin-1
    cannot encode: a piece holding one keeps its UTF-8 bytes, which only the
    per-piece path gives."""
    table: dict[int, int] = {c: 0xFFFF for c in range(0x100)}
    table.update({ord(c): b for c, b in _byte_level_decoder().items()})
    return table


# "<0xNN>" -> the byte, for SentencePiece byte-fallback pieces (a dict lookup
# per piece instead of a regular expression match).
_BYTE_PIECES = {f"<0x{b:02X}>": bytes([b]) for b in range(256)}


@dataclass(frozen=True)
class PieceScheme:
    """How a Hugging Face token string is written, read from its decoder."""
    byte_level: bool = False
    space_marker: str | None = None    # "▁" for SentencePiece-style vocabularies
    byte_fallback: bool = False         # "<0xNN>" pieces are raw bytes

    def to_bytes(self, piece: str) -> bytes:
        if self.byte_level:
            return _byte_level_bytes(piece)
        if self.byte_fallback:
            m = BYTE_PIECE.fullmatch(piece)
            if m is not None:
                return bytes([int(m.group(1), 16)])
        if self.space_marker:
            piece = piece.replace(self.space_marker, " ")
        return piece.encode("utf-8")

    def all_to_bytes(self, pieces: list[str]) -> list[bytes]:
        """``[to_bytes(p) for p in pieces]``, with whole-vocabulary string
        operations where they give the same bytes: 262,144 Gemma pieces took
        0.7 s one by one (loaded 2-core machine), a few tens of ms this way."""
        if self.byte_level:
            # Every mapped character is one byte, so character offsets are
            # byte offsets; a character outside the map (it keeps its UTF-8
            # bytes) fails the Latin-1 encoding and sends the vocabulary
            # through the per-piece path.
            joined = "".join(pieces)
            try:
                data = joined.translate(_byte_level_translation()).encode("latin-1")
            except UnicodeEncodeError:
                return [self.to_bytes(p) for p in pieces]
            out, start = [], 0
            for p in pieces:
                end = start + len(p)
                out.append(data[start:end])
                start = end
            return out
        separator = "\x00"
        joined = separator.join(pieces)
        if joined.count(separator) != len(pieces) - 1:  # a piece holds the separator
            return [self.to_bytes(p) for p in pieces]
        if self.space_marker:
            joined = joined.replace(self.space_marker, " ")
        out = joined.encode("utf-8").split(b"\x00") if pieces else []
        if self.byte_fallback:
            byte_pieces = _BYTE_PIECES
            for i, p in enumerate(pieces):
                if len(p) == 6 and p in byte_pieces:
                    out[i] = byte_pieces[p]
                elif len(p) == 6 and BYTE_PIECE.fullmatch(p):  # lower-case hex digits
                    out[i] = self.to_bytes(p)
        return out


def decoder_steps(node: Any) -> list[dict[str, Any]]:
    """The decoders of a ``tokenizer.json`` decoder description, with
    ``Sequence`` flattened."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [s for child in node.get("decoders", []) for s in decoder_steps(child)]
    return [node]


def piece_scheme(decoder: dict[str, Any] | None, vocab: Mapping[str, int]) -> PieceScheme:
    """How the pieces of ``vocab`` are written, from the tokenizer's decoder
    (its ``tokenizer.json`` description, ``None`` when it has none)."""
    steps = decoder_steps(decoder)
    kinds = {s.get("type") for s in steps}
    if "ByteLevel" in kinds:
        return PieceScheme(byte_level=True)
    marker = None
    for s in steps:
        if s.get("type") == "Metaspace":
            marker = s.get("replacement", "\u2581")
        elif s.get("type") == "Replace" and s.get("content") == " ":
            marker = (s.get("pattern") or {}).get("String") or marker
    if marker or "ByteFallback" in kinds:
        return PieceScheme(space_marker=marker, byte_fallback="ByteFallback" in kinds)
    unsupported = kinds - {"Fuse", "Strip"}
    if unsupported:
        raise VocabularyError(
            f"unsupported tokenizer decoder {sorted(map(str, unsupported))}: a WordPiece, BPE-suffix "
            f"or CTC decoder inserts or removes text between tokens, so its tokens have no fixed bytes")
    # No decoder to go by: recognise the writing from the vocabulary itself.
    pieces = list(vocab)
    if sum("\u0120" in p for p in pieces) > len(pieces) // 20:
        return PieceScheme(byte_level=True)
    if sum("\u2581" in p for p in pieces) > len(pieces) // 20:
        return PieceScheme(space_marker="\u2581", byte_fallback="<0x00>" in vocab)
    raise VocabularyError(
        "cannot tell how this tokenizer writes bytes: it has no decoder, and its vocabulary uses "
        "neither byte-level ('Ġ') nor SentencePiece ('▁') pieces")


class _TransformersEncoder:
    """The Hugging Face tokenizer's own encoding, without BOS/EOS."""

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer

    def __call__(self, text: str) -> list[int]:
        t = self._tokenizer
        if hasattr(t, "encode_batch"):  # a bare tokenizers.Tokenizer
            return list(t.encode(text, add_special_tokens=False).ids)
        return list(t.encode(text, add_special_tokens=False))


class FolderTransformersEncoder:
    """:class:`_TransformersEncoder` of the tokenizer that transformers loads
    from a folder, loaded on the first call (for a vocabulary from the store,
    :mod:`tokendfa.vocab.stored`, that was read through transformers)."""

    def __init__(self, directory: str) -> None:
        self._directory = str(directory)
        self._encoder: _TransformersEncoder | None = None
        self._lock = threading.Lock()

    def __call__(self, text: str) -> list[int]:
        if self._encoder is None:
            # the process's tokenizer, made once: outside a build's time limit
            with limits.excluded(), self._lock:
                if self._encoder is None:
                    self._encoder = _TransformersEncoder(
                        _load_transformers_tokenizer(Path(self._directory)))
        return self._encoder(text)

    def __reduce__(self) -> tuple:
        return (FolderTransformersEncoder, (self._directory,))


def _load_transformers_tokenizer(p: Path) -> Any:
    directory = p if p.is_dir() else p.parent
    transformers = import_optional("transformers", extra="hf",
                                   needed_for="reading a Hugging Face tokenizer")
    try:
        return transformers.AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception as e:
        raise VocabularyError(
            f"transformers could not load a tokenizer from {str(directory)!r}: "
            f"{type(e).__name__}: {str(e).strip()[:500]}") from e


def _generation_eos_ids(directory: Path | None) -> list[int]:
    """Chat models often end on more ids than the tokenizer's one EOS
    (Qwen2.5-Instruct: ``<|im_end|>`` and ``<|endoftext|>``); they are listed
    in ``generation_config.json``."""
    if directory is None or not (directory / "generation_config.json").is_file():
        return []
    try:
        value = json.loads((directory / "generation_config.json").read_text("utf-8")).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    return []


def from_pretrained(tokenizer_or_path: Any, *,
                    eos_token_ids: int | Iterable[int] | None = None,
                    store: bool = True) -> Vocabulary:
    """See :meth:`Vocabulary.from_pretrained`. ``store``: for a folder, keep
    and reuse its vocabulary in the vocabulary store
    (:mod:`tokendfa.vocab.stored`)."""
    if isinstance(tokenizer_or_path, (str, os.PathLike)):
        p = Path(os.fspath(tokenizer_or_path)).expanduser()
        if not p.exists():
            raise VocabularyError(
                f"tokenizer directory not found: {str(p)!r} (from_pretrained reads local files "
                f"only and never downloads; give the directory of a saved tokenizer)")
        p = p.resolve()
        directory = p if p.is_dir() else p.parent
        check_tokenizer_folder(directory)
        if store and eos_token_ids is None:
            from .stored import load_or_read

            return load_or_read(directory, lambda: read_folder(directory, p))
        return read_folder(directory, p, eos_token_ids=eos_token_ids)
    tokenizer = tokenizer_or_path
    origin = getattr(tokenizer, "name_or_path", None)
    directory = None
    if origin and Path(origin).is_dir():
        directory = Path(origin).resolve()
    return _tokenizer_vocabulary(tokenizer, eos_token_ids, directory,
                                 Path(origin).name if origin else type(tokenizer).__name__)


def _tokenizer_vocabulary(tokenizer: Any, eos_token_ids: int | Iterable[int] | None,
                          directory: Path | None, name: str) -> Vocabulary:
    tokens, special_ids = _transformers_tokens(tokenizer)
    for i in special_ids:
        if 0 <= i < len(tokens):
            tokens[i] = None
    eos = _eos(eos_token_ids, getattr(tokenizer, "eos_token_id", None), directory, name)
    return Vocabulary(tokens, eos, name=name, source=None if directory is None else str(directory),
                      encoder=_TransformersEncoder(tokenizer))


def _eos(given: int | Iterable[int] | None, tokenizer_eos: Any, directory: Path | None,
         name: str) -> int | Iterable[int]:
    if given is not None:
        return given
    eos = [i for i in (tokenizer_eos, *_generation_eos_ids(directory)) if isinstance(i, int)]
    if not eos:
        raise VocabularyError(
            f"tokenizer {name!r} names no EOS token; pass eos_token_ids= to from_pretrained")
    return eos


def read_folder(directory: Path, path: Path | None = None, *,
                eos_token_ids: int | Iterable[int] | None = None,
                use_transformers: bool = False) -> Vocabulary:
    """The vocabulary of the saved tokenizer folder ``directory`` (checked by
    the caller): from its JSON files where
    :mod:`tokendfa.vocab.tokenizer_json` takes the folder, else (or with
    ``use_transformers``) through transformers (``path``: what to give
    transformers, the folder or a file in it)."""
    from .tokenizer_json import TokenizerFileEncoder, read_tokenizer_folder

    read = "transformers asked for" if use_transformers else read_tokenizer_folder(directory)
    if isinstance(read, str):
        tokenizer = _load_transformers_tokenizer(path or directory)
        return _tokenizer_vocabulary(tokenizer, eos_token_ids, directory, directory.name)
    return Vocabulary(read.tokens, _eos(eos_token_ids, read.eos_token_id, directory, directory.name),
                      name=directory.name, source=str(directory),
                      encoder=TokenizerFileEncoder(str(directory / "tokenizer.json")))


def _transformers_tokens(tokenizer: Any) -> tuple[list[bytes | None], set[int]]:
    """Token bytes for a Hugging Face tokenizer, and the ids that are special."""
    is_bare = hasattr(tokenizer, "encode_batch")  # a tokenizers.Tokenizer, not a transformers wrapper
    backend = tokenizer if is_bare else getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        base_vocab = backend.get_vocab(with_added_tokens=False)
        decoder = backend.decoder
        scheme = piece_scheme(json.loads(decoder.__getstate__()) if decoder is not None else None,
                              base_vocab)
        size = backend.get_vocab_size(with_added_tokens=True)
        table: dict[int, bytes | None] = dict(zip(base_vocab.values(),
                                                  scheme.all_to_bytes(list(base_vocab))))
    elif getattr(tokenizer, "sp_model", None) is not None:
        # A slow SentencePiece-backed tokenizer: read the pieces from its model.
        origin = "the tokenizer's sp_model"
        exact, escape = exact_model(tokenizer.sp_model.serialized_model_proto(), origin)
        pieces = processor_tokens(load_processor(exact, origin), escape)
        table = dict(enumerate(pieces))
        size = len(pieces)
    elif getattr(tokenizer, "byte_decoder", None) is not None and hasattr(tokenizer, "get_vocab"):
        # A slow GPT-2-style tokenizer: its byte_decoder is the standard map.
        table = {i: _byte_level_bytes(piece) for piece, i in tokenizer.get_vocab().items()}
        size = 0
    else:
        raise VocabularyError(
            f"cannot read the vocabulary of a {type(tokenizer).__name__}: expected a transformers "
            f"tokenizer (fast, or SentencePiece-based) or a tokenizers.Tokenizer")

    added = (tokenizer.get_added_tokens_decoder() if is_bare
             else getattr(tokenizer, "added_tokens_decoder", {}))
    special_ids = {int(i) for i, t in added.items() if getattr(t, "special", False)}
    special_ids.update(int(i) for i in getattr(tokenizer, "all_special_ids", ()) or () if i is not None)
    for i, t in added.items():
        if int(i) not in special_ids:
            table[int(i)] = str(getattr(t, "content", t)).encode("utf-8")
    size = max([size, len(tokenizer) if hasattr(tokenizer, "__len__") else 0,
                *(i + 1 for i in table)])
    tokens: list[bytes | None] = [None] * size
    for i, b in table.items():
        tokens[i] = b
    return tokens, special_ids

