"""The byte-level DFA: a regex as a complete transition table over bytes.

Tokens are byte strings, and a token may end in the middle of a multi-byte
character, so the index needs the pattern's language as a DFA over *bytes*.
:func:`byte_dfa_from_regex` compiles a regex straight to byte tables with our
own front end (:mod:`tokendfa.analysis.regex_compiler`: Python's parser, a Thompson
NFA over UTF-8 byte ranges, subset construction), then
:func:`canonical_byte_dfa` merges states that cannot reach a final state into
the dead state, minimises, and renumbers breadth-first (bytes in increasing
order) so the same pattern always gives the same table.

A second, independent front end is kept as a cross-check:
:func:`byte_dfa_from_regex_interegular` goes through interegular's DFA over
*characters* (whose alphabet lumps unlisted characters into
``anything_else`` and may omit transitions), lifts every character set to
UTF-8 byte-range sequences (:mod:`tokendfa.analysis.utf8`) chained through states
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

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .errors import EmptyLanguageError, RegexError, UnsupportedRegexError
from .regex_syntax import normalize_pattern
from .utf8 import (
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


def byte_dfa_from_regex(pattern: str, *, max_nfa_states: int | None = None,
                        definitions: "dict[str, str] | None" = None,
                        max_dfa_states: int | None = None) -> ByteDFA:
    """Compile ``pattern`` (Python ``re`` syntax with ``re.ASCII`` classes,
    whole-string match) to a canonical byte DFA.

    ``definitions`` are shared pieces the pattern refers to by placeholder
    (see :mod:`tokendfa.analysis.regex_compiler`); ``max_dfa_states`` bounds the
    automaton before minimisation (:class:`~tokendfa.analysis.errors.BuildLimitError`).

    Raises :class:`RegexError`, :class:`UnsupportedRegexError`,
    :class:`EmptyLanguageError` or (past ``max_nfa_states``)
    :class:`~tokendfa.analysis.errors.BuildLimitError`, each naming the problem.
    """
    from .regex_compiler import DEFAULT_MAX_NFA_STATES, byte_tables_from_regex

    body = normalize_pattern(pattern)
    limit = DEFAULT_MAX_NFA_STATES if max_nfa_states is None else max_nfa_states
    transitions, finals = byte_tables_from_regex(body, max_nfa_states=limit, definitions=definitions,
                                                 max_dfa_states=max_dfa_states)
    dfa = canonical_byte_dfa(transitions, finals, pattern=pattern)
    if dfa.num_states <= INITIAL:
        # a generated regex can run to megabytes: its head is enough to recognise it
        shown = repr(pattern[:200]) + (f" (+{len(pattern) - 200:,} characters)" if len(pattern) > 200 else "")
        raise EmptyLanguageError(f"regex {shown} matches no string at all")
    return dfa


def byte_dfa_from_regex_interegular(pattern: str) -> ByteDFA:
    """The same DFA through interegular's character automaton (a cross-check)."""
    from .errors import import_optional

    interegular = import_optional("interegular", extra="test", needed_for="the interegular cross-check")

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
    """Boolean mask of states from which some byte string reaches a final.

    ``transitions`` may hold one column per byte or only one per distinct
    column (see :func:`unique_columns`): liveness is the same.
    """
    num_states = transitions.shape[0]
    sources = np.repeat(np.arange(num_states, dtype=np.int64), transitions.shape[1])
    pairs = np.unique(transitions.astype(np.int64).ravel() * num_states + sources)
    targets, sources = np.divmod(pairs, num_states)
    # Reverse adjacency in CSR form: predecessors of each target.
    starts = np.searchsorted(targets, np.arange(num_states + 1))
    live = finals.copy()
    frontier = np.flatnonzero(finals)
    while len(frontier):  # one breadth-first level per step
        predecessors = sources[_ranges(starts[frontier], starts[frontier + 1])]
        frontier = np.unique(predecessors[~live[predecessors]])
        live[frontier] = True
    return live


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], hi[i])`` over ``i``, in order."""
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(lo - (ends - lengths), lengths) + np.arange(total)


def unique_columns(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes with equal columns: ``(first, inverse)`` where ``first[k]`` is the
    smallest byte of the k-th distinct column (increasing) and
    ``table[:, b]`` equals ``table[:, first[inverse[b]]]``.

    Large tables group their columns by a hash (one pass, no transposed copy)
    and check every column against its group's first; small ones, and a
    hash collision, compare whole columns as byte strings.
    ``np.unique(table, axis=1)`` compares them as records of one field per
    state, which took 20 s on a 100k-state table.
    """
    if table.shape[0] >= _HASHED_COLUMNS_FROM:
        found = _unique_columns_hashed(table)
        if found is not None:
            return found
    transposed = np.ascontiguousarray(table.T)
    rows = transposed.view(np.dtype((np.void, transposed.shape[1] * transposed.itemsize)))
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    return _in_byte_order(first, inverse.ravel())


