"""A regex straight to a byte automaton, with no character automaton between.

The input is a regex tree (:mod:`tokendfa.analysis.regex_tree`): what the
schema compiler writes, or regex text read into a tree once per distinct
text (:func:`~tokendfa.analysis.regex_tree.parse_regex`, with Python's own
parser under ``re.ASCII``, so the accepted syntax and the meaning of
``\\d``, ``\\w``, ``\\s`` and ``(?i)`` are exactly those of
``re.fullmatch(pattern, text, re.ASCII)``, which the tests check). Then:

1. **Thompson construction** of an NFA over *byte ranges* with epsilon moves
   (:class:`ThompsonNFA`). Every character set is code-point ranges, and
   the ranges become UTF-8 byte-range sequences through
   :mod:`tokendfa.analysis.utf8`, the one place where characters turn into
   bytes. Each set is compiled once into a small template (its sequences
   chained through intermediate states that are shared by suffix, so ``.``
   needs ten states, not thousands) and the template is stamped in wherever
   the set occurs; a run of ASCII text is a chain of one-byte edges. A
   bounded repeat ``X{n,m}`` builds ``X`` once and copies its block of states.
   The construction is compiled (:func:`thompson_fragment`, ``_thompson.c``,
   the same NFA state for state; ~0.15 us a state against ~1 us in
   Python) where the C extension is built; :class:`ThompsonNFA` is the
   reference, and the one that runs under ``TOKENDFA_NATIVE=0``.
2. **Subset construction** to a complete ``int32[n, 256]`` table with the
   dead state 0 and the initial state 1, the contract of
   :func:`tokendfa.analysis.minimise.canonical_byte_dfa`, which then trims, minimises
   and numbers it. Epsilon closures are computed once per NFA state and the
   step from a DFA state is computed on the cuts between byte ranges, not on
   256 bytes.

(interegular's character FSMs, built by products over a shared alphabet,
took 33 s on one 15k-character schema regex; this construction is linear.)

**Literal sets.** A :class:`~tokendfa.analysis.regex_tree.LiteralSet` (a
JSON Schema ``enum`` of many strings), and an alternation of many plain
literals (``apple|banana|...``, ``LITERAL_SET_MIN_BRANCHES`` branches or
more), are not built as Thompson branches but as the set's minimal acyclic
DFA (:mod:`tokendfa.analysis.literal_sets`), stamped in where it stands; a
literal set as the whole pattern needs no subset construction at all
(:func:`~tokendfa.analysis.construct.byte_dfa_from_regex`).

**Keys but these.** An :class:`~tokendfa.analysis.regex_tree.Excluding`
(the strings that leave a trie of names, a JSON object's undeclared keys)
is built from its trie, one NFA state a trie node, not from branches.

Surrogates are never matched (:mod:`tokendfa.analysis.utf8` skips them), and invalid
UTF-8 leads only to the dead state.

**Shared definitions.** A generated regex can repeat one large piece many
times (a JSON Schema ``$ref`` used in twenty places, values nested inside
values). ``definitions`` maps a key to the tree it stands for, which a tree
calls with :class:`~tokendfa.analysis.regex_tree.Call` (in regex text, the
key is a placeholder character, a lone surrogate, which no text can
contain); each definition is compiled once to its minimal DFA, and every
call stamps in a copy of that DFA's states instead of the Thompson states of
its tree. The language is the one of the pattern with every call replaced
by its definition; the NFA is proportional to the minimal DFAs, not to the
expanded tree. A definition is compiled on its own: flags around a
placeholder in text, such as ``(?i)``, do not reach into it.

Example::

    >>> from tokendfa.analysis.minimise import canonical_byte_dfa
    >>> dfa = canonical_byte_dfa(*byte_tables_from_regex(r"[a-c]+x?"))
    >>> dfa.accepts(b"abcx"), dfa.accepts(b"x")
    (True, False)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import traceback
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .dfa import STATE_DTYPE
from . import limits
from .errors import BuildLimitError, RegexError, UnsupportedRegexError
from .literal_sets import LiteralDFA, minimal_literal_dfa, stamp_literal_dfa
from .minimise import canonical_byte_dfa
from .native import native_module
from .regex_tree import (Alt, Call, Chars, Concat, Excluding, LiteralSet, Node, Repeat, Text, literal_members,
                         parse_regex, ranges_minus, to_regex)
from .utf8 import SURROGATES, CodepointRange, utf8_range_sequences

__all__ = ["byte_tables_from_regex", "free_in_background", "pattern_tree", "ThompsonNFA", "SharedDefinitions", "cut_ranges",
           "keeping_repeats", "release_checked", "DEFAULT_MAX_NFA_STATES", "NFA_STATE_BYTES",
           "NFAFragment", "thompson_fragment", "relocated_rows", "NATIVE_THOMPSON"]

DEFAULT_MAX_NFA_STATES = 2_000_000
# An alternation of at least this many plain literals is built as its minimal
# automaton (tokendfa.analysis.literal_sets) rather than as Thompson branches
# (the lazy builder has its own threshold, in lazydfa). Measured, random words,
# the byte DFA: 16 words 0.84 ms as a set, 0.75 ms as branches; 50 words 2.07
# and 2.33 ms; 500 words 14.5 and 17.3 ms; 5,000 words 117 and 186 ms.
LITERAL_SET_MIN_BRANCHES = 32
# Bytes an NFA state takes with its two lists and edge tuples (measured: 1M
# states of a literal chain, 0.35 GB), and a DFA state of the subset
# construction with its kernel, its row of the table and its cached steps.
NFA_STATE_BYTES = 350
DFA_STATE_BYTES = 1_500

# --- character sets as code-point ranges ----------------------------------

@functools.lru_cache(maxsize=4096)
def _set_template(ranges: tuple[CodepointRange, ...]):
    """The byte-level chain for one character set, as a relocatable template.

    Local node 0 is the source, node 1 the target, nodes 2.. are intermediate
    states, each identified by (remaining byte ranges): two UTF-8 sequences
    with the same tail share its states. Returns ``(num_nodes, edges)`` with
    ``edges[node] = [(lo, hi, target_node), ...]``.
    """
    nodes: dict[tuple, int] = {(): 1}
    edges: list[list[tuple[int, int, int]]] = [[], []]

    def node_for(suffix: tuple) -> int:
        node = nodes.get(suffix)
        if node is None:
            node = nodes[suffix] = len(edges)
            edges.append([])
            lo, hi = suffix[0]
            edges[node].append((lo, hi, node_for(suffix[1:])))
        return node

    for lo, hi in ranges:
        for sequence in utf8_range_sequences(lo, hi):
            first_lo, first_hi = sequence[0]
            edges[0].append((first_lo, first_hi, node_for(sequence[1:])))
    return len(edges), tuple(tuple(node_edges) for node_edges in edges)


def _may_be_placeholder(code: int) -> bool:
    """Placeholders of shared definitions written as text are lone surrogates, which no text holds."""
    return SURROGATES[0] <= code <= SURROGATES[1]


# --- Thompson construction ----------------------------------------------------

# Repeats whose Thompson fragments are kept, per construction class, for the
# process (ThompsonNFA._stamped): at least this size (about the characters of
# their regex), at most this many states each and in all (a few tens of MB).
_STAMPED_MIN_SIZE = 12
_STAMP_MAX_STATES = 5_000
_STAMPS_MAX_STATES = 200_000
_STAMPS: dict = {}
_stamped_states = [0]
# A repeat is kept the second time the process builds it, not the first: most
# repeats of a schema are its own (an optional member with its property name,
# the nested prefixes of the names that additionalProperties excludes) and
# never recur, and keeping them cost more than building them (the rows copied
# into tuples, once for each level of a nesting: JME/0 of MaskBench's sample
# kept 17 repeats and met none of them again). The pieces that recur (JSON
# strings and numbers, formats) are kept from their second building on; the
# common ones from their first, in Vocabulary.prepare()'s warm-up, which
# compiles them for that (keeping_repeats). Bounded: past _SEEN_MAX keys the
# record of first sightings starts again.
_SEEN: dict = {}
_SEEN_MAX = 8192
_KEEP_AT_ONCE: contextvars.ContextVar[bool] = contextvars.ContextVar("tokendfa_keep_repeats", default=False)


@contextlib.contextmanager
def keeping_repeats():
    """Within the block (in this context), a repeat the construction builds
    is kept for the process the first time, not the second: for a warm-up
    whose pieces are the ones later patterns repeat (``Vocabulary.prepare()``
    compiles its two warm-up schemas once each, not twice, for 0.1-0.2 s less)."""
    token = _KEEP_AT_ONCE.set(True)
    try:
        yield
    finally:
        _KEEP_AT_ONCE.reset(token)


class ThompsonNFA:
    """An NFA over byte ranges with epsilon moves, built from a regex tree.

    ``eps[q]`` lists the epsilon successors of state ``q`` and ``edges[q]``
    its ``(lo, hi, target)`` byte-range edges. ``build(node, source)`` adds
    the states for ``node`` after ``source`` and returns the state where a
    match of ``node`` ends. Two invariants make the construction composable
    without extra epsilon moves:

    * a fragment only adds *outgoing* edges to ``source``, never edges into
      it, so branches of an alternation can all start at the same state;
    * the returned end state has no outgoing edges yet, so what follows can
      start from it.

    Loops therefore always go back to a fresh state owned by the repeat.

    A call of a shared definition is placed by :meth:`place_definition`
    (here: a copy of the definition's minimal DFA, from ``shared``, a
    :class:`SharedDefinitions`); a repeat's copies are made by
    :meth:`copy_block`; an alternation of plain literals becomes a literal
    set from :meth:`literal_set_min_branches` branches. These three are the
    construction's extension points: the lazy automaton
    (:mod:`tokendfa.analysis.lazydfa`) overrides them to compile a call as a
    call, with a stack, instead of a copy.

    A repeat that calls no definition is built once per process and
    construction class, and copied where it stands again (:meth:`_stamped`).
    """

    def __init__(self, pattern: "str | Node", max_states: int, shared=None) -> None:
        self.pattern = pattern  # for messages: the text, or the tree (written out on demand)
        self.max_states = max_states
        self.shared = shared
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        # Up to this many states neither the state bound nor the memory budget
        # can be passed, so _reserve skips those checks (it runs before every
        # fragment: ~65,000 times for the three slowest-to-build schemas of the
        # MaskBench sample, 9% of their time to first mask with both checks made).
        self._unchecked = min(max_states, limits.unchecked_bytes() // NFA_STATE_BYTES)

    def new_state(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def _reserve(self, count: int) -> None:
        reached = len(self.eps) + count
        # every fragment reserves its states, so this is where a long construction is bounded
        limits.check()
        if reached <= self._unchecked:
            return
        limits.check_memory(reached * NFA_STATE_BYTES, self._nfa_description)
        if reached > self.max_states:
            raise BuildLimitError(
                f"regex {self.shown()[:200]!r} needs more than {self.max_states:,} NFA states "
                f"(at least {reached:,}); large bounded repeats such as {{1000}} are expanded",
                reached=reached)

    def _nfa_description(self) -> str:
        return f"the NFA of regex {self.shown()[:100]!r}"

    def shown(self) -> str:
        """The pattern as text, for a message (the start of it for a tree)."""
        if isinstance(self.pattern, str):
            return self.pattern
        return to_regex(self.pattern, head=_SHOWN_HEAD)

    def build(self, node: Node, source: int) -> int:
        cls = node.__class__
        if cls is Text:
            return self._text(node.text, source)
        if cls is Chars:
            return self._character_set(node.ranges, source)
        if cls is Concat:
            for item in node.items:
                source = self.build(item, source)
            return source
        if cls is Alt:
            if len(node.items) >= self.literal_set_min_branches():
                members = literal_members(node)
                if members is not None:
                    return self.literal_set(minimal_literal_dfa(members), source)
            end = self.new_state()
            for branch in node.items:
                self.eps[self.build(branch, source)].append(end)
            return end
        if cls is Repeat:
            if node.size >= _STAMPED_MIN_SIZE and not node.calls:
                return self._stamped(node, source)
            return self._build_repeat(node, source)
        if cls is LiteralSet:
            return self.literal_set(node.automaton(), source)
        if cls is Call:
            if self.shared is not None and node.key in self.shared:
                return self.place_definition(self.shared.template(node.key), source)
            return self.new_state()  # a definition nobody gave: no string (a lone surrogate)
        if cls is Excluding:
            return self._excluding(node, source)
        raise TypeError(f"not a regex tree node: {node!r}")

    def _excluding(self, node: Excluding, source: int) -> int:
        """An :class:`~.regex_tree.Excluding` straight from the trie of its
        names: ``source`` is the root, one state a trie node after it (in the
        order the sorted names make them); each takes its children's bytes
        to them, the other bytes of ``single`` to the exit, and epsilon moves
        to the entry of ``multi`` (one fragment for every node; it ends at
        the exit) and, when the node is no name, to the end; the exit runs
        ``rest`` to the end."""
        children: list[list[tuple[int, int]]] = [[]]   # trie node -> (byte, child), in order made
        named = bytearray(1)
        for name in node.names:
            at = 0
            for byte in name.encode("ascii"):
                for known, child in children[at]:
                    if known == byte:
                        at = child
                        break
                else:
                    children[at].append((byte, len(children)))
                    children.append([])
                    named.append(0)
                    at = len(children) - 1
            named[at] = 1
        self._reserve(len(children) + 2)
        base = len(self.eps) - 1   # trie node t >= 1 is state base + t
        self.eps.extend([] for _ in range(len(children) - 1))
        self.edges.extend([] for _ in range(len(children) - 1))
        exit_ = self.new_state()
        entry = self.new_state()
        self.eps[self.build(node.multi, entry)].append(exit_)
        rest_end = self.build(node.rest, exit_)
        end = self.new_state()
        self.eps[rest_end].append(end)
        single = node.single
        for t, below in enumerate(children):
            state = base + t if t else source
            row = self.edges[state]
            row.extend([(byte, byte, base + child) for byte, child in below])
            taken = sorted((byte, byte) for byte, _ in below)
            row.extend([(lo, hi, exit_) for lo, hi in ranges_minus(single, taken)])
            self.eps[state].append(entry)
            if not named[t]:
                self.eps[state].append(end)
        return end

    def _build_repeat(self, node: Repeat, source: int) -> int:
        body = node.body
        if body.__class__ is Chars:
            ranges = body.ranges
            return self._repeat(lambda entry: self._character_set(ranges, entry),
                                node.lo, node.hi, source)
        return self._repeat(lambda entry: self.build(body, entry), node.lo, node.hi, source)

    def _stamped(self, node: Repeat, source: int) -> int:
        """``node`` (a repeat that calls no definition) as a copy of the
        fragment this construction made for it before, in this process
        (:data:`_STAMPS`); built otherwise, and kept from its second building
        on (:data:`_SEEN`), or its first inside :func:`keeping_repeats`.

        Schemas repeat the same pieces (JSON strings with their length
        bounds, numbers, formats, whitespace), and trees are interned, so
        the piece is its own key. A fragment's states are all new but the
        ``source`` it leaves from, so its rows relocate by one offset."""
        key = (self.__class__, node)
        stamp = _STAMPS.get(key)
        eps, edges = self.eps, self.edges
        if stamp is None:
            if key not in _SEEN and not _KEEP_AT_ONCE.get():
                if len(_SEEN) >= _SEEN_MAX:
                    _SEEN.clear()
                _SEEN[key] = None
                return self._build_repeat(node, source)
            from_eps, from_edges = len(eps[source]), len(edges[source])
            base = len(eps)
            end = self._build_repeat(node, source)
            size = len(eps) - base
            if base <= end and size <= _STAMP_MAX_STATES and _stamped_states[0] + size <= _STAMPS_MAX_STATES:
                _stamped_states[0] += size
                states = range(base, len(eps))
                _STAMPS[key] = (
                    tuple(tuple(t - base for t in eps[q]) for q in states),
                    tuple(tuple((lo, hi, t - base) for lo, hi, t in edges[q]) for q in states),
                    tuple(t - base for t in eps[source][from_eps:]),
                    tuple((lo, hi, t - base) for lo, hi, t in edges[source][from_edges:]),
                    end - base)
            return end
        rows_eps, rows_edges, source_eps, source_edges, end = stamp
        self._reserve(len(rows_eps))
        base = len(eps)
        eps.extend([[t + base for t in row] for row in rows_eps])
        edges.extend([[(lo, hi, t + base) for lo, hi, t in row] for row in rows_edges])
        eps[source].extend([t + base for t in source_eps])
        edges[source].extend([(lo, hi, t + base) for lo, hi, t in source_edges])
        return end + base

    def _text(self, value: str, source: int) -> int:
        """A literal string: runs of ASCII as chains of one-byte edges (property
        names, mostly: half of a schema's regex), other characters as sets."""
        if value.isascii():
            return self._ascii_chain(value.encode(), source)
        run: list[int] = []
        for ch in value:
            code = ord(ch)
            if code < 0x80:
                run.append(code)
                continue
            if run:
                source = self._ascii_chain(run, source)
                run = []
            source = self._character_set(((code, code),), source)
        if run:
            source = self._ascii_chain(run, source)
        return source

    def _ascii_chain(self, codes, source: int) -> int:
        """``codes`` (ASCII, so one byte each) one after the other after ``source``."""
        count = len(codes)
        if count > _CHAIN_CHECK_EVERY:
            # a chunk at a time, each reserved (and the deadline checked) on its own:
            # 600,000 characters at once took 50-100 ms past a time limit
            for start in range(0, count, _CHAIN_CHECK_EVERY):
                source = self._ascii_chain(codes[start:start + _CHAIN_CHECK_EVERY], source)
            return source
        self._reserve(count)
        eps, edges = self.eps, self.edges
        base = len(edges)
        # The states inside the chain are complete when made (nothing is ever
        # added to a state a fragment does not return): their rows are tuples,
        # the empty one shared, and only the end is a pair of lists.
        eps.extend([()] * (count - 1))
        eps.append([])
        edges[source].append((codes[0], codes[0], base))
        targets = range(base + 1, base + count)
        edges.extend([((code, code, target),) for code, target in zip(codes[1:], targets)])
        edges.append([])
        return base + count - 1

    def _character_set(self, ranges: tuple[CodepointRange, ...], source: int) -> int:
        num_nodes, template = _set_template(ranges)
        self._reserve(num_nodes - 1)
        edges = self.edges
        base = len(edges) - 1  # local node i >= 1 becomes base + i
        if num_nodes == 2:  # one byte a character (ASCII): the target alone
            self.eps.append([])
            edges.append([])
        else:
            # node 1 is the end (lists); the intermediate ones are complete (tuples)
            self.eps.append([])
            self.eps.extend([()] * (num_nodes - 2))
            edges.append([])
            edges.extend([tuple([(lo, hi, base + t) for lo, hi, t in node_edges])
                          for node_edges in template[2:]])
        edges[source].extend([(lo, hi, base + t) for lo, hi, t in template[0]])
        return base + 1

    def literal_set_min_branches(self) -> int:
        return LITERAL_SET_MIN_BRANCHES

    def literal_set(self, dfa: LiteralDFA, source: int) -> int:
        """The minimal automaton of a set of literals
        (:func:`~tokendfa.analysis.literal_sets.minimal_literal_dfa`) after
        ``source``; returns its end."""
        self._reserve(dfa.num_states)
        return stamp_literal_dfa(dfa, self.eps, self.edges, source)

    def place_definition(self, template, source: int) -> int:
        """A copy of a definition's minimal DFA after ``source``; returns its end.

        ``template`` is ``(edges, finals)`` over local states 0.. (0 initial).
        The DFA's initial state may be re-entered by its own edges, so it gets
        a state of its own rather than ``source`` (which must not gain
        incoming edges); the end is a fresh state every final one reaches.
        """
        edges, finals = template
        if not finals:
            return self.new_state()  # the definition matches nothing: a dead end
        self._reserve(len(edges) + 1)
        base = len(self.eps)
        self.eps.extend([] for _ in range(len(edges)))
        self.edges.extend([(lo, hi, base + t) for lo, hi, t in state_edges] for state_edges in edges)
        end = self.new_state()
        for state in finals:
            self.eps[base + state].append(end)
        self.eps[source].append(base)
        return end

    def _repeat(self, build_body, low: int, high: int | None, source: int) -> int:
        """``body{low,high}`` (``high=None``: unbounded), expanded into copies.

        ``build_body(entry)`` builds one copy after ``entry`` and returns its end.
        """
        if high == 0:
            return source
        # Build one copy in a block of its own, entered by a fresh state, then
        # stamp out the other copies by shifting state numbers.
        entry = self.new_state()
        exit_ = build_body(entry)
        size = len(self.eps) - entry
        copies = low if high is None else high
        copies = max(copies, 1)
        self._reserve(size * (copies - 1))
        blocks = [(entry, exit_)]
        for _ in range(copies - 1):
            limits.check()
            blocks.append(self.copy_block(entry, exit_, size))
        current = source
        if high is None:
            # low - 1 plain copies, then one that loops (low >= 1: "X+"),
            # or a single looping copy that may be skipped (low == 0: "X*").
            for block_entry, block_exit in blocks[:-1]:
                self.eps[current].append(block_entry)
                current = block_exit
            loop_entry, loop_exit = blocks[-1]
            end = self.new_state()
            self.eps[current].append(loop_entry)
            self.eps[loop_exit].extend((loop_entry, end))
            if low == 0:
                self.eps[loop_entry].append(end)
            return end
        end = self.new_state() if low < high else None
        for index, (block_entry, block_exit) in enumerate(blocks):
            if index >= low:
                self.eps[current].append(end)  # enough copies: may stop here
            self.eps[current].append(block_entry)
            current = block_exit
        if end is None:
            return current
        self.eps[current].append(end)
        return end

    def copy_block(self, first: int, exit_: int, size: int) -> tuple[int, int]:
        """Copy states ``first .. first+size-1``, a block no edge leaves, and
        return the copies of its entry ``first`` and of its end ``exit_``."""
        offset = len(self.eps) - first
        eps, edges = self.eps, self.edges
        for chunk in range(first, first + size, 1 << 15):  # a block can hold a million states
            limits.check()
            states = range(chunk, min(chunk + (1 << 15), first + size))
            eps.extend([[t + offset for t in eps[q]] for q in states])
            edges.extend([[(lo, hi, t + offset) for lo, hi, t in edges[q]] for q in states])
        return first + offset, exit_ + offset


# --- the compiled construction ------------------------------------------------

class NFAFragment(NamedTuple):
    """A Thompson fragment: states ``base .. base + len(eps) - 1`` (``base``
    is the request's), ``eps[i]`` and ``edges[i]`` the rows of state
    ``base + i`` (tuples: epsilon targets; ``(lo, hi, target)`` triples, or
    one flat tuple ``(lo, hi, target, lo, hi, target, ...)`` when asked
    ``flat``), ``calls`` the states that call a definition, ``(state,
    ((key, return_state), ...))`` in state order (the lazy construction's;
    empty when calls are copies). ``dense`` (lazy construction only): every
    state reaches ``end``, a call passing to its return state, so that once
    every callee is known to match something no state is dead."""

    start: int
    end: int
    eps: list
    edges: list
    calls: list
    dense: bool = False


class NativeSpec(NamedTuple):
    """What the compiled construction (``_thompson.configure``) is given once:
    the node classes it tells apart (by exact class, as :meth:`ThompsonNFA.build`
    does) and the Python helpers it calls."""

    chars: type
    text: type
    concat: type
    alt: type
    repeat: type
    call: type
    literal_set: type
    excluding: type
    set_template: object       # ranges -> (num_nodes, edges): _set_template
    literal_automaton: object  # Alt or LiteralSet -> LiteralDFA (contiguous arrays) or None
    fragment: type             # NFAFragment


class NativeRequest(NamedTuple):
    """One build of the compiled construction (``_thompson.build(tree, request)``)."""

    base: int           # the number of the fragment's first state (its start)
    max_states: int     # ThompsonNFA's max_states, states below base included
    unchecked: int      # up to this many states, reserve is not called
    min_branches: int   # an alternation of this many plain literals is a literal set
    calls: bool         # a defined key's Call is a call (the lazy automaton), else a copy
    defined: object     # the defined keys (``in``), or None
    template: object    # key -> (edges, finals), the definition's DFA to copy (calls False)
    flat: bool          # edges as flat tuples
    check: object       # limits.check, called every few fragments
    reserve: object     # reached -> None: ThompsonNFA._reserve's bounds, raising past them


def _literal_automaton(node: Node) -> "LiteralDFA | None":
    """What :meth:`ThompsonNFA.build` stamps for a literal set or an
    alternation of many literals (None: not all plain literals), its arrays
    contiguous for the compiled construction."""
    if node.__class__ is LiteralSet:
        dfa = node.automaton()
    else:
        members = literal_members(node)
        if members is None:
            return None
        dfa = minimal_literal_dfa(members)
    return LiteralDFA(*(np.ascontiguousarray(array, dtype=np.int64) for array in dfa[:4]),
                      np.ascontiguousarray(dfa.finals, dtype=bool))


_thompson = native_module(__package__ + "._thompson")
if _thompson is not None:
    _thompson.configure(NativeSpec(Chars, Text, Concat, Alt, Repeat, Call, LiteralSet, Excluding, _set_template,
                                   _literal_automaton, NFAFragment))
# Whether the compiled construction runs (TOKENDFA_NATIVE=0 or no compiler: ThompsonNFA).
NATIVE_THOMPSON = _thompson is not None


def thompson_fragment(tree: Node, *, max_states: int = DEFAULT_MAX_NFA_STATES, base: int = 0,
                      shared=None, calls: bool = False, min_branches: int = LITERAL_SET_MIN_BRANCHES,
                      flat: bool = False, pattern: "str | Node | None" = None) -> "NFAFragment | None":
    """``tree``'s Thompson fragment from the compiled construction, states
    numbered from ``base`` (its start), or None when it is not built or
    ``TOKENDFA_NATIVE=0``. The same NFA as :class:`ThompsonNFA` (the
    reference) makes from an empty table, state for state and edge for edge.

    ``shared`` holds the definitions a :class:`~.regex_tree.Call` names:
    with ``calls``, any container of keys, and a defined key's call is a
    call (the lazy automaton's; :attr:`NFAFragment.calls`); without, a
    :class:`SharedDefinitions`, whose minimal DFA of the definition is
    copied in. ``pattern`` is shown in messages (``tree`` by default).

    Raises what :class:`ThompsonNFA` raises (:class:`BuildLimitError`, the
    time limit), and RecursionError for a tree nested too deeply.
    """
    if _thompson is None:
        return None
    limit = ThompsonNFA(tree if pattern is None else pattern, max_states)
    request = NativeRequest(base, max_states, limit._unchecked, min_branches, calls,
                            shared, None if calls or shared is None else shared.template,
                            flat, limits.check, limit._reserve)
    return _thompson.build(tree, request)


def relocated_rows(rows, offset: int, stride: int) -> "list | None":
    """``rows`` (tuples of ints: epsilon targets, ``stride`` 1, or flat
    ``(lo, hi, target, ...)`` edges, ``stride`` 3) with ``offset`` added to
    each target, as new tuples, compiled; None without the compiled
    construction (the caller's Python does it)."""
    if _thompson is None:
        return None
    return _thompson.relocated(rows, offset, stride)


# --- the public entry point -------------------------------------------------

def byte_tables_from_regex(pattern: "str | Node", *, max_nfa_states: int = DEFAULT_MAX_NFA_STATES,
                           max_dfa_states: int | None = None,
                           definitions: "Mapping | SharedDefinitions | None" = None,
                           tree=None) -> tuple[np.ndarray, np.ndarray]:
    """Compile ``pattern`` to a complete byte table, not yet minimised.

    ``pattern`` is a regex tree (:mod:`tokendfa.analysis.regex_tree`) or
    Python ``re`` syntax matched against the whole string, as returned by
    :func:`tokendfa.analysis.regex_syntax.normalize_pattern` (read through
    :func:`~tokendfa.analysis.regex_tree.parse_regex`'s cache). Returns
    ``(transitions, finals)``: ``int32[n, 256]`` and ``bool[n]``, with state 0
    dead (its row all zeros) and state 1 initial, ready for
    :func:`tokendfa.analysis.minimise.canonical_byte_dfa`.

    # Errors

    * :class:`UnsupportedRegexError` for valid syntax this compiler does not
      handle (anchors, lookarounds, backreferences, possessive repeats, atomic
      groups, the ``(?u)`` flag), naming the construct;
    * :class:`RegexError` for invalid syntax or nesting too deep to parse;
    * :class:`BuildLimitError` when the NFA would need more than
      ``max_nfa_states`` states (bounded repeats are expanded, so
      ``(?:(?:a|b){1000}){1000}`` would need millions), or the DFA more than
      ``max_dfa_states`` (no bound by default); ``reached`` says how many.

    ``definitions`` maps keys to the trees (or regex texts) they stand for
    (see the module notes): a tree calls one with :class:`~.regex_tree.Call`;
    in a text, a placeholder character (a lone surrogate) is the key. A
    definition may call others, but not itself.

    ``tree`` is ``pattern``'s tree when the caller has it already.
    """
    # The build allocates hundreds of thousands of small lists and tuples, none
    # of them in a reference cycle; the cyclic collector would rescan them all
    # again and again, which doubles the time on big patterns.
    collecting = gc.isenabled()
    nfa = None   # a limit may stop the build before there is one
    gc.disable()
    try:
        shared = definitions
        if definitions is not None and not isinstance(definitions, SharedDefinitions):
            shared = SharedDefinitions(definitions, max_nfa_states) if definitions else None
        limits.check()
        node = tree if isinstance(tree, Node) else pattern_tree(pattern, calls=shared is not None)
        if shared is not None and node.__class__ is Call and node.key in shared:
            # the whole pattern is one definition (a schema's root value, say): compile the
            # definition here rather than as a template that is then stamped and determinised again
            node = shared.tree(node.key)
        if node.__class__ is LiteralSet:
            return node.automaton().table()  # minimal already: no NFA, no subsets
        limits.check()
        shown = pattern if isinstance(pattern, str) else None
        nfa = ThompsonNFA(shown if shown is not None else node, max_nfa_states, shared)
        try:
            fragment = thompson_fragment(node, max_states=max_nfa_states, shared=shared,
                                         pattern=nfa.pattern)
            if fragment is None:
                start = nfa.new_state()
                final = nfa.build(node, start)
            else:
                nfa.eps, nfa.edges = fragment.eps, fragment.edges
                start, final = fragment.start, fragment.end
        except RecursionError:
            raise RegexError(f"regex {nfa.shown()[:200]!r} is nested too deeply to compile") from None
        # the pattern's text only for a message: written out from a tree, an enum of
        # 30,000 objects took 90 ms (and nothing checked the deadline inside)
        tables = _determinise(nfa.eps, nfa.edges, start, final, max_dfa_states, nfa.shown)
        release_checked(nfa.eps, nfa.edges)   # the NFA's lists, each state's: see release_checked
        return tables
    except BuildLimitError as exc:
        if collecting:
            # The error's traceback holds the construction's frames, and through them
            # its hundreds of thousands of frozensets and lists, all in the youngest
            # generation while the collector was off: the first collection after
            # gc.enable() walked them all (0.59 s at 400,000 subset states, the time
            # limit overshot by that). They are freed first, the collector still off,
            # on a thread of their own that turns it back on: freeing them here was
            # most of what a time limit overshot by (~100 ms at 1.5 s on (a|b)*a(a|b){22}).
            _free_in_background(nfa, exc.__traceback__)
            nfa = node = shared = None
            collecting = False
        raise
    finally:
        if collecting:
            gc.enable()


_CHAIN_CHECK_EVERY = 1 << 15

# the subset construction's own containers, by name (nothing it was given)
_CONSTRUCTION_LOCALS = ("closures", "kernels", "ids", "steps", "segment_state", "segment_lo",
                        "segment_hi", "segment_target", "by_range")
_FREE_CHUNK = 4096


def _free_in_background(nfa: "ThompsonNFA | None", frames) -> None:
    """Free a stopped construction (``nfa``'s lists, the subset construction's
    containers in the traceback ``frames``) with :func:`free_in_background`."""
    owned = [] if nfa is None else [nfa.eps, nfa.edges]
    tb = frames
    while tb is not None:
        if tb.tb_frame.f_code is _determinise.__code__:
            found = tb.tb_frame.f_locals
            owned += [found[name] for name in _CONSTRUCTION_LOCALS if name in found]
        tb = tb.tb_next
    free_in_background(owned, frames)


def free_in_background(owned: list, frames=None) -> None:
    """Empty the lists and dicts in ``owned``, then clear the traceback
    ``frames`` (one, or a list), on a daemon thread (``tokendfa-free``) that turns the cyclic
    collector on when done: the caller turned it off for the stopped work
    and leaves it off, so that what that work made, all of it young, is freed
    before any collection walks it.

    The containers are emptied a chunk at a time: freeing one holding 400,000
    frozensets is one call that holds the interpreter lock throughout (0.9 s
    once, the caller's thread waiting on it), while between chunks the caller's
    thread runs on."""
    import threading

    def free() -> None:
        try:
            for container in owned:
                if isinstance(container, list):
                    while container:
                        del container[-_FREE_CHUNK:]
                elif isinstance(container, dict):
                    while container:
                        for _ in range(min(_FREE_CHUNK, len(container))):
                            container.popitem()
            owned.clear()
            for tb in frames if isinstance(frames, list) else [frames]:
                if tb is not None:
                    traceback.clear_frames(tb)   # a frame still running is left alone
        finally:
            gc.enable()

    threading.Thread(target=free, daemon=True, name="tokendfa-free").start()


def pattern_tree(pattern: "str | Node", *, calls: bool = False) -> Node:
    """``pattern`` as a tree: itself when it is one, else its text read
    without outer anchors (:func:`~.regex_tree.parse_regex`, cached)."""
    if isinstance(pattern, Node):
        return pattern
    return parse_regex(pattern, calls=calls, anchors=False)


class SharedDefinitions:
    """Key -> definition (a tree, or a regex text read when first used), each
    compiled on first use to a stampable minimal DFA."""

    def __init__(self, definitions: "Mapping", max_nfa_states: int) -> None:
        for key, value in definitions.items():
            if isinstance(value, str) and (len(key) != 1 or not _may_be_placeholder(ord(key))):
                raise ValueError(f"a placeholder must be one surrogate character, not {key!r}")
        self.definitions = dict(definitions)
        self.max_nfa_states = max_nfa_states
        self._templates: dict = {}
        self._compiling: set = set()

    def __contains__(self, key) -> bool:
        return key in self.definitions

    def tree(self, key) -> Node:
        value = self.definitions[key]
        return value if isinstance(value, Node) else parse_regex(value, calls=True, anchors=False)

    def template(self, key) -> tuple:
        template = self._templates.get(key)
        if template is None:
            if key in self._compiling:
                shown = f"{ord(key):#x}" if isinstance(key, str) and len(key) == 1 else repr(key)
                raise RegexError(f"shared definition {shown} uses itself")
            self._compiling.add(key)
            try:
                template = self._templates[key] = self._compile(key)
            finally:
                self._compiling.discard(key)
        return template

    def _compile(self, key) -> tuple:
        tree = self.tree(key)
        if tree.__class__ is LiteralSet:
            return tree.automaton().template()
        transitions, finals = byte_tables_from_regex(
            self.definitions[key], max_nfa_states=self.max_nfa_states, definitions=self,
            tree=self.tree(key))
        dfa = canonical_byte_dfa(transitions, finals)
        # local state i is DFA state i + 1 (the dead state 0 is dropped; 1 is initial)
        table = dfa.transitions[1:]
        if len(table) == 0:
            return (), ()  # the empty language
        # runs of equal targets along each row: one (lo, hi, target) edge per live run
        starts = np.ones(table.shape, dtype=bool)
        starts[:, 1:] = table[:, 1:] != table[:, :-1]
        rows, lows = np.nonzero(starts)
        highs = np.empty_like(lows)
        highs[:-1] = lows[1:] - 1
        highs[np.append(rows[1:] != rows[:-1], True)] = 255
        targets = table[rows, lows]
        live = targets != 0
        edges: list[list] = [[] for _ in range(len(table))]
        for row, lo, hi, target in zip(rows[live].tolist(), lows[live].tolist(),
                                       highs[live].tolist(), (targets[live] - 1).tolist()):
            edges[row].append((lo, hi, target))
        return tuple(map(tuple, edges)), tuple(np.flatnonzero(dfa.finals[1:]).tolist())


# --- subset construction ----------------------------------------------------

def _determinise(eps, edges, start: int, final: int, max_dfa_states: int | None, shown):
    """Subset construction over byte ranges; dead state 0, initial state 1.
    ``shown()`` is the pattern's text, for a message.

    A DFA state is the set of NFA states, closed under epsilon moves, that
    have byte edges (or are the final state): the others cannot change what
    happens next. From a DFA state, the edges are grouped by byte range and
    the ranges cut where they overlap, so each piece of the byte line is
    handled once; the step from a set of targets to a DFA state is cached.
    """
    closures: list[frozenset | None] = [None] * len(eps)

    def closure(state: int) -> frozenset:
        found = closures[state]
        if found is None:
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
            found = closures[state] = frozenset(kernel)
        return found

    # kernels[i] is DFA state i; the empty set is the dead state 0. State 1
    # gets its own entry even when its set is empty (a pattern matching
    # nothing), so that the initial state is always 1.
    kernels: list[frozenset] = [frozenset(), closure(start)]
    ids: dict[frozenset, int] = {frozenset(): 0}
    ids.setdefault(kernels[1], 1)
    steps: dict[tuple, int] = {}
    segment_state: list[int] = []
    segment_lo: list[int] = []
    segment_hi: list[int] = []
    segment_target: list[int] = []

    state = 1
    kernel_cells = 0  # NFA states held by all kernels: the construction's memory
    while state < len(kernels):  # grows while we iterate
        limits.check()
        if state & 255 == 0:
            limits.check_memory(len(kernels) * DFA_STATE_BYTES + kernel_cells * 40,
                                lambda: f"the subset construction of regex {shown()[:100]!r}")
        by_range: dict[tuple[int, int], list[int]] = {}
        kernel = kernels[state]
        # a kernel of many NFA states (the start of a 30,000-branch alternation) is one
        # step of 60-120 ms: it checks the deadline every _WIDE_STEP states
        for part in (kernel,) if len(kernel) <= _WIDE_STEP else _parts(kernel):
            for nfa_state in part:
                for lo, hi, target in edges[nfa_state]:
                    targets = by_range.get((lo, hi))
                    if targets is None:
                        by_range[(lo, hi)] = [target]
                    else:
                        targets.append(target)
        for lo, hi, targets in cut_ranges(by_range):
            key = tuple(targets)
            target = steps.get(key)
            if target is None:
                if len(key) == 1:
                    closed = closure(targets[0])
                elif len(key) <= _WIDE_STEP:
                    closed = frozenset().union(*map(closure, key))
                else:
                    closed = frozenset().union(*(frozenset().union(*map(closure, part))
                                                 for part in _parts(key)))
                target = ids.get(closed)
                if target is None:
                    target = ids[closed] = len(kernels)
                    kernels.append(closed)
                    kernel_cells += len(closed)
                    if max_dfa_states is not None and len(kernels) > max_dfa_states:
                        raise BuildLimitError(
                            f"regex {shown()[:200]!r} needs more than {max_dfa_states:,} "
                            "DFA states before minimisation", reached=len(kernels))
                steps[key] = target
            if target:
                segment_state.append(state)
                segment_lo.append(lo)
                segment_hi.append(hi)
                segment_target.append(target)
        state += 1

    limits.check_memory(len(kernels) * 256 * 4 * 2, lambda: f"the table of regex {shown()[:100]!r}")
    finals = np.array([final in kernel for kernel in kernels], dtype=bool)
    num_states = len(kernels)
    limits.check()
    # What follows is linear in the states, and on 300,000 of them (a 300,000-character
    # literal) it was one stretch of 0.1 s without a deadline check, 0.7-0.8 s on a loaded
    # machine (a time limit fired that late): the sets are dropped and the table filled a
    # chunk at a time, the deadline checked between chunks.
    ids.clear()   # its sets are the kernels', freed below
    limits.check()
    steps.clear()
    release_checked(closures, kernels)
    transitions = np.zeros((num_states, 256), dtype=STATE_DTYPE)
    cells = transitions.ravel()
    # a chunk of segments touches at most as many rows of the table: 4 MB of its pages
    # (numpy asks for huge pages: a fault that waits for the kernel to compact memory
    # took ~5 ms a 2 MB page on the shared machine, 85 ms a chunk of 16 MB)
    for at in range(0, len(segment_state), _FILL_CHUNK):
        limits.check()
        stop = at + _FILL_CHUNK
        lo = np.array(segment_lo[at:stop], dtype=np.int64)
        lengths = np.array(segment_hi[at:stop], dtype=np.int64) - lo + 1
        starts = np.array(segment_state[at:stop], dtype=np.int64) * 256 + lo
        before = np.cumsum(lengths) - lengths
        flat = np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))
        cells[flat] = np.repeat(np.array(segment_target[at:stop], dtype=STATE_DTYPE), lengths)
    release_checked(segment_state, segment_lo, segment_hi, segment_target)
    return transitions, finals


