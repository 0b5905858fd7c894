"""The compiler proper: a conjunction of subschemas -> a regex.

:meth:`Compiler.value` is the whole algorithm: absorb every subschema into
one :class:`~.ir.Flat` (:mod:`.keywords`), then split its choices one after
the other (each alternative absorbed into a copy of the flat), pushing each
``not`` down into a choice of its own (:mod:`.negation`), and finally emit
the regex per type: literals and scalars (:mod:`.scalars`), arrays
(:mod:`.arrays`), objects (:mod:`.objects`).

The :class:`Compiler` also holds what one compilation shares: the options
and the :class:`Layout` of whitespace, the widenings and notes so far,
validators for the literal check, and the shared pieces: each value regex is
computed once per (subschemas, recursion counts), a subschema that is a
``$ref`` alone counting as its target (every point that names one
definition is one value), and one of at least
``SHARE_MIN_LENGTH`` characters is written once, as a placeholder
character (see :class:`~tokendfa.schema.api.SchemaRegex`). With
``share_values`` (a lazy index) every value of ``SHARE_VALUE_MIN_LENGTH``
characters or more is a definition, and so are an object's additional
members: an object's regex is its keys and calls of its values, which the
lazy automaton compiles when a match first reaches them. Pieces that always
match something and report nothing (an object's additional keys) are not
even written until then (:meth:`Compiler.deferred_piece`).

Recursion through ``$ref`` is unrolled ``max_recursion_depth`` times; past
that the reference is the empty schema ``false`` (an optional recursive
property is left out, a required one makes that branch impossible). The
generic value of ``{}`` nests arrays and objects ``any_depth`` levels deep
(:meth:`Compiler.any_value`).

**Deferred recursion** (``defer_recursion``, for a lazy index). A value is
keyed by the counts of the references taken to reach it, so mutually
recursive references give a number of distinct values exponential in the
number of references, all written before anything is served. With
``defer_recursion`` a value whose subschemas enter a *recursive*
reference (a ``$ref`` whose target can reach itself through references:
:class:`_References`) is not written: it is a :class:`~tokendfa.analysis.regex_tree.Call`
of a new key at once, and its tree is computed the first time the lazy
automaton calls it (:class:`DeferredDefinitions`, a
:class:`~tokendfa.analysis.lazydfa.DefinitionSource`). Its tree calls the
values it holds, deferred in turn, so the set of definitions grows as
matches reach deeper levels. The language is the same: a deferred value
that no JSON value satisfies is the tree of no string
(:data:`~tokendfa.analysis.regex_tree.NOTHING`), which the automaton finds
empty, where the eager compiler writes the value as ``None`` and drops what
holds it.
Deferred definitions never call themselves, as values never hold
themselves: a value's key is a point of the schema with the counts of its
references, and a value holds values deeper in the schema or reached
through one more reference.
"""

from __future__ import annotations

import functools
import numbers
from collections import Counter
from dataclasses import fields
from typing import Any, NamedTuple

from ..analysis import limits
from ..analysis.errors import RegexTooLongError, TimeLimitError, UnsupportedSchemaError
from ..analysis.utf8 import SURROGATES
from . import numbers as nums
from . import checks
from . import strings as strs
from .arrays import array
from .formats import UndecidedFormat
from .ir import (Choice, Constraint, Flat, Negated, Sub, empty_flat, enter, json_key, local_target,
                 locate_literal, type_key)
from .keywords import KEYWORDS, UNSUPPORTED, absorb, referenced, resolve
from .negation import negate
from .objects import declared, member_subs, object_
from ..analysis.regex_tree import NOTHING, Call, calls_in, chars, concat, literal_set, surely_matches
from .regexes import EMPTY, Node, alternation, counted, lit, optional, repeat
from .scalars import constants, literal, literals, number, string

MAX_CHOICES = 256
# What one branch of a combinator product keeps (its flat, its emitted tree and
# the trees it shares), for the memory budget: tracemalloc measured 4.1-4.4 KB a
# branch on products of 4,096 and 8,192 branches (allOf of 10 and 11 two-way
# anyOfs of `required`). MAX_CHOICES bounds the sum of the branch counts of the
# choices met, not their product, so the product is bounded by the budget.
BRANCH_BYTES = 4096
# A value regex this long, or longer, is written once and referred to by a
# placeholder: one of the 2,048 lone surrogates, which no JSON text holds.
SHARE_MIN_LENGTH = 2_000
# With ``share_counts``, a string length bound at least this large is written
# with a few shared definitions, one per digit (Compiler.counted). Snowplow/sp_0 (36 strings of
# maxLength 1024, one of 65535) would need a 1.4 GiB NFA with each count
# written out; below this bound the written-out repeat costs little.
SHARED_COUNT_MIN = 256
# The digits of such a count: each digit is a level of nested definitions and
# about two configurations in every state of the string. Base 2 (1024: ten
# levels) cost 1.19 ms a token inside a maxLength-1024 string on Qwen.
COUNT_BASE = 16
# With ``share_values`` (a lazy index), a value regex this long, or longer, is
# a definition however short, so that an object's fragment holds its keys and
# calls, and each value is compiled when a match first reaches it.
SHARE_VALUE_MIN_LENGTH = 40
PLACEHOLDER_BASE = SURROGATES[0]
MAX_DEFINITIONS = SURROGATES[1] - SURROGATES[0] + 1
# Placeholders ``share_values`` may take (short values; large ones are shared
# anyway): the rest stay for deferred recursion, which without one writes a
# value where it stands, with the eager compiler's exponential cost.
MAX_VALUE_DEFINITIONS = MAX_DEFINITIONS // 2
# Keywords whose subschemas are read into the same flat as the schema holding them
# (see keywords.absorb): a $ref under them is entered by the value of that schema.
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
             "dependencies")
# Keywords whose values are data, or schemas reached only through a $ref.
_NOT_SCHEMAS = frozenset({"enum", "const", "examples", "default", "$defs", "definitions"})


# JSON whitespace between tokens, in flexible layout
_WHITESPACE = chars([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


# Free values (Compiler.any_value) by options, depth and levels, made once per
# process and the same in every schema: a _FreeValue.
_FREE_VALUES: dict = {}
_FREE_VALUES_KEPT = 512


class _FreeValue(NamedTuple):
    """A free value's tree, the definitions it reaches (key -> tree, in the
    order :meth:`Compiler.used_definitions` gives) and their keys by tree
    (the first key of each tree)."""

    tree: Node
    definitions: dict
    placeholders: dict


def stored_free_value(layout: "Layout", levels: int) -> "_FreeValue | None":
    """The free value of ``levels`` levels at depth 0 that compilations with
    ``layout`` (not pretty), shared pieces and ``share_free_levels`` (a lazy
    index's options) take from the process-wide table, if one was built in
    this process: what :meth:`Compiler.any_value` adopts (for
    :mod:`.direct`)."""
    return _FREE_VALUES.get(("free value", layout.mode, layout.width, layout.indent, True, True,
                             0, levels))


# Scalar leaves (Compiler._typed_leaf): a subschema that says only its type
# (``{"type": "string"}``, annotations beside it) is the same tree in every
# schema compiled with the same options: it is computed once per process,
# the general way, and stamped wherever it stands. Two in five values of
# MaskBench's median schemas are such leaves, and each made a Flat and went
# through absorb, _split and emit.
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})
_LEAVES: dict = {}
_LEAVES_KEPT = 4096
_NOT_LEAF = object()


