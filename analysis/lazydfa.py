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
from dataclasses import dataclass

import numpy as np

from .dfa import DEAD, INITIAL, STATE_DTYPE
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
                 max_states: int = DEFAULT_MAX_LAZY_STATES,
                 max_depth: int | None = None) -> None:
        self.pattern = pattern
        self.max_states = max_states
        self.max_depth = max_depth
        nfa = _calling_nfa(pattern, definitions, max_nfa_states, max_depth)
        self._nfa = nfa
        self._eps, self._edges, self._calls, self._ends = nfa.eps, nfa.edges, nfa.calls, nfa.ends
        self._final = nfa.final
        self._size = len(nfa.eps)
        # The call stacks, interned as a trie: stack 0 is empty; stack k is
        # its parent with one more return state on top, `depth` levels deep.
        self._stack_parent: list[int] = [0]
        self._stack_top: list[int] = [-1]
        self._stack_depth: list[int] = [0]
        self._pushes: dict[tuple[int, int], int] = {}
        # A configuration (stack, NFA state) is the int stack * size + state.
        self._closures: dict[int, frozenset] = {}
        self._lock = threading.Lock()
        initial = self._closure(nfa.start) if nfa.start >= 0 else frozenset()
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
        self._finals[INITIAL] = self._final in initial
        # materialised[s]: row s is complete in self._table (the dead row always is)
        self._materialised = bytearray(capacity)
        self._materialised[DEAD] = 1
        self._count = INITIAL + 1

    @property
    def num_nfa_states(self) -> int:
        """States of the (pruned) NFA: the pattern's and each definition's once."""
        return self._size

    @property
    def num_stacks(self) -> int:
        """Distinct call stacks met so far (the empty one included)."""
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
        """``bool[256]``: the bytes on some byte edge of the pruned NFA that
        the pattern reaches, i.e. every byte that can occur in a match (and,
        without a depth bound, only those)."""
        present = np.zeros(257, dtype=np.int64)
        eps, edges, calls = self._eps, self._edges, self._calls
        seen = bytearray(self._size)
        stack = [self._nfa.start] if self._nfa.start >= 0 else []
        for q in stack:
            seen[q] = 1
        while stack:
            q = stack.pop()
            for lo, hi, t in edges[q]:
                present[lo] += 1
                present[hi + 1] -= 1
            for t in [*eps[q], *(e[2] for e in edges[q]), *(t for call in calls[q] for t in call)]:
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

    def _push(self, stack: int, ret: int) -> int:
        key = (stack, ret)
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
        size, eps, edges, calls, ends, final = (self._size, self._eps, self._edges, self._calls,
                                                self._ends, self._final)
        bound = self.max_depth
        need, need_byte = self._nfa.need, self._nfa.need_byte
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
            for callee, ret in calls[q]:
                successor = self._push(stack, ret) * size + callee
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

    def _compute_row(self, state: int) -> None:
        """The eager loop of ``regex_compiler._determinise`` for one state,
        over configurations: a byte edge keeps the stack."""
        size, edges = self._size, self._edges
        by_range: dict[tuple[int, int], list[int]] = {}
        for config in self._kernels[state]:
            stack, nfa_state = divmod(config, size)
            base = stack * size
            for lo, hi, target in edges[nfa_state]:
                targets = by_range.get((lo, hi))
                if targets is None:
                    by_range[(lo, hi)] = [base + target]
                else:
                    targets.append(base + target)
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


class _Fragment:
    """One shared definition compiled once: its own Thompson NFA, calls included."""

    __slots__ = ("placeholder", "eps", "edges", "calls", "start", "end")

    def __init__(self, placeholder, eps, edges, calls, start, end) -> None:
        self.placeholder = placeholder
        self.eps, self.edges, self.calls = eps, edges, calls
        self.start, self.end = start, end


class _LazyDefinitions(_SharedDefinitions):
    """Shared definitions as NFA fragments that every placeholder *calls*.

    The eager compiler determinises and minimises each definition once (a
    JSON Schema's free value: 0.2 s) and stamps a copy of it wherever its
    placeholder stands, so free values nested D levels deep cost about 4^D
    states. Here a definition is compiled once, to its own Thompson NFA, and
    a placeholder becomes a call: the lazy automaton pushes the return state
    and runs the definition's fragment (see :class:`LazyByteDFA`). The NFA
    grows with the written size of the pattern, not with the expanded one.

    A definition may use itself only when the automaton bounds the stack
    (``max_depth``); the eager compiler never accepts that.
    """

    def __init__(self, definitions, max_nfa_states: int, recursive: bool) -> None:
        super().__init__(definitions, max_nfa_states)
        self.recursive = recursive
        self.fragments: list[_Fragment] = []  # in the order they were compiled

    def template(self, placeholder: str) -> "_Fragment | str":
        if placeholder in self._templates:
            return self._templates[placeholder]
        if self.recursive and placeholder in self._compiling:
            return placeholder  # a call to a fragment still being compiled: resolved by name
        return super().template(placeholder)

    def _compile(self, placeholder: str) -> _Fragment:
        text = self.definitions[placeholder]
        tree, flags = _parse(text)
        nfa = _CallingThompsonNFA(text, self.max_nfa_states, self)
        start = nfa.new_state()
        try:
            end = nfa.build(tree, start, flags)
        except RecursionError:
            raise RegexError(f"regex {text[:200]!r} is nested too deeply to compile") from None
        fragment = _Fragment(placeholder, nfa.eps, nfa.edges, nfa.calls, start, end)
        self.fragments.append(fragment)
        return fragment


