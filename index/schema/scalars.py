"""Literals and scalars: ``enum``/``const`` values, null, booleans, numbers and strings of a flat.

**Literals** settle everything at once: each ``enum``/``const`` value is
checked against every subschema of the conjunction with the ``jsonschema``
validator (and against every negated one, the compiler's own by
:meth:`~.ir.Constraint.holds`), and the regex lists the ones that pass, each
written as its JSON text in the layout's whitespace (:func:`literal`). Many
strings (``LITERAL_SET_MIN``) go in as one literal set, a shared definition
that the regex compilers build as a minimal automaton from the strings
(:class:`~tokendfa.analysis.regex_tree.LiteralSet`).

**Numbers** and **strings** turn the merged keywords of a
:class:`~.ir.Flat` into the regexes of :mod:`.numbers`, :mod:`.strings` and
:mod:`.formats`; where several must hold at once (``pattern`` and
``format``, a pattern and lengths, a negated pattern, excluded values) the
regexes are intersected or subtracted with :mod:`tokendfa.analysis.algebra`,
and what has no exact regex is reported with its keyword.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from ..analysis import algebra, limits
from ..analysis.errors import UnsupportedSchemaError
from . import numbers as nums
from . import strings as strs
from .formats import FORMAT_WIDTHS, FORMATS, NARROWED, UndecidedFormat, format_tree
from .ir import Flat, json_key, type_key, type_of
from .numbers import to_decimal
from ..analysis.regex_tree import char, concat, optional, repeat
from .regexes import Node, alternation, difference, from_text, fullmatch, intersect, lit

if TYPE_CHECKING:
    from .compiler import Compiler


# --- literals -----------------------------------------------------------------------------

def literals(c: "Compiler", flat: Flat, depth: int) -> Node | None:
    """The ``enum`` values of ``flat`` that satisfy everything else it says, as one alternation.

    When ``LITERAL_SET_MIN`` or more of them are strings with one JSON
    spelling (no control character whose escape has a hex letter, which
    either case spells), those go in as one literal set
    (:meth:`Compiler.literal_set`), built as a minimal automaton instead of
    as branches; the other values are trees of their own."""
    values = admitted_values(c, flat, flat.enum)
    if len(values) >= LITERAL_SET_MIN and set(map(type, values)) == {str} \
            and _TWO_SPELLINGS.search("".join(values)) is None:
        # all strings of one spelling, checked in bulk: the check value by value
        # below took ~50 ms of a 60,000-value enum's ~190 ms schema compilation
        return alternation([c.literal_set(_json_texts(values))])
    spelled = _json_texts([v for v in values if isinstance(v, str) and not _TWO_SPELLINGS.search(v)]) \
        if len(values) >= LITERAL_SET_MIN else []
    if len(spelled) < LITERAL_SET_MIN:
        return alternation([literal(c, value, depth) for value in values])
    rest = [literal(c, v, depth) for v in values
            if not isinstance(v, str) or _TWO_SPELLINGS.search(v)]
    return alternation([c.literal_set(spelled)] + rest)


def _json_texts(strings: list[str]) -> list[str]:
    """The JSON text of each string (json.dumps's, with non-ASCII as is)."""
    if _ESCAPED.search("".join(strings)) is None:
        return ['"' + v + '"' for v in strings]  # nothing to escape: 20x faster than json.dumps
    return [json.dumps(v, ensure_ascii=False) for v in strings]


_ESCAPED = re.compile('[\x00-\x1f"\\\\]')
# Control characters whose JSON escape has a hex letter (\u001a or \u001A): the
# other characters of a string have one canonical spelling, json.dumps's.
_TWO_SPELLINGS = re.compile("[\x0b\x0e\x0f\x1a-\x1f\ud800-\udfff]")
# Enum strings from this many on are a literal set (see literals). Measured on
# qwen2.5, lazy, compile + first mask (medians, codes and names of 5-30
# characters): 30 values 1.34 ms as a set, 1.23 ms as text; 100 values 2.17 and
# 2.69 ms; 1,000 values 15 and 26 ms. Eager builds take the same time either way
# up to 300 values (the token build is most of it).
LITERAL_SET_MIN = 100


def admitted_values(c: "Compiler", flat: Flat, candidates, unique: bool = False) -> list:
    """The candidates of ``flat``'s types, not excluded, that satisfy its subschemas
    (:meth:`Compiler.admitted`); ``unique``: each value once."""
    excluded = {json_key(v) for v in flat.not_values}
    keyed = unique or bool(excluded)
    if not keyed and c.type_decides(flat):
        # the verdict depends on the value's type alone: found once per type
        candidates = list(candidates)
        kinds = set(map(type, candidates))
        if float not in kinds:
            # type_key is (type, None) for each value: one value of each type
            # (the last, from the C loop of dict/zip) stands for its type; the
            # loop below took ~40 ms over a 60,000-value enum
            passing = {kind for kind, value in dict(zip(map(type, candidates), candidates)).items()
                       if type_of(value) in flat.types and _admitted(c, flat, value)}
            if passing == kinds:
                return list(candidates)
            return [value for value in candidates if type(value) in passing]
        verdicts: dict = {}
        values = []
        for value in candidates:
            kind = type_key(value)
            verdict = verdicts.get(kind)
            if verdict is None:
                verdict = verdicts[kind] = type_of(value) in flat.types and _admitted(c, flat, value)
            if verdict:
                values.append(value)
        return values
    by_type: dict | None = {} if c.type_decides(flat) else None
    values, seen = [], set()
    for value in candidates:
        if keyed:
            key = json_key(value)
            if key in excluded or (unique and key in seen):
                continue
            seen.add(key)
        if type_of(value) not in flat.types:
            continue
        if by_type is None:
            if not _admitted(c, flat, value):
                continue
        else:
            kind = type_key(value)
            verdict = by_type.get(kind)
            if verdict is None:
                verdict = by_type[kind] = _admitted(c, flat, value)
            if not verdict:
                continue
        values.append(value)
    return values


def _admitted(c: "Compiler", flat: Flat, value) -> bool:
    """:meth:`Compiler.admitted`, where a narrowed format that cannot tell whether
    the value is valid refuses the schema, or in lenient mode leaves the value out
    with a note (the format's narrowing reaching an ``enum``/``const``)."""
    try:
        return c.admitted(flat, value)
    except UndecidedFormat as exc:
        where = flat.formats[0][1] if flat.formats else flat.sources[0].pointer if flat.sources else ""
        if not c.lenient:
            c.unsupported("format", where, str(exc))
        c.note(f"{exc}: left out")
        return False


def literal(c: "Compiler", value, depth: int) -> Node:
    """Regex for one JSON value, written with the layout's whitespace."""
    limits.check()  # an enum of 30,000 objects: ~1.5 s of trees
    layout = c.layout
    if value is None:
        return lit("null")
    if value is True:
        return lit("true")
    if value is False:
        return lit("false")
    if isinstance(value, (int, float)):
        return number_literal(value)
    if isinstance(value, str):
        return strs.json_string_literal(value)
    if isinstance(value, list):
        if not value:
            return layout.empty("[", "]")
        comma = layout.comma(depth)
        parts = []
        for i, v in enumerate(value):
            parts.extend((comma, literal(c, v, depth + 1)) if i else (literal(c, v, depth + 1),))
        return concat(layout.open("[", depth), *parts, layout.close("]", depth))
    if isinstance(value, dict):
        if not value:
            return layout.empty("{", "}")
        comma, colon = layout.comma(depth), layout.colon()
        parts = []
        for i, (k, v) in enumerate(value.items()):
            if i:
                parts.append(comma)
            parts.extend((strs.json_string_literal(k), colon, literal(c, v, depth + 1)))
        return concat(layout.open("{", depth), *parts, layout.close("}", depth))
    raise UnsupportedSchemaError(f"not a JSON value: {value!r}")


_ZEROS = repeat(char(0x30), 0, None)
_POINT_ZEROS = optional(lit(".") + repeat(char(0x30), 1, None))


def number_literal(value) -> Node:
    """The value's decimal spelling, trailing zeros allowed, or json.dumps' own."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UnsupportedSchemaError(f"{value!r} is not a JSON number")
    text = format(to_decimal(value), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    plain = lit(digits) + (_ZEROS if "." in digits else _POINT_ZEROS)
    if digits == "0":
        tree = optional(lit("-")) + plain
    else:
        tree = (lit("-") if negative else lit("")) + plain
    dumped = json.dumps(value)
    if dumped != text and not fullmatch(tree, dumped):
        tree = alternation([tree, lit(dumped)])
    return tree


# --- null and booleans ------------------------------------------------------------------------

def constants(flat: Flat) -> list[Node]:
    """``null``, ``true``, ``false`` as far as the types and excluded values allow."""
    excluded = {json_key(v) for v in flat.not_values}
    return [lit(word) for word, value, kind in (("null", None, "null"), ("true", True, "boolean"),
                                           ("false", False, "boolean"))
            if kind in flat.types and json_key(value) not in excluded]


# --- numbers -------------------------------------------------------------------------------

def number(c: "Compiler", flat: Flat) -> Node | None:
    """The numbers ``flat`` allows, as a tree (computed as text by :mod:`.numbers`
    and read once per distinct text)."""
    regex = _number_with_exclusions(c, flat)
    if regex is None or isinstance(regex, Node):
        return regex
    if regex == nums.NUMBER:
        return nums.NUMBER_TREE
    if regex == nums.INTEGER:
        return nums.INTEGER_TREE
    return from_text(regex)


def _number_with_exclusions(c: "Compiler", flat: Flat) -> "Node | str | None":
    """A tree, or regex text where the algebra on automata wrote it."""
    regex = _number_range(c, flat)
    if regex is None or not flat.not_multiple_of:
        return regex
    pointer = flat.not_multiple_of[0][1]
    if "fraction" in flat.types:
        c.unsupported("not", pointer, "negation of multipleOf on non-integers")
        return regex
    try:
        for k, pointer in flat.not_multiple_of:
            # None: every integer is a multiple of k (k = 1), so none is left
            others = nums.integer_multiples_regex(k, complement=True)
            regex = None if others is None else algebra.intersect(regex, others)
            if regex is None:
                return None
    except (nums.NumberUnsupported, algebra.NoExactRegex) as exc:
        c.unsupported("not", pointer, f"negation of multipleOf: {exc}")
    return regex


def _number_range(c: "Compiler", flat: Flat) -> "Node | str | None":
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
            c.unsupported("multipleOf", pointer, "several multipleOf that do not divide each other")
    lo, hi = flat.lo, flat.hi

    def in_range(**options) -> str | None:
        return nums.number_regex(lo=lo, lo_incl=flat.lo_incl, hi=hi, hi_incl=flat.hi_incl,
                                 integer=integer, **options)

    def in_tree(**options) -> Node | None:
        return nums.number_tree(lo=lo, lo_incl=flat.lo_incl, hi=hi, hi_incl=flat.hi_incl,
                                integer=integer, **options)

    excluded = sorted(Fraction(to_decimal(v)) for v in flat.not_values
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
                    pieces.append(nums.integer_range_tree(cursor, v - 1))
                    cursor = v + 1
            pieces.append(nums.integer_range_tree(cursor, high))
            return alternation(pieces)
        if excluded and integer:
            # integers have one spelling each (and -0): take them out of the regex
            regex = in_range(multiple_of=step)
            spellings = [str(int(v)) for v in excluded if v.denominator == 1]
            spellings += ["-0"] if "0" in spellings else []
            if regex is None or not spellings:
                return regex
            try:
                return algebra.difference(regex, nums.literal_alternation(spellings))
            except algebra.NoExactRegex as exc:
                raise nums.NumberUnsupported(f"excluding number values: {exc}") from None
        if excluded:
            c.unsupported("not", pointer or "", "excluding number values from a non-integer range")
        return in_tree(multiple_of=step, nonzero_fraction=nonint)
    except nums.NumberUnsupported as exc:
        c.unsupported("multipleOf" if step is not None else "not", pointer, str(exc))
        return in_tree(nonzero_fraction=nonint and lo is None and hi is None)


# --- strings -------------------------------------------------------------------------------

def string(c: "Compiler", flat: Flat) -> Node | None:
    lo, hi = flat.min_length, flat.max_length
    strings = [v for v in flat.not_values if isinstance(v, str)]
    patterns = list(flat.patterns)
    formats = list(dict.fromkeys(flat.formats))
    known = [(f, p) for f, p in formats if f in FORMATS]
    for name, pointer in formats:
        if name not in FORMATS:
            c.note(f"format {name!r} at {pointer or '/'} is not checked (an annotation)")
        elif name in NARROWED:
            c.note(f"format {name!r} at {pointer or '/'} is narrowed: {NARROWED[name]}")
    if len({f for f, _ in known}) > 1:
        c.unsupported("format", known[1][1], "several different formats")
        known = known[:1]
    # what the string must match, each a regex of canonical JSON text: intersected below
    musts: list[tuple[Node | None, str, str]] = [   # (regex, keyword, pointer)
        (from_text(regex) if isinstance(regex, str) else regex, "not", pointer)
        for regex, pointer in flat.string_regexes]
    lengths = lo > 0 or hi is not None
    length_keyword = "maxLength" if hi is not None else "minLength"
    if known:
        name, pointer = known[0]
        width = FORMAT_WIDTHS.get(name)
        musts.append((format_tree(name), "format", pointer))
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
            c.unsupported("pattern", pointer, str(exc))
    if musts and lengths:
        musts.append((strs.canonical_string_regex(lo, hi), length_keyword, musts[0][2]))
    if not musts:
        if strings:
            if lo == 0 and hi is None:
                return strs.keys_except(strings)
            c.unsupported("not", "", "excluding string values together with lengths")
        return strs.string_regex(lo, hi, counted=c.counted)
    if any(regex is None for regex, _, _ in musts):
        return None
    base = musts[0][0]
    for regex, keyword, pointer in musts[1:]:
        try:
            base = intersect(base, regex)
        except algebra.NoExactRegex as exc:
            c.unsupported(keyword, pointer, f"no exact regex for {musts[0][1]} together "
                          f"with {keyword}: {exc}")
        if base is None:
            return None
    if strings:
        taken = [v for v in strings if fullmatch(base, json.dumps(v, ensure_ascii=False))]
        if taken:
            try:
                base = difference(base, alternation([strs.json_string_literal(v) for v in taken]))
            except algebra.NoExactRegex as exc:
                c.unsupported("not", "", f"excluding string values from a pattern or format: {exc}")
    return base
