"""SentencePiece ``.model`` files, BPE or Unigram, and SentencePiece's encoder.

How pieces are written: ``▁`` stands for a space (when the model escapes
whitespace), ``<0xNN>`` pieces are raw bytes (byte fallback), and control,
unknown and unused pieces are never text. Unigram models (T5 style) have no
byte fallback, so some bytes cannot be spelled at all.

The model is read with the ``ModelProto`` message the ``sentencepiece``
package ships (``sentencepiece_model_pb2``, which needs ``protobuf``), only to
give the processor an identity normalizer (see :func:`exact_model`).
Both libraries are imported inside the functions that use them. (This
module's name is the library's: inside the package, ``import sentencepiece``
is an absolute import and finds the library.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..analysis import limits
from ..analysis.errors import VocabularyError, import_optional
from ._files import existing_file, read_file
from .vocabulary import Vocabulary

__all__ = ["from_sentencepiece"]

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_NEEDED_FOR = "reading a SentencePiece model"


def _library() -> Any:
    return import_optional("sentencepiece", extra="build", needed_for=_NEEDED_FOR)


def _model_proto() -> Any:
    """The ``ModelProto`` class of the installed sentencepiece. Its generated
    code checks the protobuf runtime: sentencepiece 0.2.3's needs protobuf
    >= 7.36.1 (older releases' code loads with protobuf 3.20 up to 7.x)."""
    _library()
    import_optional("google.protobuf", extra="build", package="protobuf", needed_for=_NEEDED_FOR)
    return import_optional("sentencepiece.sentencepiece_model_pb2", extra="build",
                           package="sentencepiece", needed_for=_NEEDED_FOR).ModelProto


def exact_model(model: bytes, origin: str = "the model") -> tuple[bytes, bool]:
    """A copy of the model that encodes text exactly, and whether ``▁`` in
    pieces stands for a space (the model's ``escape_whitespaces``).

    By default SentencePiece does not encode the text it is given: it adds a
    dummy-prefix space (``"hi"`` becomes ``"▁hi"``), may squeeze runs of
    whitespace, and may apply NFKC (T5's ``nmt_nfkc`` also turns newlines
    into spaces). All three live in the model's ``normalizer_spec``, so the
    copy gets an identity normalizer: ``add_dummy_prefix`` and
    ``remove_extra_whitespaces`` off, no precompiled character map and no
    rule table. Pieces and scores are untouched, so the segmentation is still
    the model's own; only the text is no longer rewritten first.
    ``self_test_data`` is dropped because SentencePiece re-checks it on load,
    and its expectations assume the original normalizer. Newer sentencepiece
    releases no longer declare that field, so it is an unknown field there:
    unknown fields are dropped too, which changes nothing else, because the
    processor reads the model with the same message definition.
    """
    proto = _model_proto()()
    from google.protobuf.message import DecodeError  # protobuf imports: _model_proto checked

    try:
        proto.ParseFromString(model)
    except DecodeError as e:
        raise VocabularyError(f"{origin} is not a SentencePiece model: {e}") from None
    spec = proto.normalizer_spec
    escape = spec.escape_whitespaces  # True when unset: the field's default
    spec.name = "identity"
    spec.ClearField("precompiled_charsmap")
    spec.ClearField("normalization_rule_tsv")
    spec.add_dummy_prefix = False
    spec.remove_extra_whitespaces = False
    if "self_test_data" in proto.DESCRIPTOR.fields_by_name:
        proto.ClearField("self_test_data")
    proto.DiscardUnknownFields()
    return proto.SerializeToString(), escape


def load_processor(model: bytes, origin: str) -> Any:
    """A ``SentencePieceProcessor`` for the serialized model."""
    processor = _library().SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except Exception as e:  # sentencepiece raises RuntimeError/OSError with C++ text
        raise VocabularyError(f"{origin} is not a SentencePiece model: {e}") from None
    if processor.GetPieceSize() == 0:
        raise VocabularyError(f"{origin} is not a SentencePiece model: it has no pieces")
    return processor


def processor_tokens(processor: Any, escape_whitespaces: bool = True) -> list[bytes | None]:
    """Token bytes of every piece of a loaded processor."""
    tokens: list[bytes | None] = []
    for i in range(processor.GetPieceSize()):
        if processor.IsControl(i) or processor.IsUnknown(i) or processor.IsUnused(i):
            tokens.append(None)
            continue
        piece = processor.IdToPiece(i)
        if processor.IsByte(i):
            m = BYTE_PIECE.fullmatch(piece)
            if m is None:
                raise VocabularyError(f"SentencePiece byte piece {i} is {piece!r}, not <0xNN>")
            tokens.append(bytes([int(m.group(1), 16)]))
        elif escape_whitespaces:
            tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
        else:
            tokens.append(piece.encode("utf-8"))
    return tokens


class SentencePieceEncoder:
    """SentencePiece's own segmentation of the exact text (see
    :func:`exact_model`). Pickles as the model bytes."""

    def __init__(self, model: bytes, processor: Any = None):
        self._model = model
        self._processor = processor

    def __call__(self, text: str) -> list[int]:
        if self._processor is None:
            with limits.excluded():   # the process's processor (once unpickled), made once
                self._processor = load_processor(self._model, "model")
        return self._processor.EncodeAsIds(text)

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self._model}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model"])


def from_sentencepiece(path: Any, *, name: str | None = None,
                       eos_token_ids: int | Iterable[int] | None = None) -> Vocabulary:
    """See :meth:`Vocabulary.from_sentencepiece`."""
    p = existing_file(path, "SentencePiece model")
    return sentencepiece_vocabulary(read_file(p, "SentencePiece model"), origin=repr(str(p)),
                                    name=name or p.name.split(".")[0], source=str(p),
                                    eos_token_ids=eos_token_ids)


def sentencepiece_vocabulary(model: bytes, *, origin: str, name: str, source: str | None,
                             eos_token_ids: int | Iterable[int] | None) -> Vocabulary:
    """The vocabulary of a serialized model (``origin`` names it in errors)."""
    exact, escape = exact_model(model, origin)
    processor = load_processor(exact, origin)
    tokens = processor_tokens(processor, escape)
    if eos_token_ids is None:
        eos_token_ids = processor.eos_id()
        if eos_token_ids < 0:
            raise VocabularyError(f"SentencePiece model {origin} defines no EOS piece; pass eos_token_ids=")
    return Vocabulary(tokens, eos_token_ids, name=name, source=source,
                      encoder=SentencePieceEncoder(exact, processor))
