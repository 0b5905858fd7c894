"""Walk plans and chain plans: which tokens a cold token row walks, and from where.

A state's token row (:meth:`tokendfa.lazy.index.LazyIndex._raw_row`) walks
only the tokens that no cached mask answers. Which tokens those are, the
byte each starts at and the state it starts in depend only on the row's
live first bytes and its loop or chain, not on the state: a *plan*
(:class:`_WalkPlan` for loop rows and rows with no loop, :class:`_ChainPlan`
for chain rows inside a counted class) is made once per vocabulary and kept
in a bounded cache (:class:`_PlanCache`). A plan's
remaining bytes are packed in walking order (:class:`_PackedBytes`), so that
the compiled walk reads memory in order: a walk plan's when it is made, from
the tokens' bytes grouped by first byte (:class:`_GroupedSpellings`) and its
loop's rest packed once; a chain plan's by its first walk. With the compiled
module a plan's arrays are made in C (``_cwalk.walk_plan``,
``_cwalk.chain_plan``; a loop row's by ``_cwalk.group_plan``, from the
groups and its loop's rest packed once, :func:`_group_plan`); the numpy code
beside each is the reference. A row with no loop whose plan is not kept may
walk the groups of its live bytes in place instead (``LazyIndex._span_row``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .kernels import _cwalk, _grouped, _in_huge_pages

if TYPE_CHECKING:
    from .tables import _ClassRuns, _TailTokens, _VocabularyTables

# Walk plans and chain plans kept per vocabulary (each kind: at most 1024
# plans in 64 MB, see _PlanCache), and the most tokens a kept plan has.
# Vocabulary.prepare() makes ~170 walk plans (tokendfa.lazy.warmup; ~15 MB
# on Qwen), and 84 JSONSchemaBench schemas outside MaskBench's sample built
# ~300 distinct ones more (benchmarks/warm_plan_keys.py): a count of 64 would
# drop the warm-up's plans within the first few schemas; the byte bound is
# what limits memory. A JSON string's plan has 4.6k tokens, a maxLength-1024
# string's chain plans up to 37k.
_PLAN_CACHE_SIZE = 1024
_PLAN_MAX_TOKENS = 65536
_PLAN_CACHE_BYTES = 64 << 20
# A walk plan's arrays as _cwalk.walk_plan gives them (tokens, first bytes,
# positions, skipped), and its rest (tokens, first bytes, positions,
# skipped) where the row has no loop. Narrow (a walk plan 10 bytes a token
# and a chain plan 13, with int32 packed offsets, where int64 took 25 and
# 8): page faults are ~19% of a MaskBench fork's p99-band time and plans
# were their largest source after the walk; on MaskBench's sample (8 a
# source, Qwen) the plan caches hold 45 MB instead of 92 and the forks
# fault 150k times instead of 163k (benchmarks/lazy_step_faults.py).
_PLAN_DTYPES = (np.int32, np.uint8, np.int32, bool)
# A chain plan's (tokens, links, first bytes, positions).
_CHAIN_DTYPES = (np.int32, np.int32, np.uint8, np.int32)
_NO_REST = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=bool))
_CACHE_LOCK = threading.Lock()  # the per-vocabulary caches are shared by every lazy index


class _SecondChance(dict):
    """A per-vocabulary cache whose reads (``get``, ``[]``) mark the entry
    read; :meth:`make_room` drops the oldest entry not read since it was
    made or last passed over, a read one being passed over once (moved to
    the newest end, its mark cleared: a second chance, what least recently
    used would keep, for a flag written on a read). The entries every
    schema reads (a JSON string's, the plans ``Vocabulary.prepare()``
    makes) stay while schemas with entries of their own come and go. A mark
    is a set add without a lock: a lost or stale one only moves an
    eviction. The loop and chain rows' caches are these, and
    :class:`_PlanCache` keeps its plans in one."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set = set()

    def get(self, key, default=None):
        if key in self:
            self.read.add(key)
            return dict.__getitem__(self, key)
        return default

    def __getitem__(self, key):
        found = dict.__getitem__(self, key)
        self.read.add(key)
        return found

    def clear(self) -> None:
        dict.clear(self)
        self.read.clear()

    def make_room(self, full, dropped=None) -> None:
        """Drop entries while ``full()`` (under _CACHE_LOCK), calling
        ``dropped(key)`` for each; a read entry is passed over at most once
        in one call, so one pass over the entries ends it."""
        passed, held = 0, len(self)
        while self and full():
            oldest = next(iter(self))
            value = dict.pop(self, oldest)
            if oldest in self.read and passed < held:
                self.read.discard(oldest)
                dict.__setitem__(self, oldest, value)   # to the newest end
                passed += 1
                continue
            self.read.discard(oldest)
            if dropped is not None:
                dropped(oldest)


