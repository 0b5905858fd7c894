"""The compiler's internal forms: small immutable types that no schema can spell.

A user's schema is JSON (dicts, lists, strings, numbers, booleans) and is
read only through the keyword table of :mod:`.keywords`, where a keyword
the table does not know (``x-*`` extensions included) is an annotation, as
the specification says. What the compiler writes itself while it works
(the negation of a keyword, the two branches of a dependency, a ``oneOf``
branch together with the others' negations) is one of the
:class:`Constraint` types here. They are Python objects, not JSON, so no
schema can reach or imitate them: ``{"x-all": [{}]}`` is a schema with one
annotation, nothing more.

Reading order:

* :class:`Sub`: a subschema (user JSON or a :class:`Constraint`), where it
  stands (its JSON pointer) and the resolver that reads its ``$ref``;
* the constraints, one type per thing the compiler writes
  (:class:`Types`, :class:`NumberBound`, ..., :class:`SomeMember`), each
  absorbed by its own function in :mod:`.keywords` and each able to say
  whether a value satisfies it (:meth:`Constraint.holds`: ``enum`` values are
  checked against negations the compiler wrote, where ``jsonschema`` cannot
  help);
* :class:`Negated` and :class:`Choice`: what ``not`` and the combinators
  leave to split;
* :class:`ObjPart`, :class:`ArrPart` and :class:`Flat`: everything a
  conjunction of subschemas says about one value, merged keyword by keyword.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

from ..analysis.errors import TimeLimitError, UnsupportedSchemaError
from . import strings as strs
from .numbers import to_decimal

# "fraction" is a number that is not an integer: JSON's "number" is both.
ALL_TYPES = frozenset({"null", "boolean", "integer", "fraction", "string", "array", "object"})


# --- subschemas ---------------------------------------------------------------------

@dataclass(frozen=True, eq=False, slots=True)
class Sub:
    """A subschema, where it stands, and how its ``$ref`` are read.

    ``schema`` is the user's JSON (a dict or a bool) or a :class:`Constraint`
    the compiler wrote. ``refs`` is the chain of references followed to
    reach it (for the recursion bound); ``internal`` marks what the compiler
    wrote and everything under it, which the literal check against the
    user's subschemas skips.
    """

    schema: Any
    resolver: Any
    pointer: str
    refs: tuple = ()
    internal: bool = False

    def child(self, schema: Any, *path: str | int) -> "Sub":
        # json_pointer inline: one string joined, no generator (a schema's
        # properties make a child each)
        pointer = "/".join((self.pointer, *map(_pointer_part, path)))
        resolver = self.resolver
        if isinstance(schema, dict):
            resolver = enter(resolver, schema)
        return make_sub(schema, resolver, pointer, self.refs, self.internal)

    def derived(self, constraint: "Constraint") -> "Sub":
        """A constraint the compiler wrote, read in this subschema's context."""
        return make_sub(constraint, self.resolver, self.pointer, self.refs, True)


# Sub's fields set through their slots' descriptors: a frozen dataclass's
# __init__ sets each with object.__setattr__, a generic attribute store (1.09 us
# a Sub against 0.35 us so; a schema makes one a member and more: ~2% of a
# median MaskBench schema's tree in process)
_new = object.__new__
_set_schema, _set_resolver, _set_pointer, _set_refs, _set_internal = (
    Sub.__dict__[name].__set__ for name in ("schema", "resolver", "pointer", "refs", "internal"))


def make_sub(schema: Any, resolver: Any, pointer: str, refs: tuple, internal: bool) -> Sub:
    """``Sub(schema, resolver, pointer, refs, internal)``, made faster (every field given)."""
    sub = _new(Sub)
    _set_schema(sub, schema)
    _set_resolver(sub, resolver)
    _set_pointer(sub, pointer)
    _set_refs(sub, refs)
    _set_internal(sub, internal)
    return sub


# where a string is written as JSON text: a literal, a property name
_LITERAL_KEYWORDS = ("const", "enum", "required", "properties", "dependentRequired",
                     "dependentSchemas", "dependencies", "propertyNames")


