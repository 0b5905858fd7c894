"""Mistral tekken ``.json`` files: tiktoken ranks behind a block of special ids.

Imports no tokenizer library itself; the encoder is tiktoken's
(:class:`~tokendfa.vocab.tiktoken.TiktokenEncoder`), built on first use.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError
from ._files import existing_file, read_file
from .tiktoken import TiktokenEncoder
from .vocabulary import Vocabulary

__all__ = ["from_tekken"]


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
    p = existing_file(path, "tekken file")
    try:
        data = json.loads(read_file(p, "tekken file"))
    except ValueError as e:
        raise VocabularyError(f"{str(p)!r} is not a Mistral tekken file: invalid JSON: {e}") from None
    return tekken_vocabulary(data, p, name=name or p.stem, source=source or str(p))


def tekken_vocabulary(data: Any, p: Path, *, name: str, source: str) -> Vocabulary:
    """The vocabulary of a tekken file's parsed JSON (``p`` names it in errors)."""
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
                      encoder=TiktokenEncoder(name, pattern, tokens, id_offset=num_special))