def definition_matches(key, pieces: dict, definitions: dict, known: dict) -> bool:
    """Whether the definition ``key`` is known to match something without
    computing it: a deferred piece (of ``pieces``), or a tree of
    ``definitions`` that surely matches, the definitions it calls read the
    same way; ``known`` keeps the answers (:meth:`Compiler.matches_something`)."""
    if key in pieces:
        return True
    answer = known.get(key)
    if answer is None:
        tree = definitions.get(key)
        if tree is None:
            return False
        known[key] = False  # a definition reaching itself is undecided here
        answer = known[key] = surely_matches(
            tree, lambda callee: definition_matches(callee, pieces, definitions, known))
    return answer


def used_definitions(definitions: dict, regex: Node | None) -> dict[str, Node]:
    """The ones of ``definitions`` that ``regex`` reaches, directly or through
    other definitions, in an order that does not depend on the hash seed."""
    used: dict[str, Node] = {}
    pending = [] if regex is None else [regex]
    while pending:
        calls = calls_in(pending.pop())
        if not calls:
            continue
        # sorted: the order of the definitions (and so the lazy automaton's
        # state numbering) does not depend on the hash seed. The keys not
        # met yet, then sorted (the same order as sorting all and skipping
        # those met): ~1.5 us a definition less, where a free value's 30
        # levels made this ~60 us of a schema's ~0.6 ms compilation.
        fresh = [key for key in calls if key not in used and key in definitions]
        if len(fresh) > 1:
            fresh.sort(key=_key_order)
        for key in fresh:
            tree = used[key] = definitions[key]
            pending.append(tree)
    return used


@functools.lru_cache(maxsize=4096)
def _key_order(key) -> tuple:
    """Definition keys in an order that does not depend on the hash seed:
    the numbered placeholders, then the named pieces. Kept per key: a named
    piece's repr writes its trees out as regex text (a free value's 32 levels
    took ~0.2 ms of each schema in a fresh fork of a prepared process), and
    the named pieces recur from schema to schema."""
    return (0, key) if isinstance(key, str) else (1, repr(key))


class Layout:
    """Where whitespace goes: compact, flexible (bounded) or pretty (indented)."""

    def __init__(self, mode: str, max_whitespace: int, indent: int) -> None:
        self.mode = mode
        self.indent = indent
        # the whitespace allowed between tokens, as a count (0: none), for keys
        # that hash in C (a key holding the tree called its Python __hash__)
        self.width = max_whitespace if mode == "flexible" and max_whitespace > 0 else 0
        self.ws = EMPTY if not self.width else repeat(_WHITESPACE, 0, max_whitespace)
        # the separators that do not depend on the depth, made once (asked for
        # at every member and container: ~10% of a small object's compilation)
        self._comma = concat(self.ws, lit(","), self.ws)
        self._colon = lit(": ") if mode == "pretty" else concat(self.ws, lit(":"), self.ws)
        # brackets, the same at every depth outside pretty layout, made once
        # (with the loops for comprehensions in objects.py and regexes.py:
        # ~11% of a median MaskBench schema's tree in process)
        self._open = {b: lit(b) + self.ws for b in "[{"}
        self._close = {b: self.ws + lit(b) for b in "]}"}
        self._empty = {(b, e): concat(lit(b), self.ws, lit(e)) for b, e in ("[]", "{}")}

    def _nl(self, depth: int) -> Node:
        return lit("\n" + " " * (self.indent * depth))

    def open(self, bracket: str, depth: int) -> Node:
        if self.mode == "pretty":
            return lit(bracket) + self._nl(depth + 1)
        found = self._open.get(bracket)
        if found is not None:
            return found
        return lit(bracket) + self.ws

    def close(self, bracket: str, depth: int) -> Node:
        if self.mode == "pretty":
            return self._nl(depth) + lit(bracket)
        found = self._close.get(bracket)
        if found is not None:
            return found
        return self.ws + lit(bracket)

    def empty(self, open_bracket: str, close_bracket: str) -> Node:
        found = self._empty.get((open_bracket, close_bracket))
        if found is not None:
            return found
        return concat(lit(open_bracket), self.ws, lit(close_bracket))

    def container(self, open_b: str, close_b: str, body: Node | None, can_be_empty: bool,
                  depth: int) -> Node | None:
        """Brackets around ``body`` (None: no content), or the empty container too."""
        parts = []
        if body is not None:
            parts.append(concat(self.open(open_b, depth), body, self.close(close_b, depth)))
        if can_be_empty:
            parts.append(self.empty(open_b, close_b))
        return alternation(parts)

    def comma(self, depth: int) -> Node:
        if self.mode == "pretty":
            return lit(",") + self._nl(depth + 1)
        return self._comma

    def colon(self) -> Node:
        return self._colon


# Keywords of a schema whose answer for a value depends on the value's JSON type
# alone (``type``) or on nothing (annotations, definitions): see Compiler.valid.
_TYPE_ONLY = frozenset({"type", "title", "description", "$comment", "default", "examples",
                        "deprecated", "readOnly", "writeOnly", "$id", "$schema", "$defs",
                        "definitions"})


