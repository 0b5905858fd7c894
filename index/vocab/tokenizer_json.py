"""A saved Hugging Face tokenizer folder read from its JSON files, without
transformers.

Loading a tokenizer with transformers to learn its vocabulary costs seconds
(Gemma 3, 262,144 tokens: 3.4 s of an 8.3 s ``from_pretrained``), most of it
spent on what the vocabulary does not need (merges, the normalizer, the
tokenizer class). The vocabulary itself is in ``tokenizer.json``: the
model's ``vocab`` (piece -> id), the ``added_tokens`` (content, id, special)
and the ``decoder``, which says how pieces are written
(:func:`tokendfa.vocab.huggingface.piece_scheme`). The special tokens the
tokenizer names (``eos_token``, ``pad_token``, ...) are in
``tokenizer_config.json`` and ``special_tokens_map.json``.

:func:`read_tokenizer_folder` reads a folder this way only where the result
is known to be the one transformers gives (a BPE model, a decoder of a known
kind, every named special token found, no legacy ``added_tokens.json``, no
disagreement between the files), and otherwise answers ``None`` with the
reason, so that the caller loads the tokenizer with transformers instead.
The tests compare both ways on every tokenizer available offline.

The tokenizer's own encoding (:meth:`Vocabulary.encode`) comes from
``tokenizers.Tokenizer.from_file`` on the same ``tokenizer.json``, loaded on
the first call (:class:`TokenizerFileEncoder`), so reading the vocabulary
never pays for the merges.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis import limits
from ..analysis.errors import VocabularyError, import_optional
from ._files import read_file
from .huggingface import PieceScheme, piece_scheme

__all__ = ["TokenizerFolder", "read_tokenizer_folder", "TokenizerFileEncoder", "FOLDER_FILES"]

# The files of a saved tokenizer folder that decide its vocabulary and EOS.
FOLDER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                "generation_config.json", "added_tokens.json", "tokenizer.model",
                "vocab.json", "merges.txt")

# Named special tokens; transformers counts each among ``all_special_ids``.
_NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                  "cls_token", "mask_token")
_SPECIAL_LISTS = ("additional_special_tokens", "extra_special_tokens")
_DECODER_KINDS = {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"}


@dataclass(frozen=True)
class TokenizerFolder:
    """What ``tokenizer.json`` and its companions say of the vocabulary."""
    tokens: list[bytes | None]   # special ids already None
    eos_token_id: int | None     # the tokenizer's EOS (transformers' ``eos_token_id``)


class _Unsupported(Exception):
    """A folder this reader does not take: the caller uses transformers."""


def _load_json(p: Path) -> Any:
    try:
        return json.loads(read_file(p, "tokenizer file"))
    except (ValueError, UnicodeDecodeError) as e:
        raise _Unsupported(f"{p.name} is not JSON: {e}") from None


def _content(value: Any) -> str | None:
    """A special token as the configuration writes it: a string, or an
    AddedToken's dictionary."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise _Unsupported(f"special token written as {type(value).__name__}")


def _named_special(config: dict[str, Any], special_map: dict[str, Any]) -> dict[str, list[str]]:
    """Each named special token (and list), taken from the tokenizer
    configuration and the special tokens map, which must agree."""
    named: dict[str, list[str]] = {}
    for key in (*_NAMED_SPECIAL, *_SPECIAL_LISTS):
        values = []
        for source in (config, special_map):
            if key not in source or source[key] is None:
                continue
            value = source[key]
            if key in _SPECIAL_LISTS:
                if isinstance(value, dict):  # a name -> token mapping
                    value = list(value.values())
                if not isinstance(value, list):
                    raise _Unsupported(f"{key} is {type(value).__name__}")
                values.append([c for c in map(_content, value) if c is not None])
            else:
                content = _content(value)
                values.append([] if content is None else [content])
        if len(values) == 2 and values[0] != values[1]:
            raise _Unsupported(f"tokenizer_config.json and special_tokens_map.json disagree on {key}")
        if values:
            named[key] = values[0]
    return named


def read_tokenizer_folder(directory: Path) -> TokenizerFolder | str:
    """The vocabulary of the saved tokenizer in ``directory``, or a string
    saying why this reader leaves it to transformers."""
    try:
        return _read(directory)
    except _Unsupported as e:
        return str(e)


