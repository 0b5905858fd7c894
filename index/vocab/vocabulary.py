"""The vocabulary: what text each token id stands for.

A language model emits token ids; a pattern constrains bytes. The bridge
between the two is a table from every token id to the exact bytes that token
contributes to the output, and this module holds that table and nothing else.

Three facts shape it:

* Some ids are never text: EOS, BOS, chat markers, control pieces, unused
  padding ids. They are stored as ``None``, never as ``b""``. An empty token
  would be a way to advance the model without advancing the text, and the
  index must not offer one, so ``b""`` is normalised to ``None`` on the way in.
* Token bytes need not be valid UTF-8 on their own (byte-level BPE splits
  multi-byte characters, SentencePiece has ``<0xNN>`` byte pieces), so the
  table is bytes, not str.
* Several ids may spell the same bytes (SentencePiece's ``▁`` and ``<0x20>``
  are both a space). Nothing here assumes bytes identify a token.

Turning a tokenizer's own representation (``Ġ``, ``▁``, base64 ranks, added
tokens) into this table is the job of the adapter modules beside this one
(:mod:`tokendfa.vocab.tiktoken`, ``tekken``, ``sentencepiece``,
``huggingface``, ``builtin``); this module imports only numpy and the
standard library, so loading a prebuilt index never pulls in transformers,
sentencepiece or tiktoken. The constructors that need them
(``from_pretrained``, ``builtin``, ...) import the adapter module when they
are called.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..analysis import limits
from ..analysis.errors import VocabularyError

__all__ = ["Vocabulary", "register_preparer"]

# Bumping this changes every fingerprint, so do it only when the hashed
# layout below changes.
_FINGERPRINT_LABEL = b"tokendfa-vocabulary-v1\x00"
# Length recorded for a token that is not text; no real token has it, which
# keeps ``None`` distinct from ``b""`` in the hash even if the normalisation
# of ``b""`` ever changed.
_NO_TEXT_LENGTH = -1

Encoder = Callable[[str], "list[int]"]
_PLAIN_TOKEN_TYPES = {bytes, type(None)}

# What Vocabulary.prepare() calls besides its own tables: the per-vocabulary
# tables of the layers above (the lazy engine's), which this module cannot
# import. Each layer registers its preparer (register_preparer).
_PREPARERS: "list[Callable[..., Any]]" = []


def _outside_time_limit(made: str):
    """A per-vocabulary table's method (cached in attribute ``made``), whose
    first computation is not counted against a build's time limit
    (:func:`tokendfa.analysis.limits.excluded`): it is the process's, made once
    for every later build, not the request's."""
    def wrap(method):
        def computed(self, *args, **kwargs):
            if getattr(self, made) is not None:
                return method(self, *args, **kwargs)
            with limits.excluded():
                return method(self, *args, **kwargs)
        computed.__name__, computed.__qualname__, computed.__doc__ = (
            method.__name__, method.__qualname__, method.__doc__)
        return computed
    return wrap


def register_preparer(prepare: "Callable[..., Any]") -> None:
    """Have :meth:`Vocabulary.prepare` call ``prepare(vocabulary, eager=...)`` too (once
    per function, in the order registered): how a layer above this one has
    its per-vocabulary tables made at start-up instead of inside the first
    build that needs them. The package registers the builder's
    (:func:`tokendfa.runtime.index.prepare_builds`)."""
    if prepare not in _PREPARERS:
        _PREPARERS.append(prepare)


