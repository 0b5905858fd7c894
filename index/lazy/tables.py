"""The lazy engine's per-vocabulary tables, made once per vocabulary and shared by every lazy index.

:class:`_VocabularyTables` holds what the token walk reads from a vocabulary
(its tokens by first byte, their bytes by position and one after another,
which bytes are single-byte tokens), and the caches the rows fill on use:

* *tail sets* (:class:`_TailTokens`): for a loop set (the characters that
  lead from a state back to it, e.g. inside a JSON string), the text tokens
  whose every character after the first loops, as a mask, and the others
  by first byte with the position where their walk may resume;
* *loop masks* (:func:`_loop_bits`): a tail set cut to the first bytes that
  lead into the loop; the tokens left to walk there are the tail set's
  rest of those first bytes, packed once for the loop set
  (:func:`_tail_packed`, what the compiled walk plans read) or gathered for
  each set of first bytes (:func:`_loop_mask`'s :class:`_LoopRest`, the
  numpy reference's);
* *class runs* (:class:`_ClassRuns`): how each token begins with characters
  of one class, for the chain rows of a counted class, and the chain masks
  (:func:`_chain_mask`);
* the walk and chain plans (:mod:`tokendfa.lazy.plans`).

The loop and chain rows' caches drop past their size the oldest entry not
read lately (:class:`_SecondChance`).

:func:`vocabulary_tables` makes the tables on first use and keeps them with
the vocabulary (:meth:`~tokendfa.vocab.vocabulary.Vocabulary.derived`);
:func:`prepare_vocabulary` makes them ahead, with a JSON string's loop rows
and class runs, for :meth:`Vocabulary.prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..analysis.native import native_module
from ..runtime.arrays import MASK_WORD
from ..vocab.vocabulary import Vocabulary
from .kernels import _cwalk, _distinct, _grouped, _in_huge_pages, _ranges, _set_bits, _stable_order
from .plans import (_CACHE_LOCK, _PLAN_MAX_TOKENS, _GroupedSpellings, _PackedBytes, _Packing, _PlanCache,
                    _SecondChance, _grouped_spellings, _packed)

# A counted class's runs in two compiled passes (index/lazy/_classruns.c);
# None where it is not built or TOKENDFA_NATIVE=0 (then numpy, same arrays).
_classruns = native_module(__package__ + "._classruns")

# A loop set whose tails hold fewer tokens than this is not worth a cache
# entry: walking them costs less than the entry's copy of the other tokens.
_LOOP_MIN_TOKENS = 4096
# Resume points (_skips) are looked for in the first this many bytes of at
# most this many tokens: a JSON string's rest is 6.1k tokens on Qwen; the
# rest of a narrow loop ([a-z]) is most of the vocabulary, which a cold row
# would pay 0.3 s to scan whole.
_SKIPS_WIDTH = 32
_SKIPS_MAX_TOKENS = 16384
# Entries kept per vocabulary and cache. A schema has a handful of loop sets
# (a free string, a pattern's class) and one first-byte set per state kind
# (inside a free string; inside a free key, after each prefix of a declared
# key); an entry is a mask of V bits (19 kB on Qwen), a tail set also the ids
# of the tokens outside it (~6k on Qwen for a JSON string).
_LOOP_CACHE_SIZE = 256
# Bytes that can start a text token (tail sets hold text tokens only).
_TEXT_FIRST_BYTES = np.r_[0:0x80, 0xC2:0xF5]
_LEAD_BYTES = np.r_[0xC2:0xF5]
_ALL_64 = (1 << 64) - 1  # a loop set's half, complemented as a uint64


@dataclass(frozen=True, eq=False)
class _VocabularyTables:
    """What the lazy walk needs from a vocabulary, computed once per vocabulary."""

    columns: np.ndarray        # uint8[L, V]: byte d of every token in row d (Vocabulary.byte_matrix, transposed)
    lengths: np.ndarray        # int32[V]: 0 for tokens that are not text
    by_first_byte: np.ndarray  # int64[T]: the spelled tokens by spelling (so by first byte), then id
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
    # (each a _SecondChance of at most _LOOP_CACHE_SIZE entries)
    tail_sets: dict = field(default_factory=lambda: _SecondChance())   # loop set -> _TailTokens | None
    last_leaving: dict = field(default_factory=lambda: _SecondChance())  # loop set -> int16[V] (see _last_leaving)
    loop_masks: dict = field(default_factory=lambda: _SecondChance())  # (first bytes, loop set) -> (mask, _LoopRest)
    loop_bits: dict = field(default_factory=lambda: _SecondChance())   # (first bytes, loop set) -> uint32 mask
    tail_ends: dict = field(default_factory=lambda: _SecondChance())   # loop set -> _TailEnds (pair rows)
    # The cached chain rows (see LazyIndex._chain_row), made on use:
    class_runs: dict = field(default_factory=lambda: _SecondChance())   # class -> _ClassRuns
    chain_masks: dict = field(default_factory=lambda: _SecondChance())  # (class, length) -> uint32 mask
    chain_plans: _PlanCache = field(default_factory=_PlanCache)  # (class, length, dies, other bytes) -> _ChainPlan
    walk_plans: _PlanCache = field(default_factory=_PlanCache)   # (first bytes, loop set, other bytes) -> _WalkPlan
    # The spelled tokens' bytes in by_first_byte order, made on use (see _grouped_spellings).
    grouped: _GroupedSpellings = field(default_factory=_GroupedSpellings)


def _vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    matrix, lengths = vocabulary.byte_matrix()
    # By spelling (equal spellings by id), hence by first byte: a token
    # shares its longest common prefix with the one before it, which the
    # compiled walk walks once (see _common_prefixes).
    order = vocabulary.sorted_spellings()[1]
    order = order[lengths[order] > 0]
    offsets = np.searchsorted(matrix[order, 0], np.arange(257))
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
    """The lazy walk's tables for ``vocabulary``, made on first use and kept
    with it (:meth:`Vocabulary.derived`)."""
    return vocabulary.derived(_TABLES_KEY, _prepared_tables)


def prepare_vocabulary(vocabulary: Vocabulary) -> None:
    """Make the lazy engine's per-vocabulary tables now (what
    :meth:`Vocabulary.prepare` calls, through the runtime's preparer), and
    the walk plans of the rows with one live printable byte (a declared
    key's next character: :func:`tokendfa.lazy.warmup.make_key_plans`)."""
    from .warmup import make_key_plans

    make_key_plans(vocabulary_tables(vocabulary))


def tables_ready(vocabulary: Vocabulary) -> bool:
    """Whether the lazy engine's tables for ``vocabulary`` are made already."""
    return vocabulary.has_derived(_TABLES_KEY)


_TABLES_KEY = "lazy-walk"


def _prepared_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    """The tables, with the loop rows of a JSON string made ahead (every
    character but ``"``, ``\\`` and the controls loops inside one): every
    schema with a free string needs them, and a fresh process would pay
    ~6 ms for them inside its first string's mask. And the runs of the same
    class for the chain rows of a string with ``maxLength`` or
    ``minLength`` (~5 ms inside its first character's mask otherwise;
    Snowplow/sp_0 and Github_ultra/o65424 in MaskBench's sample)."""
    return _made_ahead(_vocabulary_tables(vocabulary))


# The tables' arrays a cold row's passes read whole (a new loop set's tail
# set, a counted class's runs, a plan's tokens by first byte), copied into
# 2 MB pages (:func:`~tokendfa.lazy.kernels._in_huge_pages` says why); not
# the lengths, which the vocabulary holds too (a copy would be a second).
_HUGE_ARRAYS = ("by_first_byte", "first_char", "spellings", "spelling_offsets", "tail_low", "tail_high", "tail_wide")


def _made_ahead(tables: _VocabularyTables) -> _VocabularyTables:
    """``tables`` with their hot arrays in 2 MB pages (:data:`_HUGE_ARRAYS`)
    and a JSON string's loop rows and class runs made (see
    :func:`_prepared_tables`)."""
    tables = replace(tables, **_in_huge_pages({name: getattr(tables, name) for name in _HUGE_ARRAYS}))
    string = np.ones(128, dtype=bool)
    string[:0x20] = string[ord('"')] = string[ord("\\")] = False
    key = _class_key(string, True)
    tail = _tail_tokens(tables, key)
    if tail is not None:
        first = np.zeros(256, dtype=bool)
        first[:128] = string
        first[_LEAD_BYTES] = True
        _loop_mask(tables, first, key, tail)
        _tail_packed(tables, tail)
        # the class of a pair of states inside a string (~2 ms on Qwen; see _tail_ends)
        _tail_ends(tables, key, tail)
    _class_runs(tables, key)
    if _cwalk is not None:
        _grouped_spellings(tables)
    return tables


# The arrays of _VocabularyTables (and of its ByteColumns, prefixed "columns."),
# what tokendfa.lazy.table_store keeps in the cache folder; the caches are
# made again on use.
_TABLE_ARRAYS = ("columns", "lengths", "by_first_byte", "first_offsets", "single_byte", "first_char",
                 "spellings", "spelling_offsets", "tail_low", "tail_high", "tail_wide")
_COLUMN_ARRAYS = ("order", "sorted_lengths", "counts", "starts", "data", "matrix")


def table_arrays(vocabulary: Vocabulary) -> tuple[dict[str, np.ndarray], int]:
    """The lazy walk's tables of ``vocabulary`` (made if they are not) as
    named arrays, and the mask's word count: what :func:`adopt_table_arrays`
    takes back."""
    tables = vocabulary_tables(vocabulary)
    arrays = {name: getattr(tables, name) for name in _TABLE_ARRAYS}
    arrays.update({f"columns.{name}": getattr(tables.byte_columns, name) for name in _COLUMN_ARRAYS})
    return arrays, tables.num_words


def adopt_table_arrays(vocabulary: Vocabulary, arrays: dict[str, np.ndarray], num_words: int) -> None:
    """Give ``vocabulary`` the tables :func:`table_arrays` made for a
    vocabulary of the same fingerprint (in another process), with the byte
    matrix and column layout they hold, instead of computing them (~0.7 s
    for Gemma 3's 262,144 tokens on the loaded 2-core machine); the JSON
    string's loop rows are made as :func:`prepare_vocabulary` makes them.
    ``ValueError`` when the arrays do not fit the vocabulary."""
    from ..analysis.signatures import ByteColumns

    missing = [name for name in (*_TABLE_ARRAYS, *(f"columns.{n}" for n in _COLUMN_ARRAYS))
               if name not in arrays]
    if missing:
        raise ValueError(f"tables without {missing[0]!r}")
    size = vocabulary.size
    columns = ByteColumns(*(arrays[f"columns.{name}"] for name in _COLUMN_ARRAYS))
    lengths = arrays["lengths"]
    if (num_words != (size + 31) // 32 or lengths.shape != (size,) or columns.matrix.ndim != 2
            or columns.matrix.shape[0] != size or arrays["columns"].shape != columns.matrix.shape[::-1]):
        raise ValueError("tables of another vocabulary's size")
    # The caller matched the vocabulary's fingerprint; this only catches
    # tables that do not hold together (a check per token costs 0.08 s on Gemma).
    total = int(lengths.sum(dtype=np.int64))
    offsets = arrays["spelling_offsets"]
    if (arrays["spellings"].shape != (total,) or offsets.shape != (size + 1,)
            or int(offsets[-1]) != total or columns.data.shape != (total,)
            or not np.array_equal(np.diff(offsets), lengths)):   # ~1 ms on Gemma
        raise ValueError("tables that do not hold together")
    for array in arrays.values():
        array.flags.writeable = False
    tables = _VocabularyTables(num_words=num_words, byte_columns=columns,
                               **{name: arrays[name] for name in _TABLE_ARRAYS})
    vocabulary.adopt_byte_columns(columns, lengths)
    vocabulary.adopt_derived(_TABLES_KEY, _made_ahead(tables))


@dataclass(frozen=True, eq=False)
class _TailTokens:
    """For one loop set ``(low, high, wide)`` of :meth:`LazyIndex._loop`: the
    text tokens whose every character after the first is in it, and the
    other spelled tokens by first byte."""

    mask: np.ndarray          # uint32 words: the tokens whose tail loops
    rest: np.ndarray          # int64: the other spelled tokens, in by_first_byte's order
    rest_offsets: np.ndarray  # int64[257]: those starting with byte b are rest[o[b]:o[b+1]]
    # int16, beside rest: where the walk of a text token may resume in the loop's
    # state when its first character leads there (its first byte that leaves the
    # loop); 0 for the tokens that are not text (walked from their first byte).
    # A cold JSON string walked its 128 long rest tokens ("            \n",
    # "\\Controllers") a byte a level; most now start one byte from their end.
    rest_skips: np.ndarray
    # rest's bytes from their resume points (at least 1), packed once for
    # every loop row of the set (see _tail_packed).
    packing: _Packing = field(default_factory=_Packing)


def _remember(cache: "_SecondChance", key, value, size: int = _LOOP_CACHE_SIZE):
    """Put ``value`` in one of the per-vocabulary caches (a
    :class:`~tokendfa.lazy.plans._SecondChance`), making room past ``size``.
    Readers take no lock (a dict lookup); two threads may compute the same
    entry, and either copy is right."""
    limit = max(size, 1)
    with _CACHE_LOCK:
        cache.make_room(lambda: len(cache) >= limit)
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
        # Shrunk in place (the cache keeps it, and the buffer was sized for
        # every token): a copy wrote its ~0.5-1 MB again, ~120-240 page
        # faults in a fresh fork at each new loop set.
        count = len(rest) - outside
        rest.resize(outside, refcheck=False)
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
    if _cwalk is not None:
        # each token's bytes read in a row: a new loop set's tail tokens
        # (a pattern's class) took 2-6 ms on Qwen with numpy's passes over
        # 32 byte columns, inside the row that meets the set; ~0.3-0.5 ms so
        found = np.empty(len(tokens), dtype=np.int16)
        _cwalk.skips(tables.spellings, tables.spelling_offsets, loops.view(np.uint8),
                     np.ascontiguousarray(tokens, dtype=np.int64), tables.first_char, found)
        return found
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
    in by_first_byte's order, with the position their walk starts at (their
    resume point, at least 1) and whether they start it in the loop's state
    (they have a resume point). Cached with the loop's mask: the same for
    every state of a kind (each JSON string value of a schema): gathering
    them costs ~60 us of numpy calls, paid once, not at every cold row."""

    tokens: np.ndarray       # int64
    positions: np.ndarray    # int64
    skipped: np.ndarray      # bool
    first_bytes: np.ndarray  # uint8: each token's first byte (what a walk plan copies, not gathers)
    # Their bytes from their positions, packed once here (compiled module
    # only; None without it, or past _PLAN_MAX_TOKENS tokens, whose plans
    # are not kept either): a walk plan copies them (_cwalk.pack_plan) where
    # packing them by token id at each new plan's first walk met a cache
    # miss or two a token (~60 us of a ~4.6k-token JSON string plan).
    # ~15 bytes a token, beside the ~18 of the arrays above.
    packed: _PackedBytes | None = None


def _loop_bits(tables: _VocabularyTables, first: np.ndarray, tail_key: tuple[int, int, bool],
               tail: _TailTokens, first_key: bytes | None = None) -> np.ndarray:
    """The tokens whose first byte is in ``first`` (bool[256]) and whose tail
    is in the loop set, as a uint32 mask, cached per vocabulary: the tail
    set's mask, kept or cleared by the tokens of the side of ``first``
    (among the bytes a text token can start with) that starts fewer
    tokens. ``first_key``: ``first`` packed (``np.packbits(first).tobytes()``),
    where the caller has it."""
    key = (np.packbits(first).tobytes() if first_key is None else first_key, tail_key)
    found = tables.loop_bits.get(key)
    if found is None and _cwalk is not None:
        # in one C call, where the numpy below took ~10 and two fresh masks
        found = np.frombuffer(_cwalk.loop_bits(tail.mask, tables.by_first_byte, tables.first_offsets,
                                               np.ascontiguousarray(first).view(np.uint8)), dtype=MASK_WORD)
        _remember(tables.loop_bits, key, found)
    elif found is None:
        among = first[_TEXT_FIRST_BYTES]
        starting, others = _TEXT_FIRST_BYTES[among], _TEXT_FIRST_BYTES[~among]
        # The bits of the side with fewer tokens, set token by token: a JSON
        # string's ~40 other first bytes start ~2k tokens, where ORing their
        # 40 first-byte masks read 0.8 MB (0.16-0.41 ms a new row kind, cold).
        sizes = np.diff(tables.first_offsets)
        side = np.zeros(tables.num_words, dtype=MASK_WORD)
        fewer = starting if sizes[starting].sum() <= sizes[others].sum() else others
        _set_bits(side, _grouped(tables.by_first_byte, tables.first_offsets, fewer))
        found = side & tail.mask if fewer is starting else tail.mask & ~side
        found.flags.writeable = False
        _remember(tables.loop_bits, key, found)
    return found


@dataclass(frozen=True, eq=False)
class _TailEnds:
    """How the tokens of a tail set end, by first byte: what the row of a
    pair of states (``LazyIndex._pair_row``) needs to name the states its
    tokens end in, which there depend on a token's last character."""

    last: np.ndarray    # bool[256, 256]: [b, e]: a token of two or more characters starts with b, ends with e
    single: np.ndarray  # bool[256]: [b]: a token of one character starts with b


