"""The byte-level DFA: a regex as a complete transition table over bytes.

Tokens are byte strings, and a token may end in the middle of a multi-byte
character, so the index needs the pattern's language as a DFA over *bytes*.
:func:`byte_dfa_from_regex` compiles a regex straight to byte tables with our
own front end (:mod:`analysis.regex_compiler`: Python's parser, a Thompson
NFA over UTF-8 byte ranges, subset construction), then
:func:`canonical_byte_dfa` merges states that cannot reach a final state into
the dead state, minimises, and renumbers breadth-first (bytes in increasing
order) so the same pattern always gives the same table.

A second, independent front end is kept as a cross-check:
:func:`byte_dfa_from_regex_interegular` goes through interegular's DFA over
*characters* (whose alphabet lumps unlisted characters into
``anything_else`` and may omit transitions), lifts every character set to
UTF-8 byte-range sequences (:mod:`analysis.utf8`) chained through states
shared by suffix, and determinises. It was the first front end; interegular
builds its automata by products over a shared alphabet and took 33 s on a
15k-character regex from a JSON schema, where ours takes about 1.5 s. The
tests hold the two to identical tables.

The result, :class:`ByteDFA`, is complete: ``transitions[state, byte]`` is
defined for all 256 bytes, state 0 is dead (every byte leads back to 0) and
state 1 is initial. Invalid UTF-8 (overlong forms, surrogates, bytes above
F4) never leads anywhere but the dead state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from analysis.errors import EmptyLanguageError, RegexError, UnsupportedRegexError
from analysis.regex_syntax import normalize_pattern
from analysis.utf8 import (
    ByteRange,
    CodepointRange,
    complement_ranges,
    ranges_from_codepoints,
    utf8_range_sequences,
)

DEAD = 0
INITIAL = 1
STATE_DTYPE = np.int32


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A complete, minimal, deterministically numbered DFA over bytes.

    ``transitions`` is ``int32[num_states, 256]``; row 0 is the dead state.
    ``finals`` is ``bool[num_states]``. Every state other than 0 is *live*:
    some byte string leads from it to a final state.
    """

    transitions: np.ndarray
    finals: np.ndarray
    pattern: str = ""

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def initial(self) -> int:
        return INITIAL

    def walk(self, state: int, data: bytes) -> int:
        """The state reached from ``state`` after ``data`` (0 when it dies)."""
        table = self.transitions
        for byte in data:
            state = int(table[state, byte])
            if state == DEAD:
                break
        return state

    def accepts(self, data: bytes) -> bool:
        return bool(self.finals[self.walk(INITIAL, data)])

    def is_live_prefix(self, data: bytes) -> bool:
        return self.walk(INITIAL, data) != DEAD


def byte_dfa_from_regex(pattern: str, *, max_nfa_states: int | None = None) -> ByteDFA:
    """Compile ``pattern`` (Python ``re`` syntax with ``re.ASCII`` classes,
    whole-string match) to a canonical byte DFA.

    Raises :class:`RegexError`, :class:`UnsupportedRegexError`,
    :class:`EmptyLanguageError` or (past ``max_nfa_states``)
    :class:`~analysis.errors.BuildLimitError`, each naming the problem.
    """
    from analysis.regex_compiler import DEFAULT_MAX_NFA_STATES, byte_tables_from_regex

    body = normalize_pattern(pattern)
    limit = DEFAULT_MAX_NFA_STATES if max_nfa_states is None else max_nfa_states
    transitions, finals = byte_tables_from_regex(body, max_nfa_states=limit)
    dfa = canonical_byte_dfa(transitions, finals, pattern=pattern)
    if dfa.num_states <= INITIAL:
        raise EmptyLanguageError(f"regex {pattern!r} matches no string at all")
    return dfa


def byte_dfa_from_regex_interegular(pattern: str) -> ByteDFA:
    """The same DFA through interegular's character automaton (a cross-check)."""
    import interegular

    body = normalize_pattern(pattern)
    try:
        char_fsm = interegular.parse_pattern(body).to_fsm()
    except interegular.patterns.Unsupported as exc:
        raise UnsupportedRegexError(f"unsupported regex construct in {pattern!r}: {exc}") from None
    except interegular.patterns.InvalidSyntax as exc:
        detail = f": {exc}" if str(exc) else ""
        raise RegexError(f"invalid regex {pattern!r}{detail}") from None
    except RecursionError:
        raise RegexError(f"regex {pattern!r} is nested too deeply to compile") from None
    transitions, finals = _determinise(*_byte_nfa_from_char_fsm(char_fsm))
    dfa = canonical_byte_dfa(transitions, finals, pattern=pattern)
    if dfa.num_states <= INITIAL:
        raise EmptyLanguageError(f"regex {pattern!r} matches no string at all")
    return dfa