class Compiler:
    """One compilation: options, the widenings and notes so far, caches, shared pieces."""

    # Slots: past 30 attributes CPython 3.11 gives an instance a dict of its
    # own, and then no `c.method(...)` call site specialises; each looks the
    # method up in the type's cache, whose misses (absorb, element: ~13 a
    # median MaskBench schema) each copy a page of the parent's in a fresh fork.
    __slots__ = (
        "_any_cache",
        "_checks",
        "_count_parts",
        "_counted",
        "_leaf_options",
        "_matching",
        "_piece_of",
        "_placeholder_of",
        "_placeholders",
        "_references",
        "_validators",
        "_values",
        "any_depth",
        "branches",
        "defer_recursion",
        "deferred_computed",
        "definitions",
        "disjoint_answers",
        "draft",
        "format_checker",
        "generic_values_used",
        "layout",
        "lenient",
        "local_root",
        "max_recursion_depth",
        "max_regex_length",
        "meta_uri",
        "notes",
        "pending",
        "pieces",
        "pieces_deferred",
        "recursion_cut",
        "registry",
        "share",
        "share_counts",
        "share_free_levels",
        "share_values",
        "validator_cls",
        "widenings",
    )

    def __init__(self, *, draft: int, layout: Layout, lenient: bool, max_recursion_depth: int,
                 any_depth: int, validator_cls, registry, format_checker,
                 max_regex_length: int, share: bool = True, meta_uri: str = "",
                 share_free_levels: bool = False, share_counts: bool = False,
                 share_values: bool = False, defer_recursion: bool = False) -> None:
        self.draft = draft
        self.layout = layout
        self.lenient = lenient
        self.max_recursion_depth = max_recursion_depth
        self.any_depth = any_depth
        self.validator_cls = validator_cls
        self.registry = registry
        self.format_checker = format_checker
        self.max_regex_length = max_regex_length
        self.meta_uri = meta_uri
        self.widenings: list[str] = []
        self.notes: list[str] = []
        self.recursion_cut = False        # a recursive $ref was cut at max_recursion_depth
        self.generic_values_used = False  # a bounded-depth "any value" went into the regex
        self._any_cache: dict = {}
        self._validators: dict = {}
        self._checks: checks.Context | None = None
        # Shared pieces: off when the schema holds surrogates a placeholder could clash with.
        self.share = share
        self.share_free_levels = share_free_levels
        self.share_counts = share_counts
        self.share_values = share_values
        self.definitions: dict = {}  # key -> tree: placeholder characters, or names (tuples)
        self._placeholder_of: dict = {}
        self._values: dict = {}
        self._placeholders = 0              # placeholders handed out, deferred ones included
        # Deferred values (see the module notes): placeholder -> (subs, depth), until computed.
        self.defer_recursion = defer_recursion and share
        self.pending: dict[str, tuple[tuple[Sub, ...], int]] = {}
        self.deferred_computed = 0
        # Deferred pieces (see deferred_piece): placeholder -> what computes its tree.
        self.pieces: dict[str, Any] = {}
        self.pieces_deferred = 0
        self._piece_of: dict = {}
        self._matching: dict = {}  # key -> whether its tree surely matches (matches_something)
        self._references = _References()
        self.local_root = None             # see references_from
        self.branches = 0                  # branches of combinator products emitted so far
        self.disjoint_answers: dict = {}   # see disjoint.disjoint
        self._counted: dict = {}            # (unit, lo, hi) -> tree (see counted)
        self._count_parts: dict = {}        # unit -> (its powers, counts below them)
        self._leaf_options: tuple | None = None  # what a scalar leaf's tree depends on (_typed_leaf)

    # --- shared pieces -------------------------------------------------------------

    def shared(self, regex: Node | None, *, always: bool = False, key=None) -> Node | None:
        """``regex``, or a call of the definition that stands for it when it is
        large (or ``always``). ``key`` names the definition where the same
        piece is the same in every compilation with these options (a free
        value's level: see :meth:`any_value`); otherwise it is numbered here."""
        if not self.share or regex is None or (regex.size < SHARE_MIN_LENGTH and not always):
            return regex
        if regex.__class__ is Call and self.defines(regex.key):
            return regex  # already a definition (written or deferred)
        if key is not None:
            if key not in self.definitions:
                if len(self.definitions) >= MAX_DEFINITIONS:
                    return regex
                self.definitions[key] = regex
                self._placeholder_of.setdefault(regex, key)
            return Call(key)
        placeholder = self._placeholder_of.get(regex)
        if placeholder is None:
            placeholder = self._new_placeholder()
            if placeholder is None:
                return regex
            self.definitions[placeholder] = regex
            self._placeholder_of[regex] = placeholder
        return Call(placeholder)

    def value_definition(self, regex: Node | None) -> Node | None:
        """A value regex as :meth:`shared` writes it; with ``share_values``,
        a definition whenever it is ``SHARE_VALUE_MIN_LENGTH`` long (while
        ``MAX_VALUE_DEFINITIONS`` placeholders are not all taken)."""
        return self.shared(regex, always=self.share_values and regex is not None
                           and regex.size >= SHARE_VALUE_MIN_LENGTH
                           and self._placeholders < MAX_VALUE_DEFINITIONS)

    def _new_placeholder(self) -> str | None:
        if self._placeholders >= MAX_DEFINITIONS:
            return None
        self._placeholders += 1
        return chr(PLACEHOLDER_BASE + self._placeholders - 1)

    def defines(self, key) -> bool:
        """Whether ``key`` names a definition, computed or deferred."""
        return key in self.definitions or key in self.pending or key in self.pieces

    @property
    def defers(self) -> bool:
        """Whether something was left for a lazy automaton to compute: a
        value entering a recursion, or a piece (:meth:`deferred_piece`)."""
        return self.defer_recursion and bool(self.deferred_computed or self.pending
                                             or self.pieces_deferred)

    def deferred_piece(self, name, make) -> Node:
        """``make()``, a tree that matches something and reports nothing (an
        object's additional keys), or, with ``share_values`` and deferral (a
        lazy index), a call of a definition computed when a lazy automaton
        first enters it: a schema's nested objects then cost nothing to the
        first mask (``keys_except`` was 45% of kb_484's compilation under
        cProfile). ``name`` identifies the piece within the compilation."""
        if not (self.share_values and self.defer_recursion):
            return make()
        known = self._piece_of.get(name)
        if known is not None:
            return known
        # (placeholders kept for deferred recursion, as for value definitions)
        placeholder = self._new_placeholder() if self._placeholders < MAX_VALUE_DEFINITIONS else None
        if placeholder is None:
            return make()
        self.pieces[placeholder] = make
        self.pieces_deferred += 1
        self._piece_of[name] = call = Call(placeholder)
        return call

    def no_references(self) -> None:
        """Say that the schema holds no ``$ref`` anywhere: no subschema enters
        or reaches recursion, which is then not searched for value by value
        (~10% of a small object's compilation)."""
        self._references.absent = True

    def references_from(self, resolver, document, *, local: bool) -> None:
        """Say that the schema ``document`` (JSON without cycles) holds
        ``$ref`` and that ``resolver`` reads it at its base URI: the
        recursion search starts with every target reachable from it (see
        :class:`_References`). With ``local`` (no ``$dynamicRef`` or
        ``$recursiveRef`` in the schema), a plain local ``$ref`` that
        ``resolver`` reads is found by walking ``document``
        (:func:`~.ir.local_target`)."""
        self._references.start = (document, resolver)
        if local:
            self.local_root = self._references.root = (resolver, document)

    def matches_something(self, key) -> bool:
        """Whether ``key`` is known to match something without computing it: a
        deferred piece, or a definition written already whose tree surely
        matches (:func:`~tokendfa.analysis.regex_tree.surely_matches`, which reads the definitions it
        calls the same way; a deferred value is not computed for it).

        A lazy automaton compiles a fragment before its first mask when a
        definition it calls is not known to match: a schema's top-level
        property whose value is an object calling its members' value
        definitions (BFCL_sql:14: 122 of its 140 NFA states, and ~120
        copy-on-write faults in a fresh fork) was compiled so, though no
        first-mask token reaches it."""
        return definition_matches(key, self.pieces, self.definitions, self._matching)

    def define(self, placeholder: str) -> Node:
        """The tree of a deferred value, computed now (see the module notes).

        A tree written already under another key is a call of that key
        (one call, not a second copy), and an empty value is :data:`NOTHING`."""
        make = self.pieces.pop(placeholder, None)
        if make is not None:
            self.definitions[placeholder] = tree = make()
            return tree
        subs, depth = self.pending[placeholder]
        try:
            regex = self._value(list(subs), depth)
        except RecursionError:
            raise UnsupportedSchemaError("the schema nests too deeply to compile") from None
        del self.pending[placeholder]
        tree = NOTHING if regex is None else regex
        if not (tree.__class__ is Call and self.defines(tree.key)):
            other = self._placeholder_of.get(tree)
            if other is not None:
                tree = Call(other)
            else:
                self._placeholder_of[tree] = placeholder
        self.definitions[placeholder] = tree
        self.deferred_computed += 1
        return tree

    def visit_each_point(self) -> None:
        """Compute the first deferred value met at each point of the schema
        (see :class:`DeferredDefinitions`): one tree per point, whatever
        the reference counts, in the order they are met."""
        seen: set = set()
        while True:
            todo = [p for p, (subs, depth) in self.pending.items()
                    if _point(self, subs, depth) not in seen]
            if not todo:
                return
            for placeholder in todo:
                subs, depth = self.pending[placeholder]
                point = _point(self, subs, depth)
                if point not in seen:
                    seen.add(point)
                    self.define(placeholder)

    def literal_set(self, texts: list[str]) -> Node:
        """One of ``texts`` (literal JSON texts, no surrogates) as a
        :class:`~tokendfa.analysis.regex_tree.LiteralSet` (built as a minimal
        acyclic automaton), a shared definition when pieces are shared: a
        lazy automaton then compiles it only when a match first enters it."""
        tree = literal_set(texts)
        return self.shared(tree, always=True) if self.share else tree

    def counted(self, unit: Node, lo: int, hi: int | None) -> Node:
        """``unit`` ``lo`` to ``hi`` times (None: no bound).

        With ``share_counts`` and a bound of at least ``SHARED_COUNT_MIN``,
        the count is written in base ``COUNT_BASE`` with O(log n) shared
        definitions instead of n copies of the unit: ``P[j]`` is the unit
        ``B**j`` times (``P[j-1]`` written B times), ``U[k]`` is 0 to
        ``B**k - 1`` times (``P[k-1]`` 0 to B - 1 times, nested, then
        ``U[k-1]``), and 0 to n times, with ``n = d * B**k + r`` (its top
        digit d), is ``P[k]`` 0 to d - 1 times then ``U[k]``, or ``P[k]`` d
        times then 0 to r times. The language is the same; a lazy automaton
        compiles each definition once, when a match first enters it, and a
        state (one per count reached) holds about two configurations a
        digit.
        """
        if not (self.share and self.share_counts) or max(lo, hi or 0) < SHARED_COUNT_MIN:
            return counted(unit, lo, hi)
        # made once per count and unit in a compilation, with the powers of the unit
        # shared by every count (sp_0's 90 strings of maxLength 1024 and others:
        # counts were 40% of its compilation under cProfile)
        known = self._counted.get((unit, lo, hi))
        if known is not None:
            return known
        parts = self._count_parts.get(unit)
        if parts is None:
            parts = self._count_parts[unit] = ([self.shared(unit, always=True)], {0: EMPTY})
        powers, below_powers = parts
        base = COUNT_BASE

        def power(j: int) -> Node:  # the unit base**j times
            while len(powers) <= j:
                powers.append(self.shared(concat(*[powers[-1]] * base), always=True))
            return powers[j]

        def up_to(piece: Node, times: int) -> Node:  # piece 0 to `times` times, nested optionals
            node = EMPTY
            for _ in range(times):
                node = optional(piece + node)
            return node

        def below_power(k: int) -> Node:  # 0 to base**k - 1 times
            if k not in below_powers:
                below_powers[k] = self.shared(up_to(power(k - 1), base - 1) + below_power(k - 1),
                                              always=True)
            return below_powers[k]

        def at_most(n: int) -> Node:
            if n == 0:
                return EMPTY
            k = 0
            while base ** (k + 1) <= n:
                k += 1
            if n == base ** (k + 1) - 1:
                return below_power(k + 1)
            digit, rest = divmod(n, base ** k)
            return alternation([up_to(power(k), digit - 1) + below_power(k),
                                concat(*[power(k)] * digit) + at_most(rest)])

        exactly, j, m = [], 0, lo
        while m:
            m, digit = divmod(m, base)
            exactly.extend([power(j)] * digit)
            j += 1
        result = concat(*exactly, repeat(powers[0], 0, None) if hi is None else at_most(hi - lo))
        self._counted[(unit, lo, hi)] = result
        return result

    def _value_key(self, subs: list[Sub], depth: int):
        """What a value regex depends on: the schemas, their base URIs, the recursion counts.

        With ``defer_recursion``, a value from which no recursive reference
        can be reached is keyed without the counts: only a recursive
        reference is ever cut (a reference taken twice on one chain reaches
        itself), so its text is the same whatever the counts, and it is
        written once rather than once per way of reaching it."""
        references = self._references
        if self.defer_recursion and (references.absent or references.acyclic or not any(
                references.reaches_recursion(sub) for sub in subs)):
            # _where(sub) written out for a user's subschema (a dict), and no
            # recursion searched for in a schema without $ref: asked for every
            # value, these were ~9% of a median MaskBench schema's tree in process
            key = [depth if self.layout.mode == "pretty" else 0]
            for sub in subs:
                schema = sub.schema
                if schema.__class__ is dict:
                    resolver = sub.resolver
                    key.append((("id", id(schema)), getattr(resolver, "_base_uri", id(resolver)),
                                sub.internal))
                else:
                    key.append(_where(sub))
            return tuple(key)
        return (depth if self.layout.mode == "pretty" else 0,) + tuple(
            (id(sub.schema), getattr(sub.resolver, "_base_uri", id(sub.resolver)),
             tuple(sorted(Counter(sub.refs).items())), sub.internal) for sub in subs)

    def used_definitions(self, regex: Node | None) -> dict[str, Node]:
        """The definitions ``regex`` reaches, directly or through other definitions."""
        return used_definitions(self.definitions, regex)

    # --- reporting -------------------------------------------------------------

    def unsupported(self, keyword: str, pointer: str, detail: str) -> None:
        """Raise, or in lenient mode record the widening and go on without the constraint."""
        where = pointer or "/"
        if not self.lenient:
            raise UnsupportedSchemaError(f"unsupported keyword '{keyword}' at {where}: {detail}")
        message = f"'{keyword}' at {where} ignored: {detail}"
        if message not in self.widenings:
            self.widenings.append(message)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def _check_size(self, regex: Node | None, pointer: str) -> Node | None:
        if regex is not None and regex.size > self.max_regex_length:
            raise RegexTooLongError(
                f"the regex for the schema at {pointer or '/'} exceeds {self.max_regex_length:,} "
                "characters (references expanded inline); raise max_regex_length or simplify")
        return regex

    # --- the entry point ---------------------------------------------------------

    def value(self, subs: list[Sub], depth: int) -> Node | None:
        """Regex for a JSON value satisfying every subschema in ``subs`` (None: no value)."""
        if len(subs) == 1:
            leaf = self._typed_leaf(subs[0], depth)
            if leaf is not _NOT_LEAF:
                return self.value_definition(leaf) if self.share else leaf
        if not self.share:
            return self._value(subs, depth)
        key = self._value_key(subs, depth)
        known = self._values.get(key)
        if known is not None:
            return known[1]
        if self._references.absent:
            # no $ref anywhere: no subschema stands for a target, none enters recursion
            regex = self.value_definition(self._value(subs, depth))
            self._values[key] = (tuple(subs), regex)  # holding subs keeps their ids unique
            return regex
        # A subschema that is a $ref alone is keyed as its target: each point
        # naming one definition (JSONSchemaProps' allOf/anyOf/oneOf items, not,
        # ... in Kubernetes kb_209) is then one value, not one per point,
        # each deferred value computed again at the lazy automaton's first
        # call (six ~0.4 ms copies in one step).
        targets = [referenced(self, sub) or sub for sub in subs]
        if any(target is not sub for target, sub in zip(targets, subs)):
            canonical = self._value_key(targets, depth)
            known = self._values.get(canonical)
            if known is not None:
                self._values[key] = (tuple(subs), known[1])
                return known[1]
            regex = self._new_value(subs, depth)
            self._values[canonical] = (tuple(targets), regex)
        else:
            regex = self._new_value(subs, depth)
        self._values[key] = (tuple(subs), regex)  # holding subs keeps their ids unique
        return regex

    def _new_value(self, subs: list[Sub], depth: int) -> Node | None:
        """The value of ``subs`` not met before: a call of a deferred
        definition where it enters recursion (with ``defer_recursion``),
        else written now."""
        if self.defer_recursion and any(self._references.enters_recursion(sub) for sub in subs):
            placeholder = self._new_placeholder()
            if placeholder is not None:  # else written now, as without deferral
                self.pending[placeholder] = (tuple(subs), depth)
                return Call(placeholder)
        # Only a $ref reaches the same schema objects twice, and what is reported
        # inside names the referenced schema's pointer, so nothing is lost here.
        return self.value_definition(self._value(subs, depth))

    def _typed_leaf(self, sub: Sub, depth: int) -> "Node | None | object":
        """The tree of ``sub`` (None: no value) when it says no more than a
        scalar type (see ``_LEAVES``), from the process-wide table, or
        computed the general way and kept there when that left nothing else
        behind (no call, note, widening or definition); ``_NOT_LEAF`` for
        any other subschema."""
        schema = sub.schema
        if schema.__class__ is not dict:
            return _NOT_LEAF
        kind = schema.get("type")
        if kind.__class__ is str:
            if kind not in _SCALAR_TYPES:
                return _NOT_LEAF
        elif kind.__class__ is list and kind and all(
                name.__class__ is str and name in _SCALAR_TYPES for name in kind):
            kind = tuple(kind)
        else:
            return _NOT_LEAF
        for keyword in schema:
            if keyword != "type" and (keyword in KEYWORDS or keyword in UNSUPPORTED
                                      or keyword == "$ref"):
                return _NOT_LEAF
        options = self._leaf_options
        if options is None:
            layout = self.layout
            options = self._leaf_options = (
                self.draft, layout.mode, layout.width, layout.indent, self.lenient, self.share,
                self.share_counts, self.share_free_levels, self.share_values, self.defer_recursion,
                self.max_regex_length)
        key = (kind, depth if self.layout.mode == "pretty" else 0, options)
        limits.check()
        tree = _LEAVES.get(key)
        if tree is not None:
            self.branches += 1   # as _split counts the branch it emits
            return tree
        before = (len(self.notes), len(self.widenings), len(self.definitions), self._placeholders,
                  self.generic_values_used, self.branches)
        tree = self._value([sub], depth)
        if tree is None or tree.calls or before != (
                len(self.notes), len(self.widenings), len(self.definitions), self._placeholders,
                self.generic_values_used, self.branches - 1):
            return tree
        if len(_LEAVES) >= _LEAVES_KEPT:
            _LEAVES.clear()
        _LEAVES[key] = tree
        return tree

    def _value(self, subs: list[Sub], depth: int) -> Node | None:
        flat = empty_flat()
        for sub in subs:
            self.absorb(flat, sub)
            if flat.false:
                return None
        pointer = subs[0].pointer if subs else ""
        if flat.trivial():
            return self.any_value(depth)
        try:
            return self._check_size(self._split(flat, depth, 0), pointer)
        except strs.SplitSurrogatePair as exc:
            # written where the literal is: the innermost value that holds it names it
            if exc.located:
                raise
            where = next(filter(None, (locate_literal(sub, exc.text) for sub in subs)), None)
            if where is None:   # not in these subschemas' JSON: brought by a $ref
                where = ("$ref" if any(isinstance(s.schema, dict) and "$ref" in s.schema for s in subs)
                         else "enum", pointer or "/")
            keyword, at = where
            located = strs.SplitSurrogatePair(f"unsupported keyword '{keyword}' at {at}: "
                                              f"{strs.split_pair_message(exc.text)}")
            located.text, located.located = exc.text, True
            raise located from None

    def _split(self, flat: Flat, depth: int, fanout: int) -> Node | None:
        """Split the choices of ``flat`` one after the other, then emit each branch."""
        # The branch product of nested choices is where a schema's size multiplies
        # (12 allOf'd two-way anyOfs: 4,096 branches, 25 s; seven nested oneOfs ran on
        # past 60 s): each branch checks the deadline (~100 ns a check).
        limits.check()
        if flat.false:
            return None
        if flat.enum is not None:
            return literals(self, flat, depth)
        if flat.nots:
            flat = flat.copy()
            negated = flat.nots.pop(0)
            flat.negated.append(negated)
            flat.choices.insert(0, Choice("not", negate(self, negated), negated.pointer))
        if not flat.choices:
            self.branches += 1
            limits.check_memory(self.branches * BRANCH_BYTES, lambda: (
                f"the {self.branches:,} branches of anyOf/oneOf/not/if combinations in the schema"))
            return self.emit(flat, depth)
        choice = flat.choices[0]
        if fanout + len(choice.alternatives) > MAX_CHOICES:
            self.unsupported(choice.keyword, choice.pointer, f"more than {MAX_CHOICES} combinations "
                             "of anyOf/oneOf/not/if branches")
            rest = flat.copy()
            rest.choices.pop(0)
            return self._split(rest, depth, fanout)
        parts = []
        for alternative in choice.alternatives:
            branch = flat.copy()
            branch.choices.pop(0)
            for item in alternative:
                if isinstance(item, Negated):
                    branch.nots.append(item.sub)
                else:
                    self.absorb(branch, item)
                if branch.false:
                    break
            if not branch.false:
                parts.append(self._split(branch, depth, fanout + len(choice.alternatives)))
        return alternation(parts)

    def absorb(self, flat: Flat, sub: Sub) -> None:
        """Add what ``sub`` says to ``flat`` (see :func:`.keywords.absorb`)."""
        absorb(self, flat, sub)

    def emit(self, flat: Flat, depth: int) -> Node | None:
        """The regex of a flat without choices: one alternative per type it allows."""
        types = flat.types
        parts: list[Node | None] = constants(flat)
        if types & {"integer", "fraction"}:
            parts.append(number(self, flat))
        if "string" in types:
            parts.append(string(self, flat))
        if "array" in types:
            parts.append(array(self, flat, depth))
        if "object" in types:
            parts.append(object_(self, flat, depth))
        return alternation(parts)

    # --- what the emitters share -------------------------------------------------------

    def valid(self, value, sub: Sub, *, listed: bool = False) -> bool:
        """Whether ``value`` satisfies ``sub``: the user's JSON with ``jsonschema``, the
        compiler's own constraints by :meth:`~.ir.Constraint.holds`.

        ``listed``: ``value`` is known to be in ``sub``'s own ``enum``/``const``
        (a candidate of a flat that absorbed ``sub``, whose ``enum`` is the
        intersection of them all, compared by :func:`~.ir.json_key`), so those
        two keywords are not checked again. The validator scans the enum for
        each value: a 60,000-value enum took 3.6 * 10^9 comparisons. What is
        left is often only ``type``, whose answer depends on the value's type
        alone: it is then found once per type (:func:`type_key`)."""
        limits.check()
        if isinstance(sub.schema, Constraint):
            return sub.schema.holds(value, self.valid)
        key = (id(sub), listed)
        validator = self._validators.get(key)
        if validator is None:
            schema = sub.schema
            by_type = None
            if listed and isinstance(schema, dict) and ("enum" in schema or "const" in schema):
                schema = {k: v for k, v in schema.items() if k not in ("enum", "const")}
                if schema.keys() <= _TYPE_ONLY:
                    by_type = {}
                    test = _type_test(schema.get("type"), self.draft)
                    if test is not None:
                        # the common case, without building a check (an enum of strings)
                        self._validators[key] = (test, sub, _FAST)
                        return test(value)
            # what jsonschema answers, without running it (a validator is an attrs
            # class instance; jsonschema's first run in a fresh fork costs 0.5-0.7 ms
            # and 85-120 copy-on-write faults: checks.py)
            test = checks.check_of(schema, sub, self._check_context())
            if test is not None:
                self._validators[key] = (test, sub, _FAST)
                return test(value)
            validator = self.validator_cls(schema, registry=self.registry, _resolver=sub.resolver,
                                           format_checker=self.format_checker)
            validator = self._validators[key] = (validator, sub, by_type)  # keep sub alive: its id stays unique
        validator, _, by_type = validator
        if by_type is _FAST:
            return validator(value)
        if by_type is not None:
            kind = type_key(value)
            known = by_type.get(kind)
            if known is None:
                known = by_type[kind] = self._is_valid(validator, value, sub)
            return known
        return self._is_valid(validator, value, sub)

    def _check_context(self) -> checks.Context:
        context = self._checks
        if context is None:
            context = self._checks = checks.Context(
                self.draft, getattr(self.validator_cls, "VALIDATORS", {}),
                functools.partial(_type_test, draft=self.draft), functools.partial(resolve, self))
        return context

    @staticmethod
    def _is_valid(validator, value, sub: Sub) -> bool:
        try:
            return validator.is_valid(value)
        except TimeLimitError:
            raise
        except UndecidedFormat as exc:   # its own class: the enum path reports it as the format's
            raise UndecidedFormat(f"cannot check enum/const value {value!r} at {sub.pointer or '/'}: "
                                  f"{exc}") from None
        except Exception as exc:  # noqa: BLE001 - a validator crash is the schema's problem
            raise UnsupportedSchemaError(
                f"cannot check enum/const value {value!r} at {sub.pointer or '/'}: {exc}") from None

    def admitted(self, flat: Flat, value) -> bool:
        """Whether a literal satisfies every subschema of ``flat`` and none it negates
        (negations not yet split, ``flat.nots``, count as much as those split already)."""
        return (all(self.valid(value, s, listed=True) for s in flat.sources)
                and not any(self.valid(value, s) for s in flat.negated + flat.nots))

    def type_decides(self, flat: Flat) -> bool:
        """Whether :meth:`admitted` depends on a value's type alone (:func:`type_key`)
        for the candidates of ``flat.enum``: nothing negated, and every source
        says no more than its type, its ``enum``/``const`` and annotations."""
        return not flat.negated and not flat.nots and all(
            isinstance(s.schema, dict) and s.schema.keys() - {"enum", "const"} <= _TYPE_ONLY
            for s in flat.sources)

    def literal(self, value, depth: int) -> Node:
        return literal(self, value, depth)

    def pattern_matches(self, pattern: str, name: str, keyword: str, pointer: str, *,
                        default: bool = False, report: bool = True) -> bool:
        """Whether ``name`` matches the ECMA ``pattern``; a pattern we cannot read is
        reported as ``keyword`` (unless ``report`` is False) and answers ``default``."""
        try:
            return strs.pattern_matches(pattern, name)
        except strs.PatternUnsupported as exc:
            if report:
                self.unsupported(keyword, pointer, str(exc))
            return default

    def element(self, subs: list[Sub], depth: int) -> Node | None:
        """A value satisfying ``subs``, the generic value when there are none."""
        if not subs:
            return self.shared(self.any_value(depth))  # as value() writes it, so they compare
        return self.value(subs, depth)

    def container(self, open_b: str, close_b: str, body: Node | None, can_be_empty: bool,
                  depth: int) -> Node | None:
        """Brackets around ``body`` (None: no content), or the empty container too."""
        return self.layout.container(open_b, close_b, body, can_be_empty, depth)

    # --- the generic value ---------------------------------------------------------------------

    def any_value(self, depth: int, levels: int | None = None) -> Node:
        """Any JSON value, arrays and objects nested ``any_depth`` levels at most.

        With ``share_free_levels`` every level is a shared definition of its
        own, which calls the level below; otherwise a level is written out
        where it stands until it is ``SHARE_MIN_LENGTH`` long (three levels
        in compact JSON).
        """
        levels = self.any_depth if levels is None else levels
        self.generic_values_used = True
        key = (depth if self.layout.mode == "pretty" else 0, levels)
        cached = self._any_cache.get(key)
        if cached is not None:
            return cached
        # the same in every compilation with these options: built once per process
        layout = self.layout
        everywhere = ("free value", layout.mode, layout.width, layout.indent, self.share,
                      self.share_free_levels) + key
        found = _FREE_VALUES.get(everywhere)
        if found is not None and self._adopt(found):
            self._any_cache[key] = found.tree
            return found.tree
        scalars = [lit("null"), lit("true"), lit("false"), nums.NUMBER_TREE, strs.STRING]
        if levels > 0:
            below = everywhere[:-2] + (depth + 1 if layout.mode == "pretty" else 0, levels - 1)
            inner = self.shared(self.any_value(depth + 1, levels - 1), key=below)
            comma = self.layout.comma(depth)
            colon = self.layout.colon()
            array_body = inner + repeat(comma + inner, 0, None)
            member = strs.STRING + colon + inner
            object_body = member + repeat(comma + member, 0, None)
            scalars.append(self.container("[", "]", array_body, True, depth))
            scalars.append(self.container("{", "}", object_body, True, depth))
        else:
            scalars.append(self.container("[", "]", None, True, depth))
            scalars.append(self.container("{", "}", None, True, depth))
        regex = alternation(scalars)
        if self.share_free_levels:
            regex = self.shared(regex, always=True, key=everywhere)
        self._any_cache[key] = regex
        used = self.used_definitions(regex)
        if all(isinstance(k, tuple) for k in used):  # no piece numbered by this compilation
            if len(_FREE_VALUES) >= _FREE_VALUES_KEPT:
                _FREE_VALUES.clear()
            placeholders: dict = {}
            for k, tree in used.items():
                placeholders.setdefault(tree, k)
            _FREE_VALUES[everywhere] = _FreeValue(regex, used, placeholders)
        return regex

    def _adopt(self, free: "_FreeValue") -> bool:
        """Take the definitions a free value built elsewhere calls (False: too many).

        Where this compilation has none of them yet (its first free value), they
        are added in two dict merges, which reuse the stored hashes: key by key
        (each tree's hash a Python call) this was ~0.09 ms and ~20 copy-on-write
        faults of a schema's time to first mask in a fresh fork."""
        definitions = self.definitions
        if definitions.keys().isdisjoint(free.definitions):
            if len(definitions) + len(free.definitions) > MAX_DEFINITIONS:
                return False
            definitions.update(free.definitions)
            # setdefault's meaning, tree by tree: a tree this compilation has
            # shared already keeps its own key
            merged = dict(free.placeholders)
            merged.update(self._placeholder_of)
            self._placeholder_of = merged
            return True
        missing = [(k, tree) for k, tree in free.definitions.items() if k not in definitions]
        if len(definitions) + len(missing) > MAX_DEFINITIONS:
            return False
        for k, tree in missing:
            definitions[k] = tree
            self._placeholder_of.setdefault(tree, k)
        return True

    # --- instances in the order the regex writes them ----------------------------------------

    def arrange(self, subs: list[Sub], value: Any) -> Any:
        """``value`` with object keys in the order the regex expects (see :mod:`.objects`).

        Choices are settled by the first alternative the value satisfies
        (checked with the validator), as the regex for that branch would
        have to accept it.
        """
        if not isinstance(value, (dict, list)):
            return value
        flat = Flat()
        try:
            for sub in subs:
                self.absorb(flat, sub)
            guard = 0
            while flat.choices and not flat.false and guard < MAX_CHOICES:
                guard += 1
                choice = flat.choices.pop(0)
                for alternative in choice.alternatives:
                    items = [i for i in alternative if isinstance(i, Sub)]
                    if all(i.internal or self.valid(value, i) for i in items):
                        for item in items:
                            self.absorb(flat, item)
                        break
        except (UnsupportedSchemaError, RecursionError):
            return value
        if flat.false:
            return value
        if flat.enum is not None:
            key = json_key(value)
            for literal_value in flat.enum:
                if json_key(literal_value) == key:
                    return literal_value       # the regex writes the literal as given
        if isinstance(value, list):
            out = []
            for i, element in enumerate(value):
                element_subs = []
                for part in flat.arr_parts:
                    if i < len(part.prefix):
                        element_subs.append(part.prefix[i])
                    elif part.items is not None:
                        element_subs.append(part.items)
                out.append(self.arrange(element_subs, element))
            return out
        names = declared(flat)
        order = [n for n in names if n in value] + [n for n in value if n not in names]
        return {name: self.arrange([s for part in flat.obj_parts
                                    for s in member_subs(self, part, name, report=False)], value[name])
                for name in order}