class _CallingThompsonNFA(_ThompsonNFA):
    """The Thompson construction with a placeholder compiled as a call.

    ``calls[q]`` lists ``(placeholder, return_state)``: from ``q`` the
    automaton may run the placeholder's fragment and go on at
    ``return_state``. Fresh return states keep the construction's
    invariants (edges only leave ``source``; the returned end has none)."""

    def __init__(self, pattern: str, max_states: int, shared=None) -> None:
        super().__init__(pattern, max_states, shared)
        self.calls: dict[int, list[tuple[str, int]]] = {}

    def _stamp(self, template, source: int) -> int:
        placeholder = template if isinstance(template, str) else template.placeholder
        ret = self.new_state()
        self.calls.setdefault(source, []).append((placeholder, ret))
        return ret

    def _copy_block(self, first: int, exit_: int, size: int) -> tuple[int, int]:
        offset = len(self.eps) - first
        copied = super()._copy_block(first, exit_, size)
        calls = self.calls
        inside = (range(first, first + size) if size < len(calls) else sorted(calls))
        for state in [q for q in inside if q in calls and first <= q < first + size]:
            self.calls[state + offset] = [(p, ret + offset) for p, ret in self.calls[state]]
        return copied


@dataclass(frozen=True)
class _CallingNFA:
    """The pattern's fragment and every definition's, laid out in one state
    space, pruned (see :func:`_calling_nfa`).

    ``calls[q]`` is ``((callee_start, return_state), ...)``; ``ends[q]``
    marks the end of a definition's fragment (a return); ``final`` ends the
    pattern's own fragment. ``need[q]`` is how many stack levels a path from
    ``q`` to the end of its fragment needs at least, ``need_byte[q]`` the
    same through one of ``q``'s byte edges first (``INFINITE``: none)."""

    eps: list
    edges: list
    calls: list
    ends: bytearray
    start: int
    final: int
    need: list
    need_byte: list


INFINITE = 1 << 30


def _calling_nfa(pattern: str, definitions, max_nfa_states: int, max_depth: int | None) -> _CallingNFA:
    """Build and prune the calling NFA of ``pattern``; ``start`` -1 when
    nothing can be matched (within ``max_depth`` stack levels)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        body = normalize_pattern(pattern)
        shared = (_LazyDefinitions(definitions, max_nfa_states, recursive=max_depth is not None)
                  if definitions else None)
        if shared is not None and body in shared:
            body = shared.definitions[body]  # the whole pattern is one placeholder
        tree, flags = _parse(body)
        nfa = _CallingThompsonNFA(body, max_nfa_states, shared)
        start = nfa.new_state()
        try:
            final = nfa.build(tree, start, flags)
        except RecursionError:
            raise RegexError(f"regex {body[:200]!r} is nested too deeply to compile") from None
        eps, edges = nfa.eps, nfa.edges
        fragments = shared.fragments if shared is not None else []
        bases = {}
        raw_calls = [(q, p, ret) for q, items in nfa.calls.items() for p, ret in items]
        for fragment in fragments:
            base = len(eps)
            if base + len(fragment.eps) > max_nfa_states:
                nfa._reserve(len(fragment.eps))  # raises the usual limit error
            bases[fragment.placeholder] = (base, fragment)
            eps.extend([t + base for t in targets] for targets in fragment.eps)
            edges.extend([(lo, hi, t + base) for lo, hi, t in state_edges] for state_edges in fragment.edges)
            raw_calls.extend((q + base, p, ret + base) for q, items in fragment.calls.items() for p, ret in items)
        size = len(eps)
        ends = bytearray(size)
        for base, fragment in bases.values():
            ends[base + fragment.end] = 1
        calls: list = [() for _ in range(size)]
        for q, placeholder, ret in raw_calls:
            base, fragment = bases[placeholder]
            calls[q] += ((base + fragment.start, ret),)
        need, need_byte = _needs(eps, edges, calls, ends, final, max_depth)
        bound = INFINITE - 1 if max_depth is None else max_depth
        keep = [n <= bound for n in need]
        pruned_eps = [[t for t in targets if keep[t]] if keep[q] else [] for q, targets in enumerate(eps)]
        pruned_edges = [[e for e in state_edges if keep[e[2]]] if keep[q] else []
                        for q, state_edges in enumerate(edges)]
        pruned_calls = [tuple((s, r) for s, r in items if keep[s] and keep[r]) if keep[q] else ()
                        for q, items in enumerate(calls)]
        return _CallingNFA(pruned_eps, pruned_edges, pruned_calls, ends, start if keep[start] else -1,
                           final, need, need_byte)
    finally:
        if collecting:
            gc.enable()


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
        for _, _, target in state_edges:
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
    need_byte = [min((need[t] for _, _, t in state_edges), default=INFINITE) for state_edges in edges]
    return need, need_byte