def _tail_ends(tables: _VocabularyTables, key: tuple[int, int, bool], tail: _TailTokens) -> _TailEnds:
    """The :class:`_TailEnds` of the tail set ``tail`` of ``key``, computed
    once per vocabulary and set (a pass over its tokens in numpy, ~2 ms on
    Qwen; a JSON string's is made with the vocabulary's tables)."""
    found = tables.tail_ends.get(key)
    if found is None:
        bits = np.unpackbits(tail.mask.view(np.uint8), bitorder="little")[:len(tables.lengths)]
        tokens = np.flatnonzero(bits)
        first, lengths = tables.columns[0][tokens], tables.lengths[tokens]
        last = tables.spellings[tables.spelling_offsets[tokens] + lengths - 1]
        longer = lengths > tables.first_char[tokens]
        ends = np.zeros(65536, dtype=bool)
        ends[(first[longer].astype(np.int64) << 8) | last[longer]] = True
        ends = ends.reshape(256, 256)
        single = np.zeros(256, dtype=bool)
        single[first[~longer]] = True
        found = _remember(tables.tail_ends, key, _TailEnds(ends, single))
    return found


def _pair_rest(tables: _VocabularyTables, first: np.ndarray, key: tuple[int, int, bool], tail: _TailTokens,
               first_key: bytes) -> tuple[np.ndarray, _LoopRest]:
    """:func:`_loop_mask` for the row of a pair of states
    (``LazyIndex._pair_row``): the mask (:func:`_loop_bits`'s), and the
    tail set's rest starting with the bytes of ``first``, each walked from
    its first byte (in a pair the state where a token leaves the set
    depends on the character before, so no walk resumes there); cached
    per vocabulary beside the loop rows' under a key of its own."""
    cache_key = (first_key, key, "pair")
    found = tables.loop_masks.get(cache_key)
    if found is None:
        mask = _loop_bits(tables, first, key, tail, first_key)
        starts = np.flatnonzero(first)
        tokens = tail.rest[_ranges(tail.rest_offsets[starts], tail.rest_offsets[starts + 1])]
        positions = np.ones(len(tokens), dtype=np.int64)
        packed = _packed(tables, tokens, positions) if _cwalk is not None and len(tokens) <= _PLAN_MAX_TOKENS else None
        rest = _LoopRest(tokens, positions, np.zeros(len(tokens), dtype=bool), tables.columns[0][tokens], packed)
        for array in (rest.tokens, rest.positions, rest.skipped, rest.first_bytes):
            array.flags.writeable = False
        found = _remember(tables.loop_masks, cache_key, (mask, rest))
    return found