class _PlanCache:
    """One vocabulary's walk or chain plans by key, dropped past
    ``_PLAN_CACHE_SIZE`` plans or ``_PLAN_CACHE_BYTES`` oldest first, a plan
    read since it was made or last passed over getting a second chance
    (:class:`_SecondChance`): the plans ``Vocabulary.prepare()`` makes stay
    as long as schemas keep reading them, however many plans are made after
    them. None of more
    than ``_PLAN_MAX_TOKENS`` tokens is kept (a row whose every byte is
    live would keep ~6 MB on Qwen; such rows are rare and their walk costs
    more than their plan). A plan is counted at what it will hold packed
    (:class:`_Packing`). The 64k bound keeps sp_0's 37k-token chain plans,
    which would otherwise be made again at each of their rows (0.9-1.9 ms,
    a dozen of its slow steps). Readers take no lock (a dict lookup); two threads may
    make the same plan, and either copy is right."""

    def __init__(self) -> None:
        self._plans = _SecondChance()
        self._sizes: dict = {}
        self._held = 0

    def get(self, key):
        return self._plans.get(key)

    def values(self) -> list:
        return list(self._plans.values())

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, key) -> bool:
        """Whether a plan is kept under ``key`` (not a read: no mark)."""
        return key in self._plans

    def remember(self, key, plan):
        """Keep ``plan`` under ``key`` if it is small enough; return it."""
        if len(plan.tokens) > _PLAN_MAX_TOKENS:
            return plan
        size = _plan_bytes(plan)
        if size > _PLAN_CACHE_BYTES:
            return plan
        def full() -> bool:
            return len(self._plans) >= _PLAN_CACHE_SIZE or self._held + size > _PLAN_CACHE_BYTES

        def dropped(oldest) -> None:
            self._held -= self._sizes.pop(oldest)

        with _CACHE_LOCK:
            self._plans.make_room(full, dropped)
            self._plans[key] = plan
            self._held += size - self._sizes.get(key, 0)
            self._sizes[key] = size
        return plan


def _plan_bytes(plan: "_WalkPlan | _ChainPlan") -> int:
    """What a plan holds once packed: its arrays, and 13 bytes a token for
    its packed bytes, their int32 offsets and shared prefixes (Qwen's
    tokens average 6.6 bytes)."""
    return sum(value.nbytes for value in vars(plan).values() if isinstance(value, np.ndarray)) + 13 * len(plan.tokens)


class _GroupedSpellings:
    """The spelled tokens' bytes one after another in ``by_first_byte``
    order (``data``, uint8; entry j at ``data[offsets[j]:offsets[j + 1]]``),
    made once per vocabulary by :func:`_grouped_spellings`: a walk plan's
    tokens of a first byte are then read forward through one stretch of
    memory when the plan is packed (``_cwalk.pack_plan``), where reading
    them by id met a cache miss or two a token. ~1 MB and ~1.2 MB of
    offsets on Qwen. With them, ``prefixes`` (uint8, one an entry): how
    many leading bytes each entry shares with the one before it
    (``_cwalk.common_prefixes``, at most 255), from which a span row's walk
    goes on (``_cwalk.walk_span``). Two threads may both make them; either
    copy is right."""

    __slots__ = ("arrays", "prefixes")

    def __init__(self) -> None:
        self.arrays: tuple[np.ndarray, np.ndarray] | None = None
        self.prefixes: np.ndarray | None = None