def _read(directory: Path) -> TokenizerFolder:
    if not (directory / "tokenizer.json").is_file():
        raise _Unsupported("no tokenizer.json")
    if (directory / "added_tokens.json").exists():
        raise _Unsupported("a legacy added_tokens.json")
    config = _load_json(directory / "tokenizer_config.json") \
        if (directory / "tokenizer_config.json").is_file() else {}
    special_map = _load_json(directory / "special_tokens_map.json") \
        if (directory / "special_tokens_map.json").is_file() else {}
    if not isinstance(config, dict) or not isinstance(special_map, dict):
        raise _Unsupported("a configuration that is not a JSON object")
    document = _load_json(directory / "tokenizer.json")
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise _Unsupported("not a BPE model")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(type(i) is int for i in vocab.values()):
        raise _Unsupported("a BPE vocab that is not piece -> id")
    decoder = document.get("decoder")
    kinds = {step.get("type") for step in _flat(decoder)}
    if not kinds or not kinds <= _DECODER_KINDS:
        raise _Unsupported(f"decoder {sorted(map(str, kinds))}")
    try:
        scheme: PieceScheme = piece_scheme(decoder, vocab)
    except VocabularyError as e:
        raise _Unsupported(str(e)) from None

    added = document.get("added_tokens") or []
    if not isinstance(added, list):
        raise _Unsupported("added_tokens is not a list")
    added_by_id: dict[int, tuple[str, bool]] = {}
    for entry in added:
        if not (isinstance(entry, dict) and type(entry.get("id")) is int and entry["id"] >= 0
                and isinstance(entry.get("content"), str) and isinstance(entry.get("special"), bool)):
            raise _Unsupported("an added token without id, content and special")
        added_by_id[entry["id"]] = (entry["content"], entry["special"])
    declared = config.get("added_tokens_decoder")
    if declared is not None:
        if not isinstance(declared, dict):
            raise _Unsupported("added_tokens_decoder is not an object")
        for key, entry in declared.items():
            if not (isinstance(entry, dict) and str(key).isdigit()
                    and added_by_id.get(int(key)) == (entry.get("content"), entry.get("special"))):
                raise _Unsupported(f"added_tokens_decoder entry {key} differs from tokenizer.json")

    ids = list(vocab.values())
    if ids and min(ids) < 0:
        raise _Unsupported("a negative id")
    pieces = list(vocab)
    # transformers' len(tokenizer): the distinct pieces, added ones included;
    # wider when the ids leave holes.
    size = max(len(set(pieces) | {c for c, _ in added_by_id.values()}),
               max(ids, default=-1) + 1, max(added_by_id, default=-1) + 1)
    tokens: list[bytes | None] = [None] * size
    converted = scheme.all_to_bytes(pieces)
    if ids == list(range(len(ids))):
        tokens[:len(ids)] = converted
    else:
        for i, b in zip(ids, converted):
            tokens[i] = b

    # Named special tokens resolve as transformers' convert_tokens_to_ids
    # does: added tokens first, then the model's vocab.
    by_content = {c: i for i, (c, _) in sorted(added_by_id.items(), reverse=True)}
    special_ids = {i for i, (_, special) in added_by_id.items() if special}
    named = _named_special(config, special_map)
    eos_id = None
    for key, contents in named.items():
        for content in contents:
            i = by_content.get(content, vocab.get(content))
            if i is None:
                raise _Unsupported(f"{key} {content!r} is not in the vocabulary")
            special_ids.add(i)
            if key == "eos_token":
                eos_id = i
    for i, (content, special) in added_by_id.items():
        if not special and i not in special_ids:
            tokens[i] = content.encode("utf-8")
    for i in special_ids:
        tokens[i] = None
    return TokenizerFolder(tokens, eos_id)


def _flat(node: Any) -> list[dict[str, Any]]:
    if node is None:
        return []
    if not isinstance(node, dict):
        raise _Unsupported("a decoder that is not an object")
    if node.get("type") == "Sequence":
        children = node.get("decoders")
        if not isinstance(children, list):
            raise _Unsupported("a Sequence decoder without decoders")
        return [s for child in children for s in _flat(child)]
    return [node]


class TokenizerFileEncoder:
    """The tokenizer's own encoding, without BOS/EOS: ``tokenizers``'
    ``Tokenizer.from_file`` on a ``tokenizer.json``, loaded on the first
    call (Gemma 3's: 0.7 s) rather than when the vocabulary is read, and
    pickled as its path."""

    def __init__(self, path: str) -> None:
        self._path = str(path)
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        # the process's tokenizer, made once: outside a build's time limit, the wait
        # for another thread's load (Vocabulary.prepare's warm-up) included
        with limits.excluded(), self._lock:
            if self._tokenizer is None:
                tokenizers = import_optional("tokenizers", extra="hf",
                                             needed_for="encoding text with a Hugging Face tokenizer")
                try:
                    self._tokenizer = tokenizers.Tokenizer.from_file(self._path)
                except Exception as e:  # noqa: BLE001 - the Rust library raises anything
                    raise VocabularyError(
                        f"tokenizers could not load {self._path!r}: {type(e).__name__}: "
                        f"{str(e).strip()[:300]}") from e
            return self._tokenizer

    def __call__(self, text: str) -> list[int]:
        tokenizer = self._tokenizer or self._load()
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    def __reduce__(self) -> tuple:
        return (TokenizerFileEncoder, (self._path,))
