"""Regexes as typed trees: what the automaton builders take, and what the schema compiler writes.

A regex here is a small immutable tree (:class:`Node`): a character set as
code-point ranges (:class:`Chars`), a literal string (:class:`Text`), a
concatenation (:class:`Concat`), an alternation (:class:`Alt`), a bounded or
unbounded repeat (:class:`Repeat`) and a call of a shared definition
(:class:`Call`, by a key the caller's definitions map to their trees) and a
finite set of literal strings (:class:`LiteralSet`, which the builders make
as its minimal acyclic automaton, :mod:`tokendfa.analysis.literal_sets`,
not as branches). Nodes
are hashable and compare by structure; each computes its hash and its
:attr:`Node.size` (about the characters its regex text would take) once, when
it is made, since trees are compared, deduplicated and used as cache keys.

Make nodes with the functions, not the classes: :func:`chars`, :func:`text`,
:func:`concat`, :func:`alt`, :func:`repeat`, :func:`optional`, :func:`call`
and :func:`literal_set` normalise as they go (nested concatenations and
alternations flattened, adjacent texts joined, duplicate branches dropped,
``(X{a,b}){c,d}`` of one character set counted as one repeat when the counts
have no gap), so two spellings of one construction give one tree. The
constants :data:`EMPTY` (the empty string) and :data:`NOTHING` (no string)
close the algebra.

Text meets trees at two places only:

* :func:`to_regex` renders a tree in our dialect (Python ``re`` syntax under
  ``re.ASCII``, matched against the whole text), for users who want a regex;
* :func:`parse_regex` reads a regex in that dialect (anchors at the very
  ends allowed, ``(?i)`` folding ASCII letters only, ``(?s)``, and the same
  refusals and error classes as :mod:`tokendfa.analysis.regex_syntax`) into
  a tree, once per distinct text: the trees live in a bounded process-wide
  cache (:data:`PARSE_CACHE_ENTRIES` texts, :data:`PARSE_CACHE_CHARACTERS`
  characters of text at most), so a user's ``pattern`` seen again costs a
  dictionary lookup, not Python's parser (~1 us a character).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import NamedTuple

from . import limits
from .errors import RegexError, UnsupportedRegexError
from .literal_sets import LiteralDFA, minimal_literal_dfa
from .native import native_module
from .regex_syntax import (ASCII_SPACE, EVERYTHING, class_escapes, normalize_and_parse, parse_tree,
                           regex_char, set_ranges, sre as _sre)
from .utf8 import MAX_CODEPOINT, SURROGATES, CodepointRange, merge_ranges

__all__ = ["Node", "Chars", "Text", "Concat", "Alt", "Repeat", "Call", "LiteralSet", "Excluding", "EMPTY", "NOTHING",
           "chars", "char", "text", "concat", "alt", "repeat", "optional", "call", "literal_set",
           "literal_members", "ranges_minus",
           "to_regex", "parse_regex", "calls_in", "PARSE_CACHE_ENTRIES", "PARSE_CACHE_CHARACTERS",
           "InternMark", "intern_mark", "release_interned_since", "surely_matches"]


_NO_CALLS: frozenset = frozenset()


# The compiled base of Node (_thompson.NodeBase): the _hash slot, and a
# tp_hash that returns it without a Python call (~60 ns a node; a median
# MaskBench schema's tree hashes ~230). None: the Python twin below.
_NodeBase = getattr(native_module(__package__ + "._thompson"), "NodeBase", None)


class Node(_NodeBase or object):
    """A regex tree node: immutable, hashable, compared by structure.

    Nodes are interned (hash-consed): making a node equal to one that
    exists returns that one, so structural equality is identity and
    comparing two large trees costs nothing (deduplicating the branches of
    an alternation, looking a piece up among the shared ones). ``size`` is
    about the characters of its regex text, ``calls`` the keys of the
    definitions it calls; both computed once, when it is made, as is its
    hash (``_hash``)."""

    __slots__ = ("size", "calls") if _NodeBase is not None else ("_hash", "size", "calls")

    def _args(self) -> tuple:
        raise NotImplementedError

    if _NodeBase is not None:
        __hash__ = _NodeBase.__hash__   # the compiled slot itself, not a Python call
    else:
        def __hash__(self) -> int:
            return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (other.__class__ is self.__class__ and other._hash == self._hash
                                 and other._args() == self._args())

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __reduce__(self):
        return (self.__class__, self._args())

    def __add__(self, other):
        """``a + b`` is :func:`concat` of the two trees."""
        if isinstance(other, Node):
            return concat(self, other)
        return NotImplemented

    def __repr__(self) -> str:
        shown = to_regex(self, placeholders=False)
        if len(shown) > 120:
            shown = shown[:120] + "..."
        return f"<{type(self).__name__} {shown!r}>"

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")


# Nodes made, by their class and fields (children are interned already, so a
# key compares by identity below the first level): a tuple of a class's tag
# and its fields, but a Text's key is its text and a Concat's its items. Strong references, and the
# table is emptied past INTERN_LIMIT entries: weak references with callbacks
# made a node cost 3x more (keys_except of 15 names: 4.4 ms, against 0.3 ms
# for its regex text), most of it in the cyclic collector. After a purge an
# older node and a newer equal one are two objects, which __eq__ still finds
# equal by their fields.
INTERN_LIMIT = 1 << 20
_INTERNED: dict = {}
_purges = [0]   # times the table was emptied (an intern_mark() older than that is void)
_set = object.__setattr__
_new_node = (_NodeBase or object).__new__   # object.__new__ refuses a subclass of a compiled base


def _purge() -> None:
    _INTERNED.clear()
    _purges[0] += 1


# A node, its key and its tuple field are taken off the cyclic collector's
# lists when they are made (the compiled core's untrack_node; without it the
# collector walks them): immutable, made after what they hold, never in a
# cycle. A schema's trees were ~90% of the tracked objects a lazy index left
# alive after MaskBench's walk (sp_0: 12,700 of 13,900), and each full
# collection walked them all.
_untrack = getattr(native_module(__package__ + "._lazycore"), "untrack_node", None)


def _keep(key, node: "Node", fields: "tuple | None" = None) -> None:
    if len(_INTERNED) >= INTERN_LIMIT:
        _purge()
    _INTERNED[key] = node
    if _untrack is not None:
        _untrack(node, key if key.__class__ is tuple else (), fields, node.calls)


class InternMark(NamedTuple):
    """Where the table of interned nodes stood (:func:`intern_mark`)."""

    purges: int
    size: int


def intern_mark() -> InternMark:
    """The table of interned nodes now, for :func:`release_interned_since`."""
    return InternMark(_purges[0], len(_INTERNED))


def release_interned_since(mark: InternMark) -> list:
    """Take the nodes interned since ``mark`` out of the table and return them
    (``(key, node)`` pairs, still alive: the caller chooses where they are freed).

    For a stopped compilation: its nodes, made with the cyclic collector off,
    stay young while the table holds them, and the first collection after it
    walked them all (~100,000 nodes, ~330,000 objects with their tuples: ~0.3 s
    past the deadline of the corpus's allOf of 12 anyOfs). Entries are taken
    newest first (a dict's insertion order), so those of another thread in the
    meantime may go too: harmless, a node made again is equal to the old one
    (``__eq__`` compares fields), only a new object."""
    if mark.purges != _purges[0]:
        count = len(_INTERNED)
    else:
        count = max(len(_INTERNED) - mark.size, 0)
    taken = []
    pop = _INTERNED.popitem
    try:
        for _ in range(count):
            taken.append(pop())
    except KeyError:   # emptied meanwhile (another thread's purge)
        pass
    return taken


class Chars(Node):
    """One character from ``ranges`` (sorted, disjoint, inclusive code-point ranges)."""

    __slots__ = ("ranges",)

    def __new__(cls, ranges: tuple[CodepointRange, ...]):
        key = (1, ranges)
        self = _INTERNED.get(key)
        if self is None:
            self = _new_node(cls)
            _set(self, "ranges", ranges)
            _set(self, "calls", _NO_CALLS)
            _set(self, "size", 1 if len(ranges) == 1 and ranges[0][0] == ranges[0][1]
                 else 2 + 3 * len(ranges))
            _set(self, "_hash", hash(key))
            _keep(key, self, ranges)
        return self

    def _args(self) -> tuple:
        return (self.ranges,)


class Text(Node):
    """The literal string ``text`` (not empty)."""

    __slots__ = ("text",)

    def __new__(cls, value: str):
        # The text is its own key (no other node's is a str), and a Concat's its
        # items (the one other key of nodes alone, Alt's, is tagged): no key tuple
        # kept per node. In a fresh fork of a warm process each kept object lands
        # in a free slot of the parent's pages, and the tuples were a third of
        # the 64-byte blocks a median MaskBench schema kept (~23 of ~67).
        self = _INTERNED.get(value)
        if self is None:
            self = _new_node(cls)
            _set(self, "text", value)
            _set(self, "calls", _NO_CALLS)
            _set(self, "size", len(value))
            _set(self, "_hash", hash(value))
            if len(_INTERNED) >= INTERN_LIMIT:
                _purge()
            _INTERNED[value] = self
            if _untrack is not None:
                _untrack(self, (), None, _NO_CALLS)
        return self

    def _args(self) -> tuple:
        return (self.text,)


class Concat(Node):
    """``items`` one after the other (none: the empty string)."""

    __slots__ = ("items",)

    def __new__(cls, items: tuple[Node, ...]):
        # the items are the key (see Text)
        self = _INTERNED.get(items)
        if self is None:
            # made inline, not through helpers: a schema makes thousands (~3 us each with them)
            self = _new_node(cls)
            calls = _NO_CALLS
            size = 0
            for item in items:
                size += item.size
                if item.calls:
                    calls = item.calls if not calls else calls | item.calls
            _set(self, "items", items)
            _set(self, "calls", calls)
            _set(self, "size", size)
            _set(self, "_hash", hash(items))
            if len(_INTERNED) >= INTERN_LIMIT:
                _purge()
            _INTERNED[items] = self
            if _untrack is not None:
                _untrack(self, items, items, calls)
        return self

    def _args(self) -> tuple:
        return (self.items,)


class Alt(Node):
    """One of ``items`` (at least two, distinct)."""

    __slots__ = ("items",)

    def __new__(cls, items: tuple[Node, ...]):
        key = (4, items)
        self = _INTERNED.get(key)
        if self is None:
            # made inline, not through helpers: a schema makes thousands (~3 us each with them)
            self = _new_node(cls)
            calls = _NO_CALLS
            size = 0
            for item in items:
                size += item.size
                if item.calls:
                    calls = item.calls if not calls else calls | item.calls
            _set(self, "items", items)
            _set(self, "calls", calls)
            _set(self, "size", size + len(items) + 3)
            _set(self, "_hash", hash(key))
            if len(_INTERNED) >= INTERN_LIMIT:
                _purge()
            _INTERNED[key] = self
            if _untrack is not None:
                _untrack(self, key, items, calls)
        return self

    def _args(self) -> tuple:
        return (self.items,)


class Repeat(Node):
    """``body`` ``lo`` to ``hi`` times (``hi`` None: no bound)."""

    __slots__ = ("body", "lo", "hi")

    def __new__(cls, body: Node, lo: int, hi: int | None):
        key = (5, body, lo, hi)
        self = _INTERNED.get(key)
        if self is None:
            self = _new_node(cls)
            _set(self, "body", body)
            _set(self, "calls", body.calls)
            _set(self, "lo", lo)
            _set(self, "hi", hi)
            _set(self, "size", body.size + 4)
            _set(self, "_hash", hash(key))
            # inline, as Concat's: _keep's first run in a fresh fork writes a page of its code
            if len(_INTERNED) >= INTERN_LIMIT:
                _purge()
            _INTERNED[key] = self
            if _untrack is not None:
                _untrack(self, key, None, self.calls)
        return self

    def _args(self) -> tuple:
        return (self.body, self.lo, self.hi)


class Call(Node):
    """The language of the shared definition ``key`` (the builder's definitions map keys to trees)."""

    __slots__ = ("key",)

    def __new__(cls, name):
        key = (6, name)
        self = _INTERNED.get(key)
        if self is None:
            self = _new_node(cls)
            _set(self, "key", name)
            _set(self, "calls", frozenset((name,)))
            _set(self, "size", 1)
            _set(self, "_hash", hash(key))
            _keep(key, self)
        return self

    def _args(self) -> tuple:
        return (self.key,)


class LiteralSet(Node):
    """One of the literal strings ``members`` (sorted, distinct, at least two,
    no lone surrogate), built as their minimal acyclic automaton
    (:meth:`automaton`, made once per node) rather than as branches."""

    __slots__ = ("members", "_automaton")

    def __new__(cls, members: tuple[str, ...]):
        key = (7, members)
        self = _INTERNED.get(key)
        if self is None:
            self = _new_node(cls)
            _set(self, "members", members)
            _set(self, "calls", _NO_CALLS)
            _set(self, "size", sum(map(len, members)) + len(members) + 3)
            _set(self, "_hash", hash(key))
            _set(self, "_automaton", None)  # set later: the node stays tracked
            if len(_INTERNED) >= INTERN_LIMIT:
                _purge()
            _INTERNED[key] = self
        return self

    def _args(self) -> tuple:
        return (self.members,)

    def automaton(self) -> LiteralDFA:
        """The members' minimal DFA (:func:`~.literal_sets.minimal_literal_dfa`), built once."""
        found = self._automaton
        if found is None:
            found = minimal_literal_dfa(self.members)
            _set(self, "_automaton", found)
        return found


# single -> the characters its ranges hold (ASCII, at most 128), for
# Excluding's check that every character of the names is in single: a set's
# issuperset over the names' text, not a comparison with each range of each
# distinct character (that was ~20 us in process for 8 names of 33 distinct
# characters; an object's undeclared keys, made at a definition's first call:
# lazy_enter_parts.py, the schema side's part 27.0 -> 23.2 us a first call)
_UNIT_CHARS: dict = {}


def _unit_chars(single: tuple[CodepointRange, ...]) -> frozenset:
    found = _UNIT_CHARS.get(single)
    if found is None:
        found = frozenset(chr(c) for lo, hi in single for c in range(max(lo, 0), hi + 1))
        if len(_UNIT_CHARS) < 64:
            _UNIT_CHARS[single] = found
    return found


class Excluding(Node):
    """A string that leaves the trie of ``names`` (sorted, distinct) or stops
    short of a name: a path of the trie (any prefix of a name, the empty one
    too), then either one character of ``single`` that no name continues
    with there, or a string of ``multi``, then a string of ``rest``; or a
    proper prefix of a name that is not a name. With ``single`` the
    characters a unit of one byte can be and ``multi`` every other unit,
    ``rest`` any string of units: every string of units but the names (a
    JSON object's undeclared keys, :func:`tokendfa.schema.strings.keys_except`).

    Both builders make it straight from the trie, one NFA state a trie node
    (:meth:`~tokendfa.analysis.regex_compiler.ThompsonNFA.build`): written as
    branches, each trie node made ~4 tree nodes and ~8 NFA states (sp_0's 91
    names: ~4 ms to make the tree, 7,136 NFA states). The caller promises
    that every character of a name is in ``single``, that ``single`` is
    ASCII (one byte a character, checked) and that no string of ``multi``
    begins with a byte of ``single`` (so a string leaves the trie one way
    only). :func:`to_regex` writes the branches out."""

    __slots__ = ("names", "single", "multi", "rest")

    def __new__(cls, names: tuple[str, ...], single: tuple[CodepointRange, ...], multi: Node, rest: Node):
        key = (8, names, single, multi, rest)
        self = _INTERNED.get(key)
        if self is None:
            if any(hi > 0x7F for _, hi in single) or not _unit_chars(single).issuperset("".join(names)):
                raise ValueError("Excluding: single must be ASCII and hold every character of the names")
            self = _new_node(cls)
            _set(self, "names", names)
            _set(self, "single", single)
            _set(self, "multi", multi)
            _set(self, "rest", rest)
            _set(self, "calls", multi.calls | rest.calls)
            # about its text (to_regex writes the branches: ~23 characters a name's character)
            _set(self, "size", 24 * sum(map(len, names)) + len(names) + multi.size + rest.size + 8)
            _set(self, "_hash", hash(key))
            _keep(key, self)
        return self

    def _args(self) -> tuple:
        return (self.names, self.single, self.multi, self.rest)

    def branches(self) -> Node:
        """The same language as a tree of the other kinds (for :func:`to_regex`)."""
        trie: dict = {}
        for name in self.names:
            node = trie
            for ch in name:
                node = node.setdefault(ord(ch), {})
            node[-1] = {}
        single = self.single

        def walk(node: dict) -> tuple[Node, Node | None, Node]:
            """(exits by a character of single, stops short, every path) below ``node``."""
            children = sorted(cp for cp in node if cp >= 0)
            taken = [(cp, cp) for cp in children]
            others = ranges_minus(single, taken)
            exits = [chars(others)] if others else []
            short = [] if -1 in node else [EMPTY]
            paths = [EMPTY]
            for cp in children:
                below_exits, below_short, below_paths = walk(node[cp])
                here = Text(chr(cp))
                exits.append(concat(here, below_exits))
                if below_short is not None:
                    short.append(concat(here, below_short))
                paths.append(concat(here, below_paths))
            return alt(exits), (alt(short) if short else None), alt(paths)

        exits, short, paths = walk(trie)
        left = concat(alt([exits, concat(paths, self.multi)]), self.rest)
        return alt([left] if short is None else [left, short])


def ranges_minus(ranges, taken) -> tuple[CodepointRange, ...]:
    """Sorted disjoint ``ranges`` less the sorted disjoint ``taken``, sorted."""
    out = []
    for lo, hi in ranges:
        for t_lo, t_hi in taken:
            if t_hi < lo or t_lo > hi:
                continue
            if t_lo > lo:
                out.append((lo, t_lo - 1))
            lo = t_hi + 1
            if lo > hi:
                break
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


EMPTY = Concat(())
NOTHING = Chars(())
_BRANCHING = frozenset((Alt, LiteralSet, Excluding))


# --- making nodes ----------------------------------------------------------------

def chars(ranges) -> Node:
    """One character of the code-point ``ranges`` (any order, may overlap)."""
    return Chars(tuple(merge_ranges(list(ranges))))


def char(cp: int) -> Chars:
    return Chars(((cp, cp),))


def text(value: str) -> Node:
    """The literal string ``value`` (EMPTY when it is empty)."""
    return Text(value) if value else EMPTY


def concat(*items: Node) -> Node:
    """``items`` one after the other: nested concatenations flattened, adjacent
    texts joined, empty strings dropped; NOTHING when an item is NOTHING."""
    # No tuple made for an item that is not a concatenation, and a lone text
    # kept without a list: a median MaskBench schema's members, brackets and
    # separators make ~30 concatenations (1.7% of its tree in process).
    flat: list[Node] = []
    pending = None   # the texts since the last other part: a Text, or a list of them
    for item in items:
        cls = item.__class__
        if cls is Text:
            if pending is None:
                pending = item
            elif pending.__class__ is list:
                pending.append(item)
            else:
                pending = [pending, item]
            continue
        if cls is Concat:
            for part in item.items:
                if part.__class__ is Text:
                    if pending is None:
                        pending = part
                    elif pending.__class__ is list:
                        pending.append(part)
                    else:
                        pending = [pending, part]
                    continue
                if part.__class__ is Chars and not part.ranges:
                    return NOTHING
                if pending is not None:
                    flat.append(pending if pending.__class__ is Text else Text("".join([t.text for t in pending])))
                    pending = None
                flat.append(part)
            continue
        if cls is Chars and not item.ranges:
            return NOTHING
        if pending is not None:
            flat.append(pending if pending.__class__ is Text else Text("".join([t.text for t in pending])))
            pending = None
        flat.append(item)
    if pending is not None:
        flat.append(pending if pending.__class__ is Text else Text("".join([t.text for t in pending])))
    if not flat:
        return EMPTY
    if len(flat) == 1:
        return flat[0]
    return Concat(tuple(flat))


def alt(items) -> Node:
    """One of ``items``: nested alternations flattened, duplicates and NOTHING
    dropped (first occurrence kept); NOTHING when none is left."""
    flat: dict[Node, None] = {}
    for item in items:
        if item.__class__ is Alt:
            for part in item.items:
                flat[part] = None
        elif item.__class__ is Chars and not item.ranges:
            continue
        else:
            flat[item] = None
            if len(flat) & 4095 == 0:
                limits.check()   # an enum of 30,000 objects: ~10 ms an alternation
    if not flat:
        return NOTHING
    if len(flat) == 1:
        return next(iter(flat))
    return Alt(tuple(flat))


def repeat(body: Node, lo: int, hi: int | None) -> Node:
    """``body`` ``lo`` to ``hi`` times (None: no bound; ``hi <= 0``: the empty
    string). A repeat of a repeat of one character set is counted as one
    repeat when the counts it allows have no gap (see :func:`_nest_counts`)."""
    if hi is not None and hi <= 0:
        return EMPTY
    if lo < 0:
        lo = 0
    if body is EMPTY or (body.__class__ is Concat and not body.items):
        return EMPTY
    if body.__class__ is Chars and not body.ranges:
        return EMPTY if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return body
    if body.__class__ is Repeat and body.body.__class__ is Chars:
        counts = _nest_counts(lo, hi, body.lo, body.hi)
        if counts is not None:
            return repeat(body.body, *counts)
    return Repeat(body, lo, hi)


def optional(body: Node) -> Node:
    return repeat(body, 0, 1)


def call(key) -> Call:
    return Call(key)


def literal_set(strings) -> Node:
    """One of the literal ``strings``: a :class:`LiteralSet` (built as a
    minimal acyclic automaton) of two or more distinct strings, else the
    one string or NOTHING. A string holding a lone surrogate matches
    nothing (no UTF-8 text holds one) and is left out."""
    members = sorted({s for s in strings if not _HAS_SURROGATE(s)})
    if not members:
        return NOTHING
    if len(members) == 1:
        return text(members[0])
    return LiteralSet(tuple(members))


def literal_members(node: Node) -> list[str] | None:
    """The strings of an alternation whose branches are all plain literals
    (texts, the empty string, single characters), else None; branches that
    hold a lone surrogate match nothing and are left out."""
    members = []
    for item in node.items:
        cls = item.__class__
        if cls is Text:
            value = item.text
        elif cls is Concat and not item.items:
            value = ""
        elif cls is Chars and len(item.ranges) == 1 and item.ranges[0][0] == item.ranges[0][1]:
            value = chr(item.ranges[0][0])
        else:
            return None
        if not _HAS_SURROGATE(value):
            members.append(value)
    return members


_HAS_SURROGATE = re.compile("[\ud800-\udfff]").search


def _nest_counts(outer_low: int, outer_high: int | None,
                 inner_low: int, inner_high: int | None) -> tuple[int, int | None] | None:
    """``(X{a,b}){c,d}`` as ``X{c*a, d*b}`` when X is one character, if the
    counts it allows have no gap; ``None`` otherwise.

    Nested counted repeats are the one shape where the NFA's positions blow up
    the subset construction: ``(?:x{1,3}){1,50}`` has 150 positions, and
    after k characters almost any of them may be current. As a single count
    it is a chain whose subsets have two states. The counts allowed are the
    union of the intervals ``[k*a, k*b]`` for ``k`` from ``c`` to ``d``; the
    union is one interval when each next interval starts at most one past the
    end of the previous one, and the first gap, if any, is between the
    first two intervals, since they get closer as ``k`` grows.
    """
    if outer_high == 0 or inner_high == 0:
        return 0, 0
    if outer_high != outer_low and inner_high is not None:
        if outer_low == 0:
            contiguous = inner_low <= 1
        else:
            contiguous = (outer_low + 1) * inner_low <= outer_low * inner_high + 1
        if not contiguous:
            return None
    low = outer_low * inner_low
    high = None if outer_high is None or inner_high is None else outer_high * inner_high
    if outer_low == 0 and high is None and inner_low > 1:
        return None  # {0} then [a, inf): a gap when a > 1
    return low, high


def surely_matches(tree: Node, call_matches) -> bool:
    """Whether ``tree`` surely matches some string, read off the tree: True
    only when it has a match (through literals, character sets, optional or
    counted parts) whose calls ``call_matches(key)`` says match. False also
    where that is not found here (a set of lone surrogates, which UTF-8
    cannot spell; a tree nested deeper than Python's recursion), which leaves
    the question to the automaton."""
    memo: dict[int, bool] = {}

    def matches(node: Node) -> bool:
        cls = node.__class__
        if cls is Text:
            return not _HAS_SURROGATE(node.text)
        if cls is Chars:
            return any(lo < SURROGATES[0] or hi > SURROGATES[1] for lo, hi in node.ranges)
        if cls is Repeat:
            return node.lo == 0 or matches(node.body)
        if cls is Call:
            return call_matches(node.key)
        if cls is LiteralSet:
            return True  # two strings or more
        if cls is Excluding:
            # the empty string, or a wide unit at the root and then the rest
            return "" not in node.names or (matches(node.multi) and matches(node.rest))
        found = memo.get(id(node))
        if found is None:
            if cls is Concat:
                found = all(matches(item) for item in node.items)
            elif cls is Alt:
                found = any(matches(item) for item in node.items)
            else:
                return False
            memo[id(node)] = found
        return found

    try:
        return matches(tree)
    except RecursionError:
        return False
    finally:
        # matches refers to itself: a cycle that would keep call_matches (and
        # what it refers to: a lazy automaton's NFA) until the cyclic
        # collector runs
        del matches


def calls_in(node: Node) -> frozenset:
    """The keys of the definitions ``node`` calls (kept on the node)."""
    return node.calls


# --- rendering -------------------------------------------------------------------

def to_regex(node: Node, definitions=None, *, placeholders: bool = True, names=None,
             head: int | None = None) -> str:
    """``node`` as regex text in our dialect (Python ``re`` syntax under
    ``re.ASCII``, whole-text match).

    ``head``: for a message, about that many characters of the start of the
    text at least, not the whole (a group cut short is still closed): a
    300,000-character literal took 60-100 ms to write out for the first 200.

    A call renders as its definition in a group when ``definitions`` (key ->
    tree) has it, else as its key when the key is one character (the
    placeholders of :class:`~tokendfa.schema.api.SchemaRegex`, lone
    surrogates) and ``placeholders`` is true, else as ``names[key]`` when
    ``names`` has it, else as ``<key>`` text for a reader (not a regex)."""
    memo: dict[int, str] = {}
    expanded: dict = {}

    def _leading(items):
        """``items``, or with ``head``, those whose text reaches past it (by their sizes)."""
        if head is None:
            return items
        total = 0
        for count, item in enumerate(items, 1):
            total += item.size
            if total >= head:
                return items[:count]
        return items

    def render(current: Node) -> str:
        found = memo.get(id(current))
        if found is not None:
            return found
        cls = current.__class__
        if cls is Text:
            text = current.text if head is None else current.text[:head]
            out = "".join([c if c in _PLAIN_CHARS else regex_char(ord(c), False) for c in text])
        elif cls is Chars:
            out = _render_set(current.ranges)
        elif cls is Concat:
            out = "".join([_group(item, render(item)) if item.__class__ in _BRANCHING else render(item)
                           for item in _leading(current.items)])
        elif cls is Alt:
            out = "|".join([render(item) for item in _leading(current.items)])
        elif cls is LiteralSet:
            out = _render_members(current.members)
        elif cls is Excluding:
            out = render(current.branches())
        elif cls is Repeat:
            body = current.body
            inner = render(body)
            if not _is_atom(body):
                inner = "(?:" + inner + ")"
            out = inner + _quantifier(current.lo, current.hi)
        elif cls is Call:
            key = current.key
            if definitions is not None and key in definitions:
                out = expanded.get(key)
                if out is None:
                    out = expanded[key] = "(?:" + render(definitions[key]) + ")"
            elif names is not None and key in names:
                out = names[key]
            elif placeholders and isinstance(key, str) and len(key) == 1:
                out = key
            else:
                out = f"<{key}>"
        else:
            raise TypeError(f"not a regex tree node: {current!r}")
        memo[id(current)] = out
        return out

    try:
        return render(node)
    except RecursionError:
        raise RegexError("a regex tree nested too deeply to write as text") from None


# printable ASCII that means itself outside a class (and "#", " " mean themselves without (?x))
_PLAIN_CHARS = frozenset(chr(c) for c in range(0x20, 0x7F)) - set("\\.^$*+?{}[]|()")


# what re.escape escapes, the backslash first (so no backslash added is escaped again)
_ESCAPED = "\\" + "".join(sorted(set("()[]{}?*+-|^$.&~# \t\n\r\v\f")))


def _escape(text: str) -> str:
    """``re.escape(text)``, one ``str.replace`` a special character present:
    re.escape's translate takes ~50 ms on a 60,000-value enum's 1 MB, this ~5."""
    for special in _ESCAPED:
        if special in text:
            text = text.replace(special, "\\" + special)
    return text


def _render_members(members: tuple[str, ...]) -> str:
    joined = "\x00".join(members)
    if joined.count("\x00") == len(members) - 1:  # no member holds a NUL
        # one escape of everything (re.escape leaves NUL alone): ~60x faster than per member
        return _escape(joined).replace("\x00", "|")
    return "|".join(map(re.escape, members))


def _group(node: Node, rendered: str) -> str:
    return "(?:" + rendered + ")"


def _is_atom(node: Node) -> bool:
    cls = node.__class__
    if cls is Chars or cls is Call:
        return True
    return cls is Text and len(node.text) == 1


def _quantifier(lo: int, hi: int | None) -> str:
    if hi is None:
        return "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    if lo == 0 and hi == 1:
        return "?"
    return f"{{{lo},{hi}}}"


def _render_set(ranges: tuple[CodepointRange, ...]) -> str:
    if not ranges:
        return r"[^\x00-\U0010ffff]"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return regex_char(ranges[0][0], False)
    if ranges == ((0, MAX_CODEPOINT),):
        return r"[\x00-\U0010ffff]"
    complement = []
    start = 0
    for lo, hi in ranges:
        if lo > start:
            complement.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODEPOINT:
        complement.append((start, MAX_CODEPOINT))
    # surrogates are no characters: a complement that differs only there is as good
    negated = [r for r in complement if not (SURROGATES[0] <= r[0] and r[1] <= SURROGATES[1])]
    if negated and len(negated) < len(ranges):
        return "[^" + _class_items(negated) + "]"
    return "[" + _class_items(ranges) + "]"


def _class_items(ranges) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(regex_char(lo, True))
        elif hi == lo + 1:
            out.append(regex_char(lo, True) + regex_char(hi, True))
        else:
            out.append(regex_char(lo, True) + "-" + regex_char(hi, True))
    return "".join(out)


# --- reading text ----------------------------------------------------------------

# The parse cache's bounds: texts kept, and their characters in all (a schema's
# regex written out can be megabytes; a user's patterns are short).
PARSE_CACHE_ENTRIES = 4096
PARSE_CACHE_CHARACTERS = 16_000_000

_cache: OrderedDict = OrderedDict()
_cache_characters = [0]
_cache_lock = threading.Lock()


def parse_regex(pattern: str, *, calls: bool = False, anchors: bool = True) -> Node:
    """The tree of ``pattern`` (our dialect), from a bounded process-wide cache.

    ``anchors``: a ``^`` at the very start and a ``$`` at the very end are
    allowed and say nothing (whole-text match); false for a text already
    without them (an inner or outer anchor is then refused as any other).
    ``calls``: a lone surrogate (a placeholder of a shared definition) is a
    :class:`Call` of that character, also inside a class, where it is one
    more alternative (and refused in a negated class).

    # Errors

    :class:`RegexError` for invalid syntax or nesting too deep,
    :class:`UnsupportedRegexError` for what no automaton expresses (anchors
    inside, lookarounds, backreferences, possessive repeats, atomic groups,
    ``(?u)``), naming the construct; errors are not cached.
    """
    key = (pattern, calls, anchors)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    if not isinstance(pattern, str):
        raise RegexError(f"a regex must be a str, not {type(pattern).__name__}")
    # One parse of the text where checking it and reading it parsed it twice
    # (Python's parser is ~1 us a character, every new pattern's first build).
    body, parsed = normalize_and_parse(pattern, int(re.ASCII)) if anchors \
        else (pattern, parse_tree(pattern, int(re.ASCII)))
    limits.check()
    try:
        node = _Converter(body, calls).items(parsed, int(parsed.state.flags))
    except RecursionError:
        raise RegexError(f"regex {body[:200]!r} is nested too deeply to compile") from None
    with _cache_lock:
        if key not in _cache:
            _cache[key] = node
            _cache_characters[0] += len(pattern)
            while _cache and (len(_cache) > PARSE_CACHE_ENTRIES
                              or _cache_characters[0] > PARSE_CACHE_CHARACTERS):
                (old, _, _), _ = _cache.popitem(last=False)
                _cache_characters[0] -= len(old)
    return node


def parse_cache_info() -> tuple[int, int]:
    """``(texts, characters)`` held by :func:`parse_regex`'s cache."""
    with _cache_lock:
        return len(_cache), _cache_characters[0]


def clear_parse_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _cache_characters[0] = 0


_LITERAL, _NOT_LITERAL, _ANY, _IN = _sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN
_BRANCH, _SUBPATTERN = _sre.BRANCH, _sre.SUBPATTERN
_MAX_REPEAT, _MIN_REPEAT = _sre.MAX_REPEAT, _sre.MIN_REPEAT
_MAXREPEAT = _sre.MAXREPEAT
_ESCAPES = class_escapes(ASCII_SPACE)
_NOT_NEWLINE: tuple[CodepointRange, ...] = ((0, 0x09), (0x0B, MAX_CODEPOINT))

# Names for the opcodes refused, by the opcode's name (the last two exist from
# Python 3.11 on). normalize_pattern rejects most of them first. A possessive
# repeat is not a greedy one: it never gives back, so "a*+a" matches nothing.
_UNSUPPORTED_OPCODES = {
    "AT": "anchor or word boundary",
    "ASSERT": "lookaround",
    "ASSERT_NOT": "negative lookaround",
    "GROUPREF": "backreference",
    "GROUPREF_EXISTS": "conditional group",
    "ATOMIC_GROUP": "atomic group (?>...)",
    "POSSESSIVE_REPEAT": "possessive repeat (*+, ++, ?+, {n,m}+)",
}


def _is_placeholder(code: int) -> bool:
    return SURROGATES[0] <= code <= SURROGATES[1]


class _Converter:
    """Python's parse tree (under ``re.ASCII``) to a :class:`Node`, flags resolved."""

    def __init__(self, pattern: str, calls: bool) -> None:
        self.pattern = pattern
        self.calls = calls
        self.count = 0

    def items(self, items, flags: int) -> Node:
        items = getattr(items, "data", items)
        parts: list[Node] = []
        run: list[str] = []
        fold = flags & _sre.SRE_FLAG_IGNORECASE
        for op, av in items:
            if op is _LITERAL and not (fold and (0x41 <= av <= 0x5A or 0x61 <= av <= 0x7A)) and not (
                    self.calls and _is_placeholder(av)):
                run.append(chr(av))
                continue
            if run:
                parts.append(Text("".join(run)))
                run = []
            parts.append(self.item(op, av, flags))
        if run:
            parts.append(Text("".join(run)))
        return concat(*parts)

    def item(self, op, av, flags: int) -> Node:
        self.count += 1
        if self.count & 1023 == 0:
            limits.check()
        if op is _LITERAL and self.calls and _is_placeholder(av):
            return Call(chr(av))
        if op is _IN and self.calls and any(o is _LITERAL and _is_placeholder(a) for o, a in av):
            if av and av[0][0] is _sre.NEGATE:
                raise RegexError(f"a shared definition's placeholder in a negated class in {self.pattern!r}")
            rest = [(o, a) for o, a in av if not (o is _LITERAL and _is_placeholder(a))]
            branches = [Call(chr(a)) for o, a in av if o is _LITERAL and _is_placeholder(a)]
            if rest:
                branches.append(Chars(self._ranges(_IN, rest, flags)))
            return alt(branches)
        if op is _LITERAL or op is _NOT_LITERAL or op is _ANY or op is _IN:
            return Chars(self._ranges(op, av, flags))
        if op is _SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags & _sre.SRE_FLAG_UNICODE:
                raise UnsupportedRegexError(
                    f"unsupported regex construct: the Unicode flag (?u:...) in {self.pattern!r} "
                    r"(\d, \w, \s and (?i) are ASCII only here)")
            return self.items(sub, (flags | add_flags) & ~del_flags)
        if op is _BRANCH:
            return alt([self.items(branch, flags) for branch in av[1]])
        if op is _MAX_REPEAT or op is _MIN_REPEAT:
            # Lazy and greedy repeats accept the same whole strings.
            low, high, sub = av
            return repeat(self.items(sub, flags), low, None if high == _MAXREPEAT else high)
        name = _UNSUPPORTED_OPCODES.get(str(op), str(op))
        raise UnsupportedRegexError(f"unsupported regex construct: {name} in {self.pattern!r}")

    @staticmethod
    def _ranges(op, av, flags: int) -> tuple[CodepointRange, ...]:
        return set_ranges(op, av, escapes=_ESCAPES,
                          dot=EVERYTHING if flags & _sre.SRE_FLAG_DOTALL else _NOT_NEWLINE,
                          ignore_case=bool(flags & _sre.SRE_FLAG_IGNORECASE))
