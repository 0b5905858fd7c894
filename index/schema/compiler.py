"""The JSON Schema compiler proper: a conjunction of subschemas -> a regex.

Reading order: :class:`Sub` (a subschema with the resolver that reads its
``$ref``\\ s), :class:`Flat` (everything a conjunction of subschemas says about
one value, merged keyword by keyword), :class:`Compiler` (``value`` turns a
conjunction into a regex: flatten, split choices, negate, emit per type).

**Flattening** reads a conjunction the way a validator would, but merges by
meaning instead of evaluating: ``allOf`` parts and ``$ref`` targets are
absorbed into one :class:`Flat` (types intersected, bounds tightened,
``required`` united, property schemas collected per key), while ``anyOf``,
``oneOf``, ``if``/``then``/``else`` and dependencies become *choices*:
lists of alternatives that are split one after the other, each alternative
absorbed into a copy of the flat.

**Negation** (``not``, the ``else`` side of ``if``, the other branches of a
``oneOf``) is pushed down keyword by keyword: ``not {minLength: 3}`` is a
string of at most 2 characters, ``not {required: [a]}`` an object without
``a``, ``not {type: integer}`` anything but an integer, and ``not`` of a
conjunction is a choice between the negated keywords. ``not {pattern}`` is a
string in the difference of all strings and the pattern
(:mod:`tokendfa.analysis.algebra`); ``not {properties, patternProperties,
additionalProperties}`` is an object with a member that breaks them (a
declared one with a negated value, or an additional one: :class:`_Witness`);
``not {items: S}`` an array that contains ``not S``, ``not {prefixItems}``
one with a failing element at some prefix position, ``not {contains: C}``
one whose items are all ``not C``. A choice inside the negated schema
(``anyOf``, ``oneOf``, ``if``, dependencies) is negated as the conjunction
of its negated options, beside the other keywords' negations.
``not {multipleOf: k}`` (``k`` an integer) is a non-integer, or an integer
``k`` does not divide; ``not {propertyNames: S}`` an object with a member
whose name breaks ``S``. What has no such negation (``not {multipleOf}`` of a
fraction, ``not`` of ``items`` after a prefix) is reported.

**Literals** (``enum``/``const``) settle everything at once: the values are
checked against every subschema of the conjunction with the ``jsonschema``
validator (and against every negated one), and the regex lists the ones
that pass.

**Objects** list their declared properties in declared order, then the
properties ``required`` names but does not declare, then any additional
properties. Optional properties are chained so that the regex grows
linearly: ``H_i`` is "something was written, and we are after property
``i``", ``H_i = H_{i-1} (,p_i)? | p_i`` (the second branch only while no
required property came before). ``minProperties``/``maxProperties`` add a
count to the chain.

Recursion through ``$ref`` is unrolled ``max_recursion_depth`` times; past
that the reference is the empty schema ``false`` (an optional recursive
property is left out, a required one makes that branch impossible). The
generic value of ``{}`` nests arrays and objects ``any_depth`` levels deep.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..analysis import limits
from ..analysis.errors import TimeLimitError, UnsupportedSchemaError
from ..analysis.utf8 import SURROGATES
from . import numbers as nums
from ..analysis import algebra
from . import strings as strs
from .numbers import alternation

ALL_TYPES = frozenset({"null", "boolean", "integer", "fraction", "string", "array", "object"})
_JSON_TYPES = {
    "null": {"null"}, "boolean": {"boolean"}, "integer": {"integer"},
    "number": {"integer", "fraction"}, "string": {"string"}, "array": {"array"},
    "object": {"object"},
}
# The assertion keywords this compiler reads are the keys of _KEYWORDS (at the
# end); any other keyword is an annotation (title, description, default,
# examples, $comment, readOnly, contentMediaType, unknown keywords...) and
# asserts nothing, except these, which we cannot write (or only in part):
UNSUPPORTED = frozenset({
    "uniqueItems", "minContains", "maxContains", "$dynamicRef", "$recursiveRef",
})
MAX_CHOICES = 256
# A value regex this long, or longer, is written once and referred to by a
# placeholder: one of the 2,048 lone surrogates, which no JSON text holds.
SHARE_MIN_LENGTH = 2_000
PLACEHOLDER_BASE = SURROGATES[0]
MAX_DEFINITIONS = SURROGATES[1] - SURROGATES[0] + 1
MAX_KEY_REGIONS = 64       # disjoint key regions cut from overlapping patternProperties
MAX_UNIQUE_VALUES = 6       # uniqueItems over literals: 1,957 orderings of 6 values
MAX_SEVERAL_CONTAINS = 3   # several contains: 13 orderings of hits for 3, 75 for 4
MAX_PROPERTY_COUNT_CHAIN = 64


@dataclass(frozen=True, eq=False)
class Sub:
    """A subschema, where it stands, and how its ``$ref`` are read.

    ``refs`` is the chain of references followed to reach it (for the
    recursion bound); ``internal`` marks the small schemas the compiler
    writes itself (negations, dependencies), which the literal check skips.
    """

    schema: Any
    resolver: Any
    pointer: str
    refs: tuple = ()
    internal: bool = False

    def child(self, schema: Any, *path: str | int) -> "Sub":
        pointer = self.pointer + "".join("/" + str(p).replace("~", "~0").replace("/", "~1")
                                         for p in path)
        resolver = self.resolver
        if isinstance(schema, dict):
            resolver = _enter(resolver, schema)
        return Sub(schema, resolver, pointer, self.refs, self.internal)

    def derived(self, schema: Any) -> "Sub":
        """A schema the compiler wrote, read in this one's context."""
        return Sub(schema, self.resolver, self.pointer, self.refs, True)


def _enter(resolver, schema: dict):
    """The resolver inside a subschema that may change the base URI with ``$id``."""
    ident = schema.get("$id", schema.get("id"))
    if isinstance(ident, str) and not ident.startswith("#"):
        try:
            from referencing.jsonschema import specification_with

            spec = specification_with(schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"),
                                      default=_DEFAULT_SPEC[0])
            return resolver.in_subresource(spec.create_resource(schema))
        except TimeLimitError:
            raise
        except Exception:  # noqa: BLE001 - a malformed id keeps the old base
            return resolver
    return resolver


_DEFAULT_SPEC: list = [None]


def _json_key(value: Any):
    """A hashable key with JSON Schema equality (1 == 1.0, True != 1, key order ignored)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return ("num", repr(value))
        return ("num", Fraction(value) if isinstance(value, int) else Fraction(Decimal(repr(value))))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("arr", tuple(_json_key(v) for v in value))
    if isinstance(value, dict):
        return ("obj", frozenset((k, _json_key(v)) for k, v in value.items()))
    return ("other", repr(value))


def _type_of(value: Any) -> str:
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


@dataclass
class _ObjPart:
    """What one subschema says about an object's members."""

    properties: dict[str, Sub]
    patterns: dict[str, Sub]
    additional: Sub | None      # None: absent (anything goes)
    pointer: str
    declares: bool = True       # False: constrains its names without moving them in the order


