"""What ``jsonschema`` answers for a literal, without running ``jsonschema``.

The compiler checks each ``enum``/``const`` candidate (and each negated
literal) against the user's subschemas. In a fresh fork of a warmed server,
the first run of jsonschema's validator code costs 0.5-0.7 ms and 85-120
copy-on-write page faults a schema (Python 3.11 writes specialisation
counters into each code object it runs, and the attrs instances it makes
land on copied pages), about a third of a median first mask.

:func:`check_of` builds a plain Python test for a subschema whose every
keyword is one it reproduces exactly, and None for anything else (the caller
then asks jsonschema). A keyword is reproduced only when the draft's
validator class maps it to the very jsonschema function this module mirrors
(found by the function's module and name, so a draft whose keyword means
something else, draft 4's ``minimum`` with a boolean ``exclusiveMinimum``
say, keeps going to jsonschema); a keyword the class does not know is
ignored, as jsonschema ignores it. Up to draft 7 a ``$ref`` hides its
siblings, as jsonschema's ``ignore_ref_siblings`` does. Types are those of
the draft's type checker (:func:`~.compiler` ``_type_test``: from draft 6
on, 1.0 is an integer); equality is jsonschema's (``True`` is not ``1``,
``1.0`` is ``1``, lists and objects compared member by member); lengths are
in code points (``len``); ``pattern`` is Python's ``re.search``, as in
jsonschema, compiled within the deadline (``compile_untrusted``, as the
compiler's validator class does). tests/test_schema_checks.py holds each test equal to
jsonschema's answer on many values and keyword sets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from ..analysis.regex_syntax import compile_untrusted

Test = Callable[[Any], bool]

# what compiling a pattern raises for one jsonschema then reports (a time limit passes)
_BAD_PATTERN = (re.error, TypeError, ValueError, OverflowError, RecursionError)

# How many subschemas (counted with repeats) check_of builds before leaving the
# rest to jsonschema: a recursive definition reached from an enum's subschema
# would be built again at each $ref
MAX_SCHEMAS = 64


def _always(value) -> bool:
    return True


def _never(value) -> bool:
    return False


def equal(one, two) -> bool:
    """jsonschema's ``equal``: ``True``/``False`` are not ``1``/``0``; strings,
    lists and objects by their members; other values by Python's ``==``."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(equal(one[k], two[k]) for k in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two  # bools are singletons; `one is two` failed above
    return one == two


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _count(value) -> bool:
    """A bound on a length or a count: an integer, or an integral float (meta-schemas
    from draft 6 on accept 1.0); the comparison with ``len`` is then Python's."""
    return _is_number(value) and (isinstance(value, int) or value.is_integer())


def _enum(values) -> Test | None:
    if not isinstance(values, list):
        return None
    scalars, others = set(), []
    for v in values:
        if isinstance(v, str):
            scalars.add(("s", v))
        elif v is None or isinstance(v, bool):
            scalars.add(("c", v))  # None, True, False: compared by identity in the key
        elif _is_number(v) and not _nan(v):  # NaN equals nothing but itself: scanned
            scalars.add(("n", v))  # 1 == 1.0 and hash alike, as Python's == in jsonschema
        else:
            others.append(v)

    def test(value) -> bool:
        if isinstance(value, str):
            key = ("s", value)
        elif value is None or isinstance(value, bool):
            key = ("c", value)
        elif _is_number(value) and not _nan(value):
            key = ("n", value)
        else:
            key = None
        if key is not None and key in scalars:
            return True
        return any(equal(v, value) for v in others)
    return test


def _all(tests: list[Test]) -> Test:
    if not tests:
        return _always
    if len(tests) == 1:
        return tests[0]
    return lambda value: all(t(value) for t in tests)


class Context(NamedTuple):
    """What a test is built with: the draft (4, 6, 7, 2019, 2020), its validator
    class's ``VALIDATORS``, ``type_test(kinds)`` (the test of a ``type`` value, None
    where not reproduced) and ``follow(sub, ref)`` (the Sub a ``$ref`` points to, or
    None)."""

    draft: int
    known: dict
    type_test: Callable
    follow: Callable


def check_of(schema, sub, context: Context) -> Test | None:
    """A test equal to ``validator_cls(schema).is_valid`` in ``sub``'s context, or
    None (more than MAX_SCHEMAS subschemas, or a keyword not reproduced)."""
    return _check(schema, sub, context, [MAX_SCHEMAS])