def _grouped_spellings(tables: _VocabularyTables) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of :class:`_GroupedSpellings` (compiled module only)."""
    found = tables.grouped.arrays
    if found is None:
        tokens = tables.by_first_byte
        offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(tables.lengths[tokens], out=offsets[1:])
        data = np.empty(int(offsets[-1]), dtype=np.uint8)
        _cwalk.pack(tables.spellings, tables.spelling_offsets, tokens, np.zeros(len(tokens), dtype=np.int64), data)
        prefixes = np.empty(len(tokens), dtype=np.uint8)
        _cwalk.common_prefixes(data, offsets, prefixes)
        # read whole by new plans, in 2 MB pages (kernels._in_huge_pages)
        data, offsets, prefixes = _in_huge_pages({"data": data, "offsets": offsets, "prefixes": prefixes}).values()
        for array in (data, offsets, prefixes):
            array.flags.writeable = False
        tables.grouped.prefixes = prefixes  # before the arrays, which say both are made
        found = tables.grouped.arrays = (data, offsets)
    return found


def _grouped_prefixes(tables: _VocabularyTables) -> np.ndarray:
    """The ``prefixes`` of :class:`_GroupedSpellings` (compiled module only)."""
    _grouped_spellings(tables)
    return tables.grouped.prefixes


@dataclass(frozen=True, eq=False)
class _PackedBytes:
    """The bytes a plan's tokens have left to walk, in the plan's order, one
    token after another: entry i is ``data[offsets[i]:offsets[i + 1]]``.
    Walking these reads memory in order, where walking by token id met a
    cache miss or two a token (:func:`tokendfa.lazy._cwalk.walk_packed`):
    with the caches flushed, ~150-200 us by id against ~40-50 packed for a
    plan of ~4.5-6k Qwen tokens (Github_hard o668, Snowplow sp_0).
    ``shared`` (where kept): how many leading bytes entry i shares with
    entry i - 1 (``_cwalk.common_prefixes``, at most 255), walked once by
    ``_cwalk.walk_row`` where the two start in the same state; the entries
    of one first byte come in spelling order (``by_first_byte``), so
    neighbours share their prefixes."""

    data: np.ndarray     # uint8
    offsets: np.ndarray  # int32 (4 bytes a token, not 8), one more than the plan's tokens
    shared: np.ndarray | None = None  # uint8, one a token


_NO_PACKED = _PackedBytes(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int32))  # the rest of a row with no loop


class _Packing:
    """A plan's :class:`_PackedBytes`, made with a walk plan
    (``_cwalk.pack_plan``) or by a chain plan's first walk
    (``_cwalk.walk_and_pack`` copies each token's bytes as it reads them),
    and read by every later walk. Two threads may both pack; either copy is
    right. A loop row's plan keeps its ``loop_from`` here too
    (:func:`_loop_from`)."""

    __slots__ = ("packed", "loop_from")

    def __init__(self) -> None:
        self.packed: _PackedBytes | None = None
        self.loop_from: tuple[tuple[int, int], np.ndarray] | None = None

    def keep(self, data: bytes, offsets: np.ndarray, shared: np.ndarray | None = None) -> None:
        """Keep the bytes a walk packed (``data``, entry i at
        ``data[offsets[i]:offsets[i + 1]]``), with their shared prefixes
        (``shared``, computed here where not given)."""
        data = np.frombuffer(data, dtype=np.uint8)
        if shared is None:
            shared = np.empty(len(offsets) - 1, dtype=np.uint8)
            _cwalk.common_prefixes(data, offsets, shared)
        for array in (offsets, shared):
            array.flags.writeable = False
        self.packed = _PackedBytes(data, offsets, shared)


def _packed(tables: _VocabularyTables, tokens: np.ndarray, positions: np.ndarray) -> _PackedBytes:
    """The :class:`_PackedBytes` of ``tokens`` from ``positions``, packed in
    a pass of their own (what a chain plan's first walk,
    ``_cwalk.walk_and_pack``, keeps; a loop's rest for the pair rows and
    the numpy reference's :class:`_LoopRest`; a tail set's rest, which
    ``_cwalk.group_plan`` reads, is packed by ``_cwalk.tail_pack``)."""
    wide = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(tables.lengths[tokens] - positions, out=wide[1:])
    if wide[-1] > np.iinfo(np.int32).max:
        raise ValueError("more packed bytes than int32 offsets index")
    offsets = wide.astype(np.int32)
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
    ``first_bytes`` leads to. A chain row gathers two arrays from it, where
    assembling the tokens from cached groups takes ~20 numpy calls, ~0.35 ms
    of each cold step along sp_0's maxLength-1024 strings."""

    tokens: np.ndarray       # int32
    links: np.ndarray        # int32
    first_bytes: np.ndarray  # uint8: 1 byte a token, not 8 (a fork's faults and the caches' bytes)
    positions: np.ndarray    # int32
    packing: _Packing = field(default_factory=_Packing)


def _chain_plan(tables: _VocabularyTables, key: tuple[int, int, bool], runs: _ClassRuns, length: int,
                dies: int, first: np.ndarray, others: np.ndarray) -> _ChainPlan:
    """The :class:`_ChainPlan` of a chain of ``length`` links from states
    whose live bytes outside the class are ``others`` (int64); ``dies``:
    every ASCII byte of the class is dead after the last link (1 or True),
    every character of the class is (2: no token longer than the chain is
    walked), or neither (0 or False); ``first`` (bool[256]): the first
    bytes of the class's characters (given by ``key``); cached per
    vocabulary."""
    plan_key = (key, length, dies, others.tobytes())
    found = tables.chain_plans.get(plan_key)
    if found is not None:
        return found
    if dies == 2:
        found = _shorter_chain_plan(tables, plan_key, runs)
        if found is not None:
            return tables.chain_plans.remember(plan_key, found)
    starting = np.flatnonzero(first)
    if _cwalk is not None:
        # the four arrays in one C call, where numpy took ~20 (~150 us)
        arrays = (tables.by_first_byte, tables.first_offsets, tables.columns[0], others.astype(np.int64, copy=False),
                  runs.irregular, runs.irregular_offsets, starting.astype(np.int64, copy=False), runs.partial,
                  runs.partial_offsets, runs.chars, runs.full_by_chars, runs.full_offsets, runs.ascii)
        parts = _cwalk.chain_plan(*(np.ascontiguousarray(array) for array in arrays), length, dies)
        found = _ChainPlan(*(np.frombuffer(part, dtype=dtype) for part, dtype in zip(parts, _CHAIN_DTYPES)))
        return tables.chain_plans.remember(plan_key, found)
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
    # its last state (a longer ASCII run) or from their first byte; all dead
    # where every character of the class is (with a wide class, those with a
    # wide character in their run were ~12-36k of Qwen's tokens at the last
    # 1-4 characters of a counted string, each walked from its first byte).
    longer = np.concatenate((runs.full_by_chars[runs.full_offsets[min(length + 1, len(runs.full_offsets) - 1)]:],
                             runs.partial[runs.partial_offsets[min(256 * (length + 1), len(runs.partial_offsets) - 1)]:]))
    regular = runs.ascii[longer] > length
    if dies:
        keep = ~regular if dies == 1 else np.zeros(len(longer), dtype=bool)
        longer, regular = longer[keep], regular[keep]
    parts.append(longer)
    links.append(np.where(regular, length, -1).astype(np.int64))
    positions.append(np.where(regular, length, 1).astype(np.int64))
    tokens, positions = np.concatenate(parts).astype(np.int32), np.concatenate(positions).astype(np.int32)
    found = _ChainPlan(tokens, np.concatenate(links).astype(np.int32), tables.columns[0][tokens].astype(np.uint8),
                       positions)
    for array in (found.tokens, found.links, found.first_bytes, found.positions):
        array.flags.writeable = False
    return tables.chain_plans.remember(plan_key, found)


def _shorter_chain_plan(tables: _VocabularyTables, plan_key: tuple, runs: _ClassRuns) -> _ChainPlan | None:
    """The chain plan of ``plan_key`` (its class, length, ``dies`` 2 and
    other bytes), made from the kept plan one link longer, or None where
    there is none. With every longer token dropped, a plan is its first
    bytes' tokens, then the partial tokens by run length: the shorter plan
    is that one's first entries, less the partial tokens of exactly one
    more character, and so are its packed bytes where that one's first walk
    packed them. Along a counted string's last characters each row asks for
    the next shorter plan: ~70 us to make and ~130 us its first walk (it
    packs the plan) in a fresh fork (Snowplow sp_0, 26 lengths), where the
    views cost a few."""
    key, length, dies, others = plan_key
    longer = tables.chain_plans.get((key, length + 1, dies, others))
    if longer is None:
        return None
    offsets = runs.partial_offsets
    top = len(offsets) - 1
    dropped = int(offsets[min(256 * (length + 2), top)] - offsets[min(256 * (length + 1), top)])
    size = len(longer.tokens) - dropped
    found = _ChainPlan(longer.tokens[:size], longer.links[:size], longer.first_bytes[:size], longer.positions[:size])
    packed = longer.packing.packed
    if packed is not None:
        found.packing.packed = _PackedBytes(packed.data[:packed.offsets[size]], packed.offsets[:size + 1],
                                            None if packed.shared is None else packed.shared[:size])
    return found


@dataclass(frozen=True, eq=False)
class _WalkPlan:
    """The tokens a loop row walks (see :meth:`LazyIndex._loop_row`), or a
    row with no loop: the same for every state with the same live first
    bytes (and loop), cached per vocabulary. Each starts at ``positions``,
    in the state its first byte ``first_bytes`` leads to, or in the loop's
    state where ``skipped``. A loop row's plan made by :func:`_group_plan`
    comes packed and keeps no ``positions`` (None): an entry's position is
    its token's length less its packed bytes (:func:`_plan_positions`).
    Assembling them costs ~70 us of numpy calls, paid once per plan, not at
    every cold row."""

    tokens: np.ndarray       # int32
    first_bytes: np.ndarray  # uint8: 1 byte a token, not 8 (a fork's faults and the caches' bytes)
    positions: np.ndarray | None  # int32, or None where packed (see above)
    skipped: np.ndarray      # bool
    packing: _Packing = field(default_factory=_Packing)


def _plan_positions(tables: _VocabularyTables, plan: _WalkPlan) -> np.ndarray:
    """``plan.positions`` (int32), or where the plan keeps none (a
    :func:`_group_plan`'s, always packed) each entry's token length less
    its packed bytes."""
    if plan.positions is not None:
        return plan.positions
    offsets = plan.packing.packed.offsets
    return (tables.lengths[plan.tokens] - np.diff(offsets)).astype(np.int32)


def _walk_plan(tables: _VocabularyTables, live: np.ndarray, loop: tuple | None = None,
               first_key: bytes | None = None, outside: np.ndarray | None = None, kind: tuple = ()) -> _WalkPlan:
    """The :class:`_WalkPlan` of a row whose live first bytes are ``live``
    (int64), cached per vocabulary: with ``loop`` = ``(first, tail_key,
    rest)`` (see :meth:`LazyIndex._loop_row`), the tokens starting with the
    live bytes outside ``first``, then ``rest``; without, every token
    starting with a live byte. ``first_key`` (``first`` packed) and
    ``outside`` (those live bytes, int64), where the caller has them;
    ``kind`` is added to the cache key (a pair row's rest is not a loop
    row's of the same bytes: ``("pair",)``)."""
    if loop is None:
        plan_key = (live.tobytes(),) + kind
    else:
        first, tail_key, rest = loop
        live = live[~first[live]] if outside is None else outside
        plan_key = (np.packbits(first).tobytes() if first_key is None else first_key, tail_key, live.tobytes()) + kind
    found = tables.walk_plans.get(plan_key)
    if found is not None:
        return found
    if _cwalk is not None:
        # the four arrays in one C call, where numpy took ~15 (~70 us)
        rest_arrays = _NO_REST if loop is None else (rest.tokens, rest.first_bytes, rest.positions, rest.skipped)
        parts = _cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.ascontiguousarray(live, dtype=np.int64),
                                 *(np.ascontiguousarray(array) for array in rest_arrays))
        found = _WalkPlan(*(np.frombuffer(part, dtype=dtype) for part, dtype in zip(parts, _PLAN_DTYPES)))
        # packed now, reading the groups' bytes in order (_cwalk.pack_plan), not by the first walk
        rest_packed = _NO_PACKED if loop is None else rest.packed
        if rest_packed is not None:
            grouped, grouped_offsets = _grouped_spellings(tables)
            data, offsets = _cwalk.pack_plan(grouped, grouped_offsets, tables.first_offsets,
                                             np.ascontiguousarray(live, dtype=np.int64), rest_packed.data,
                                             rest_packed.offsets)
            found.packing.keep(data, np.frombuffer(offsets, dtype=np.int32))
        return tables.walk_plans.remember(plan_key, found)
    tokens = _grouped(tables.by_first_byte, tables.first_offsets, live)
    positions, skipped = np.ones(len(tokens), dtype=np.int64), np.zeros(len(tokens), dtype=bool)
    if loop is not None:
        tokens, positions = np.concatenate((tokens, rest.tokens)), np.concatenate((positions, rest.positions))
        skipped = np.concatenate((skipped, rest.skipped))
    tokens, positions = tokens.astype(np.int32), positions.astype(np.int32)
    found = _WalkPlan(tokens, tables.columns[0][tokens].astype(np.uint8), positions, skipped)
    for array in (found.tokens, found.first_bytes, found.positions, found.skipped):
        array.flags.writeable = False
    return tables.walk_plans.remember(plan_key, found)


