"""How far a state is from the end of a match: the steps closing a text needs.

A generation with a token budget (``max_tokens``) must reach a final state,
and emit EOS, before the budget runs out, or its text is cut off inside a
value. What a state still needs is the length of the shortest path from it
to a final state; two ways to count it:

* :class:`LazyDistances`, over a byte DFA whose cells are computed on demand
  (:class:`~tokendfa.analysis.lazydfa.LazyByteDFA`, through its public
  ``partial_row`` and ``is_final``; an eager table through
  :class:`TableSteps`, whose ``successors`` serves the same): the shortest
  path in *bytes*, taking only the bytes the caller gives as steps (those
  that are single-byte tokens of a vocabulary, so that each byte of the path
  is one token a generation may pick). It is a sound bound on the tokens
  needed: that many tokens always suffice. The first question about a state
  explores everything that follows it (its *closure*: forwards, level by
  level, up to final states and states of known distance), and a search
  backwards over the edges found gives every state in it its exact distance
  at once: on a schema of a few thousand byte states (bench_vllm.py's, with
  bounded strings) the first request's question makes every later one a
  lookup. A closure that grows past a few times the states a plain search
  would have needed is given up (a schema whose documents may hold any JSON
  has tens of thousands), and the state gets the plain search:
  breadth-first from it, memoised (the states on the shortest path found get
  their exact distance, a search that gave up at its limit a lower bound,
  and a later search stops at a state whose distance is known). Both share
  the successors found (each state's distinct live successors, resolved a
  range of the automaton's cut at a time).
* :func:`distances_to_final`, over a whole graph given as adjacency arrays
  (an eager token-level index: the exact number of tokens), every state at
  once by a breadth-first search backwards from the final states.

May import: numpy and the standard library, :mod:`tokendfa.analysis.limits`.
"""

from __future__ import annotations

import threading

import numpy as np

from . import limits

__all__ = ["LazyDistances", "TableSteps", "distances_to_final", "FAR", "UNKNOWN", "MAX_SEARCH_STATES",
           "CLOSURE_STATES", "CLOSURE_ALLOWANCE", "CLOSURE_FACTOR",
           "CLOSURE_MIN_STATES"]

# A distance no budget reaches: "no final state within any limit asked".
FAR = 1 << 40
# What a search that gave up answers (see LazyDistances).
UNKNOWN = -1
# States one search may visit before it gives up. Breadth-first, a search
# visits every state closer than the nearest final one: a few to a few
# hundred on JSONSchemaBench schemas when the distance is tens of bytes, but
# tens of thousands when it is hundreds of bytes through a schema with many
# alternatives (a Github_medium schema whose shortest document is ~330
# bytes: 56k states, 3 s, on Gemma 3's vocabulary), ~25-50 us a state.
# Over 3,600 cold steps of 36 schemas with max_tokens 512 (Gemma 3's
# vocabulary, random walks; the lazy index's steps), closing cost 1.9 s at
# 500, 2.7 s at 1,000 and 3.4 s at 2,000 (the steps themselves: 0.3 s); a
# search that gives up leaves its state unrestricted.
MAX_SEARCH_STATES = 1_000
# The states one closure may discover (and expand). bench_vllm.py's 4
# schemas have 508-2,986 byte states after their initial state (Gemma 3's
# steps); of 40 JSONSchemaBench schemas (seed-0 shuffle) 33 have over
# 37,000, 1.3-2.8 s to explore whole.
CLOSURE_STATES = 4_000
# The states whose successors closures given up have resolved, all together,
# per automaton (what they spent in vain): past it no closure is tried, and
# a schema whose closures do not finish pays for its searches alone.
CLOSURE_ALLOWANCE = 300
# Once the breadth-first search for the state asked would have stopped, a
# closure goes on while it has expanded at most this many times the states
# that search had found (and at least CLOSURE_MIN_STATES), checked before
# each level: a level past the search's own can hold several times the
# states before it, each ~10 us to resolve in a schema of bounded strings
# and ~300 us in one that allows any JSON value.
# Closing's cold cost in CPU seconds (closing_cost.py --batch: bench_vllm.py's
# batch at max_tokens 128 / --schemas 16: random generations over
# JSONSchemaBench schemas at max_tokens 512): searches alone 1.00 / 0.68 s,
# with closures 0.22 / 0.26 s. Where closures do not finish (closing_cost.py's
# own schema, whose objects allow any further member, one generation 40
# tokens long at a budget of 51), the first pass costs ~0.45 ms a step
# against ~0.24 ms with searches alone (the allowance spent; with an
# allowance of 1,000: ~0.9-1.0 ms; with the bound checked after each level,
# ~0.4-1.8 ms).
CLOSURE_FACTOR = 2
CLOSURE_MIN_STATES = 16

