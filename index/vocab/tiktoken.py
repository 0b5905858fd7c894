"""tiktoken files (cl100k, Qwen) and tiktoken's own encoder.

A ``.tiktoken`` file is one ``base64(token) rank`` per line, and the rank is
the token id. Special tokens are not in the file at all: their ids come from
the model's documentation, and they are ``None`` in the vocabulary.

The file is read here directly (going through transformers' tiktoken
converter takes tens of seconds); the ``tiktoken`` library is imported only
when the encoder is first used, to give ``Vocabulary.encode`` the model's own
segmentation. (This module's name is the library's: inside the package,
``import tiktoken`` is an absolute import and finds the library.)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..analysis import limits
from ..analysis.errors import VocabularyError, import_optional
from ._files import existing_file, read_file
from .vocabulary import Vocabulary

__all__ = ["from_tiktoken"]


def parse_tiktoken(data: bytes, origin: str) -> list[bytes | None]:
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


class TiktokenEncoder:
    """tiktoken's own encoding for a rank table that sits at ``id_offset``.

    The ``tiktoken.Encoding`` is built on first use (a few hundred ms for a
    large vocabulary), so loading a vocabulary only to build an index never
    pays for it. Pickles without the built encoding.
    """

    def __init__(self, name: str, pattern: str, ranks: Sequence[bytes | None], id_offset: int = 0):
        self._name = name
        self._pattern = pattern
        # a tuple: a tuple of bytes leaves the cyclic collector's lists at its
        # first collection, a list is visited by every full one (see
        # Vocabulary.sorted_spellings)
        self._ranks = tuple(ranks)
        self._id_offset = id_offset
        self._encoding: Any = None

    def __call__(self, text: str) -> list[int]:
        if self._encoding is None:
            with limits.excluded():   # the process's encoder, made once (~0.15 s)
                self._encoding = self._build()
        offset = self._id_offset
        return [r + offset for r in self._encoding.encode_ordinary(text)]

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``[self(text) for text in texts]`` without a call of this object a text."""
        if self._encoding is None:
            with limits.excluded():   # the process's encoder, made once (~0.15 s)
                self._encoding = self._build()
        encode, offset = self._encoding.encode_ordinary, self._id_offset
        if offset:
            return [[r + offset for r in encode(text)] for text in texts]
        return [encode(text) for text in texts]

    def _build(self) -> Any:
        tiktoken = import_optional("tiktoken", extra="build",
                                   needed_for=f"encoding text with the tiktoken vocabulary {self._name!r}")
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
    """See :meth:`Vocabulary.from_tiktoken`."""
    p = existing_file(path, "tiktoken file")
    ranks = parse_tiktoken(read_file(p, "tiktoken file"), repr(str(p)))
    return tiktoken_vocabulary(ranks, special_tokens=dict(special_tokens or {}),
                               eos_token_ids=eos_token_ids, pattern=pattern,
                               name=name or p.stem, source=str(p))


def tiktoken_vocabulary(ranks: list[bytes | None], *, special_tokens: dict[str, int],
                        eos_token_ids: int | Iterable[int] | None, pattern: str | None,
                        name: str, source: str | None) -> Vocabulary:
    """The vocabulary of a rank table, with the special tokens' ids after
    (or between) the ranks; ``pattern`` (the pre-tokenizer regex) gives it
    tiktoken's encoder."""
    for token, i in special_tokens.items():
        if i < len(ranks) and ranks[i] is not None:
            raise VocabularyError(
                f"special token {token!r} has id {i}, which is already the rank of {ranks[i]!r}")
    size = max([len(ranks), *(i + 1 for i in special_tokens.values())])
    tokens = ranks + [None] * (size - len(ranks))
    if eos_token_ids is None:
        eos_token_ids = _guess_eos(special_tokens, name)
    encoder = TiktokenEncoder(name, pattern, ranks) if pattern is not None else None
    return Vocabulary(tokens, eos_token_ids, name=name, source=source, encoder=encoder)


def _guess_eos(special_tokens: dict[str, int], name: str) -> int:
    if "<|endoftext|>" in special_tokens:
        return special_tokens["<|endoftext|>"]
    if len(special_tokens) == 1:
        return next(iter(special_tokens.values()))
    known = ", ".join(sorted(special_tokens)) or "none"
    raise VocabularyError(
        f"cannot tell the EOS id of tiktoken vocabulary {name!r} (a .tiktoken file lists no "
        f"special tokens; special tokens given: {known}); pass eos_token_ids= and "
        f"special_tokens= to Vocabulary.from_tiktoken")