def _tail_packed(tables: _VocabularyTables, tail: _TailTokens) -> _PackedBytes | None:
    """The bytes of the tail set's rest from their resume points (at least
    1), packed in rest order once for every loop row of the set (compiled
    module only): ``_cwalk.group_plan`` reads a loop row's rest from them,
    the groups of its first bytes, where a :class:`_LoopRest` gathered and
    packed them again for each set of first bytes (~300-400 us each in a
    fresh fork: 57 such sets in MaskBench's sample, a declared key's
    prefixes inside a free key). None past ``_PLAN_MAX_TOKENS`` tokens (a
    narrow loop's rest is most of the vocabulary): those rows keep plans.
    With their shared prefixes, in one pass over the grouped spellings
    (``_cwalk.tail_pack``)."""
    if _cwalk is None:
        return None
    found = tail.packing.packed
    if found is None and len(tail.rest) <= _PLAN_MAX_TOKENS:
        # In one C call, writing only the packed arrays: numpy's gathers of
        # the rest's lengths and places in by_first_byte, their sums and the
        # positions made int64 wrote ~330 fresh pages in a fresh fork on
        # Github_medium o1's 42k-token rest, MaskBench's worst step (~2.7 ms
        # of it, against ~1.2 ms now; see benchmarks/HISTORY.md).
        grouped, grouped_offsets = _grouped_spellings(tables)
        count = len(tail.rest)
        data = np.empty(len(grouped), dtype=np.uint8)  # room for every spelling: only the pages written count
        offsets = np.empty(count + 1, dtype=np.int32)
        shared = np.empty(count, dtype=np.uint8)
        used = _cwalk.tail_pack(tail.mask, tables.by_first_byte, tables.first_offsets, grouped, grouped_offsets,
                                tail.rest, tail.rest_offsets, tail.rest_skips, data, offsets, shared)
        data.resize(used, refcheck=False)  # in place: the buffer is this function's own
        for array in (data, offsets, shared):
            array.flags.writeable = False
        found = tail.packing.packed = _PackedBytes(data, offsets, shared)
    return found