class _References:
    """Which ``$ref`` targets are recursive, and which subschemas enter one.

    A target is recursive when it reaches itself through the references
    anywhere under it (not under ``$defs``, which only a reference reaches);
    a subschema *enters* a recursive reference when it, or a subschema
    read into the same flat (``allOf``, ``anyOf``, ``if``, ..., and the
    target of a reference that is not recursive), holds a ``$ref`` to a
    recursive target; a subschema *reaches* recursion when a recursive
    target is reachable from it at all. Found on the JSON once per target and
    subschema; a reference that does not resolve counts as none here (the
    compilation reports it). Given the root (``start``), the first question
    registers every target reachable from it, and where none is recursive
    (``acyclic``) every answer is no without a search.
    """

    def __init__(self) -> None:
        self._targets: dict[int, tuple] = {}   # id(target) -> (target, ids of the targets under it)
        self._recursive: dict[int, bool] = {}
        self._enters: dict[int, tuple] = {}    # id(schema) -> (schema, answer)
        self._pending_targets: list = []
        self._reaches: dict[int, tuple] = {}     # id(schema) -> (schema, answer)
        # the schema holds no $ref at all (Compiler.no_references): nothing recursive
        self.absent = False
        self.root = None   # Compiler.references_from
        # (document, resolver) where the references start (Compiler.references_from),
        # until the first question; then acyclic says whether no target reachable
        # from it reaches itself, so that no subschema enters or reaches recursion
        self.start = None
        self.acyclic = False

    def _search_start(self) -> bool:
        """Register every target reachable from the start and say whether none
        of them reaches itself (then ``acyclic``: no subschema is asked about
        again). The first recursion search met registers them all anyway;
        17 of the 22 schemas with ``$ref`` in MaskBench's sample (Github_ultra:0
        with 117 targets, Kubernetes:376 with 92) have no recursive target,
        and asked subschema by subschema, each walked its own JSON and the
        targets it reaches (Kubernetes:376's tree 120 -> 54 ms in process with
        the local walk of :func:`~.ir.local_target`)."""
        document, resolver = self.start
        self.start = None
        self._pending_targets = [(document, resolver)]
        while self._pending_targets:
            target, res = self._pending_targets.pop()
            self._under(target, res)
        # a cycle among the registered targets (an iterative depth-first search:
        # 0 unseen, 1 on the path, 2 done)
        targets = self._targets
        state = dict.fromkeys(targets, 0)
        for first in targets:
            if state[first]:
                continue
            state[first] = 1
            path = [(first, iter(targets[first][1]))]
            while path:
                node, following = path[-1]
                for nxt in following:
                    mark = state[nxt]
                    if mark == 1:
                        return False
                    if mark == 0:
                        state[nxt] = 1
                        path.append((nxt, iter(targets[nxt][1])))
                        break
                else:
                    state[node] = 2
                    path.pop()
        self.acyclic = True
        return True

    def _resolve(self, resolver, ref: str):
        found = local_target(self.root, resolver, ref)
        if found is None:
            try:
                resolved = resolver.lookup(ref)
            except Exception:  # noqa: BLE001 - reported by the compilation itself
                return None
            found = resolved.contents, resolved.resolver
        contents, inner = found
        if isinstance(contents, dict):
            inner = enter(inner, contents)
        return contents, inner

    def _under(self, contents, resolver) -> tuple[int, ...]:
        """The targets of the references anywhere under ``contents``, registered."""
        key = id(contents)
        known = self._targets.get(key)
        if known is not None:
            return known[1]
        self._targets[key] = (contents, ())   # a target under itself: found by the search below
        found: dict[int, None] = {}
        for target in self._ref_targets(contents, resolver):
            found[id(target[0])] = None
            if id(target[0]) not in self._targets:
                self._pending_targets.append(target)
        self._targets[key] = (contents, tuple(found))
        return self._targets[key][1]

    def recursive(self, contents, resolver) -> bool:
        """Whether the target ``contents`` reaches itself through references."""
        key = id(contents)
        known = self._recursive.get(key)
        if known is not None:
            return known
        self._pending_targets = [(contents, resolver)]
        while self._pending_targets:  # every target reachable, with what lies under it
            target, res = self._pending_targets.pop()
            self._under(target, res)
        seen: set[int] = set()
        stack = list(self._targets[key][1])
        while stack and key not in seen:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self._targets[node][1])
        self._recursive[key] = key in seen
        return self._recursive[key]

    def reaches_recursion(self, sub: Sub) -> bool:
        """Whether a recursive reference can be reached from ``sub``, at any depth."""
        if self.absent or self.acyclic or (self.start is not None and self._search_start()):
            return False
        schema = sub.schema
        if isinstance(schema, Constraint):
            return any(self.reaches_recursion(inner) for inner in _subs_in(schema))
        if not isinstance(schema, dict):
            return False
        return self._reaches_from(schema, sub.resolver)

    def _reaches_from(self, node, resolver) -> bool:
        """Whether a recursive target is reachable from the JSON ``node``:
        through a ``$ref`` of it (to a recursive target, or to one from which
        one is reachable) or through a subschema under it. One walk of the
        schema, each dict answered once and kept (asked for every value
        compiled, a walk of the whole subtree each time was quadratic in the
        nesting: 13% of kb_484's compilation). A walk entering a target that
        is not recursive cannot come back to it, so it ends."""
        if isinstance(node, list):
            return any(self._reaches_from(item, resolver) for item in node
                       if isinstance(item, (dict, list)))
        if not isinstance(node, dict):
            return False
        key = id(node)
        known = self._reaches.get(key)
        if known is not None:
            return known[1]
        limits.check()
        resolver = enter(resolver, node)
        answer = False
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(resolver, ref)
            if target is not None:
                answer = self.recursive(*target) or self._reaches_from(*target)
        if not answer:
            answer = any(self._reaches_from(value, resolver) for name, value in node.items()
                         if name not in _NOT_SCHEMAS and isinstance(value, (dict, list)))
        self._reaches[key] = (node, answer)  # holding the node keeps its id unique
        return answer

    def _ref_targets(self, schema, resolver):
        """The resolved targets ``(contents, resolver)`` of the references
        anywhere under ``schema``, as the search meets them."""
        stack = [(schema, resolver)]
        push = stack.append
        while stack:
            limits.check()
            node, res = stack.pop()
            # loops, not generators, and enter() only where an identifier may
            # be (it reads the same two keys): _search_start walks the whole
            # schema here, 1.09 -> 0.73 ms on Kubernetes:376 and 1.50 -> 0.97
            # on Github_ultra:0 (in process, best of 7)
            if isinstance(node, list):
                for item in node:
                    if isinstance(item, (dict, list)):
                        push((item, res))
                continue
            if not isinstance(node, dict):
                continue
            if "$id" in node or "id" in node:
                res = enter(res, node)
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = self._resolve(res, ref)
                if target is not None:
                    yield target
            for name, value in node.items():
                if isinstance(value, (dict, list)) and name not in _NOT_SCHEMAS:
                    push((value, res))

    def enters_recursion(self, sub: Sub) -> bool:
        if self.absent or self.acyclic or (self.start is not None and self._search_start()):
            return False
        schema = sub.schema
        if isinstance(schema, Constraint):
            # what the compiler wrote (a negation, a conjunction, members...): the
            # subschemas it holds, some read in place (a negated schema), some not
            return any(self.enters_recursion(inner) for inner in _subs_in(schema))
        if not isinstance(schema, dict):
            return False
        cache_key = id(schema)
        known = self._enters.get(cache_key)
        if known is not None:
            return known[1]
        answer = False
        stack = [(schema, sub.resolver)]
        while stack and not answer:
            node, res = stack.pop()
            if isinstance(node, list):
                stack.extend((item, res) for item in node)
                continue
            if not isinstance(node, dict):
                continue
            ref = node.get("$ref")
            if isinstance(ref, str):
                target = self._resolve(res, ref)
                if target is not None:
                    if self.recursive(*target):
                        answer = True
                    else:
                        stack.append(target)  # read in place too; not recursive, so this ends
            for name in _IN_PLACE:
                value = node.get(name)
                if name in ("dependentSchemas", "dependencies") and isinstance(value, dict):
                    stack.extend((v, res) for v in value.values() if isinstance(v, dict))
                elif isinstance(value, (dict, list)):
                    stack.extend((child, enter(res, child) if isinstance(child, dict) else res)
                                 for child in (value if isinstance(value, list) else [value]))
        self._enters[cache_key] = (schema, answer)  # holding the schema keeps its id unique
        return answer