def locate_literal(sub: Sub, text: str) -> tuple[str, str] | None:
    """The keyword and JSON pointer under ``sub`` that write ``text`` as a literal or a
    property name (as a value inside ``const``/``enum``/``required``, or as a key of
    ``properties`` and the like), found depth first in the JSON; None where it is not
    there (it came through a ``$ref``)."""
    stack = [(sub.schema, sub.pointer)]
    while stack:
        schema, pointer = stack.pop()
        if isinstance(schema, list):
            stack.extend((item, f"{pointer}/{i}") for i, item in reversed(list(enumerate(schema))))
            continue
        if not isinstance(schema, dict):
            continue
        for keyword in _LITERAL_KEYWORDS:
            if keyword in schema and _holds_text(schema[keyword], text, keyword != "propertyNames"):
                return keyword, pointer or "/"
        stack.extend((value, pointer + json_pointer([key])) for key, value in reversed(schema.items())
                     if key not in ("const", "enum"))
    return None


def _holds_text(value, text: str, keys: bool) -> bool:
    """Whether ``text`` is ``value``, an item in it or (``keys``) one of its keys, at any depth."""
    if value == text:
        return True
    if isinstance(value, list):
        return any(_holds_text(v, text, True) for v in value)
    if isinstance(value, dict):
        return (keys and text in value) or any(_holds_text(v, text, True) for v in value.values())
    return False


def json_pointer(path) -> str:
    """The JSON pointer of a path of keys and indexes (``~`` written ``~0``, ``/`` ``~1``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _pointer_part(p: str | int) -> str:
    """One key or index of a JSON pointer, escaped as :func:`json_pointer` does."""
    if p.__class__ is not str:
        return str(p)
    if "~" in p or "/" in p:
        return p.replace("~", "~0").replace("/", "~1")
    return p


# The specification of the root schema's dialect (set by the api for each compilation),
# for a subschema that changes the base URI with $id but names no $schema.
DEFAULT_SPEC: list = [None]


def enter(resolver, schema: dict):
    """The resolver inside a subschema that may change the base URI with ``$id``."""
    ident = schema.get("$id", schema.get("id"))
    if isinstance(ident, str) and not ident.startswith("#"):
        try:
            from referencing.jsonschema import specification_with

            spec = specification_with(schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"),
                                      default=DEFAULT_SPEC[0])
            return resolver.in_subresource(spec.create_resource(schema))
        except TimeLimitError:
            raise
        except Exception:  # noqa: BLE001 - a malformed id keeps the old base
            return resolver
    return resolver


def local_target(root, resolver, ref: str):
    """``(contents, resolver)`` as ``resolver.lookup(ref)`` resolves a plain
    local reference, found by walking the document: None to ask
    ``referencing`` (whose answer, or error, is then the same as ever).

    ``root`` is ``(the root resolver, the schema registered at its base
    URI)``, given only for a schema without ``$dynamicRef`` or
    ``$recursiveRef`` (the only keywords that read the dynamic scope a
    lookup records), or None. A reference is walked here when the root
    resolver itself reads it, it is ``#`` or a ``#/`` JSON pointer without
    percent-escapes, and each step lands on an object with neither an
    ``$id`` nor an ``id`` key: ``Resource.pointer`` then finds the same
    object and keeps the base URI (an identifier, or a list or a scalar
    where it looks for one, is left to it, with its errors), and the
    resolver is the root one (``referencing`` returns a copy of it with the
    same base URI and registry). The lookups were ~18% of the tree phase
    over MaskBench's sample in process (cProfile), through ~17 functions
    that a fresh fork runs for the first time: a median schema with one
    ``$ref`` (MCPspec:24) built its tree with 120 -> 78 page faults, in
    children of one parent, with this and ``_References._search_start``."""
    if root is None or resolver is not root[0] or ref[:1] != "#":
        return None
    node = root[1]
    if ref == "#":
        return node, resolver
    if ref[1:2] != "/" or "%" in ref:
        return None
    for segment in ref[2:].split("/"):
        if "~" in segment:
            segment = segment.replace("~1", "/").replace("~0", "~")
        node = node.get(segment)
        if node.__class__ is not dict or "$id" in node or "id" in node:
            return None
    return node, resolver


# --- JSON values ----------------------------------------------------------------------

def json_key(value: Any):
    """A hashable key with JSON Schema equality (1 == 1.0, True != 1, key order ignored)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return ("num", repr(value))
        return ("num", Fraction(to_decimal(value)))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(json_key(v) for v in value))
    if isinstance(value, dict):
        return ("obj", frozenset((k, json_key(v)) for k, v in value.items()))
    return ("other", repr(value))


def type_key(value: Any) -> tuple:
    """What a ``type`` keyword can tell apart in a value: its Python type, and
    for a float whether it is integral (an ``integer`` from draft 6 on)."""
    return (type(value), value.is_integer() if isinstance(value, float) else None)


