"""GGUF files: the tokenizer a llama.cpp model file carries, as token bytes.

A GGUF file is a header, typed key/value metadata, a table of tensors and the
tensor data. The tokenizer lives in the metadata: ``tokenizer.ggml.model``
names the kind, ``tokenizer.ggml.tokens`` holds every token's text and
``tokenizer.ggml.token_type`` says how to read each one (1 normal, 2 unknown,
3 control, 4 user-defined, 5 unused, 6 byte). Three kinds are read:

* ``llama``: SentencePiece BPE. ``▁`` in a normal token is a space and byte
  tokens ``<0xNN>`` are that byte (byte fallback): Llama, Mistral, Gemma.
* ``gpt2``: byte-level BPE, every byte drawn as one printable character
  (``Ġ`` is a space), as in Hugging Face's GPT-2 family: Qwen, Llama 3.
* ``t5``: SentencePiece Unigram (llama.cpp's UGM). ``▁`` is a space, and
  there are no byte tokens, so some texts cannot be spelled at all;
  :meth:`Vocabulary.encode` says where, as for any Unigram vocabulary.

Control, unknown and unused tokens are never text (``None``), whatever the
kind, and user-defined tokens are their literal text (llama.cpp stores them
with real spaces and emits them unchanged). The ``▁`` and ``Ġ`` conversions
are those of the SentencePiece and Hugging Face adapters
(:mod:`tokendfa.vocab.sentencepiece`, :mod:`tokendfa.vocab.huggingface`).

The metadata is read here with ``struct`` from a memory map, and reading
stops at the tensor table: the token list alone is hundreds of thousands of
strings, and ``gguf.GGUFReader`` (which wraps every value of every field in
numpy views) took 27 s to open the 262,144-token Gemma 3 file on this machine,
this reader 0.3 s. The key names and type codes are those of the GGUF
specification (llama.cpp's ``gguf`` package writes the test files).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError
from ._files import existing_file
from .huggingface import PieceScheme
from .sentencepiece import BYTE_PIECE
from .vocabulary import Vocabulary

__all__ = ["from_gguf", "GGUF_MAGIC", "TOKENIZER_MODELS"]

GGUF_MAGIC = b"GGUF"
TOKENIZER_MODELS = ("llama", "gpt2", "t5")
_DEFAULT_ALIGNMENT = 32

# Value type codes of the GGUF specification.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, \
    _UINT64, _INT64, _FLOAT64 = range(13)
_SCALAR_FORMATS = {_UINT8: "B", _INT8: "b", _UINT16: "H", _INT16: "h", _UINT32: "I",
                   _INT32: "i", _FLOAT32: "f", _BOOL: "?", _UINT64: "Q", _INT64: "q",
                   _FLOAT64: "d"}

# Token types (llama.cpp's llama_token_type).
_UNDEFINED, _NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = range(7)

# ggml tensor types: (elements per block, bytes per block), to find where the
# tensor data must end and so tell a truncated download from a whole file.
_GGML_BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}

_KEY_MODEL = "tokenizer.ggml.model"
_KEY_TOKENS = "tokenizer.ggml.tokens"
_KEY_TYPES = "tokenizer.ggml.token_type"
# Every id that ends a generation: EOS, then end-of-turn and end-of-message
# when the file names them (chat models end a turn on those).
_KEYS_EOS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
             "tokenizer.ggml.eom_token_id")
_KEY_NAME = "general.name"
_KEY_ALIGNMENT = "general.alignment"
_WANTED = {_KEY_MODEL, _KEY_TOKENS, _KEY_TYPES, _KEY_NAME, _KEY_ALIGNMENT, *_KEYS_EOS}


class _Truncated(Exception):
    """The file ended inside a structure; turned into a VocabularyError."""


@dataclass(frozen=True)
class GGUFTokenizer:
    """The tokenizer metadata of one GGUF file, as stored."""
    model: str | None
    tokens: tuple[bytes, ...] | None   # each token's text, UTF-8 as in the file
    token_types: tuple[int, ...] | None
    eos_token_ids: tuple[int, ...]
    name: str | None


class _Reader:
    """Sequential reads from a buffer in the file's byte order."""

    def __init__(self, buffer: Any, byte_order: str) -> None:
        self.buffer = buffer
        self.size = len(buffer)
        self.order = byte_order
        self.pos = 0
        self._u64 = struct.Struct(byte_order + "Q")
        self._u32 = struct.Struct(byte_order + "I")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > self.size:
            raise _Truncated
        data = self.buffer[self.pos:end]
        self.pos = end
        return data

    def u32(self) -> int:
        if self.pos + 4 > self.size:
            raise _Truncated
        (value,) = self._u32.unpack_from(self.buffer, self.pos)
        self.pos += 4
        return value

    def u64(self) -> int:
        if self.pos + 8 > self.size:
            raise _Truncated
        (value,) = self._u64.unpack_from(self.buffer, self.pos)
        self.pos += 8
        return value

    def string(self) -> bytes:
        return self.take(self.u64())

    def scalar(self, value_type: int) -> Any:
        fmt = struct.Struct(self.order + _SCALAR_FORMATS[value_type])
        if self.pos + fmt.size > self.size:
            raise _Truncated
        (value,) = fmt.unpack_from(self.buffer, self.pos)
        self.pos += fmt.size
        return value

    def value(self, value_type: int, keep: bool) -> Any:
        """The next value of ``value_type``; skipped (None) unless ``keep``."""
        if value_type == _STRING:
            return self.string()
        if value_type in _SCALAR_FORMATS:
            return self.scalar(value_type)
        if value_type != _ARRAY:
            raise ValueError(f"unknown value type {value_type}")
        item_type, count = self.u32(), self.u64()
        if item_type == _STRING:
            if not keep:
                for _ in range(count):
                    length = self.u64()
                    self.pos += length
                    if self.pos > self.size:
                        raise _Truncated
                return None
            # The token list: one length-prefixed string per token, read in
            # one loop over the mapped bytes (about 0.2 s for 262k tokens).
            items = []
            buffer, size, unpack, pos = self.buffer, self.size, self._u64.unpack_from, self.pos
            for _ in range(count):
                if pos + 8 > size:
                    raise _Truncated
                (length,) = unpack(buffer, pos)
                pos += 8
                if pos + length > size:
                    raise _Truncated
                items.append(buffer[pos:pos + length])
                pos += length
            self.pos = pos
            return tuple(items)
        if item_type in _SCALAR_FORMATS:
            fmt = self.order + _SCALAR_FORMATS[item_type]
            width = struct.calcsize(fmt)
            data = self.take(width * count)
            return struct.unpack(f"{self.order}{count}{_SCALAR_FORMATS[item_type]}", data) if keep else None
        if item_type == _ARRAY:  # nested arrays occur in no tokenizer key; skip them
            for _ in range(count):
                self.value(_ARRAY, False)
            return None
        raise ValueError(f"unknown array item type {item_type}")