_HASHED_COLUMNS_FROM = 2048  # states; below this the transposed copy is cheap
_ROWS_PER_PASS = 8192


def _unique_columns_hashed(table: np.ndarray):
    """``unique_columns`` by a random linear hash of each column; None on a collision."""
    weights = np.random.default_rng(0).integers(1, 2**62, size=table.shape[0], dtype=np.int64)
    hashes = np.zeros(table.shape[1], dtype=np.int64)
    for start in range(0, table.shape[0], _ROWS_PER_PASS):  # a 64-bit copy of a slice only
        part = slice(start, start + _ROWS_PER_PASS)
        hashes += weights[part] @ table[part].astype(np.int64)  # wraps around: fine for a hash
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    representative = first[inverse]
    for start in range(0, table.shape[0], _ROWS_PER_PASS):
        rows = table[start:start + _ROWS_PER_PASS]
        if not np.array_equal(rows, rows[:, representative]):
            return None
    return _in_byte_order(first, inverse)


def _in_byte_order(first: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse]


def canonical_byte_dfa(transitions: np.ndarray, finals: np.ndarray, *,
                       initial: int = INITIAL, pattern: str = "") -> ByteDFA:
    """Trim, minimise and renumber a complete byte table.

    Any DFA for the same language gives the same arrays, which is what makes
    index files reproducible and lets tests compare builds array for array.
    The work is done on one column per distinct column of the table (a few
    dozen where there are 256 bytes) and widened back at the end.
    """
    first_byte, column_of_byte = unique_columns(transitions)
    columns = np.ascontiguousarray(transitions[:, first_byte])
    live = live_states(columns, finals)
    live[DEAD] = False
    columns = np.where(live[columns], columns, DEAD).astype(STATE_DTYPE)
    columns[~live] = DEAD
    block = _minimise(columns, finals & live, live)
    return _renumber(columns, column_of_byte, finals & live, block, initial, pattern)