def type_of(value: Any) -> str:
    """The value's type among :data:`ALL_TYPES` (2.0 is an integer, as JSON Schema says)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "fraction"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _multiple(value, step) -> bool:
    ratio = Fraction(to_decimal(value)) / Fraction(to_decimal(step))
    return ratio.denominator == 1


# --- what the compiler writes ------------------------------------------------------------

# valid(value, sub) -> bool: whether a value satisfies a Sub (jsonschema for the user's JSON)
Valid = Callable[[Any, "Sub"], bool]


class Constraint:
    """Base of the constraints the compiler writes; see :func:`satisfied`."""

    __slots__ = ()

    def holds(self, value: Any, valid: Valid) -> bool:
        """Whether ``value`` satisfies this constraint (``valid`` checks nested subschemas)."""
        raise NotImplementedError


def satisfied(schema: Any, value: Any, valid: Valid) -> bool:
    """Whether ``value`` satisfies an internal schema: a bool, a :class:`Sub` or a :class:`Constraint`."""
    if isinstance(schema, bool):
        return schema
    if isinstance(schema, Sub):
        return valid(value, schema)
    return schema.holds(value, valid)


@dataclass(frozen=True)
class Types(Constraint):
    """The value's type is one of ``types`` (names of :data:`ALL_TYPES`)."""

    types: frozenset

    def holds(self, value, valid):
        return type_of(value) in self.types


@dataclass(frozen=True)
class NumberBound(Constraint):
    """A number at least (``lower``) or at most ``value``; other types pass."""

    value: Decimal
    lower: bool
    inclusive: bool

    def holds(self, value, valid):
        if not _is_number(value) or not math.isfinite(value):
            return True
        v, bound = Fraction(to_decimal(value)), Fraction(self.value)
        if v == bound:
            return self.inclusive
        return v > bound if self.lower else v < bound


@dataclass(frozen=True)
class MultipleOf(Constraint):
    """A number that ``step`` (a positive integer) divides; other types pass."""

    step: int

    def holds(self, value, valid):
        return not _is_number(value) or not math.isfinite(value) or _multiple(value, self.step)


@dataclass(frozen=True)
class NotMultipleOf(Constraint):
    """A number that ``step`` (a positive integer) does not divide; other types pass."""

    step: int

    def holds(self, value, valid):
        return not _is_number(value) or not math.isfinite(value) or not _multiple(value, self.step)


@dataclass(frozen=True)
class _Count(Constraint):
    minimum: int = 0
    maximum: int | None = None

    def _within(self, size: int) -> bool:
        return size >= self.minimum and (self.maximum is None or size <= self.maximum)


@dataclass(frozen=True)
class StringLength(_Count):
    """A string of ``minimum`` to ``maximum`` characters; other types pass."""

    def holds(self, value, valid):
        return not isinstance(value, str) or self._within(len(value))


@dataclass(frozen=True)
class ItemCount(_Count):
    """An array of ``minimum`` to ``maximum`` elements; other types pass."""

    def holds(self, value, valid):
        return not isinstance(value, list) or self._within(len(value))


@dataclass(frozen=True)
class PropertyCount(_Count):
    """An object of ``minimum`` to ``maximum`` members; other types pass."""

    def holds(self, value, valid):
        return not isinstance(value, dict) or self._within(len(value))


@dataclass(frozen=True)
class StringIn(Constraint):
    """A string whose canonical JSON text (quotes included) matches ``regex``: a negated pattern."""

    regex: str

    def holds(self, value, valid):
        if isinstance(value, str) and strs.holds_surrogate(value):
            raise UnsupportedSchemaError(f"the string {value[:60]!r} holds a lone surrogate, which a "
                                         "negated pattern (over characters) cannot be tested against")
        return (not isinstance(value, str)
                or re.fullmatch(self.regex, json.dumps(value, ensure_ascii=False)) is not None)


@dataclass(frozen=True)
class NotValues(Constraint):
    """None of these values (the negation of an ``enum``)."""

    values: tuple

    def holds(self, value, valid):
        return json_key(value) not in {json_key(v) for v in self.values}


@dataclass(frozen=True)
class Literals(Constraint):
    """One of these values (an ``enum`` the compiler wrote)."""

    values: tuple

    def holds(self, value, valid):
        return json_key(value) in {json_key(v) for v in self.values}


@dataclass(frozen=True)
class Required(Constraint):
    """An object with members of these names; other types pass."""

    names: tuple

    def holds(self, value, valid):
        return not isinstance(value, dict) or all(n in value for n in self.names)