def read_gguf_tokenizer(path: Path) -> GGUFTokenizer:
    """The tokenizer metadata of the GGUF file at ``path`` (checked to be a
    whole GGUF file, tensor data included)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 4:
                raise VocabularyError(f"{str(path)!r} is not a GGUF file: it has only {size} bytes")
            buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise VocabularyError(f"cannot read GGUF file {str(path)!r}: {e.strerror or e}") from e
    try:
        return _parse(buffer, path)
    finally:
        buffer.close()


def _parse(buffer: Any, path: Path) -> GGUFTokenizer:
    origin = repr(str(path))
    if buffer[:4] != GGUF_MAGIC:
        raise VocabularyError(f"{origin} is not a GGUF file (it starts {bytes(buffer[:4])!r}, not b'GGUF')")
    (version,) = struct.unpack_from("<I", buffer, 4) if len(buffer) >= 8 else (None,)
    if version is None:
        raise VocabularyError(f"GGUF file {origin} is truncated: it ends inside the header")
    # A big-endian file has its version bytes swapped: 3 reads as 0x03000000.
    order = "<"
    if version & 0xFFFF == 0:
        order, version = ">", struct.unpack_from(">I", buffer, 4)[0]
    if version not in (2, 3):
        raise VocabularyError(
            f"GGUF file {origin} has format version {version}; versions 2 and 3 are read "
            f"(convert version-1 files with a current llama.cpp)")
    reader = _Reader(buffer, order)
    reader.pos = 8
    values: dict[str, Any] = {}
    try:
        tensor_count, kv_count = reader.u64(), reader.u64()
        for _ in range(kv_count):
            key = reader.string().decode("utf-8", errors="replace")
            value_type = reader.u32()
            values[key] = reader.value(value_type, keep=key in _WANTED)
        data_end = _tensor_data_end(reader, tensor_count, values.get(_KEY_ALIGNMENT))
    except _Truncated:
        raise VocabularyError(
            f"GGUF file {origin} is truncated: it ends at byte {len(buffer):,} inside its "
            f"metadata or tensor table") from None
    except (ValueError, UnicodeDecodeError, struct.error) as e:
        raise VocabularyError(f"GGUF file {origin} is damaged: {e}") from None
    if data_end > len(buffer):
        raise VocabularyError(
            f"GGUF file {origin} is truncated: its tensors need {data_end:,} bytes, "
            f"the file has {len(buffer):,} (an interrupted download?)")
    eos = tuple(v for v in (values.get(k) for k in _KEYS_EOS) if isinstance(v, int))
    name = values.get(_KEY_NAME)
    model = values.get(_KEY_MODEL)
    return GGUFTokenizer(
        model=model.decode("utf-8", errors="replace") if isinstance(model, bytes) else None,
        tokens=values.get(_KEY_TOKENS) if isinstance(values.get(_KEY_TOKENS), tuple) else None,
        token_types=values.get(_KEY_TYPES) if isinstance(values.get(_KEY_TYPES), tuple) else None,
        eos_token_ids=eos,
        name=name.decode("utf-8", errors="replace") if isinstance(name, bytes) else None)


def _tensor_data_end(reader: _Reader, tensor_count: int, alignment: Any) -> int:
    """Where the last tensor's data ends: a file shorter than that was cut."""
    align = alignment if isinstance(alignment, int) and alignment > 0 else _DEFAULT_ALIGNMENT
    end = 0
    for _ in range(tensor_count):
        reader.string()  # name
        dims = [reader.u64() for _ in range(reader.u32())]
        ggml_type, offset = reader.u32(), reader.u64()
        elements = 1
        for d in dims:
            elements *= d
        block, block_bytes = _GGML_BLOCKS.get(ggml_type, (1, 0))  # unknown type: its start at least
        end = max(end, offset + elements // block * block_bytes)
    data_start = -(-reader.pos // align) * align
    return data_start + end if tensor_count else reader.pos


def from_gguf(path: Any, *, eos_token_ids: int | Iterable[int] | None = None,
              name: str | None = None) -> Vocabulary:
    """See :meth:`Vocabulary.from_gguf`."""
    p = existing_file(path, "GGUF file")
    tokenizer = read_gguf_tokenizer(p)
    origin = repr(str(p))
    if tokenizer.model is None or tokenizer.tokens is None or tokenizer.model == "none":
        raise VocabularyError(
            f"GGUF file {origin} carries no tokenizer (no {_KEY_MODEL} and {_KEY_TOKENS} "
            f"metadata): load the vocabulary from the model's tokenizer files instead")
    tokens = _token_bytes(tokenizer, origin)
    if eos_token_ids is None:
        eos_token_ids = [i for i in tokenizer.eos_token_ids if i < len(tokens)]
        if not eos_token_ids:
            raise VocabularyError(
                f"GGUF file {origin} names no EOS token (tokenizer.ggml.eos_token_id); "
                f"pass eos_token_ids= to Vocabulary.from_gguf")
    return Vocabulary(tokens, eos_token_ids, name=name or tokenizer.name or p.stem, source=str(p))


def _token_bytes(tokenizer: GGUFTokenizer, origin: str) -> list[bytes | None]:

    model = tokenizer.model
    if model in ("llama", "t5"):
        # llama's byte tokens are typed BYTE, so the scheme only unescapes spaces.
        scheme = PieceScheme(space_marker="\u2581")
    elif model == "gpt2":
        scheme = PieceScheme(byte_level=True)
    else:
        raise VocabularyError(
            f"GGUF file {origin} has tokenizer model {model!r}; supported: "
            f"{', '.join(TOKENIZER_MODELS)} (a WordPiece or RWKV tokenizer inserts or removes "
            f"text between tokens, or is not supported yet)")
    texts = tokenizer.tokens or ()
    types = tokenizer.token_types
    if types is None:  # llama.cpp reads every token as normal then
        types = (_NORMAL,) * len(texts)
    if len(types) != len(texts):
        raise VocabularyError(
            f"GGUF file {origin} has {len(texts)} tokens but {len(types)} token types")
    out: list[bytes | None] = []
    for i, (raw, kind) in enumerate(zip(texts, types)):
        if kind == _NORMAL:
            try:
                out.append(scheme.to_bytes(raw.decode("utf-8")))
            except UnicodeDecodeError:
                raise VocabularyError(f"GGUF file {origin}: token {i} is not UTF-8 text: {raw!r}") from None
        elif kind == _USER_DEFINED:
            out.append(raw)
        elif kind == _BYTE:
            m = BYTE_PIECE.fullmatch(raw.decode("utf-8", errors="replace"))
            if m is None:
                raise VocabularyError(f"GGUF file {origin}: byte token {i} is {raw!r}, not <0xNN>")
            out.append(bytes([int(m.group(1), 16)]))
        elif kind in (_UNDEFINED, _UNKNOWN, _CONTROL, _UNUSED):
            out.append(None)
        else:
            raise VocabularyError(f"GGUF file {origin}: token {i} has unknown token type {kind}")
    return out