def _minimise(columns: np.ndarray, finals: np.ndarray, live: np.ndarray) -> np.ndarray:
    """The coarsest partition of the states that respects finality and the
    transitions; returns each state's block number (the dead state's block
    holds every state that cannot reach a final one).

    This is Moore's refinement (split a block when its states' successors
    lie in different blocks, until nothing splits), made incremental the way
    Hopcroft's algorithm is: each live state carries a hash of its
    *signature* (its block and its successors' blocks), a block keeps its
    number for the largest part when it splits and only the smaller parts
    get new numbers, and a round looks only at the states whose hash moved,
    the renamed states and their predecessors. Schema patterns have long
    counted chains (``{0,256}``), so Moore needs hundreds of rounds; rehashing
    every state in each round took a minute on a 100k-state table.

    The hash is linear in the block numbers, so a renamed state updates its
    predecessors by one addition per edge. Equal hashes are not trusted: the
    result is checked to be a congruence, and on a collision (odds about
    2**-64) the exact refinement runs instead.
    """
    num_states = columns.shape[0]
    columns = columns.astype(np.int64)
    width = columns.shape[1]
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=width + 1,
                                                     dtype=np.uint64) | np.uint64(1)
    block = np.where(live, 1 + finals.astype(np.int64), 0)
    live_ids = np.flatnonzero(live)
    if len(live_ids) == 0:
        return block
    with np.errstate(over="ignore"):
        signature_hash = (block.astype(np.uint64) * weights[0]
                          + (block[columns].astype(np.uint64) * weights[1:]).sum(
                              axis=1, dtype=np.uint64))
    # Edges between live states, by target: whose hash a renamed state moves.
    edge_source, edge_column = np.nonzero(live[columns] & live[:, None])
    edge_target = columns[edge_source, edge_column]
    by_target = np.argsort(edge_target, kind="stable")
    edge_source = edge_source[by_target]
    edge_weight = weights[1:][edge_column[by_target]]
    edge_starts = np.searchsorted(edge_target[by_target], np.arange(num_states + 1))
    del edge_column, edge_target, by_target

    capacity = num_states + 3
    block_size = np.bincount(block[live_ids], minlength=capacity).astype(np.int64)
    # The hash every member of a block holds, except those being looked at;
    # no value at first, since every live state is looked at in round one.
    block_hash = np.zeros(capacity, dtype=np.uint64)
    next_block = 3
    looked_at = np.zeros(num_states, dtype=bool)
    candidates = live_ids
    while len(candidates):
        looked_at[candidates] = True
        cand_block = block[candidates]
        touched, cand_count = np.unique(cand_block, return_counts=True)
        rest_count = block_size[touched] - cand_count
        has_rest = rest_count > 0
        # One record per candidate, one per block for its other members.
        rec_block = np.concatenate([cand_block, touched[has_rest]])
        rec_hash = np.concatenate([signature_hash[candidates], block_hash[touched[has_rest]]])
        rec_count = np.concatenate([np.ones(len(candidates), np.int64), rest_count[has_rest]])
        order = np.lexsort((rec_hash, rec_block))
        rec_block, rec_hash, rec_count = rec_block[order], rec_hash[order], rec_count[order]
        starts_group = np.ones(len(order), dtype=bool)
        starts_group[1:] = (rec_block[1:] != rec_block[:-1]) | (rec_hash[1:] != rec_hash[:-1])
        group_of_record = np.cumsum(starts_group) - 1
        group_block = rec_block[starts_group]
        group_hash = rec_hash[starts_group]
        group_size = np.bincount(group_of_record, weights=rec_count).astype(np.int64)
        # The largest part of each block keeps its number.
        by_size = np.lexsort((-group_size, group_block))
        keeps = np.zeros(len(group_block), dtype=bool)
        first_of_block = np.ones(len(by_size), dtype=bool)
        first_of_block[1:] = group_block[by_size][1:] != group_block[by_size][:-1]
        keeps[by_size[first_of_block]] = True
        group_id = group_block.copy()
        movers = np.flatnonzero(~keeps)
        group_id[movers] = next_block + np.arange(len(movers))
        next_block += len(movers)
        block_hash[group_id] = group_hash
        block_size[group_id] = group_size  # kept groups: the block's new size

        record_group = np.empty(len(order), dtype=np.int64)
        record_group[order] = group_of_record
        new_block = group_id[record_group[:len(candidates)]]
        renamed = candidates[new_block != cand_block]
        renamed_to = new_block[new_block != cand_block]
        # A block's non-candidate members move when their part was not the largest.
        rest_group = record_group[len(candidates):]
        rest_moves = ~keeps[rest_group]
        if rest_moves.any():
            destination = np.zeros(capacity, dtype=np.int64)
            destination[touched[has_rest][rest_moves]] = group_id[rest_group[rest_moves]]
            moving = np.flatnonzero(live & ~looked_at & (destination[block] > 0))
            renamed = np.concatenate([renamed, moving])
            renamed_to = np.concatenate([renamed_to, destination[block[moving]]])
        looked_at[candidates] = False
        if len(renamed) == 0:
            break
        with np.errstate(over="ignore"):
            delta = renamed_to.astype(np.uint64) - block[renamed].astype(np.uint64)
            block[renamed] = renamed_to
            signature_hash[renamed] += delta * weights[0]
            edges = _ranges(edge_starts[renamed], edge_starts[renamed + 1])
            moved_delta = np.repeat(delta, edge_starts[renamed + 1] - edge_starts[renamed])
            np.add.at(signature_hash, edge_source[edges], edge_weight[edges] * moved_delta)
        candidates = np.unique(np.concatenate([renamed, edge_source[edges]]))

    if not _is_congruence(columns, block, live):  # pragma: no cover - a hash collision
        return _minimise_exact(columns, finals, live)
    return block