# --- characters to a byte NFA ---------------------------------------------

def _symbol_codepoints(char_fsm) -> dict[int, list[CodepointRange]]:
    """Code-point ranges of each symbol of an interegular alphabet."""
    from interegular.fsm import anything_else

    explicit: dict[int, list[int]] = {}
    other_symbol = None
    for char, symbol in char_fsm.alphabet.items():
        if char is anything_else:
            other_symbol = symbol
        else:
            explicit.setdefault(symbol, []).append(ord(char))
    ranges = {symbol: ranges_from_codepoints(cps) for symbol, cps in explicit.items()}
    if other_symbol is not None:
        every_explicit = ranges_from_codepoints([cp for cps in explicit.values() for cp in cps])
        others = complement_ranges(every_explicit)
        ranges[other_symbol] = sorted(ranges.get(other_symbol, []) + others)
    return ranges


class _ByteNFA:
    """Byte-range edges between character states and shared suffix chains."""

    def __init__(self, num_char_states: int) -> None:
        self.edges: list[list[tuple[int, int, int]]] = [[] for _ in range(num_char_states)]
        self._suffix_nodes: dict[tuple[int, tuple[ByteRange, ...]], int] = {}

    def add_sequence(self, source: int, sequence: tuple[ByteRange, ...], target: int) -> None:
        lo, hi = sequence[0]
        self.edges[source].append((lo, hi, self._suffix_node(sequence[1:], target)))

    def _suffix_node(self, suffix: tuple[ByteRange, ...], target: int) -> int:
        # Sharing nodes by (target, remaining ranges) keeps the NFA linear in
        # the number of distinct sequences instead of in code points.
        if not suffix:
            return target
        key = (target, suffix)
        node = self._suffix_nodes.get(key)
        if node is None:
            node = len(self.edges)
            self.edges.append([])
            self._suffix_nodes[key] = node
            lo, hi = suffix[0]
            self.edges[node].append((lo, hi, self._suffix_node(suffix[1:], target)))
        return node


def _byte_nfa_from_char_fsm(char_fsm):
    states = sorted(char_fsm.states)
    number = {state: i for i, state in enumerate(states)}
    symbol_ranges = _symbol_codepoints(char_fsm)
    nfa = _ByteNFA(len(states))
    for state in states:
        by_target: dict[int, list[CodepointRange]] = {}
        for symbol, target in char_fsm.map.get(state, {}).items():
            by_target.setdefault(number[target], []).extend(symbol_ranges.get(symbol, []))
        for target, ranges in by_target.items():
            for lo, hi in ranges:
                for sequence in utf8_range_sequences(lo, hi):
                    nfa.add_sequence(number[state], sequence, target)
    finals = {number[state] for state in char_fsm.finals}
    return nfa, number[char_fsm.initial], finals


def _determinise(nfa: _ByteNFA, initial: int, finals: set[int]):
    """Subset construction; returns (transitions, finals) with dead 0, initial 1."""
    start = frozenset([initial])
    ids: dict[frozenset[int], int] = {start: 1}
    order = [start]
    rows: list[np.ndarray] = []
    for subset in order:  # grows while we iterate
        row = np.zeros(256, dtype=STATE_DTYPE)
        edges = [edge for node in subset for edge in nfa.edges[node]]
        cuts = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
        for lo, next_cut in zip(cuts, cuts[1:]):
            targets = frozenset(dest for elo, ehi, dest in edges if elo <= lo <= ehi)
            if not targets:
                continue
            target_id = ids.get(targets)
            if target_id is None:
                target_id = ids[targets] = len(order) + 1
                order.append(targets)
            row[lo:next_cut] = target_id
        rows.append(row)
    transitions = np.vstack([np.zeros((1, 256), dtype=STATE_DTYPE)] + rows)
    final_flags = np.zeros(len(order) + 1, dtype=bool)
    for subset, state in ids.items():
        final_flags[state] = not finals.isdisjoint(subset)
    return transitions, final_flags