@dataclass(frozen=True, eq=False)
class _Witness:
    """The negation of an object's member schemas: *some* member breaks them.

    ``not {properties: P, patternProperties: PP, additionalProperties: A}``
    holds when the object has a member whose value violates the schemas
    that apply to its key. For a declared name that is a ``required``
    property with a negated value; for the other keys it is this: a member
    whose key is not in ``names`` and either matches ``pattern`` (when
    ``pattern`` is set) or, with ``others`` set, matches none of ``others``
    (the keys ``additionalProperties`` governs; ``others`` empty: any key),
    and whose value satisfies ``value`` (None: any value).

    ``not {propertyNames: S}`` is a witness too: a member, with any value,
    whose name breaks ``key_schema`` (S); then ``pattern`` and ``others`` are None.
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


@dataclass
class _ArrPart:
    prefix: list[Sub]
    items: Sub | None           # None: absent (anything goes)
    pointer: str


@dataclass
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
    multiple_of: list = field(default_factory=list)    # (value, pointer)
    not_multiple_of: list = field(default_factory=list)  # integers that must not divide
    # strings
    min_length: int = 0
    max_length: int | None = None
    patterns: list = field(default_factory=list)       # (pattern, pointer)
    formats: list = field(default_factory=list)        # (format, pointer)
    string_regexes: list = field(default_factory=list)  # (JSON-text regex, pointer): negated patterns
    # arrays
    min_items: int = 0
    max_items: int | None = None
    arr_parts: list = field(default_factory=list)
    contains: list = field(default_factory=list)       # Sub: some element must satisfy it
    # objects
    required: list = field(default_factory=list)
    min_props: int = 0
    max_props: int | None = None
    obj_parts: list = field(default_factory=list)
    property_names: list = field(default_factory=list)
    witnesses: list = field(default_factory=list)      # _Witness: some member must be one
    # combinators still to split, and negations to push down
    choices: list = field(default_factory=list)        # (kind, [alternatives], pointer)
    nots: list = field(default_factory=list)           # Sub
    sources: list = field(default_factory=list)        # Sub, for the literal check
    negated: list = field(default_factory=list)        # Sub, for the literal check
    cut_refs: list = field(default_factory=list)
    unique: str | None = None                          # uniqueItems: its pointer

    def copy(self) -> "Flat":
        new = Flat(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        for name in ("not_values", "multiple_of", "not_multiple_of", "patterns", "formats",
                     "string_regexes", "arr_parts", "contains", "required", "obj_parts", "property_names", "witnesses", "choices", "nots", "sources", "negated",
                     "cut_refs"):
            setattr(new, name, list(getattr(self, name)))
        if self.enum is not None:
            new.enum = list(self.enum)
        return new


class _Widened(Exception):
    """Lenient mode dropped a constraint deep inside an emitter; its caller widens."""


class Layout:
    """Where whitespace goes: compact, flexible (bounded) or pretty (indented)."""

    def __init__(self, mode: str, max_whitespace: int, indent: int) -> None:
        self.mode = mode
        self.indent = indent
        self.ws = "" if mode != "flexible" else (
            f"[ \\t\\n\\r]{{0,{max_whitespace}}}" if max_whitespace > 0 else "")

    def _nl(self, depth: int) -> str:
        spaces = self.indent * depth
        return "\\n" + ("" if spaces == 0 else " " if spaces == 1 else f" {{{spaces}}}")

    def open(self, bracket: str, depth: int) -> str:
        if self.mode == "pretty":
            return bracket + self._nl(depth + 1)
        return bracket + self.ws

    def close(self, bracket: str, depth: int) -> str:
        if self.mode == "pretty":
            return self._nl(depth) + bracket
        return self.ws + bracket

    def empty(self, open_bracket: str, close_bracket: str) -> str:
        return open_bracket + self.ws + close_bracket

    def comma(self, depth: int) -> str:
        if self.mode == "pretty":
            return "," + self._nl(depth + 1)
        return self.ws + "," + self.ws

    def colon(self) -> str:
        if self.mode == "pretty":
            return ": "
        return self.ws + ":" + self.ws


def _opt(regex: str) -> str:
    return f"(?:{regex})?"


def _decimal(value) -> Decimal:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


class Compiler:
    """One compilation: options, the widenings so far, caches."""

    def __init__(self, *, draft: int, layout: Layout, lenient: bool, max_recursion_depth: int,
                 any_depth: int, validator_cls, registry, format_checker,
                 max_regex_length: int) -> None:
        self.draft = draft
        self.layout = layout
        self.lenient = lenient
        self.max_recursion_depth = max_recursion_depth
        self.any_depth = any_depth
        self.validator_cls = validator_cls
        self.registry = registry
        self.format_checker = format_checker
        self.max_regex_length = max_regex_length
        self.widenings: list[str] = []
        self.notes: list[str] = []
        self._any_cache: dict = {}
        self.generic_values_used = False  # a bounded-depth "any value" went into the regex
        self._validators: dict = {}
        # Shared pieces (see SchemaRegex): each value regex is computed once per
        # (subschemas, recursion counts), and a long one is written once, as a
        # placeholder. Off when the schema holds surrogates a placeholder could clash with.
        self.share = True
        self.definitions: dict[str, str] = {}
        self._placeholder_of: dict[str, str] = {}
        self._values: dict = {}

    # --- shared pieces -------------------------------------------------------------

    def _shared(self, regex: str | None) -> str | None:
        """``regex``, or the placeholder that stands for it when it is long."""
        if not self.share or regex is None or len(regex) < SHARE_MIN_LENGTH:
            return regex
        placeholder = self._placeholder_of.get(regex)
        if placeholder is None:
            if len(self.definitions) >= MAX_DEFINITIONS:
                return regex
            placeholder = chr(PLACEHOLDER_BASE + len(self.definitions))
            self.definitions[placeholder] = regex
            self._placeholder_of[regex] = placeholder
        return placeholder

    def _value_key(self, subs: list[Sub], depth: int):
        """What a value regex depends on: the schemas, their base URIs, the recursion counts."""
        return (depth if self.layout.mode == "pretty" else 0,) + tuple(
            (id(sub.schema), getattr(sub.resolver, "_base_uri", id(sub.resolver)),
             tuple(sorted(Counter(sub.refs).items())), sub.internal) for sub in subs)

    def used_definitions(self, regex: str | None) -> dict[str, str]:
        """The definitions ``regex`` reaches, directly or through other definitions."""
        used: dict[str, str] = {}
        pending = [regex or ""]
        while pending:
            for char in set(pending.pop()) & self.definitions.keys():
                if char not in used:
                    used[char] = self.definitions[char]
                    pending.append(used[char])
        return used

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

    def _check_size(self, regex: str | None, pointer: str) -> str | None:
        if regex is not None and len(regex) > self.max_regex_length:
            raise UnsupportedSchemaError(
                f"the regex for the schema at {pointer or '/'} exceeds {self.max_regex_length:,} "
                "characters (references expanded inline); raise max_regex_length or simplify")
        return regex

    # --- the entry point ---------------------------------------------------------

    def value(self, subs: list[Sub], depth: int) -> str | None:
        """Regex for a JSON value satisfying every subschema in ``subs`` (None: no value)."""
        if not self.share:
            return self._value(subs, depth)
        key = self._value_key(subs, depth)
        known = self._values.get(key)
        if known is not None:
            return known[1]
        # Only a $ref reaches the same schema objects twice, and what is reported
        # inside names the referenced schema's pointer, so nothing is lost here.
        regex = self._shared(self._value(subs, depth))
        self._values[key] = (tuple(subs), regex)  # holding subs keeps their ids unique
        return regex

    def _value(self, subs: list[Sub], depth: int) -> str | None:
        flat = Flat()
        for sub in subs:
            self.absorb(flat, sub)
            if flat.false:
                return None
        pointer = subs[0].pointer if subs else ""
        if _trivial(flat):
            return self.any_value(depth)
        return self._check_size(self._split(flat, depth, 0), pointer)

    def _split(self, flat: Flat, depth: int, fanout: int) -> str | None:
        if flat.false:
            return None
        if flat.enum is not None:
            return self.literals(flat, depth)
        if flat.nots:
            flat = flat.copy()
            negated = flat.nots.pop(0)
            flat.negated.append(negated)
            alternatives = self.negate(negated)
            flat.choices.insert(0, ("not", alternatives, negated.pointer))
        if flat.choices:
            kind, alternatives, pointer = flat.choices[0]
            if fanout + len(alternatives) > MAX_CHOICES:
                self.unsupported(kind, pointer, f"more than {MAX_CHOICES} combinations of "
                                 "anyOf/oneOf/not/if branches")
                rest = flat.copy()
                rest.choices.pop(0)
                return self._split(rest, depth, fanout)
            parts = []
            for alternative in alternatives:
                branch = flat.copy()
                branch.choices.pop(0)
                for item in alternative:
                    if isinstance(item, tuple) and item[0] == "not":
                        branch.nots.append(item[1])
                    else:
                        self.absorb(branch, item)
                    if branch.false:
                        break
                if not branch.false:
                    parts.append(self._split(branch, depth, fanout + len(alternatives)))
            return alternation(parts)
        return self.emit(flat, depth)

    # --- flattening ----------------------------------------------------------------

    def absorb(self, flat: Flat, sub: Sub) -> None:
        """Add what ``sub`` says to ``flat`` (following ``$ref`` and ``allOf``)."""
        schema = sub.schema
        if schema is True:
            return
        if schema is False:
            flat.false = True
            return
        if not isinstance(schema, dict):
            return
        if not sub.internal:
            flat.sources.append(sub)
        if "$ref" in schema and isinstance(schema["$ref"], str):
            target = self._follow(sub, schema["$ref"])
            if target is None:
                flat.false = True
                return
            self.absorb(flat, target)
            if self.draft <= 7:
                return  # siblings of $ref are ignored before 2019-09
        for keyword, value in schema.items():
            handler = _KEYWORDS.get(keyword)
            if handler is not None:
                handler(self, flat, sub, value)
            elif keyword in UNSUPPORTED:
                self._unsupported_keyword(flat, sub, keyword, value)
            if flat.false:
                return

    def _follow(self, sub: Sub, ref: str) -> Sub | None:
        from referencing import exceptions as refexc

        try:
            resolved = sub.resolver.lookup(ref)
        except (refexc.Unresolvable, refexc.Unretrievable, refexc.NoSuchResource,
                refexc.CannotDetermineSpecification, LookupError, ValueError, TypeError) as exc:
            # only what a lookup raises for a bad reference: anything else (an interrupt,
            # a caller's timeout raised from a signal handler) must pass through unchanged
            from ..analysis.errors import SchemaError

            raise SchemaError(f"cannot resolve $ref {ref!r} at {sub.pointer or '/'}: {exc}") from None
        key = id(resolved.contents)
        if sub.refs.count(key) > self.max_recursion_depth:
            self.note(f"recursive $ref {ref!r} at {sub.pointer or '/'} unrolled "
                      f"{self.max_recursion_depth} times; deeper values are not accepted")
            return None
        fragment = ref.partition("#")[2]
        pointer = fragment if ref.startswith("#") and fragment.startswith("/") else (
            fragment if ref.startswith("#") else ref)
        contents = resolved.contents
        resolver = resolved.resolver
        if isinstance(contents, dict):
            resolver = _enter(resolver, contents)
        return Sub(contents, resolver, pointer, sub.refs + (key,), sub.internal)

    def _unsupported_keyword(self, flat: Flat, sub: Sub, keyword: str, value) -> None:
        if keyword == "uniqueItems" and value is False:
            return
        if keyword == "uniqueItems":
            flat.choices.append(("uniqueItems", [[sub.derived({"x-unique": True})]], sub.pointer))
            return
        if keyword in ("minContains", "maxContains"):
            return  # meaningless without contains, reported with it
        self.unsupported(keyword, sub.pointer, "not expressible as a regex here")

    # --- literals --------------------------------------------------------------------

    def literals(self, flat: Flat, depth: int) -> str | None:
        excluded = {_json_key(v) for v in flat.not_values}
        parts = []
        for value in flat.enum:
            if _json_key(value) in excluded or _type_of(value) not in flat.types:
                continue
            if not all(self._valid(value, s) for s in flat.sources):
                continue
            # negations not yet split (flat.nots) count as much as those split already
            if any(self._valid(value, s) for s in flat.negated + flat.nots):
                continue
            parts.append(self.literal(value, depth))
        return alternation(parts)

    def _valid(self, value, sub: Sub) -> bool:
        key = id(sub)
        validator = self._validators.get(key)
        if validator is None:
            validator = self.validator_cls(sub.schema, registry=self.registry, _resolver=sub.resolver,
                                           format_checker=self.format_checker)
            self._validators[key] = (validator, sub)  # keep sub alive: its id stays unique
        else:
            validator = validator[0]
        limits.check()  # one validation per enum value, each scanning the enum: quadratic
        try:
            return validator.is_valid(value)
        except TimeLimitError:
            raise
        except Exception as exc:  # noqa: BLE001 - a validator crash is the schema's problem
            raise UnsupportedSchemaError(
                f"cannot check enum/const value {value!r} at {sub.pointer or '/'}: {exc}") from None

    def literal(self, value, depth: int) -> str:
        """Regex for one JSON value, written with the layout's whitespace."""
        layout = self.layout
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, (int, float)):
            return _number_literal(value)
        if isinstance(value, str):
            return strs.json_string_literal(value)
        if isinstance(value, list):
            if not value:
                return layout.empty("\\[", "\\]")
            inner = layout.comma(depth).join(self.literal(v, depth + 1) for v in value)
            return layout.open("\\[", depth) + inner + layout.close("\\]", depth)
        if isinstance(value, dict):
            if not value:
                return layout.empty("\\{", "\\}")
            inner = layout.comma(depth).join(
                strs.json_string_literal(k) + layout.colon() + self.literal(v, depth + 1)
                for k, v in value.items())
            return layout.open("\\{", depth) + inner + layout.close("\\}", depth)
        raise UnsupportedSchemaError(f"not a JSON value: {value!r}")

    # --- negation ----------------------------------------------------------------------

    def negate(self, sub: Sub) -> list[list]:
        """Alternatives whose union is the complement of ``sub`` (each a conjunction)."""
        flat = Flat()
        self.absorb(flat, sub)
        if flat.false:
            return [[]]
        if flat.enum is not None:
            # not (in E and R) = not in {e in E that satisfy R}
            kept = [v for v in flat.enum if all(self._valid(v, s) for s in flat.sources)
                    and not any(self._valid(v, s) for s in flat.negated + flat.nots)]
            return [[sub.derived({"x-not-values": kept})]]
        alternatives: list[list] = []
        for _, options, _ in flat.choices:
            # not (R and (A or B)) = not R or (not A and not B); each option of a choice
            # (anyOf, oneOf with its exclusions, if/then/else, dependencies) is a conjunction
            alternatives.append([("not", _conj_sub(sub, option)) for option in options])
        for nested in flat.nots:
            alternatives.append([nested])      # not not X = X
        pointer = sub.pointer
        if flat.types != ALL_TYPES:
            alternatives.append([sub.derived({"x-types": ALL_TYPES - flat.types})])
        d = sub.derived
        if flat.lo is not None:
            key = "maximum" if not flat.lo_incl else "exclusiveMaximum"
            alternatives.append([d({"x-types": {"integer", "fraction"}, key: flat.lo})])
        if flat.hi is not None:
            key = "minimum" if not flat.hi_incl else "exclusiveMinimum"
            alternatives.append([d({"x-types": {"integer", "fraction"}, key: flat.hi})])
        def widened(what: str, types: set) -> None:
            # lenient: the negation of what we cannot negate is widened to the whole type
            self.unsupported("not", pointer, f"negation of {what}")
            alternatives.append([d({"x-types": types})])

        for step, _ in flat.multiple_of:
            if step == step.to_integral_value():
                # not a multiple of an integer k: a non-integer, or an integer k does not divide
                alternatives.append([d({"x-types": {"fraction"}})])
                alternatives.append([d({"x-types": {"integer"}, "x-not-multiple-of": int(step)})])
            else:
                widened("multipleOf", {"integer", "fraction"})
        for k, _ in flat.not_multiple_of:
            alternatives.append([d({"x-types": {"integer"}, "multipleOf": k})])
        if flat.min_length > 0:
            alternatives.append([d({"x-types": {"string"}, "maxLength": flat.min_length - 1})])
        if flat.max_length is not None:
            alternatives.append([d({"x-types": {"string"}, "minLength": flat.max_length + 1})])
        if flat.patterns or flat.formats:
            # a string that fails one pattern or known format (canonical spelling, as under pattern)
            try:
                for pattern, _ in flat.patterns:
                    failing = algebra.difference(strs.canonical_string_regex(), strs.translate_pattern(pattern))
                    if failing is not None:
                        alternatives.append([d({"x-types": {"string"}, "x-string-regex": failing})])
                for name, _ in dict.fromkeys(flat.formats):
                    if name in strs.FORMATS:
                        failing = algebra.difference(strs.canonical_string_regex(), strs.format_regex(name))
                        if failing is not None:
                            alternatives.append([d({"x-types": {"string"}, "x-string-regex": failing})])
            except (strs.PatternUnsupported, algebra.NoExactRegex):
                widened("pattern" if flat.patterns else "format", {"string"})
        if flat.string_regexes:
            widened("not pattern", {"string"})
        if flat.min_items > 0:
            alternatives.append([d({"x-types": {"array"}, "maxItems": flat.min_items - 1})])
        if flat.max_items is not None:
            alternatives.append([d({"x-types": {"array"}, "minItems": flat.max_items + 1})])
        for part in flat.arr_parts:
            alternatives.extend(self._negate_elements(part, d, widened))
        if flat.unique is not None:
            self.unsupported("not", pointer, "negation of uniqueItems")
        for contained in flat.contains:
            # not contains C: every element fails C
            alternatives.append([d({"x-types": {"array"}, "items": {"not": _Embedded(contained)}})])
        for name in flat.required:
            alternatives.append([d({"x-types": {"object"}, "properties": {name: False}})])
        if flat.min_props > 0:
            alternatives.append([d({"x-types": {"object"}, "maxProperties": flat.min_props - 1})])
        if flat.max_props is not None:
            alternatives.append([d({"x-types": {"object"}, "minProperties": flat.max_props + 1})])
        for part in flat.obj_parts:
            alternatives.extend(self._negate_members(part, d))
        if flat.witnesses:
            widened("not patternProperties/additionalProperties", {"object"})
        for names_sub in flat.property_names:
            # not propertyNames S: some member's name breaks S
            witness = _Witness(frozenset(), None, None, None, names_sub.pointer, key_schema=names_sub)
            alternatives.append([d({"x-types": {"object"}, "x-some-member": witness})])
        if flat.not_values:
            alternatives.append([d({"enum": flat.not_values})])
        return alternatives

    def _negate_elements(self, part: "_ArrPart", derived, widened) -> list[list]:
        """Arrays with an element that breaks ``part``: at a prefix position, or after it."""
        alternatives = []
        for i, position in enumerate(part.prefix):
            if position.schema is True or position.schema == {}:
                continue    # no value breaks it
            prefix = [True] * i + [{"not": _Embedded(position)}]
            alternatives.append([derived({"x-types": {"array"}, "minItems": i + 1,
                                          "prefixItems": prefix})])
        rest = part.items
        if rest is not None and rest.schema is not True and rest.schema != {}:
            if part.prefix:
                # contains after a prefix is not written (see _array_contains)
                widened("items after prefixItems", {"array"})
            else:
                alternatives.append([derived({"x-types": {"array"},
                                              "contains": {"not": _Embedded(rest)}})])
        return alternatives

    def _negate_members(self, part: _ObjPart, derived) -> list[list]:
        """Objects with a member that breaks ``part`` (see :class:`_Witness`)."""
        alternatives = []
        names = frozenset(part.properties)
        for name, prop in part.properties.items():
            # a declared name: its value must satisfy its property and the patterns it matches
            applies = [prop] + [s for p, s in part.patterns.items()
                                if self._pattern_matches(p, name, part)]
            target = applies[0] if len(applies) == 1 else derived({"x-all": applies})
            alternatives.append([derived({"x-types": {"object"}, "required": [name],
                                          "properties": {name: {"not": _Embedded(target)}}})])

        def broken(schema_sub: Sub) -> Sub | None:
            return None if schema_sub.schema is False else derived({"not": _Embedded(schema_sub)})

        for pattern, schema_sub in part.patterns.items():
            if schema_sub.schema is True or schema_sub.schema == {}:
                continue    # a value cannot break it
            witness = _Witness(names, pattern, None, broken(schema_sub), part.pointer)
            alternatives.append([derived({"x-types": {"object"}, "x-some-member": witness})])
        additional = part.additional
        if additional is not None and additional.schema is not True and additional.schema != {}:
            witness = _Witness(names, None, tuple(part.patterns), broken(additional), part.pointer)
            alternatives.append([derived({"x-types": {"object"}, "x-some-member": witness})])
        return alternatives

    @staticmethod
    def _only_choices(flat: Flat) -> bool:
        return (flat.types == ALL_TYPES and flat.lo is None and flat.hi is None
                and not flat.multiple_of and not flat.not_multiple_of
                and flat.min_length == 0 and flat.max_length is None
                and not flat.patterns and not flat.formats and not flat.string_regexes
                and flat.min_items == 0
                and flat.max_items is None and not flat.arr_parts and not flat.contains
                and not flat.required
                and flat.min_props == 0 and flat.max_props is None and not flat.obj_parts
                and not flat.property_names and not flat.witnesses and not flat.nots
                and flat.unique is None
                and not flat.not_values)

    # --- emitting -------------------------------------------------------------------------

    def emit(self, flat: Flat, depth: int) -> str | None:
        types = flat.types
        parts: list[str | None] = []
        excluded = {_json_key(v) for v in flat.not_values}
        if "null" in types and ("null",) not in excluded:
            parts.append("null")
        if "boolean" in types:
            for word, value in (("true", True), ("false", False)):
                if ("bool", value) not in excluded:
                    parts.append(word)
        if types & {"integer", "fraction"}:
            parts.append(self._number(flat))
        if "string" in types:
            parts.append(self._string(flat))
        if "array" in types:
            parts.append(self._array(flat, depth))
        if "object" in types:
            parts.append(self._object(flat, depth))
        return alternation(parts)

    def _number(self, flat: Flat) -> str | None:
        regex = self._number_range(flat)
        if regex is None or not flat.not_multiple_of:
            return regex
        pointer = flat.not_multiple_of[0][1]
        if "fraction" in flat.types:
            self.unsupported("not", pointer, "negation of multipleOf on non-integers")
            return regex
        try:
            for k, pointer in flat.not_multiple_of:
                regex = algebra.intersect(regex, nums.integer_multiples_regex(k, complement=True))
                if regex is None:
                    return None
        except (nums.NumberUnsupported, algebra.NoExactRegex) as exc:
            self.unsupported("not", pointer, f"negation of multipleOf: {exc}")
        return regex

    def _number_range(self, flat: Flat) -> str | None:
        types = flat.types
        integer = "fraction" not in types
        nonint = "integer" not in types
        step = None
        pointer = flat.multiple_of[0][1] if flat.multiple_of else ""
        if flat.multiple_of:
            values = {v for v, _ in flat.multiple_of}
            step = max(values)
            if all(v == v.to_integral_value() for v in values):
                step = Decimal(math.lcm(*(int(v) for v in values)))    # divisible by all: by the lcm
            if any(Fraction(step) / Fraction(v) != int(Fraction(step) / Fraction(v)) for v in values):
                self.unsupported("multipleOf", pointer, "several multipleOf that do not divide each other")
        lo, hi = flat.lo, flat.hi
        excluded = sorted(Fraction(v) if not isinstance(v, float) else Fraction(Decimal(repr(v)))
                          for v in flat.not_values
                          if isinstance(v, (int, float)) and not isinstance(v, bool))
        try:
            if excluded and integer and step is None:
                # split the integer range around the excluded values
                pieces = []
                low = None if lo is None else nums._ceil(lo, flat.lo_incl)
                high = None if hi is None else nums._floor(hi, flat.hi_incl)
                cursor = low
                for v in excluded:
                    if v.denominator != 1:
                        continue
                    v = int(v)
                    if (cursor is None or v >= cursor) and (high is None or v <= high):
                        pieces.append(nums.integer_range_regex(cursor, v - 1))
                        cursor = v + 1
                pieces.append(nums.integer_range_regex(cursor, high))
                return alternation(pieces)
            if excluded and integer:
                # integers have one spelling each (and -0): take them out of the regex
                regex = nums.number_regex(lo=lo, lo_incl=flat.lo_incl, hi=hi, hi_incl=flat.hi_incl,
                                          integer=integer, multiple_of=step)
                spellings = [str(int(v)) for v in excluded if v.denominator == 1]
                spellings += ["-0"] if "0" in spellings else []
                if regex is None or not spellings:
                    return regex
                try:
                    return algebra.difference(regex, nums.literal_alternation(spellings))
                except algebra.NoExactRegex as exc:
                    raise nums.NumberUnsupported(f"excluding number values: {exc}") from None
            if excluded:
                self.unsupported("not", pointer or "", "excluding number values from a non-integer range")
            return nums.number_regex(lo=lo, lo_incl=flat.lo_incl, hi=hi, hi_incl=flat.hi_incl,
                                     integer=integer, multiple_of=step, nonzero_fraction=nonint)
        except nums.NumberUnsupported as exc:
            self.unsupported("multipleOf" if step is not None else "not", pointer, str(exc))
            return nums.number_regex(lo=lo, lo_incl=flat.lo_incl, hi=hi, hi_incl=flat.hi_incl,
                                     integer=integer, nonzero_fraction=nonint and lo is None and hi is None)

    def _string(self, flat: Flat) -> str | None:
        lo, hi = flat.min_length, flat.max_length
        strings = [v for v in flat.not_values if isinstance(v, str)]
        patterns = list(flat.patterns)
        formats = list(dict.fromkeys(flat.formats))
        known = [(f, p) for f, p in formats if f in strs.FORMATS]
        for name, pointer in formats:
            if name not in strs.FORMATS:
                self.note(f"format {name!r} at {pointer or '/'} is not checked (an annotation)")
        if len({f for f, _ in known}) > 1:
            self.unsupported("format", known[1][1], "several different formats")
            known = known[:1]
        # what the string must match, each a regex of canonical JSON text: intersected below
        musts: list[tuple[str | None, str, str]] = [   # (regex, keyword, pointer)
            (regex, "not", pointer) for regex, pointer in flat.string_regexes]
        lengths = lo > 0 or hi is not None
        length_keyword = "maxLength" if hi is not None else "minLength"
        if known:
            name, pointer = known[0]
            width = strs.FORMAT_WIDTHS.get(name)
            musts.append((strs.format_regex(name), "format", pointer))
            if lengths and width:
                if hi is not None and hi < width[0] or lo > width[1]:
                    return None
                lengths = not (lo <= width[0] and (hi is None or width[1] <= hi))
        for pattern, pointer in patterns:
            try:
                if not known and len(patterns) == 1 and lengths:
                    try:
                        # the lengths folded into the pattern's own repeat, when it has one
                        musts.append((strs.translate_pattern(pattern, lo, hi), "pattern", pointer))
                        lengths = False
                        continue
                    except strs.PatternUnsupported:
                        length_keyword = "pattern"
                musts.append((strs.translate_pattern(pattern), "pattern", pointer))
            except strs.PatternUnsupported as exc:
                self.unsupported("pattern", pointer, str(exc))
        if musts and lengths:
            musts.append((strs.canonical_string_regex(lo, hi), length_keyword, musts[0][2]))
        if musts:
            if any(regex is None for regex, _, _ in musts):
                return None
            base = musts[0][0]
            for regex, keyword, pointer in musts[1:]:
                try:
                    base = algebra.intersect(base, regex)
                except algebra.NoExactRegex as exc:
                    self.unsupported(keyword, pointer, f"no exact regex for {musts[0][1]} together "
                                     f"with {keyword}: {exc}")
                if base is None:
                    return None
        else:
            base = None
            if strings:
                if lo == 0 and hi is None:
                    return strs.keys_except(strings)
                self.unsupported("not", "", "excluding string values together with lengths")
            return strs.string_regex(lo, hi)
        if strings and base is not None:
            import re as _re

            taken = [v for v in strings if _re.fullmatch(base, json.dumps(v, ensure_ascii=False))]
            if taken:
                try:
                    base = algebra.difference(base, alternation([strs.json_string_literal(v) for v in taken]))
                except algebra.NoExactRegex as exc:
                    self.unsupported("not", "", f"excluding string values from a pattern or format: {exc}")
        return base

    # --- arrays ----------------------------------------------------------------------------

    def _array(self, flat: Flat, depth: int) -> str | None:
        lo, hi = flat.min_items, flat.max_items
        if hi is not None and hi < lo:
            return None
        if flat.unique is not None and (hi is None or hi > 1):
            return self._array_unique(flat, depth)
        parts = flat.arr_parts
        prefix_len = max((len(p.prefix) for p in parts), default=0)
        if hi is not None:
            prefix_len = min(prefix_len, hi)
        positions: list[str] = []
        for i in range(prefix_len):
            subs = []
            for part in parts:
                if i < len(part.prefix):
                    subs.append(part.prefix[i])
                elif part.items is not None:
                    subs.append(part.items)
            regex = self._element(subs, depth + 1)
            if regex is None:       # no value fits here: the array stops before
                hi = i if hi is None else min(hi, i)
                break
            positions.append(regex)
        if flat.contains:
            return self._array_contains(flat, positions, parts, lo, hi, depth)
        n = len(positions)
        rest = None
        if hi is None or hi > n:
            rest = self._element([p.items for p in parts if p.items is not None], depth + 1)
            if rest is None:
                hi = n
        if hi is not None and hi < lo:
            return None
        comma = self.layout.comma(depth)
        tail_lo = max(0, lo - n)
        tail_hi = None if hi is None else hi - n
        if n == 0:
            body = None
            if rest is not None and (tail_hi is None or tail_hi >= 1):
                body = rest + _repeat(comma + rest, max(0, tail_lo - 1),
                                      None if tail_hi is None else tail_hi - 1)
            return self._container("\\[", "\\]", body, lo == 0, depth)
        body = "" if rest is None else _repeat(comma + rest, tail_lo, tail_hi)
        for i in range(n - 1, 0, -1):
            segment = comma + positions[i] + body
            body = segment if i < lo else _opt(segment)
        body = positions[0] + body
        return self._container("\\[", "\\]", body, lo == 0, depth)

    def _array_unique(self, flat: Flat, depth: int) -> str | None:
        """``uniqueItems`` where the items are a few literals (an ``enum``, ``const``).

        Arrays of distinct values from a finite set: each value once at most,
        in any order, so the regex lists the orderings as a tree (``a(,b(,c)?|,c(,b)?)?|...``).
        It grows like the number of orderings: up to MAX_UNIQUE_VALUES values.
        Items that allow infinitely many values have no such regex (equal strings
        would have to be compared) and are reported.
        """
        pointer = flat.unique
        parts = flat.arr_parts
        values = None
        if not flat.contains and not any(p.prefix for p in parts):
            values = self._finite_values([p.items for p in parts if p.items is not None])
        if values is None or len(values) > MAX_UNIQUE_VALUES:
            self.unsupported("uniqueItems", pointer, "not expressible as a regex (items must differ; "
                             f"only items with at most {MAX_UNIQUE_VALUES} literal values are written)")
            flat = flat.copy()
            flat.unique = None
            return self._array(flat, depth)
        lo, hi = flat.min_items, flat.max_items
        hi = len(values) if hi is None else min(hi, len(values))
        if lo > hi:
            return None
        texts = [self.literal(v, depth + 1) for v in values]
        comma = self.layout.comma(depth)
        memo: dict = {}

        def rest(left: frozenset, count: int) -> str | None:
            """After ``count`` elements, with the values ``left`` still unused."""
            key = (left, count)
            if key not in memo:
                options = []
                if count < hi:
                    for i in sorted(left):
                        tail = rest(left - {i}, count + 1)
                        head = (comma if count else "") + texts[i]
                        options.append(head if tail is None else
                                       head + (f"(?:{tail})?" if count + 1 >= lo else f"(?:{tail})"))
                memo[key] = alternation(options)
                if memo[key] is not None and len(memo[key]) > algebra.MAX_LENGTH:
                    self.unsupported("uniqueItems", pointer, "the orderings of the distinct values "
                                     f"would exceed {algebra.MAX_LENGTH:,} characters")
            return memo[key]

        body = rest(frozenset(range(len(values))), 0)
        return self._container("\\[", "\\]", body, lo == 0, depth)

    def _finite_values(self, subs: list[Sub]) -> list | None:
        """The values ``subs`` all accept, if they are a listed few (``enum``, ``const``), else None."""
        flat = Flat()
        for sub in subs:
            self.absorb(flat, sub)
        if flat.false:
            return []
        candidates = flat.enum
        if candidates is None and flat.types <= {"boolean", "null"}:
            candidates = [True, False, None]
        if candidates is None:
            return None
        excluded = {_json_key(v) for v in flat.not_values}
        values, seen = [], set()
        for value in candidates:
            key = _json_key(value)
            if key in excluded or key in seen or _type_of(value) not in flat.types:
                continue
            if not all(self._valid(value, s) for s in flat.sources):
                continue
            if any(self._valid(value, s) for s in flat.negated + flat.nots):
                continue
            seen.add(key)
            values.append(value)
        return values

    def _array_contains(self, flat: Flat, positions, parts, lo: int, hi: int | None,
                        depth: int) -> str | None:
        """Arrays with ``contains``: some element (after a run of any) satisfies it too."""
        pointer = flat.contains[0].pointer
        if len(flat.contains) > 1 and not (any(p.prefix for p in parts) or positions):
            return self._array_contains_several(flat, parts, lo, hi, depth)
        if len(flat.contains) > 1 or any(p.prefix for p in parts) or positions:
            self.unsupported("contains", pointer, "contains with prefixItems or several contains")
            flat = flat.copy()
            flat.contains = []
            return self._array(flat, depth)
        if hi is not None and hi > 8:
            self.unsupported("contains", pointer, "contains with maxItems over 8")
            flat = flat.copy()
            flat.contains = []
            return self._array(flat, depth)
        items = [p.items for p in parts if p.items is not None]
        element = self._element(items, depth + 1)
        hit = self.value(items + flat.contains, depth + 1)
        if hit is None:
            return None
        comma = self.layout.comma(depth)
        bodies = []
        lo = max(lo, 1)
        if element is None:     # only the hit itself fits nowhere else: impossible
            return None
        if hi is None:
            # a elements before the hit, then at least lo - 1 - a after
            for before in range(lo):
                bodies.append(_repeat(element + comma, before, before) + hit
                              + _repeat(comma + element, lo - 1 - before, None))
            bodies.append(_repeat(element + comma, lo, None) + hit + _repeat(comma + element, 0, None))
        else:
            for before in range(hi):
                after_lo, after_hi = max(0, lo - 1 - before), hi - 1 - before
                if after_lo <= after_hi:
                    bodies.append(_repeat(element + comma, before, before) + hit
                                  + _repeat(comma + element, after_lo, after_hi))
        return self._container("\\[", "\\]", alternation(bodies), False, depth)

    def _array_contains_several(self, flat: Flat, parts, lo: int, hi: int | None,
                                depth: int) -> str | None:
        """Arrays with several ``contains`` (no prefix, no maxItems, minItems <= 1).

        Every ``contains`` needs a hit; one element may be the hit of several.
        The hits, in array order, are an ordered partition of the ``contains``
        (3 for two of them, 13 for three), and any elements fill the gaps:
        ``(E,)* H_1 (,E)* ,H_2 (,E)* ...``.
        """
        pointer = flat.contains[0].pointer
        if len(flat.contains) > MAX_SEVERAL_CONTAINS or hi is not None or lo > 1:
            self.unsupported("contains", pointer, f"several contains with maxItems, minItems > 1 "
                             f"or more than {MAX_SEVERAL_CONTAINS} of them")
            flat = flat.copy()
            flat.contains = flat.contains[:1]
            return self._array(flat, depth)
        items = [p.items for p in parts if p.items is not None]
        element = self._element(items, depth + 1)
        if element is None:
            return None
        comma = self.layout.comma(depth)
        hits: dict[frozenset, str | None] = {}

        def hit(group: frozenset) -> str | None:
            if group not in hits:
                hits[group] = self.value(items + [flat.contains[i] for i in sorted(group)], depth + 1)
            return hits[group]

        def orderings(left: frozenset):
            # ordered partitions of ``left`` into non-empty groups
            if not left:
                yield []
                return
            members = sorted(left)
            for mask in range(1, 1 << len(members)):
                group = frozenset(m for b, m in enumerate(members) if mask >> b & 1)
                for rest in orderings(left - group):
                    yield [group] + rest

        gap = _repeat(comma + element, 0, None)
        bodies = []
        for groups in orderings(frozenset(range(len(flat.contains)))):
            regexes = [hit(g) for g in groups]
            if any(r is None for r in regexes):
                continue
            bodies.append(_repeat(element + comma, 0, None) + regexes[0]
                          + "".join(gap + comma + r for r in regexes[1:]) + gap)
        return self._container("\\[", "\\]", alternation(bodies), False, depth)

    def _element(self, subs: list[Sub], depth: int) -> str | None:
        if not subs:
            return self._shared(self.any_value(depth))  # as value() writes it, so they compare
        return self.value(subs, depth)

    def _container(self, open_b: str, close_b: str, body: str | None, can_be_empty: bool,
                   depth: int) -> str | None:
        layout = self.layout
        parts = []
        if body is not None:
            parts.append(layout.open(open_b, depth) + body + layout.close(close_b, depth))
        if can_be_empty:
            parts.append(layout.empty(open_b, close_b))
        return alternation(parts)

    # --- objects ------------------------------------------------------------------------------

    def _object(self, flat: Flat, depth: int) -> str | None:
        if flat.witnesses:
            return self._object_with_witness(flat, depth)
        return self._object_members(flat, depth, None)

    @staticmethod
    def _declared(flat: Flat) -> list[str]:
        """Member names in the order the regex writes them (properties, then required)."""
        declared: list[str] = []
        for part in flat.obj_parts:
            if part.declares:
                for name in part.properties:
                    if name not in declared:
                        declared.append(name)
        for name in flat.required:
            if name not in declared:
                declared.append(name)
        return declared

    def _object_with_witness(self, flat: Flat, depth: int) -> str | None:
        """An object with a member that breaks a negated schema (:class:`_Witness`).

        The member is either one of the declared names (then it is required
        and its value satisfies the witness too) or one of the additional
        members (written after the declared ones, at least one of them a witness).
        """
        witness = flat.witnesses[0]
        base = flat.copy()
        base.witnesses = []
        if len(flat.witnesses) > 1:
            self.unsupported("not", flat.witnesses[1].pointer,
                             "several negated patternProperties/additionalProperties on one object")
        if base.min_props > 0 or base.max_props is not None:
            self.unsupported("not", witness.pointer, "negated patternProperties/additionalProperties "
                             "together with minProperties/maxProperties")
            return self._object_members(base, depth, None)

        def matches(pattern: str, name: str) -> bool:
            try:
                return strs.pattern_matches(pattern, name)
            except strs.PatternUnsupported as exc:
                self.unsupported("not", witness.pointer, str(exc))
                return True

        alternatives = []
        for name in self._declared(base):
            if witness.covers(name, matches, self._valid):
                branch = base.copy()
                if name not in branch.required:
                    branch.required.append(name)
                if witness.value is not None:
                    branch.obj_parts.append(_ObjPart({name: witness.value}, {}, None, witness.pointer,
                                                     declares=False))
                alternatives.append(self._object_members(branch, depth, None))
        try:
            alternatives.append(self._object_members(base, depth, witness))
        except _Widened:
            return self._object_members(base, depth, None)   # lenient: the witness dropped
        return alternation(alternatives)

    def _object_members(self, flat: Flat, depth: int, witness: "_Witness | None") -> str | None:
        parts: list[_ObjPart] = flat.obj_parts
        declared = self._declared(flat)
        required = set(flat.required)
        names_subs = flat.property_names
        entries = []          # (key regex, value regex, required)
        excluded = []
        for name in declared:
            if names_subs and not all(self._valid(name, s) for s in names_subs):
                if name in required:
                    return None
                excluded.append(name)
                continue
            subs = []
            for part in parts:
                # patternProperties apply to declared properties too; additionalProperties does not
                matched = [s for p, s in part.patterns.items() if self._pattern_matches(p, name, part)]
                subs.extend(matched)
                if name in part.properties:
                    subs.append(part.properties[name])
                elif not matched and part.additional is not None:
                    subs.append(part.additional)
            value = self._element(subs, depth + 1)
            excluded.append(name)
            if value is None:
                if name in required:
                    return None
                continue
            entries.append((strs.json_string_literal(name), value, name in required))
        kinds = self._extras(flat, parts, excluded, depth)
        extra = [(key, self._element(subs, depth + 1)) for key, subs, _ in kinds]
        extra = [(key, value) for key, value in extra if key is not None and value is not None]
        if witness is None:
            return self._members(entries, extra, flat.min_props, flat.max_props, depth)
        witnessed = []
        for key, subs, kind in kinds:
            key = self._witness_key(key, kind, witness, excluded)
            if key is not None:
                value = self._element(subs + ([witness.value] if witness.value is not None else []),
                                      depth + 1)
                if value is not None:
                    witnessed.append((key, value))
        return self._members(entries, extra, flat.min_props, flat.max_props, depth, witnessed)

    def _witness_key(self, key: str | None, kind: tuple, witness: "_Witness",
                     excluded: list[str]) -> str | None:
        """The keys of additional members (``key``, described by ``kind``) that can be the witness.

        Raises :class:`_Widened` in lenient mode where the intersection has no exact regex.
        """
        if key is None:
            return None
        try:
            if witness.key_schema is not None:
                # canonical spellings only: "\u0061" is the name "a", which may well fit
                fitting = self._key([witness.key_schema], [], witness.pointer)
                keys = strs.canonical_string_regex()
                if fitting is not None:
                    keys = algebra.difference(keys, fitting)
            elif witness.pattern is not None:
                keys = strs.translate_pattern(witness.pattern)
            elif witness.others:
                keys = _keys_matching_none(list(witness.others))
            else:
                keys = strs.keys_except([])
            if keys is not None and kind[0] != "except":
                keys = algebra.intersect(key, keys)
            # declared names (of this object and of the negated schema) are witnesses elsewhere
            avoid = sorted(set(witness.names) | set(kind[1] if kind[0] == "except" else ()))
            if keys is not None and avoid:
                keys = algebra.difference(keys, alternation([strs.json_string_literal(n) for n in avoid]))
            return keys
        except (strs.PatternUnsupported, algebra.NoExactRegex):
            pass
        self.unsupported("not", witness.pointer, "negated patternProperties/additionalProperties: "
                         "no exact regex for the keys that break them")
        raise _Widened()

    def _pattern_matches(self, pattern: str, name: str, part: _ObjPart) -> bool:
        try:
            return strs.pattern_matches(pattern, name)
        except strs.PatternUnsupported as exc:
            self.unsupported("patternProperties", part.pointer, str(exc))
            return False

    def _extras(self, flat: Flat, parts: list[_ObjPart], excluded: list[str], depth: int):
        """Undeclared members: ``(key regex, value subschemas, kind)`` alternatives, or [].

        ``kind`` says which keys the regex takes, for :meth:`_witness_key`:
        ``("except", names)`` every key but ``names``; ``("pattern", p)`` the
        keys that match ``p``; ``("complement", p)`` those that do not;
        ``("other",)`` anything else (``propertyNames``).
        """
        with_patterns = [p for p in parts if p.patterns]
        closed = any(p.additional is not None and p.additional.schema is False and not p.patterns
                     for p in parts)
        if closed:
            return []
        key_subs = flat.property_names
        every_key = ("other",) if key_subs else ("except", tuple(excluded))
        if not with_patterns:
            subs = [p.additional for p in parts if p.additional is not None]
            if self._element(subs, depth + 1) is None:
                return []
            return [(self._key(key_subs, excluded, parts[0].pointer if parts else ""), subs, every_key)]
        if len(with_patterns) > 1:
            self.unsupported("patternProperties", with_patterns[1].pointer,
                             "patternProperties in more than one subschema of an allOf")
        part = with_patterns[0]
        others = [p.additional for p in parts if p is not part and p.additional is not None]
        pieces = []
        for pattern, sub in part.patterns.items():
            try:
                key = strs.translate_pattern(pattern)
            except strs.PatternUnsupported as exc:
                self.unsupported("patternProperties", part.pointer, str(exc))
                continue
            if key is None:
                continue
            kind = ("pattern", pattern)
            if regex_subset(strs.keys_except([]), key):
                # the pattern takes every key (".*"): the extras are every undeclared key
                key, kind = strs.keys_except(excluded), ("except", tuple(excluded))
            elif any(self._pattern_matches(pattern, name, part) for name in excluded):
                # the declared names are written with the declared members, not again here
                names = alternation([strs.json_string_literal(n) for n in excluded])
                try:
                    key = algebra.difference(key, names)
                except algebra.NoExactRegex as exc:
                    self.unsupported("patternProperties", part.pointer,
                                     f"pattern {pattern!r} also matches a declared property name ({exc})")
                if key is None:
                    continue
            if key_subs:
                self.unsupported("propertyNames", part.pointer, "propertyNames with patternProperties")
            value = self._element([sub] + others, depth + 1)
            pieces.append((key, value, pattern, [sub] + others, kind))
        patterns = [pattern for _, _, pattern, _, _ in pieces]
        if len(pieces) > 1 and len({v for _, v, _, _, _ in pieces}) > 1 \
                and not self._disjoint_keys([k for k, _, _, _, _ in pieces]):
            pieces = self._key_regions(pieces, others, part.pointer, depth)
        additional = part.additional
        result = [(k, subs, kind) for k, v, _, subs, kind in pieces if v is not None]
        if (additional is None or additional.schema is not False) and any(
                key == strs.keys_except(excluded) for key, _, _, _, _ in pieces):
            return result           # a pattern such as ".*" matches every key
        if additional is None or additional.schema is not False:
            # keys that match no pattern: need the complement of the patterns
            rest_subs = ([additional] if additional is not None else []) + others
            value = self._element(rest_subs, depth + 1)
            if len(patterns) == 1 and not key_subs and all(
                    self._pattern_matches(patterns[0], name, part) for name in excluded):
                rest = strs.pattern_complement(patterns[0])
                if rest is not None:
                    return result + ([(rest, rest_subs, ("complement", patterns[0]))]
                                     if value is not None else [])
            anything = self._element([], depth + 1)
            if len(result) == len(pieces) and all(v == anything for _, v, _, _, _ in pieces) \
                    and value == anything:
                return [(self._key(key_subs, excluded, part.pointer), [], every_key)]
            if value is None and len(result) == len(pieces):
                return result
            if not key_subs and value is not None:
                try:
                    rest = _keys_matching_none(patterns)
                    if rest is not None and excluded:
                        rest = algebra.difference(rest, alternation([strs.json_string_literal(n)
                                                              for n in excluded]))
                    kind = ("complement", patterns[0]) if len(patterns) == 1 else ("other",)
                    return result + ([(rest, rest_subs, kind)] if rest is not None else [])
                except (algebra.NoExactRegex, strs.PatternUnsupported):
                    pass
            self.unsupported("additionalProperties" if additional is not None else "patternProperties",
                             part.pointer,
                             "properties that match no pattern (or a pattern whose schema is false) "
                             "would need the complement of the patterns")
            if value is not None:
                result.append((self._key(key_subs, excluded, part.pointer), rest_subs, ("other",)))
        return result

    def _key_regions(self, pieces: list, others: list[Sub], pointer: str, depth: int) -> list:
        """Overlapping patterns cut into disjoint key regions, each with every schema that applies.

        A key that matches several patterns must satisfy all their schemas, so
        the keys are split by which patterns they match (intersections and
        differences of the key regexes); one member alternative per non-empty
        region, its value held to the union of the schemas.
        """
        regions: list[tuple[str, list[int]]] = []
        try:
            for i, (key, *_rest) in enumerate(pieces):
                refined, alone = [], key
                for region, members in regions:
                    both = algebra.intersect(region, key)
                    if both is None:
                        refined.append((region, members))
                        continue
                    refined.append((both, members + [i]))
                    left = algebra.difference(region, key)
                    if left is not None:
                        refined.append((left, members))
                    if alone is not None:
                        alone = algebra.difference(alone, region)
                if alone is not None:
                    refined.append((alone, [i]))
                regions = refined
                if len(regions) > MAX_KEY_REGIONS:
                    raise algebra.NoExactRegex(f"more than {MAX_KEY_REGIONS} key regions")
        except algebra.NoExactRegex as exc:
            self.unsupported("patternProperties", pointer,
                             f"overlapping patterns with different schemas ({exc})")
            return pieces
        split = []
        for region, members in regions:
            subs = [pieces[i][3][0] for i in members] + others
            same = len(members) == 1 and region == pieces[members[0]][0]
            kind = pieces[members[0]][4] if same else ("other",)
            split.append((region, self._element(subs, depth + 1), None, subs, kind))
        return split

    def _key(self, key_subs: list[Sub], excluded: list[str], pointer: str) -> str:
        if not key_subs:
            return strs.keys_except(excluded)
        flat = Flat()
        for sub in key_subs:
            self.absorb(flat, sub)
        if flat.false:
            return None
        if flat.choices or flat.nots or flat.enum is not None:
            if flat.enum is not None and not flat.choices and not flat.nots:
                names = [v for v in flat.enum if isinstance(v, str) and v not in excluded
                         and all(self._valid(v, s) for s in key_subs)]
                return alternation([strs.json_string_literal(v) for v in names])
            self.unsupported("propertyNames", pointer, "propertyNames with combinators")
            return strs.keys_except(excluded)
        flat.types = frozenset({"string"})
        regex = self._string(flat)
        if regex is None:
            return None
        import re as _re

        if any(_re.fullmatch(regex, json.dumps(n, ensure_ascii=False)) for n in excluded):
            if flat.patterns or flat.formats:
                self.unsupported("propertyNames", pointer,
                                 "a declared property name also fits propertyNames")
            elif flat.min_length == 0 and flat.max_length is None:
                return strs.keys_except(excluded)
            else:
                self.unsupported("propertyNames", pointer,
                                 "propertyNames lengths together with declared properties")
        return regex

    def _disjoint_keys(self, regexes: list[str]) -> bool:
        return all(regex_disjoint(a, b) for i, a in enumerate(regexes) for b in regexes[i + 1:])

    # --- oneOf: which branches can never hold together ----------------------------------

    def disjoint(self, a: Sub, b: Sub, context: Flat) -> bool:
        """True when no value satisfies both ``a`` and ``b`` (a sound, partial test).

        Only the keywords at the top of each branch are compared (after
        ``$ref`` and ``allOf``); nested choices can only make a branch
        smaller, so they never make a "disjoint" answer wrong.
        """
        try:
            fa, fb = Flat(), Flat()
            fa.types = fb.types = context.types
            self.absorb(fa, a)
            self.absorb(fb, b)
        except UnsupportedSchemaError:
            return False
        return self._flats_disjoint(fa, fb)

    def _flats_disjoint(self, fa: Flat, fb: Flat) -> bool:
        if fa.false or fb.false:
            return True
        common = fa.types & fb.types
        if not common:
            return True
        for first, second in ((fa, fb), (fb, fa)):
            if first.enum is not None:
                try:
                    return not any(_type_of(v) in common
                                   and all(self._valid(v, s) for s in second.sources)
                                   and all(self._valid(v, s) for s in first.sources)
                                   for v in first.enum)
                except UnsupportedSchemaError:
                    return False
        return all(self._type_disjoint(t, fa, fb) for t in common)

    def _type_disjoint(self, t: str, fa: Flat, fb: Flat) -> bool:
        if t in ("integer", "fraction"):
            return _ranges_disjoint((fa.lo, fa.lo_incl, fa.hi, fa.hi_incl),
                                    (fb.lo, fb.lo_incl, fb.hi, fb.hi_incl))
        if t == "string":
            return (fa.max_length is not None and fa.max_length < fb.min_length
                    or fb.max_length is not None and fb.max_length < fa.min_length)
        if t == "array":
            return (fa.max_items is not None and fa.max_items < fb.min_items
                    or fb.max_items is not None and fb.max_items < fa.min_items)
        if t == "object":
            if (fa.max_props is not None and fa.max_props < fb.min_props
                    or fb.max_props is not None and fb.max_props < fa.min_props):
                return True
            for first, second in ((fa, fb), (fb, fa)):
                for name in first.required:
                    if self._forbids(second, name):
                        return True
                    if name in second.required and self._values_disjoint(first, second, name):
                        return True
            return False
        return False

    @staticmethod
    def _forbids(flat: Flat, name: str) -> bool:
        for part in flat.obj_parts:
            if name in part.properties:
                if part.properties[name].schema is False:
                    return True
                continue
            if part.patterns:
                continue
            if part.additional is not None and part.additional.schema is False:
                return True
        return False

    def _values_disjoint(self, fa: Flat, fb: Flat, name: str) -> bool:
        subs_a = [p.properties[name] for p in fa.obj_parts if name in p.properties]
        subs_b = [p.properties[name] for p in fb.obj_parts if name in p.properties]
        if not subs_a or not subs_b:
            return False
        try:
            va, vb = Flat(), Flat()
            for s in subs_a:
                self.absorb(va, s)
            for s in subs_b:
                self.absorb(vb, s)
        except UnsupportedSchemaError:
            return False
        return self._flats_disjoint(va, vb)

    def _members(self, entries, extras, min_props: int, max_props: int | None,
                 depth: int, witnessed: list | None = None) -> str | None:
        """The object: declared members in order (O(k) regex), then extra members.

        With ``witnessed`` (``(key, value)`` regexes, each within some extra
        member), at least one of the extra members must be one of those.
        """
        layout = self.layout
        comma = layout.comma(depth)
        colon = layout.colon()
        if max_props is not None and max_props < min_props:
            return None
        n_required = sum(1 for _, _, r in entries if r)
        if max_props is not None and n_required > max_props:
            return None
        members = [(k + colon + v, r) for k, v, r in entries]
        extra = alternation([k + colon + v for k, v in extras if k is not None]) if extras else None
        counting = min_props > 0 or max_props is not None
        if not counting:
            chain: str | None = None     # at least one member written, after the members so far
            seen_required = False
            for member, req in members:
                if chain is None:
                    chain = member
                else:
                    step = chain + (comma + member if req else _opt(comma + member))
                    # unless a required member came before, this one may be the first written
                    chain = step if seen_required else alternation([step, member])
                seen_required = seen_required or req
            bodies = []
            if witnessed is not None:
                # some extra member is a witness: extras, the witness, extras
                hit = alternation([k + colon + v for k, v in witnessed])
                if hit is None or extra is None:
                    return None
                around = f"(?:{comma}{extra})*"
                if chain is not None:
                    bodies.append(chain + around + comma + hit + around)
                if not seen_required:
                    bodies.append(f"(?:{extra}{comma})*" + hit + around)
                return self._container("\\{", "\\}", alternation(bodies), False, depth)
            if chain is not None:
                bodies.append(chain + (f"(?:{comma}{extra})*" if extra else ""))
            if extra and not seen_required:
                bodies.append(f"{extra}(?:{comma}{extra})*")
            return self._container("\\{", "\\}", alternation(bodies), not seen_required, depth)
        # with a count: chains[c] = written exactly c members (c capped at cap)
        cap = len(members)
        if cap > MAX_PROPERTY_COUNT_CHAIN:
            self.unsupported("maxProperties" if max_props is not None else "minProperties", "",
                             f"property counts on an object of more than {MAX_PROPERTY_COUNT_CHAIN} properties")
            return self._members(entries, extras, 0, None, depth)
        chains: dict[int, str] = {}
        seen_required = False
        for member, req in members:
            new: dict[int, list[str]] = {}
            for c, regex in chains.items():
                new.setdefault(c + 1, []).append(regex + comma + member)
                if not req:
                    new.setdefault(c, []).append(regex)
            if not seen_required:
                new.setdefault(1, []).append(member)
            seen_required = seen_required or req
            merged: dict[int, list[str]] = {}
            for c, rs in new.items():
                if max_props is not None and c > max_props:
                    continue
                # without a maximum, every count past the minimum behaves alike
                merged.setdefault(c if max_props is not None else min(c, max(min_props, 1)), []).extend(rs)
            chains = {c: alternation(rs) for c, rs in merged.items()}
        bodies = []
        for c, regex in chains.items():
            a = max(0, min_props - c)
            b = None if max_props is None else max_props - c
            if extra is None:
                if a == 0:
                    bodies.append(regex)
                continue
            bodies.append(regex + _repeat(f"{comma}{extra}", a, b))
        if not seen_required and extra is not None:
            a = max(1, min_props)
            b = max_props
            if b is None or b >= 1:
                bodies.append(extra + _repeat(f"{comma}{extra}", a - 1, None if b is None else b - 1))
        can_be_empty = not seen_required and min_props == 0
        return self._container("\\{", "\\}", alternation(bodies), can_be_empty, depth)

    # --- instances in the order the regex writes them ----------------------------------------

    def arrange(self, subs: list[Sub], value: Any, budget: list | None = None) -> Any:
        """``value`` with object keys in the order the regex expects (see :meth:`_object`).

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
                kind, alternatives, _ = flat.choices.pop(0)
                for alternative in alternatives:
                    items = [i for i in alternative if isinstance(i, Sub)]
                    if all(i.internal or self._valid(value, i) for i in items):
                        for item in items:
                            self.absorb(flat, item)
                        break
        except (UnsupportedSchemaError, RecursionError):
            return value
        if flat.false:
            return value
        if flat.enum is not None:
            key = _json_key(value)
            for literal in flat.enum:
                if _json_key(literal) == key:
                    return literal       # the regex writes the literal as given
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
        declared: list[str] = []
        for part in flat.obj_parts:
            for name in part.properties:
                if name not in declared:
                    declared.append(name)
        for name in flat.required:
            if name not in declared:
                declared.append(name)
        order = [n for n in declared if n in value] + [n for n in value if n not in declared]
        result = {}
        for name in order:
            member_subs = []
            for part in flat.obj_parts:
                if name in part.properties:
                    member_subs.append(part.properties[name])
                matched = []
                for pattern, sub in part.patterns.items():
                    try:
                        if strs.pattern_matches(pattern, name):
                            matched.append(sub)
                    except strs.PatternUnsupported:
                        pass
                member_subs.extend(matched)
                if not matched and part.additional is not None and name not in part.properties:
                    member_subs.append(part.additional)
            result[name] = self.arrange(member_subs, value[name])
        return result

    # --- the generic value ---------------------------------------------------------------------

    def any_value(self, depth: int, levels: int | None = None) -> str:
        """Any JSON value, arrays and objects nested ``any_depth`` levels at most."""
        levels = self.any_depth if levels is None else levels
        self.generic_values_used = True
        key = (depth if self.layout.mode == "pretty" else 0, levels)
        cached = self._any_cache.get(key)
        if cached is not None:
            return cached
        scalars = ["null", "true", "false", nums.NUMBER, strs.STRING]
        if levels > 0:
            inner = self._shared(self.any_value(depth + 1, levels - 1))
            comma = self.layout.comma(depth)
            colon = self.layout.colon()
            array_body = inner + f"(?:{comma}{inner})*"
            member = strs.STRING + colon + inner
            object_body = member + f"(?:{comma}{member})*"
            scalars.append(self._container("\\[", "\\]", array_body, True, depth))
            scalars.append(self._container("\\{", "\\}", object_body, True, depth))
        else:
            scalars.append(self._container("\\[", "\\]", None, True, depth))
            scalars.append(self._container("\\{", "\\}", None, True, depth))
        regex = alternation(scalars)
        self._any_cache[key] = regex
        return regex


def _trivial(flat: Flat) -> bool:
    """A flat that constrains nothing: the generic value."""
    return (Compiler._only_choices(flat) and not flat.choices and flat.enum is None
            and not flat.arr_parts)


def _ranges_disjoint(a, b) -> bool:
    a_lo, a_lo_incl, a_hi, a_hi_incl = a
    b_lo, b_lo_incl, b_hi, b_hi_incl = b
    if a_hi is not None and b_lo is not None:
        if a_hi < b_lo or a_hi == b_lo and not (a_hi_incl and b_lo_incl):
            return True
    if b_hi is not None and a_lo is not None:
        if b_hi < a_lo or b_hi == a_lo and not (b_hi_incl and a_lo_incl):
            return True
    return False


def regex_subset(a: str, b: str) -> bool:
    """Whether every text ``a`` matches, ``b`` matches too (byte DFA product; False if unsure)."""
    # b's dead state is followed too: a text a still matches after b died is a counterexample.
    return _product_reaches(a, b, lambda in_a, in_b: in_a and not in_b, b_may_die=True) is False


def regex_disjoint(a: str, b: str) -> bool:
    """Whether two regexes (our dialect) match no common text: a product of their byte DFAs."""
    return _product_reaches(a, b, lambda in_a, in_b: in_a and in_b, b_may_die=False) is False


def _product_reaches(a: str, b: str, wanted, *, b_may_die: bool) -> bool | None:
    """Whether some pair of states reachable in the product of the byte DFAs
    of ``a`` and ``b`` has ``wanted(a final, b final)``; None when either
    regex cannot be compiled (the callers then answer "not known")."""
    from ..analysis.regex_compiler import byte_tables_from_regex

    try:
        ta, fa = byte_tables_from_regex(a)
        tb, fb = byte_tables_from_regex(b)
    except TimeLimitError:
        raise
    except Exception:  # noqa: BLE001 - unknown, not an error of the schema
        return None
    seen = {(1, 1)}
    stack = [(1, 1)]
    while stack:
        x, y = stack.pop()
        if wanted(bool(fa[x]), bool(fb[y])):
            return True
        for byte in range(256):
            nx, ny = int(ta[x, byte]), int(tb[y, byte])
            if nx and (ny or b_may_die) and (nx, ny) not in seen:
                seen.add((nx, ny))
                stack.append((nx, ny))
    return False


def _keys_matching_none(patterns: list[str]) -> str | None:
    """Keys (JSON text) that match none of the ECMA ``patterns`` (raises NoExactRegex/PatternUnsupported)."""
    matched = alternation([strs.translate_pattern(p) for p in patterns])
    if matched is None:
        return strs.keys_except([])
    return algebra.difference(strs.keys_except([]), matched)


def _repeat(piece: str, lo: int, hi: int | None) -> str:
    if hi is not None and hi <= 0:
        return ""
    group = f"(?:{piece})"
    if hi is None:
        return f"{group}*" if lo == 0 else f"{group}+" if lo == 1 else f"{group}{{{lo},}}"
    if lo == hi:
        return group if lo == 1 else f"{group}{{{lo}}}"
    if lo == 0 and hi == 1:
        return f"{group}?"
    return f"{group}{{{lo},{hi}}}"


def _number_literal(value) -> str:
    """The value's decimal spelling, trailing zeros allowed, or json.dumps' own."""
    import re as _re

    if isinstance(value, float) and not math.isfinite(value):
        raise UnsupportedSchemaError(f"{value!r} is not a JSON number")
    dec = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    text = format(dec, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if "." in digits:
        plain = _re.escape(digits) + "0*"
    else:
        plain = _re.escape(digits) + r"(?:\.0+)?"
    if digits == "0":
        regex = "-?" + plain
    else:
        regex = ("-" if negative else "") + plain
    dumped = json.dumps(value)
    if dumped != text and not _re.fullmatch(regex, dumped):
        regex = f"(?:{regex}|{_re.escape(dumped)})"
    return regex


def _conj_sub(sub: Sub, option: list) -> Sub:
    """A conjunction of alternatives' items as one subschema (for negating it)."""
    items = [item for item in option if isinstance(item, Sub)]
    if len(items) == 1 and len(option) == 1:
        return items[0]
    return sub.derived({"x-all": option})


