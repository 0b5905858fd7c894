"""The byte DFA built on demand: a subset construction that runs one state at a time.

:func:`tokendfa.analysis.construct.byte_dfa_from_regex` determinises the whole
NFA, minimises it and only then can anything be served; on a schema that is
most of a second. :class:`LazyByteDFA` keeps the NFA of
:mod:`tokendfa.analysis.regex_compiler` (the same regex trees, the same
Thompson construction) and computes a DFA state's successors the first time someone
asks for them, so the first rows are ready in the time it takes to build the
NFA. A whole row (:meth:`LazyByteDFA.row`) computes the successor of every
byte range; a walk of a vocabulary asks for single cells
(:meth:`LazyByteDFA.successors`), which computes only the ranges asked for:
a state inside an object with declared keys has one successor per letter
that starts a key, and each is a closure to compute (whole rows would
discover states no walk enters: ~20 in a cold token row on a schema with
many keys).

**Shared definitions are called.** A call of a shared definition (a
:class:`~tokendfa.analysis.regex_tree.Call` in a tree, a placeholder in
text) is not a copy of the definition's automaton (as in the eager compiler)
but a *call* of one NFA fragment per definition, compiled the first time
something calls it (:class:`_LazyNFA`). A DFA state is then a set of
*configurations* ``(call stack, NFA state)``: entering a call pushes the state to
return to, the end of a definition's fragment pops it. The NFA grows with
the written pattern, not the expanded one, and a definition that no match
has reached yet costs nothing: free values of a JSON Schema may nest many
levels at the price of one fragment a level. The definitions may even
be unknown at the start: a :class:`DefinitionSource` computes each one
when a match first calls it (a JSON Schema's recursive ``$ref``, unrolled a
bounded number of times, so that only the levels a generation reaches are
written). Definitions do not recurse,
so stacks are bounded by their nesting; with ``max_depth`` a definition may
use itself, and stacks deeper than the bound are cut (exactly: the language
is the pattern's with recursion at most ``max_depth`` calls deep).

Two facts make it exact and servable without a global pass over the automaton:

* **Dead is empty.** Every NFA state kept can reach the end of its fragment
  (a definition's fragment is pruned when it is first entered, once what
  each of its callees can match is known). A DFA state is the set of
  configurations with byte edges (or the final one) in an epsilon closure,
  its *kernel*; each can finish its fragment, return, and so on down its
  stack, so a non-empty kernel is live and the empty kernel is the only
  dead state (id 0). No state ever needs a liveness pass.
* **Ids never move.** States are numbered in discovery order, 0 dead and 1
  initial, and a cell, once resolved (from ``UNKNOWN``), never changes.
  Readers of resolved cells take no lock; resolving takes one (see
  :meth:`LazyByteDFA.row` and :meth:`LazyByteDFA.successors`).

**Native state store.** With the compiled core (:data:`NATIVE_CORE`), the
kernels, their ids and the NFA's edges and local closures are also kept as
C arrays in the core's context (``analysis/_lazycore.c``), and the compiled
token walk (``tokendfa.lazy._cwalk``) and whole or partial rows
(:meth:`LazyByteDFA.materialise`, :meth:`LazyByteDFA.partial_row`,
:meth:`LazyByteDFA.class_successor`) resolve cells there with the GIL
released, discovering states; :meth:`LazyByteDFA.class_chain` follows a
counted class's chain there (each link's cells and wide target) in one
call, holding the GIL. What needs the stack (a closure through a
call or an end), the state bound, a full table or a depth bound is handed
back to the core over this class's containers. The store is the record of
the states and call stacks it finds: it publishes the count before any
Python code runs on the automaton, and nothing else until a reader asks
(:meth:`_publish`, a test's or a benchmark's inspection). ``_kernels`` is
a dict keyed by state, not a list: the core reads a kernel the store has
(a cut, a wide target) from the store, looks a kernel not in ``_ids`` up
there, and a state it discovers itself is numbered after the store's and
alone goes into ``_kernels`` and ``_ids`` (the store copies it when a walk
next opens it); its closures through calls push and pop the store's stacks.
Without the compiled modules (``TOKENDFA_NATIVE=0``) the methods here do
everything, with the same answers: they are the reference.

:meth:`LazyByteDFA.explore` materialises everything breadth-first and returns
the complete table; :func:`~tokendfa.analysis.minimise.canonical_byte_dfa` of it
is array for array the eager automaton (the tests hold the two equal).
"""

from __future__ import annotations

import gc
import mmap
import os
import threading
import weakref
from array import array
from bisect import bisect_right
from enum import IntEnum
from collections import Counter, OrderedDict
from collections.abc import Mapping
from functools import partial
from itertools import chain, compress
from operator import is_not
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from .dfa import DEAD, INITIAL, STATE_DTYPE
from . import limits
from .native import native_module
from .errors import BuildLimitError, EmptyRegexError, RegexError
from .regex_compiler import (DEFAULT_MAX_NFA_STATES, NFA_STATE_BYTES, cut_ranges,
                             SharedDefinitions, ThompsonNFA, relocated_rows, thompson_fragment)
from .regex_tree import (Alt, Call, Concat, Excluding, LiteralSet, Node, Repeat, alt, calls_in, concat, parse_regex,
                         surely_matches, to_regex)
from .utf8 import MAX_CODEPOINT, utf8_range_sequences

__all__ = ["LazyByteDFA", "DefinitionSource", "DEFAULT_MAX_LAZY_STATES", "UNKNOWN", "WIDE_SEQUENCES",
           "NATIVE_CORE", "ChainEnd", "ClassChain"]

# The compiled hot path of the subset construction (analysis/_lazycore.c; see
# tokendfa.analysis.native): it stands in for the methods of LazyByteDFA that
# resolve cells, over the same containers, and hands the rare cases back to them.
_lazycore = native_module(__package__ + "._lazycore")
NATIVE_CORE = _lazycore is not None
# The core as loaded, whose store an automaton made with it reads through its
# context (a test turns `_lazycore` off for the module after making one).
_STORE_CORE = _lazycore

# A state's cut: (range starts, range ends, targets of each range, base); see LazyByteDFA._cut_of.
_Cut = tuple[bytes, bytes, "list[int | tuple[int, ...]]", "int | tuple[int, ...]"]

# A table cell not computed yet (states are >= 0, DEAD is 0).
UNKNOWN = -1

# Every UTF-8 sequence of a character of two or more bytes, as byte ranges.
WIDE_SEQUENCES = tuple(tuple(sequence) for sequence in utf8_range_sequences(0x80, MAX_CODEPOINT))
_UNDECIDED = object()


class ChainEnd(IntEnum):
    """Why :meth:`LazyByteDFA.class_chain` stopped (the values are
    analysis/_lazycore.c's CHAIN_*)."""

    LIMIT = 0   # it reached the number of links asked for
    DEAD = 1    # every byte of the class is dead after the last state
    LEAVES = 2  # the class's bytes (or its wide characters) part ways after the last state
    LOOPS = 3   # the class leads from the last state back to it
    ASK = 4     # the NFA does not show where the wide characters lead from the last state:
                # its class bytes are resolved, and the caller decides the link


class ClassChain(NamedTuple):
    """The states a counted class leads through, one a character (the start
    not included), and why the chain stops after the last (the start when
    there is none)."""

    states: list[int]
    end: ChainEnd

# States a lazy automaton may discover (before minimisation) before it stops
# with BuildLimitError: 200k rows of 256 int32 are 200 MB, the order of what
# the eager build allows (DEFAULT_MAX_STATES in tokendfa.builder.fast, after
# minimisation).
DEFAULT_MAX_LAZY_STATES = 200_000
# Rows of the byte table reserved up front: 4 MB of address space (pages are
# touched only as states are discovered, a row each); past them the table
# doubles by copy (~1 ms for the first doubling, ~4 ms at 16k states, inside
# the cold row that discovers the state). It was 65,536 rows (64 MB) to spare
# those copies, but an address-space limit counts a reservation whole: 28 lazy
# indexes exhausted a 2 GiB RLIMIT_AS at 110 MB resident, where the vLLM memo
# holds 64.
_RESERVED_ROWS = 1 << 12
# The lazy builder's LITERAL_SET_MIN_BRANCHES (regex_compiler): a lazy automaton
# determinises only the rows asked for, so Thompson branches cost little more than
# the literal set's construction. Measured on qwen2.5, random words, compile and
# first mask (medians of a noisy shared machine): 500 words 21 ms as a set, 17 ms
# as branches; 1,000 words 33 and 35 ms; 5,000 words 52 and 74 ms.
LAZY_LITERAL_SET_MIN_BRANCHES = 1000
# Byte sets as ints (bit b for byte b), for LazyByteDFA._resolve_bytes.
_ASCII_BYTES = (1 << 128) - 1
_ALL_BYTES = (1 << 256) - 1


@runtime_checkable
class DefinitionSource(Protocol):
    """Shared definitions that grow while the lazy automaton runs.

    A plain mapping (key -> regex tree, or placeholder -> regex text) gives
    every definition up front. A source instead computes a definition's
    tree the first time a match calls it (:meth:`tree`), and that tree may
    call definitions no tree called before
    (:attr:`~tokendfa.analysis.regex_tree.Node.calls`), themselves computed
    only when a match first calls them: a JSON Schema's recursive ``$ref``,
    unrolled a bounded number of times, is written this way
    (:mod:`tokendfa.schema`), so a lazy index compiles the levels of the
    recursion a generation reaches and no others.

    ``defines(key)`` says, without computing anything, whether the source
    has a definition for ``key`` (a call of a key it does not define matches
    nothing). A source may also have ``matches_something(key)``: True when
    it knows, without computing it, that the definition matches some string
    (deciding a caller then leaves it to be computed when a match enters it). ``tree(key)`` is called at most once per key, under the
    automaton's lock; it may raise the errors of
    :mod:`tokendfa.analysis.errors` (a time limit, say), which surface from
    the request that reached the definition. Its definitions must not call
    themselves, directly or through others (the source bounds the recursion
    it writes); the automaton checks this as fragments are compiled.
    """

    def defines(self, key) -> bool: ...

    def tree(self, key) -> "Node": ...


_SOURCE_MEMBERS = ("defines", "tree")  # DefinitionSource's


