"""interegular as an independent front end, for cross-checking the regex compiler.

interegular (0.3.3) parses a regex into a DFA over *characters* whose
alphabet lumps unlisted characters into ``anything_else`` and may omit
transitions. :func:`byte_dfa_from_interegular` lifts every character set of
that automaton to UTF-8 byte-range sequences (:mod:`tokendfa.analysis.utf8`)
chained through states shared by suffix, determinises the result by a plain
subset construction, and hands it to the same canonical form as the real
compiler (:func:`tokendfa.analysis.minimise.canonical_byte_dfa`). Wherever
interegular reads a pattern as Python does, the two must give identical arrays.

This was the library's first front end; it is slow on schema-sized patterns
(about 45 s on ``data/o10088.regex``) and is kept only here, so interegular is
a test dependency.
"""

from __future__ import annotations

import numpy as np

from tokendfa.analysis.dfa import STATE_DTYPE, ByteDFA
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.regex_syntax import normalize_pattern
from tokendfa.analysis.utf8 import (ByteRange, CodepointRange, complement_ranges,
                                    ranges_from_codepoints, utf8_range_sequences)


def byte_dfa_from_interegular(pattern: str) -> ByteDFA:
    """The canonical byte DFA of ``pattern`` through interegular's character automaton."""
    import interegular

    char_fsm = interegular.parse_pattern(normalize_pattern(pattern)).to_fsm()
    return canonical_byte_dfa(*_determinise(*_byte_nfa_from_char_fsm(char_fsm)), pattern=pattern)


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
