"""Arrays: prefix positions, items, lengths, ``contains`` and ``uniqueItems`` over literals.

An array is written position by position: the prefix positions (``prefixItems``,
or draft 7's list ``items``), each the conjunction of what every part says
about it, then the repeated element of ``items``. The elements past
``minItems`` are optional, nested so that the regex grows linearly
(``a(,b(,c(,d)*)?)?``); a position no value fits ends the array before it.

``contains`` is an element that satisfies its schema too, with any elements
before and after (:func:`_with_contains`); several ``contains`` are the
ordered partitions of their hits (:func:`_with_several_contains`).
``uniqueItems`` is written only where the items are a few literals, as the
tree of their orderings (:func:`_unique`); anything else is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis import algebra
from .ir import Flat, Sub
from ..analysis.regex_tree import concat
from .regexes import EMPTY, Node, alternation, optional, repeat
from .scalars import admitted_values

if TYPE_CHECKING:
    from .compiler import Compiler

MAX_UNIQUE_VALUES = 6       # uniqueItems over literals: 1,957 orderings of 6 values
MAX_SEVERAL_CONTAINS = 3   # several contains: 13 orderings of hits for 3, 75 for 4
MAX_CONTAINS_ITEMS = 8     # contains with maxItems: one alternative per position of the hit


def array(c: "Compiler", flat: Flat, depth: int) -> Node | None:
    lo, hi = flat.min_items, flat.max_items
    if hi is not None and hi < lo:
        return None
    if flat.unique is not None and (hi is None or hi > 1):
        return _unique(c, flat, depth)
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
        regex = c.element(subs, depth + 1)
        if regex is None:       # no value fits here: the array stops before
            hi = i if hi is None else min(hi, i)
            break
        positions.append(regex)
    if flat.contains:
        return _with_contains(c, flat, positions, lo, hi, depth)
    n = len(positions)
    rest = None
    if hi is None or hi > n:
        rest = c.element(_items(flat), depth + 1)
        if rest is None:
            hi = n
    if hi is not None and hi < lo:
        return None
    comma = c.layout.comma(depth)
    tail_lo = max(0, lo - n)
    tail_hi = None if hi is None else hi - n
    if n == 0:
        body = None
        if rest is not None and (tail_hi is None or tail_hi >= 1):
            body = rest + repeat(comma + rest, max(0, tail_lo - 1),
                                 None if tail_hi is None else tail_hi - 1)
        return c.container("[", "]", body, lo == 0, depth)
    body = EMPTY if rest is None else repeat(comma + rest, tail_lo, tail_hi)
    for i in range(n - 1, 0, -1):
        segment = comma + positions[i] + body
        body = segment if i < lo else optional(segment)
    body = positions[0] + body
    return c.container("[", "]", body, lo == 0, depth)


def _items(flat: Flat) -> list[Sub]:
    """The ``items`` subschemas of every part: what an element past the prefixes satisfies."""
    return [p.items for p in flat.arr_parts if p.items is not None]


def _without(c: "Compiler", flat: Flat, depth: int, keyword: str, pointer: str, detail: str,
             **changes) -> Node | None:
    """Report ``keyword`` and write the array with ``changes`` to the flat (lenient: wider)."""
    c.unsupported(keyword, pointer, detail)
    flat = flat.copy()
    for name, value in changes.items():
        setattr(flat, name, value)
    return array(c, flat, depth)


def _unique(c: "Compiler", flat: Flat, depth: int) -> Node | None:
    """``uniqueItems`` where the items are a few literals (an ``enum``, ``const``).

    Arrays of distinct values from a finite set: each value once at most,
    in any order, so the regex lists the orderings as a tree (``a(,b(,c)?|,c(,b)?)?|...``).
    It grows like the number of orderings: up to MAX_UNIQUE_VALUES values.
    Items that allow infinitely many values have no such regex (equal strings
    would have to be compared) and are reported.
    """
    pointer = flat.unique
    values = None
    if not flat.contains and not any(p.prefix for p in flat.arr_parts):
        values = _finite_values(c, _items(flat))
    if values is None or len(values) > MAX_UNIQUE_VALUES:
        return _without(c, flat, depth, "uniqueItems", pointer,
                        "not expressible as a regex (items must differ; only items with at most "
                        f"{MAX_UNIQUE_VALUES} literal values are written)", unique=None)
    lo, hi = flat.min_items, flat.max_items
    hi = len(values) if hi is None else min(hi, len(values))
    if lo > hi:
        return None
    texts = [c.literal(v, depth + 1) for v in values]
    comma = c.layout.comma(depth)
    memo: dict = {}

    def rest(left: frozenset, count: int) -> Node | None:
        """After ``count`` elements, with the values ``left`` still unused."""
        key = (left, count)
        if key not in memo:
            options = []
            if count < hi:
                for i in sorted(left):
                    tail = rest(left - {i}, count + 1)
                    head = (comma + texts[i]) if count else texts[i]
                    options.append(head if tail is None else
                                   head + (optional(tail) if count + 1 >= lo else tail))
            memo[key] = alternation(options)
            if memo[key] is not None and memo[key].size > algebra.MAX_LENGTH:
                c.unsupported("uniqueItems", pointer, "the orderings of the distinct values "
                              f"would exceed {algebra.MAX_LENGTH:,} characters")
        return memo[key]

    body = rest(frozenset(range(len(values))), 0)
    return c.container("[", "]", body, lo == 0, depth)


def _finite_values(c: "Compiler", subs: list[Sub]) -> list | None:
    """The values ``subs`` all accept, if they are a listed few (``enum``, ``const``), else None."""
    flat = Flat()
    for sub in subs:
        c.absorb(flat, sub)
    if flat.false:
        return []
    candidates = flat.enum
    if candidates is None and flat.types <= {"boolean", "null"}:
        candidates = [True, False, None]
    if candidates is None:
        return None
    return admitted_values(c, flat, candidates, unique=True)


def _with_contains(c: "Compiler", flat: Flat, positions, lo: int, hi: int | None,
                   depth: int) -> Node | None:
    """Arrays with ``contains``: some element (after a run of any) satisfies it too."""
    pointer = flat.contains[0].pointer
    prefixed = any(p.prefix for p in flat.arr_parts) or positions
    if len(flat.contains) > 1 and not prefixed:
        return _with_several_contains(c, flat, lo, hi, depth)
    if len(flat.contains) > 1 or prefixed:
        return _without(c, flat, depth, "contains", pointer,
                        "contains with prefixItems or several contains", contains=[])
    if hi is not None and hi > MAX_CONTAINS_ITEMS:
        return _without(c, flat, depth, "contains", pointer,
                        f"contains with maxItems over {MAX_CONTAINS_ITEMS}", contains=[])
    items = _items(flat)
    element = c.element(items, depth + 1)
    hit = c.value(items + flat.contains, depth + 1)
    if hit is None:
        return None
    comma = c.layout.comma(depth)
    bodies = []
    lo = max(lo, 1)
    if element is None:     # only the hit itself fits nowhere else: impossible
        return None
    if hi is None:
        # a elements before the hit, then at least lo - 1 - a after
        for before in range(lo):
            bodies.append(repeat(element + comma, before, before) + hit
                          + repeat(comma + element, lo - 1 - before, None))
        bodies.append(repeat(element + comma, lo, None) + hit + repeat(comma + element, 0, None))
    else:
        for before in range(hi):
            after_lo, after_hi = max(0, lo - 1 - before), hi - 1 - before
            if after_lo <= after_hi:
                bodies.append(repeat(element + comma, before, before) + hit
                              + repeat(comma + element, after_lo, after_hi))
    return c.container("[", "]", alternation(bodies), False, depth)


def _with_several_contains(c: "Compiler", flat: Flat, lo: int, hi: int | None,
                           depth: int) -> Node | None:
    """Arrays with several ``contains`` (no prefix, no maxItems, minItems <= 1).

    Every ``contains`` needs a hit; one element may be the hit of several.
    The hits, in array order, are an ordered partition of the ``contains``
    (3 for two of them, 13 for three), and any elements fill the gaps:
    ``(E,)* H_1 (,E)* ,H_2 (,E)* ...``.
    """
    pointer = flat.contains[0].pointer
    if len(flat.contains) > MAX_SEVERAL_CONTAINS or hi is not None or lo > 1:
        return _without(c, flat, depth, "contains", pointer,
                        "several contains with maxItems, minItems > 1 "
                        f"or more than {MAX_SEVERAL_CONTAINS} of them", contains=flat.contains[:1])
    items = _items(flat)
    element = c.element(items, depth + 1)
    if element is None:
        return None
    comma = c.layout.comma(depth)
    hits: dict[frozenset, str | None] = {}

    def hit(group: frozenset) -> Node | None:
        if group not in hits:
            hits[group] = c.value(items + [flat.contains[i] for i in sorted(group)], depth + 1)
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

    gap = repeat(comma + element, 0, None)
    bodies = []
    for groups in orderings(frozenset(range(len(flat.contains)))):
        regexes = [hit(g) for g in groups]
        if any(r is None for r in regexes):
            continue
        bodies.append(concat(repeat(element + comma, 0, None), regexes[0],
                             *[gap + comma + r for r in regexes[1:]], gap))
    return c.container("[", "]", alternation(bodies), False, depth)
