"""``not``: the complement of a subschema, pushed down keyword by keyword.

:func:`negate` returns alternatives whose union is the complement, each a
conjunction of compiler-written constraints (:mod:`.ir`):
``not {minLength: 3}`` is a string of at most 2 characters,
``not {required: [a]}`` an object without ``a``, ``not {type: integer}``
anything but an integer, and ``not`` of a conjunction is a choice between
the negated keywords. ``not {pattern}`` is a string in the difference of
all strings and the pattern (:mod:`tokendfa.analysis.algebra`);
``not {properties, patternProperties, additionalProperties}`` is an object
with a member that breaks them (a declared one with a negated value, or an
additional one: :class:`~.ir.SomeMember`); ``not {items: S}`` an array that
contains ``not S``, ``not {prefixItems}`` one with a failing element at some
prefix position, ``not {contains: C}`` one whose items are all ``not C``. A
choice inside the negated schema (``anyOf``, ``oneOf``, ``if``,
dependencies) is negated as the conjunction of its negated options, beside
the other keywords' negations. ``not {multipleOf: k}`` (``k`` an integer)
is a non-integer, or an integer ``k`` does not divide;
``not {propertyNames: S}`` an object with a member whose name breaks ``S``.
What has no such negation (``not {multipleOf}`` of a fraction, ``not`` of
``items`` after a prefix) is reported, or in lenient mode widened to the
whole type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis import algebra, limits
from . import strings as strs
from .formats import FORMATS, NARROWED, format_regex
from .ir import (ALL_TYPES, ArrPart, Conjunction, Contains, Elements, Flat, ItemCount, Literals,
                 Members, MultipleOf, Negated, NotMultipleOf, NotValues, NumberBound, ObjPart,
                 PropertyCount, Required, SomeMember, StringIn, StringLength, Sub, Types)

if TYPE_CHECKING:
    from .compiler import Compiler

_NUMBERS = frozenset({"integer", "fraction"})
_STRING = frozenset({"string"})
_ARRAY = frozenset({"array"})
_OBJECT = frozenset({"object"})


def negate(c: "Compiler", sub: Sub) -> tuple:
    """Alternatives whose union is the complement of ``sub`` (each a tuple: a conjunction)."""
    limits.check()
    flat = Flat()
    c.absorb(flat, sub)
    if flat.false:
        return ((),)
    if flat.enum is not None:
        # not (in E and R) = not in {e in E that satisfy R}
        kept = tuple(v for v in flat.enum if c.admitted(flat, v))
        return ((sub.derived(NotValues(kept)),),)
    alternatives: list[tuple] = []
    for choice in flat.choices:
        # not (R and (A or B)) = not R or (not A and not B); each option of a choice
        # (anyOf, oneOf with its exclusions, if/then/else, dependencies) is a conjunction
        alternatives.append(tuple(Negated(_conjunction(sub, option)) for option in choice.alternatives))
    for nested in flat.nots:
        alternatives.append((nested,))      # not not X = X
    pointer = sub.pointer

    def add(*constraints) -> None:
        alternatives.append(tuple(sub.derived(x) for x in constraints))

    def widened(what: str, types: frozenset) -> None:
        # lenient: the negation of what we cannot negate is widened to the whole type
        c.unsupported("not", pointer, f"negation of {what}")
        add(Types(types))

    if flat.types != ALL_TYPES:
        add(Types(ALL_TYPES - flat.types))
    if flat.lo is not None:
        add(Types(_NUMBERS), NumberBound(flat.lo, lower=False, inclusive=not flat.lo_incl))
    if flat.hi is not None:
        add(Types(_NUMBERS), NumberBound(flat.hi, lower=True, inclusive=not flat.hi_incl))
    for step, _ in flat.multiple_of:
        if step == step.to_integral_value():
            # not a multiple of an integer k: a non-integer, or an integer k does not divide
            add(Types(frozenset({"fraction"})))
            add(Types(frozenset({"integer"})), NotMultipleOf(int(step)))
        else:
            widened("multipleOf", _NUMBERS)
    for k, _ in flat.not_multiple_of:
        add(Types(frozenset({"integer"})), MultipleOf(k))
    if flat.min_length > 0:
        add(Types(_STRING), StringLength(maximum=flat.min_length - 1))
    if flat.max_length is not None:
        add(Types(_STRING), StringLength(minimum=flat.max_length + 1))
    narrowed = next((name for name, _ in flat.formats if name in NARROWED), None)
    if narrowed is not None:
        # the complement of a narrowed format's regex holds valid values (a leap
        # second at another offset, an IP-literal host), which the negation refuses
        widened(f"format {narrowed!r}, which is narrowed ({NARROWED[narrowed]})", _STRING)
    elif flat.patterns or flat.formats:
        # a string that fails one pattern or known format (canonical spelling, as under pattern)
        try:
            for pattern, _ in flat.patterns:
                failing = algebra.difference(strs.canonical_string_regex(), strs.translate_pattern(pattern))
                if failing is not None:
                    add(Types(_STRING), StringIn(failing))
            for name, _ in dict.fromkeys(flat.formats):
                if name in FORMATS:
                    failing = algebra.difference(strs.canonical_string_regex(), format_regex(name))
                    if failing is not None:
                        add(Types(_STRING), StringIn(failing))
        except (strs.PatternUnsupported, algebra.NoExactRegex):
            widened("pattern" if flat.patterns else "format", _STRING)
    if flat.string_regexes:
        widened("not pattern", _STRING)
    if flat.min_items > 0:
        add(Types(_ARRAY), ItemCount(maximum=flat.min_items - 1))
    if flat.max_items is not None:
        add(Types(_ARRAY), ItemCount(minimum=flat.max_items + 1))
    for part in flat.arr_parts:
        alternatives.extend(_broken_elements(part, sub, widened))
    if flat.unique is not None:
        c.unsupported("not", pointer, "negation of uniqueItems")
    for contained in flat.contains:
        # not contains C: every element fails C
        add(Types(_ARRAY), Elements((), items=Negated(contained)))
    for name in flat.required:
        add(Types(_OBJECT), Members(((name, False),)))
    if flat.min_props > 0:
        add(Types(_OBJECT), PropertyCount(maximum=flat.min_props - 1))
    if flat.max_props is not None:
        add(Types(_OBJECT), PropertyCount(minimum=flat.max_props + 1))
    for part in flat.obj_parts:
        alternatives.extend(_broken_members(c, part, sub))
    if flat.witnesses:
        widened("not patternProperties/additionalProperties", _OBJECT)
    for names_sub in flat.property_names:
        # not propertyNames S: some member's name breaks S
        add(Types(_OBJECT), SomeMember(frozenset(), None, None, None, names_sub.pointer,
                                       key_schema=names_sub))
    if flat.not_values:
        add(Literals(tuple(flat.not_values)))
    return tuple(alternatives)


def _conjunction(sub: Sub, option: tuple) -> Sub:
    """A conjunction of an alternative's items as one subschema (for negating it)."""
    if len(option) == 1 and isinstance(option[0], Sub):
        return option[0]
    return sub.derived(Conjunction(option))