def _loop_mask(tables: _VocabularyTables, first: np.ndarray, tail_key: tuple[int, int, bool],
               tail: _TailTokens, first_key: bytes | None = None) -> tuple[np.ndarray, _LoopRest]:
    """The tokens whose first byte is in ``first`` (bool[256]) and whose tail
    is in the loop set, and the :class:`_LoopRest` of the others starting
    there; cached per vocabulary (the mask is :func:`_loop_bits`'s; the
    compiled row reads the rest from :func:`_tail_packed` instead).
    ``first_key``: ``first`` packed (``np.packbits(first).tobytes()``),
    where the caller has it."""
    key = (np.packbits(first).tobytes() if first_key is None else first_key, tail_key)
    found = tables.loop_masks.get(key)
    if found is None:
        mask = _loop_bits(tables, first, tail_key, tail, key[0])
        starts = np.flatnonzero(first)
        if _cwalk is not None:
            # in one C call, the bytes read from the grouped spellings, where
            # numpy's gathers and a pack by token id took ~2.9 ms of
            # WashingtonPost wp_76's step 24 in a fresh fork (29.6k of a
            # 74k-token rest; MaskBench's worst lazy step on 440eebc), ~1.4 so
            grouped, grouped_offsets = _grouped_spellings(tables)
            *arrays, data, offsets = _cwalk.loop_rest(tail.mask, tables.by_first_byte, tables.first_offsets, grouped,
                                                      grouped_offsets, tail.rest, tail.rest_offsets, tail.rest_skips,
                                                      starts, _PLAN_MAX_TOKENS)
            tokens, positions, skipped, first_bytes = (np.frombuffer(array, dtype=dtype) for array, dtype
                                                       in zip(arrays, (np.int64, np.int64, bool, np.uint8)))
            packed = None if data is None else _PackedBytes(np.frombuffer(data, dtype=np.uint8),
                                                            np.frombuffer(offsets, dtype=np.int32))
            rest = _LoopRest(tokens, positions, skipped, first_bytes, packed)
        else:
            picked = _ranges(tail.rest_offsets[starts], tail.rest_offsets[starts + 1])
            skips = tail.rest_skips[picked]
            tokens = tail.rest[picked]
            positions = np.maximum(skips, 1).astype(np.int64)
            rest = _LoopRest(tokens, positions, skips > 0, tables.columns[0][tokens])
            for array in (rest.tokens, rest.positions, rest.skipped, rest.first_bytes):
                array.flags.writeable = False
        found = _remember(tables.loop_masks, key, (mask, rest))
    return found


