"""``oneOf``: which branches can never hold together.

A ``oneOf`` branch is written as "this branch and none of the others"; a
negation that costs regex size and time, and that is needed only against
the branches that may overlap this one. :func:`disjoint` answers "no value
satisfies both" from the keywords at the top of each branch (after ``$ref``
and ``allOf``): different types, ranges or lengths that do not meet,
``enum`` values the other branch rejects, a required property the other
forbids or holds to a disjoint schema. It is sound and partial: "not
known" is answered False, and nested choices can only make a branch
smaller, so they never make a "disjoint" answer wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.errors import UnsupportedSchemaError
from .ir import Flat, Sub, json_key, type_of

if TYPE_CHECKING:
    from .compiler import Compiler


def disjoint(c: "Compiler", a: Sub, b: Sub, context: Flat, required: tuple = ()) -> bool:
    """True when no value satisfies ``context``, ``a`` and ``b`` together (a sound, partial test).

    What the context says of the value counts: its types, and the names it
    requires (``context.required`` and ``required``, the ``required`` beside
    the ``oneOf``, which may come after it). Branches told apart only by the
    value of a member that the schema around them requires (``{"required":
    ["kind"], "oneOf": [{"properties": {"kind": {"const": "a"}}}, ...]}``)
    are then disjoint, and no branch carries the negations of the others.
    """
    fa = _branch_flat(c, a, context, required)
    fb = _branch_flat(c, b, context, required) if fa is not None else None
    return fb is not None and _flats_disjoint(c, fa, fb)


def disjoint_pairs(c: "Compiler", branches: list[Sub], context: Flat,
                   required: tuple = ()) -> set[tuple[int, int]]:
    """The ordered pairs ``(i, j)`` of ``branches`` for which
    :func:`disjoint` answers True, each branch absorbed once rather than
    once for every pair it is in (a ``oneOf`` of n branches absorbed each
    2(n - 1) times: a fifth of the schema front end on the MaskBench
    sample's p90 schemas)."""
    flats = [_branch_flat(c, branch, context, required) for branch in branches]
    return {(i, j) for i, fa in enumerate(flats) if fa is not None
            for j, fb in enumerate(flats) if j != i and fb is not None and _flats_disjoint(c, fa, fb)}


def _branch_flat(c: "Compiler", branch: Sub, context: Flat, required: tuple) -> Flat | None:
    """``branch`` absorbed under what ``context`` says (None: it cannot be)."""
    try:
        flat = Flat()
        flat.types = context.types
        flat.required = list(dict.fromkeys([*context.required, *required]))
        c.absorb(flat, branch)
    except UnsupportedSchemaError:
        return None
    return flat


def _flats_disjoint(c: "Compiler", fa: Flat, fb: Flat) -> bool:
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
        if _apart(fa.min_props, fa.max_props, fb.min_props, fb.max_props):
            return True
        for first, second in ((fa, fb), (fb, fa)):
            for name in first.required:
                if _forbids(second, name):
                    return True
                if name in second.required and _values_disjoint(c, first, second, name):
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


def _values_disjoint(c: "Compiler", fa: Flat, fb: Flat, name: str) -> bool:
    subs_a = [p.properties[name] for p in fa.obj_parts if name in p.properties]
    subs_b = [p.properties[name] for p in fb.obj_parts if name in p.properties]
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