def _breakable(sub: Sub | None) -> bool:
    """Whether some value breaks ``sub`` (false for an absent, ``true`` or ``{}`` schema)."""
    return sub is not None and sub.schema is not True and sub.schema != {}


def _broken_elements(part: ArrPart, sub: Sub, widened) -> list[tuple]:
    """Arrays with an element that breaks ``part``: at a prefix position, or after it."""
    alternatives = []
    for i, position in enumerate(part.prefix):
        if _breakable(position):
            prefix = (True,) * i + (Negated(position),)
            alternatives.append((sub.derived(Types(_ARRAY)), sub.derived(ItemCount(minimum=i + 1)),
                                 sub.derived(Elements(prefix))))
    if _breakable(part.items):
        if part.prefix:
            # contains after a prefix is not written (see the array emitter)
            widened("items after prefixItems", _ARRAY)
        else:
            alternatives.append((sub.derived(Types(_ARRAY)),
                                 sub.derived(Contains(Negated(part.items)))))
    return alternatives


def _broken_members(c: "Compiler", part: ObjPart, sub: Sub) -> list[tuple]:
    """Objects with a member that breaks ``part`` (see :class:`~.ir.SomeMember`)."""
    alternatives = []
    names = frozenset(part.properties)
    for name, prop in part.properties.items():
        # a declared name: its value must satisfy its property and the patterns it matches
        applies = [prop] + [s for p, s in part.patterns.items()
                            if c.pattern_matches(p, name, "patternProperties", part.pointer)]
        target = applies[0] if len(applies) == 1 else sub.derived(Conjunction(tuple(applies)))
        alternatives.append((sub.derived(Types(_OBJECT)), sub.derived(Required((name,))),
                             sub.derived(Members(((name, Negated(target)),)))))

    def broken(schema_sub: Sub) -> Sub | None:
        return None if schema_sub.schema is False else sub.derived(Negated(schema_sub))

    def some_member(witness: SomeMember) -> tuple:
        return (sub.derived(Types(_OBJECT)), sub.derived(witness))

    for pattern, schema_sub in part.patterns.items():
        if _breakable(schema_sub):
            alternatives.append(some_member(SomeMember(names, pattern, None, broken(schema_sub),
                                                       part.pointer)))
    if _breakable(part.additional):
        alternatives.append(some_member(SomeMember(names, None, tuple(part.patterns),
                                                   broken(part.additional), part.pointer)))
    return alternatives