def _check(schema, sub, context: Context, budget: list) -> Test | None:
    if schema is True:
        return _always
    if schema is False:
        return _never
    budget[0] -= 1
    if not isinstance(schema, dict) or budget[0] < 0:
        return None
    draft, known = context.draft, context.known
    items = schema.items()
    if draft < 2019 and schema.get("$ref") is not None:
        items = (("$ref", schema["$ref"]),)
    tests: list[Test] = []
    for key, value in items:
        function = known.get(key)
        if function is None:
            continue  # not a keyword of the draft: jsonschema ignores it
        build = _BUILDERS.get(f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}")
        if build is None:
            return None
        test = build(value, schema, sub, context, budget)
        if test is None:
            return None
        if test is not _always:
            tests.append(test)
    return _all(tests)


def _child(value, sub, key, c, budget) -> Test | None:
    return _check(value, sub.child(value, key), c, budget)


def _children(value, sub, key, c, budget) -> list[Test] | None:
    if not isinstance(value, list) or not value:
        return None
    return _each_prefix(value, sub, key, c, budget)


def _b_type(value, schema, sub, c, budget):
    if value is None:
        return None  # "type": null is jsonschema's error, not "any type"
    return c.type_test(value)


def _b_enum(value, schema, sub, c, budget):
    return _enum(value)


def _b_const(value, schema, sub, c, budget):
    return _enum([value])


def _b_ref(value, schema, sub, c, budget):
    if not isinstance(value, str):
        return None
    target = c.follow(sub, value)
    if target is None:
        return None
    return _check(target.schema, target, c, budget)


def _b_all_of(value, schema, sub, c, budget):
    tests = _children(value, sub, "allOf", c, budget)
    return None if tests is None else _all(tests)


def _b_any_of(value, schema, sub, c, budget):
    tests = _children(value, sub, "anyOf", c, budget)
    return None if tests is None else (lambda v: any(t(v) for t in tests))


def _b_one_of(value, schema, sub, c, budget):
    tests = _children(value, sub, "oneOf", c, budget)
    return None if tests is None else (lambda v: sum(1 for t in tests if t(v)) == 1)


def _b_not(value, schema, sub, c, budget):
    test = _child(value, sub, "not", c, budget)
    return None if test is None else (lambda v: not test(v))


def _b_properties(value, schema, sub, c, budget):
    if not isinstance(value, dict):
        return None
    tests = {}
    for name, each in value.items():
        test = _check(each, sub.child(each, "properties", name), c, budget)
        if test is None:
            return None
        if test is not _always:
            tests[name] = test
    return lambda v: not isinstance(v, dict) or all(
        t(v[name]) for name, t in tests.items() if name in v)


def _b_required(value, schema, sub, c, budget):
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    return lambda v: not isinstance(v, dict) or all(name in v for name in value)


def _b_additional(value, schema, sub, c, budget):
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    if not isinstance(declared, dict) or not isinstance(patterns, dict):
        return None
    joined = "|".join(patterns)   # as jsonschema's find_additional_properties
    try:
        search = compile_untrusted(joined).search if joined else None
    except _BAD_PATTERN:
        return None
    test = _child(value, sub, "additionalProperties", c, budget)
    if test is None:
        return None

    def check(v) -> bool:
        if not isinstance(v, dict):
            return True
        return all(test(v[name]) for name in v
                   if name not in declared and not (search is not None and search(name)))
    return check


def _b_pattern_properties(value, schema, sub, c, budget):
    if not isinstance(value, dict):
        return None
    tests = []
    for pattern, each in value.items():
        try:
            search = compile_untrusted(pattern).search
        except _BAD_PATTERN:
            return None
        test = _check(each, sub.child(each, "patternProperties", pattern), c, budget)
        if test is None:
            return None
        tests.append((search, test))
    return lambda v: not isinstance(v, dict) or all(
        test(v[name]) for search, test in tests for name in v if search(name))


def _b_pattern(value, schema, sub, c, budget):
    try:
        search = compile_untrusted(value).search
    except _BAD_PATTERN:
        return None
    return lambda v: not isinstance(v, str) or search(v) is not None