# The ``dead`` of a loop state with no dead ASCII byte (see _group_plan).
_NO_DEAD = bytes(16)


def _loop_from(plan: _WalkPlan, tail_key: tuple[int, int, bool]) -> np.ndarray | None:
    """For each packed entry of the loop row's ``plan`` (compiled module
    only), where the run of the loop set's ASCII bytes (``tail_key``'s
    ``low`` and ``high``) that ends it begins (``_cwalk.loop_from``), made
    at the plan's first row and kept with it (the plan's key holds its loop
    set): ``_cwalk.walk_row`` ends an entry there, alive in the loop's
    state, where its shared prefix reaches that state, with no byte read.
    Most entries of a free key's row end so (qwen2.5: 13.6k of the 18.1k of
    Snowplow sp_0's key rows, 35 in MaskBench's walks of it; 9.3k of
    Github_hard o73917's 13.0k; 4.2k of Github_ultra o65424's 7.5k): the
    row's walk, replayed warm, 136 -> 81 us, 92 -> 58 and 51 -> 36. The
    pass costs ~1.7 us a thousand entries, once per plan: made at the
    plan's second row instead, its cost moved from the step that makes the
    plan into a cheaper one (perf, the MaskBench sample's 250-1500 us
    steps, one run each: 0.74% -> 1.87% of their samples). None where the
    plan is not packed."""
    packing = plan.packing
    found = packing.loop_from
    if found is not None and found[0] == tail_key[:2]:
        return found[1]
    packed = packing.packed
    if packed is None:
        return None
    runs = np.frombuffer(_cwalk.loop_from(packed.data, packed.offsets, tail_key[0], tail_key[1]), dtype=np.uint8)
    packing.loop_from = (tail_key[:2], runs)
    return runs


