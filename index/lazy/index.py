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
  Most of a cold row is not walked at all: where most characters lead to one state that
  loops on them (inside a JSON string or key, a pattern's class), the tokens
  that go there and stay are a mask cached per vocabulary and loop set, the
  others start their walk where they first leave the loop, and tokens that
  reach a looping state mid-walk stop where nothing of theirs leaves it (see
  :meth:`LazyIndex._raw_row`; the compiled walk, where a token's prefix
  shared with the one before reaches the loop's state:
  :func:`~tokendfa.lazy.plans._loop_from`). A cold JSON string state on Qwen: ~0.6 ms,
  where walking its 147k tokens takes 7-9 ms. Inside a counted class
  (``[0-9a-f]{40}``, a string with ``minLength``) the characters lead one
  state further along a chain instead of looping: a token of n characters
  of the class ends n states on, found with no walk (:meth:`LazyIndex._chain_row`).
  Where a loop state has a partner whose cells are its own on a wider class
  (after ``[a-z]+$`` inside a string, the letters lead to the partner and
  the other characters back), a token of that class ends where its last
  character leads, found with no walk too (:meth:`LazyIndex._pair_row`).
  With the compiled module and a covering vocabulary, the row's glue is C
  too (:meth:`LazyIndex._compiled_row`): the walk plan's arrays (a loop
  row's read from the groups and its loop's rest packed once; a row with no
  loop and no plan kept walks the groups of its live bytes with none), the state
  each planned token starts in, and the mask and successors made from what
  the walk found, a C call each instead of ~30 numpy calls; the numpy code
  beside each (:meth:`LazyIndex._numpy_row`) is the reference the tests
  compare with and what ``TOKENDFA_NATIVE=0`` runs;
* :meth:`LazyIndex.advance` checks the token's bit and walks its bytes
  through the byte automaton's cells (a warm step's check and walk, and
  its mask's copy in :meth:`LazyIndex.write_mask_into`, are a C call each
  with the compiled module: ``_cwalk.advance_token``, ``_cwalk.copy_mask``),
  which computing the row mostly
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

import contextlib
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from ..analysis.closing import LazyDistances
from ..analysis.dfa import DEAD, INITIAL, STATE_DTYPE
from ..analysis.minimise import canonical_byte_dfa
from ..analysis.errors import (BuildLimitError, InvalidStateError, TokenNotAllowedError, check_id_type, id_type_error,
                               VocabularyCoverageError)
from ..analysis.lazydfa import (DEFAULT_MAX_LAZY_STATES, UNKNOWN, WIDE_SEQUENCES, ChainEnd, DefinitionSource,
                                LazyByteDFA)
from ..runtime.arrays import MASK_WORD
from ..runtime.serving import ClosingRow, MaskServing
from ..vocab.vocabulary import Vocabulary
from ..builder.config import BuildConfig
from .completion import _byte_state_map, _index_states_of_byte_states
from .kernels import _cwalk, _distinct, _mask_fingerprint, _runs, _set_bits
from .plans import (_ChainPlan, _PackedBytes, _WalkPlan, _chain_plan, _group_plan, _grouped_prefixes, _grouped_spellings,
                    _loop_from, _plan_positions, _walk_plan)
from .tables import (_LEAD_BYTES, _chain_mask, _class_key, _class_runs, _last_leaving, _loop_bits, _loop_mask,
                     _loops_on, _pair_rest, _tail_ends, _tail_packed, _tail_tokens, _TailTokens, vocabulary_tables)

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH", "DEFAULT_ROW_BUDGET"]


# The bytes of token rows a lazy index keeps (BuildConfig.row_budget): its
# distinct masks (a Qwen mask is 18,960 bytes) and each state's successors.
# Past it the least recently used rows are dropped and computed again when
# asked (the same answers: cells once resolved never change). 32 MiB holds
# ~1,700 distinct Qwen masks, more than a schema's generations visit
# (JSONSchemaBench instances: tens to a few hundred states a schema); the
# automaton's own states are bounded by max_states instead.
DEFAULT_ROW_BUDGET = 32 << 20
# What a kept row costs beyond its arrays' bytes: a dict entry or two, the
# array headers (measured with tracemalloc: ~0.3 kB a state, ~0.1 kB a mask).
_ROW_OVERHEAD = 320
_MASK_OVERHEAD = 128


# Free values of a schema nest this many levels in lazy mode, with no
# any_depth="auto" measurement (which builds whole automata at several depths,
# most of an eager schema's time to first mask). Each level is one shared
# definition, which the lazy automaton calls rather than copies and compiles
# only when a generation first enters it (tokendfa.analysis.lazydfa), so the
# depth costs nothing until a value goes that deep. Measured on 42
# JSONSchemaBench schemas (benchmarks/profile_lazy.py, qwen2.5, loaded machine):
# the NFA built before the first mask is the same at depth 8, 32 and 64 (p50
# 2.8k states; 1.8k at depth 2, where the lowest levels are written inline);
# the schema's regex grows by about 0.15 ms a level. Copying every level
# instead of calling it costs 0.05 s at depth 2 and 2.0 s at depth 5 on a small
# object schema.
LAZY_ANY_DEPTH = 32


# A state with fewer than this many ASCII bytes to one successor is walked
# token by token (literals, digits, keywords: their rows are cheap anyway).
_LOOP_MIN_BYTES = 16
# The rest of a walk goes on in Python (~0.3 us a byte) when it has at most
# this many bytes left: a numpy level costs ~40 us whatever its size.
_PYTHON_WALK_BYTES = 256
# A loop state's partner (LazyIndex._pair) is one that at least this many
# ASCII bytes lead to from it: with fewer, the loop's rest (the tokens that
# hold one) is small anyway.
_PAIR_MIN_BYTES = 8
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
_UNSET_LINK = -3  # a link not followed yet (_ChainLinks)
# How a chain read off the links ends (_read_chain, _cwalk.chain_links)
_CHAIN_MISSING, _CHAIN_FULL, _CHAIN_DIES, _CHAIN_STOPS = -1, 0, 1, 2
_NO_STATES = np.zeros(0, dtype=np.int64)  # the loop ends of a row with no loop
_NOT_ASKED = object()  # a loop state whose pair (LazyIndex._pair) was not asked yet
_INT32, _UINT32 = np.dtype(np.int32), np.dtype(np.uint32)  # the mask buffers write_mask_into takes as is


class _LoopRow:
    """The tokens of a row that need no walk, and the states they end in
    (one for a loop row, one per length for a chain row). A slotted class,
    not a frozen dataclass, whose ``__init__`` sets each field through
    ``object.__setattr__`` (one made every cold loop or chain row)."""

    __slots__ = ("mask", "ends", "states")

    def __init__(self, mask: np.ndarray, ends: tuple[int, ...], states: np.ndarray | None = None) -> None:
        self.mask = mask  # uint32 words
        self.ends = ends
        # ``ends`` as int64, as ``_cwalk.finish_row`` reads them (a loop
        # row's is its target's array, made once per target: _loop_rest)
        self.states = np.array(ends, dtype=np.int64) if states is None else states


class _ChainLinks:
    """The links one class's chains have followed in one lazy index
    (:meth:`LazyIndex._chain`): ``array[s]`` is the state one character of
    the class leads to from state ``s`` (DEAD: every byte of the class dies
    there; ``_NO_LINK``: its characters part ways; ``s`` itself: it loops;
    ``_UNSET_LINK``, or ``s`` past the array: not followed yet). An array
    indexed by state, not a dict keyed by (state, class): the chain of a
    row is read off it by one C call (``_cwalk.chain_links``), where a
    Python loop over the dict cost ~25 us a row of ~65 links."""

    __slots__ = ("array",)

    def __init__(self) -> None:
        self.array = np.full(64, _UNSET_LINK, dtype=np.int64)

    @property
    def count(self) -> int:
        """The links followed so far."""
        return int(np.count_nonzero(self.array != _UNSET_LINK))

    def set(self, states: list[int], following: list[int]) -> None:
        """Link each of ``states`` to the state of ``following`` at the same place."""
        needed = max(states) + 1
        if needed > len(self.array):
            grown = np.full(max(needed, 2 * len(self.array)), _UNSET_LINK, dtype=np.int64)
            grown[:len(self.array)] = self.array
            self.array = grown
        self.array[states] = following