# --- trimming, minimising, numbering --------------------------------------

def live_states(transitions: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """Boolean mask of states from which some byte string reaches a final."""
    num_states = transitions.shape[0]
    sources = np.repeat(np.arange(num_states, dtype=np.int64), transitions.shape[1])
    pairs = np.unique(transitions.astype(np.int64).ravel() * num_states + sources)
    targets, sources = np.divmod(pairs, num_states)
    # Reverse adjacency in CSR form: predecessors of each target.
    starts = np.searchsorted(targets, np.arange(num_states + 1))
    live = finals.copy()
    queue = deque(np.flatnonzero(finals).tolist())
    while queue:
        state = queue.popleft()
        for pred in sources[starts[state]:starts[state + 1]]:
            if not live[pred]:
                live[pred] = True
                queue.append(int(pred))
    return live


def canonical_byte_dfa(transitions: np.ndarray, finals: np.ndarray, *,
                       initial: int = INITIAL, pattern: str = "") -> ByteDFA:
    """Trim, minimise and renumber a complete byte table.

    Any DFA for the same language gives the same arrays, which is what makes
    index files reproducible and lets tests compare builds array for array.
    """
    live = live_states(transitions, finals)
    live[DEAD] = False
    table = np.where(live[transitions], transitions, DEAD).astype(STATE_DTYPE)
    table[~live] = DEAD
    block = _minimise(table, finals & live, live)
    return _renumber(table, finals & live, block, initial, pattern)


def _minimise(table: np.ndarray, finals: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Moore partition refinement; returns each state's block number.

    Block 0 holds the dead state and everything merged into it.
    """
    # Bytes with equal columns can never separate two states: refine on
    # one representative per column instead of all 256.
    _, representatives = np.unique(table, axis=1, return_index=True)
    columns = table[:, np.sort(representatives)]
    block = np.where(live, 1 + finals.astype(np.int64), 0)
    num_blocks = len(np.unique(block))
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=columns.shape[1] + 1,
                                                     dtype=np.uint64) | np.uint64(1)
    while True:
        signature = np.concatenate([block[:, None], block[columns]], axis=1)
        first, block = _unique_rows(signature, weights)
        if len(first) == num_blocks:
            return block
        num_blocks = len(first)


def _unique_rows(rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0)``'s first indices and inverse, by hashing
    each row to one integer (sorting whole rows was the slow part of
    minimising large automata). Every row is checked against its
    representative, so a collision falls back to the exact way."""
    with np.errstate(over="ignore"):
        hashes = (rows.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(rows, rows[first[inverse]]):  # pragma: no cover - 2**-64
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    return first, inverse


def _renumber(table, finals, block, initial, pattern) -> ByteDFA:
    """Breadth-first numbering of the minimal DFA: dead 0, initial 1."""
    dead_block = block[DEAD]
    number = {dead_block: DEAD}
    representative = {}
    for state in range(table.shape[0]):
        representative.setdefault(int(block[state]), state)
    queue = deque([int(block[initial])])
    if block[initial] != dead_block:
        number[int(block[initial])] = INITIAL
    order = []
    while queue:
        current = queue.popleft()
        if current == dead_block:
            continue
        order.append(current)
        for target in block[table[representative[current]]]:
            target = int(target)
            if target not in number:
                number[target] = len(number)
                queue.append(target)
    lookup = np.zeros(int(block.max()) + 1, dtype=STATE_DTYPE)
    for blk, state in number.items():
        lookup[blk] = state
    new_table = np.zeros((len(number), 256), dtype=STATE_DTYPE)
    new_finals = np.zeros(len(number), dtype=bool)
    for blk in order:
        new_table[number[blk]] = lookup[block[table[representative[blk]]]]
        new_finals[number[blk]] = finals[representative[blk]]
    new_table.flags.writeable = False
    new_finals.flags.writeable = False
    return ByteDFA(new_table, new_finals, pattern)


def byte_dfa_from_tables(transitions: Iterable, finals: Iterable, pattern: str = "") -> ByteDFA:
    """A :class:`ByteDFA` from raw tables (tests and hand-made automata)."""
    return canonical_byte_dfa(np.asarray(transitions, dtype=STATE_DTYPE),
                              np.asarray(finals, dtype=bool), pattern=pattern)