class DeferredDefinitions:
    """The definitions of a compilation with deferred recursion, computed as a
    lazy automaton asks for them: a :class:`~tokendfa.analysis.lazydfa.DefinitionSource`.

    It holds the :class:`Compiler` (and through it the user's schema) for
    as long as the lazy index that uses it lives. A definition is computed
    under the limits of the request that reaches it (those of the lazy
    index's construction and of ``complete()``; none while serving masks,
    as for any fragment the lazy automaton compiles).

    At compilation, :meth:`Compiler.visit_each_point` computes one definition for
    every point of the schema that deferred values stand at (whatever their
    reference counts), so that what the compilation reports (an unsupported
    keyword, a widening, a format not checked) is reported before anything
    is served, as the eager compilation does; only the further unrollings
    of the same points are left for the automaton.

    Placeholders are lone surrogates, 2,048 in all: past them a value is
    written where it stands, as without deferral (the same language, and
    the eager compiler's cost, with its exponential count of values, for
    what is left of the unrolling). ``complete()`` computes the whole
    unrolling and may meet that bound, or ``max_regex_length``, where the
    eager compilation would too.
    """

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    def defines(self, key) -> bool:
        return self.compiler.defines(key)

    def tree(self, key) -> Node:
        known = self.compiler.definitions.get(key)
        if known is not None:
            return known
        return self.compiler.define(key)

    def matches_something(self, key) -> bool:
        """Whether the definition ``key`` surely matches some string, known
        without computing it (an optional method of a
        :class:`~tokendfa.analysis.lazydfa.DefinitionSource`)."""
        return self.compiler.matches_something(key)

    @property
    def computed(self) -> int:
        """Deferred definitions computed so far."""
        return self.compiler.deferred_computed

    @property
    def waiting(self) -> int:
        """Deferred definitions known and not computed yet."""
        return len(self.compiler.pending)

    def everything(self) -> dict:
        """Every definition (key -> tree), the deferred ones computed (the whole
        unrolling: may be huge)."""
        compiler = self.compiler
        while compiler.pending or compiler.pieces:
            self.tree(next(iter(compiler.pending or compiler.pieces)))
        return compiler.definitions