class TableSteps:
    """``successors`` and ``is_final`` over a complete table
    (``int[states, 256]``, ``bool[states]``), for :class:`LazyDistances`
    over an eager :class:`~tokendfa.analysis.dfa.ByteDFA`."""

    def __init__(self, transitions: np.ndarray, finals: np.ndarray) -> None:
        self._table, self._finals = transitions, finals

    def successors(self, states: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        return self._table[states, symbols]

    def is_final(self, state: int) -> bool:
        return bool(self._finals[state])


class LazyDistances:
    """The shortest path in steps from a state of ``dfa`` to a final state,
    where a step is one byte of ``steps`` (``bool[256]``); computed on
    demand and memoised. ``dfa`` has ``is_final(state)`` and either
    ``partial_row(state, wanted)`` (a row with the ranges holding a byte of
    the bit set ``wanted`` resolved) or ``successors(states, symbols)``;
    state 0 is dead. Thread-safe.

    A question first tries a closure (see the module docstring): exact
    distances for all that follows the state, :data:`FAR` where no step
    path reaches a final state. It is given up past a few times the states
    the plain search needs (:data:`CLOSURE_FACTOR`, at least
    :data:`CLOSURE_MIN_STATES`) or :data:`CLOSURE_STATES`, and once closures
    given up have expanded ``closure_allowance`` states in all, none is
    tried again (0: none at all).
    The plain search that would visit more than ``max_search_states``
    states gives up and answers :data:`UNKNOWN`: the distance is then
    neither known nor bounded (the caller decides; the serving layer does
    not restrict for it). A search with a limit at most half the one that
    gave up is tried again (it explores a smaller ball), so a state costs a
    few searches at most as a generation's budget shrinks."""

    def __init__(self, dfa, steps: np.ndarray, *, max_search_states: int = MAX_SEARCH_STATES,
                 closure_allowance: int = CLOSURE_ALLOWANCE) -> None:
        self._dfa = dfa
        self._max_search = max_search_states
        # states the closures that passed their bound may still explore, all together
        self._closure_allowance = closure_allowance
        self._symbols = np.flatnonzero(np.asarray(steps, dtype=bool)).astype(np.int64)
        self._wanted = sum(1 << int(byte) for byte in self._symbols)   # bit b for byte b
        self._exact: dict[int, int] = {}
        self._above: dict[int, int] = {}   # state -> a limit its distance is known to pass
        self._gave_up: dict[int, int] = {}  # state -> the least limit a search of it gave up at
        # state -> its distinct live successors (the states a closure expanded)
        self._adjacency: dict[int, list[int]] = {}
        self._open: set[int] = set()   # states whose closure passed the bound on states
        self._lock = threading.Lock()

    def known(self, state: int) -> int | None:
        """The memoised distance of ``state``, if it is known exactly."""
        return self._exact.get(state)

    def distance(self, state: int, limit: int) -> int:
        """The distance of ``state`` when it is at most ``limit``; otherwise
        some number above ``limit`` (:data:`FAR` when no final state is
        reachable with these steps at all); :data:`UNKNOWN` when a search
        gave up."""
        found = self._exact.get(state)
        if found is not None:
            return found
        if self._above.get(state, -1) >= limit:
            return limit + 1
        gave_up = self._gave_up.get(state)
        if gave_up is not None and limit > gave_up // 2:
            return UNKNOWN
        with self._lock:
            found = self._exact.get(state)
            if found is not None:
                return found
            state = int(state)
            if self._closure_allowance > 0 and state not in self._open:
                found = self._close(state, int(limit))
                if found is not None:
                    return found
            return self._search(state, int(limit))

    def _close(self, state: int, limit: int) -> int | None:
        """Every state reachable from ``state`` (up to a final or a state of
        known distance): their distances, all exact at once, by a search
        backwards over the edges found. None where it passes its bound
        (``state`` is then marked open, and the states it expanded whose
        successors were not known yet are taken from the closures'
        allowance): :data:`CLOSURE_STATES` states discovered or expanded,
        and once the breadth-first search for ``state`` itself would have
        stopped (:meth:`_search`, limit ``limit``), a few times the states
        that search had found, in states expanded. A closure explores level
        by level as that search does, so past its bound the search goes on
        over the successors found."""
        dfa, exact, adjacency = self._dfa, self._exact, self._adjacency
        bound, opened = CLOSURE_STATES, self._open
        seen = {state: 0}
        order = [state]
        expanded: list[int] = []   # positions in order of the states expanded
        frontier = [state]
        depth, best, settled = 0, FAR, False
        spent = 0   # states expanded here whose successors were not known yet (the cost)
        while frontier:
            limits.check()
            expand = []
            for node in frontier:
                if dfa.is_final(node):
                    best = min(best, depth)
                else:
                    known = exact.get(node)
                    if known is None:
                        expand.append(node)
                    else:
                        best = min(best, depth + known)
            if not settled and (best <= depth + 1 or depth + 1 > limit):
                settled = True
                bound = min(bound, max(CLOSURE_MIN_STATES, CLOSURE_FACTOR * len(order)))
            if any(node in opened for node in expand):
                opened.add(state)   # its closure holds one whose closure passed its bound
                self._closure_allowance -= spent
                return None
            # Bounded before the level is expanded: past the search's own
            # levels a level can hold several times the states before it.
            spent += sum(node not in adjacency for node in expand)
            if spent > bound:
                opened.add(state)
                self._closure_allowance -= spent
                return None
            self._expand(expand)
            frontier = []
            for node in expand:
                expanded.append(seen[node])
                for target in adjacency[node]:
                    if target not in seen:
                        seen[target] = len(order)
                        order.append(target)
                        frontier.append(target)
            if len(order) > CLOSURE_STATES:
                opened.add(state)
                self._closure_allowance -= spent
                return None
            depth += 1
        # Backwards from the sinks (final: 0, known: their distance), nearest first.
        count = len(order)
        distance = [FAR] * count
        into: list[list[int]] = [[] for _ in range(count)]
        for at in expanded:
            for target in adjacency[order[at]]:
                into[seen[target]].append(at)
        buckets: dict[int, list[int]] = {}
        for at, node in enumerate(order):
            if dfa.is_final(node):
                start = 0
            else:
                start = exact.get(node, FAR)
            if start < FAR:
                distance[at] = start
                buckets.setdefault(start, []).append(at)
        while buckets:
            level = min(buckets)   # a level's relaxations add only the level above it
            for at in buckets.pop(level):
                if distance[at] != level:
                    continue
                for before in into[at]:
                    if distance[before] > level + 1:
                        distance[before] = level + 1
                        buckets.setdefault(level + 1, []).append(before)
        for at, node in enumerate(order):
            exact[node] = distance[at]
        return distance[0]

    def _expand(self, nodes: list[int]) -> None:
        """The distinct live successors of each of ``nodes`` into the
        adjacency, for those not there yet: one ``successors`` call."""
        adjacency, symbols = self._adjacency, self._symbols
        missing = [node for node in nodes if node not in adjacency]
        if not missing:
            return
        if not len(symbols):
            for node in missing:
                adjacency[node] = []
            return
        partial_row = getattr(self._dfa, "partial_row", None)
        if partial_row is not None:
            # A lazy automaton resolves a state's cells a range of its cut at
            # a time here, where successors() looks each cell up on its own:
            # closing's cold cost over bench_vllm.py's batch, 480 -> 180 ms.
            wanted = self._wanted
            reached = np.stack([partial_row(node, wanted) for node in missing])[:, symbols]
        else:
            reached = self._dfa.successors(np.repeat(np.array(missing, dtype=np.int64), len(symbols)),
                                           np.tile(symbols, len(missing)))
        reached = np.asarray(reached, dtype=np.int64).reshape(len(missing), len(symbols))
        reached.sort(axis=1)
        keep = reached > 0
        keep[:, 1:] &= reached[:, 1:] != reached[:, :-1]
        for node, row, live in zip(missing, reached, keep):
            adjacency[node] = row[live].tolist()

    def _search(self, state: int, limit: int) -> int:
        dfa, exact, symbols, adjacency = self._dfa, self._exact, self._symbols, self._adjacency
        parent = {state: -1}
        frontier = [state]
        depth = 0
        best, best_state = FAR, -1
        while frontier:
            limits.check()
            expand = []
            for node in frontier:
                if dfa.is_final(node):
                    cost = depth
                else:
                    known = exact.get(node)
                    if known is None:
                        expand.append(node)
                        continue
                    cost = depth + known
                # a known state's distance covers every path through it: not expanded
                if cost < best:
                    best, best_state = cost, node
            # every state of the next level costs at least depth + 1
            if best <= depth + 1 or depth + 1 > limit or not expand or not len(symbols):
                break
            if len(parent) > self._max_search:
                self._gave_up[state] = min(limit, self._gave_up.get(state, limit))
                return UNKNOWN
            self._expand(expand)
            frontier = []
            for node in expand:
                for target in adjacency[node]:
                    if target not in parent:
                        parent[target] = node
                        frontier.append(target)
            depth += 1
        if best > limit:
            if frontier or best < FAR:
                self._above[state] = max(self._above.get(state, -1), limit)
                return limit + 1 if best >= FAR else best
            exact[state] = FAR   # the search saw every state it can reach: none is final
            return FAR
        # the states on the path found are on a shortest path: exact too
        node, remaining = best_state, best - _depth_of(parent, best_state)
        while node != -1:
            exact[node] = remaining
            node, remaining = parent[node], remaining + 1
        return best


def _depth_of(parent: dict[int, int], node: int) -> int:
    depth = 0
    while parent[node] != -1:
        node, depth = parent[node], depth + 1
    return depth


def distances_to_final(offsets: np.ndarray, targets: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """``int64[S]``: the fewest edges from each state to a final state
    (:data:`FAR` where none is reachable), for a graph whose state ``s`` has
    the edges to ``targets[offsets[s]:offsets[s + 1]]`` (negative targets
    are no edge). Breadth-first backwards from the final states, a level at
    a time over the reversed edges."""
    finals = np.asarray(finals, dtype=bool)
    count = len(finals)
    offsets = np.asarray(offsets, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    sources = np.repeat(np.arange(count, dtype=np.int64), np.diff(offsets))
    keep = targets >= 0
    sources, targets = sources[keep], targets[keep]
    order = np.argsort(targets, kind="stable")
    into, from_ = targets[order], sources[order]       # edges sorted by target
    starts = np.searchsorted(into, np.arange(count + 1))
    distance = np.full(count, FAR, dtype=np.int64)
    level = np.flatnonzero(finals)
    distance[level] = 0
    depth = 0
    while len(level):
        limits.check()
        depth += 1
        lo, hi = starts[level], starts[level + 1]
        sizes = hi - lo
        if not sizes.sum():
            break
        at = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
        before = np.unique(from_[at])
        level = before[distance[before] == FAR]
        distance[level] = depth
    return distance