@dataclass(frozen=True)
class Members(Constraint):
    """Each member of these names, when present, satisfies its schema (``properties``)."""

    properties: tuple      # (name, internal schema)

    def holds(self, value, valid):
        return not isinstance(value, dict) or all(
            satisfied(schema, value[name], valid) for name, schema in self.properties if name in value)


@dataclass(frozen=True)
class Elements(Constraint):
    """Element ``i`` satisfies ``prefix[i]``, the later ones ``items`` (None: anything)."""

    prefix: tuple
    items: Any = None

    def holds(self, value, valid):
        if not isinstance(value, list):
            return True
        for i, element in enumerate(value):
            schema = self.prefix[i] if i < len(self.prefix) else self.items
            if schema is not None and not satisfied(schema, element, valid):
                return False
        return True


@dataclass(frozen=True)
class Contains(Constraint):
    """An array with an element that satisfies ``schema``; other types pass."""

    schema: Any

    def holds(self, value, valid):
        return not isinstance(value, list) or any(satisfied(self.schema, e, valid) for e in value)


@dataclass(frozen=True)
class Unique(Constraint):
    """An array whose elements all differ (``uniqueItems``); other types pass."""

    def holds(self, value, valid):
        return not isinstance(value, list) or len({json_key(v) for v in value}) == len(value)


@dataclass(frozen=True, eq=False)
class Negated(Constraint):
    """The negation of a subschema: an item of a choice's alternative, or a schema itself."""

    sub: Sub

    def holds(self, value, valid):
        return not valid(value, self.sub)


@dataclass(frozen=True, eq=False)
class Conjunction(Constraint):
    """Every item holds (subschemas and negations): one alternative of a choice, as one schema."""

    items: tuple

    def holds(self, value, valid):
        return all(satisfied(item, value, valid) for item in self.items)


@dataclass(frozen=True, eq=False)
class SomeMember(Constraint):
    """The negation of an object's member schemas: *some* member breaks them.

    ``not {properties: P, patternProperties: PP, additionalProperties: A}``
    holds when the object has a member whose value violates the schemas
    that apply to its key. For a declared name that is a ``required``
    property with a negated value; for the other keys it is this: a member
    whose key is not in ``names`` and either matches ``pattern`` (when
    ``pattern`` is set) or, with ``others`` set, matches none of ``others``
    (the keys ``additionalProperties`` governs; ``others`` empty: any key),
    and whose value satisfies ``value`` (None: any value).

    ``not {propertyNames: S}`` is one too: a member, with any value, whose
    name breaks ``key_schema`` (S); then ``pattern`` and ``others`` are None.
    """

    names: frozenset
    pattern: str | None
    others: tuple | None
    value: "Sub | None"
    pointer: str
    key_schema: "Sub | None" = None

    def covers(self, name: str, matches, valid_name) -> bool:
        """Whether a member named ``name`` can be this witness (``matches(pattern, name)``,
        ``valid_name(name, schema)``)."""
        if name in self.names:
            return False
        if self.key_schema is not None:
            return not valid_name(name, self.key_schema)
        if self.pattern is not None:
            return matches(self.pattern, name)
        return not any(matches(p, name) for p in self.others)

    def holds(self, value, valid):
        if not isinstance(value, dict):
            return True

        def matches(pattern: str, name: str) -> bool:
            try:
                return strs.pattern_matches(pattern, name)
            except strs.PatternUnsupported:
                return True

        return any(self.covers(name, matches, valid)
                   and (self.value is None or valid(member, self.value))
                   for name, member in value.items())


# --- combinators still to split ------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """Alternatives, one of which must hold: each a conjunction of :class:`Sub` and :class:`Negated`.

    ``keyword`` (``anyOf``, ``oneOf``, ``if``, ``not``, ``dependentRequired``, ...)
    and ``pointer`` name it when it has too many branches to write.
    """

    keyword: str
    alternatives: tuple
    pointer: str


# --- everything a conjunction says about one value -------------------------------------------

@dataclass(frozen=True, eq=False, slots=True)
class ObjPart:
    """What one subschema says about an object's members.

    ``marker`` is the schema object and pointer it was read from: the keywords
    ``properties``, ``patternProperties`` and ``additionalProperties`` of one
    schema make one part, read once.
    """

    properties: dict
    patterns: dict
    additional: Sub | None      # None: absent (anything goes)
    pointer: str
    declares: bool = True       # False: constrains its names without moving them in the order
    marker: tuple | None = None


@dataclass(frozen=True, eq=False, slots=True)
class ArrPart:
    """What one subschema says about an array's elements: a prefix, then ``items``."""

    prefix: tuple
    items: Sub | None           # None: absent (anything goes)
    pointer: str


