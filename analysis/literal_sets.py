"""Finite sets of strings as minimal acyclic automata, built straight from the strings.

An ``enum`` of 60,000 codes, the property names of an object, an
alternation of plain words in a regex: each is a finite set of strings, and
its minimal DFA is a trie whose equal subtrees are merged. Going through
the regex machinery instead (regex text, Python's parser, a Thompson NFA,
the subset construction, minimisation) costs microseconds a character at
every step; here the strings become the minimal automaton directly, with
array operations (Revuz 1992, "Minimisation of acyclic deterministic
automata in linear time", the same automaton as the incremental
construction of Daciuk, Mihov, Watson and Watson 2000 from sorted input):

1. the strings are encoded (UTF-8, :mod:`tokendfa.analysis.utf8`'s rule:
   a lone surrogate, which no UTF-8 text holds, is refused with
   :class:`~tokendfa.analysis.errors.RegexError`; a caller for whom such a
   member simply matches nothing, as in a regex, drops it first), sorted
   and made unique;
2. the trie's nodes are the distinct prefixes: string ``i`` adds one node
   for each byte after its longest common prefix with string ``i - 1``;
3. a node's *height* is the length of the longest path below it. Two
   nodes can only be equivalent at one height, so the classes are found
   height by height, lowest first: a node's signature is whether it is
   final and its (byte, class of child) pairs, all known already, and
   equal signatures (one ``numpy.unique`` per height and number of
   children) are one state.

A small set (a few thousand bytes) is built one string at a time instead,
the incremental construction itself (:func:`_incremental`), where the
arrays' fixed cost would be most of the work.

The result, :class:`LiteralDFA`, has state 0 initial, every edge going to a
higher-numbered state, one final state without edges (the last one), and
consecutive bytes with the same target merged into byte ranges, as arrays
(CSR). Its uses:

* :func:`stamp_literal_dfa` copies it into a Thompson NFA's tables (what
  both the eager and the lazy constructions of
  :mod:`tokendfa.analysis.regex_compiler` and :mod:`tokendfa.analysis.lazydfa`
  hold), at one NFA state per DFA state but the initial one;
* :meth:`LiteralDFA.template` is the ``(edges, finals)`` form of a shared
  definition's automaton in the eager compiler;
* :meth:`LiteralDFA.byte_dfa` is the canonical
  :class:`~tokendfa.analysis.dfa.ByteDFA` (a breadth-first numbering: it is
  minimal already), :meth:`LiteralDFA.table` the complete table before that.

:class:`~tokendfa.analysis.regex_tree.LiteralSet` is how a regex tree
holds a set (a JSON Schema ``enum`` of many strings); both compilers also
build an alternation of many plain literals in a regex this way.

Example::

    >>> dfa = minimal_literal_dfa(["tap", "taps", "top", "tops"])
    >>> dfa.num_states, dfa.accepts(b"tops"), dfa.accepts(b"tp")
    (5, True, False)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from . import limits
from .dfa import INITIAL, STATE_DTYPE, ByteDFA
from .graph import breadth_first
from .errors import RegexError

__all__ = ["LiteralDFA", "PrefixTrie", "minimal_literal_dfa", "encode_literals", "prefix_trie",
           "stamp_literal_dfa"]

# Bytes the construction holds per input byte at its peak, estimated: a trie
# node's parent, label, depth, height, class and edge index as int64, and the
# sorts' copies. Checked against the memory budget before it starts.
_BYTES_PER_INPUT_BYTE = 120
# Bytes and rows of the padded matrix of one step of the common-prefix computation.
_LCP_CELLS = 1 << 22
_LCP_ROWS = 1 << 13
# Sets of at most this many bytes are built one string at a time in Python
# (_incremental): the arrays' fixed cost (a few numpy calls a height) is more
# there. Measured on random lowercase words: 300 bytes 0.19 ms in Python, 0.75 ms
# with arrays; 1,271 bytes 0.73 / 1.6 ms; 3,248 bytes 2.5 / 2.2 ms; 6,402 4.3 / 3.3 ms.
_SMALL_SET_BYTES = 3_000


class LiteralDFA(NamedTuple):
    """The minimal DFA of a finite set of byte strings, edges as byte ranges.

    State 0 is initial. The edges of state ``q`` are ``lo[k], hi[k],
    target[k]`` for ``k`` in ``starts[q]:starts[q + 1]``, in increasing byte
    order and disjoint; every target is greater than its source. ``finals``
    is ``bool[num_states]``. The set is empty when ``num_states`` is 0.
    """

    starts: np.ndarray   # int64[num_states + 1]
    lo: np.ndarray       # int64[num_edges]
    hi: np.ndarray       # int64[num_edges]
    target: np.ndarray   # int64[num_edges]
    finals: np.ndarray   # bool[num_states]

    @property
    def num_states(self) -> int:
        return len(self.finals)

    def accepts(self, data: bytes) -> bool:
        if not self.num_states:
            return False
        state = 0
        for byte in data:
            edges = range(int(self.starts[state]), int(self.starts[state + 1]))
            for k in edges:
                if self.lo[k] <= byte <= self.hi[k]:
                    state = int(self.target[k])
                    break
            else:
                return False
        return bool(self.finals[state])

    def edge_rows(self, offset: int = 0) -> list[tuple[tuple[int, int, int], ...]]:
        """``rows[q]``: state ``q``'s ``(lo, hi, target + offset)`` edges, the
        rows of a Thompson NFA's ``edges`` table."""
        triples = list(zip(self.lo.tolist(), self.hi.tolist(), (self.target + offset).tolist()))
        bounds = self.starts.tolist()
        return [tuple(triples[a:b]) for a, b in zip(bounds, bounds[1:])]

    def template(self) -> tuple[tuple, tuple[int, ...]]:
        """``(edges, finals)`` over local states, state 0 initial: the form of
        a shared definition's minimal DFA in the regex compiler."""
        return tuple(self.edge_rows()), tuple(np.flatnonzero(self.finals).tolist())

    def byte_dfa(self, pattern: str = "") -> ByteDFA:
        """The canonical :class:`ByteDFA` (what
        :func:`~tokendfa.analysis.minimise.canonical_byte_dfa` makes of
        :meth:`table`): the automaton is minimal and every state live already,
        so only the breadth-first numbering is left to do (60,000 enum values,
        97k states: ~0.2 s against 2.4 s through the minimisation)."""
        n = self.num_states
        limits.check_memory((n + 1) * 256 * 4, "the table of a literal set")
        number = np.zeros(n, dtype=np.int64)
        if n:
            order = breadth_first(self.starts, self.target, np.array([0]))
            number[order] = INITIAL + np.arange(len(order))
        transitions = np.zeros((n + 1, 256), dtype=STATE_DTYPE)
        if len(self.lo):
            lengths = self.hi - self.lo + 1
            sources = number[np.repeat(np.arange(n, dtype=np.int64), np.diff(self.starts))]
            cells = np.repeat(sources * 256 + self.lo, lengths)
            cells += np.arange(len(cells)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            transitions.ravel()[cells] = np.repeat(number[self.target], lengths)
        finals = np.zeros(n + 1, dtype=bool)
        finals[number] = self.finals
        finals[0] = False
        transitions.flags.writeable = False
        finals.flags.writeable = False
        return ByteDFA(transitions, finals, pattern)

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """The complete byte table: ``int32[num_states + 1, 256]`` with the
        dead state 0 and state ``q`` as ``q + 1`` (so 1 is initial), and
        ``bool[num_states + 1]`` finals."""
        n = self.num_states
        limits.check_memory((n + 1) * 256 * 4, "the table of a literal set")
        transitions = np.zeros((n + 1, 256), dtype=STATE_DTYPE)
        if len(self.lo):
            lengths = self.hi - self.lo + 1
            sources = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.starts))
            cells = np.repeat((sources + 1) * 256 + self.lo, lengths)
            cells += np.arange(len(cells)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            transitions.ravel()[cells] = np.repeat(self.target + 1, lengths)
        finals = np.zeros(n + 1, dtype=bool)
        finals[1:] = self.finals
        return transitions, finals


def encode_literals(strings: Iterable[str | bytes]) -> list[bytes]:
    """The members as UTF-8 bytes; :class:`RegexError` for a lone surrogate."""
    strings = list(strings)
    try:
        return [member.encode("utf-8") for member in strings]  # text, the common case
    except (AttributeError, UnicodeEncodeError):
        pass  # bytes among them, or a lone surrogate (found and named below)
    try:
        return [member.encode("utf-8") if isinstance(member, str) else bytes(member)
                for member in strings]
    except UnicodeEncodeError:
        pass  # a lone surrogate: found and named below
    encoded = []
    for member in strings:
        if isinstance(member, str):
            try:
                member = member.encode("utf-8")
            except UnicodeEncodeError:
                raise RegexError(f"the literal {member[:100]!r} holds a lone surrogate, "
                                 "which no UTF-8 text can contain") from None
        encoded.append(bytes(member))
    return encoded


def minimal_literal_dfa(strings: Iterable[str | bytes]) -> LiteralDFA:
    """The minimal DFA accepting exactly ``strings`` (text is UTF-8 encoded;
    duplicates and order do not matter)."""
    data = encode_literals(strings)
    if not all(map(bytes.__lt__, data, itertools.islice(data, 1, None))):
        # not given sorted and distinct (a LiteralSet's members are, and UTF-8
        # keeps code point order): sorting 60,000 codes here took ~25 ms
        data = sorted(set(data))
    limits.check()
    n = len(data)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return LiteralDFA(np.zeros(1, dtype=np.int64), empty, empty, empty, np.zeros(0, dtype=bool))
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    total = int(lengths.sum())
    if total <= _SMALL_SET_BYTES:
        return _incremental(data)
    limits.check_memory((total + n) * _BYTES_PER_INPUT_BYTE,
                        f"the automaton of {n:,} literals ({total:,} bytes)")
    trie = prefix_trie(data, lengths)
    parent, label, depth, by_depth = trie.parent, trie.label, trie.depth, trie.by_depth
    num_nodes = len(parent)
    final = np.zeros(num_nodes, dtype=bool)
    final[trie.end] = True
    limits.check()

    # --- heights, deepest nodes first (a child is one level below its parent) ---
    height = np.zeros(num_nodes, dtype=np.int64)
    level_ends = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    for d in range(int(depth.max()), 0, -1):
        nodes = by_depth[level_ends[d]:level_ends[d + 1]]
        np.maximum.at(height, parent[nodes], height[nodes] + 1)
        if d & 63 == 0:
            limits.check()

    # --- classes, lowest height first; a node's edges are its children in byte order ---
    children = np.argsort(parent[1:].astype(np.int32), kind="stable") + 1   # nodes were added in byte order
    degree = np.bincount(parent[1:], minlength=num_nodes)
    edge_start = np.cumsum(degree) - degree
    cls = np.full(num_nodes, -1, dtype=np.int64)
    by_height = np.argsort(_small(height), kind="stable")
    height_ends = np.searchsorted(height[by_height], np.arange(int(height.max()) + 2))
    classes = 0
    representative: list[np.ndarray] = []
    for h in range(int(height.max()) + 1):
        limits.check()
        nodes = by_height[height_ends[h]:height_ends[h + 1]]
        node_degree = degree[nodes]
        for deg in np.unique(node_degree).tolist():
            group = nodes[node_degree == deg]
            if deg == 0:
                member, inverse = _unique_keys(final[group].astype(np.int64))
            elif deg == 1:
                child = children[edge_start[group]]
                member, inverse = _unique_keys((cls[child] << 9) | (label[child] << 1) | final[group])
            else:
                child = children[edge_start[group][:, None] + np.arange(deg)]
                rows = np.concatenate([final[group][:, None], label[child], cls[child]], axis=1)
                member, inverse = _unique_rows(rows)
            cls[group] = classes + inverse
            representative.append(group[member])
            classes += len(member)

    # --- the automaton: class c is state classes - 1 - c (the root, highest, is 0) ---
    reps = np.concatenate(representative)[::-1]          # reps[s]: a node of state s
    state_of = classes - 1 - cls
    rep_degree = degree[reps]
    starts_nodes = np.zeros(classes + 1, dtype=np.int64)
    np.cumsum(rep_degree, out=starts_nodes[1:])
    edge_nodes = children[np.repeat(edge_start[reps], rep_degree)
                          + np.arange(int(rep_degree.sum())) - np.repeat(starts_nodes[:-1], rep_degree)]
    source = np.repeat(np.arange(classes, dtype=np.int64), rep_degree)
    byte = label[edge_nodes]
    target = state_of[edge_nodes]
    # consecutive bytes of one state with one target are one range
    begins = np.ones(len(byte), dtype=bool)
    begins[1:] = (source[1:] != source[:-1]) | (byte[1:] != byte[:-1] + 1) | (target[1:] != target[:-1])
    at = np.flatnonzero(begins)
    ends = np.append(at[1:], len(byte)) - 1 if len(at) else at
    starts = np.zeros(classes + 1, dtype=np.int64)
    np.cumsum(np.bincount(source[at], minlength=classes), out=starts[1:])
    return LiteralDFA(starts, byte[at], byte[ends], target[at], final[reps])


class PrefixTrie(NamedTuple):
    """The trie of sorted byte strings: its nodes are their distinct
    prefixes, numbered in sorted (pre-)order, the root (the empty prefix) 0."""

    parent: np.ndarray    # int64[num_nodes]: the node one byte shorter (the root's is 0)
    label: np.ndarray     # int64[num_nodes]: the node's last byte (the root's is 0)
    depth: np.ndarray     # int64[num_nodes]: the prefix's length
    by_depth: np.ndarray  # int64[num_nodes]: the nodes by depth, then by id
    end: np.ndarray       # int64[num_strings]: the node each string spells


def prefix_trie(data: list[bytes], lengths: np.ndarray | None = None) -> PrefixTrie:
    """The :class:`PrefixTrie` of ``data``, byte strings in sorted order
    (repeats allowed: they end at one node), built with array operations:
    string ``i`` adds one node for each byte after its longest common prefix
    with string ``i - 1``."""
    n = len(data)
    if lengths is None:
        lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    total = int(lengths.sum())
    buffer = np.frombuffer(b"".join(data), dtype=np.uint8).astype(np.int64) if total else \
        np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    lcp = _common_prefixes(data, lengths)
    added = lengths - lcp
    first = 1 + np.cumsum(added) - added          # the first node string i adds
    num_nodes = 1 + int(added.sum())
    owner = np.repeat(np.arange(n, dtype=np.int64), added)
    k = np.arange(num_nodes - 1, dtype=np.int64) - np.repeat(first - 1, added)  # 0.. within the string
    depth = np.zeros(num_nodes, dtype=np.int64)
    depth[1:] = lcp[owner] + 1 + k
    by_depth = np.argsort(_small(depth), kind="stable")  # by depth, then by id
    # String i's nodes hang from its prefix of lcp[i] bytes: the node at that depth
    # added last before string i's own (a later one at that depth would have
    # come from a string between, which shares the prefix: it would be the same node).
    keys = depth[by_depth] * num_nodes + by_depth
    anchors = by_depth[np.searchsorted(keys, lcp * num_nodes + first) - 1]
    label = np.zeros(num_nodes, dtype=np.int64)
    label[1:] = buffer[offsets[owner] + depth[1:] - 1]
    parent = np.zeros(num_nodes, dtype=np.int64)
    parent[1:] = np.where(k == 0, anchors[owner],
                          np.arange(num_nodes - 1, dtype=np.int64))
    end = np.where(added > 0, first + added - 1, anchors)  # anchors: a string that added nothing
    return PrefixTrie(parent, label, depth, by_depth, end)


def _incremental(data: list[bytes]) -> LiteralDFA:
    """:func:`minimal_literal_dfa` of sorted distinct strings, one at a time
    (Daciuk et al. 2000): a string's states after its common prefix with the
    previous string are added as a chain, and the previous string's states
    past that prefix, which no later string can extend, are replaced by an
    equal registered state (same finality, same edges) or registered."""
    edges: list[list[tuple[int, int]]] = [[]]   # (byte, target) in byte order
    final = [False]
    register: dict[tuple, int] = {}
    path = [0]  # the states along the previous string

    def settle(depth: int) -> None:
        for i in range(len(path) - 1, depth, -1):
            state = path[i]
            key = (final[state], tuple(edges[state]))
            known = register.setdefault(key, state)
            if known != state:
                parent_edges = edges[path[i - 1]]
                parent_edges[-1] = (parent_edges[-1][0], known)
        del path[depth + 1:]

    previous = b""
    for string in data:
        common = 0
        for a, b in zip(previous, string):
            if a != b:
                break
            common += 1
        if len(path) > common + 1:
            settle(common)
        added = len(string) - common
        if added:  # the chain of the string's last bytes, made at once
            first = len(edges)
            suffix = string[common:]
            edges[path[-1]].append((suffix[0], first))
            edges.extend([[(byte, state)] for byte, state in zip(suffix[1:], range(first + 1, first + added))])
            edges.append([])
            final.extend([False] * added)
            path.extend(range(first, first + added))
        final[path[-1]] = True
        previous = string
    settle(0)
    # number the states in reverse post-order from the root: edges go forward, and
    # the final state without edges, the first finished, comes last
    order: list[int] = []
    seen = {0}
    stack = [(0, iter(edges[0]))]
    while stack:
        state, pending = stack[-1]
        for _, target in pending:
            if target not in seen:
                seen.add(target)
                stack.append((target, iter(edges[target])))
                break
        else:
            order.append(state)
            stack.pop()
    order.reverse()
    number = {state: i for i, state in enumerate(order)}
    starts, lo, hi, target = [0], [], [], []
    for state in order:
        for byte, to in edges[state]:
            to = number[to]
            if len(lo) > starts[-1] and hi[-1] == byte - 1 and target[-1] == to:
                hi[-1] = byte
            else:
                lo.append(byte)
                hi.append(byte)
                target.append(to)
        starts.append(len(lo))
    return LiteralDFA(np.array(starts, dtype=np.int64), np.array(lo, dtype=np.int64),
                      np.array(hi, dtype=np.int64), np.array(target, dtype=np.int64),
                      np.array([final[state] for state in order], dtype=bool))


# The classes of one height: ``member[c]``, a node of class ``c`` (any one:
# equivalent nodes have the same edges and finality, so each makes the same
# state), and ``inverse[i]``, the class of node ``i``; the classes are numbered
# in increasing order of their keys, as np.unique numbers its values. These
# two took the classes of a 60,000-string set from 72 to ~40 ms (CPU): numpy's
# unique sorts rows as structured values, and with return_index by mergesort.

def _unique_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The classes of nodes keyed by one integer each."""
    order = np.argsort(keys)  # not stable: any member will do
    ordered = keys[order]
    new = np.ones(len(keys), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The classes of nodes keyed by a row each, in lexicographic order
    (one stable sort a column)."""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _small(values: np.ndarray) -> np.ndarray:
    """``values`` (>= 0) as 16-bit integers when they fit: numpy sorts those
    stably by radix, in linear time."""
    return values.astype(np.uint16) if int(values.max(initial=0)) < 1 << 16 else values


def _common_prefixes(data: list[bytes], lengths: np.ndarray) -> np.ndarray:
    """``lcp[i]``: the longest common prefix of ``data[i - 1]`` and ``data[i]`` (0 for i = 0)."""
    n = len(data)
    lcp = np.zeros(n, dtype=np.int64)
    i = 1
    while i < n:
        limits.check()
        # rows i-1 .. stop-1, padded to the longest of them, at most _LCP_CELLS bytes
        count = _LCP_ROWS
        while True:
            stop = min(n, i + count)
            width = max(1, int(lengths[i - 1:stop].max()))
            if count == 1 or (stop - i + 1) * width <= _LCP_CELLS:
                break
            count //= 2
        rows = np.frombuffer(b"".join(s.ljust(width, b"\0") for s in data[i - 1:stop]),
                             dtype=np.uint8).reshape(-1, width)
        differ = rows[1:] != rows[:-1]
        mismatch = np.where(differ.any(axis=1), differ.argmax(axis=1), width)
        lcp[i:stop] = np.minimum(mismatch, np.minimum(lengths[i - 1:stop - 1], lengths[i:stop]))
        i = stop
    return lcp


def stamp_literal_dfa(dfa: LiteralDFA, eps: list, edges: list, source: int) -> int:
    """Copy ``dfa`` into a Thompson NFA's tables after ``source``; returns its end.

    ``eps[q]`` and ``edges[q]`` are the epsilon successors and ``(lo, hi,
    target)`` edges of NFA state ``q``; the copy keeps the construction's
    invariants (see :class:`tokendfa.analysis.regex_compiler`'s builder):
    ``source`` only gains outgoing moves (the initial state has no incoming
    edges in an acyclic DFA, so its edges go on ``source`` itself), and the
    returned end has no outgoing moves (it is the final state without
    edges). The caller reserves ``dfa.num_states`` states first. An empty set
    gives a fresh state nothing reaches.
    """
    n = dfa.num_states
    base = len(eps) - 1  # state q > 0 of the DFA is NFA state base + q
    if n == 0:
        eps.append([])
        edges.append([])
        return len(eps) - 1
    rows = dfa.edge_rows(base)
    finals = np.flatnonzero(dfa.finals).tolist()
    edges[source].extend(rows[0])
    if n == 1:
        return source  # the set of the empty string
    eps.extend([] for _ in range(n - 1))
    edges.extend(rows[1:])
    end = base + n - 1
    # the last state is the final state without edges; other finals reach it by epsilon
    edges[end] = []
    for state in finals:
        if state != n - 1:
            eps[base + state if state else source].append(end)
    return end