class Vocabulary:
    """Token id -> exact bytes, plus the EOS ids. Immutable.

    ``tokens[i]`` is the bytes token ``i`` adds to the text, or ``None`` for
    ids that are never text (special, control and unused ids). EOS ids are
    always ``None``: ending the generation is not text.

    # Example

    >>> v = Vocabulary([b"a", b"b", b"ab", None], eos_token_ids=3)
    >>> v.encode("abba")
    [2, 1, 0]
    >>> v.decode([2, 1, 0, 3])
    b'abba'

    # Errors

    :class:`~tokendfa.analysis.errors.VocabularyError` if a token is not bytes or
    ``None``, if there is no EOS id, or if an EOS id is out of range.
    """

    __slots__ = ("_tokens", "_eos_token_ids", "_name", "_source", "_encoder",
                 "_fingerprint", "_byte_matrix", "_byte_columns", "_sorted_spellings", "_sorted_order",
                 "_ids_by_bytes", "_token_lengths", "_derived")

    def __init__(self, tokens: Sequence[bytes | None], eos_token_ids: int | Iterable[int], *,
                 name: str = "custom", source: str | None = None,
                 encoder: Encoder | None = None) -> None:
        eos = _normalise_eos(eos_token_ids, len(tokens))
        table = list(tokens)
        if set(map(type, table)) <= _PLAIN_TOKEN_TYPES:
            # The usual case, checked by C loops (a Python call per token
            # took 0.36 s for Gemma's 262,144 on the loaded 2-core machine).
            if b"" in table:
                table = [t or None for t in table]
        else:
            table = [_normalise_token(i, t) for i, t in enumerate(table)]
        for i in eos:
            table[i] = None
        self._tokens: tuple[bytes | None, ...] = tuple(table)
        self._eos_token_ids: tuple[int, ...] = eos
        self._name = str(name)
        self._source = None if source is None else str(source)
        self._encoder = encoder
        self._fingerprint: str | None = None
        self._byte_matrix: tuple[np.ndarray, np.ndarray] | None = None
        self._byte_columns = None
        self._sorted_spellings: tuple[tuple[bytes, ...], np.ndarray] | None = None
        self._sorted_order: np.ndarray | None = None   # adopted, checked on first use
        self._ids_by_bytes: dict[bytes, tuple[int, ...]] | None = None
        self._token_lengths: tuple[int, ...] | None = None
        # tables other modules derive from the tokens, computed once (see tokendfa.lazy)
        self._derived: dict[str, Any] = {}

    # --- what it is ------------------------------------------------------

    @property
    def tokens(self) -> tuple[bytes | None, ...]:
        return self._tokens

    @property
    def size(self) -> int:
        """Number of token ids, text or not (the model's output width)."""
        return len(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every id that ends the generation, the preferred one first."""
        return self._eos_token_ids

    @property
    def eos_token_id(self) -> int:
        return self._eos_token_ids[0]

    @property
    def name(self) -> str:
        return self._name

    @property
    def encoder(self) -> Encoder | None:
        """The tokenizer's own encoding that :meth:`encode` tries first, or
        ``None``."""
        return self._encoder

    @property
    def source(self) -> str | None:
        """How to load this vocabulary again with :meth:`from_spec`:
        ``"builtin:<name>"``, an absolute path, or ``None`` when it was built
        in memory. A hint for humans and caches; :attr:`fingerprint` is the
        identity."""
        return self._source

    @property
    @_outside_time_limit("_fingerprint")
    def fingerprint(self) -> str:
        """Hex SHA-256 of the size, the EOS ids and every token's bytes.

        Two vocabularies with the same fingerprint behave identically for
        indexing, whatever their name or source. The hashed layout is a label,
        then little-endian u64 size, u64 EOS count, the EOS ids as u64, one
        i64 length per token (-1 for ``None``), then all token bytes in id
        order. The length table in front of the bytes is what length-prefixing
        each token would give, without a Python-level loop per token.
        """
        if self._fingerprint is None:
            lengths = np.fromiter(
                (_NO_TEXT_LENGTH if t is None else len(t) for t in self._tokens),
                dtype="<i8", count=len(self._tokens))
            h = hashlib.sha256(_FINGERPRINT_LABEL)
            h.update(struct.pack("<QQ", len(self._tokens), len(self._eos_token_ids)))
            h.update(np.asarray(self._eos_token_ids, dtype="<u8").tobytes())
            h.update(lengths.tobytes())
            h.update(b"".join(t for t in self._tokens if t is not None))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def adopt_fingerprint(self, fingerprint: str) -> None:
        """Take :attr:`fingerprint` as computed elsewhere from the same tokens
        and EOS ids (the vocabulary store records it with them) instead of
        hashing every token again."""
        if self._fingerprint is None:
            self._fingerprint = str(fingerprint)

    # --- array view ------------------------------------------------------

    @_outside_time_limit("_byte_matrix")
    def byte_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(bytes, lengths)``: a ``uint8 [V, Lmax]`` matrix with token ``i``'s
        bytes left-aligned in row ``i`` and zero padding, and ``int32 [V]``
        lengths (0 for ``None`` tokens, so padding is never mistaken for a
        ``\\x00`` byte). ``Lmax`` is at least 1.

        Computed once and cached; both arrays are read-only because every
        caller shares them.
        """
        if self._byte_matrix is None:
            lengths = np.fromiter((0 if t is None else len(t) for t in self._tokens),
                                  dtype=np.int32, count=len(self._tokens))
            width = max(int(lengths.max(initial=0)), 1)
            matrix = np.zeros((len(self._tokens), width), dtype=np.uint8)
            flat = np.frombuffer(b"".join(t for t in self._tokens if t is not None),
                                 dtype=np.uint8)
            if flat.size:
                # Scatter every byte to (its token's row, its offset in the token).
                rows = np.repeat(np.arange(len(self._tokens)), lengths)
                starts = np.cumsum(lengths) - lengths
                cols = np.arange(flat.size) - np.repeat(starts, lengths)
                matrix[rows, cols] = flat
            matrix.setflags(write=False)
            lengths.setflags(write=False)
            self._byte_matrix = (matrix, lengths)
        return self._byte_matrix

    @_outside_time_limit("_sorted_spellings")
    def sorted_spellings(self) -> tuple[tuple[bytes, ...], np.ndarray]:
        """Every spelled token's bytes in sorted order, with their ids
        (``int64``) in the same order: prefix searches by bisection.
        Computed once and cached.

        A tuple, like :attr:`tokens`: a tuple of bytes leaves the cyclic
        collector's lists at its first collection, where a list of them is
        visited by every full collection (Qwen's 151,643 token objects: a
        cache miss each, two lists of them ~20 ms of a ~35 ms full
        collection on the shared 2-core machine)."""
        if self._sorted_spellings is None:
            tokens = self._tokens
            adopted, self._sorted_order = self._sorted_order, None
            if adopted is not None:
                self._sorted_spellings = _checked_order(tokens, adopted)
        if self._sorted_spellings is None:
            # A stable sort of the ids by their bytes: equal spellings keep
            # id order. Sorting ids keyed by their bytes took 0.43 s for
            # Gemma's 262,144 where sorting (bytes, id) pairs took 0.70 s.
            spelled = [i for i, t in enumerate(tokens) if t is not None]
            spelled.sort(key=tokens.__getitem__)
            ids = np.array(spelled, dtype=np.int64)
            ids.setflags(write=False)
            self._sorted_spellings = (tuple(map(tokens.__getitem__, spelled)), ids)
        return self._sorted_spellings

    def adopt_sorted_order(self, ids: np.ndarray) -> None:
        """Take the ids of :meth:`sorted_spellings` as computed elsewhere (the
        vocabulary store, :mod:`tokendfa.vocab.stored`) instead of sorting
        every token again. They are checked when first used, not here (only
        eager builds use them, and the check makes a pair per token: 0.3 s
        of a 0.9 s load of Gemma 3's 262,144 tokens); ids that are not the
        sorted spelled tokens are dropped then, and the tokens sorted."""
        if self._sorted_spellings is None:
            self._sorted_order = ids

    def adopt_byte_columns(self, columns: "ByteColumns", lengths: np.ndarray) -> None:
        """Take :meth:`byte_columns` (and the :meth:`byte_matrix` it holds,
        with the token ``lengths``) as made elsewhere (the lazy engine's
        tables kept in the cache folder, :mod:`tokendfa.lazy.table_store`)
        instead of making them again."""
        if self._byte_columns is None:
            if columns.matrix.shape[0] != len(self._tokens) or lengths.shape != (len(self._tokens),):
                raise VocabularyError("byte columns of another vocabulary's size")
            self._byte_matrix = (columns.matrix, lengths)
            self._byte_columns = columns

    def adopt_derived(self, key: str, value: Any) -> None:
        """Take :meth:`derived` ``key`` as made elsewhere (see
        :meth:`adopt_byte_columns`), unless it is made already."""
        self._derived.setdefault(key, value)

    def prepare(self, *, eager: bool = True) -> "Vocabulary":
        """Compute every per-vocabulary table a build uses (column layout,
        sorted spellings, the tokenizer's encoder, and through the
        registered preparers (:func:`register_preparer`) the lazy engine's
        tables, and its walk plans for the contexts common to JSON, made by
        walking a few built-in schemas and instances,
        :mod:`tokendfa.lazy.warmup`) now rather than during the first build;
        a server does this once at start-up, and its first schema then costs
        what its tenth does. The warm-up adds ~0.085 s on Qwen2.5's vocabulary
        (~0.015 s of it the plans of declared keys' prefixes in open objects,
        ~5 MB) and ~0.1 s on Gemma 3's (measured before those), and ~25-35 MB of plans, within the plan
        caches' bounds.

        ``eager=False`` makes only what lazy indexes use: not the encoder
        (canonical tokenizations of forced text, for eager builds) nor the
        eager build's trie of the spellings. A server of lazy indexes (the
        vLLM processor) saves most of a second on Gemma 3's 262,144 tokens
        read from ``tokenizer.json``, whose encoder is loaded on first use."""
        warm_up = _EncoderWarmUp(self._encoder) if eager and self._encoder is not None else None
        self.byte_columns()
        self.byte_occurrences()
        self.sorted_spellings()
        if warm_up is not None:
            warm_up.join()  # before the preparers, which may encode: never two encodes at once
        for prepare in list(_PREPARERS):
            prepare(self, eager=eager)
        return self

    @_outside_time_limit("_byte_columns")
    def byte_columns(self) -> "ByteColumns":
        """The bytes in column layout, longest tokens first
        (:class:`tokendfa.analysis.signatures.ByteColumns`); computed once and cached."""
        if self._byte_columns is None:
            from ..analysis.signatures import byte_columns

            self._byte_columns = byte_columns(*self.byte_matrix())
        return self._byte_columns

    def byte_occurrences(self) -> "ByteOccurrences":
        """Which tokens hold each byte value
        (:class:`tokendfa.analysis.signatures.ByteOccurrences`), so a build
        drops the tokens with a dead byte without reading every token;
        computed once and cached."""
        from ..analysis.signatures import byte_occurrences

        return self.derived("byte-occurrences", lambda v: byte_occurrences(v.byte_columns()))

    def derived(self, key: str, make: "Callable[[Vocabulary], Any]") -> Any:
        """``make(self)``, computed on the first call for ``key`` and kept: the
        per-vocabulary tables of other modules (:mod:`tokendfa.lazy`)."""
        found = self._derived.get(key)
        if found is None:
            with limits.excluded():   # the process's table, not the request's (see byte_matrix)
                found = self._derived[key] = make(self)
        return found

    def has_derived(self, key: str) -> bool:
        """Whether :meth:`derived` has made ``key`` already."""
        return key in self._derived

    # --- lookups ---------------------------------------------------------

    def ids_for_bytes(self, b: bytes) -> list[int]:
        """All ids whose text is exactly ``b``, in increasing order.

        More than one is common: SentencePiece has both ``▁`` and ``<0x20>``
        for a space, and an added token may repeat a regular one.
        """
        return list(self._bytes_index().get(bytes(b), ()))

    def decode(self, ids: Iterable[int]) -> bytes:
        """The bytes the ids spell. Ids that are not text (EOS, special
        tokens) contribute nothing, as a detokenizer skipping special tokens
        would do."""
        out = []
        size = len(self._tokens)
        for i in ids:
            i = int(i)
            if not 0 <= i < size:
                raise VocabularyError(
                    f"token id {i} is out of range for vocabulary {self._name!r} of size {size}")
            t = self._tokens[i]
            if t is not None:
                out.append(t)
        return b"".join(out)

    def encode(self, text: str) -> list[int]:
        """Token ids whose bytes concatenate to exactly ``text.encode("utf-8")``.

        When the tokenizer adapter supplied an encoder, this is the
        tokenizer's own encoding (what the model saw in training). Its result
        is checked: if it does not reproduce the bytes exactly (a tokenizer
        that normalises, adds a prefix space, or emits an unknown-token id),
        or when there is no encoder, the ids come from a greedy longest match
        over the byte strings instead. That match looks ahead, so it only
        takes a long token if the rest of the text can still be spelled, and
        it fails only when no sequence of tokens spells the text at all.

        # Errors

        :class:`~tokendfa.analysis.errors.VocabularyError` if no sequence of tokens
        spells the text, naming the offset and the bytes that cannot be
        produced (a Unigram vocabulary without byte fallback cannot spell
        characters it never saw).
        """
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise VocabularyError(f"text is not encodable as UTF-8: {e}") from None
        if self._encoder is not None:
            ids = self._encoder(text)
            if self._spells(ids, data):
                return list(ids)
        return self._longest_match(data)

    def encode_many(self, texts: Sequence[str]) -> list[list[int] | None]:
        """:meth:`encode` of each text, ``None`` where it raises
        :class:`~tokendfa.analysis.errors.VocabularyError`: a build's many
        short texts (the forced runs of a 60,000-value enum's 80k states) in
        one call. The encoder runs on each text (its ``encode_many`` where it
        has one), and its ids are checked all at once: they spell the texts
        when the spelled lengths match text by text and the concatenations
        are equal; only a text that fails goes through :meth:`encode`. The
        check token by token was ~2 us of ~4 us a text."""
        texts = list(texts)
        encoder = self._encoder
        if encoder is None or not texts:
            return [self._encode_or_none(text) for text in texts]
        try:
            data = [text.encode("utf-8") for text in texts]
        except UnicodeEncodeError:
            return [self._encode_or_none(text) for text in texts]
        many = getattr(encoder, "encode_many", None)
        encoded = many(texts) if many is not None else [encoder(text) for text in texts]
        counts = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        flat = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(counts.sum()))
        owner = np.repeat(np.arange(len(texts)), counts)
        # The spellings are read from the byte matrix, not from the token
        # objects: touching those in a process forked from a warmed one copies
        # their pages (400k token reads: ~0.5 s in such a child). A length of 0
        # is a token that is not text (or the empty one): encode() decides there.
        matrix, lengths = self.byte_matrix()
        in_range = (flat >= 0) & (flat < len(self._tokens))
        spelled = np.zeros(len(flat), dtype=np.int64)
        spelled[in_range] = lengths[flat[in_range]]
        bad = np.zeros(len(texts), dtype=bool)
        bad[owner[spelled == 0]] = True
        text_lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
        bad |= np.bincount(owner, weights=spelled, minlength=len(texts)).astype(np.int64) != text_lengths
        good_token = ~bad[owner]
        ids, sizes = flat[good_token], spelled[good_token]
        rows = np.repeat(ids, sizes)
        columns = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        good_text = np.flatnonzero(~bad)
        expected = np.frombuffer(b"".join([data[at] for at in good_text.tolist()]), dtype=np.uint8)
        differs = matrix[rows, columns] != expected
        if differs.any():  # the texts holding a byte spelled otherwise
            ends = np.cumsum(text_lengths[good_text])
            bad[good_text[np.searchsorted(ends, np.flatnonzero(differs), side="right")]] = True
        out: list[list[int] | None] = [ids if type(ids) is list else list(ids) for ids in encoded]
        for at in np.flatnonzero(bad).tolist():
            out[at] = self._encode_or_none(texts[at])
        return out

    def _encode_or_none(self, text: str) -> list[int] | None:
        try:
            return self.encode(text)
        except VocabularyError:
            return None

    # --- constructors (each imports its adapter module when called) ------

    @classmethod
    def from_pretrained(cls, tokenizer_or_path: Any, *,
                        eos_token_ids: int | Iterable[int] | None = None) -> Vocabulary:
        """From a transformers tokenizer object, a ``tokenizers.Tokenizer``,
        or a local directory holding one. Never downloads: a string that is
        not an existing local path is an error, not a hub id.

        Special added tokens become ``None``; non-special added tokens are
        text (their content as UTF-8), because the tokenizer produces them
        for that text and decodes them back to it. EOS comes from
        ``eos_token_ids``, else the tokenizer's EOS followed by any extra EOS
        ids in a ``generation_config.json`` next to it.

        A folder is read from its JSON files without transformers where the
        result is known to be the same (:mod:`tokendfa.vocab.tokenizer_json`),
        and, unless ``eos_token_ids`` is given, kept in the vocabulary store
        in the cache folder, so the next process (vLLM's worker after its
        front end, a restart) loads it in a fraction of a second
        (:mod:`tokendfa.vocab.stored`; ``TOKENDFA_VOCABULARY_STORE=off``
        turns it off).
        """
        from .huggingface import from_pretrained
        return from_pretrained(tokenizer_or_path, eos_token_ids=eos_token_ids)

    @classmethod
    def from_tiktoken(cls, path: Any, *, special_tokens: dict[str, int] | None = None,
                      eos_token_ids: int | Iterable[int] | None = None,
                      pattern: str | None = None, name: str | None = None) -> Vocabulary:
        """From a tiktoken ``.tiktoken`` file (``base64 rank`` per line).

        ``special_tokens`` ids become ``None``; ids neither ranked nor special
        are unused and ``None`` too. Without ``eos_token_ids`` the EOS is
        ``<|endoftext|>`` if it is among the special tokens (or the only
        special token). With ``pattern`` (the pre-tokenizer regex), ``encode``
        is tiktoken's own encoding.
        """
        from .tiktoken import from_tiktoken
        return from_tiktoken(path, special_tokens=special_tokens, eos_token_ids=eos_token_ids,
                             pattern=pattern, name=name)

    @classmethod
    def from_sentencepiece(cls, path: Any, *, name: str | None = None,
                           eos_token_ids: int | Iterable[int] | None = None) -> Vocabulary:
        """From a SentencePiece ``.model`` file, BPE or Unigram.

        ``▁`` is a space, ``<0xNN>`` byte pieces are that byte, control,
        unknown and unused pieces are ``None``. A model without byte fallback
        cannot spell characters it never saw, and ``encode`` says so.
        """
        from .sentencepiece import from_sentencepiece
        return from_sentencepiece(path, name=name, eos_token_ids=eos_token_ids)

    @classmethod
    def from_gguf(cls, path: Any, *, eos_token_ids: int | Iterable[int] | None = None,
                  name: str | None = None) -> Vocabulary:
        """From the tokenizer a GGUF model file carries (llama.cpp's
        ``llama``, ``gpt2`` and ``t5`` tokenizer models).

        Control, unknown and unused tokens are ``None``, byte tokens
        ``<0xNN>`` are that byte, user-defined tokens are their literal text.
        EOS is the file's EOS id, then its end-of-turn and end-of-message ids
        when it names them. See :mod:`tokendfa.vocab.gguf`.
        """
        from . import gguf
        return gguf.from_gguf(path, eos_token_ids=eos_token_ids, name=name)

    @classmethod
    def builtin(cls, name: str) -> Vocabulary:
        """A vocabulary shipped inside an installed package (no download),
        loaded once per process. See :meth:`builtin_names`."""
        from .builtin import builtin
        return builtin(name)

    @staticmethod
    def builtin_names() -> list[str]:
        from .builtin import builtin_names
        return builtin_names()

    @classmethod
    def from_spec(cls, spec: str) -> Vocabulary:
        """From a one-string description, as a CLI or a config file gives it.

        ``"qwen2.5"`` or ``"builtin:qwen2.5"`` is a built-in (a built-in name
        wins over a file of the same name in the working directory; write
        ``./qwen2.5`` for the file). An existing path is read according to
        what it contains: a tiktoken file, a SentencePiece model, a Mistral
        tekken ``.json``, a GGUF model file, or a Hugging Face tokenizer
        directory.
        """
        from .builtin import from_spec
        return from_spec(spec)

    # --- plumbing --------------------------------------------------------

    def __repr__(self) -> str:
        return (f"Vocabulary(name={self._name!r}, size={len(self._tokens)}, "
                f"eos_token_ids={self._eos_token_ids!r}, source={self._source!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self is other or self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __reduce__(self) -> tuple:
        # Caches are rebuilt on demand rather than shipped to worker processes.
        return (_rebuild, (self._tokens, self._eos_token_ids, self._name,
                           self._source, self._encoder))

    @_outside_time_limit("_ids_by_bytes")
    def _bytes_index(self) -> dict[bytes, tuple[int, ...]]:
        """Bytes -> the ids that spell them (the encoder's fallback, the
        longest match); made once, on first use."""
        if self._ids_by_bytes is None:
            grouped: dict[bytes, list[int]] = {}
            for i, t in enumerate(self._tokens):
                if t is not None:
                    grouped.setdefault(t, []).append(i)
            self._ids_by_bytes = {b: tuple(ids) for b, ids in grouped.items()}
            self._token_lengths = tuple(sorted({len(b) for b in grouped}, reverse=True))
        return self._ids_by_bytes

    def _spells(self, ids: Sequence[int], data: bytes) -> bool:
        size = len(self._tokens)
        parts = []
        for i in ids:
            if not 0 <= i < size or self._tokens[i] is None:
                return False
            parts.append(self._tokens[i])
        return b"".join(parts) == data

    def _longest_match(self, data: bytes) -> list[int]:
        index = self._bytes_index()
        lengths = self._token_lengths or ()
        n = len(data)
        # finishes[i]: data[i:] can be spelled. Computed right to left so the
        # left-to-right pass below never commits to a token that strands it.
        finishes = bytearray(n + 1)
        finishes[n] = 1
        for i in range(n - 1, -1, -1):
            for length in lengths:
                if i + length <= n and finishes[i + length] and data[i:i + length] in index:
                    finishes[i] = 1
                    break
        if not finishes[0]:
            raise VocabularyError(self._unspellable_message(data))
        ids = []
        i = 0
        while i < n:
            # finishes[i] holds, so some token here leads to a spellable rest.
            length = next(length for length in lengths
                          if i + length <= n and finishes[i + length] and data[i:i + length] in index)
            ids.append(index[data[i:i + length]][0])
            i += length
        return ids

    def _unspellable_message(self, data: bytes) -> str:
        index = self._bytes_index()
        lengths = self._token_lengths or ()
        n = len(data)
        # The furthest offset any token sequence reaches from the start is
        # where the text stops being spellable.
        reached = bytearray(n + 1)
        reached[0] = 1
        furthest = 0
        for i in range(n):
            if not reached[i]:
                continue
            furthest = i
            for length in lengths:
                if i + length <= n and data[i:i + length] in index:
                    reached[i + length] = 1
        if reached[n]:  # pragma: no cover - only called when spelling failed
            furthest = n
        stuck = data[furthest:furthest + 8]
        return (f"vocabulary {self._name!r} cannot spell the text: no sequence of its tokens "
                f"gets past byte offset {furthest}, where the text continues {stuck!r}")


class _EncoderWarmUp:
    """The encoder's first call (which may load the tokenizer) on a thread,
    while :meth:`Vocabulary.prepare` makes the byte tables: loading Gemma 3's
    ``tokenizer.json`` with tokenizers takes 1.9 s on the loaded 2-core
    machine and releases the GIL (a Python loop beside it ran at 60% of its
    speed alone), so the two overlap."""

    def __init__(self, encoder: Encoder) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(encoder,), daemon=True,
                                        name="tokendfa-encoder-warm-up")
        self._thread.start()

    def _run(self, encoder: Encoder) -> None:
        try:
            encoder("warm up")
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            self._error = e

    def join(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _checked_order(tokens: tuple[bytes | None, ...],
                   ids: np.ndarray) -> tuple[tuple[bytes, ...], np.ndarray] | None:
    """``(spellings, ids)`` when ``ids`` lists every spelled token once, in
    the order of :meth:`Vocabulary.sorted_spellings` (bytes, then id); else None."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size and (int(ids.min()) < 0 or int(ids.max()) >= len(tokens)):
        return None
    order = ids.tolist()
    spellings = tuple(map(tokens.__getitem__, order))  # a tuple: see Vocabulary.sorted_spellings
    if None in spellings or len(order) != len(tokens) - tokens.count(None):
        return None
    if np.bincount(ids, minlength=len(tokens)).max(initial=0) > 1:
        return None
    pairs = list(zip(spellings, order))
    if sorted(pairs) != pairs:
        return None
    ids = ids.astype(np.int64)
    ids.setflags(write=False)
    return spellings, ids


def _rebuild(tokens: tuple[bytes | None, ...], eos_token_ids: tuple[int, ...], name: str,
             source: str | None, encoder: Encoder | None) -> Vocabulary:
    return Vocabulary(tokens, eos_token_ids, name=name, source=source, encoder=encoder)


def _normalise_token(i: int, t: object) -> bytes | None:
    if t is None:
        return None
    if type(t) is bytes:
        return t or None
    if isinstance(t, (bytes, bytearray, memoryview)):
        return bytes(t) or None
    raise VocabularyError(
        f"token {i} is {type(t).__name__} {t!r}; a vocabulary holds bytes or None per id")


def _normalise_eos(eos_token_ids: int | Iterable[int], size: int) -> tuple[int, ...]:
    if isinstance(eos_token_ids, (int, np.integer)) and not isinstance(eos_token_ids, bool):
        candidates = [eos_token_ids]
    else:
        try:
            candidates = list(eos_token_ids)  # type: ignore[arg-type]
        except TypeError:
            raise VocabularyError(
                f"eos_token_ids must be an int or an iterable of ints, not {eos_token_ids!r}"
            ) from None
    eos: list[int] = []
    for c in candidates:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise VocabularyError(f"EOS id {c!r} is not an int")
        c = int(c)
        if not 0 <= c < size:
            raise VocabularyError(f"EOS id {c} is out of range for a vocabulary of size {size}")
        if c not in eos:
            eos.append(c)
    if not eos:
        raise VocabularyError("a vocabulary needs at least one EOS id: without one, "
                              "no index can let the generation end")
    return tuple(eos)