def _is_congruence(columns: np.ndarray, block: np.ndarray, live: np.ndarray) -> bool:
    """Whether every live state's successors lie in the same blocks as those
    of the first state of its block."""
    states = np.flatnonzero(live)
    _, first = np.unique(block[states], return_index=True)
    representative = np.zeros(int(block.max()) + 1, dtype=np.int64)
    representative[block[states[first]]] = states[first]
    return bool(np.array_equal(block[columns[states]],
                               block[columns[representative[block[states]]]]))


def _minimise_exact(columns: np.ndarray, finals: np.ndarray,
                    live: np.ndarray) -> np.ndarray:  # pragma: no cover - collision fallback
    """Plain Moore refinement on whole signature rows, sorted exactly."""
    block = np.where(live, 1 + finals.astype(np.int64), 0)
    num_blocks = len(np.unique(block))
    while True:
        signature = np.concatenate([block[:, None], block[columns]], axis=1)
        _, block = np.unique(signature, axis=0, return_inverse=True)
        block = block.ravel()
        if len(np.unique(block)) == num_blocks:
            return block
        num_blocks = len(np.unique(block))


def _renumber(columns, column_of_byte, finals, block, initial, pattern) -> ByteDFA:
    """Breadth-first numbering of the minimal DFA: dead 0, initial 1.

    States are numbered in the order a queue would discover them, bytes in
    increasing order; a whole breadth-first level is handled in one step (the
    next level is the current level's row-major targets, first occurrences
    only, in order).
    """
    _, compact = np.unique(block, return_inverse=True)  # blocks as 0..B-1
    compact = compact.ravel()
    num_blocks = int(compact.max()) + 1
    order_states = np.argsort(compact, kind="stable")
    first_state = order_states[np.searchsorted(compact[order_states], np.arange(num_blocks))]
    quotient = compact[columns[first_state]][:, column_of_byte]  # int[B, 256]: block to block
    dead_block = int(compact[DEAD])
    number = np.full(num_blocks, -1, dtype=np.int64)
    number[dead_block] = DEAD
    discovered = [np.zeros(0, dtype=np.int64)]
    frontier = np.zeros(0, dtype=np.int64)
    if compact[initial] != dead_block:
        frontier = np.array([compact[initial]], dtype=np.int64)
        number[frontier] = INITIAL
    count = INITIAL + len(frontier)
    while len(frontier):
        discovered.append(frontier)
        targets = quotient[frontier].ravel()
        fresh = targets[number[targets] < 0]
        _, first = np.unique(fresh, return_index=True)
        frontier = fresh[np.sort(first)]
        number[frontier] = count + np.arange(len(frontier))
        count += len(frontier)
    in_order = np.concatenate(discovered)  # blocks numbered 1, 2, ...
    new_table = np.zeros((count, 256), dtype=STATE_DTYPE)
    new_finals = np.zeros(count, dtype=bool)
    new_table[1:] = number[quotient[in_order]]
    new_finals[1:] = finals[first_state[in_order]]
    new_table.flags.writeable = False
    new_finals.flags.writeable = False
    return ByteDFA(new_table, new_finals, pattern)


def byte_dfa_from_tables(transitions: Iterable, finals: Iterable, pattern: str = "") -> ByteDFA:
    """A :class:`ByteDFA` from raw tables (tests and hand-made automata)."""
    return canonical_byte_dfa(np.asarray(transitions, dtype=STATE_DTYPE),
                              np.asarray(finals, dtype=bool), pattern=pattern)