class _GCPause:
    """The cyclic garbage collector paused while any automaton resolves
    cells, process-wide: the collector's switch is one for the process, so
    the holders are counted, the first one in records whether it was on and
    the last one out turns it back on (with a flag per automaton, one thread
    turned it on while another was still resolving)."""

    __slots__ = ("_lock", "_holders", "_was_on")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_on = False

    def enter(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._was_on = gc.isenabled()
                gc.disable()
            self._holders += 1

    def leave(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was_on:
                gc.enable()


_GC_PAUSE = _GCPause()


class _Exclusive:
    """The lock that resolving cells takes, with the cyclic garbage collector
    paused (:class:`_GCPause`): many small frozensets, no cycles (see
    regex_compiler). A class, not a generator context: taken ~10 times a
    cold row, the generator's enter and exit cost ~7 us a time (~5% of a
    cold row). With the compiled core, ``_lazycore.Exclusive`` stands for it
    (the same sections, one C call each way); this is its reference."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()
        _GC_PAUSE.enter()

    def __exit__(self, *exc) -> None:
        _GC_PAUSE.leave()
        self._lock.release()


class LazyByteDFA:
    """A complete byte DFA for ``pattern`` whose rows are computed on first use.

    ``row(state)`` is ``int32[256]`` (0: dead), ``is_final(state)`` whether
    the bytes so far are a match. The initial state is 1. Past ``max_states``
    discovered states, materialising raises
    :class:`~tokendfa.analysis.errors.BuildLimitError` with the count reached.

    Raises what :func:`~tokendfa.analysis.construct.byte_dfa_from_regex` raises for
    a bad pattern, including :class:`EmptyLanguageError` when it matches nothing
    (a definition's syntax error surfaces when the definition is first called).
    ``max_depth`` bounds the call stack and allows recursive definitions
    (``None``: no bound, and a definition may not use itself).
    ``definitions`` is a mapping, or a :class:`DefinitionSource` whose
    definitions are computed when a match first calls them (not with
    ``max_depth``, which compiles everything up front).
    """

    def __init__(self, pattern: "str | Node", *, definitions: "Mapping | DefinitionSource | None" = None,
                 max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 max_states: int = DEFAULT_MAX_LAZY_STATES,
                 max_depth: int | None = None) -> None:
        # At most 29 instance attributes: CPython 3.11 shares an instance's
        # keys with its class up to 30, less one for each instance made
        # before the key is added (the first instance adds them all: 29);
        # past that each instance has a dict of its own, and no
        # `self.method(...)` call site specialises (each looks the method up
        # in the type's cache, a miss writing a page in a fresh fork). So
        # the pattern, the NFA's tables and its depth bound are read through
        # `_nfa`, the native store's helpers through `_core_context`. (Not
        # __slots__: the compiled core's functions stand as instance
        # attributes over the methods.)
        self.max_states = max_states
        collecting = gc.isenabled()
        gc.disable()  # many small lists and tuples, no cycles: see regex_compiler
        try:
            nfa = _LazyNFA(pattern, definitions, max_nfa_states, max_depth)
        finally:
            if collecting:
                gc.enable()
        self._nfa = nfa
        # A configuration (stack, NFA state) is the int stack * _stride + state;
        # fragments are added as they are first called, so the stride is the
        # most states the NFA may ever have.
        self._stride = max_nfa_states + 1
        # The call stacks, interned as a trie: stack 0 is empty; stack k is
        # its parent with one more return state on top, `depth` levels deep.
        self._stack_parent: list[int] = [0]
        self._stack_top: list[int] = [-1]
        self._stack_depth: list[int] = [0]
        self._pushes: dict[int, int] = {}  # stack * stride + return state -> the stack it pushes
        self._closures: dict[int, frozenset] = {}
        self._wide_ends: dict[int, frozenset | None] = {}  # NFA state -> see _nfa_wide_ends
        self._local_closures: dict[int, int | tuple[int, ...]] = {}  # NFA state -> see _local_closure
        # the compiled core's Exclusive where it is built (this class's twin: ~0.1 us a
        # section where the class's four Python calls took ~1.35; ~2.7 sections a cold row)
        self._exclusive = _Exclusive() if _lazycore is None else _lazycore.Exclusive()
        initial = self._closure(nfa.start) if nfa.start >= 0 else frozenset()
        if not initial:
            text = self._shown()
            shown = repr(text[:200]) + (f" (+{len(text) - 200:,} characters)"
                                        if len(text) > 200 else "")
            raise EmptyRegexError(f"regex {shown} matches no string at all")
        # state -> kernel; with the native store, only the states Python
        # discovered or asked for (see the module's docstring)
        self._kernels: dict[int, frozenset] = {DEAD: frozenset(), INITIAL: initial}
        self._ids: dict[frozenset, int] = {frozenset(): DEAD, initial: INITIAL}
        # the configurations of a step -> its state: one as an int, several packed (see _step)
        self._steps: dict[int | bytes, int] = {}
        capacity = max(min(max_states, _RESERVED_ROWS), INITIAL + 1)
        # a row is set to UNKNOWN when its state is discovered; with the
        # compiled core the table's memory (a _lazycore.Table) grows in place
        self._table, self._table_memory = _reserved_table(capacity, max_states)
        self._table[DEAD] = DEAD
        self._table[INITIAL] = UNKNOWN
        # state -> its byte ranges with NFA targets: (range starts, ends, targets)
        # state -> its shape's cut (shared: see _shape_cut) and its base
        # (see _cut_of), two dicts: a tuple of the two kept a state would be
        # a container CPython counts toward a full collection (see _step)
        self._cuts: dict[int, tuple] = {}
        self._cut_bases: dict[int, "int | tuple[int, ...]"] = {}
        # The cut of each kernel shape seen (see _cut_of): the NFA states of a
        # kernel on one stack (an int for one state, else a frozenset), or a
        # tuple of configurations whose stacks are numbered as slots.
        self._shape_cuts: dict = {}
        self._finals = np.zeros(capacity, dtype=bool)
        self._finals[INITIAL] = nfa.final in initial
        # materialised[s]: row s is complete in self._table (the dead row always is)
        self._materialised = bytearray(capacity)
        self._materialised[DEAD] = 1
        self._count = INITIAL + 1
        self._core_context = None
        if _lazycore is not None:
            self._use_native_core(_lazycore)

    def _use_native_core(self, core) -> None:
        """Serve ``_closure``, ``_step``, ``_cut_of``, ``step_held``,
        ``_resolve_bytes`` and ``_wide_targets`` with the compiled functions
        of ``core`` (instance attributes over the methods), which fall back on
        the methods for the rare cases: a definition's first call, a shape
        whose ranges overlap, a full table, a depth bound. ``_resolve_bytes``
        and the compiled walk go through the core's native state store (see
        the module's docstring) first.

        What the core reads and writes is one ``core.Context``, built with a
        keyword for each field: the C side names its fields, refuses a
        missing or unknown one, and reads them by name, so no order has to
        be kept in step by hand."""
        # The context refers to the automaton through a weak proxy: held by
        # the automaton's own attributes, a strong reference would make a
        # cycle, and a dropped index's table (up to 200 MB) would wait for
        # the cyclic collector.
        cls, this, nfa = type(self), weakref.proxy(self), self._nfa
        context = core.Context(
            dfa=this, cuts=self._cuts, shape_cuts=self._shape_cuts, steps=self._steps,
            closures=self._closures, local_closures=self._local_closures, ids=self._ids,
            kernels=self._kernels, stride=self._stride, bounded=nfa.max_depth is not None,
            check=limits.check,
            py_closure=cls._closure.__get__(this), py_cut_of=cls._cut_of.__get__(this),
            py_shape_cut=cls._shape_cut.__get__(this), py_local_closure=cls._local_closure.__get__(this),
            py_discover=cls._discover.__get__(this),
            eps=nfa.eps, edges=nfa.edges, calls=nfa.calls, ends=nfa.ends, final=nfa.final,
            max_states=self.max_states, pushes=self._pushes, stack_parent=self._stack_parent,
            stack_top=self._stack_top, stack_depth=self._stack_depth,
            resolved=nfa.resolved, start_of=nfa.start_of, enter=nfa.enter,
            wide_ends=self._wide_ends, cut_bases=self._cut_bases)
        self._core_context = context
        self._closure = partial(core.closure, context)
        self._step = partial(core.step, context)
        self._cut_of = partial(core.cut_of, context)
        self.step_held = partial(core.step_held, context)
        self._resolve_bytes = partial(core.resolve_bytes, context)
        self._wide_targets = partial(core.wide_targets, context)

    def _shown(self) -> str:
        """The pattern as text, for a message (a tree is written out)."""
        return self.pattern if isinstance(self.pattern, str) else to_regex(self.pattern)

    @property
    def pattern(self) -> str | Node:
        """The pattern given: its text or its tree."""
        return self._nfa.pattern

    @property
    def max_depth(self) -> int | None:
        """The call stack's bound (``None``: no bound)."""
        return self._nfa.max_depth

    @property
    def num_nfa_states(self) -> int:
        """States of the NFA so far: the pattern's, and each definition's
        once, from its first call on."""
        return len(self._nfa.eps)

    @property
    def num_stacks(self) -> int:
        """Distinct call stacks met so far (the empty one included)."""
        if self._core_context is not None:  # the native store keeps the stacks it makes
            return max(len(self._stack_parent), _STORE_CORE.store_info(self._core_context)["stacks"])
        return len(self._stack_parent)

    # --- reading ------------------------------------------------------------

    @property
    def initial(self) -> int:
        return INITIAL

    @property
    def num_states(self) -> int:
        """States discovered so far (the dead state included)."""
        return self._count

    @property
    def num_materialised(self) -> int:
        return sum(self._materialised[:self._count])

    @property
    def table(self) -> np.ndarray:
        """The current table: a cell is its successor or ``UNKNOWN`` (-1)
        until it is resolved, and never changes after; rows of materialised
        states are whole, rows past :attr:`num_states` undefined. Read the
        flags (:meth:`materialise`) or resolve the cells (:meth:`successors`)
        before taking the table."""
        return self._table

    @property
    def finals(self) -> np.ndarray:
        """``bool[capacity]``: entries below :attr:`num_states` are exact."""
        return self._finals

    def is_final(self, state: int) -> bool:
        return bool(self._finals[state])

    def compile_everything(self) -> None:
        """Compile every definition the pattern can reach, now rather than
        when a match first calls it (a warm-up: ``Vocabulary.prepare()``)."""
        with self._exclusive:
            self._nfa.compile_everything()

    def byte_alphabet(self) -> np.ndarray:
        """``bool[256]``: the bytes on some byte edge of the pruned NFA that
        the pattern reaches, i.e. every byte that can occur in a match (and,
        without a depth bound, only those). Compiles every definition."""
        with self._exclusive:
            self._nfa.compile_everything()
            nfa = self._nfa
            present = np.zeros(257, dtype=np.int64)
            eps, edges, calls = nfa.eps, nfa.edges, nfa.calls
            seen = bytearray(len(eps))
            stack = [nfa.start] if nfa.start >= 0 else []
            for q in stack:
                seen[q] = 1
            visited = 0
            while stack:
                visited += 1
                if not visited & 4095:
                    limits.check()  # ~1 us a state: 0.5 s unchecked on "a" * 600000
                q = stack.pop()
                row = edges[q]
                for lo, hi in zip(row[0::3], row[1::3]):
                    present[lo] += 1
                    present[hi + 1] -= 1
                for t in [*eps[q], *row[2::3],
                          *(t for d, ret in calls[q] for t in (nfa.start_of[d], ret))]:
                    if not seen[t]:
                        seen[t] = 1
                        stack.append(t)
            return np.cumsum(present[:256]) > 0

    def row(self, state: int) -> np.ndarray:
        """The 256 successors of ``state``, computed on first request and kept."""
        if not self._materialised[state]:
            self.materialise((state,))
        return self._table[state]  # read after the flag: the table holds the row

    def materialise(self, states) -> None:
        """Make sure the rows of ``states`` (ids already discovered) exist.

        Thread-safe: rows are computed under the lock; a row's flag is set
        only after the row is in the table, and a grown table holds every
        finished row (the same memory, longer, or a copy), so a reader who sees the flag and then
        reads :attr:`table` sees the row.
        """
        missing = [s for s in states if not self._materialised[s]]
        if not missing:
            return
        with self._exclusive:
            for state in missing:
                if not self._materialised[state]:
                    limits.check()  # explore() materialises whole levels at once
                    self._compute_row(state)

    def successors(self, states: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        """``row(states[i])[symbols[i]]`` for every ``i``, resolving only the
        cells asked for: a walk of the vocabulary from a state needs a few
        bytes of each state it passes, and a whole row discovers a state for
        every byte range (inside an object with declared keys, one per letter
        that starts a key) and computes each one's closure."""
        index = states.astype(np.int64) * 256 + symbols
        found = self._table.reshape(-1)[index]
        unknown = np.flatnonzero(found == UNKNOWN)
        if len(unknown):
            cells = index[unknown]
            distinct = np.sort(cells)  # many tokens ask for the same few cells
            distinct = distinct[np.concatenate(([True], distinct[1:] != distinct[:-1]))]
            self._resolve_cells(distinct.tolist())
            found[unknown] = self._table.reshape(-1)[cells]  # the current table: it may have grown
        return found

    def is_discovered(self, state: int) -> bool:
        """Whether ``state`` is an id of this automaton (0 dead, 1 initial, ...).

        A cell read without the lock may hold a state that a walk holding
        it discovered in the native state store and publishes to the count
        only when it ends (see the module's docstring): such an id is
        checked again under the lock."""
        if 0 <= state < self._count:
            return True
        if state < 0:
            return False
        with self._exclusive:
            return state < self._count

    def step(self, state: int, byte: int) -> int:
        """One cell: the state after ``byte`` from ``state``."""
        if not self.is_discovered(state):  # the table's rows past the count are undefined
            raise IndexError(f"state {state} is not discovered (the automaton has {self._count:,})")
        found = int(self._table[state, byte])
        if found == UNKNOWN:
            self._resolve_cells((state * 256 + byte,))
            found = int(self._table[state, byte])
        return found

    def _publish(self) -> None:
        """Every state and call stack the native store found, in
        ``_kernels``, ``_ids`` and the stack lists (see the module's
        docstring), for a reader of those containers outside the core: a
        test's or a benchmark's inspection. Takes the lock; without the
        compiled core the containers are always whole."""
        if self._core_context is not None:
            with self._exclusive:
                _STORE_CORE.publish(self._core_context)

    def resolving(self) -> "_Exclusive":
        """The lock that resolving cells takes, for a caller that resolves
        many in a row with :meth:`step_held` (the compiled walk of a lazy
        token row: taking it for each of ~50 cells was ~10% of a cold row)."""
        return self._exclusive

    def step_held(self, state: int, byte: int) -> int:
        """:meth:`step` for an UNKNOWN cell, by a caller holding :meth:`resolving`."""
        limits.check()
        starts, ends, targets, base = self._cut_of(state)
        at = bisect_right(starts, byte) - 1
        if at < 0 or byte > ends[at]:
            return DEAD  # outside every range: the cut wrote DEAD there
        successor = self._step(targets[at], base)
        self._table[state, starts[at]:ends[at] + 1] = successor  # after _step: it may grow the table
        return successor

    def ascii_row(self, state: int) -> np.ndarray:
        """``row(state)[:128]``, resolving the ranges below 128 only: the
        whole row would discover a state past each first byte of a wide
        character (~8 closures), which a loop set does not need."""
        return self.partial_row(state, _ASCII_BYTES)[:128]

    def partial_row(self, state: int, wanted: int) -> np.ndarray:
        """``row(state)`` with only the byte ranges that hold a byte of
        ``wanted`` (bit b for byte b) resolved; other cells may be UNKNOWN.

        Along a counted class (a string's ``maxLength``) each state's class
        bytes lead one state on; its quote and backslash ranges lead to a
        state of their own, and resolving them (as :meth:`ascii_row` does)
        discovered two states a character that no token might reach."""
        if not self._materialised[state]:
            with self._exclusive:
                self._resolve_bytes(state, wanted)
        return self._table[state]

    def class_successor(self, state: int, wanted: int) -> int:
        """The one state every byte of ``wanted`` (bit b for byte b, at least
        one) leads to from ``state``, resolving those bytes' ranges only
        (:meth:`partial_row`); DEAD when every one is dead, -2 when they
        lead to different states. A link of a counted class's chain (a
        string with ``maxLength``): ~10 of them a cold row there."""
        with self._exclusive:
            if self._core_context is not None:
                return _lazycore.class_successor(self._core_context, state, wanted)
            self._resolve_bytes(state, wanted)
            row = self._table[state]
            cells = row[[b for b in range(256) if (wanted >> b) & 1]]
            return int(cells[0]) if bool((cells == cells[0]).all()) else -2

    def class_chain(self, state: int, wanted: int, wide: bool, limit: int) -> ClassChain:
        """The chain of the class ``wanted`` (bit b for byte b, at least
        one; with its characters of two or more bytes when ``wide``) from
        ``state``: while :meth:`class_successor` of the last state is one
        state and, with ``wide``, :meth:`wide_target` is that state too, it
        follows, up to ``limit`` states (a counted string's characters,
        ``maxLength``). The links are resolved in this order, each state's
        class bytes then its wide target, whichever core runs: the same
        states get the same ids.

        With the native state store one compiled call walks it all; the
        reference is a :meth:`class_successor` and a :meth:`wide_target` a
        link, 8-40 us each (up to 127 links a cold row along a counted
        string, MaskBench's Snowplow/sp_0 on Qwen)."""
        if self._core_context is not None:
            with self._exclusive:
                found = _lazycore.class_chain(self._core_context, state, wanted, wide, limit)
            if found is not None:
                return ClassChain(found[0], ChainEnd(found[1]))
        states: list[int] = []
        current = state
        while len(states) < limit:
            following = self.class_successor(current, wanted)
            if following == DEAD or following < 0:
                return ClassChain(states, ChainEnd.DEAD if following == DEAD else ChainEnd.LEAVES)
            if wide:
                target = self.wide_target(current)
                if target is None:
                    return ClassChain(states, ChainEnd.ASK)
                if target != following:
                    return ClassChain(states, ChainEnd.LEAVES)
            if following == current:
                return ClassChain(states, ChainEnd.LOOPS)
            states.append(following)
            current = following
        return ClassChain(states, ChainEnd.LIMIT)

    def wide_target(self, state: int) -> int | None:
        """The state every character of two or more bytes leads to from
        ``state`` (DEAD when every one is dead), read off the NFA with no
        intermediate state discovered; None when the NFA does not show one
        state (the characters part ways, or their bytes pass through
        something other than plain byte edges), and with a depth bound.

        A JSON string's character class goes from one NFA state through a
        few byte edges per UTF-8 sequence back to one state; walking the
        sequences through the DFA instead discovers ~8 states past a first
        byte and computes their rows: ~0.3 ms a state along a counted
        string's chain, most of a cold row there."""
        if self._nfa.max_depth is not None:
            return None
        targets = self._wide_targets(state)
        if targets is None:
            return None
        if not targets:
            return DEAD
        with self._exclusive:
            limits.check()
            return self._step(targets, 0)

    def _wide_targets(self, state: int) -> tuple[int, ...] | None:
        """The configurations (sorted, distinct) every character of two or
        more bytes leads to from ``state``'s kernel by byte edges alone, or
        None when the NFA does not show them (see :meth:`wide_target`)."""
        size = self._stride
        targets = set()
        for config in self._kernel_of(state):
            q = config % size
            ends = self._wide_ends.get(q, _UNDECIDED)
            if ends is _UNDECIDED:
                ends = self._wide_ends[q] = self._nfa_wide_ends(q)
            if ends is None:
                return None
            base = config - q
            targets.update([base + t for t in ends] if base else ends)
        return tuple(sorted(targets))

    def _kernel_of(self, state: int) -> frozenset:
        """``state``'s kernel; IndexError for a state not discovered (the
        compiled core's error: ``_kernels`` is a dict)."""
        try:
            return self._kernels[state]
        except KeyError:
            raise IndexError(f"state {state} is not discovered") from None

    def _nfa_wide_ends(self, q: int) -> frozenset | None:
        """The NFA states every character of two or more bytes leads to from
        NFA state ``q`` by byte edges alone (empty: every one dies), or None
        when they do not all end in the same states, when an edge covers
        part of a sequence's byte range only, or when a state inside a
        sequence has anything but byte edges (then the DFA walk decides)."""
        nfa = self._nfa
        edges, eps, calls, ends, final = nfa.edges, nfa.eps, nfa.calls, nfa.ends, nfa.final
        found = None
        for sequence in WIDE_SEQUENCES:
            current = {q}
            for position, (lo, hi) in enumerate(sequence):
                if position and any(eps[n] or calls[n] or ends[n] or n == final for n in current):
                    return None
                following = set()
                for node in current:
                    for edge_lo, edge_hi, target in _edge_triples(edges[node]):
                        if edge_hi < lo or edge_lo > hi:
                            continue
                        if edge_lo > lo or edge_hi < hi:
                            return None  # the range's bytes part ways
                        following.add(target)
                current = following
                if not current:
                    break
            reached = frozenset(current)
            if found is None:
                found = reached
            elif reached != found:
                return None
        return found

    def range_successors(self, state: int, lo: int, hi: int) -> set[int]:
        """The distinct states the bytes ``lo..hi`` lead to from ``state``,
        resolving the cells of those bytes only (a range of the cut at a
        time). Following every UTF-8 sequence from a JSON string state asks
        for one range of each of ~8 states that a character's first bytes
        lead to; their whole rows cost ~25 us each."""
        found = set(self._table[state, lo:hi + 1].tolist())
        if UNKNOWN not in found:
            return found
        with self._exclusive:
            self._resolve_bytes(state, ((2 << (hi - lo)) - 1) << lo)
        return set(self._table[state, lo:hi + 1].tolist())

    def _resolve_bytes(self, state: int, wanted: int) -> None:
        """Resolve every range of ``state``'s cut that holds a byte of
        ``wanted`` (bit b for byte b; a range is resolved whole), in byte
        order. The caller holds the lock."""
        limits.check()
        starts, ends, targets, base = self._cut_of(state)
        for at, lo in enumerate(starts):
            hi = ends[at]
            if (wanted >> lo) & ((2 << (hi - lo)) - 1) and self._table[state, lo] == UNKNOWN:
                successor = self._step(targets[at], base)
                self._table[state, lo:hi + 1] = successor  # after _step: it may grow the table

    def _resolve_cells(self, cells) -> None:
        with self._exclusive:
            # Sorted cells come state by state, and a state's bytes in
            # order: the cut is looked up once a state and each range it
            # holds resolved at its first cell (a range is resolved whole),
            # in the order the cells give, as cell by cell; ~20 distinct
            # cells a call, one numpy read a cell was ~10% of a cold row.
            current = -1
            for cell in cells:
                state = cell >> 8
                byte = cell & 255
                if state != current:
                    current = state
                    limits.check()
                    starts, ends, targets, base = self._cut_of(state)
                    last = -1
                at = bisect_right(starts, byte) - 1  # the range that may hold the byte
                if at == last or at < 0 or byte > ends[at]:
                    continue  # resolved with its range just now, or outside every range (DEAD)
                last = at
                if self._table[state, starts[at]] == UNKNOWN:
                    successor = self._step(targets[at], base)
                    self._table[state, starts[at]:ends[at] + 1] = successor  # after _step: it may grow the table

    def explore(self) -> tuple[np.ndarray, np.ndarray]:
        """Materialise every state breadth-first; returns ``(transitions,
        finals)`` (dead 0, initial 1) ready for
        :func:`~tokendfa.analysis.minimise.canonical_byte_dfa`."""
        state = INITIAL
        while state < self._count:  # grows while we go
            end = self._count
            self.materialise(range(state, end))
            state = end
        return self._table[:self._count].copy(), self._finals[:self._count].copy()

    # --- the subset construction, one state at a time ----------------------

    def _push(self, stack: int, ret: int) -> int:
        # keyed by one int, not a (stack, ret) tuple: a tuple is a container
        # the cyclic collector counts (sp_0: 7.4k stacks, see _steps)
        key = stack * self._stride + ret
        found = self._pushes.get(key)
        if found is None:
            found = self._pushes[key] = len(self._stack_parent)
            self._stack_parent.append(stack)
            self._stack_top.append(ret)
            self._stack_depth.append(self._stack_depth[stack] + 1)
        return found

    def _closure(self, config: int) -> frozenset:
        """The kernel configurations reachable from ``config`` without a byte:
        epsilon moves, calls (push the return state, enter the callee) and
        returns (the end of a definition pops the stack). With a depth bound,
        a configuration that cannot finish its stack within it is left out,
        so every kernel configuration is live."""
        found = self._closures.get(config)
        if found is not None:
            return found
        nfa = self._nfa
        if nfa.max_depth is None:
            # Most closures stay inside one fragment: no call, no end on the
            # way, so the stack plays no part and the closure is the NFA
            # states' own, on this stack. Those are found once per NFA state
            # (a JSON string's states are entered on many stacks): a closure
            # from scratch cost ~2 us of set and divmod work per configuration.
            stack, q = divmod(config, self._stride)
            local = self._local_closures.get(q)
            if local is None:
                local = self._local_closures[q] = self._local_closure(q)
            if local.__class__ is int:
                return frozenset((stack * self._stride + local,))
            if local:
                # not kept: a frozenset a configuration is a container the
                # cyclic collector counts (sp_0: 22k of its 158k), and made
                # again from the NFA state's tuple it costs ~0.1 us (C)
                base = stack * self._stride
                return frozenset([base + t for t in local] if base else local)
        size, eps, edges, calls, ends, final = (self._stride, nfa.eps, nfa.edges, nfa.calls,
                                                nfa.ends, nfa.final)
        bound = nfa.max_depth
        need, need_byte = nfa.need, nfa.need_byte
        enter = nfa.enter
        depth_of = self._stack_depth
        seen = {config}
        todo = [config]
        kernel = []
        while todo:
            current = todo.pop()
            stack, q = divmod(current, size)
            if bound is not None and depth_of[stack] + need[q] > bound:
                continue
            if edges[q]:
                if bound is None or depth_of[stack] + need_byte[q] <= bound:
                    kernel.append(current)
            elif q == final:
                kernel.append(current)
            base = stack * size
            for successor in eps[q]:
                successor += base
                if successor not in seen:
                    seen.add(successor)
                    todo.append(successor)
            for definition, ret in calls[q]:
                successor = self._push(stack, ret) * size + enter(definition)
                if successor not in seen:
                    seen.add(successor)
                    todo.append(successor)
            if ends[q] and stack:
                successor = self._stack_parent[stack] * size + self._stack_top[stack]
                if successor not in seen:
                    seen.add(successor)
                    todo.append(successor)
        found = self._closures[config] = frozenset(kernel)
        return found

    def _local_closure(self, q: int) -> "int | tuple[int, ...]":
        """The kernel NFA states reachable from ``q`` by epsilon moves alone
        (those with byte edges, and the final state), or ``()`` when a state
        on the way calls a definition or ends one (the closure then depends
        on the stack). Only for automata without a depth bound, whose
        kernels need no stack depth check. One state is the int itself, not
        a 1-tuple (most; a tuple kept is a container, see :meth:`_step`)."""
        nfa = self._nfa
        eps, edges, calls, ends, final = nfa.eps, nfa.edges, nfa.calls, nfa.ends, nfa.final
        seen = {q}
        todo = [q]
        kernel = []
        while todo:
            current = todo.pop()
            if calls[current] or ends[current]:
                return ()
            if edges[current] or current == final:
                kernel.append(current)
            for successor in eps[current]:
                if successor not in seen:
                    seen.add(successor)
                    todo.append(successor)
        return kernel[0] if len(kernel) == 1 else tuple(kernel)

    def _cut_of(self, state: int) -> "_Cut":
        """The byte ranges on which ``state``'s kernel has edges, cut where
        their targets differ (the eager loop of ``regex_compiler._determinise``
        for one state, over configurations: a byte edge keeps the stack), as
        ``(starts, ends, targets, base)``: range i leads to the configurations
        ``base + t`` for t in ``targets[i]``. The first call writes DEAD on
        every byte outside them.

        A definition called from many places (a JSON string, an object's
        keys) gives states that differ only in their stack: the same NFA
        states, one stack. Their cut is computed once per such *shape*, with
        targets relative to the stack (a byte edge keeps it), and made
        absolute only for the ranges a walk steps on. Cutting each state
        afresh cost ~10 us (Github_hard/o73917: 7.5k states, 4k shapes)."""
        found = self._cuts.get(state)
        if found is not None:
            return found[0], found[1], found[2], self._cut_bases[state]
        size = self._stride
        kernel = self._kernel_of(state)
        stack = -1
        shape = []
        for config in kernel:
            on, nfa_state = divmod(config, size)
            if on != stack:
                if stack >= 0:
                    break  # two stacks
                stack = on
            shape.append(nfa_state)
        else:
            key, base = (shape[0] if len(shape) == 1 else frozenset(shape)), max(stack, 0) * size
        if len(shape) < len(kernel):
            # Configurations on several stacks (a counted string: a
            # character's unit inside the digits of its count, every
            # position a new set of stacks): the shape numbers the stacks
            # in order, slot k standing for the k-th, and the cut's
            # targets are made absolute through them. Cutting each such
            # state afresh was ~18% of a step inside a maxLength-1024 string.
            stacks: list[int] = []
            shape = []
            for config in sorted(kernel):
                on, nfa_state = divmod(config, size)
                if not stacks or stacks[-1] != on:
                    stacks.append(on)
                shape.append((len(stacks) - 1) * size + nfa_state)
            key, base = tuple(shape), tuple([on * size for on in stacks])
        cut = self._shape_cut(key, shape)
        starts, ends, targets, dead = cut
        if dead is not None:
            self._table[state, np.frombuffer(dead, dtype=np.uint8)] = DEAD
        self._cut_bases[state] = base  # first: a cut kept is one whose base is there
        self._cuts[state] = cut
        return starts, ends, targets, base

    def _shape_cut(self, key, configs) -> tuple:
        """``(starts, ends, targets, dead)`` of a kernel shape (see
        :meth:`_cut_of`), computed once: ``configs`` numbered relative to
        the shape's stacks, ``starts`` and ``ends`` bytes, ``targets[i]``
        a tuple, or an int for one target, ``dead`` the bytes on no edge
        (None: none)."""
        cut = self._shape_cuts.get(key)
        if cut is None:
            starts, ends, targets, gaps = self._cut_configs(configs)
            # one target as the int itself, not a 1-tuple, and the ranges'
            # starts and ends as bytes, not lists: a tuple or list kept is a
            # container CPython counts toward a full collection (see _step;
            # sp_0: 18.7k target tuples, most of one target, 2.3k shapes)
            targets = [found[0] if len(found) == 1 else found for found in targets]
            # the dead bytes as one index (bytes: the compiled cut writes the
            # same): a JSON string's 5-8 gaps written slice by slice took
            # ~4 us a state, ~0.7 so
            dead = bytes(b for lo, hi in gaps for b in range(lo, hi + 1)) if gaps else None
            cut = self._shape_cuts[key] = (bytes(starts), bytes(ends), targets, dead)
        return cut

    def _cut_configs(self, configs) -> tuple[list[int], list[int], list[tuple[int, ...]], list[tuple[int, int]]]:
        """``(starts, ends, targets, gaps)`` of the byte edges of ``configs``:
        the sorted disjoint ranges, the distinct configurations each leads to
        (sorted), and the ranges of bytes on no edge."""
        size, edges = self._stride, self._nfa.edges
        # Sorted, the edges of the configurations are the cut already when
        # ranges are equal (a letter that starts several declared keys) or
        # disjoint (a JSON string's ~15 ranges); cutting them through a dict
        # of ranges cost ~16 us a shape.
        if len(configs) == 1 and configs[0] < size:
            own = sorted(_edge_triples(edges[configs[0]]))
        else:
            own = []
            for config in configs:
                stack, nfa_state = divmod(config, size)
                base = stack * size
                own.extend([(lo, hi, base + target) for lo, hi, target in _edge_triples(edges[nfa_state])])
            own.sort()
        ranges: list[tuple[int, int, tuple[int, ...]]] = []  # (lo, hi, targets)
        into: list[int] = []
        for lo, hi, target in own:
            if ranges and lo == ranges[-1][0] and hi == ranges[-1][1]:
                if target != into[-1]:
                    into.append(target)
                continue
            if ranges and lo <= ranges[-1][1]:
                break  # ranges that overlap in part: cut them below
            if into:
                ranges[-1] = (ranges[-1][0], ranges[-1][1], tuple(into))
            ranges.append((lo, hi, ()))
            into = [target]
        else:
            if into:
                ranges[-1] = (ranges[-1][0], ranges[-1][1], tuple(into))
            return _with_gaps(ranges)
        by_range: dict[tuple[int, int], list[int]] = {}
        for lo, hi, target in own:
            targets = by_range.get((lo, hi))
            if targets is None:
                by_range[(lo, hi)] = [target]
            else:
                targets.append(target)
        return _with_gaps([(lo, hi, tuple(sorted(set(targets)))) for lo, hi, targets in cut_ranges(by_range)])

    def _compute_row(self, state: int) -> None:
        self._resolve_bytes(state, _ALL_BYTES)
        self._materialised[state] = 1
        self._cuts.pop(state, None)  # the row is whole: the cut is not needed again
        self._cut_bases.pop(state, None)

    def _step(self, targets: "int | tuple[int, ...]", base: "int | tuple[int, ...]") -> int:
        """The state of the configurations ``base + t`` for t in ``targets``
        (distinct, sorted; an int is one target); with a tuple of bases (a
        cut over several stacks), ``base[t // stride] + t % stride``.

        A step is keyed by its configurations: one as the int itself,
        several packed as int64 in a ``bytes``, neither a container. A
        ``(base, targets)`` tuple kept a step was one, and CPython starts a
        full collection after a count of containers made (MaskBench's sp_0:
        12.8k steps of 158k containers, a full pass of ~30 ms due after ~35k
        in a benchmark child)."""
        if targets.__class__ is int or len(targets) == 1:
            t = targets if targets.__class__ is int else targets[0]
            key = base[t // self._stride] + t % self._stride if base.__class__ is tuple else base + t
            found = self._steps.get(key)
            if found is None:
                closed = self._closure(key)
                found = self._ids.get(closed)
                if found is None:
                    found = self._discover(closed)
                self._steps[key] = found
            return found
        size = self._stride
        if base.__class__ is tuple:  # one base a slot (see _cut_of)
            configs = [base[t // size] + t % size for t in targets]
        else:
            configs = [base + t for t in targets]
        key = array("q", configs).tobytes()
        found = self._steps.get(key)
        if found is None:
            closed = frozenset().union(*[self._closure(config) for config in configs])
            found = self._ids.get(closed)
            if found is None:
                found = self._discover(closed)
            self._steps[key] = found
        return found

    def _discover(self, kernel: frozenset) -> int:
        state = self._count
        if state >= self.max_states:
            raise BuildLimitError(
                f"regex {self._shown()[:200]!r} needs more than {self.max_states:,} DFA states "
                f"(lazy, before minimisation; {self.num_materialised:,} rows materialised)",
                reached=state + 1)
        if state == len(self._finals):
            self._grow()
        self._table[state] = UNKNOWN
        self._kernels[state] = kernel
        self._ids[kernel] = state
        self._finals[state] = self._nfa.final in kernel
        self._count = state + 1
        return state

    def _grow(self) -> None:
        capacity = 2 * len(self._finals)
        memory = self._table_memory
        if memory is not None and memory.grow(capacity):
            # the same pages, longer: nothing copied, and a reader of the old
            # array reads the first rows of the new one
            table = np.frombuffer(memory, dtype=STATE_DTYPE).reshape(capacity, 256)
        else:
            table, memory = _reserved_table(capacity, self.max_states)
            table[:self._count] = self._table[:self._count]  # the other rows are set as they are discovered
        try:
            finals = np.zeros(capacity, dtype=bool)
        except MemoryError:  # serving grows the table too, outside the builder's bounded_resources
            raise _out_of_memory(capacity) from None
        finals[:len(self._finals)] = self._finals
        flags = bytearray(capacity)
        flags[:len(self._materialised)] = self._materialised
        # Swap the finished copies in, the table last: a reader that takes the
        # new table then finds flags and finals as long as it; one that saw a
        # flag set before the swap finds the row in either table.
        self._materialised = flags
        self._finals = finals
        self._table_memory = memory
        self._table = table


def _reserved_table(rows: int, most: int) -> "tuple[np.ndarray, object | None]":
    """``int32[rows, 256]`` whose pages the system provides when first written
    (a private anonymous mapping), and the compiled core's ``Table`` that
    holds them (``None`` without the core). Its contents are undefined to the
    caller: each row is written before it is read. Past the first 4 MB
    (4,096 rows) the mapping asks for 2 MB pages, as numpy does for arrays
    that large: a table of tens of thousands of states read at random rows
    would miss the translation cache on 4 kB pages, and a small automaton
    keeps its few small pages.

    The ``Table`` grows in place, up to ``most`` rows where the addresses
    after it are free (see ``analysis/_lazycore.c``): copied into a mapping
    twice as large, the growth from 8k to 16k states took 2 to 23 ms of one
    step (MaskBench's worst), grown in place 0.05 ms. Without the core the
    table is copied, the reference."""
    if _lazycore is not None:
        try:
            memory = _lazycore.Table(rows, max(rows, min(most, 1 << 31)))
        except MemoryError:  # ENOMEM: an address-space limit, or no memory left
            raise _out_of_memory(rows) from None
        return np.frombuffer(memory, dtype=STATE_DTYPE).reshape(rows, 256), memory
    return _mapped_table(rows), None


def _mapped_table(rows: int) -> np.ndarray:
    """``_reserved_table`` without the compiled core: a mapping Python's mmap makes."""
    size = rows * 256 * np.dtype(STATE_DTYPE).itemsize
    if not hasattr(mmap, "MAP_PRIVATE"):
        try:
            return np.empty((rows, 256), dtype=STATE_DTYPE)
        except MemoryError:
            raise _out_of_memory(rows) from None
    try:
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    except (OSError, MemoryError):  # ENOMEM: an address-space limit, or no memory left
        raise _out_of_memory(rows) from None
    if size > _SMALL_PAGES_BYTES and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE, _SMALL_PAGES_BYTES, size - _SMALL_PAGES_BYTES)
        except OSError:  # a kernel without transparent huge pages: 4 kB pages throughout
            pass
    return np.frombuffer(mapping, dtype=STATE_DTYPE).reshape(rows, 256)


# The first bytes of a reserved table stay on 4 kB pages (see _reserved_table).
_SMALL_PAGES_BYTES = 4 << 20


def _out_of_memory(rows: int) -> BuildLimitError:
    return BuildLimitError(
        f"the lazy automaton's table of {rows:,} states ({rows * 256 * 4 / (1 << 20):,.0f} MiB) "
        "could not be allocated: the process is out of memory or address space")


def _with_gaps(ranges) -> tuple[list[int], list[int], list[tuple[int, ...]], list[tuple[int, int]]]:
    """``(starts, ends, targets, gaps)`` of sorted disjoint ``(lo, hi,
    targets)`` ranges, ``gaps`` the byte ranges between and around them."""
    starts: list[int] = []
    ends: list[int] = []
    targets_of: list[tuple[int, ...]] = []
    gaps: list[tuple[int, int]] = []
    dead_from = 0
    for lo, hi, targets in ranges:
        if lo > dead_from:
            gaps.append((dead_from, lo - 1))
        dead_from = hi + 1
        starts.append(lo)
        ends.append(hi)
        targets_of.append(targets)
    if dead_from < 256:
        gaps.append((dead_from, 255))
    return starts, ends, targets_of, gaps


INFINITE = 1 << 30
_MAIN = -1  # the pattern's own fragment, in _LazyNFA's tables


class _LazyNFA:
    """The pattern's Thompson NFA and one fragment per shared definition,
    each compiled the first time something calls it.

    The eager compiler determinises and minimises each definition once (a
    JSON Schema's free value: 0.2 s) and stamps a copy of it wherever its
    call stands, so free values nested D levels deep cost about 4^D
    states. Here a call is a *call*: the lazy automaton pushes the
    return state and runs the definition's fragment (see
    :class:`LazyByteDFA`); the NFA grows with the written pattern, not the
    expanded one. And a fragment is built (a text definition read) only
    when a closure first reaches a call to it: a Kubernetes schema's 70
    definitions are 516k characters of regex (3.8 s to build), of which the
    first masks reach the root's 8k and its three callees' 12k.

    **Exact liveness, lazily.** Every kept state can reach the end of its
    fragment (dead is empty, as without calls). When a fragment is *entered*
    (resolved), what each of its callees can do is decided first: whether
    it matches anything at all. That is first read off the callee's tree
    (:meth:`_matches_something`: a match through literals, character sets,
    optional parts and calls of definitions known to match), which usually
    settles it without compiling the callee; else a backward search over
    the callee's compiled fragment that counts a not yet decided call as
    impassable; only when that fails are the callee's callees decided. With
    every callee decided, the fragment's states that cannot reach its end
    are dropped, once. The compiled construction says whether every state
    of a fragment reaches its end, a call passing to its return
    (:attr:`dense`): with every callee matching, nothing is dropped and the
    search is not run (every fragment of MaskBench's sample is so).

    **Growing definitions.** From a :class:`DefinitionSource` the
    definitions are not all known at the start: a key is numbered when a
    tree that calls it is read (:attr:`~tokendfa.analysis.regex_tree.Node.calls`),
    and its own tree is read (computed by the source) only when its fragment
    is compiled, that is when a closure first reaches a call to it or when
    deciding a caller needs it. Every table indexed by definition grows
    then, in place.

    **Recursion.** Without a stack bound, a definition that reaches itself
    through the calls of the definitions is refused (found on the trees'
    :attr:`~tokendfa.analysis.regex_tree.Node.calls` and the texts'
    placeholders): from a mapping before anything is compiled; from a
    growing source as each fragment is compiled (:meth:`_check_acyclic`),
    since the definitions are not all known. With ``max_depth``, recursion
    is allowed: everything is compiled up front and :func:`_needs` finds how
    many stack levels each state needs to finish, which the automaton
    checks against the depth of each configuration.

    **Shapes.** Definitions that differ only in which definitions they call
    (a JSON Schema's free value: 32 levels, each calling the one below) are
    built once; the others are copies of that fragment with its states and
    callees renamed (:meth:`_shape`, :meth:`_stamp_template`). The fragments
    of definitions given as trees are kept for the whole process
    (:class:`_SharedFragments`): the next schema's free values are copies too.
    A tree with calls is renamed only where another definition of its size is
    known, where its key is a tuple (a free value's levels), or after its
    build where its fragment is large (:meth:`_compile`).

    A syntax error in a definition surfaces when the definition is first
    reached, not at construction (generated definitions do not have any).
    """

    def __init__(self, pattern: "str | Node", definitions, max_nfa_states: int,
                 max_depth: int | None) -> None:
        self.pattern = pattern
        self.max_nfa_states = max_nfa_states
        self.max_depth = max_depth
        # Tuples, made untracked by the cyclic collector (_untrack_rows): a
        # fragment of a maxLength-1024 string has ~64k states, and as lists
        # every collection of the generation holding them walked them all
        # (MaskBench's sp_0: 11 collections of ~4 ms inside its steps).
        self.eps: list[tuple[int, ...]] = []
        # edges[q]: q's byte edges as one flat tuple (lo, hi, target, lo, hi,
        # target, ...), not a tuple of triples: each tuple kept is a container
        # CPython counts toward a full collection (MaskBench's sp_0: 22.9k
        # triples of its 100k containers; see LazyByteDFA._step)
        self.edges: list[tuple[int, ...]] = []
        self.calls: list[tuple[tuple[int, int], ...]] = []  # calls[q]: ((definition, return state), ...)
        self.ends = bytearray()  # ends[q]: q ends a definition's fragment (a return)
        if _lazycore is not None:
            # The lists too: made with the first mask, they are young in the
            # first steps, where each collection of the young generations
            # walked them whole (up to 3.5 ms in one step on sp_0)
            for table in (self.eps, self.edges, self.calls):
                _lazycore.untrack_table(table)
        # Definitions are numbered as they become known: all at once from a
        # mapping, and from a growing source as the trees that call them are
        # read (_tree). The C core holds these lists and this bytearray and
        # reads their current lengths: they grow in place, never rebound.
        self.placeholders: list = []
        self.number: dict = {}
        # each definition's tree, or its regex text (read when first called);
        # None: not read from the growing source yet
        self.texts: list = []
        self.start_of: list[int] = []
        self.end_of: list[int] = []
        self.span: list[tuple[int, int]] = []  # states base..end of a compiled fragment
        self.callees: list[tuple[int, ...] | None] = []
        self.completes: list[bool | None] = []
        self.resolved = bytearray()
        # dense[d]: every state of d's fragment reaches its end, a call
        # passing to its return (the compiled construction says so, or the
        # template it was copied from): with every callee matching, the
        # alive search and the prune are skipped (enter). They found every
        # state alive in all 503 of MaskBench's sample (--per-source 4), and
        # were ~19 us of a first call's ~230 in a fresh fork
        # (benchmarks/lazy_enter_parts.py).
        self.dense = bytearray()
        self.templates: dict[tuple, _FragmentTemplate] = {}
        # The builder's tables (see _build), kept from fragment to fragment
        # (untracked as the tables are: long-lived, and no cycle runs through them).
        self._builder_eps: list = []
        self._builder_edges: list = []
        if _lazycore is not None:
            _lazycore.untrack_table(self._builder_eps)
            _lazycore.untrack_table(self._builder_edges)
        # a dict or nothing, the common cases, skip the check; the protocol's
        # members are looked up as its isinstance would, without typing's walk
        # of the protocol (~20 us and 9 copy-on-write faults in a fresh fork)
        ordered = False  # definitions known to call only later ones (see below)
        if definitions.__class__ not in (dict, type(None)) and all(
                getattr(definitions, name, None) is not None for name in _SOURCE_MEMBERS):
            if max_depth is not None:
                raise ValueError("max_depth compiles every definition up front: "
                                 "it takes a mapping of definitions, not a growing source")
            self.source: DefinitionSource | None = definitions
        else:
            definitions = dict(definitions or {})
            self.source = None
            texts = False
            for key, value in definitions.items():
                self._register(key, value)
                texts = texts or isinstance(value, str)
            # Trees that each call only definitions after them (a schema's, as its
            # compiler writes them) cannot recurse: checked here, inline, so that
            # neither the placeholders' check (trees have none) nor the general
            # search runs. In a fresh fork of a warm process each function's first
            # run writes the page of its code object: these ran for ~3/4 of
            # MaskBench's median schemas and not for the warm-up.
            ordered = not texts
            if ordered:
                number = self.number
                for d, tree in enumerate(self.texts):
                    for key in tree.calls:
                        if number.get(key, d + 1) <= d:
                            ordered = False
                            break
                    if not ordered:
                        break
            else:
                SharedDefinitions(definitions, max_nfa_states)  # checks the placeholders
        # Texts of one shape have one length (a placeholder is one character),
        # trees one size: one of a length no other has keeps no template of
        # its own (o65424: 22 of its 23 shapes occur once, and their
        # templates would have kept 10 MB of rows for nothing); a tree's goes
        # to the process's bounded store of fragments (_SharedFragments).
        # From a growing source the lengths are those of the definitions read
        # so far.
        self.length_count = Counter(_source_length(text) for text in self.texts if text is not None)
        if max_depth is None and self.source is None and not ordered:
            self._refuse_recursion()
        main = pattern if isinstance(pattern, Node) else parse_regex(
            pattern, calls=bool(self.placeholders) or self.source is not None)
        self._discover(main)
        if main.__class__ is Call and main.key in self.number:
            main = self._tree(self.number[main.key])  # the whole pattern is one definition
        if max_depth is None:
            main = self._rest_deferred(main)
        self.start, self.final, main_callees, dense = self._build(main)
        self.main_span = (0, len(self.eps))
        self.need: list[int] | None = None
        self.need_byte: list[int] | None = None
        if max_depth is None:
            for callee in main_callees:
                self._decide(callee)
            if not (dense and all(self.completes[c] for c in main_callees)):
                limits.check()   # the two passes below are linear in the fragment: 50 ms on 500,000 states
                alive = self._alive(self.main_span, self.final)
                limits.check()
                self._prune(self.main_span, alive)
                if not alive[self.start]:
                    self.start = -1
        else:
            for d in range(len(self.placeholders)):
                if self.start_of[d] < 0:
                    self._compile(d)
            self._bounded(max_depth)

    # --- the rest of a long pattern, compiled when a match reaches it ----------

    def _rest_deferred(self, main: Node) -> Node:
        """``main`` (a concatenation, or an alternation of them) with the
        items after its first ones made a definition of their own: decided
        without compiling it when its tree surely matches (:meth:`_matches_something`),
        and compiled when a match first reaches it. A schema's regex is an
        object's members one after the other; the first mask walks tokens
        into the first few of them only, and building the others' NFA was
        most of the construction (0.78 of a 3.3 ms time to first mask at the
        median of MaskBench's sample). Not with ``max_depth``, whose stack
        bound counts every call."""
        if main.size < _REST_MIN_SIZE:
            return main
        if main.__class__ is Alt:
            return alt([self._rest_deferred(branch) for branch in main.items])
        if main.__class__ is not Concat:
            return main
        items = main.items
        head, size = 0, 0
        while head < len(items) - 1 and size < _HEAD_SIZE:
            size += items[head].size
            head += 1
        rest = items[head:]
        if sum(item.size for item in rest) < _REST_MIN_SIZE:
            return main
        key = _RestOfPattern(len(self.placeholders))
        self._register(key, concat(*rest))
        return concat(*items[:head], Call(key))

    # --- the definitions, as they become known ------------------------------

    def _register(self, key, value=None) -> None:
        self.number[key] = len(self.placeholders)
        self.placeholders.append(key)
        self.texts.append(value)
        self.start_of.append(-1)
        self.end_of.append(-1)
        self.span.append((0, 0))
        self.callees.append(None)
        self.completes.append(None)
        self.resolved.append(0)
        self.dense.append(0)

    def _discover(self, tree: Node) -> None:
        """Number the definitions of a growing source that ``tree`` calls
        (:attr:`~tokendfa.analysis.regex_tree.Node.calls`, in an order that
        does not depend on the hash seed), without computing them."""
        source = self.source
        if source is None or not tree.calls:
            return
        number = self.number
        new = [key for key in tree.calls if key not in number and source.defines(key)]
        for key in sorted(new, key=_key_order):
            self._register(key)

    def _tree(self, d: int) -> Node:
        """Definition ``d``'s tree: read from a growing source on first use,
        a text read through the parse cache."""
        value = self.texts[d]
        if value is None:
            value = self.source.tree(self.placeholders[d])
            if not isinstance(value, Node):
                raise TypeError(f"a definition source gave {type(value).__name__}, not a regex tree")
            self.texts[d] = value
            self.length_count[_source_length(value)] += 1
            self._discover(value)
        return value if isinstance(value, Node) else parse_regex(value, calls=True, anchors=False)

    def _check_acyclic(self, d: int) -> None:
        """Refuse a fragment of a growing source that reaches itself through
        compiled fragments (the source promises none: this keeps a broken
        promise from looping in a closure). Each cycle is found when its last
        fragment is compiled; the search stops at fragments not compiled yet,
        which a new fragment's callees mostly are."""
        seen: set[int] = set()
        stack = list(self.callees[d])
        while stack:
            c = stack.pop()
            if c == d:
                raise RegexError(f"shared definition {_key_name(self.placeholders[d])} uses itself")
            if c not in seen and self.callees[c] is not None:
                seen.add(c)
                stack.extend(self.callees[c])

    # --- building fragments -------------------------------------------------

    def __contains__(self, key) -> bool:  # the interface ThompsonNFA asks of shared definitions
        return key in self.number

    def template(self, key):
        return key

    def _refuse_recursion(self) -> None:
        number = self.number
        uses = [sorted({number[c] for c in set(text) if c in number}) if isinstance(text, str)
                else sorted({number[k] for k in calls_in(text) if k in number}) for text in self.texts]
        state = bytearray(len(uses))  # 0 new, 1 on the path, 2 done
        for root in range(len(uses)):
            if state[root]:
                continue
            path = [(root, iter(uses[root]))]
            state[root] = 1
            while path:
                node, pending = path[-1]
                nxt = next(pending, None)
                if nxt is None:
                    state[node] = 2
                    path.pop()
                elif state[nxt] == 1:
                    raise RegexError(f"shared definition {_key_name(self.placeholders[nxt])} uses itself "
                                     "(recursion needs a stack bound, max_depth)")
                elif state[nxt] == 0:
                    state[nxt] = 1
                    path.append((nxt, iter(uses[nxt])))

    def _build(self, tree: Node) -> tuple[int, int, tuple[int, ...], bool]:
        """Thompson-construct ``tree`` and append it to the tables: ``(start,
        end, callees, dense)`` (see :attr:`dense`; the Python construction
        does not say, False).

        The compiled construction (:func:`~.regex_compiler.thompson_fragment`)
        makes the rows as the tables hold them (tuples, edges flat, off the
        cyclic collector); without it, :class:`_CallingThompsonNFA`, the
        reference, the same rows. Compiled, sp_0's 6,030-state definition
        (the keys its object does not declare) is ~0.5 ms, not ~8 ms."""
        base = len(self.eps)
        try:
            fragment = thompson_fragment(tree, max_states=self.max_nfa_states, base=base, shared=self.number,
                                         calls=True, min_branches=LAZY_LITERAL_SET_MIN_BRANCHES, flat=True)
        except RecursionError:
            shown = ThompsonNFA(tree, self.max_nfa_states).shown()
            raise RegexError(f"regex {shown[:200]!r} is nested too deeply to compile") from None
        if fragment is not None:
            added = len(fragment.eps)
            limits.check()
            if not self.eps:
                # The main fragment, built before anything holds the tables
                # (the native core takes them later): its lists become the
                # tables instead of being copied into empty ones. Paired in
                # children of one warmed parent (the median band of
                # ttfm_phases.py, 120 a side, with the construction's result
                # made without a Python call): the NFA phase 0.139 -> 0.131 ms
                # CPU, 8.6 -> 7.8 faults a schema.
                self.eps, self.edges, self.calls = fragment.eps, fragment.edges, [()] * added
                self.ends = bytearray(added)
                if _lazycore is not None:
                    for table in (self.eps, self.edges, self.calls):
                        _lazycore.untrack_table(table)
            else:
                self._reserve(added)
                self.eps += fragment.eps
                self.edges += fragment.edges
                self.calls.extend([()] * added)
                self.ends.extend(bytes(added))
            callees = set()
            number = self.number
            for q, items in fragment.calls:
                self.calls[q] = tuple((number[key], ret) for key, ret in items)
                callees.update(number[key] for key, _ in items)
            return fragment.start, fragment.end, tuple(sorted(callees)), fragment.dense
        return self._build_reference(tree) + (False,)

    def _build_reference(self, tree: Node) -> tuple[int, int, tuple[int, ...]]:
        """:meth:`_build` through the Python construction."""
        builder = _CallingThompsonNFA(tree, self.max_nfa_states, self)
        # The builder numbers its states from the end of the tables, past
        # stand-ins for the states there, so its rows need no renumbering
        # (adding the base to every target was ~1 us a state, a fifth of
        # compiling a definition at its first call). The stand-ins are kept
        # from one fragment to the next, only the new states' added: made
        # anew for every fragment, they were 58 ms of Github_ultra/o0's
        # 359 ms time to first mask (66 fragments past 89,000 states on average).
        base = len(self.eps)
        builder_eps, builder_edges = self._builder_eps, self._builder_edges
        builder_eps.extend([()] * (base - len(builder_eps)))
        builder_edges.extend([()] * (base - len(builder_edges)))
        builder.eps, builder.edges = builder_eps, builder_edges
        try:
            start = builder.new_state()
            try:
                end = builder.build(tree, start)
            except RecursionError:
                raise RegexError(f"regex {builder.shown()[:200]!r} is nested too deeply to compile") from None
            added = len(builder_eps) - base
            # The rows become tuples a chunk at a time, each chunk's lists freed
            # at once, the deadline checked between chunks; the tables change only
            # once all are made (a fragment stopped half-way leaves them as they
            # were). Made in one go, 500,000 rows (an enum of 30,000 objects) were
            # ~0.2 s without a check (conversion 70 ms, the lists' freeing 40 ms,
            # untracking 25 ms).
            new_eps: list = []
            new_edges: list = []
            for at in range(base, base + added, _ROWS_CHUNK):
                limits.check()
                stop = min(at + _ROWS_CHUNK, base + added)
                new_eps += map(tuple, builder_eps[at:stop])
                # flat (see self.edges): one edge's row is its triple itself;
                # inline and sum() for short rows, as fast as map(tuple) was
                # (a call of a helper a row tripled the time: ~4% of the
                # slowest steps, compiling definitions at their first call)
                new_edges += [(row[0] if len(row) == 1 else sum(row, ()) if len(row) < 16
                               else tuple(chain.from_iterable(row))) if row else () for row in builder_edges[at:stop]]
                builder_eps[at:stop] = _NO_ROWS[:stop - at]
                builder_edges[at:stop] = _NO_ROWS[:stop - at]
                _untrack_rows(new_eps, at - base, stop - base)
                _untrack_rows(new_edges, at - base, stop - base)
            limits.check()
            self.eps += new_eps
            self.edges += new_edges
        finally:
            del builder_eps[base:], builder_edges[base:]
        self.calls += [()] * added
        self.ends.extend(bytes(added))
        callees = set()
        for q, items in builder.calls.items():
            self.calls[q] = tuple((self.number[p], ret) for p, ret in items)
            callees.update(self.number[p] for p, _ in items)
        return start, end, tuple(sorted(callees))

    def _compile(self, d: int) -> None:
        base = len(self.eps)
        tree = self._tree(d)
        source = self.texts[d]
        # A text's shape is found only where another text of its length may
        # share it; a literal set is its own shape (built from its strings, no
        # callee to rename). A tree's is found where another of its size is
        # known, where it calls nothing (its shape is the tree itself, no
        # renaming), or where its key is a tuple (a free value's levels, the
        # same trees in every schema): trees of other keys with calls (a
        # schema's placeholders, numbered per schema) seldom come back, and
        # renaming each and keeping its template was ~60 us of the ~270 us a
        # first call took in MaskBench's fresh forks, for 4 copies in the
        # sample's 195 such builds (a small fragment's copy costs about its
        # build). A large fragment's template is still kept, after its build
        # (see below).
        local = self.length_count[_source_length(source)] > 1
        is_tree = isinstance(source, Node)
        shaped = tree.__class__ is not LiteralSet and (local or is_tree and (
            not tree.calls or self.placeholders[d].__class__ is tuple))
        shape, order = self._shape(tree, remember=self.placeholders[d].__class__ is tuple) if shaped else (None, ())
        template = None
        if shape is not None:
            template = self.templates.get(shape)
            if template is None:
                template = _SHARED_FRAGMENTS.get(shape)
                if template is not None and local:
                    self.templates[shape] = template
        if template is not None and base + len(template.eps) <= self.max_nfa_states:
            start, end, callees = self._stamp_template(template, order)
            dense = template.dense
        else:
            start, end, callees, dense = self._build(tree)
            if (shape is None and is_tree and tree.__class__ is not LiteralSet
                    and len(self.eps) - base >= _TEMPLATE_MIN_STATES):
                shape, order = self._shape(tree)
            # A tree's template is made where its key is a tuple (a free
            # value's levels, the same trees in every schema), its fragment is
            # large (below), or its shape was built before in the process
            # (_SharedFragments.built_before): most of a schema's other
            # shapes are built once, and in MaskBench's fresh forks the
            # templates their first calls made were seldom copied, for ~7-15
            # us and ~1.3-1.7 faults of each first call (lazy_enter_parts.py,
            # paired). A server's second schema of such a shape builds it
            # again, the third copies it.
            if template is None and shape is not None and (
                    not is_tree or self.placeholders[d].__class__ is tuple
                    or len(self.eps) - base >= _TEMPLATE_MIN_STATES or _SHARED_FRAGMENTS.built_before(shape)):
                template = self._template(base, start, end, order, dense)
                # A tree's template is kept here whatever the lengths known so
                # far: from a growing source, the next definition of its shape
                # may be read only later, and a fragment too large for the
                # process's templates (_SharedFragments) was built again
                # (Kubernetes kb_188: a 25,759-state fragment, ~40-80 ms a
                # build, inside one step; a stamp is ~17 ms). The template
                # holds the rows as built, the NFA's own tuples.
                if local or is_tree:
                    self.templates[shape] = template
                if is_tree:
                    _SHARED_FRAGMENTS.keep(shape, template)
        self.start_of[d], self.end_of[d], self.callees[d] = start, end, callees
        self.dense[d] = dense
        self.span[d] = (base, len(self.eps))
        self.ends[end] = 1
        if self.source is not None:
            self._check_acyclic(d)

    # --- fragments of one shape, built once ------------------------------------

    def _shape(self, tree: Node, remember: bool = False) -> tuple[Node, tuple[int, ...]]:
        """``tree`` with each call of a definition renamed to the order of its
        first appearance, and the definitions in that order: two trees of one
        shape have the same Thompson construction but for the callees.

        A tree seen before in the process takes its shape from the process's
        store (:class:`_SharedFragments`): renaming was a quarter of copying a
        small definition that a template copies (MaskBench's sample, the
        warm-up's free value levels in each forked child). The store keeps
        the shapes of the trees of definitions keyed by tuples
        (``remember``), those named alike in every schema (a free value's
        levels), not those of placeholders, numbered per schema, whose trees
        seldom come back: in a forked child each shape kept is the parent's
        table written (pages copied), +11 page faults and +0.06 ms at the
        median of MaskBench's first masks when every shape was kept."""
        if not tree.calls:
            return tree, ()  # nothing to rename (the walk below would give the tree back)
        number = self.number
        known = _SHARED_FRAGMENTS.shape_of(tree)
        if known is not None:
            shape, keys = known
            # The same tree renames to the same shape wherever the same of its
            # calls name definitions; its callees are then the numbers of the
            # same keys, in this automaton's numbering.
            if all(key in number for key in keys) and (
                    len(keys) == len(tree.calls) or sum(key in number for key in tree.calls) == len(keys)):
                return shape, tuple([number[key] for key in keys])
        order: dict[int, int] = {}
        memo: dict[int, Node] = {}

        def renamed(node: Node) -> Node:
            if not node.calls:
                return node   # nothing to rename below (most of a tree's nodes)
            cls = node.__class__
            if cls is Call:
                d = number.get(node.key)
                return node if d is None else Call(order.setdefault(d, len(order)))
            if cls is Concat or cls is Alt:
                found = memo.get(id(node))
                if found is None:
                    # items without calls (most) are not visited, and the
                    # comparison runs in C
                    old = node.items
                    items = [renamed(item) if item.calls else item for item in old]
                    found = cls(tuple(items)) if any(map(is_not, items, old)) else node
                    memo[id(node)] = found
                return found
            if cls is Repeat:
                body = renamed(node.body)
                return node if body is node.body else Repeat(body, node.lo, node.hi)
            if cls is Excluding:
                multi, rest = renamed(node.multi), renamed(node.rest)
                return node if multi is node.multi and rest is node.rest else Excluding(
                    node.names, node.single, multi, rest)
            return node

        shape = renamed(tree)
        if remember:
            placeholders = self.placeholders
            _SHARED_FRAGMENTS.keep_shape(tree, shape, tuple([placeholders[d] for d in order]))
        return shape, tuple(order)

    def _template(self, base: int, start: int, end: int, order: tuple[int, ...],
                  dense: bool) -> "_FragmentTemplate":
        """What :meth:`_stamp_template` needs to make another fragment of the
        shape just built at ``base`` (its rows, before any pruning)."""
        position = {number: i for i, number in enumerate(order)}
        stop = len(self.eps)
        # the rows with calls found in C (compress): a fragment has few of
        # them among thousands of states
        rows = self.calls[base:stop]
        calls = tuple((q, tuple((position[d], ret - base) for d, ret in rows[q]))
                      for q in compress(range(stop - base), rows))
        return _FragmentTemplate(base, tuple(self.eps[base:stop]), tuple(self.edges[base:stop]),
                                 calls, start - base, end - base, dense)

    def _stamp_template(self, template: "_FragmentTemplate", order: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        """Append a copy of ``template``'s fragment calling the definitions of
        ``order``: what :meth:`_build` of a text of that shape appends, for a
        tenth of its time (a JSON Schema's free value nested 32 deep: 32
        definitions of one 281-character shape, 1.7 ms each to parse and build)."""
        base = len(self.eps)
        size = len(template.eps)
        limits.check()  # what the construction checks before each of its fragments
        limits.check_memory((base + size) * NFA_STATE_BYTES, "the NFA of a shared definition")
        offset = base - template.base
        self._reserve(size)
        eps = relocated_rows(template.eps, offset, 1)
        if eps is not None:   # compiled: the rows made off the cyclic collector
            self.eps += eps
            self.edges += relocated_rows(template.edges, offset, 3)
        else:
            self.eps.extend([tuple([t + offset for t in row]) if row else () for row in template.eps])
            self.edges.extend([(row[0], row[1], row[2] + offset) if len(row) == 3  # one edge, most rows
                               else _shifted_edges(row, offset) if row else () for row in template.edges])
            _untrack_rows(self.eps, base, len(self.eps))
            _untrack_rows(self.edges, base, len(self.edges))
        self.calls += [()] * size   # not a generator of ()s: ~25 ns a state, not ~60
        self.ends.extend(bytes(size))
        for q, items in template.calls:
            self.calls[base + q] = tuple((order[i], ret + base) for i, ret in items)
        callees = tuple(sorted({order[i] for _, items in template.calls for i, _ in items}))
        return template.start + base, template.end + base, callees

    def _reserve(self, added: int) -> None:
        """Room made in the tables for ``added`` more states, half as many
        again when they grow (the compiled core's reserve_table; without it
        list.extend grows them by an eighth, which moved them at nearly every
        first call of a definition: paired in MaskBench's fresh forks,
        lazy_enter_parts.py, ~1 fault and a few us less a first call)."""
        if _lazycore is not None:
            need = len(self.eps) + added
            for table in (self.eps, self.edges, self.calls):
                _lazycore.reserve_table(table, need)

    # --- deciding and pruning, one fragment at a time -------------------------------

    def _alive(self, span: tuple[int, int], end: int) -> bytearray:
        """``alive[q]`` for q in ``span``: q reaches ``end`` through the fragment,
        passing a call when the callee is known to match something."""
        base, stop = span
        if _lazycore is not None:
            return _lazycore.alive(self.eps, self.edges, self.calls, self.completes, base, stop, end)
        predecessors: list[list[int]] = [[] for _ in range(stop - base)]
        completes = self.completes
        for q in range(base, stop):
            for t in self.eps[q]:
                predecessors[t - base].append(q)
            for t in self.edges[q][2::3]:
                predecessors[t - base].append(q)
            for d, ret in self.calls[q]:
                if completes[d]:
                    predecessors[ret - base].append(q)
        alive = bytearray(stop)  # indexed by global state; below base unused
        alive[end] = 1
        stack = [end]
        while stack:
            for source in predecessors[stack.pop() - base]:
                if not alive[source]:
                    alive[source] = 1
                    stack.append(source)
        return alive

    def _decide(self, d: int) -> bool:
        """Whether definition ``d`` matches anything (compiling it, and its
        callees only when it has no match that avoids the undecided ones)."""
        known = self.completes[d]
        if known is not None:
            return known
        if self.start_of[d] < 0:
            if self._known_to_match(d) or self._matches_something(self._tree(d)):
                # decided on the tree: compiled when first entered. A fragment's
                # callees are decided when it is entered, and compiling them all
                # there was most of the first mask on schemas of many properties
                # (a 60,000-value enum inside an object: ~0.2 s)
                self.completes[d] = True
                return True
            self._compile(d)
        start = self.start_of[d]
        if not self._alive(self.span[d], self.end_of[d])[start]:
            for callee in self.callees[d]:
                self._decide(callee)
            self.completes[d] = bool(self._alive(self.span[d], self.end_of[d])[start])
        else:
            self.completes[d] = True
        return self.completes[d]

    def _known_to_match(self, d: int) -> bool:
        """Whether the growing source says, without computing it, that
        definition ``d`` matches something (its optional
        ``matches_something``); then recorded as decided."""
        if self.texts[d] is not None or self.source is None:
            return False
        said = getattr(self.source, "matches_something", None)
        if said is None or not said(self.placeholders[d]):
            return False
        self.completes[d] = True
        return True

    def _matches_something(self, tree: Node) -> bool:
        """Whether ``tree`` surely matches some string, read off the tree:
        True only when it has a match that passes through no call of a
        definition not yet known to match (the alive search of
        :meth:`_decide` on the fragment would find the same). False also
        where that is not found here (a set of lone surrogates, a tree
        nested too deeply): the fragment is then compiled and searched."""
        completes, number, texts = self.completes, self.number, self.texts
        called: dict[int, bool] = {}

        def call_matches(key) -> bool:
            d = number.get(key)
            if d is None:
                return False
            if completes[d] is not None:
                return completes[d]
            if self._known_to_match(d):
                return True
            # A definition given as a tree is read too (not compiled): a
            # schema's property whose value object calls its members'
            # values was compiled before the first mask otherwise
            # (BFCL_sql:14: 122 of 140 NFA states), though no first-mask
            # token reaches it.
            tree = texts[d]
            if not isinstance(tree, Node):
                return False
            found = called.get(d)
            if found is None:
                called[d] = False  # a definition reaching itself: undecided here
                found = called[d] = surely_matches(tree, call_matches)
            return found

        try:
            return surely_matches(tree, call_matches)
        finally:
            # call_matches refers to itself (its recursion): a cycle through
            # this automaton's NFA that only the cyclic collector freed, in a
            # later row's collection (bench_batch: 7 of 16 NFAs a run, ~7 ms
            # of each serial run's 35 ms in fill_masks spent collecting them)
            del call_matches

    def _prune(self, span: tuple[int, int], alive: bytearray) -> None:
        eps, edges, calls, completes = self.eps, self.edges, self.calls, self.completes
        base, stop = span
        if alive.count(1, base, stop) == stop - base and all(
                completes[d] for row in filter(None, calls[base:stop]) for d, _ in row):
            return  # every state alive and every callee matching: nothing to drop (the usual case)
        for q in range(*span):
            if not alive[q]:
                eps[q], edges[q], calls[q] = (), (), ()
                continue
            # A row that loses nothing stays the same tuple: a fragment's
            # template (:meth:`_template`) holds the rows as built, and new
            # copies of unchanged rows doubled what kb_484's templates kept.
            row = eps[q]
            if row:
                kept = [t for t in row if alive[t]]
                if len(kept) != len(row):
                    eps[q] = tuple(kept)
            row = edges[q]
            if row:
                kept = [x for lo, hi, t in _edge_triples(row) if alive[t] for x in (lo, hi, t)]
                if len(kept) != len(row):
                    edges[q] = tuple(kept)
            row = calls[q]
            if row:
                kept = [(d, r) for d, r in row if completes[d] and alive[r]]
                if len(kept) != len(row):
                    calls[q] = tuple(kept)
        _untrack_rows(eps, *span)  # the new tuples
        _untrack_rows(edges, *span)

    def enter(self, d: int) -> int:
        """The start state of definition ``d``'s fragment, resolved (its
        callees decided, its dead states dropped) on the first call."""
        if not self.resolved[d]:
            self._decide(d)
            if self.start_of[d] < 0:
                self._compile(d)  # decided without compiling it (a literal set)
            callees = self.callees[d]
            for callee in callees:
                self._decide(callee)
            # dense, every callee matching: the search would find every
            # state alive, and the prune drop nothing
            if not (self.dense[d] and all(self.completes[c] for c in callees)):
                self._prune(self.span[d], self._alive(self.span[d], self.end_of[d]))
            self.resolved[d] = 1
        return self.start_of[d]

    def compile_everything(self) -> None:
        """Compile and resolve every fragment the pattern can reach."""
        todo = [d for q in range(*self.main_span) for d, _ in self.calls[q]]
        while todo:
            d = todo.pop()
            if not self.resolved[d]:
                self.enter(d)
                todo.extend(c for q in range(*self.span[d]) for c, _ in self.calls[q])

    def _bounded(self, max_depth: int) -> None:
        """With a stack bound: the levels each state needs (:func:`_needs`)
        over everything, and every state that cannot finish within the bound
        dropped."""
        by_start = [tuple((self.start_of[d], r) for d, r in items) for items in self.calls]
        need, need_byte = _needs(self.eps, self.edges, by_start, self.ends, self.final, max_depth)
        keep = bytearray(n <= max_depth for n in need)
        for d in range(len(self.placeholders)):
            self.completes[d] = bool(keep[self.start_of[d]])
            self.resolved[d] = 1
        self._prune((0, len(self.eps)), keep)
        self.need, self.need_byte = need, need_byte
        if not keep[self.start]:
            self.start = -1


class _RestOfPattern(NamedTuple):
    """The key of the definition that holds the rest of a long pattern (:meth:`_LazyNFA._rest_deferred`)."""

    number: int


# A pattern at least this large (about its characters) keeps its first items,
# about _HEAD_SIZE characters of them, and the others become a definition
# compiled when a match first reaches it (_LazyNFA._rest_deferred).
_REST_MIN_SIZE = 256
_HEAD_SIZE = 64
class _SharedFragments:
    """The fragments of definitions given as trees, by shape, kept for the
    whole process: a JSON Schema's free value levels and counted strings
    are the same trees in every schema (with the same options), so a
    schema's first call of one stamps a copy (:meth:`_LazyNFA._stamp_template`)
    instead of building it. A shape's fragment is kept from its first
    build where its key is a tuple (a free value's levels) or it is large,
    else from its second build in the process (the shapes built once are
    recorded, :meth:`built_before`: ``MAX_BUILT`` of them, the record
    cleared when full). Bounded: fragments of at most
    ``MAX_FRAGMENT_STATES`` states, ``MAX_STATES`` states in all, the least
    recently used dropped first.

    It also keeps, by tree, the shapes of the trees with calls of
    definitions keyed by tuples (:meth:`_LazyNFA._shape`): such a tree
    compiled again (a free value's levels in every schema, and the
    warm-up's, in each child a prepared parent forks) takes its shape from
    here instead of renaming its nodes again, with its callees as keys (the
    numbers are the automaton's). Bounded too: trees of at most ``MAX_SHAPE_SIZE``
    (:attr:`~tokendfa.analysis.regex_tree.Node.size`), ``MAX_SHAPES``
    trees and ``MAX_SHAPES_SIZE`` in all, the oldest dropped first."""

    MAX_FRAGMENT_STATES = 20_000
    MAX_STATES = 200_000
    MAX_SHAPE_SIZE = 50_000
    MAX_SHAPES = 4_096
    MAX_SHAPES_SIZE = 500_000
    MAX_HITS = 4_096
    MAX_BUILT = 4_096

    def __init__(self) -> None:
        self._kept: "OrderedDict[Node, _FragmentTemplate]" = OrderedDict()
        self._states = 0
        # [pid, shape, shape, ...]: the shapes read since the last keep(), in
        # this process (a child's list is its own, not the parent's it forked from)
        self._hits: list | None = None
        self._shapes: "dict[Node, tuple[Node, tuple]]" = {}
        self._shapes_size = 0
        self._built: dict = {}
        self._lock = threading.Lock()

    def shape_of(self, tree: Node) -> "tuple[Node, tuple] | None":
        """``(shape, keys)`` kept for ``tree`` (:meth:`keep_shape`), or None.
        A read writes nothing (the oldest shape goes first, not the least
        recently read): in a forked child each write to the parent's table
        is a page copied."""
        return self._shapes.get(tree)

    def keep_shape(self, tree: Node, shape: Node, keys: tuple) -> None:
        """Keep ``tree``'s shape and the keys of its callees in the shape's order."""
        size = tree.size
        if size > self.MAX_SHAPE_SIZE:
            return
        with self._lock:
            if tree in self._shapes:
                return
            self._shapes[tree] = (shape, keys)
            self._shapes_size += size
            while len(self._shapes) > self.MAX_SHAPES or self._shapes_size > self.MAX_SHAPES_SIZE:
                dropped = next(iter(self._shapes))
                del self._shapes[dropped]
                self._shapes_size -= dropped.size

    def get(self, shape: Node) -> "_FragmentTemplate | None":
        """The fragment kept for ``shape``, or None. A read takes no lock and
        writes nothing in the table: the hit is noted in a list of this
        process's own (made at its first hit) and moved to the recent end at
        the next :meth:`keep`, before anything is dropped. Moved at each read,
        the table's links and the lock were written in a forked child, a
        page copied for each (~2% of the faults of a definition's first call
        in a fresh fork of a warm process)."""
        found = self._kept.get(shape)
        if found is not None:
            hits = self._hits
            if hits is None or hits[0] != os.getpid():
                hits = self._hits = [os.getpid()]
            if len(hits) <= self.MAX_HITS:
                hits.append(shape)   # atomic under the GIL; applied under the lock in keep()
        return found

    def _note_hits(self) -> None:
        """Move the shapes read since the last call to the recent end (the lock held)."""
        hits = self._hits
        if hits is None or len(hits) < 2:
            return
        self._hits = None
        kept = self._kept
        for shape in hits[1:]:
            if shape in kept:
                kept.move_to_end(shape)

    def built_before(self, shape: Node) -> bool:
        """Whether a fragment of ``shape`` was built before in this process
        (since the record was last cleared); recorded if not."""
        built = self._built
        if shape in built:
            return True
        if len(built) >= self.MAX_BUILT:
            built.clear()
        built[shape] = None
        return False

    def keep(self, shape: Node, template: "_FragmentTemplate") -> None:
        size = len(template.eps)
        if size > self.MAX_FRAGMENT_STATES:
            return
        with self._lock:
            if shape in self._kept:
                return
            self._note_hits()
            self._kept[shape] = template
            self._states += size
            while self._states > self.MAX_STATES:
                _, dropped = self._kept.popitem(last=False)
                self._states -= len(dropped.eps)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._states = 0
            self._hits = None
            self._shapes.clear()
            self._shapes_size = 0
            self._built.clear()


class _FragmentTemplate(NamedTuple):
    """A compiled fragment kept as the pattern for others of its shape
    (:meth:`_LazyNFA._shape`): its rows as built at ``base`` (targets
    absolute), and its calls, start and end relative to ``base``, the callees
    as positions in the shape's order."""
    base: int
    eps: tuple[tuple[int, ...], ...]
    edges: tuple[tuple[int, ...], ...]  # flat triples, as _LazyNFA.edges
    calls: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]
    start: int
    end: int
    dense: bool = False  # see _LazyNFA.dense


_SHARED_FRAGMENTS = _SharedFragments()
# A tree's fragment of at least this many states keeps its template even
# where its shape was not looked for (_LazyNFA._compile): in MaskBench's
# sample a copy of a fragment of ~1,600 states took about its build
# (~0.45 ms), but a build can cost 3x its copy (kb_188: 35-40 ms CPU, a copy
# 12-15), and renaming is small beside either
_TEMPLATE_MIN_STATES = 1_000

# _LazyNFA._build turns a fragment's rows into tuples this many at a time
_ROWS_CHUNK = 1 << 14
_NO_ROWS = [()] * _ROWS_CHUNK


def _source_length(source: "str | Node") -> tuple[bool, int]:
    """What two definitions of one shape share: a text's length (a
    placeholder is one character), or a tree's size."""
    return (True, len(source)) if isinstance(source, str) else (False, source.size)


def _key_order(key) -> tuple:
    """Definition keys in an order that does not depend on the hash seed."""
    return (0, key) if isinstance(key, str) else (1, repr(key))


def _key_name(key) -> str:
    """A definition's key for a message: a placeholder by its code point."""
    return f"{ord(key):#x}" if isinstance(key, str) and len(key) == 1 else repr(key)


def _edge_triples(row: tuple[int, ...]):
    """The ``(lo, hi, target)`` edges of a flat row of :attr:`_LazyNFA.edges`."""
    return zip(row[0::3], row[1::3], row[2::3])


def _shifted_edges(row: tuple[int, ...], offset: int) -> tuple[int, ...]:
    """A flat row of edges with ``offset`` added to each target."""
    if len(row) == 3:
        return (row[0], row[1], row[2] + offset)
    shifted = list(row)
    shifted[2::3] = [t + offset for t in row[2::3]]
    return tuple(shifted)


def _untrack_rows(rows: list, start: int, stop: int) -> None:
    """Take ``rows[start:stop]`` (tuples of ints, or of tuples of ints) off
    the cyclic collector's lists; without the compiled core the collector
    does it itself, on the first collection that sees them."""
    if _lazycore is not None:
        _lazycore.untrack_rows(rows, start, stop)


class _CallingThompsonNFA(ThompsonNFA):
    """The Thompson construction with a placeholder compiled as a call.

    ``calls[q]`` lists ``(placeholder, return_state)``: from ``q`` the
    automaton may run the placeholder's fragment and go on at
    ``return_state``. Fresh return states keep the construction's
    invariants (edges only leave ``source``; the returned end has none)."""

    def __init__(self, pattern: "str | Node", max_states: int, shared=None) -> None:
        super().__init__(pattern, max_states, shared)
        self.calls: dict[int, list[tuple[object, int]]] = {}

    def literal_set_min_branches(self) -> int:
        return LAZY_LITERAL_SET_MIN_BRANCHES

    def place_definition(self, template, source: int) -> int:
        ret = self.new_state()
        self.calls.setdefault(source, []).append((template, ret))
        return ret

    def copy_block(self, first: int, exit_: int, size: int) -> tuple[int, int]:
        offset = len(self.eps) - first
        copied = super().copy_block(first, exit_, size)
        calls = self.calls
        inside = (range(first, first + size) if size < len(calls) else sorted(calls))
        for state in [q for q in inside if q in calls and first <= q < first + size]:
            self.calls[state + offset] = [(p, ret + offset) for p, ret in self.calls[state]]
        return copied


def _needs(eps, edges, calls, ends, final, max_depth):
    """``need[q]``: the fewest stack levels on some path from ``q`` to the end
    of its fragment (0 without calls on the way; a call to a fragment that
    needs n levels needs n + 1), found level by level; ``need_byte[q]`` the
    same for paths that begin with one of ``q``'s byte edges. ``INFINITE``
    when no path exists (or none within ``max_depth``): such states are
    dead."""
    size = len(eps)
    predecessors: list[list[int]] = [[] for _ in range(size)]
    for source, targets in enumerate(eps):
        for target in targets:
            predecessors[target].append(source)
    for source, state_edges in enumerate(edges):
        for target in state_edges[2::3]:
            predecessors[target].append(source)
    call_sites = [(q, s, r) for q, items in enumerate(calls) for s, r in items]
    need = [INFINITE] * size
    level = 0
    frontier = [q for q in range(size) if ends[q]] + [final]
    for q in frontier:
        need[q] = 0
    while max_depth is None or level <= max_depth:
        while True:
            stack = frontier
            while stack:
                for source in predecessors[stack.pop()]:
                    if need[source] > level:
                        need[source] = level
                        stack.append(source)
            # a call site is passable at this level when its callee (one level
            # down) and its return state are
            frontier = []
            for q, s, r in call_sites:
                if need[q] > level and need[s] + 1 <= level and need[r] <= level:
                    need[q] = level
                    frontier.append(q)
            if not frontier:
                break
        if not any(need[q] == INFINITE and need[s] < INFINITE and need[r] < INFINITE
                   for q, s, r in call_sites):
            break
        level += 1
    need_byte = [min((need[t] for t in state_edges[2::3]), default=INFINITE) for state_edges in edges]
    return need, need_byte