def _read_chain(links: np.ndarray, state: int, target: int, limit: int) -> tuple[bytes, int, bytes]:
    """``_cwalk.chain_links`` in Python (its reference, and the chain of
    :meth:`LazyIndex._chain` without the compiled module): ``(chain, end,
    ends)``, int64 bytes both. From ``[state, target]``, each state's link
    in ``links`` (see :class:`_ChainLinks`) appended until the chain has
    ``limit`` + 1 states (a loop repeats its state): ``_CHAIN_FULL``;
    ``_CHAIN_DIES`` or ``_CHAIN_STOPS`` at a link DEAD or ``_NO_LINK``, with
    ``ends`` the distinct states of ``chain[1:]`` ascending; or
    ``_CHAIN_MISSING`` when the last state of ``chain`` has no link yet
    (``ends`` empty)."""
    if state < 0 or target < 0 or not 1 <= limit <= 1 << 20:
        raise ValueError("chain_links: a negative state or target, or a limit out of range")
    chain, end = [state, target], _CHAIN_FULL
    while len(chain) <= limit:
        current = chain[-1]
        following = int(links[current]) if current < len(links) else _UNSET_LINK
        if following < 0 and following not in (_NO_LINK, _UNSET_LINK):
            raise ValueError("chain_links: a link out of range")
        if following == _UNSET_LINK:
            return np.array(chain, dtype=np.int64).tobytes(), _CHAIN_MISSING, b""
        if following in (DEAD, _NO_LINK):
            end = _CHAIN_DIES if following == DEAD else _CHAIN_STOPS
            break
        if following == current:
            chain.extend([current] * (limit + 1 - len(chain)))
            break
        chain.append(following)
    return (np.array(chain, dtype=np.int64).tobytes(), end,
            np.array(sorted(set(chain[1:])), dtype=np.int64).tobytes())


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


def _whole_index_only(name: str) -> property:
    """A property of :class:`LazyIndex` for ``name``, which only a whole
    Index has: it raises an AttributeError that says how to get one. Since
    lazy became the default, code written for the eager result meets this
    first. (Properties, not a ``__getattr__``: a class with one has every
    attribute read by CPython 3.11's generic path, unspecialised: ~3,400
    of the ~15,000 instructions of a warm MaskBench step besides its copy,
    callgrind, benchmarks/lazy_warm_steps.py.)"""

    def missing(self):
        raise AttributeError(
            f"a lazy index has no {name!r} until it is complete: use index.complete().{name}, "
            "or build the whole index with lazy=False")

    return property(missing, doc=f"Only a whole index has ``{name}`` (raises AttributeError).")


_EVERY_BYTE_KEY = "lazy-every-byte-a-token"


class _Start(NamedTuple):
    """Where each entry of a row's plan starts its walk (see
    :func:`_start_states`): in ``along[0]`` where ``picks`` (a walk plan's
    ``skipped``) is set, in ``along[link]`` where ``picks`` (a chain plan's
    ``links``) is a link, else in the cell of its first byte. A loop row
    read from the groups has its plan's ``loop_from`` too
    (:func:`~tokendfa.lazy.plans._loop_from`), for ``_cwalk.walk_row``."""

    picks: np.ndarray  # bool or int32, one an entry
    along: np.ndarray  # int64: the loop's state, or the chain's states
    loop_from: np.ndarray | None = None  # uint8, one an entry


_NO_TARGET = np.zeros(1, dtype=np.int64)  # the along of a row with no loop (no entry is skipped)


class _Span(NamedTuple):
    """A row with no loop walked with no plan (:meth:`LazyIndex._span_row`):
    the tokens ``by_first_byte[lo:hi]`` for each row ``[lo, hi)`` of
    ``ranges`` (those of each run of consecutive live first bytes), each
    from its first byte."""

    ranges: np.ndarray  # int64[k, 2]


# A row with no loop whose plan is not kept is walked over the groups of its
# live first bytes in place (_Span) when they make at most this many runs of
# consecutive bytes (one is read in place; more are gathered, ~3 stores a
# token): a new plan cost ~100-450 us in a fresh fork (a declared key's first
# letters, 'C', 'D', 'I': 3.2k Qwen tokens; a number's end), and the plans
# these rows made were 5.5% of MaskBench's steps of 0.25-1.5 ms.
_SPAN_MAX_RANGES = 64


class _Scratch(threading.local):
    """A thread's int64 arrays for a cold row's start states and its walk's
    ended entries and states, reused from row to row up to
    ``_SCRATCH_ITEMS`` items (larger rows get their own). Fresh arrays
    cost a page fault every 4 kB at first write: in a forked MaskBench
    child, ~6 us a row for the start states and ~10 for the walk's outputs
    (of ~12 us of ``finish_row`` and ~6 of ``start_states`` measured
    there, against ~2 and ~1 warm)."""

    def __init__(self) -> None:
        self.arrays = [np.empty(0, dtype=np.int64) for _ in range(3)]

    def take(self, which: int, size: int) -> np.ndarray:
        """Scratch array ``which`` (0: start states, 1: ended entries, 2:
        their states) of ``size`` items; valid until the thread's next row."""
        if size > _SCRATCH_ITEMS:
            return np.empty(size, dtype=np.int64)
        found = self.arrays[which]
        if len(found) < size:
            found = self.arrays[which] = np.empty(max(size, 2 * len(found), 1024), dtype=np.int64)
        return found[:size]


# Up to 3 x 512 kB a thread: a JSON string row's plan has ~5k tokens, the
# widest kept plan 64k (plans._PLAN_MAX_TOKENS).
_SCRATCH_ITEMS = 65536
_SCRATCH = _Scratch()


def _start_states(first_row: np.ndarray, plan: _WalkPlan | _ChainPlan, picks: np.ndarray,
                  along: np.ndarray) -> np.ndarray:
    """The state each entry of ``plan`` starts its walk in: ``along[0]``
    where ``picks`` (a walk plan's ``skipped``) is set, ``along[link]``
    where ``picks`` (a chain plan's ``links``) is a link, else the cell of
    its first byte in ``first_row``. Compiled (``_cwalk.start_states``,
    int64 as the walk reads them), ~2 us where numpy's gathers took ~15."""
    if _cwalk is not None:
        states = _SCRATCH.take(0, len(plan.first_bytes))
        _cwalk.start_states(np.ascontiguousarray(first_row), plan.first_bytes, picks, along, states)
        return states
    states = first_row[plan.first_bytes]
    if picks.dtype == bool:
        states[picks] = along[0]
        return states
    return np.where(picks >= 0, along.astype(first_row.dtype)[picks], states)