class _TypeTest:
    """Whether a value is of one of the JSON Schema ``type`` names given, as
    jsonschema's type checker of the draft answers (from draft 6 on, an
    integral float is an ``integer``)."""

    __slots__ = ("names", "integral_floats")

    def __init__(self, names: tuple[str, ...], integral_floats: bool) -> None:
        self.names = names
        self.integral_floats = integral_floats

    def __call__(self, value) -> bool:
        return any(_is_type(value, name, self.integral_floats) for name in self.names)


def _is_type(value, name: str, integral_floats: bool) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False  # not a number in JSON Schema, though a Python int
    if name == "integer":
        return isinstance(value, int) or (integral_floats and isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, numbers.Number)
    if name == "object":
        return isinstance(value, dict)
    return isinstance(value, list)  # "array"


_FAST = object()  # marks a test of checks.py among the validators

_TYPE_NAMES = frozenset({"string", "null", "boolean", "integer", "number", "object", "array"})


def _type_test(kinds, draft: int) -> "_TypeTest | None":
    """The test of a ``type`` keyword's value (absent: any value), or None
    for what is left to jsonschema (a name it does not know, say)."""
    if kinds is None:
        names: tuple = tuple(_TYPE_NAMES)
    elif isinstance(kinds, str):
        names = (kinds,)
    elif isinstance(kinds, list) and kinds:
        names = tuple(kinds)
    else:
        return None
    if not all(isinstance(name, str) and name in _TYPE_NAMES for name in names):
        return None
    return _TypeTest(names, draft >= 6)


