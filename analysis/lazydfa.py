"""The byte DFA built on demand: a subset construction that runs one state at a time.

:func:`tokendfa.analysis.construct.byte_dfa_from_regex` determinises the whole
NFA, minimises it and only then can anything be served; on a schema that is
most of a second. :class:`LazyByteDFA` keeps the NFA of
:mod:`tokendfa.analysis.regex_compiler` (same parser, same Thompson
construction, same shared definitions) and computes a DFA state's row of 256
successors the first time someone asks for it, so the first rows are ready in
the time it takes to build the NFA.

Two facts make it exact and servable without a global pass over the automaton:

* **Dead is empty.** Before anything is determinised, one backward pass over
  the NFA (epsilon and byte edges) finds the states that can reach the final
  one, and every other state and every edge into one is dropped. A DFA state
  is the set of kept NFA states with byte edges (or the final state) in an
  epsilon closure, its *kernel*; every member can reach the final state
  through kept states, so a non-empty kernel is live and the empty kernel is
  the only dead state (id 0). No state ever needs a liveness pass.
* **Ids never move.** States are numbered in discovery order, 0 dead and 1
  initial, and a row, once materialised, never changes. Readers of a
  materialised row take no lock; materialising takes one (see
  :meth:`LazyByteDFA.row`).

:meth:`LazyByteDFA.explore` materialises everything breadth-first and returns
the complete table; :func:`~tokendfa.analysis.minimise.canonical_byte_dfa` of it
is array for array the eager automaton (the tests hold the two equal).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Mapping

import numpy as np

from .dfa import DEAD, INITIAL, STATE_DTYPE
from . import limits
from .errors import BuildLimitError, EmptyLanguageError, RegexError
from .regex_compiler import (DEFAULT_MAX_NFA_STATES, _cut, _parse, _SharedDefinitions,
                             _ThompsonNFA)
from .regex_syntax import normalize_pattern

__all__ = ["LazyByteDFA", "DEFAULT_MAX_LAZY_STATES"]

# States a lazy automaton may discover (before minimisation) before it stops
# with BuildLimitError: 200k rows of 256 int32 are 200 MB, the order of what
# the eager build allows (DEFAULT_MAX_STATES in tokendfa.build.fast, after
# minimisation).
DEFAULT_MAX_LAZY_STATES = 200_000


class LazyByteDFA:
    """A complete byte DFA for ``pattern`` whose rows are computed on first use.

    ``row(state)`` is ``int32[256]`` (0: dead), ``is_final(state)`` whether
    the bytes so far are a match. The initial state is 1. Past ``max_states``
    discovered states, materialising raises
    :class:`~tokendfa.analysis.errors.BuildLimitError` with the count reached.

    Raises what :func:`~tokendfa.analysis.construct.byte_dfa_from_regex` raises for
    a bad pattern, including :class:`EmptyLanguageError` when it matches nothing.
    """

    def __init__(self, pattern: str, *, definitions: "Mapping[str, str] | None" = None,
                 max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                 max_states: int = DEFAULT_MAX_LAZY_STATES) -> None:
        self.pattern = pattern
        self.max_states = max_states
        eps, edges, start, final = _pruned_nfa(pattern, definitions, max_nfa_states)
        self._eps = eps
        self._edges = edges
        self._final = final
        self._closures: list[frozenset | None] = [None] * len(eps)
        self._lock = threading.Lock()
        initial = self._closure(start) if start >= 0 else frozenset()
        if not initial:
            shown = repr(pattern[:200]) + (f" (+{len(pattern) - 200:,} characters)"
                                           if len(pattern) > 200 else "")
            raise EmptyLanguageError(f"regex {shown} matches no string at all")
        self._kernels: list[frozenset] = [frozenset(), initial]
        self._ids: dict[frozenset, int] = {frozenset(): DEAD, initial: INITIAL}
        self._steps: dict[frozenset, int] = {}
        capacity = 64
        self._table = np.zeros((capacity, 256), dtype=STATE_DTYPE)
        self._finals = np.zeros(capacity, dtype=bool)
        self._finals[INITIAL] = final in initial
        # materialised[s]: row s is complete in self._table (the dead row always is)
        self._materialised = bytearray(capacity)
        self._materialised[DEAD] = 1
        self._count = INITIAL + 1

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
        """The current table: rows of materialised states are final; read
        the flags (:meth:`materialise`) before taking the table."""
        return self._table

    @property
    def finals(self) -> np.ndarray:
        """``bool[capacity]``: entries below :attr:`num_states` are exact."""
        return self._finals

    def is_final(self, state: int) -> bool:
        return bool(self._finals[state])

    def byte_alphabet(self) -> np.ndarray:
        """``bool[256]``: the bytes on some byte edge of the pruned NFA, i.e.
        every byte that can occur in a match (and only those)."""
        present = np.zeros(257, dtype=np.int64)
        for state_edges in self._edges:
            for lo, hi, _ in state_edges:
                present[lo] += 1
                present[hi + 1] -= 1
        return np.cumsum(present[:256]) > 0

    def row(self, state: int) -> np.ndarray:
        """The 256 successors of ``state``, computed on first request and kept."""
        if not self._materialised[state]:
            self.materialise((state,))
        return self._table[state]  # read after the flag: the table holds the row

    def materialise(self, states) -> None:
        """Make sure the rows of ``states`` (ids already discovered) exist.

        Thread-safe: rows are computed under the lock; a row's flag is set
        only after the row is in the table, and a grown table is a copy that
        holds every finished row, so a reader who sees the flag and then
        reads :attr:`table` sees the row.
        """
        missing = [s for s in states if not self._materialised[s]]
        if not missing:
            return
        with self._lock:
            collecting = gc.isenabled()
            gc.disable()  # many small frozensets, no cycles: see regex_compiler
            try:
                for state in missing:
                    if not self._materialised[state]:
                        limits.check()  # explore() materialises whole levels at once
                        self._compute_row(state)
            finally:
                if collecting:
                    gc.enable()

    def materialise_reached(self, states: np.ndarray) -> None:
        """:meth:`materialise` for an array of ids, checked in one vectorised
        step (most calls find every row already there)."""
        flags = np.frombuffer(self._materialised, dtype=np.uint8)
        missing = states[flags[states] == 0]
        if len(missing):
            self.materialise(np.unique(missing).tolist())

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

    def _closure(self, state: int) -> frozenset:
        found = self._closures[state]
        if found is None:
            eps, edges, final = self._eps, self._edges, self._final
            seen = {state}
            stack = [state]
            kernel = []
            while stack:
                current = stack.pop()
                if edges[current] or current == final:
                    kernel.append(current)
                for successor in eps[current]:
                    if successor not in seen:
                        seen.add(successor)
                        stack.append(successor)
            found = self._closures[state] = frozenset(kernel)
        return found

    def _compute_row(self, state: int) -> None:
        """The eager loop of ``regex_compiler._determinise`` for one state."""
        by_range: dict[tuple[int, int], list[int]] = {}
        for nfa_state in self._kernels[state]:
            for lo, hi, target in self._edges[nfa_state]:
                targets = by_range.get((lo, hi))
                if targets is None:
                    by_range[(lo, hi)] = [target]
                else:
                    targets.append(target)
        row = np.zeros(256, dtype=STATE_DTYPE)
        if by_range:
            for lo, hi, targets in _cut(by_range):
                row[lo:hi + 1] = self._step(targets)
        self._table[state] = row
        self._materialised[state] = 1

    def _step(self, targets: list[int]) -> int:
        key = frozenset(targets)
        found = self._steps.get(key)
        if found is None:
            if len(key) == 1:
                closed = self._closure(targets[0])
            else:
                closed = frozenset().union(*map(self._closure, key))
            found = self._ids.get(closed)
            if found is None:
                found = self._discover(closed)
            self._steps[key] = found
        return found

    def _discover(self, kernel: frozenset) -> int:
        state = self._count
        if state >= self.max_states:
            raise BuildLimitError(
                f"regex {self.pattern[:200]!r} needs more than {self.max_states:,} DFA states "
                f"(lazy, before minimisation; {self.num_materialised:,} rows materialised)",
                reached=state + 1)
        if state == len(self._finals):
            self._grow()
        self._kernels.append(kernel)
        self._ids[kernel] = state
        self._finals[state] = self._final in kernel
        self._count = state + 1
        return state

    def _grow(self) -> None:
        capacity = 2 * len(self._finals)
        table = np.zeros((capacity, 256), dtype=STATE_DTYPE)
        table[:len(self._table)] = self._table
        finals = np.zeros(capacity, dtype=bool)
        finals[:len(self._finals)] = self._finals
        flags = bytearray(capacity)
        flags[:len(self._materialised)] = self._materialised
        # Swap the finished copies in, the table last: a reader that takes the
        # new table then finds flags and finals as long as it; one that saw a
        # flag set before the swap finds the row in either table.
        self._materialised = flags
        self._finals = finals
        self._table = table


class _LazyDefinitions(_SharedDefinitions):
    """Shared definitions stamped as their Thompson NFAs, not their minimal DFAs.

    The eager compiler determinises and minimises each definition once (a
    JSON Schema's free value: 0.2 s), which would be most of a lazy first
    mask. Here a definition is its own Thompson NFA, built in linear time and
    copied wherever its placeholder stands; the lazy subset construction then
    only ever determinises the parts that are visited.
    """

    def _compile(self, placeholder: str) -> tuple:
        text = self.definitions[placeholder]
        tree, flags = _parse(text)
        nfa = _LazyThompsonNFA(text, self.max_nfa_states, self)
        start = nfa.new_state()
        end = nfa.build(tree, start, flags)
        return nfa.eps, nfa.edges, start, end


class _LazyThompsonNFA(_ThompsonNFA):
    def _stamp(self, template, source: int) -> int:
        """A copy of a definition's Thompson NFA after ``source``; returns its end.

        The copy keeps the construction's invariants: its start state (never
        re-entered in a Thompson NFA) is reached from ``source`` by an
        epsilon move, and its end has no outgoing edges."""
        eps, edges, start, end = template
        self._reserve(len(eps))
        base = len(self.eps)
        self.eps.extend([t + base for t in targets] for targets in eps)
        self.edges.extend([(lo, hi, t + base) for lo, hi, t in state_edges] for state_edges in edges)
        self.eps[source].append(base + start)
        return base + end


def _pruned_nfa(pattern: str, definitions, max_nfa_states: int):
    """The Thompson NFA of ``pattern`` with every state that cannot reach the
    final one dropped: ``(eps, edges, start, final)``, ``start`` -1 when the
    language is empty."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        body = normalize_pattern(pattern)
        shared = _LazyDefinitions(definitions, max_nfa_states) if definitions else None
        if shared is not None and body in shared:
            body = shared.definitions[body]  # the whole pattern is one placeholder
        tree, flags = _parse(body)
        nfa = _LazyThompsonNFA(body, max_nfa_states, shared)
        start = nfa.new_state()
        try:
            final = nfa.build(tree, start, flags)
        except RecursionError:
            raise RegexError(f"regex {body[:200]!r} is nested too deeply to compile") from None
        eps, edges = nfa.eps, nfa.edges
        # Backward reachability from the final state over both kinds of edges.
        predecessors: list[list[int]] = [[] for _ in eps]
        for source, targets in enumerate(eps):
            for target in targets:
                predecessors[target].append(source)
        for source, state_edges in enumerate(edges):
            for _, _, target in state_edges:
                predecessors[target].append(source)
        useful = bytearray(len(eps))
        useful[final] = 1
        stack = [final]
        while stack:
            for source in predecessors[stack.pop()]:
                if not useful[source]:
                    useful[source] = 1
                    stack.append(source)
        del predecessors
        pruned_eps = [[t for t in targets if useful[t]] if useful[q] else []
                      for q, targets in enumerate(eps)]
        pruned_edges = [[e for e in state_edges if useful[e[2]]] if useful[q] else []
                        for q, state_edges in enumerate(edges)]
        return pruned_eps, pruned_edges, (start if useful[start] else -1), final
    finally:
        if collecting:
            gc.enable()