_FILL_CHUNK = 1 << 12
# a message shows this many characters of a pattern at most
_SHOWN_HEAD = 200
_RELEASE_CHUNK = 1 << 14
_WIDE_STEP = 1 << 12


def _parts(states):
    """``states`` (a set or tuple) in lists of ``_WIDE_STEP``, the deadline checked before each."""
    ordered = list(states)
    for at in range(0, len(ordered), _WIDE_STEP):
        limits.check()
        yield ordered[at:at + _WIDE_STEP]


def release_checked(*containers) -> None:
    """Empty each list in ``containers`` from its end, a chunk at a time, with
    the deadline checked between chunks: freeing a construction's 300,000
    sets is one call of ~40 ms (several times that on a loaded machine) when
    its last reference goes, and nothing checks the deadline inside it."""
    for container in containers:
        while container:
            del container[-_RELEASE_CHUNK:]
            limits.check()


def cut_ranges(by_range: dict[tuple[int, int], list[int]]):
    """``(lo, hi, targets)`` pieces of the byte line from possibly overlapping
    ranges: each piece lies inside the same ranges from end to end, and its
    targets are theirs together (what the subset construction steps on)."""
    keys = sorted(by_range)
    if all(keys[i][0] > keys[i - 1][1] for i in range(1, len(keys))):
        return [(lo, hi, by_range[lo, hi]) for lo, hi in keys]
    cuts = sorted({lo for lo, _ in keys} | {hi + 1 for _, hi in keys})
    position = {cut: i for i, cut in enumerate(cuts)}
    pieces: list[list[int]] = [[] for _ in cuts]
    for (lo, hi), targets in by_range.items():
        for i in range(position[lo], position[hi + 1]):
            pieces[i].extend(targets)
    return [(cuts[i], cuts[i + 1] - 1, pieces[i]) for i in range(len(cuts) - 1) if pieces[i]]