def _point(compiler: Compiler, subs, depth: int) -> tuple:
    """A value's key without its reference counts: where it stands in the schema
    (a constraint the compiler wrote by what it holds, as each is a new object)."""
    return (depth if compiler.layout.mode == "pretty" else 0,) + tuple(_where(sub) for sub in subs)


def _where(item):
    if isinstance(item, Sub):
        return (_where(item.schema), getattr(item.resolver, "_base_uri", id(item.resolver)),
                item.internal)
    if isinstance(item, Constraint):
        return (type(item).__name__,) + tuple(_where(getattr(item, f.name)) for f in fields(item))
    if isinstance(item, (tuple, list)):
        return tuple(_where(x) for x in item)
    if isinstance(item, (dict, frozenset, set)) or not _hashable(item):
        return ("id", id(item))  # held by the subs the key is stored with
    return (type(item).__name__, item)  # 1, 1.0 and True are equal in Python, not in JSON


def _hashable(item) -> bool:
    try:
        hash(item)
    except TypeError:
        return False
    return True


def _subs_in(item):
    """The subschemas a constraint holds, at any depth."""
    if isinstance(item, Sub):
        yield item
    elif isinstance(item, Constraint):
        for f in fields(item):
            yield from _subs_in(getattr(item, f.name))
    elif isinstance(item, (tuple, list)):
        for x in item:
            yield from _subs_in(x)