def _each_prefix(value, sub, key, c, budget):
    """Tests of a list of item schemas, zipped with an array's items (None: not a
    list, or not reproduced)."""
    if not isinstance(value, list):
        return None
    tests = []
    for i, each in enumerate(value):
        test = _check(each, sub.child(each, key, i), c, budget)
        if test is None:
            return None
        tests.append(test)
    return tests


def _b_items_legacy(value, schema, sub, c, budget):
    """Draft 4's, 6's, 7's and 2019-09's items: one schema for every item, or a list
    zipped with the items (draft 4 takes only an object as the one schema)."""
    if isinstance(value, list):
        tests = _each_prefix(value, sub, "items", c, budget)
        if tests is None:
            return None
        return lambda v: not isinstance(v, list) or all(t(item) for t, item in zip(tests, v))
    if not isinstance(value, dict) and (c.draft < 6 or not isinstance(value, bool)):
        return None
    test = _child(value, sub, "items", c, budget)
    return None if test is None else (lambda v: not isinstance(v, list) or all(test(item) for item in v))


def _b_additional_items(value, schema, sub, c, budget):
    items = schema.get("items", {})
    if isinstance(items, dict):
        return _always   # jsonschema reads additionalItems only beside a list of items
    if not isinstance(items, list):
        return None
    start = len(items)
    if isinstance(value, dict):
        test = _child(value, sub, "additionalItems", c, budget)
        if test is None:
            return None
        return lambda v: not isinstance(v, list) or all(test(item) for item in v[start:])
    if value is False:
        return lambda v: not isinstance(v, list) or len(v) <= start
    if value is True:
        return _always
    return None


def _b_items(value, schema, sub, c, budget):
    """2020-12's items: the items after prefixItems."""
    prefix = schema.get("prefixItems", [])
    if not isinstance(prefix, list):
        return None
    start = len(prefix)
    if value is False:
        return lambda v: not isinstance(v, list) or len(v) <= start
    test = _child(value, sub, "items", c, budget)
    return None if test is None else (
        lambda v: not isinstance(v, list) or all(test(item) for item in v[start:]))


def _b_prefix_items(value, schema, sub, c, budget):
    tests = _each_prefix(value, sub, "prefixItems", c, budget)
    return None if tests is None else (
        lambda v: not isinstance(v, list) or all(t(item) for t, item in zip(tests, v)))


def _bound(compare) -> Callable:
    def build(value, schema, sub, context, budget):
        if not _is_number(value):
            return None
        return lambda v: not _is_number(v) or compare(v, value)
    return build


def _size(kind, compare) -> Callable:
    def build(value, schema, sub, context, budget):
        if not _count(value):
            return None
        return lambda v: not isinstance(v, kind) or compare(len(v), value)
    return build


_K = "jsonschema._keywords."
_BUILDERS = {
    _K + "type": _b_type,
    _K + "enum": _b_enum,
    _K + "const": _b_const,
    _K + "ref": _b_ref,
    _K + "allOf": _b_all_of,
    _K + "anyOf": _b_any_of,
    _K + "oneOf": _b_one_of,
    _K + "not_": _b_not,
    _K + "properties": _b_properties,
    _K + "required": _b_required,
    _K + "additionalProperties": _b_additional,
    _K + "patternProperties": _b_pattern_properties,
    _K + "pattern": _b_pattern,
    _K + "items": _b_items,
    _K + "prefixItems": _b_prefix_items,
    "jsonschema._legacy_keywords.items_draft3_draft4": _b_items_legacy,
    "jsonschema._legacy_keywords.items_draft6_draft7_draft201909": _b_items_legacy,
    "jsonschema._legacy_keywords.additionalItems": _b_additional_items,
    _K + "minimum": _bound(lambda v, b: not v < b),
    _K + "maximum": _bound(lambda v, b: not v > b),
    _K + "exclusiveMinimum": _bound(lambda v, b: not v <= b),
    _K + "exclusiveMaximum": _bound(lambda v, b: not v >= b),
    _K + "minLength": _size(str, lambda n, b: not n < b),
    _K + "maxLength": _size(str, lambda n, b: not n > b),
    _K + "minProperties": _size(dict, lambda n, b: not n < b),
    _K + "maxProperties": _size(dict, lambda n, b: not n > b),
    _K + "minItems": _size(list, lambda n, b: not n < b),
    _K + "maxItems": _size(list, lambda n, b: not n > b),
}