@dataclass(slots=True)
class Flat:
    """Everything a conjunction of subschemas says about one value."""

    types: frozenset = ALL_TYPES
    false: bool = False
    enum: list | None = None                  # allowed literals (None: no enum)
    not_values: list = field(default_factory=list)
    # numbers
    lo: Decimal | None = None
    lo_incl: bool = True
    hi: Decimal | None = None
    hi_incl: bool = True
    multiple_of: list = field(default_factory=list)    # (Decimal, pointer)
    not_multiple_of: list = field(default_factory=list)  # (int, pointer): must not divide
    # strings
    min_length: int = 0
    max_length: int | None = None
    patterns: list = field(default_factory=list)       # (pattern, pointer)
    formats: list = field(default_factory=list)        # (format, pointer)
    string_regexes: list = field(default_factory=list)  # (JSON-text regex, pointer): negated patterns
    # arrays
    min_items: int = 0
    max_items: int | None = None
    arr_parts: list = field(default_factory=list)      # ArrPart
    contains: list = field(default_factory=list)       # Sub: some element must satisfy it
    unique: str | None = None                          # uniqueItems: its pointer
    # objects
    required: list = field(default_factory=list)
    min_props: int = 0
    max_props: int | None = None
    obj_parts: list = field(default_factory=list)      # ObjPart
    property_names: list = field(default_factory=list)  # Sub
    witnesses: list = field(default_factory=list)      # SomeMember: some member must be one
    # combinators still to split, and negations to push down
    choices: list = field(default_factory=list)        # Choice
    nots: list = field(default_factory=list)           # Sub
    sources: list = field(default_factory=list)        # Sub, for the literal check
    negated: list = field(default_factory=list)        # Sub, for the literal check

    def copy(self) -> "Flat":
        """A copy whose lists can change without changing this flat's."""
        return _copy(self)

    def trivial(self) -> bool:
        """Constrains nothing: the generic value (every field as in ``Flat()``, bookkeeping aside)."""
        return _trivial(self)


# what says nothing about the value by itself: where it came from, inclusive flags of absent bounds
_BOOKKEEPING = frozenset({"false", "sources", "negated", "lo_incl", "hi_incl"})
_EMPTY = Flat()
# the field names, found once (dataclasses.fields() at every copy was a fifth of its cost)
_FLAT_FIELDS = tuple(f.name for f in fields(Flat))
# (field, its value in Flat()) for Flat.trivial, which every value asks
_TRIVIAL = tuple((name, getattr(_EMPTY, name)) for name in _FLAT_FIELDS if name not in _BOOKKEEPING)


def _flat_methods():
    """``Flat.copy``, ``Flat.trivial`` and ``Flat()`` (:func:`empty_flat`)
    written out field by field, as :mod:`dataclasses` writes ``__init__``
    (``exec`` once, at import). Read by name (``getattr``), each of the 30
    fields went through the generic attribute lookup, and each copy built a
    dict of their names and called ``Flat(**names)``; written out, each read
    and store is a specialised slot access. On MaskBench's median schemas
    (children of one parent switched between the two) the schema's tree
    took ~6 page faults fewer in a fresh fork and ~4% less time in process."""
    empty = Flat()
    lines = ["def copy(self):", "    new = _new(Flat)"]
    for name in _FLAT_FIELDS:
        lines += [f"    v = self.{name}", f"    new.{name} = list(v) if v.__class__ is list else v"]
    lines += ["    return new", "def trivial(self):",
              "    return (" + "\n            and ".join(f"self.{name} == _empty_{name}"
                                                       for name, _ in _TRIVIAL) + ")",
              "def empty_flat():", "    new = _new(Flat)"]
    for name in _FLAT_FIELDS:
        lines.append(f"    new.{name} = []" if getattr(empty, name).__class__ is list
                     else f"    new.{name} = _empty_{name}")
    lines.append("    return new")
    namespace = {"_new": object.__new__, "Flat": Flat,
                 **{f"_empty_{name}": getattr(empty, name) for name in _FLAT_FIELDS}}
    exec("\n".join(lines), namespace)
    return namespace["copy"], namespace["trivial"], namespace["empty_flat"]


_copy, _trivial, empty_flat = _flat_methods()