def _outside(first_row: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The live bytes of a row (int64, ascending) outside ``first`` (bool[256])."""
    live = np.flatnonzero(first_row)
    return live[~first[live]]


_EOS_KEY = "lazy-eos"


def _eos_of(vocabulary: Vocabulary) -> tuple[tuple[int, ...], frozenset, np.ndarray]:
    """The EOS ids sorted, as a set, and as a read-only array (shared by every index)."""
    eos = tuple(sorted(set(int(t) for t in vocabulary.eos_token_ids)))
    tokens = np.array(eos, dtype=np.int64)
    tokens.flags.writeable = False
    return eos, frozenset(eos), tokens


def _every_byte_a_token(vocabulary: Vocabulary) -> bool:
    """Whether each of the 256 bytes is a token of its own (byte-level BPE)."""
    return bool(vocabulary_tables(vocabulary).single_byte.all())


class LazyIndex(MaskServing):
    """The serving API of :class:`~tokendfa.runtime.index.Index`, computed on demand.

    ``Index.from_regex(pattern, vocabulary)`` and
    ``Index.from_schema(schema, vocabulary)`` return one (the default,
    ``lazy=True``); a :class:`~tokendfa.runtime.guide.Guide` walks it like an
    index. Thread-safe: any number of guides on any number of threads share
    one lazy index.

    ``config.max_states`` bounds the states of the lazy byte automaton
    (:class:`~tokendfa.analysis.errors.BuildLimitError` when a request needs
    more). :meth:`start_completion` fills the remaining token rows in a
    background thread; :meth:`complete` returns the eager :class:`Index`, and
    :meth:`completed_state` the state of it that a state of this one is.

    ``config.time_limit`` and ``config.memory_budget`` bound the
    construction, :meth:`complete` and the background completion, each
    from its start, and also each row computed later (and each cell an
    :meth:`advance` resolves), from the moment its computation starts, on
    whichever thread computes it: such a row raises
    :class:`~tokendfa.analysis.errors.TimeLimitError` and keeps nothing but
    the automaton's cells it resolved (final, so the same row asked again
    goes on from there; other rows are untouched). Rows are bounded by the
    limits of the caller too (``with tokendfa.analysis.limits.limits(...)``,
    as the vLLM integration runs each step); the earlier deadline wins.

    ``deferred`` (a :class:`~tokendfa.analysis.lazydfa.DefinitionSource`;
    a schema's recursion, see :mod:`tokendfa.schema.compiler`) gives the
    definitions that are computed when a match first reaches them, and are
    added to ``definitions`` as they are: the index then holds the schema
    compiler, and through it the user's schema, for as long as it lives.
    Such a definition is computed under the lock that resolving cells takes,
    and under the limits of the request that reaches it (as any fragment
    the lazy automaton compiles).
    """

    def __init__(self, pattern: str, vocabulary: Vocabulary, config: BuildConfig | None = None, *,
                 definitions: dict[str, str] | None = None,
                 metadata: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
                 index_type: Any = None,
                 completion_advice: str | None = None,
                 deferred: DefinitionSource | None = None) -> None:
        started = time.perf_counter()
        # Said with a bound that complete() trips (what the caller knows of why
        # its automaton may be too large to complete, e.g. a schema's free values).
        self._completion_advice = completion_advice
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
        # what _cwalk.finish_row sets in a final row: per vocabulary, not per index
        self._eos, self._eos_set, self._eos_tokens = vocabulary.derived(_EOS_KEY, _eos_of)
        # Byte-live is token-live when every byte a match can hold is a token
        # of its own. With all 256 bytes tokens (byte-level BPE) the pattern's
        # alphabet is not needed, which would compile every definition.
        single = self._tables.single_byte
        # Nor with deferred definitions, which it would compute whole (the
        # recursion unrolled every way): the token walk then checks liveness.
        # (Whether all 256 are is asked once per vocabulary: numpy's all() was
        # ~1% of a first mask in a fresh fork.)
        self._covered = vocabulary.derived(_EVERY_BYTE_KEY, _every_byte_a_token) or (
            deferred is None and bool(np.all(single[self._dfa.byte_alphabet()])))
        self._token_live: dict[int, bool] = {}
        self._distances: LazyDistances | None = None  # made when a budget first asks
        self._loops: dict[int, tuple[int, int, bool]] = {}
        self._dead_ascii: dict[int, bytes] = {}   # state -> its dead ASCII bytes (_dead)
        self._wide_targets: dict[int, int] = {}
        self._pairs: dict[int, tuple[int, tuple[int, int, bool], int] | None] = {}  # loop state -> its pair (_pair)
        self._loop_rests: dict[int, tuple] = {}  # loop state -> what its loop rows read (_loop_rest)
        self._chain_links: dict[tuple[int, int, bool], _ChainLinks] = {}  # class -> its links followed
        self._raw_rows: dict[int, _TokenRow] = {}
        self._lock = threading.RLock()
        self._masks: dict[int, np.ndarray] = {}        # state -> its allowed-token bitset
        # the states with a row, least recently used first once the rows
        # pass half their budget (see _touch); beside _masks, whose plain
        # dict lookup is ~25 ns faster than an OrderedDict's on a warm step
        self._recency: OrderedDict[int, None] = OrderedDict()
        self._successors: dict[int, np.ndarray] = {}   # state -> distinct states its tokens reach
        # A mask's fingerprint (_mask_fingerprint) -> the kept read-only
        # arrays with it, each over its own bytes, which every state with
        # that mask serves (a new mask is compared bytewise with these: the
        # bytes as a dict key cost ~5.4 us of hashing a cold row); and for
        # each array (by id: it is kept while listed) how many kept states
        # serve it, and its fingerprint.
        self._distinct_masks: dict[int, list[np.ndarray]] = {}
        self._mask_users: dict[int, list[int]] = {}
        budget = self._config.row_budget
        self._row_budget = DEFAULT_ROW_BUDGET if budget is None else budget
        # time_limit= and memory_budget= bound each row computed after the
        # construction too, each from the moment its computation starts (_serve)
        self._bounded_rows = self._config.time_limit is not None or self._config.memory_budget is not None
        self._row_bytes = 0
        self._tracking = False  # recency is kept from half the budget on
        self._table_view: tuple[np.ndarray | None, memoryview | None] = (None, None)
        # The automaton's table as the compiled advance reads it: taken again
        # after each new row and each walk in Python, not at every step (the
        # property is a Python call, a warm step's seventh). One taken before the
        # table grew is right wherever it answers (a resolved cell never
        # changes, a state keeps its row); a state or cell it lacks sends
        # the step to the Python walk, which takes the current one. (Grown in
        # place, as the native core grows it, the two share their pages.)
        self._warm_table = self._dfa.table
        self._completed = None
        self._explored = None  # (lazy table, minimal DFA, completed arrays) until state_map() is made
        self._state_map: np.ndarray | None = None
        self._complete_lock = threading.RLock()
        self._completion: threading.Thread | None = None
        self._completion_error: BaseException | None = None
        # close() asks the completion thread to stop (a flag it reads: an Event's
        # Condition and lock cost every index ~4 us and their pages in a fresh fork)
        self._stop = False
        if not self._is_token_live(INITIAL):
            raise self._coverage_error()
        self._seconds = round(time.perf_counter() - started, 4)
        # a function: called when the metadata is first read (a schema's JSON
        # text, written then: see tokendfa.runtime.index._schema_metadata)
        self._given_metadata = metadata
        self._metadata: dict[str, Any] | None = None

    # --- description ---------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        """As an eager index's, with ``build.method`` ``"lazy"``; made on first
        use (the vocabulary's fingerprint hashes every token: 0.25 s on Qwen)."""
        if self._metadata is None:
            readable = self._readable_pattern()
            vocabulary = self._vocabulary
            metadata = {
                "kind": "regex",
                "pattern": readable,
                "vocabulary": {"name": vocabulary.name, "source": vocabulary.source,
                               "fingerprint": vocabulary.fingerprint, "size": vocabulary.size},
                "build": {"method": "lazy", "seconds": self._seconds},
            }
            metadata.update(self._extra_metadata())
            self._metadata = metadata
        return self._metadata

    def _extra_metadata(self) -> dict[str, Any]:
        """The caller's metadata, made now if it gave a function."""
        given = self._given_metadata
        if callable(given):
            given = self._given_metadata = dict(given())
        return dict(given or {})

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

    arrays = _whole_index_only("arrays")
    num_states = _whole_index_only("num_states")
    final_states = _whole_index_only("final_states")
    num_transitions = _whole_index_only("num_transitions")
    nbytes = _whole_index_only("nbytes")

    def __repr__(self) -> str:
        return (f"LazyIndex(pattern={self.pattern[:80]!r}, vocabulary={self._vocabulary.name!r}, "
                f"served={len(self._masks)}, byte_states={self._dfa.num_states})")

    # --- serving ---------------------------------------------------------------

    def get_mask(self, state: int) -> np.ndarray:
        """Allowed tokens as a read-only ``uint32`` bitset (EOS bits in final states)."""
        try:
            mask = self._masks.get(state)
        except TypeError:  # unhashable: not an id at all
            raise id_type_error(state, "state") from None
        if mask is None:
            mask = self._serve(state)
        elif self._tracking:
            self._touch(state)
        return mask

    def row_ready(self, state: int) -> bool:
        """Whether the row of ``state`` is computed and kept (its mask is then
        a lookup; :func:`tokendfa.fill_masks` computes a batch's cold rows
        on threads)."""
        try:
            return state in self._masks
        except TypeError:
            raise id_type_error(state, "state") from None

    def is_final(self, state: int) -> bool:
        try:
            known = state in self._masks
        except TypeError:
            raise id_type_error(state, "state") from None
        if not known:
            self._serve(state)
        return bool(self._dfa.finals[state])

    def is_allowed(self, state: int, token_id: int) -> bool:
        mask = self.get_mask(state)
        token_id = self._check_token(token_id)
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
        try:
            mask = self._masks.get(state)
        except TypeError:  # unhashable: not an id at all
            raise id_type_error(state, "state") from None
        if mask is None:
            mask = self._serve(state)
        elif self._tracking:
            self._touch(state)
        if _cwalk is not None:
            # The bit and the walk over resolved cells in one C call, on the
            # table as last taken (_warm_table); -1 where the Python below,
            # its reference, answers: a refusal, a token id out of range, a
            # cell not resolved yet or a state the taken table lacks.
            following = _cwalk.advance_token(mask, self._warm_table, self._tokens, state, token_id)
            if following >= 0:
                return following
        if type(token_id) is not int or not 0 <= token_id < self._vocab_size:
            token_id = self._check_token(token_id)
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
                    # shows where the character ends (LazyByteDFA.wide_target);
                    # it may discover a state (a deferred definition, even): bounded as a row
                    with self._config.limits() if self._bounded_rows else contextlib.nullcontext():
                        following = self._dfa.step(state, byte)
                    view = memoryview(self._dfa.table)
                state = following
            self._warm_table = self._dfa.table
            return state
        raise TokenNotAllowedError(self._refusal(state, token_id), state=state, token_id=token_id)

    def write_mask_into(self, state: int, out, row: int | None = None) -> None:
        """Copy the bitset of ``state`` into a caller's int32/uint32 buffer
        (numpy or torch, one row or a batch; see :meth:`Index.write_mask_into`)."""
        try:
            mask = self._masks.get(state)
        except TypeError:  # unhashable: not an id at all
            raise id_type_error(state, "state") from None
        if mask is None:
            mask = self._serve(state)
        elif self._tracking:
            self._touch(state)
        if _cwalk is not None and _cwalk.copy_mask(mask, out, row):
            return
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

    # --- closing within a budget (see tokendfa.runtime.serving) -------------------

    def _finish_distance(self, state: int, limit: int) -> int:
        # The shortest path in bytes that are tokens of their own: each is
        # one token a generation may pick (such a path's states are
        # token-live), so that many tokens always close the text. ASCII
        # bytes and UTF-8 continuation bytes only (a token may end inside a
        # character): a shortest completion starts a wider character only
        # where the pattern forces one (there the bound cannot tell, and
        # does not restrict), and each byte that starts one discovers a
        # state at every level of the search: closing's cost over 3,600
        # cold steps of 36 JSONSchemaBench schemas (Gemma 3's vocabulary,
        # max_tokens 512) was 7.0 s with all 256 bytes, 3.4 s without the
        # lead bytes (searches of at most 2,000 states; the steps
        # themselves 0.3 s).
        distances = self._distances
        if distances is None:
            with self._lock:
                if self._distances is None:
                    steps = self._tables.single_byte & (np.arange(256) < 0xC0)
                    self._distances = LazyDistances(self._dfa, steps)
                distances = self._distances
        with self._config.limits() if self._bounded_rows else contextlib.nullcontext():
            return distances.distance(state, limit)

    def _closing_successors(self, state: int) -> np.ndarray:
        with self._lock:  # rows are dropped under it: the successors stay with the mask
            self.get_mask(state)
            return self._successors[state]

    def _closing_row(self, state: int) -> ClosingRow:
        """The row of ``state`` computed again, with where each token ends
        (a kept row holds its mask and distinct successors only): the walked
        tokens and their ends, and the loop's mask and state; along a chain
        (whose tokens end as far along as they have characters) the loop's
        tokens are walked here."""
        with self._lock, self._config.limits() if self._bounded_rows else contextlib.nullcontext():
            self.get_mask(state)
            row = self._raw_row(state)
            self._raw_rows.pop(state, None)   # kept only until its mask is made, which it is
            tokens, ends = row.tokens.astype(np.int32), row.ends.astype(STATE_DTYPE)
            loop = row.loop
            if loop is None:
                return ClosingRow(tokens, ends, None, -1)
            if len(loop.ends) == 1:
                return ClosingRow(tokens, ends, loop.mask, int(loop.ends[0]))
            bits = np.unpackbits(loop.mask.view(np.uint8), bitorder="little")
            chained = np.flatnonzero(bits[:self._vocab_size]).astype(np.int64)
            found_tokens: list = []
            found_ends: list = []
            self._numpy_walk(chained, np.full(len(chained), state, dtype=STATE_DTYPE),
                             np.zeros(len(chained), dtype=np.int64), found_tokens, found_ends)
            return ClosingRow(np.concatenate([tokens, *found_tokens]).astype(np.int32),
                              np.concatenate([ends, *found_ends]).astype(STATE_DTYPE), None, -1)

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
        while frontier and not self._stop:
            following = []
            for state in frontier:
                if self._stop:
                    return
                with self._lock:  # rows are dropped under it: the successors stay with the mask
                    self.get_mask(state)
                    following_states = self._successors[state].tolist()
                for nxt in following_states:
                    if nxt not in seen:
                        seen.add(nxt)
                        following.append(nxt)
            frontier = following

    def complete(self):
        """The eager :class:`~tokendfa.runtime.index.Index` of the same
        pattern (array for array what ``Index.from_regex(..., lazy=False)``
        builds): the lazy byte automaton explored to the end from the states
        served so far (:meth:`LazyByteDFA.explore` resumes where serving
        stopped; no state is computed twice), minimised, and its token
        arrays built by the fast build. Computed once; raises the eager
        build's errors. This lazy index keeps serving afterwards, with its
        own state ids; :meth:`completed_state` maps them to the completed
        index's.

        The token rows already served are not carried over: a row holds
        each state's allowed tokens, not where each leads, and the fast
        build's signature walk covers every state in one vectorised pass
        (a 642-state schema on qwen2.5: ~50 ms of a ~250 ms completion, the
        same with 277 states served first or none)."""
        from ..builder.pipeline import BuiltIndex, build_index  # the eager build, inside the call
        with self._complete_lock, self._config.limits():  # the time limit from here on
            if self._completed is None:
                try:
                    transitions, finals = self._dfa.explore()
                    dfa = canonical_byte_dfa(transitions, finals, pattern=self._pattern)
                    built = build_index(self._pattern, self._vocabulary, self._config,
                                        definitions=dict(self._definitions) or None, dfa=dfa,
                                        forced_later=self._index_type is not None)
                except BuildLimitError as exc:
                    if self._completion_advice is None:
                        raise
                    raise type(exc)(f"{exc}; {self._completion_advice}", reached=exc.reached) from exc
                metadata = dict(built.metadata)
                metadata.update(self._extra_metadata())
                built = BuiltIndex(built.arrays, metadata, built.forced_later)
                self._explored = (transitions, dfa, built.arrays)
                self._completed = (built if self._index_type is None else
                                   self._index_type(built.arrays, metadata, self._vocabulary,
                                                    forced_later=built.forced_later))
            return self._completed

    def completed_state(self, state: int) -> int:
        """The state of :meth:`complete`'s index that ``state`` (an id of
        this lazy index) is: the same allowed tokens, and every token leads
        to states that map to each other, so a generation can go on in the
        completed index from where it is here. Completes the index if it is
        not yet; raises :class:`InvalidStateError` for an id no token
        sequence reaches from the initial state."""
        mapping = self.state_map()
        if not isinstance(state, (int, np.integer)) or not 0 <= state < len(mapping) or mapping[state] < 0:
            raise InvalidStateError(f"state {state} of this lazy index is not a state of its completed index")
        return int(mapping[state])

    def state_map(self) -> np.ndarray:
        """``int32`` array: for each state id of this lazy index, the
        completed index's state (-1 where there is none: the dead state, and
        states no token sequence leads to or finishes from). Made once, on
        first use, after :meth:`complete`."""
        self.complete()
        with self._complete_lock:
            if self._state_map is None:
                transitions, dfa, arrays = self._explored
                byte_state = _byte_state_map(transitions, dfa.transitions)
                index_of_byte = _index_states_of_byte_states(dfa, arrays, self._tokens)
                mapping = np.where(byte_state >= 0, index_of_byte[np.maximum(byte_state, 0)], -1)
                mapping = mapping.astype(np.int32)
                mapping.flags.writeable = False
                self._state_map, self._explored = mapping, None
            return self._state_map

    def save(self, path, *, compress: bool = True) -> None:
        """Write the completed index (:meth:`complete`) to ``path``."""
        self.complete().save(path, compress=compress)

    def close(self) -> None:
        """Stop the completion thread (if any) after the row it is on."""
        self._stop = True

    # --- computing a token row -----------------------------------------------------

    def _serve(self, state: int) -> np.ndarray:
        check_id_type(state, "state")
        if state < INITIAL or not self._dfa.is_discovered(state):
            raise InvalidStateError(
                f"state {state} is not a state of this lazy index (states are 1.."
                f"{self._dfa.num_states - 1} so far, 1 initial)")
        with self._lock:
            mask = self._masks.get(state)
            if mask is None:
                if self._bounded_rows:
                    with self._config.limits():
                        mask = self._new_row(state)
                else:  # no nullcontext(): its three Python calls a cold row
                    mask = self._new_row(state)
            return mask

    def _new_row(self, state: int) -> np.ndarray:
        """Compute, keep and return the row of ``state`` (not kept yet),
        under the lock. An error (a limit) leaves nothing of the row kept but
        the automaton's cells it resolved, which are final: asked again, the
        row is computed again from there."""
        if _cwalk is not None and self._covered:
            key, successors, fingerprint = self._compiled_row(state)
        else:
            key, successors, fingerprint = self._numpy_row(state)
        kept = self._distinct_masks.get(fingerprint)
        mask = None
        for other in kept or ():
            if other.base == key:  # bytes compared (memcmp): equal masks are shared exactly
                mask = other
                break
        if mask is None:
            # read-only, over the key's own bytes: a distinct mask is held once
            mask = np.frombuffer(key, dtype=MASK_WORD)
            if kept is None:
                self._distinct_masks[fingerprint] = [mask]
            else:
                kept.append(mask)
            self._mask_users[id(mask)] = [0, fingerprint]
            self._row_bytes += len(key) + _MASK_OVERHEAD
        self._mask_users[id(mask)][0] += 1
        self._successors[state] = successors
        self._row_bytes += successors.nbytes + _ROW_OVERHEAD
        self._raw_rows.pop(state, None)
        self._recency[state] = None
        self._warm_table = self._dfa.table  # the row's new states: found by the next advance in C
        self._masks[state] = mask  # published last: readers take no lock
        if self._row_bytes > self._row_budget // 2:
            self._tracking = True
            if self._row_bytes > self._row_budget:
                self._drop_rows()
        return mask

    def _compiled_row(self, state: int) -> tuple[bytes, np.ndarray, int]:
        """``(mask bytes, successors, the mask's fingerprint)`` of the row of
        ``state`` with a covering vocabulary: the walk's ended entries made into the mask
        (the loop's copied, the walked tokens' and EOS bits set) and the
        distinct end states by one C call without the GIL
        (``_cwalk.finish_row``), where :meth:`_numpy_row` makes them in ~15
        numpy calls with it (~8% of the cold steps of 0.25-1.5 ms on the
        MaskBench sample, and GIL-held time a batch's threads queue on)."""
        dfa = self._dfa
        first_row = np.ascontiguousarray(dfa.row(state))
        loop, plan, start = self._loop_row(state, first_row, span=True)
        loop_mask, loop_ends = (None, _NO_STATES) if loop is None else (loop.mask, loop.states)
        final = dfa.finals[state]
        if start is None:
            return self._span_row(state, plan, final)
        packed = plan.packing.packed
        if packed is not None:
            # start states, walk and finish in one call (_cwalk.walk_row)
            with dfa.resolving():
                key, successors, fingerprint = _cwalk.walk_row(
                    dfa, packed.data, packed.offsets, first_row, plan.first_bytes, start.picks, start.along,
                    plan.tokens, loop_mask, self._words, loop_ends, self._eos_tokens, final, packed.shared,
                    start.loop_from)
        else:  # a chain plan's first walk, which packs it (or a walk plan's of a rest too long to keep packed)
            ended, entries, ends = self._walk_entries(plan, _start_states(first_row, plan, start.picks, start.along))
            key, successors, fingerprint = _cwalk.finish_row(loop_mask, self._words, plan.tokens, entries, ends,
                                                             ended, loop_ends, self._eos_tokens, final)
        return key, np.frombuffer(successors, dtype=STATE_DTYPE), fingerprint

    def _span_row(self, state: int, span: _Span, final: bool) -> tuple[bytes, np.ndarray, int]:
        """:meth:`_compiled_row` of a row with no loop, with no walk plan: the
        tokens of its live first bytes walked from their first byte in
        ``state`` (``_cwalk.walk_span``), reading the vocabulary's grouped
        spellings in place."""
        tables = self._tables
        grouped, grouped_offsets = _grouped_spellings(tables)
        with self._dfa.resolving():
            key, successors, fingerprint = _cwalk.walk_span(self._dfa, grouped, grouped_offsets, span.ranges,
                                                            state, tables.by_first_byte, None, self._words,
                                                            _NO_STATES, self._eos_tokens, final,
                                                            _grouped_prefixes(tables))
        return key, np.frombuffer(successors, dtype=STATE_DTYPE), fingerprint

    def _numpy_row(self, state: int) -> tuple[bytes, np.ndarray, int]:
        """:meth:`_compiled_row` in numpy, over :meth:`_raw_row`'s tokens and
        ends, with their liveness checked where the vocabulary does not
        cover the pattern (the reference for the compiled one)."""
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
            _set_bits(mask, self._eos_tokens)
        return mask.tobytes(), row.successors(), _mask_fingerprint(mask)

    def _touch(self, state: int) -> None:
        """Mark the row of ``state`` most recently used (a served row,
        once the rows pass half their budget: below it nothing is dropped,
        and the warm path skips the ~0.1 us this costs)."""
        try:
            self._recency.move_to_end(state)
        except KeyError:  # dropped meanwhile by another thread
            pass

    def _drop_rows(self) -> None:
        """Drop the least recently used rows until they hold three quarters
        of the budget (not one a call: each drop would then come with the
        next new row), keeping the newest. Under the lock; a reader that
        took a mask before keeps it, and one that asks after computes the
        row again."""
        goal = self._row_budget * 3 // 4
        recency = self._recency
        while self._row_bytes > goal and len(recency) > 1:
            state, _ = recency.popitem(last=False)
            mask = self._masks.pop(state)
            successors = self._successors.pop(state)
            self._row_bytes -= successors.nbytes + _ROW_OVERHEAD
            users = self._mask_users[id(mask)]
            users[0] -= 1
            if not users[0]:
                del self._mask_users[id(mask)]
                kept = self._distinct_masks[users[1]]
                kept[:] = [other for other in kept if other is not mask]
                if not kept:
                    del self._distinct_masks[users[1]]
                self._row_bytes -= mask.nbytes + _MASK_OVERHEAD

    @property
    def row_bytes(self) -> int:
        """The bytes of token rows this index keeps now (at most about
        ``config.row_budget``; see :data:`DEFAULT_ROW_BUDGET`)."""
        return self._row_bytes

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
        loop, plan, start = self._loop_row(state, first_row)
        states = _start_states(first_row, plan, start.picks, start.along)
        tokens = plan.tokens
        found_tokens, found_ends = [], []
        if _cwalk is not None:
            # (a token with nothing left to walk ends where it starts)
            self._compiled_walk(plan, states, found_tokens, found_ends)
        else:
            # (a group plan, cached while the compiled module ran, keeps none)
            positions = _plan_positions(self._tables, plan)
            ended = self._tables.lengths[tokens] == positions
            found_tokens.append(tokens[ended])
            found_ends.append(states[ended])
            keep = ~ended
            self._numpy_walk(tokens[keep], states[keep], positions[keep], found_tokens, found_ends)
        # int64 as before: a plan's tokens are int32
        tokens = np.concatenate(found_tokens).astype(np.int64, copy=False) if found_tokens else np.zeros(0, dtype=np.int64)
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

    def _compiled_walk(self, plan: _WalkPlan | _ChainPlan, states: np.ndarray,
                       found_tokens: list, found_ends: list) -> None:
        """Walk the ``plan``'s tokens from ``states`` at its positions with
        the compiled loop (:mod:`tokendfa.lazy._cwalk`), appending the live
        ones and their end states to ``found_*``. The walk goes in passes
        inside the C call: every token as far as resolved cells go, without
        the GIL, then the cells the stopped ones wait on resolved together
        (``LazyByteDFA.step_held``, with the GIL; the automaton's lock held
        for the whole walk), and on (passes driven from numpy instead paid
        ~40 us a pass). No loop shortcut: a byte costs a few nanoseconds
        here (~15 ns a Qwen token from a JSON string state), and asking a
        state for its loop set resolves its whole ASCII row.

        The walk reads the plan's remaining bytes packed in walking order
        (:class:`_PackedBytes`), so that it reads memory in order: a walk
        plan comes packed (``_cwalk.pack_plan``); a chain plan's first walk
        packs them as it goes (``walk_and_pack``) and keeps them with the
        plan for the next."""
        ended, ended_entries, ended_states = self._walk_entries(plan, states)
        if ended:
            # both walks give entries of the plan: their tokens
            found_tokens.append(plan.tokens[ended_entries[:ended]])
            found_ends.append(ended_states[:ended].astype(STATE_DTYPE))

    def _walk_entries(self, plan: _WalkPlan | _ChainPlan, states: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """``(ended, entries, ends)``: the compiled walk of :meth:`_compiled_walk`,
        the live entries of the plan in ``entries[:ended]`` and the states
        they end in in ``ends[:ended]`` (int64 both; the thread's scratch
        arrays, valid until its next row)."""
        tables = self._tables
        tokens = plan.tokens
        ended_tokens, ended_states = _SCRATCH.take(1, len(tokens)), _SCRATCH.take(2, len(tokens))
        states = np.ascontiguousarray(states, dtype=np.int64)
        dfa = self._dfa
        packed = plan.packing.packed
        with dfa.resolving():  # once for the row, not once a cell (step_held)
            if packed is not None:
                ended = _cwalk.walk_packed(dfa, packed.data, packed.offsets, states, ended_tokens, ended_states)
            else:
                offsets = np.empty(len(tokens) + 1, dtype=np.int32)
                ended, data = _cwalk.walk_and_pack(dfa, tables.spellings, tables.spelling_offsets,
                                                   tokens, states, plan.positions,
                                                   ended_tokens, ended_states, offsets)
        if packed is None:
            plan.packing.keep(data, offsets)
        return ended, ended_tokens, ended_states

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

    def _loop_row(self, state: int, first_row: np.ndarray, span: bool = False
                  ) -> tuple[_LoopRow | None, _WalkPlan | _ChainPlan | _Span, _Start | None]:
        """``(loop, plan, start)``: the tokens of the row found with no walk
        (or None); the plan of the spelled tokens left to walk, whose first
        byte is live, each with the position of its next byte
        (:class:`_WalkPlan`, :class:`_ChainPlan`); where each one's walk
        starts (:class:`_Start`). With ``span`` (the compiled row), a row
        with no loop whose plan is not cached may give a :class:`_Span` of
        the groups and no start instead (see :data:`_SPAN_MAX_RANGES`).

        With ``target`` the state most ASCII bytes lead to from ``state``, a
        token needs no walk when its first character leads there (its first
        byte is one of those, or it starts with a character of two or more
        bytes and every such character leads there) and each later character
        loops on ``target``: it ends in ``target``. Everything else is
        walked, so the row is exact."""
        tables = self._tables
        ascii_row = first_row[:128]
        # the state most ASCII bytes lead to (the smallest id of a tie)
        if _cwalk is not None:
            target, most = _cwalk.ascii_target(first_row)
        else:
            # a Counter of 128 ints, ~5 us where sorting them in numpy took ~40
            counts = Counter(ascii_row.tolist())
            counts.pop(DEAD, None)
            most = max(counts.values(), default=0)
            target = min((s for s, count in counts.items() if count == most), default=0)
        tail = first_key = outside = None
        if most >= _LOOP_MIN_BYTES:
            tail_key = self._loop(target)
            # the bytes and characters that lead to the target
            lead = self._wide_target(state) == target
            if _cwalk is not None:
                # first, its cache key, the live bytes outside it and its
                # ASCII bits in one call, where numpy took ~10 (~5 us)
                first, first_key, outside, low, high = _cwalk.row_first(first_row, target, lead)
                first, outside = np.frombuffer(first, dtype=bool), np.frombuffer(outside, dtype=np.int64)
                loops = low & ~tail_key[0] == 0 and high & ~tail_key[1] == 0
                key = (low, high, bool(lead))
            else:
                first = np.zeros(256, dtype=bool)
                first[:128] = ascii_row == target
                first[_LEAD_BYTES] = lead
                loops = _loops_on(tail_key, first[:128])
                key = None
            if self._covered:
                if not loops:
                    # they do not loop there: a counted class
                    return self._chain_row(state, first_row, first, target, key, outside)
                pair = self._pairs.get(target, _NOT_ASKED)
                if pair is _NOT_ASKED:
                    pair = self._pair(target)
                if pair is not None:
                    found = self._pair_row(state, first_row, target, pair)
                    if found is not None:
                        return found
            rest = self._loop_rests.get(target)
            if rest is None:
                rest = self._loop_rests[target] = self._loop_rest(target, tail_key)
            tail, packed, dead, along = rest
        if tail is None:
            if span:
                # the live bytes (the plan's key) and the ranges of by_first_byte of their runs, in C
                live_key, ranges = _cwalk.row_runs(first_row, tables.first_offsets)
                ranges = np.frombuffer(ranges, dtype=np.int64).reshape(-1, 2)
                if (live_key,) not in tables.walk_plans and len(ranges) <= _SPAN_MAX_RANGES:
                    return None, _Span(ranges), None
                live = np.frombuffer(live_key, dtype=np.int64)
            else:
                live = np.flatnonzero(first_row)
            plan = _walk_plan(tables, live)
            return None, plan, _Start(plan.skipped, _NO_TARGET)
        if packed is not None and _cwalk is not None:  # (kept with the compiled module on: a test turns it off)
            # the plan read from the groups and the loop's packed rest, in one C call
            mask = _loop_bits(tables, first, tail_key, tail, first_key)
            plan = _group_plan(tables, first, tail_key, tail, packed, first_key,
                               _outside(first_row, first) if outside is None else outside, dead)
            return _LoopRow(mask, (target,), along), plan, _Start(plan.skipped, along, _loop_from(plan, tail_key))
        else:
            mask, rest = _loop_mask(tables, first, tail_key, tail, first_key)
            plan = _walk_plan(tables, np.flatnonzero(first_row), (first, tail_key, rest), first_key, outside)
        return _LoopRow(mask, (target,), along), plan, _Start(plan.skipped, along)

    def _loop_rest(self, target: int, tail_key: tuple[int, int, bool]
                   ) -> tuple[_TailTokens | None, _PackedBytes | None, bytes | None, np.ndarray | None]:
        """``(tail, packed, dead, along)`` of the loop state ``target`` (whose
        loop set is ``tail_key``), what every loop row into it reads, kept
        per state (:attr:`_loop_rests`): the tail set (None: too few
        tokens loop), its rest packed (None: not kept packed), the dead
        ASCII bytes where it is packed, and ``[target]`` as the int64 array
        a row's walk and finish read, one array for every row into it. Each
        loop row asked the vocabulary's caches and made the array again
        (five calls and two arrays a row)."""
        tail = _tail_tokens(self._tables, tail_key)
        if tail is None:
            return None, None, None, None
        packed = _tail_packed(self._tables, tail)
        along = np.array([target], dtype=np.int64)
        along.flags.writeable = False
        return tail, packed, None if packed is None else self._dead(target), along

    def _pair(self, target: int) -> tuple[int, tuple[int, int, bool], int] | None:
        """``(partner, key, wide)`` where the loop state ``target`` has a
        partner: a state that at least ``_PAIR_MIN_BYTES`` ASCII bytes lead
        to from ``target`` (the most of them), whose cells are
        ``target``'s on every character ``key`` holds, the characters that
        lead from ``target`` to either (``wide``: the state every character
        of two or more bytes leads to from both, when ``key`` holds them).
        After a pattern's ``[a-z]+$`` inside a string (``.*[a-z]+``), the
        letters lead to a partner and the other characters back: a token
        of those characters only ends in the state its last character
        leads to, whichever of the two it started in. None otherwise;
        cached per state."""
        if target in self._pairs:
            return self._pairs[target]
        found = None
        # its ASCII cells, which _loop resolved, read off the table (asking
        # ascii_row again cost ~15-40 us a loop state, most of which have
        # no partner: ~0.7 us for the count of bytes to other states in C)
        row = self._dfa.table[target]
        if _cwalk is not None:
            low, high = self._loop(target)[:2]
            dead_low, dead_high = _cwalk.equal_bits(row, DEAD)
            others = 128 - (low | dead_low).bit_count() - (high | dead_high).bit_count()
        else:
            others = 128 - int(np.count_nonzero((row[:128] == target) | (row[:128] == DEAD)))
        cells = row[:128]
        if others >= _PAIR_MIN_BYTES:
            values, counts = np.unique(cells[(cells != target) & (cells != DEAD)], return_counts=True)
            partner = int(values[np.argmax(counts)])  # the most (the smallest id of a tie)
        if others >= _PAIR_MIN_BYTES and counts.max() >= _PAIR_MIN_BYTES:
            inside = (cells == target) | (cells == partner)
            if np.array_equal(self._dfa.ascii_row(partner)[inside], cells[inside]):
                wide = self._wide_target(target)
                both = wide in (target, partner) and self._wide_target(partner) == wide
                found = (partner, _class_key(inside, both), wide if both else DEAD)
        self._pairs[target] = found
        return found

    def _pair_row(self, state: int, first_row: np.ndarray, target: int,
                  pair: tuple[int, tuple[int, int, bool], int]) -> tuple[_LoopRow, _WalkPlan, _Start] | None:
        """:meth:`_loop_row` where the loop state ``target`` has a partner
        (:meth:`_pair`): the tokens whose first character leads from
        ``state`` to either and whose later characters are all of the
        pair's class end in one of the two, found with no walk (the tail
        set of the class, a JSON string's for ``.*[a-z]+``); the others
        are walked from their first byte. The states they end in are named
        from which bytes such tokens end with (:func:`_tail_ends`). On
        Github_easy o21855 (``^(\\{[a-z]+\\})|([a-z]+)$``), the loop of
        the string's characters but letters left 88k Qwen tokens to walk a
        row (3-14 ms); the pair leaves the JSON string's rest, ~6k. None
        when the class's tail set is not kept (too few tokens)."""
        partner, key, wide = pair
        tables = self._tables
        tail = _tail_tokens(tables, key)
        if tail is None:
            return None
        cells = first_row[:128]
        first = np.zeros(256, dtype=bool)
        first[:128] = (cells == target) | (cells == partner)
        lead = self._wide_target(state)
        first[_LEAD_BYTES] = lead in (target, partner)
        first_key = np.packbits(first).tobytes()
        mask, rest = _pair_rest(tables, first, key, tail, first_key)
        plan = _walk_plan(tables, np.flatnonzero(first_row), (first, key, rest), first_key, kind=("pair",))
        # where they end: a token of one character where that character
        # leads from ``state``; a longer one where its last leads from the
        # pair (the cells of both are the same there)
        starting = np.flatnonzero(first)
        endings = _tail_ends(tables, key, tail)
        last = endings.last[starting].any(axis=0)
        ends = set(self._dfa.ascii_row(target)[np.flatnonzero(last[:128])].tolist())
        if last[128:].any():  # a wide last character: only where the class holds them
            ends.add(wide)
        single = starting[endings.single[starting]]
        ends.update(first_row[single[single < 128]].tolist())
        if (single >= 128).any():
            ends.add(lead)
        states = np.array(sorted(ends), dtype=np.int64)
        return (_LoopRow(mask, tuple(states.tolist()), states), plan,
                _Start(plan.skipped, np.array([target], dtype=np.int64)))

    def _chain_row(self, state: int, first_row: np.ndarray, first: np.ndarray, target: int,
                   key: tuple[int, int, bool] | None, outside: np.ndarray | None = None
                   ) -> tuple[_LoopRow, _ChainPlan, _Start]:
        """:meth:`_loop_row` where most characters lead to a state that does
        not loop on them: inside a counted class (``[0-9a-f]{40}``, a string
        with ``minLength``), each character of the class leads one state
        further along a chain. A token made of n characters of the class ends
        n states on, with no walk, while the chain lasts; a token that leaves
        the class after m characters resumes its walk m states on. Before,
        such a row walked every token starting with a class character a byte
        a level: 5 ms a step along a 40-character hash on Qwen.

        Used with a covering vocabulary only (the chain's ends are then live).
        ``key``: the class's key (as :meth:`_loop` makes them), and
        ``outside``: the row's live bytes outside ``first``, where the caller
        has them (``_cwalk.row_first`` gives both)."""
        tables = self._tables
        if key is None:
            key = _class_key(first[:128], bool(first[_LEAD_BYTES[0]]))
        if outside is None:
            outside = _outside(first_row, first)
        runs = _class_runs(tables, key)
        limit = min(max(len(runs.full_offsets) - 2, (len(runs.partial_offsets) - 1) // 256), _CHAIN_MAX)
        chain, dies, ends = self._chain(state, target, key, max(limit, 1))
        length = len(chain) - 1
        if dies and (not key[2] or self._dfa.wide_target(int(chain[-1])) == DEAD):
            # every character of the class dies there (an ASCII class's are
            # its ASCII bytes): so does every longer token
            dies = 2
        plan = _chain_plan(tables, key, runs, length, int(dies), first, outside)
        mask = _chain_mask(tables, key, length, runs)
        return _LoopRow(mask, tuple(ends.tolist()), ends), plan, _Start(plan.links, chain)

    def _chain(self, state: int, target: int, key: tuple[int, int, bool], limit: int
               ) -> tuple[np.ndarray, bool, np.ndarray]:
        """``([state, target, ...], dies, ends)`` (int64 arrays): while every
        character of the class ``key`` leads from the last state to one next
        state, that state, up to ``limit`` characters on (a state that loops
        repeats itself); ``dies`` when every ASCII byte of the class is dead
        after the last; ``ends`` the distinct states after the first,
        ascending. Read off the class's links (:class:`_ChainLinks`) by one
        call, the links not followed yet followed first."""
        links = self._chain_links.get(key)
        if links is None:
            links = self._chain_links[key] = _ChainLinks()
        read = _read_chain if _cwalk is None else _cwalk.chain_links
        while True:
            chain, end, ends = read(links.array, state, target, limit)
            if end != _CHAIN_MISSING:
                break
            # the last state's link and those after it, up to the limit (a
            # second read then finds them all)
            size = len(chain) // 8
            self._follow_chain(int.from_bytes(chain[-8:], "little", signed=True), key, links, limit + 1 - size)
        return np.frombuffer(chain, dtype=np.int64), end == _CHAIN_DIES, np.frombuffer(ends, dtype=np.int64)

    def _follow_chain(self, state: int, key: tuple[int, int, bool], links: _ChainLinks, limit: int) -> None:
        """The links of the class ``key``'s chain from ``state`` on, up to
        ``limit``, kept in ``links``: one call of the automaton's
        class_chain (the class's ranges only: a cell at a time cost ~30 us
        a link, and the whole ASCII row discovered the states past a quote
        and a backslash at every link: sp_0's steps inside a maxLength-1024
        string found ~30 states each). A link whose wide characters the NFA
        does not show is decided here, by the DFA walk of _wide_target."""
        wanted = key[0] | key[1] << 64
        found = self._dfa.class_chain(state, wanted, key[2], limit)
        states = found.states
        at = state
        if states:
            links.set([state, *states[:-1]], states)
            at = states[-1]
        if found.end == ChainEnd.ASK:
            following = self._dfa.class_successor(at, wanted)
            following = following if following >= DEAD else _NO_LINK
            if following not in (DEAD, _NO_LINK) and self._wide_target(at) != following:
                following = _NO_LINK
            links.set([at], [following])
        elif found.end != ChainEnd.LIMIT:
            links.set([at], [DEAD if found.end == ChainEnd.DEAD else
                             _NO_LINK if found.end == ChainEnd.LEAVES else at])

    def _loop(self, state: int) -> tuple[int, int, bool]:
        """``(low, high, wide)``: the ASCII bytes that lead from ``state`` back
        to it (bits 0-63 and 64-127), and whether every character of two or
        more bytes does too."""
        found = self._loops.get(state)
        if found is None:
            # the ASCII cells only: the whole row would discover a state past
            # each first byte of a wide character, which _wide_target does not need
            ascii_row = self._dfa.ascii_row(state)
            wide = self._wide_target(state) == state
            if _cwalk is not None:  # np.packbits and its views: ~2% of the cold steps of 0.25-1.5 ms
                low, high = _cwalk.equal_bits(ascii_row, state)
                found = self._loops[state] = (low, high, wide)
            else:
                found = self._loops[state] = _class_key(ascii_row == state, wide)
        return found

    def _dead(self, state: int) -> bytes:
        """The ASCII bytes dead in ``state`` (whose ASCII cells :meth:`_loop`
        resolved) as 16 bytes, bit b of byte b >> 3: what a loop row's plan
        leaves out of the loop's rest (:func:`~tokendfa.lazy.plans._group_plan`)."""
        found = self._dead_ascii.get(state)
        if found is None:
            low, high = _cwalk.equal_bits(self._dfa.ascii_row(state), DEAD)
            found = self._dead_ascii[state] = (low | high << 64).to_bytes(16, "little")
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

    def _readable_pattern(self) -> str:
        """The pattern as text for the metadata and messages (a tree written
        out, calls named). The definitions are copied first (one C call,
        atomic under the GIL): deferred ones may be added by a thread serving
        a mask meanwhile."""
        from ..builder.pipeline import readable_pattern  # the builder, inside the call (see tokendfa.lazy)
        return readable_pattern(self._pattern, dict(self._definitions))

    def _coverage_error(self) -> VocabularyCoverageError:
        """The error of a pattern the vocabulary cannot finish, naming, as
        the eager build does, the first state (breadth-first over token
        rows) where no token goes on, the bytes the pattern takes there, and
        the shortest text that leads there."""
        order, seen = [INITIAL], {INITIAL}
        stuck = INITIAL
        for state in order:  # grows while we go
            following = self._raw_row(state).successors().tolist()
            if not following:
                stuck = state
                break
            for nxt in following:
                if nxt not in seen:
                    seen.add(nxt)
                    order.append(nxt)
        needed = bytes(np.flatnonzero(self._dfa.row(stuck) != DEAD).tolist())
        shown = ", ".join(repr(bytes([b])) for b in needed[:12]) + (
            f" and {len(needed) - 12} more" if len(needed) > 12 else "")
        return VocabularyCoverageError(
            f"the vocabulary cannot express the pattern {self._readable_pattern()[:200]!r}: after "
            f"{self._shortest_text_to(stuck)!r} it needs one of the bytes {shown}, and no token "
            "spelling them leads on to a match", state=stuck, needed_bytes=needed)

    def _shortest_text_to(self, goal: int) -> bytes:
        """The shortest bytes leading from the initial state to ``goal``."""
        path = {INITIAL: b""}
        queue = [INITIAL]
        for state in queue:  # grows while we go
            if state == goal:
                return path[state]
            for byte, nxt in enumerate(self._dfa.row(state).tolist()):
                if nxt != DEAD and nxt not in path:
                    path[nxt] = path[state] + bytes([byte])
                    queue.append(nxt)
        return b""

    # --- helpers ------------------------------------------------------------------------

    def _refusal(self, state: int, token_id: int) -> str:
        if token_id in self._eos_set:
            return f"EOS token {token_id} is not allowed in state {state}: the match is not complete"
        text = self._tokens[token_id]
        spelled = f" ({text!r})" if text is not None else " (a special token)"
        return f"token {token_id}{spelled} is not allowed in state {state}"