@dataclass(frozen=True, eq=False)
class _ClassRuns:
    """How each text token begins with characters of one class ``(low,
    high, wide)`` (a key as :meth:`LazyIndex._loop` makes them), computed
    once per vocabulary and class for the chain rows (~10 ms on Qwen in
    numpy, ~2 compiled)."""

    chars: np.ndarray          # int16[V]: characters in the token's leading run (0: not text; int32
                               # in a vocabulary with a token of over 32,767 bytes)
    ascii: np.ndarray          # int16[V] (likewise): bytes of that run before its first byte of 128 or more
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
    # the counts of characters and bytes as int16 (half the fresh pages of a
    # fork child's first chain row: see _classruns.c), int32 past 32,767 bytes
    counts = np.int16 if int(lengths.max(initial=0)) <= np.iinfo(np.int16).max else np.int32
    if _classruns is not None and counts == np.int16:
        # the whole table in two compiled passes (_classruns.c says why)
        # an ASCII class's full tokens found from the tail bytes (_classruns.c):
        # Github_easy o10012's 92-byte class on Qwen, the call in a fresh fork
        # child 2.3 -> 2.0 ms (warm 1.30 -> 0.93; best of 10 and 30, 3.3-3.5
        # on 440eebc), the tables in 2 MB pages
        parts = _classruns.class_runs(tables.spellings, tables.spelling_offsets, tables.first_char,
                                      inside.view(np.uint8), key[2], tables.tail_low, tables.tail_high,
                                      tables.tail_wide.view(np.uint8))
        found = _ClassRuns(*(np.frombuffer(part, dtype=np.int16 if at < 2 else np.int64)
                             for at, part in enumerate(parts)))
        return _remember(tables.class_runs, key, found)
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
    irregular = np.flatnonzero(irregular_tokens)
    irregular = irregular[_stable_order(tables.columns[0][irregular])]  # by first byte then id, as _classruns.c
    irregular_offsets = np.searchsorted(tables.columns[0][irregular], np.arange(257))
    found = _ClassRuns(chars.astype(counts), ascii_run.astype(counts), by_chars.astype(np.int64),
                       full_offsets.astype(np.int64),
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


def _chain_mask(tables: _VocabularyTables, key: tuple[int, int, bool], length: int,
                runs: _ClassRuns) -> np.ndarray:
    """The tokens made of 1 to ``length`` characters of a class, cached per
    vocabulary. Made from the mask one length longer or shorter where that
    one is kept (along a counted string's last ``_CHAIN_MAX`` characters
    each row asks for the next shorter one): the tokens of exactly one
    length cleared or set, where setting all of a JSON string's ~140k cost
    ~90 us (Snowplow sp_0, Qwen, in a fresh fork)."""
    found = tables.chain_masks.get((key, length))
    if found is None:
        offsets, top = runs.full_offsets, len(runs.full_offsets) - 1

        def exactly(count: int) -> np.ndarray:  # the tokens of ``count`` characters (none past the longest)
            return runs.full_by_chars[offsets[min(count, top)]:offsets[min(count + 1, top)]]

        longer = tables.chain_masks.get((key, length + 1))
        shorter = tables.chain_masks.get((key, length - 1)) if length > 1 else None
        if longer is not None:
            # the bits of the longest tokens, inverted, and the longer mask's
            # in the same array: one new mask (ufunc.at cost ~40 us on 3k tokens)
            found = np.zeros(tables.num_words, dtype=MASK_WORD)
            _set_bits(found, exactly(length + 1))
            np.invert(found, out=found)
            np.bitwise_and(found, longer, out=found)
        elif shorter is not None:
            found = shorter.copy()
            _set_bits(found, exactly(length))
        else:
            found = np.zeros(tables.num_words, dtype=MASK_WORD)
            _set_bits(found, runs.full_by_chars[offsets[1]:offsets[min(length + 1, top)]])
        found.flags.writeable = False
        _remember(tables.chain_masks, (key, length), found)
    return found
