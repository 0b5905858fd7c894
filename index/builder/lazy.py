"""The lazy index: the first mask in milliseconds, every later one as fast as a built index's.

The eager build (:mod:`tokendfa.builder.fast`) determinises and minimises the
whole automaton and walks the vocabulary from every state before it can
serve anything: about two seconds for a typical schema. :class:`LazyIndex`
serves the same answers from the moment the NFA exists:

* the byte automaton is a :class:`~tokendfa.analysis.lazydfa.LazyByteDFA`,
  whose cells are computed on demand;
* a state's *token row* (its allowed-token bitset) is computed the first time
  the state is served, and kept: a revisited state costs a dict lookup
  (:meth:`LazyIndex.get_mask` returns the stored array). The tokens whose
  first byte is live are walked through the byte automaton token by token in
  C (``_cwalk.c``, built with the package where a compiler is; each cell not
  yet resolved is resolved as the walk meets it), or, without it, level by
  level in numpy (a gather of ``cell[state, next byte]`` for the tokens still
  alive, resolving the cells they reach first), the last few in Python.
  With the compiled walk MaskBench's steps over 1 ms (all cold rows) went
  from 1,073 to 453 of 17,540, to 261 with the automaton's compiled core
  too, and to 194 with the cached walk plans and an NFA the cyclic
  collector does not walk (``benchmarks/RESULTS.md``). Most of a
  cold row is not walked at all: where most characters lead to one state that
  loops on them (inside a JSON string or key, a pattern's class), the tokens
  that go there and stay are a mask cached per vocabulary and loop set, the
  others start their walk where they first leave the loop, and tokens that
  reach a looping state mid-walk stop where nothing of theirs leaves it (see
  :meth:`LazyIndex._raw_row`). A cold JSON string state on Qwen: 7-9 ms of
  walking 147k tokens before, ~0.6 ms now. Inside a counted class
  (``[0-9a-f]{40}``, a string with ``minLength``) the characters lead one
  state further along a chain instead of looping: a token of n characters
  of the class ends n states on, found with no walk (:meth:`LazyIndex._chain_row`);
* :meth:`LazyIndex.advance` checks the token's bit and walks its bytes
  through the byte automaton's cells, which computing the row mostly
  resolved (the walk resolves the cells of walked tokens, the loop and chain
  rows the ASCII cells of the states they pass; a cell inside a wide
  character is resolved by the first advance that reads it), so the token
  rows need no per-token successor table (a state inside a JSON string
  allows ~147k Qwen tokens: 590 kB of successors).

States are the lazy automaton's ids (the initial state is 1, not 0), and they
are not minimal; the answers are the eager index's, state for state along any
token sequence (the tests walk both in lockstep).

**Exactness.** The eager index allows a token when its bytes keep the
automaton alive *and* some sequence of tokens can finish the match from
where it ends. The lazy automaton's non-dead states are exactly the
byte-live ones. When every byte the pattern can use is spelled by a
single-byte token (byte-level BPE: Qwen, cl100k, Tekken; SentencePiece with
byte fallback), byte-live is token-live and nothing more is needed. For
other vocabularies (the toy one of the tests, a Unigram model without byte
fallback) token-liveness is decided exactly by a search over token rows from
the state in question, memoised; it costs more on first use, never gives a
different answer.

**Not served lazily:** fast-forward tokens (:meth:`LazyIndex.forced_tokens`
is always empty; :meth:`LazyIndex.complete` has them), and the vocabulary
must be known (an index file is always eager: :meth:`LazyIndex.save` writes
the completed index).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.dfa import DEAD, INITIAL, STATE_DTYPE
from ..analysis.minimise import canonical_byte_dfa
from ..analysis.native import native_module
from ..analysis.errors import (InvalidStateError, TokenNotAllowedError,
                               VocabularyCoverageError)
from ..analysis.lazydfa import (DEFAULT_MAX_LAZY_STATES, UNKNOWN, WIDE_SEQUENCES, DefinitionSource,
                                LazyByteDFA)
from ..runtime.arrays import MASK_WORD
from ..runtime.serving import MaskServing
from ..vocab.vocabulary import Vocabulary
from .config import BuildConfig
from .pipeline import BuiltIndex, build_index, readable_pattern

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH", "NATIVE_WALK"]

# The compiled walk (index/builder/_cwalk.c; see tokendfa.analysis.native).
# The rows are the same either way; the numpy walk is the slower one.
_cwalk = native_module(__package__ + "._cwalk")
NATIVE_WALK = _cwalk is not None


# Free values of a schema nest this many levels in lazy mode, with no
# any_depth="auto" measurement (which builds whole automata at several depths,
# most of an eager schema's time to first mask). Each level is one shared
# definition, which the lazy automaton calls rather than copies and compiles
# only when a generation first enters it (tokendfa.analysis.lazydfa), so the
# depth costs nothing until a value goes that deep. Measured on 42
# JSONSchemaBench schemas (benchmarks/profile_lazy.py, qwen2.5, loaded machine):
# the NFA built before the first mask is the same at depth 8, 32 and 64 (p50
# 2.8k states; 1.8k at depth 2, where the lowest levels are written inline);
# the schema's regex grows by about 0.15 ms a level. When the NFA copied every
# level (the first version), depth 2 took 0.05 s and depth 5 2.0 s on a small
# object schema, which is why this was 2.
LAZY_ANY_DEPTH = 32


class _PlanCache:
    """One vocabulary's walk or chain plans by key, the oldest dropped first
    past ``_PLAN_CACHE_SIZE`` plans or ``_PLAN_CACHE_BYTES``; none of more
    than ``_PLAN_MAX_TOKENS`` tokens is kept (a row whose every byte is
    live would keep ~6 MB on Qwen; such rows are rare and their walk costs
    more than their plan). A plan is counted at what it will hold packed
    (:class:`_Packing`). Kept up to 32k tokens, sp_0's 37k-token chain
    plans were made again at each of their rows: 0.9-1.9 ms, a dozen of
    its slow steps. Readers take no lock (a dict lookup); two threads may
    make the same plan, and either copy is right."""

    def __init__(self) -> None:
        self._plans: dict = {}
        self._sizes: dict = {}
        self._held = 0

    def get(self, key):
        return self._plans.get(key)

    def values(self) -> list:
        return list(self._plans.values())

    def __len__(self) -> int:
        return len(self._plans)

    def remember(self, key, plan):
        """Keep ``plan`` under ``key`` if it is small enough; return it."""
        if len(plan.tokens) > _PLAN_MAX_TOKENS:
            return plan
        size = _plan_bytes(plan)
        if size > _PLAN_CACHE_BYTES:
            return plan
        with _CACHE_LOCK:
            while self._plans and (len(self._plans) >= _PLAN_CACHE_SIZE or self._held + size > _PLAN_CACHE_BYTES):
                oldest = next(iter(self._plans))
                del self._plans[oldest]
                self._held -= self._sizes.pop(oldest)
            self._plans[key] = plan
            self._held += size - self._sizes.get(key, 0)
            self._sizes[key] = size
        return plan


def _plan_bytes(plan: "_WalkPlan | _ChainPlan") -> int:
    """What a plan holds once packed: its arrays, and 16 bytes a token for
    its packed bytes and their offsets (Qwen's tokens average 6.6 bytes)."""
    return sum(value.nbytes for value in vars(plan).values() if isinstance(value, np.ndarray)) + 16 * len(plan.tokens)


@dataclass(frozen=True, eq=False)
class _VocabularyTables:
    """What the lazy walk needs from a vocabulary, computed once per vocabulary."""

    columns: np.ndarray        # uint8[L, V]: byte d of every token in row d (Vocabulary.byte_matrix, transposed)
    lengths: np.ndarray        # int32[V]: 0 for tokens that are not text
    by_first_byte: np.ndarray  # int64[T]: the spelled tokens, by first byte then id
    first_offsets: np.ndarray  # int64[257]: tokens starting with byte b are by_first_byte[o[b]:o[b+1]]
    single_byte: np.ndarray    # bool[256]: some token is exactly this one byte
    num_words: int             # uint32 words of a mask
    # The loop shortcut (see LazyIndex._raw_row): a token's tail is what follows its first character.
    first_char: np.ndarray     # int8[V]: bytes of the first character; 0 when the token is not text
                               # that starts with a whole character and goes on with whole characters
    byte_columns: Any          # the vocabulary's ByteColumns (for _last_leaving)
    # Every token's bytes one after another, token t at spellings[o[t]:o[t + 1]]
    # (the compiled walk reads a token's bytes together; see _cwalk.c).
    spellings: np.ndarray      # uint8
    spelling_offsets: np.ndarray  # int64[V + 1]
    # The bytes of each text token after its first character (see _tail_bytes):
    # which ASCII bytes (bits 0-63 and 64-127, as a loop set's key), and
    # whether a byte of 128 or more; all 0 for tokens that are not text.
    tail_low: np.ndarray       # uint64[V]
    tail_high: np.ndarray      # uint64[V]
    tail_wide: np.ndarray      # bool[V]
    # The cached loop rows (see LazyIndex._loop_row), made on use:
    tail_sets: dict = field(default_factory=dict)   # loop set -> _TailTokens | None
    last_leaving: dict = field(default_factory=dict)  # loop set -> int16[V] (see _last_leaving)
    loop_masks: dict = field(default_factory=dict)  # (first bytes, loop set) -> (uint32 mask, _LoopRest)
    # The cached chain rows (see LazyIndex._chain_row), made on use:
    class_runs: dict = field(default_factory=dict)   # class -> _ClassRuns
    chain_masks: dict = field(default_factory=dict)  # (class, length) -> uint32 mask
    chain_plans: _PlanCache = field(default_factory=_PlanCache)  # (class, length, dies, other bytes) -> _ChainPlan
    walk_plans: _PlanCache = field(default_factory=_PlanCache)   # (first bytes, loop set, other bytes) -> _WalkPlan


def _vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    matrix, lengths = vocabulary.byte_matrix()
    spelled = np.flatnonzero(lengths > 0)
    first = matrix[spelled, 0]
    order = spelled[np.argsort(first, kind="stable")]
    offsets = np.searchsorted(first[np.argsort(first, kind="stable")], np.arange(257))
    single = np.zeros(256, dtype=bool)
    single[matrix[lengths == 1, 0]] = True
    # One contiguous row per byte position: a level of the walk reads one row
    # (a gather from the [V, L] matrix strides over L bytes per token).
    first_char = np.zeros(vocabulary.size, dtype=np.int8)
    for token, data in enumerate(vocabulary.tokens):
        if data:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a piece of a character: the ordinary walk
            first_char[token] = len(text[0].encode("utf-8"))
    spellings = np.frombuffer(b"".join(data or b"" for data in vocabulary.tokens), dtype=np.uint8)
    spelling_offsets = np.zeros(vocabulary.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=spelling_offsets[1:])
    columns = vocabulary.byte_columns()
    tail_low, tail_high, tail_wide = _tail_bytes(columns, first_char)
    return _VocabularyTables(np.ascontiguousarray(matrix.T), lengths, order.astype(np.int64), offsets.astype(np.int64),
                             single, (vocabulary.size + 31) // 32, first_char,
                             columns, spellings, spelling_offsets,
                             tail_low, tail_high, tail_wide)


def _tail_bytes(columns, first_char: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(low, high, wide)`` over the tokens: the ASCII bytes each text token
    holds after its first character, as bits 0-63 and 64-127 (uint64), and
    whether it holds a byte of 128 or more there; 0 for the tokens that are
    not text. Whether a token's tail stays inside a loop set is then two
    ANDs (:func:`_inside_tail`, ``_cwalk.tail_split``); finding each
    token's last byte outside the set took 1.4-2 ms a new loop set on Qwen,
    compiled (a format's or a pattern's class, 15 of MaskBench's lazy steps
    over 1 ms)."""
    size = len(first_char)
    low = np.zeros(size, dtype=np.uint64)
    high = np.zeros(size, dtype=np.uint64)
    wide = np.zeros(size, dtype=bool)
    one = np.uint64(1)
    for position, count in enumerate(columns.counts.tolist()):
        tokens = columns.order[:count]
        data = columns.data[columns.starts[position]:columns.starts[position] + count]
        after = (first_char[tokens] > 0) & (first_char[tokens] <= position)
        tokens, data = tokens[after], data[after].astype(np.uint64)
        # each token once a position: the fancy-indexed ORs do not collide
        below = data < 64
        low[tokens[below]] |= one << data[below]
        middle = (data >= 64) & (data < 128)
        high[tokens[middle]] |= one << (data[middle] - np.uint64(64))
        wide[tokens[data >= 128]] = True
    for array in (low, high, wide):
        array.flags.writeable = False
    return low, high, wide


def vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    return vocabulary.derived("lazy-walk", _prepared_tables)


def _prepared_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    """The tables, with the loop rows of a JSON string made ahead (every
    character but ``"``, ``\\`` and the controls loops inside one): every
    schema with a free string needs them, and a fresh process would pay
    ~6 ms for them inside its first string's mask. And the runs of the same
    class for the chain rows of a string with ``maxLength`` or
    ``minLength`` (~5 ms inside its first character's mask otherwise;
    Snowplow/sp_0 and Github_ultra/o65424 in MaskBench's sample)."""
    tables = _vocabulary_tables(vocabulary)
    string = np.ones(128, dtype=bool)
    string[:0x20] = string[ord('"')] = string[ord("\\")] = False
    key = _class_key(string, True)
    tail = _tail_tokens(tables, key)
    if tail is not None:
        first = np.zeros(256, dtype=bool)
        first[:128] = string
        first[_LEAD_BYTES] = True
        _loop_mask(tables, first, key, tail)
    _class_runs(tables, key)
    return tables


# A state with fewer than this many ASCII bytes to one successor is walked
# token by token (literals, digits, keywords: their rows are cheap anyway).
_LOOP_MIN_BYTES = 16
# A loop set whose tails hold fewer tokens than this is not worth a cache
# entry: walking them costs less than the entry's copy of the other tokens.
_LOOP_MIN_TOKENS = 4096
# The rest of a walk goes on in Python (~0.3 us a byte) when it has at most
# this many bytes left: a numpy level costs ~40 us whatever its size.
_PYTHON_WALK_BYTES = 256
# Resume points (_skips) are looked for in the first this many bytes of at
# most this many tokens: a JSON string's rest is 6.1k tokens on Qwen; the
# rest of a narrow loop ([a-z]) is most of the vocabulary, which a cold row
# would pay 0.3 s to scan whole.
_SKIPS_WIDTH = 32
_SKIPS_MAX_TOKENS = 16384
# The loop shortcut inside a walk is tried on a state only when this many
# tokens reach it with their first character read.
_LOOP_MIN_SHARE = 256
# A chain row follows a counted class at most this many characters: longer
# tokens of the class resume their walk where the chain stops. Qwen's longest
# token of JSON string characters has 128 (runs of spaces, dashes, "=");
# at 48, the ~130 longer ones walked on a byte a level, ~30 numpy levels
# in every cold row of a long counted string (1.73 -> 1.19 ms p50 a step
# along a maxLength-1024 string, scratch measurement).
_CHAIN_MAX = 128
_NO_LINK = -2  # a chain stops: the class's characters part ways
# Entries kept per vocabulary and cache. A schema has a handful of loop sets
# (a free string, a pattern's class) and one first-byte set per state kind
# (inside a free string; inside a free key, after each prefix of a declared
# key); an entry is a mask of V bits (19 kB on Qwen), a tail set also the ids
# of the tokens outside it (~6k on Qwen for a JSON string).
_LOOP_CACHE_SIZE = 256
_INT32, _UINT32 = np.dtype(np.int32), np.dtype(np.uint32)  # the mask buffers write_mask_into takes as is
# Walk plans and chain plans kept per vocabulary (each kind: at most 64 plans
# in 64 MB, see _PlanCache), and the most tokens a kept plan has. MaskBench's
# sample builds ~1-80 plans a schema; a JSON string's has 4.6k tokens, a
# maxLength-1024 string's chain plans up to 37k.
_PLAN_CACHE_SIZE = 64
_PLAN_MAX_TOKENS = 65536
_PLAN_CACHE_BYTES = 64 << 20
# Bytes that can start a text token (tail sets hold text tokens only).
_TEXT_FIRST_BYTES = np.r_[0:0x80, 0xC2:0xF5]
_LEAD_BYTES = np.r_[0xC2:0xF5]
_ALL_64 = (1 << 64) - 1  # a loop set's half, complemented as a uint64


@dataclass(frozen=True, eq=False)
class _TailTokens:
    """For one loop set ``(low, high, wide)`` of :meth:`LazyIndex._loop`: the
    text tokens whose every character after the first is in it, and the
    other spelled tokens by first byte."""

    mask: np.ndarray          # uint32 words: the tokens whose tail loops
    rest: np.ndarray          # int64: the other spelled tokens, by first byte then id
    rest_offsets: np.ndarray  # int64[257]: those starting with byte b are rest[o[b]:o[b+1]]
    # int16, beside rest: where the walk of a text token may resume in the loop's
    # state when its first character leads there (its first byte that leaves the
    # loop); 0 for the tokens that are not text (walked from their first byte).
    # A cold JSON string walked its 128 long rest tokens ("            \n",
    # "\\Controllers") a byte a level; most now start one byte from their end.
    rest_skips: np.ndarray


_CACHE_LOCK = threading.Lock()  # the per-vocabulary caches are shared by every lazy index


def _remember(cache: dict, key, value, size: int = _LOOP_CACHE_SIZE):
    """Put ``value`` in one of the per-vocabulary caches, dropping the oldest
    entry past ``size``. Readers take no lock (a dict lookup); two threads
    may compute the same entry, and either copy is right."""
    with _CACHE_LOCK:
        if len(cache) >= size:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def _tail_tokens(tables: _VocabularyTables, key: tuple[int, int, bool]) -> _TailTokens | None:
    """The :class:`_TailTokens` of a loop set, computed once per vocabulary
    (None when too few tokens loop to be worth it)."""
    if key in tables.tail_sets:
        return tables.tail_sets[key]
    # nothing after the first character leaves the loop (text tokens only)
    if _cwalk is not None:
        mask = np.zeros(tables.num_words, dtype=MASK_WORD)
        rest = np.empty(len(tables.by_first_byte), dtype=np.int64)
        offsets = np.empty(257, dtype=np.int64)
        outside = _cwalk.tail_split(tables.tail_low, tables.tail_high, tables.tail_wide.view(np.uint8),
                                    tables.first_char, tables.by_first_byte, tables.first_offsets,
                                    key[0], key[1], key[2], mask, rest, offsets)
        # (a copy: the cache keeps it, and the buffer was sized for every token)
        count, rest = len(rest) - outside, rest[:outside].copy()
    else:
        inside = _inside_tail(tables, key)
        count = np.count_nonzero(inside)
        bits = np.zeros(tables.num_words * 32, dtype=bool)
        bits[:len(inside)] = inside
        mask = np.packbits(bits, bitorder="little").view(MASK_WORD)
        rest = tables.by_first_byte[~inside[tables.by_first_byte]]
        offsets = np.searchsorted(tables.columns[0][rest], np.arange(257)).astype(np.int64)
    found = None
    if count >= _LOOP_MIN_TOKENS:
        mask.flags.writeable = False
        found = _TailTokens(mask, rest, offsets, _skips(tables, rest, key))
    return _remember(tables.tail_sets, key, found)


def _inside_tail(tables: _VocabularyTables, key: tuple[int, int, bool]) -> np.ndarray:
    """``bool[V]``: the text tokens whose every byte after the first
    character is in the loop set ``key`` (the same as
    ``_last_leaving(tables, key) < tables.first_char``)."""
    low, high, wide = key
    outside_low, outside_high = np.uint64(~low & _ALL_64), np.uint64(~high & _ALL_64)
    inside = (tables.tail_low & outside_low) == 0
    inside &= (tables.tail_high & outside_high) == 0
    inside &= tables.first_char > 0
    if not wide:
        inside &= ~tables.tail_wide
    return inside



def _skips(tables: _VocabularyTables, tokens: np.ndarray, key: tuple[int, int, bool]) -> np.ndarray:
    """For each of ``tokens``: the position of its first byte after the
    first character that is not a loop byte (ASCII outside the loop set, or
    any byte of a wide character when those do not loop), 0 when it is not text.
    In a text token that is a character boundary, and every character before
    it (after the first) loops."""
    if len(tokens) > _SKIPS_MAX_TOKENS:
        return np.zeros(len(tokens), dtype=np.int16)  # a narrow loop: its rest is walked anyway
    loops = _loop_bytes(key)
    lengths = tables.lengths[tokens]
    first = tables.first_char[tokens]

    def leaving_at(width: int, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = tables.columns[:width, tokens[which]]          # [width, n]
        position = np.arange(width)[:, None]
        leaving = ~loops[rows] & (position < lengths[which]) & (position >= first[which])
        return leaving.any(axis=0), leaving.argmax(axis=0)

    everyone = np.arange(len(tokens))
    found, skips = leaving_at(min(int(lengths.max(initial=1)), _SKIPS_WIDTH), everyone)
    # The few longer tokens with no leaving byte in the first bytes (sixty
    # spaces and a newline) are looked at whole.
    longer = np.flatnonzero(~found & (lengths > _SKIPS_WIDTH))
    if len(longer):
        found[longer], skips[longer] = leaving_at(int(lengths[longer].max()), longer)
    skips = np.where(found, skips, lengths)
    return np.where(first > 0, skips, 0).astype(np.int16)


def _class_key(ascii_bytes: np.ndarray, wide: bool) -> tuple[int, int, bool]:
    """The key of a set of characters: ``ascii_bytes`` (bool[128]) as bits
    0-63 and 64-127, and whether it holds every character of two or more bytes."""
    words = np.packbits(ascii_bytes, bitorder="little").view(np.uint64)
    return int(words[0]), int(words[1]), wide


def _loops_on(key: tuple[int, int, bool], ascii_bytes: np.ndarray) -> bool:
    """Whether the loop set ``key`` holds every one of ``ascii_bytes`` (bool[128])."""
    low, high, _ = _class_key(ascii_bytes, False)
    return low & ~key[0] == 0 and high & ~key[1] == 0


def _loop_bytes(key: tuple[int, int, bool]) -> np.ndarray:
    """``bool[256]``: the bytes of a loop set (every byte of 128 and up when
    characters of two or more bytes loop)."""
    low, high, wide = key
    loops = np.zeros(256, dtype=bool)
    loops[:64] = (low >> np.arange(64, dtype=np.uint64)) & np.uint64(1) == 1
    loops[64:128] = (high >> np.arange(64, dtype=np.uint64)) & np.uint64(1) == 1
    loops[128:] = wide
    return loops


def _last_leaving(tables: _VocabularyTables, key: tuple[int, int, bool]) -> np.ndarray:
    """``int16[V]``: the position of each token's last byte outside the loop
    set (-1 when there is none); the token's length when it is not text. A
    token in a state with this loop set, at a character boundary past that
    position, stays there to its end (the numpy walk's shortcut,
    :meth:`LazyIndex._staying`; tail sets use :func:`_inside_tail`).
    Computed once per vocabulary and loop set, column by column (~4 ms on
    Qwen); only the numpy walk, without the compiled module, asks for it."""
    found = tables.last_leaving.get(key)
    if found is None:
        loops, columns = _loop_bytes(key), tables.byte_columns
        found = np.full(len(tables.lengths), -1, dtype=np.int16)
        for position, count in enumerate(columns.counts.tolist()):
            data = columns.data[columns.starts[position]:columns.starts[position] + count]
            leaving = ~loops[data]
            found[columns.order[:count][leaving]] = position  # later positions overwrite
        text = tables.first_char > 0
        found[~text] = tables.lengths[~text]
        found.flags.writeable = False
        _remember(tables.last_leaving, key, found)
    return found


@dataclass(frozen=True, eq=False)
class _LoopRest:
    """The tokens of a loop row left to walk (see :meth:`LazyIndex._loop_row`):
    those of the tail set's rest whose first byte leads to the loop's state,
    by first byte then id, with the position their walk starts at (their
    resume point, at least 1) and whether they start it in the loop's state
    (they have a resume point). Cached with the loop's mask: the same for
    every state of a kind (each JSON string value of a schema), and
    gathering them took ~60 us of numpy calls a cold row."""

    tokens: np.ndarray     # int64
    positions: np.ndarray  # int64
    skipped: np.ndarray    # bool


def _loop_mask(tables: _VocabularyTables, first: np.ndarray, tail_key: tuple[int, int, bool],
               tail: _TailTokens) -> tuple[np.ndarray, _LoopRest]:
    """The tokens whose first byte is in ``first`` (bool[256]) and whose tail
    is in the loop set, and the :class:`_LoopRest` of the others starting
    there; cached per vocabulary. The mask is the tail set's, kept or cleared
    by the tokens of the side of ``first`` (among the bytes a text token can
    start with) that starts fewer tokens."""
    key = (np.packbits(first).tobytes(), tail_key)
    found = tables.loop_masks.get(key)
    if found is None:
        among = first[_TEXT_FIRST_BYTES]
        starting, others = _TEXT_FIRST_BYTES[among], _TEXT_FIRST_BYTES[~among]
        # The bits of the side with fewer tokens, set token by token: a JSON
        # string's ~40 other first bytes start ~2k tokens, where ORing their
        # 40 first-byte masks read 0.8 MB (0.16-0.41 ms a new row kind, cold).
        sizes = np.diff(tables.first_offsets)
        side = np.zeros(tables.num_words, dtype=MASK_WORD)
        fewer = starting if sizes[starting].sum() <= sizes[others].sum() else others
        if _cwalk is not None:
            _cwalk.group_bits(side, tables.by_first_byte, tables.first_offsets, fewer)
        else:
            _set_bits(side, _grouped(tables.by_first_byte, tables.first_offsets, fewer))
        mask = side & tail.mask if fewer is starting else tail.mask & ~side
        mask.flags.writeable = False
        starts = np.flatnonzero(first)
        picked = _ranges(tail.rest_offsets[starts], tail.rest_offsets[starts + 1])
        skips = tail.rest_skips[picked]
        rest = _LoopRest(tail.rest[picked], np.maximum(skips, 1).astype(np.int64), skips > 0)
        for array in (rest.tokens, rest.positions, rest.skipped):
            array.flags.writeable = False
        found = _remember(tables.loop_masks, key, (mask, rest))
    return found


@dataclass(frozen=True, eq=False)
class _ClassRuns:
    """How each text token begins with characters of one class ``(low,
    high, wide)`` (a key as :meth:`LazyIndex._loop` makes them), computed
    once per vocabulary and class for the chain rows (~10 ms on Qwen in
    numpy, ~2 compiled)."""

    chars: np.ndarray          # int32[V]: characters in the token's leading run (0: not text)
    ascii: np.ndarray          # int32[V]: bytes of that run before its first byte of 128 or more
    full_by_chars: np.ndarray  # int64: the tokens that are all run, by characters then id
    full_offsets: np.ndarray   # int64[n + 2]: those of k characters are full_by_chars[o[k]:o[k + 1]]
    # The tokens whose run is ASCII and stops before their end, by run length m
    # then the byte that stops it e: those of (m, e) are partial[o[256 m + e]:o[256 m + e + 1]].
    partial: np.ndarray
    partial_offsets: np.ndarray
    # The other tokens that start with a byte of the class (a wide character
    # in the run, not text), by first byte: walked from their first byte.
    irregular: np.ndarray
    irregular_offsets: np.ndarray  # int64[257]
    stop_bytes: np.ndarray         # int64: the distinct bytes that stop a partial token's run


def _class_runs(tables: _VocabularyTables, key: tuple[int, int, bool]) -> _ClassRuns:
    """The :class:`_ClassRuns` of a class, column by column."""
    found = tables.class_runs.get(key)
    if found is not None:
        return found
    inside, lengths = _loop_bytes(key), tables.lengths
    if _cwalk is not None:
        run, ascii_run, chars = (np.empty(len(lengths), dtype=np.int32) for _ in range(3))
        _cwalk.leading_runs(tables.spellings, tables.spelling_offsets, inside.view(np.uint8), key[2],
                            run, ascii_run, chars)
    else:
        run, ascii_run, chars = _leading_runs(tables, inside, key[2])
    text = tables.first_char > 0
    chars[~text] = 0
    ascii_run[~text] = 0
    full = text & (run == lengths)
    full_tokens = np.flatnonzero(full)
    by_chars = full_tokens[_stable_order(chars[full_tokens])]
    full_offsets = np.searchsorted(chars[by_chars], np.arange(int(chars[by_chars].max(initial=0)) + 2))
    partial = np.flatnonzero(text & ~full & (chars >= 1) & (ascii_run >= chars))
    group = chars[partial].astype(np.int64) * 256 + tables.columns[run[partial], partial]
    order = _stable_order(group)
    partial, group = partial[order], group[order]
    partial_offsets = np.searchsorted(group, np.arange(256 * (int(chars[partial].max(initial=0)) + 1) + 1))
    starts_inside = np.zeros(len(lengths), dtype=bool)
    spelled = tables.by_first_byte
    starts_inside[spelled[inside[tables.columns[0][spelled]]]] = True
    irregular_tokens = starts_inside & ~full
    irregular_tokens[partial] = False
    irregular = spelled[irregular_tokens[spelled]]  # by first byte, as by_first_byte
    irregular_offsets = np.searchsorted(tables.columns[0][irregular], np.arange(257))
    found = _ClassRuns(chars, ascii_run, by_chars.astype(np.int64), full_offsets.astype(np.int64),
                       partial.astype(np.int64), partial_offsets.astype(np.int64),
                       irregular.astype(np.int64), irregular_offsets.astype(np.int64),
                       _distinct(group % 256).astype(np.int64))
    return _remember(tables.class_runs, key, found)


def _leading_runs(tables: _VocabularyTables, inside: np.ndarray, wide: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(run, ascii_run, chars)`` (int32 each) of every token: the bytes of
    its leading run of bytes in ``inside`` (bool[256]; its length when all
    run), those before the run's first byte of 128 or more, and the
    characters starting in the run (every byte when not ``wide``); column by
    column in numpy, where ``_cwalk.leading_runs`` is not built."""
    columns, lengths = tables.byte_columns, tables.lengths
    counts = columns.counts.tolist()
    run = lengths.astype(np.int32)  # the first byte outside, or the length
    ascii_run = run.copy()
    chars = np.zeros(len(lengths), dtype=np.int32)
    for position in range(len(counts) - 1, -1, -1):  # earlier positions overwrite
        data = columns.data[columns.starts[position]:columns.starts[position] + counts[position]]
        here = columns.order[:counts[position]]
        run[here[~inside[data]]] = position
        ascii_run[here[data >= 0x80]] = position
    if wide:
        for position, count in enumerate(counts):
            data = columns.data[columns.starts[position]:columns.starts[position] + count]
            here = columns.order[:count]
            starting = (position < run[here]) & ((data < 0x80) | (data >= 0xC0))
            chars[here[starting]] += 1  # each token once a position: no repeated index
    else:
        chars = run.copy()  # ASCII bytes only: a byte is a character
    return run, np.minimum(ascii_run, run), chars


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for non-negative keys, as 16-bit
    keys when they fit: numpy sorts those by radix (a wide class's ~100k
    runs: ~2 ms by merge sort, ~0.3 by radix)."""
    if len(keys) and 0 <= keys.min() and keys.max() < 1 << 16:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")


def _chain_mask(tables: _VocabularyTables, key: tuple[int, int, bool], length: int,
                runs: _ClassRuns) -> np.ndarray:
    """The tokens made of 1 to ``length`` characters of a class, cached per
    vocabulary."""
    found = tables.chain_masks.get((key, length))
    if found is None:
        found = np.zeros(tables.num_words, dtype=MASK_WORD)
        _set_bits(found, runs.full_by_chars[runs.full_offsets[1]:runs.full_offsets[min(length + 1, len(runs.full_offsets) - 1)]])
        found.flags.writeable = False
        _remember(tables.chain_masks, (key, length), found)
    return found


@dataclass(frozen=True, eq=False)
class _PackedBytes:
    """The bytes a plan's tokens have left to walk, in the plan's order, one
    token after another: entry i is ``data[offsets[i]:offsets[i + 1]]``.
    Walking these reads memory in order, where walking by token id met a
    cache miss or two a token (:func:`tokendfa.builder._cwalk.walk_packed`)."""

    data: np.ndarray     # uint8
    offsets: np.ndarray  # int64, one more than the plan's tokens


class _Packing:
    """A kept plan's :class:`_PackedBytes`, made at its second walk: packing
    costs about one cold walk (~200 us a plan on o65424, whose 6k steps make
    82 plans), which a plan walked once (most of a schema's) would never get
    back. Two threads may both pack; either copy is right."""

    __slots__ = ("walks", "packed")

    def __init__(self) -> None:
        self.walks = 0
        self.packed: _PackedBytes | None = None

    def bytes_for(self, tables: _VocabularyTables, tokens: np.ndarray, positions: np.ndarray
                  ) -> _PackedBytes | None:
        """The plan's packed bytes from its second walk on, else None."""
        if self.packed is None:
            self.walks += 1
            if self.walks >= 2:
                self.packed = _packed(tables, tokens, positions)
        return self.packed


def _packed(tables: _VocabularyTables, tokens: np.ndarray, positions: np.ndarray) -> _PackedBytes:
    """The :class:`_PackedBytes` of a plan's ``tokens`` from ``positions``."""
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(tables.lengths[tokens] - positions, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _cwalk.pack(tables.spellings, tables.spelling_offsets, np.ascontiguousarray(tokens, dtype=np.int64),
                np.ascontiguousarray(positions, dtype=np.int64), data)
    for array in (data, offsets):
        array.flags.writeable = False
    return _PackedBytes(data, offsets)


@dataclass(frozen=True, eq=False)
class _ChainPlan:
    """The tokens a chain row walks (see :meth:`LazyIndex._chain_row`), the
    same at every state along a chain of one class and length: each starts
    at ``positions`` in the chain's state ``links`` (an index into the
    chain), or, where that is -1, at position 1 in the state its first byte
    ``first_bytes`` leads to. A chain row assembled them from cached groups
    in ~20 numpy calls, ~0.35 ms of each cold step along sp_0's
    maxLength-1024 strings; now it gathers two arrays."""

    tokens: np.ndarray       # int64
    links: np.ndarray        # int64
    first_bytes: np.ndarray  # int64
    positions: np.ndarray    # int64
    packing: _Packing = field(default_factory=_Packing)


def _chain_plan(tables: _VocabularyTables, key: tuple[int, int, bool], runs: _ClassRuns, length: int,
                dies: bool, starting: np.ndarray, others: np.ndarray) -> _ChainPlan:
    """The :class:`_ChainPlan` of a chain of ``length`` links (``dies``: every
    ASCII byte of the class is dead after the last) from states whose live
    bytes outside the class are ``others``; ``starting``: the first bytes of
    the class's characters (given by ``key``); cached per vocabulary."""
    plan_key = (key, length, dies, others.tobytes())
    found = tables.chain_plans.get(plan_key)
    if found is not None:
        return found
    # Tokens that start outside the class, and those that start inside it
    # but are not a run of its characters (a wide character in the run, not
    # text): walked from their first byte.
    parts = [_grouped(tables.by_first_byte, tables.first_offsets, others),
             _grouped(runs.irregular, runs.irregular_offsets, starting)]
    links = [np.full(len(parts[0]) + len(parts[1]), -1, dtype=np.int64)]
    positions = [np.ones(len(links[0]), dtype=np.int64)]
    # Tokens whose ASCII run stops after m <= length characters: walked on
    # from the chain's m-th state, from the byte that stops them (a dead
    # cell there drops them at once).
    stop = runs.partial_offsets[min(256 * (length + 1), len(runs.partial_offsets) - 1)]
    partial = runs.partial[runs.partial_offsets[256]:stop]
    parts.append(partial)
    links.append(runs.chars[partial].astype(np.int64))
    positions.append(links[-1])
    # Tokens longer than the chain: dead at once where every ASCII byte of
    # the class is dead after it (the end of a count), else walked on from
    # its last state (a longer ASCII run) or from their first byte.
    longer = np.concatenate((runs.full_by_chars[runs.full_offsets[min(length + 1, len(runs.full_offsets) - 1)]:],
                             runs.partial[runs.partial_offsets[min(256 * (length + 1), len(runs.partial_offsets) - 1)]:]))
    regular = runs.ascii[longer] > length
    if dies:
        longer, regular = longer[~regular], regular[~regular]
    parts.append(longer)
    links.append(np.where(regular, length, -1).astype(np.int64))
    positions.append(np.where(regular, length, 1).astype(np.int64))
    tokens, positions = np.concatenate(parts), np.concatenate(positions)
    found = _ChainPlan(tokens, np.concatenate(links), tables.columns[0][tokens].astype(np.int64), positions)
    for array in (found.tokens, found.links, found.first_bytes, found.positions):
        array.flags.writeable = False
    return tables.chain_plans.remember(plan_key, found)


@dataclass(frozen=True, eq=False)
class _WalkPlan:
    """The tokens a loop row walks (see :meth:`LazyIndex._loop_row`), or a
    row with no loop: the same for every state with the same live first
    bytes (and loop), cached per vocabulary. Each starts at ``positions``,
    in the state its first byte ``first_bytes`` leads to, or in the loop's
    state where ``skipped``.
    Assembling them took ~70 us of numpy calls a cold row."""

    tokens: np.ndarray       # int64
    first_bytes: np.ndarray  # int64
    positions: np.ndarray    # int64
    skipped: np.ndarray      # bool
    packing: _Packing = field(default_factory=_Packing)


def _walk_plan(tables: _VocabularyTables, live: np.ndarray, loop: tuple | None = None) -> _WalkPlan:
    """The :class:`_WalkPlan` of a row whose live first bytes are ``live``
    (int64), cached per vocabulary: with ``loop`` = ``(first, tail_key,
    rest)`` (see :meth:`LazyIndex._loop_row`), the tokens starting with the
    live bytes outside ``first``, then ``rest``; without, every token
    starting with a live byte."""
    if loop is None:
        plan_key = (live.tobytes(),)
    else:
        first, tail_key, rest = loop
        live = live[~first[live]]
        plan_key = (np.packbits(first).tobytes(), tail_key, live.tobytes())
    found = tables.walk_plans.get(plan_key)
    if found is not None:
        return found
    tokens = _grouped(tables.by_first_byte, tables.first_offsets, live)
    positions, skipped = np.ones(len(tokens), dtype=np.int64), np.zeros(len(tokens), dtype=bool)
    if loop is not None:
        tokens, positions = np.concatenate((tokens, rest.tokens)), np.concatenate((positions, rest.positions))
        skipped = np.concatenate((skipped, rest.skipped))
    found = _WalkPlan(tokens, tables.columns[0][tokens].astype(np.int64), positions, skipped)
    for array in (found.tokens, found.first_bytes, found.positions, found.skipped):
        array.flags.writeable = False
    return tables.walk_plans.remember(plan_key, found)


@dataclass(frozen=True, eq=False)
class _LoopRow:
    """The tokens of a row that need no walk, and the states they end in
    (one for a loop row, one per length for a chain row)."""

    mask: np.ndarray  # uint32 words
    ends: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class _TokenRow:
    """What walking the vocabulary from one state found: the walked tokens
    that keep the automaton alive and the state each ends in, plus (when most
    characters lead to one state that loops on most characters) the tokens
    that reach that state and stay there, found with no walk."""

    tokens: np.ndarray
    ends: np.ndarray
    loop: _LoopRow | None

    def successors(self) -> np.ndarray:
        """The distinct states the row's tokens lead to."""
        if self.loop is None:
            return _distinct(self.ends)
        return _distinct(np.append(self.ends, np.array(self.loop.ends, dtype=self.ends.dtype)))


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for a 1-d integer array, without its first call's
    import of numpy.ma (10 ms, inside some schema's first mask)."""
    if len(values) < 2:
        return values.copy()
    if _cwalk is not None and len(values) > 64 and values.dtype == STATE_DTYPE:
        # a cold row's ~9k end states, tens of them distinct: marked in C (np.sort was ~150 us)
        marks = np.zeros(int(values.max()) + 1, dtype=np.uint8)
        found = np.empty(len(values), dtype=np.int64)
        count = _cwalk.distinct(np.ascontiguousarray(values), marks, found)
        return np.sort(found[:count]).astype(values.dtype)
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values, how many times each occurs)`` of a 1-d integer array."""
    ordered = np.sort(values)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.diff(np.append(starts, len(ordered)))


def _grouped(items: np.ndarray, offsets: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The ``items`` of ``groups``, where group g is ``items[offsets[g]:offsets[g + 1]]``."""
    return items[_ranges(offsets[groups], offsets[groups + 1])]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(lo - (ends - lengths), lengths) + np.arange(total)


def _set_bits(mask: np.ndarray, tokens: np.ndarray) -> None:
    """Set the bits of ``tokens`` in a ``uint32`` mask (a few tokens: sorted,
    each word's bits reduced first, one OR a word; many: packed from a bool
    per token)."""
    if not len(tokens):
        return
    if _cwalk is not None:
        _cwalk.set_bits(mask, tokens.astype(np.int64, copy=False))
        return
    if len(tokens) > 256:
        # Many tokens: a bool per token packed into words costs about the same
        # whatever their number (a loop row's ~3k walked tokens: 36 -> 12 us).
        allowed = np.zeros(len(mask) * 32, dtype=bool)
        allowed[tokens] = True
        mask |= np.packbits(allowed, bitorder="little").view(MASK_WORD)
        return
    ordered = np.sort(tokens)
    words = ordered >> 5
    bits = np.left_shift(np.uint32(1), (ordered & 31).astype(np.uint32))
    starts = np.flatnonzero(np.concatenate(([True], words[1:] != words[:-1])))
    mask[words[starts]] |= np.bitwise_or.reduceat(bits, starts)


class LazyIndex(MaskServing):
    """The serving API of :class:`~tokendfa.runtime.index.Index`, computed on demand.

    Build one with ``Index.from_regex(pattern, vocabulary, lazy=True)`` or
    ``Index.from_schema(schema, vocabulary, lazy=True)``; a
    :class:`~tokendfa.runtime.guide.Guide` walks it like an index. Thread-safe:
    any number of guides on any number of threads share one lazy index.

    ``config.max_states`` bounds the states of the lazy byte automaton
    (:class:`~tokendfa.analysis.errors.BuildLimitError` when a request needs
    more). :meth:`start_completion` fills the remaining token rows in a
    background thread; :meth:`complete` returns the eager :class:`Index`.

    ``deferred`` (a :class:`~tokendfa.analysis.lazydfa.DefinitionSource`;
    a schema's recursion, see :mod:`tokendfa.schema.compiler`) gives the
    definitions that are computed when a match first reaches them, and are
    added to ``definitions`` as they are: the index then holds the schema
    compiler, and through it the user's schema, for as long as it lives.
    Such a definition is computed under the lock that resolving cells takes,
    and under the limits of the request that reaches it (the construction's,
    ``complete()``'s and the background completion's time limit; none while
    serving, as for any fragment the lazy automaton compiles).
    """

    def __init__(self, pattern: str, vocabulary: Vocabulary, config: BuildConfig | None = None, *,
                 definitions: dict[str, str] | None = None,
                 metadata: dict[str, Any] | None = None, index_type: Any = None,
                 deferred: DefinitionSource | None = None) -> None:
        started = time.perf_counter()
        self._pattern = pattern
        # With `deferred` (a schema's recursion, see tokendfa.schema.compiler), the
        # automaton pulls definitions from it as matches reach them, and
        # `definitions` is the dict they are added to: kept, not copied.
        self._definitions = dict(definitions or {}) if deferred is None else definitions
        self._vocabulary = vocabulary
        self._config = config or BuildConfig()
        # The runtime passes its Index class down (the builder never imports it);
        # without one, complete() gives the built arrays and metadata.
        self._index_type = index_type
        max_states = self._config.max_states
        self._dfa = LazyByteDFA(pattern, definitions=deferred or self._definitions or None,
                                max_states=DEFAULT_MAX_LAZY_STATES if max_states is None else max_states)
        self._tables = vocabulary_tables(vocabulary)
        self._tokens = vocabulary.tokens
        self._vocab_size = vocabulary.size
        self._words = self._tables.num_words
        self._eos = tuple(sorted(set(int(t) for t in vocabulary.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        # Byte-live is token-live when every byte a match can hold is a token
        # of its own. With all 256 bytes tokens (byte-level BPE) the pattern's
        # alphabet is not needed, which would compile every definition.
        single = self._tables.single_byte
        # Nor with deferred definitions, which it would compute whole (the
        # recursion unrolled every way): the token walk then checks liveness.
        self._covered = bool(single.all()) or (
            deferred is None and bool(np.all(single[self._dfa.byte_alphabet()])))
        self._token_live: dict[int, bool] = {}
        self._loops: dict[int, tuple[int, int, bool]] = {}
        self._wide_targets: dict[int, int] = {}
        self._chain_links: dict[tuple[int, tuple[int, int, bool]], int] = {}  # (state, class) -> next or DEAD
        self._raw_rows: dict[int, _TokenRow] = {}
        self._lock = threading.RLock()
        self._masks: dict[int, np.ndarray] = {}        # state -> its allowed-token bitset
        self._successors: dict[int, np.ndarray] = {}   # state -> distinct states its tokens reach
        self._distinct_masks: dict[bytes, np.ndarray] = {}
        self._table_view: tuple[np.ndarray | None, memoryview | None] = (None, None)
        self._completed = None
        self._complete_lock = threading.Lock()
        self._completion: threading.Thread | None = None
        self._completion_error: BaseException | None = None
        self._stop = threading.Event()
        if not self._is_token_live(INITIAL):
            raise VocabularyCoverageError(
                f"the vocabulary cannot express the pattern {pattern[:200]!r}: no sequence of "
                "its tokens spells a match", state=INITIAL)
        self._seconds = round(time.perf_counter() - started, 4)
        self._extra_metadata = dict(metadata or {})
        self._metadata: dict[str, Any] | None = None

    # --- description ---------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        """As an eager index's, with ``build.method`` ``"lazy"``; made on first
        use (the vocabulary's fingerprint hashes every token: 0.25 s on Qwen)."""
        if self._metadata is None:
            # a copy (one C call, atomic under the GIL): deferred definitions may be
            # added by a thread serving a mask meanwhile
            readable = readable_pattern(self._pattern, dict(self._definitions))
            vocabulary = self._vocabulary
            metadata = {
                "kind": "regex",
                "pattern": readable,
                "vocabulary": {"name": vocabulary.name, "source": vocabulary.source,
                               "fingerprint": vocabulary.fingerprint, "size": vocabulary.size},
                "build": {"method": "lazy", "seconds": self._seconds},
            }
            metadata.update(self._extra_metadata)
            self._metadata = metadata
        return self._metadata

    @property
    def vocabulary(self) -> Vocabulary:
        return self._vocabulary

    @property
    def pattern(self) -> str:
        return self.metadata.get("pattern", "")

    @property
    def initial_state(self) -> int:
        return INITIAL

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._eos

    @property
    def byte_dfa(self) -> LazyByteDFA:
        return self._dfa

    @property
    def num_served_states(self) -> int:
        """States whose token row has been computed so far."""
        return len(self._masks)

    def __repr__(self) -> str:
        return (f"LazyIndex(pattern={self.pattern[:80]!r}, vocabulary={self._vocabulary.name!r}, "
                f"served={len(self._masks)}, byte_states={self._dfa.num_states})")

    # --- serving ---------------------------------------------------------------

    def get_mask(self, state: int) -> np.ndarray:
        """Allowed tokens as a read-only ``uint32`` bitset (EOS bits in final states)."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._serve(state)
        return mask

    def is_final(self, state: int) -> bool:
        if state not in self._masks:
            self._serve(state)
        return bool(self._dfa.finals[state])

    def is_allowed(self, state: int, token_id: int) -> bool:
        mask = self.get_mask(state)
        self._check_token(token_id)
        return bool((mask.item(token_id >> 5) >> (token_id & 31)) & 1)

    def forced_tokens(self, state: int) -> np.ndarray:
        """Always empty in lazy mode (the fast-forward table needs the whole
        index: :meth:`complete` has it). Empty is a valid answer: a generator
        then samples every token, as it would where nothing is forced."""
        self.get_mask(state)
        return np.zeros(0, dtype=np.int32)

    def advance(self, state: int, token_id: int) -> int:
        """The state after ``token_id``; EOS keeps a final state. Raises
        :class:`~tokendfa.analysis.errors.TokenNotAllowedError` for a token
        the state does not allow."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._serve(state)
        if not 0 <= token_id < self._vocab_size:
            self._check_token(token_id)
        if (mask.item(token_id >> 5) >> (token_id & 31)) & 1:
            data = self._tokens[token_id]
            if data is None:
                return state  # EOS in a final state
            # Computing the token row resolved the cells on the way (see the
            # module docstring) but those inside wide characters the NFA
            # placed, and the mask was published after it: the current table
            # has them, and a cell still UNKNOWN (-1) is resolved below.
            table = self._dfa.table
            held, view = self._table_view
            if held is not table:
                view = memoryview(table)
                self._table_view = (table, view)
            for byte in data:
                following = view[state, byte]
                if following < 0:
                    # a cell no row needed: the rows of states past the first
                    # byte of a wide character are not computed when the NFA
                    # shows where the character ends (LazyByteDFA.wide_target)
                    following = self._dfa.step(state, byte)
                    view = memoryview(self._dfa.table)
                state = following
            return state
        raise TokenNotAllowedError(self._refusal(state, token_id), state=state, token_id=token_id)

    def write_mask_into(self, state: int, out, row: int | None = None) -> None:
        """Copy the bitset of ``state`` into a caller's int32/uint32 buffer
        (numpy or torch, one row or a batch; see :meth:`Index.write_mask_into`)."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._serve(state)
        if type(out) is np.ndarray and (out.dtype == _INT32 or out.dtype == _UINT32):
            target = out if row is None else self._row_of(out, row)
            if target.shape == mask.shape:
                # The common call: a numpy row as wide as the vocabulary. One
                # assignment (uint32 into int32 keeps the bits) where the
                # general copy's checks and two assignments took ~1.4 us of
                # a ~4 us warm step.
                target[...] = mask
                return
        self._copy_mask(mask, out, row)

    # --- completion -------------------------------------------------------------

    def start_completion(self) -> None:
        """Compute every reachable state's token row in a daemon thread,
        breadth-first from the initial state, so later requests find them
        ready. Serving goes on meanwhile; a request for a row the thread is
        computing waits for that one row. Past ``max_states`` the thread
        stops and :meth:`wait_completion` re-raises the error."""
        with self._lock:
            if self._completion is None:
                self._completion = threading.Thread(target=self._complete_rows, daemon=True,
                                                    name="tokendfa-lazy-completion")
                self._completion.start()

    def wait_completion(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`start_completion`'s thread; True when every row is done."""
        thread = self._completion
        if thread is None:
            return False
        thread.join(timeout)
        if self._completion_error is not None:
            raise self._completion_error
        return not thread.is_alive()

    def _complete_rows(self) -> None:
        try:
            with self._config.limits():  # a thread of its own: the limits are installed here
                self._complete_rows_under_limits()
        except BaseException as exc:  # reported by wait_completion
            self._completion_error = exc

    def _complete_rows_under_limits(self) -> None:
        seen = {INITIAL}
        frontier = [INITIAL]
        while frontier and not self._stop.is_set():
            following = []
            for state in frontier:
                if self._stop.is_set():
                    return
                self.get_mask(state)
                for nxt in self._successors[state].tolist():
                    if nxt not in seen:
                        seen.add(nxt)
                        following.append(nxt)
            frontier = following

    def complete(self):
        """The eager :class:`~tokendfa.runtime.index.Index` of the same
        pattern: the lazy automaton explored to the end, minimised, and
        built as ``Index.from_regex`` builds it (array for array the same).
        Computed once; raises the eager build's errors."""
        with self._complete_lock, self._config.limits():  # the time limit from here on
            if self._completed is None:
                transitions, finals = self._dfa.explore()
                dfa = canonical_byte_dfa(transitions, finals, pattern=self._pattern)
                built = build_index(self._pattern, self._vocabulary, self._config,
                                    definitions=dict(self._definitions) or None, dfa=dfa)
                metadata = dict(built.metadata)
                metadata.update(self._extra_metadata)
                built = BuiltIndex(built.arrays, metadata)
                self._completed = (built if self._index_type is None else
                                   self._index_type(built.arrays, metadata, self._vocabulary))
            return self._completed

    def save(self, path, *, compress: bool = True) -> None:
        """Write the completed index (:meth:`complete`) to ``path``."""
        self.complete().save(path, compress=compress)

    def close(self) -> None:
        """Stop the completion thread (if any) after the row it is on."""
        self._stop.set()

    # --- computing a token row -----------------------------------------------------

    def _serve(self, state: int) -> np.ndarray:
        if not isinstance(state, (int, np.integer)) or not INITIAL <= state < self._dfa.num_states:
            raise InvalidStateError(
                f"state {state} is not a state of this lazy index (states are 1.."
                f"{self._dfa.num_states - 1} so far, 1 initial)")
        with self._lock:
            mask = self._masks.get(state)
            if mask is None:
                row = self._raw_row(state)
                tokens, ends, loop = row.tokens, row.ends, row.loop
                if not self._covered:
                    if len(ends):
                        distinct = _distinct(ends)
                        live = np.array([self._is_token_live(int(e)) for e in distinct.tolist()])
                        keep = np.isin(ends, distinct[live])
                        tokens, ends = tokens[keep], ends[keep]
                    if loop is not None and not all(self._is_token_live(end) for end in loop.ends):
                        loop = None
                    row = _TokenRow(tokens, ends, loop)
                if loop is None:
                    mask = np.zeros(self._tables.num_words, dtype=MASK_WORD)
                    _set_bits(mask, tokens)
                else:
                    # Most of the row is a cached mask: copy it and add the few
                    # walked tokens (a JSON string on Qwen: 147k tokens loop,
                    # ~1.6k of the 6.1k others survive the walk).
                    mask = loop.mask.copy()
                    _set_bits(mask, tokens)
                if self._dfa.finals[state]:
                    _set_bits(mask, np.array(self._eos, dtype=np.int64))
                mask = self._distinct_masks.setdefault(mask.tobytes(), mask)
                mask.flags.writeable = False
                self._successors[state] = row.successors()
                self._raw_rows.pop(state, None)
                self._masks[state] = mask  # published last: readers take no lock
            return mask

    def _raw_row(self, state: int) -> _TokenRow:
        """Every token whose bytes keep the automaton alive from ``state``,
        and the state each leads to.

        Inside a JSON string (or a key, or a pattern's wide class) most
        characters lead to one state that every character but a few loops
        on. The tokens whose first character goes there and whose other
        characters loop are then a cached mask (:func:`_loop_mask`), all
        ending in that state, and only the others are walked: a cold string
        state on Qwen walks 6.1k tokens instead of 147k (7-9 ms before)."""
        found = self._raw_rows.get(state)
        if found is not None:
            return found
        first_row = self._dfa.row(state)
        loop, plan, states = self._loop_row(state, first_row)
        tokens, positions = plan.tokens, plan.positions
        found_tokens, found_ends = [], []
        if _cwalk is not None:
            # (a token with nothing left to walk ends where it starts)
            packed = plan.packing.bytes_for(self._tables, tokens, positions)
            self._compiled_walk(tokens, states, positions, packed, found_tokens, found_ends)
        else:
            ended = self._tables.lengths[tokens] == positions
            found_tokens.append(tokens[ended])
            found_ends.append(states[ended])
            keep = ~ended
            self._numpy_walk(tokens[keep], states[keep], positions[keep], found_tokens, found_ends)
        tokens = np.concatenate(found_tokens) if found_tokens else np.zeros(0, dtype=np.int64)
        ends = np.concatenate(found_ends) if found_ends else np.zeros(0, dtype=STATE_DTYPE)
        row = _TokenRow(tokens, ends, loop)
        if not self._covered:
            self._raw_rows[state] = row
        return row

    def _numpy_walk(self, tokens: np.ndarray, states: np.ndarray, positions: np.ndarray,
                    found_tokens: list, found_ends: list) -> None:
        """:meth:`_compiled_walk` without the compiled module: the tokens
        walked a byte a level in numpy, the last few in Python."""
        dfa = self._dfa
        columns, lengths = self._tables.columns, self._tables.lengths
        # A level walks three arrays: the flat index of each token's next byte
        # in ``columns`` (position * V + token: the token and the position are
        # that index's remainder and quotient), its state, and the bytes left
        # after the next one; a token whose last byte was read leaves with the
        # dead ones. About 15 numpy calls a level where there were 25: slow
        # cold rows spent ~0.6 ms in this loop's own numpy calls (of ~1.6).
        vocab_size = columns.shape[1]
        flat_columns = columns.reshape(-1)
        at = positions * vocab_size + tokens
        left = lengths[tokens] - positions - 1
        while len(at):
            if len(at) <= 48 or int(left.sum()) + len(left) <= _PYTHON_WALK_BYTES:
                # A few long tokens (runs of spaces, dashes) would take a
                # numpy level per byte, ~40 us each: walk them in Python.
                tokens = at % vocab_size
                ends = self._walk_rest(tokens, states, at // vocab_size)
                alive = ends != DEAD
                found_tokens.append(tokens[alive])
                found_ends.append(ends[alive])
                break
            following = dfa.successors(states, flat_columns[at])
            # The loop shortcut: a token in a state whose every byte from here
            # on loops on that state ends there. Tried where the next byte
            # loops, so states that merely pass (a prefix of a declared key)
            # are not asked for their loop sets (a whole row each). Inside a
            # key after a declared key's first letter, tokens ("product") go
            # on in the free key's state: 1.2 -> 0.6 ms for such a cold row.
            if len(at) >= _LOOP_MIN_SHARE:
                looping = np.flatnonzero(following == states)
                if len(looping) >= _LOOP_MIN_SHARE:
                    stay = self._staying(at[looping] % vocab_size, states[looping], at[looping] // vocab_size)
                    if len(stay):
                        done = looping[stay]
                        found_tokens.append(at[done] % vocab_size)
                        found_ends.append(states[done])
                        following[done] = DEAD  # taken: dropped from the walk below
            alive = following != DEAD
            last = left == 0
            ended = alive & last
            if ended.any():
                found_tokens.append(at[ended] % vocab_size)
                found_ends.append(following[ended])
                alive &= ~last
            at, states, left = at[alive] + vocab_size, following[alive], left[alive] - 1

    def _compiled_walk(self, tokens: np.ndarray, states: np.ndarray, positions: np.ndarray,
                       packed: _PackedBytes | None, found_tokens: list, found_ends: list) -> None:
        """Walk ``tokens`` from ``states`` at ``positions`` with the compiled
        loop (:mod:`tokendfa.builder._cwalk`), appending the live ones and their
        end states to ``found_*``. A cell not resolved yet is resolved as
        the walk meets it (``LazyByteDFA.step_held``, the automaton's lock
        held for the whole walk). Walking in passes instead, the stopped
        tokens' cells resolved together between them, paid ~40 us of numpy
        a pass, and a token spelling ``"},{"`` needed a pass a byte. No loop
        shortcut: a byte costs a few nanoseconds here (~15 ns a Qwen token
        from a JSON string state), and asking a state for its loop set
        resolves its whole ASCII row. With ``packed`` (the plan's bytes in
        walking order) the walk reads memory in order."""
        tables = self._tables
        ended_tokens = np.empty(len(tokens), dtype=np.int64)
        ended_states = np.empty(len(tokens), dtype=np.int64)
        states = np.ascontiguousarray(states, dtype=np.int64)
        dfa = self._dfa
        with dfa.resolving():  # once for the row, not once a cell (step_held)
            if packed is not None:
                ended = _cwalk.walk_packed(dfa, packed.data, packed.offsets, states, ended_tokens, ended_states)
            else:
                ended = _cwalk.walk(dfa, tables.spellings, tables.spelling_offsets,
                                    np.ascontiguousarray(tokens, dtype=np.int64), states,
                                    np.ascontiguousarray(positions, dtype=np.int64), ended_tokens, ended_states)
        if ended:
            # walk_packed gives entries of the plan: their tokens
            found_tokens.append(tokens[ended_tokens[:ended]] if packed is not None else ended_tokens[:ended])
            found_ends.append(ended_states[:ended].astype(STATE_DTYPE))

    def _walk_rest(self, tokens: np.ndarray, states: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The states ``tokens`` end in, from ``states`` at ``positions``."""
        dfa, spellings = self._dfa, self._tokens
        table = dfa.table
        view = memoryview(table)  # ~0.1 us a byte where dfa.step costs ~0.45
        ends = []
        for token, state, at in zip(tokens.tolist(), states.tolist(), positions.tolist()):
            for byte in spellings[token][at:]:
                following = view[state, byte]
                if following <= DEAD:  # one test a byte for both (UNKNOWN is -1)
                    if following == UNKNOWN:
                        following = dfa.step(state, byte)
                        if dfa.table is not table:  # the table grew: read the new one
                            table = dfa.table
                            view = memoryview(table)
                    if following == DEAD:
                        state = DEAD
                        break
                state = following
            ends.append(state)
        return np.array(ends, dtype=states.dtype)

    def _staying(self, tokens: np.ndarray, states: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Positions of the ``tokens`` (each in the state and at the byte
        position of the same place) whose every byte from there on loops on
        that state (:func:`_last_leaving`), so that they end in it."""
        values, runs = _runs(states)
        # A state few tokens reach is not worth its loop set: _loop computes
        # its whole row and walks every UTF-8 range from it (on a schema with
        # many keys this was 0.9 ms of each 2.6 ms cold row); walking those
        # tokens on costs less.
        crowded = values[runs >= _LOOP_MIN_SHARE]
        stay = np.zeros(len(tokens), dtype=bool)
        for state in crowded.tolist():
            key = self._loop(state)
            if not key[0] and not key[1]:
                continue
            last = _last_leaving(self._tables, key)
            here = states == state
            stay[here] = last[tokens[here]] < positions[here]
        return np.flatnonzero(stay)

    def _loop_row(self, state: int, first_row: np.ndarray
                  ) -> tuple[_LoopRow | None, _WalkPlan | _ChainPlan, np.ndarray]:
        """``(loop, plan, states)``: the tokens of the row found with no walk
        (or None); the plan of the spelled tokens left to walk, whose first
        byte is live, each with the position of its next byte
        (:class:`_WalkPlan`, :class:`_ChainPlan`); the state each one's walk
        starts in.

        With ``target`` the state most ASCII bytes lead to from ``state``, a
        token needs no walk when its first character leads there (its first
        byte is one of those, or it starts with a character of two or more
        bytes and every such character leads there) and each later character
        loops on ``target``: it ends in ``target``. Everything else is
        walked, so the row is exact."""
        tables = self._tables
        live = np.flatnonzero(first_row)
        ascii_row = first_row[:128]
        # the state most ASCII bytes lead to (the smallest id of a tie): a
        # Counter of 128 ints, ~5 us where sorting them in numpy took ~40
        counts = Counter(ascii_row.tolist())
        counts.pop(DEAD, None)
        most = max(counts.values(), default=0)
        tail = None
        if most >= _LOOP_MIN_BYTES:
            target = min(s for s, count in counts.items() if count == most)
            tail_key = self._loop(target)
            # the bytes and characters that lead to the target
            first = np.zeros(256, dtype=bool)
            first[:128] = ascii_row == target
            if self._wide_target(state) == target:
                first[_LEAD_BYTES] = True
            if self._covered and not _loops_on(tail_key, first[:128]):
                # they do not loop there: a counted class
                return self._chain_row(state, first_row, first, target, live)
            tail = _tail_tokens(tables, tail_key)
        if tail is None:
            plan = _walk_plan(tables, live)
            return None, plan, first_row[plan.first_bytes]
        mask, rest = _loop_mask(tables, first, tail_key, tail)
        plan = _walk_plan(tables, live, (first, tail_key, rest))
        states = first_row[plan.first_bytes]
        states[plan.skipped] = target
        return _LoopRow(mask, (target,)), plan, states

    def _chain_row(self, state: int, first_row: np.ndarray, first: np.ndarray, target: int, live: np.ndarray
                   ) -> tuple[_LoopRow, _ChainPlan, np.ndarray]:
        """:meth:`_loop_row` where most characters lead to a state that does
        not loop on them: inside a counted class (``[0-9a-f]{40}``, a string
        with ``minLength``), each character of the class leads one state
        further along a chain. A token made of n characters of the class ends
        n states on, with no walk, while the chain lasts; a token that leaves
        the class after m characters resumes its walk m states on. Before,
        such a row walked every token starting with a class character a byte
        a level: 5 ms a step along a 40-character hash on Qwen.

        Used with a covering vocabulary only (the chain's ends are then live)."""
        tables = self._tables
        key = _class_key(first[:128], bool(first[_LEAD_BYTES[0]]))
        runs = _class_runs(tables, key)
        limit = min(max(len(runs.full_offsets) - 2, (len(runs.partial_offsets) - 1) // 256), _CHAIN_MAX)
        chain, dies = self._chain(state, target, key, max(limit, 1))
        length = len(chain) - 1
        along = np.array(chain, dtype=first_row.dtype)
        plan = _chain_plan(tables, key, runs, length, dies, np.flatnonzero(first), live[~first[live]])
        states = np.where(plan.links >= 0, along[plan.links], first_row[plan.first_bytes])
        mask = _chain_mask(tables, key, length, runs)
        return _LoopRow(mask, tuple(sorted(set(chain[1:])))), plan, states

    def _chain(self, state: int, target: int, key: tuple[int, int, bool], limit: int) -> tuple[list[int], bool]:
        """``([state, target, ...], dies)``: while every character of the
        class ``key`` leads from the last state to one next state, that
        state, up to ``limit`` characters on (a state that loops repeats
        itself); ``dies`` when every ASCII byte of the class is dead after
        the last."""
        wanted = key[0] | key[1] << 64
        chain = [state, target]
        current = target
        while len(chain) <= limit:
            following = self._chain_links.get((current, key))
            if following is None:
                # the class's ranges only (a cell at a time cost ~30 us a
                # link; the whole ASCII row discovered the states past a
                # quote and a backslash at every link: sp_0's steps inside a
                # maxLength-1024 string found ~30 states each)
                following = self._dfa.class_successor(current, wanted)
                following = following if following >= DEAD else _NO_LINK
                if following not in (DEAD, _NO_LINK) and key[2] and self._wide_target(current) != following:
                    following = _NO_LINK
                self._chain_links[(current, key)] = following
            if following in (DEAD, _NO_LINK):
                return chain, following == DEAD
            if following == current:
                chain.extend([current] * (limit + 1 - len(chain)))
                break
            chain.append(following)
            current = following
        return chain, False

    def _loop(self, state: int) -> tuple[int, int, bool]:
        """``(low, high, wide)``: the ASCII bytes that lead from ``state`` back
        to it (bits 0-63 and 64-127), and whether every character of two or
        more bytes does too."""
        found = self._loops.get(state)
        if found is None:
            # the ASCII cells only: the whole row would discover a state past
            # each first byte of a wide character, which _wide_target does not need
            ascii_row = self._dfa.ascii_row(state)
            found = self._loops[state] = _class_key(ascii_row == state, self._wide_target(state) == state)
        return found

    def _wide_target(self, state: int) -> int:
        """The one state every character of two or more bytes leads to from
        ``state`` (checked on each range of UTF-8 sequences), or -1."""
        found = self._wide_targets.get(state)
        if found is None:
            read = self._dfa.wide_target(state)  # off the NFA, when it shows one state
            if read is not None:
                found = self._wide_targets[state] = read if read != DEAD else -1
                return found
            reached: set[int] = set()
            asked: dict[tuple[int, int, int], set[int]] = {}  # sequences share their later ranges
            for sequence in WIDE_SEQUENCES:
                current = {state}
                for lo, hi in sequence:
                    following = set()
                    for at in current:
                        # The first byte's whole row, as before (the row of
                        # ``state`` is needed anyway, and resolving it in the
                        # same order keeps the state ids); only the cells of
                        # the range from the states a sequence leads to.
                        if at == state:
                            following.update(self._dfa.row(at)[lo:hi + 1].tolist())
                        else:
                            key = (at, lo, hi)
                            if key not in asked:
                                asked[key] = self._dfa.range_successors(at, lo, hi)
                            following |= asked[key]
                    current = following
                    if DEAD in current:
                        break
                reached |= current
                if DEAD in reached or len(reached) > 1:
                    break
            found = self._wide_targets[state] = (next(iter(reached))
                                                 if len(reached) == 1 and DEAD not in reached else -1)
        return found

    def _is_token_live(self, state: int) -> bool:
        """Whether some sequence of tokens leads from ``state`` to a match.

        With a covering vocabulary every non-dead state is. Otherwise a
        breadth-first search over token rows from ``state`` looks for a
        final state or a state known live; if it finds none, every state it
        reached is known dead (their futures were all explored)."""
        if self._covered:
            return state != DEAD
        with self._lock:
            known = self._token_live.get(state)
            if known is not None:
                return known
            parent = {state: -1}
            queue = [state]
            found = -1
            for current in queue:  # grows while we go
                status = self._token_live.get(current)
                if status is None and self._dfa.finals[current]:
                    status = True
                if status:
                    found = current
                    break
                if status is False:
                    continue
                for nxt in self._raw_row(current).successors().tolist():
                    if nxt not in parent:
                        parent[nxt] = current
                        queue.append(nxt)
            if found < 0:
                for visited in parent:
                    self._token_live[visited] = False
                return False
            while found >= 0:
                self._token_live[found] = True
                found = parent[found]
            return True

    # --- helpers ------------------------------------------------------------------------

    def _refusal(self, state: int, token_id: int) -> str:
        if token_id in self._eos_set:
            return f"EOS token {token_id} is not allowed in state {state}: the match is not complete"
        text = self._tokens[token_id]
        spelled = f" ({text!r})" if text is not None else " (a special token)"
        return f"token {token_id}{spelled} is not allowed in state {state}"