def _group_plan(tables: _VocabularyTables, first: np.ndarray, tail_key: tuple[int, int, bool], tail: _TailTokens,
                packed: _PackedBytes, first_key: bytes | None, outside: np.ndarray,
                dead: bytes = _NO_DEAD) -> _WalkPlan:
    """The :class:`_WalkPlan` of a loop row (compiled module only), the one
    :func:`_walk_plan` makes with the loop's rest (``tables._loop_mask``)
    and cached under the same key: the tokens starting with the live bytes
    ``outside`` (int64) of ``first`` (bool[256]), then the tail set's rest
    tokens starting with the bytes of ``first``, read from the vocabulary's
    groups and the rest packed once for the loop set (``packed``,
    ``tables._tail_packed``) by one C call (``_cwalk.group_plan``), its
    bytes packed with it. A row's first bytes need no rest of their own:
    making one and its plan cost ~300-400 us a new set of first bytes in a
    fresh fork (a declared key's prefix inside a free key: 57 sets in
    MaskBench's sample, ~25 ms of its steps of 0.25-1.5 ms).

    ``dead`` (16 bytes, bit b of byte b >> 3): the ASCII bytes dead in the
    loop's state. A rest token whose walk starts there (it has a resume
    point) with one of them dies at its first byte, and the plan leaves it
    out: the row is the same, its walk shorter. Inside a JSON string most
    of the rest are such (a control character or a quote where the string
    cannot end next): 2.2M of the 12.9M entries the cold rows of
    MaskBench's qwen2.5 sample walked. The plans of loop states with other
    dead bytes are other plans (the key holds them)."""
    plan_key = (np.packbits(first).tobytes() if first_key is None else first_key, tail_key, outside.tobytes())
    if dead != _NO_DEAD:
        plan_key += (dead,)
    found = tables.walk_plans.get(plan_key)
    if found is not None:
        return found
    grouped, grouped_offsets = _grouped_spellings(tables)
    tokens, first_bytes, skipped, data, offsets, shared = _cwalk.group_plan(
        tables.by_first_byte, tables.first_offsets, grouped, grouped_offsets,
        np.ascontiguousarray(outside, dtype=np.int64), tail.rest, tail.rest_offsets, tail.rest_skips, packed.data,
        packed.offsets, np.flatnonzero(first), np.frombuffer(dead, dtype=np.uint8), _grouped_prefixes(tables),
        packed.shared)
    # no positions (_plan_positions): 4 bytes an entry a fresh fork's new plan did not need to write
    found = _WalkPlan(np.frombuffer(tokens, dtype=np.int32), np.frombuffer(first_bytes, dtype=np.uint8), None,
                      np.frombuffer(skipped, dtype=bool))
    found.packing.keep(data, np.frombuffer(offsets, dtype=np.int32), np.frombuffer(shared, dtype=np.uint8))
    return tables.walk_plans.remember(plan_key, found)
