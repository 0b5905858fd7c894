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
transformers is imported only to load a tokenizer from a directory; a
tokenizer object the caller built is read as it is.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError, import_optional
from ._files import check_tokenizer_folder
from .sentencepiece import BYTE_PIECE, exact_model, load_processor, processor_tokens
from .vocabulary import Vocabulary

__all__ = ["from_pretrained"]


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


@dataclass(frozen=True)
class _PieceScheme:
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


def _decoder_steps(node: Any) -> list[dict[str, Any]]:
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [s for child in node.get("decoders", []) for s in _decoder_steps(child)]
    return [node]


def _piece_scheme(backend: Any, vocab: Mapping[str, int]) -> _PieceScheme:
    decoder = backend.decoder
    steps = _decoder_steps(json.loads(decoder.__getstate__()) if decoder is not None else None)
    kinds = {s.get("type") for s in steps}
    if "ByteLevel" in kinds:
        return _PieceScheme(byte_level=True)
    marker = None
    for s in steps:
        if s.get("type") == "Metaspace":
            marker = s.get("replacement", "\u2581")
        elif s.get("type") == "Replace" and s.get("content") == " ":
            marker = (s.get("pattern") or {}).get("String") or marker
    if marker or "ByteFallback" in kinds:
        return _PieceScheme(space_marker=marker, byte_fallback="ByteFallback" in kinds)
    unsupported = kinds - {"Fuse", "Strip"}
    if unsupported:
        raise VocabularyError(
            f"unsupported tokenizer decoder {sorted(map(str, unsupported))}: a WordPiece, BPE-suffix "
            f"or CTC decoder inserts or removes text between tokens, so its tokens have no fixed bytes")
    # No decoder to go by: recognise the writing from the vocabulary itself.
    pieces = list(vocab)
    if sum("\u0120" in p for p in pieces) > len(pieces) // 20:
        return _PieceScheme(byte_level=True)
    if sum("\u2581" in p for p in pieces) > len(pieces) // 20:
        return _PieceScheme(space_marker="\u2581", byte_fallback="<0x00>" in vocab)
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
                    eos_token_ids: int | Iterable[int] | None = None) -> Vocabulary:
    """See :meth:`Vocabulary.from_pretrained`."""
    directory: Path | None = None
    if isinstance(tokenizer_or_path, (str, os.PathLike)):
        p = Path(os.fspath(tokenizer_or_path)).expanduser()
        if not p.exists():
            raise VocabularyError(
                f"tokenizer directory not found: {str(p)!r} (from_pretrained reads local files "
                f"only and never downloads; give the directory of a saved tokenizer)")
        p = p.resolve()
        directory = p if p.is_dir() else p.parent
        check_tokenizer_folder(directory)
        tokenizer = _load_transformers_tokenizer(p)
        source: str | None = str(directory)
        name = directory.name
    else:
        tokenizer = tokenizer_or_path
        origin = getattr(tokenizer, "name_or_path", None)
        source = None
        if origin and Path(origin).is_dir():
            directory = Path(origin).resolve()
            source = str(directory)
        name = Path(origin).name if origin else type(tokenizer).__name__

    tokens, special_ids = _transformers_tokens(tokenizer)
    for i in special_ids:
        if 0 <= i < len(tokens):
            tokens[i] = None

    if eos_token_ids is None:
        eos = [getattr(tokenizer, "eos_token_id", None), *_generation_eos_ids(directory)]
        eos_token_ids = [i for i in eos if isinstance(i, int)]
        if not eos_token_ids:
            raise VocabularyError(
                f"tokenizer {name!r} names no EOS token; pass eos_token_ids= to from_pretrained")
    return Vocabulary(tokens, eos_token_ids, name=name, source=source,
                      encoder=_TransformersEncoder(tokenizer))


def _transformers_tokens(tokenizer: Any) -> tuple[list[bytes | None], set[int]]:
    """Token bytes for a Hugging Face tokenizer, and the ids that are special."""
    is_bare = hasattr(tokenizer, "encode_batch")  # a tokenizers.Tokenizer, not a transformers wrapper
    backend = tokenizer if is_bare else getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        base_vocab = backend.get_vocab(with_added_tokens=False)
        scheme = _piece_scheme(backend, base_vocab)
        size = backend.get_vocab_size(with_added_tokens=True)
        table: dict[int, bytes | None] = {i: scheme.to_bytes(piece) for piece, i in base_vocab.items()}
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