# --- keyword handlers ------------------------------------------------------------------

def _k_type(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    names = value if isinstance(value, list) else [value]
    allowed: set[str] = set()
    for name in names:
        if name == "any":
            allowed |= ALL_TYPES
        allowed |= _JSON_TYPES.get(name, set())
    flat.types = flat.types & frozenset(allowed)
    if not flat.types:
        flat.false = True


def _k_xtypes(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    flat.types = flat.types & frozenset(value)
    if not flat.types:
        flat.false = True


def _k_enum(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    values = list(value) if isinstance(value, list) else [value]
    _intersect_enum(flat, values)


def _k_const(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    _intersect_enum(flat, [value])


def _intersect_enum(flat: Flat, values: list) -> None:
    if flat.enum is None:
        seen, unique = set(), []
        for v in values:
            key = _json_key(v)
            if key not in seen:
                seen.add(key)
                unique.append(v)
        flat.enum = unique
    else:
        keys = {_json_key(v) for v in values}
        flat.enum = [v for v in flat.enum if _json_key(v) in keys]
    if not flat.enum:
        flat.false = True


def _k_not_values(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    flat.not_values.extend(value)


def _bound(flat: Flat, value, lower: bool, inclusive: bool) -> None:
    try:
        v = _decimal(value)
    except (TypeError, ArithmeticError, ValueError):
        return
    if lower:
        if flat.lo is None or v > flat.lo or v == flat.lo and not inclusive:
            flat.lo, flat.lo_incl = v, inclusive
    else:
        if flat.hi is None or v < flat.hi or v == flat.hi and not inclusive:
            flat.hi, flat.hi_incl = v, inclusive


def _k_minimum(c, flat, sub, value):
    exclusive = c.draft <= 4 and sub.schema.get("exclusiveMinimum") is True
    _bound(flat, value, True, not exclusive)


def _k_maximum(c, flat, sub, value):
    exclusive = c.draft <= 4 and sub.schema.get("exclusiveMaximum") is True
    _bound(flat, value, False, not exclusive)


def _k_exclusive_minimum(c, flat, sub, value):
    if isinstance(value, bool):
        return  # draft 4: read with minimum
    _bound(flat, value, True, False)


def _k_exclusive_maximum(c, flat, sub, value):
    if isinstance(value, bool):
        return
    _bound(flat, value, False, False)


def _raised_lower_bound(current: int, value) -> int:
    """A count's lower bound after a ``min*`` keyword (non-numbers are ignored)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(current, math.ceil(value))
    return current


def _lowered_upper_bound(current: int | None, value) -> int | None:
    """A count's upper bound (None: unbounded) after a ``max*`` keyword."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        bound = math.floor(value)
        return bound if current is None else min(current, bound)
    return current


def _k_multiple_of(c, flat, sub, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        flat.multiple_of.append((_decimal(value), sub.pointer))


def _k_not_multiple_of(c, flat, sub, value):
    flat.not_multiple_of.append((value, sub.pointer))


def _k_min_length(c, flat, sub, value):
    flat.min_length = _raised_lower_bound(flat.min_length, value)


def _k_max_length(c, flat, sub, value):
    flat.max_length = _lowered_upper_bound(flat.max_length, value)


def _k_pattern(c, flat, sub, value):
    if isinstance(value, str) and (value, sub.pointer) not in flat.patterns:
        if value not in {p for p, _ in flat.patterns}:
            flat.patterns.append((value, sub.pointer))


def _k_format(c, flat, sub, value):
    if isinstance(value, str):
        flat.formats.append((value, sub.pointer))


def _k_min_items(c, flat, sub, value):
    flat.min_items = _raised_lower_bound(flat.min_items, value)


def _k_max_items(c, flat, sub, value):
    flat.max_items = _lowered_upper_bound(flat.max_items, value)


def _k_items(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if isinstance(value, list):
        # draft <= 2019-09: a tuple; additionalItems for the rest
        prefix = [sub.child(s, "items", i) for i, s in enumerate(value)]
        rest = schema.get("additionalItems")
        items = None if rest is None else sub.child(rest, "additionalItems")
        flat.arr_parts.append(_ArrPart(prefix, items, sub.pointer))
        return
    if "prefixItems" in schema and c.draft >= 2020:
        return  # read with prefixItems
    flat.arr_parts.append(_ArrPart([], sub.child(value, "items"), sub.pointer))


def _k_prefix_items(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, list):
        return
    prefix = [sub.child(s, "prefixItems", i) for i, s in enumerate(value)]
    rest = sub.schema.get("items")
    items = None if rest is None else sub.child(rest, "items")
    flat.arr_parts.append(_ArrPart(prefix, items, sub.pointer))


def _k_required(c, flat, sub, value):
    if isinstance(value, list):
        for name in value:
            if isinstance(name, str) and name not in flat.required:
                flat.required.append(name)


def _k_min_props(c, flat, sub, value):
    flat.min_props = _raised_lower_bound(flat.min_props, value)


def _k_max_props(c, flat, sub, value):
    flat.max_props = _lowered_upper_bound(flat.max_props, value)


def _k_properties(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    _object_part(c, flat, sub)


def _object_part(c: Compiler, flat: Flat, sub: Sub) -> None:
    schema = sub.schema
    marker = ("objpart", id(schema), sub.pointer)
    if any(getattr(p, "_marker", None) == marker for p in flat.obj_parts):
        return
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    additional = schema.get("additionalProperties")
    keyword = "additionalProperties"
    if additional is None and "unevaluatedProperties" in schema and _no_applicators(schema):
        # with no in-place applicator, "not evaluated" is "not declared, no pattern"
        additional, keyword = schema["unevaluatedProperties"], "unevaluatedProperties"
    part = _ObjPart(
        {k: sub.child(v, "properties", k) for k, v in properties.items()},
        {k: sub.child(v, "patternProperties", k) for k, v in patterns.items()},
        None if additional is None else sub.child(additional, keyword),
        sub.pointer)
    part._marker = marker  # type: ignore[attr-defined]
    flat.obj_parts.append(part)


_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "$dynamicRef", "$recursiveRef",
                "dependentSchemas", "dependencies")


def _no_applicators(schema: dict) -> bool:
    return not any(k in schema for k in _APPLICATORS)


def _k_unevaluated_properties(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if value is True or "additionalProperties" in schema:
        return  # everything is evaluated already
    if _no_applicators(schema):
        _object_part(c, flat, sub)
        return
    c.unsupported("unevaluatedProperties", sub.pointer,
                  "together with allOf/anyOf/oneOf/$ref/if in the same schema")


def _k_unevaluated_items(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if value is True or "items" in schema and not isinstance(schema["items"], list) \
            or "additionalItems" in schema and isinstance(schema.get("items"), list):
        return
    if _no_applicators(schema) and "contains" not in schema:
        prefix = schema.get("prefixItems", schema.get("items"))
        prefix = prefix if isinstance(prefix, list) else []
        key = "prefixItems" if "prefixItems" in schema else "items"
        flat.arr_parts.append(_ArrPart([sub.child(s, key, i) for i, s in enumerate(prefix)],
                                       sub.child(value, "unevaluatedItems"), sub.pointer))
        return
    c.unsupported("unevaluatedItems", sub.pointer,
                  "together with allOf/anyOf/oneOf/$ref/if in the same schema")


def _k_contains(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if "maxContains" in schema and c.draft >= 2019:
        c.unsupported("maxContains", sub.pointer, "counting the elements that satisfy contains")
        return
    if schema.get("minContains") == 0 and c.draft >= 2019:
        return      # satisfied by any array
    if schema.get("minContains", 1) != 1 and c.draft >= 2019:
        c.unsupported("minContains" if "minContains" in schema else "maxContains", sub.pointer,
                      "counting the elements that satisfy contains")
    flat.contains.append(sub.child(value, "contains"))


def _k_property_names(c, flat, sub, value):
    flat.property_names.append(sub.child(value, "propertyNames"))


def _k_all_of(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, list):
        for i, part in enumerate(value):
            c.absorb(flat, sub.child(part, "allOf", i))
            if flat.false:
                return


def _k_x_all(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    for item in value:
        if isinstance(item, tuple) and item[0] == "not":
            flat.nots.append(item[1])
        else:
            c.absorb(flat, item)


class _Embedded(dict):
    """A subschema carried inside a compiler-written schema, with its own context."""

    def __init__(self, sub: Sub) -> None:
        super().__init__()
        self.sub = sub


def _k_any_of(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, list):
        options = [[sub.child(s, "anyOf", i)] for i, s in enumerate(value)]
        flat.choices.append(("anyOf", options, sub.pointer + "/anyOf"))


def _k_one_of(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, list):
        return
    branches = [sub.child(s, "oneOf", i) for i, s in enumerate(value)]
    options = []
    for i, branch in enumerate(branches):
        option: list = [branch]
        for j, other in enumerate(branches):
            if j != i and not c.disjoint(branch, other, flat):
                option.append(("not", other))
        options.append(option)
    flat.choices.append(("oneOf", options, sub.pointer + "/oneOf"))


def _k_string_regex(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    flat.string_regexes.append((value, sub.pointer))


def _k_some_member(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    flat.witnesses.append(value)


def _k_not(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, _Embedded):
        flat.nots.append(value.sub)
    else:
        flat.nots.append(sub.child(value, "not"))


def _k_if(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    then = schema.get("then")
    otherwise = schema.get("else")
    if then is None and otherwise is None:
        return
    condition = sub.child(value, "if")
    yes: list = [condition] + ([sub.child(then, "then")] if then is not None else [])
    no: list = [("not", condition)] + ([sub.child(otherwise, "else")] if otherwise is not None else [])
    flat.choices.append(("if", [yes, no], sub.pointer + "/if"))


def _k_dependent_required(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, dict):
        return
    for name, needs in value.items():
        if isinstance(needs, list):
            if not needs:
                continue
            absent = sub.derived({"properties": {name: False}})
            present = sub.derived({"required": [name] + list(needs)})
            flat.choices.append(("dependentRequired", [[absent], [present]], sub.pointer))
        else:
            _dependent_schema(flat, sub, name, needs, "dependencies")


def _k_dependencies(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if c.draft <= 7:      # split into dependentRequired/dependentSchemas in 2019-09
        _k_dependent_required(c, flat, sub, value)


def _k_dependent_schemas(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, dict):
        return
    for name, schema in value.items():
        _dependent_schema(flat, sub, name, schema, "dependentSchemas")


def _dependent_schema(flat: Flat, sub: Sub, name: str, schema, keyword: str) -> None:
    absent = sub.derived({"properties": {name: False}})
    present = [sub.derived({"required": [name]}), sub.child(schema, keyword, name)]
    flat.choices.append((keyword, [[absent], present], sub.pointer))


def _k_unique(c: Compiler, flat: Flat, sub: Sub, value) -> None:
    # arrays of at most one element are always unique
    if flat.max_items is not None and flat.max_items <= 1:
        return
    if "array" not in flat.types:
        return
    flat.unique = sub.pointer    # written by _array_unique when the items are a few literals


_KEYWORDS = {
    "type": _k_type, "x-types": _k_xtypes, "enum": _k_enum, "const": _k_const,
    "x-not-values": _k_not_values,
    "minimum": _k_minimum, "maximum": _k_maximum, "exclusiveMinimum": _k_exclusive_minimum,
    "exclusiveMaximum": _k_exclusive_maximum, "multipleOf": _k_multiple_of,
    "x-not-multiple-of": _k_not_multiple_of,
    "minLength": _k_min_length, "maxLength": _k_max_length, "pattern": _k_pattern,
    "format": _k_format,
    "minItems": _k_min_items, "maxItems": _k_max_items, "items": _k_items,
    "prefixItems": _k_prefix_items,
    "required": _k_required, "minProperties": _k_min_props, "maxProperties": _k_max_props,
    "properties": _k_properties, "patternProperties": _k_properties,
    "additionalProperties": _k_properties, "propertyNames": _k_property_names,
    "allOf": _k_all_of, "x-all": _k_x_all, "anyOf": _k_any_of, "oneOf": _k_one_of, "not": _k_not,
    "if": _k_if, "dependentRequired": _k_dependent_required, "dependencies": _k_dependencies,
    "dependentSchemas": _k_dependent_schemas, "x-unique": _k_unique,
    "unevaluatedProperties": _k_unevaluated_properties, "unevaluatedItems": _k_unevaluated_items,
    "contains": _k_contains, "x-some-member": _k_some_member,
    "x-string-regex": _k_string_regex,
}
