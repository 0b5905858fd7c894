"""``oneOf``: which branches can never hold together.

A ``oneOf`` branch is written as "this branch and none of the others"; a
negation that costs regex size and time, and that is needed only against
the branches that may overlap this one. :func:`disjoint` answers "no value
satisfies both" from the keywords at the top of each branch (after ``$ref``
and ``allOf``): different types, ranges or lengths that do not meet,
``enum`` values the other branch rejects, a required property the other
forbids or holds to a disjoint schema (its ``properties`` entry, the
``patternProperties`` its name matches, else its ``additionalProperties``),
more required names than the other allows members. A branch that is itself
a choice (a ``oneOf`` of ``$ref`` s, each naming its ``type`` by ``const``)
is disjoint from another when each of its options is, with the negations
an option carries left out (they only make it smaller); this looks
:data:`CHOICE_BUDGET` options deep at most, so a wide nest of choices costs
a bounded number of tests. It is sound and partial: "not known" is
answered False, and nested choices can only make a branch smaller, so they
never make a "disjoint" answer wrong.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..analysis.errors import UnsupportedSchemaError
from . import strings as strs
from .ir import Flat, Negated, Sub, json_key, type_of

if TYPE_CHECKING:
    from .compiler import Compiler

# How many options of nested choices one disjointness test may split into:
# the six ``$ref`` branches of a repository ``oneOf`` (JSONSchemaBench
# Github_ultra:95) need 6; a test is a few absorptions (~50 us each), so the
# bound keeps one test under ~10 ms on a wide nest of choices.
CHOICE_BUDGET = 64


def disjoint(c: "Compiler", a: Sub, b: Sub, context: Flat, required: tuple = ()) -> bool:
    """True when no value satisfies ``context``, ``a`` and ``b`` together (a sound, partial test).

    What the context says of the value counts: its types, and the names it
    requires (``context.required`` and ``required``, the ``required`` beside
    the ``oneOf``, which may come after it). Branches told apart only by the
    value of a member that the schema around them requires (``{"required":
    ["kind"], "oneOf": [{"properties": {"kind": {"const": "a"}}}, ...]}``)
    are then disjoint, and no branch carries the negations of the others.
    """
    names = tuple(dict.fromkeys([*context.required, *required]))
    # The same oneOf is absorbed again in every branch that reaches it: Github_ultra:95
    # asks 186 times about 36 pairs (49 ms of a 250 ms compilation). What an answer
    # depends on: the two subschemas, how their $ref read (base URI, the references
    # taken so far, for the recursion cut), and what the context says (types, names).
    key = (_where(a), _where(b), context.types, names)
    known = c.disjoint_answers.get(key)
    if known is not None:
        return known[1]
    fa = _branch_flat(c, a, context.types, names)
    fb = _branch_flat(c, b, context.types, names) if fa is not None else None
    answer = fb is not None and _flats_disjoint(c, fa, fb, [CHOICE_BUDGET])
    c.disjoint_answers[key] = ((a.schema, b.schema), answer)  # holding them keeps their ids unique
    return answer


def disjoint_pairs(c: "Compiler", branches: list[Sub], context: Flat,
                   required: tuple = ()) -> set[tuple[int, int]]:
    """The ordered pairs ``(i, j)`` of ``branches`` for which
    :func:`disjoint` answers True, each branch absorbed once rather than
    once for every pair it is in (a ``oneOf`` of n branches absorbed each
    2(n - 1) times: a fifth of the schema front end on the MaskBench
    sample's p90 schemas), and the answer kept for the next time the same
    ``oneOf`` is reached under the same context."""
    names = tuple(dict.fromkeys([*context.required, *required]))
    key = (tuple(_where(branch) for branch in branches), context.types, names)
    known = c.disjoint_answers.get(key)
    if known is not None:
        return known[1]
    flats = [_branch_flat(c, branch, context.types, names) for branch in branches]
    answer = set()
    for i, fa in enumerate(flats):
        for j in range(i + 1, len(flats)):
            fb = flats[j]
            # The test is symmetric: _flats_disjoint tries both orders.
            if fa is not None and fb is not None and _flats_disjoint(c, fa, fb, [CHOICE_BUDGET]):
                answer.update(((i, j), (j, i)))
    c.disjoint_answers[key] = (tuple(branch.schema for branch in branches), answer)
    return answer


def _where(sub: Sub) -> tuple:
    return (id(sub.schema), getattr(sub.resolver, "_base_uri", id(sub.resolver)),
            tuple(sorted(Counter(sub.refs).items())), sub.internal)


def _branch_flat(c: "Compiler", branch: Sub, types: frozenset, names: tuple) -> Flat | None:
    """``branch`` absorbed under what the context says of the value (None: it cannot be)."""
    try:
        flat = Flat()
        flat.types = types
        flat.required = list(names)
        c.absorb(flat, branch)
    except UnsupportedSchemaError:
        return None
    return flat


def _flats_disjoint(c: "Compiler", fa: Flat, fb: Flat, budget: list[int] | None = None) -> bool:
    """Whether no value satisfies both flats; ``budget`` (a one-item list, shared by
    the whole test) is how many options of their choices may still be split."""
    if _plain_disjoint(c, fa, fb):
        return True
    if budget is None:
        return False
    for first, second in ((fa, fb), (fb, fa)):
        for k, choice in enumerate(first.choices):
            if budget[0] < len(choice.alternatives):
                return False
            budget[0] -= len(choice.alternatives)
            if all(_option_disjoint(c, first, k, option, second, budget)
                   for option in choice.alternatives):
                return True
    return False


def _option_disjoint(c: "Compiler", flat: Flat, k: int, option: tuple, other: Flat,
                     budget: list[int]) -> bool:
    """Whether ``flat`` with its ``k``-th choice taken as ``option`` meets no value of ``other``."""
    branch = flat.copy()
    branch.choices.pop(k)
    try:
        for item in option:
            if not isinstance(item, Negated):   # a negation only narrows the option
                c.absorb(branch, item)
            if branch.false:
                return True
    except UnsupportedSchemaError:
        return False
    return _flats_disjoint(c, branch, other, budget)


def _plain_disjoint(c: "Compiler", fa: Flat, fb: Flat) -> bool:
    """:func:`_flats_disjoint` from the keywords of the flats alone, their choices aside."""
    if fa.false or fb.false:
        return True
    common = fa.types & fb.types
    if not common:
        return True
    for first, second in ((fa, fb), (fb, fa)):
        if first.enum is not None:
            # a value of an enum is not checked against that enum again (listed):
            # the validator scans it for each value, quadratic on a large enum
            listed = None if second.enum is None else {json_key(x) for x in second.enum}
            try:
                return not any(type_of(v) in common
                               and (listed is None or json_key(v) in listed)
                               and all(c.valid(v, s, listed=listed is not None) for s in second.sources)
                               and all(c.valid(v, s, listed=True) for s in first.sources)
                               for v in first.enum)
            except UnsupportedSchemaError:
                return False
    return all(_type_disjoint(c, t, fa, fb) for t in common)


def _apart(lo_a: int, hi_a: int | None, lo_b: int, hi_b: int | None) -> bool:
    """Whether two count ranges (lengths, items, properties) do not meet."""
    return hi_a is not None and hi_a < lo_b or hi_b is not None and hi_b < lo_a


def _type_disjoint(c: "Compiler", t: str, fa: Flat, fb: Flat) -> bool:
    if t in ("integer", "fraction"):
        return _ranges_disjoint((fa.lo, fa.lo_incl, fa.hi, fa.hi_incl),
                                (fb.lo, fb.lo_incl, fb.hi, fb.hi_incl))
    if t == "string":
        return _apart(fa.min_length, fa.max_length, fb.min_length, fb.max_length)
    if t == "array":
        return _apart(fa.min_items, fa.max_items, fb.min_items, fb.max_items)
    if t == "object":
        # an object has at least as many members as it requires distinct names
        if _apart(max(fa.min_props, len(set(fa.required))), fa.max_props,
                  max(fb.min_props, len(set(fb.required))), fb.max_props):
            return True
        for first, second in ((fa, fb), (fb, fa)):
            for name in first.required:
                if _forbids(second, name):
                    return True
                if _values_disjoint(c, first, second, name):
                    return True
        return False
    return False


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


def _member_subs(c: "Compiler", flat: Flat, name: str) -> list[Sub] | None:
    """The schemas a member ``name`` of an object satisfying ``flat`` must satisfy
    (None: a pattern we cannot read stands in the way)."""
    subs = []
    for part in flat.obj_parts:
        matched = False
        if name in part.properties:
            subs.append(part.properties[name])
            matched = True
        for pattern, schema_sub in part.patterns.items():
            try:
                if strs.pattern_matches(pattern, name):
                    subs.append(schema_sub)
                    matched = True
            except strs.PatternUnsupported:
                return None
        if not matched and part.additional is not None:
            subs.append(part.additional)
    return subs


def _values_disjoint(c: "Compiler", fa: Flat, fb: Flat, name: str) -> bool:
    """Whether member ``name``, required by ``fa``, can satisfy neither side together:
    a value of ``fb`` that lacks it is no value of ``fa``, so only its schemas
    in both count."""
    subs_a = _member_subs(c, fa, name)
    subs_b = _member_subs(c, fb, name)
    if not subs_a or not subs_b:
        return False
    try:
        va, vb = Flat(), Flat()
        for s in subs_a:
            c.absorb(va, s)
        for s in subs_b:
            c.absorb(vb, s)
    except UnsupportedSchemaError:
        return False
    return _flats_disjoint(c, va, vb)
