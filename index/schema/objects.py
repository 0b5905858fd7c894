"""Objects: declared members in declared order, then the additional ones.

Objects list their declared properties in declared order, then the
properties ``required`` names but does not declare, then any additional
properties (:func:`declared`). Optional properties are chained so that the
regex grows linearly: ``H_i`` is "something was written, and we are after
property ``i``", ``H_i = H_{i-1} (,p_i)? | p_i`` (the second branch only
while no required property came before). ``minProperties``/``maxProperties``
add a count to the chain (:func:`_members`).

Additional members are alternatives of a key regex and the schemas their
value must satisfy (:class:`_Extra`): every undeclared key, the keys of each
``patternProperties`` pattern (overlapping patterns cut into disjoint key
regions, :func:`_key_regions`), and the keys that match no pattern (the
complement of the patterns), restricted by ``propertyNames`` (whose
``not`` and choices are written with the algebra of key sets,
:func:`_names_satisfying`).

An object that must have a member breaking a negated schema
(:class:`~.ir.SomeMember`) has it among the declared names or among the
additional members (:func:`_with_witness`).

Key sets are compared with a product of byte DFAs (:func:`regex_subset`,
:func:`regex_disjoint`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..analysis import algebra
from ..analysis.errors import TimeLimitError
from . import strings as strs
from .ir import Flat, Negated, ObjPart, SomeMember, Sub
from ..analysis.regex_tree import Text, concat, literal_set
from .regexes import (Node, alternation, difference, fullmatch, intersect, optional, repeat)
from .scalars import LITERAL_SET_MIN, string

if TYPE_CHECKING:
    from .compiler import Compiler

MAX_KEY_REGIONS = 64       # disjoint key regions cut from overlapping patternProperties
MAX_PROPERTY_COUNT_CHAIN = 64


class _Widened(Exception):
    """Lenient mode dropped a constraint deep inside the object emitter; its caller widens."""


@dataclass(frozen=True)
class _Extra:
    """Additional members: keys matching ``key`` (JSON text; None: none), values satisfying ``subs``.

    ``all_but`` is set when ``key`` is every key except those names (what a
    witness needs to know, see :func:`_witness_key`); None for any other set
    of keys (a pattern's, the complement of the patterns', ``propertyNames``').
    """

    key: Node | None
    subs: list
    all_but: tuple | None = None


@dataclass(frozen=True)
class _Piece:
    """One ``patternProperties`` pattern (or key region) on its way to an :class:`_Extra`."""

    key: Node
    value: Node | None      # the value regex (None: no value fits)
    pattern: str | None
    subs: list
    all_but: tuple | None = None

    def extra(self) -> _Extra:
        return _Extra(self.key, self.subs, self.all_but)


def declared(flat: Flat) -> list[str]:
    """Member names in the order the regex writes them (properties, then required)."""
    names: list[str] = []
    for part in flat.obj_parts:
        if part.declares:
            for name in part.properties:
                if name not in names:
                    names.append(name)
    for name in flat.required:
        if name not in names:
            names.append(name)
    return names


def member_subs(c: "Compiler", part: ObjPart, name: str, report: bool = True) -> list[Sub]:
    """What ``part`` says a member named ``name`` satisfies: its property, the patterns it
    matches, else ``additionalProperties`` (patterns apply to declared properties too)."""
    if not part.patterns:
        matched = []
    else:
        matched = [s for p, s in part.patterns.items()
                   if c.pattern_matches(p, name, "patternProperties", part.pointer, report=report)]
    subs = matched
    if name in part.properties:
        subs = subs + [part.properties[name]]
    elif not matched and part.additional is not None:
        subs = subs + [part.additional]
    return subs


def object_(c: "Compiler", flat: Flat, depth: int) -> Node | None:
    if flat.witnesses:
        return _with_witness(c, flat, depth)
    return _object_members(c, flat, depth, None)


def _with_witness(c: "Compiler", flat: Flat, depth: int) -> Node | None:
    """An object with a member that breaks a negated schema (:class:`~.ir.SomeMember`).

    The member is either one of the declared names (then it is required
    and its value satisfies the witness too) or one of the additional
    members (written after the declared ones, at least one of them a witness).
    """
    witness = flat.witnesses[0]
    base = flat.copy()
    base.witnesses = []
    if len(flat.witnesses) > 1:
        c.unsupported("not", flat.witnesses[1].pointer,
                      "several negated patternProperties/additionalProperties on one object")
    if base.min_props > 0 or base.max_props is not None:
        c.unsupported("not", witness.pointer, "negated patternProperties/additionalProperties "
                      "together with minProperties/maxProperties")
        return _object_members(c, base, depth, None)

    def matches(pattern: str, name: str) -> bool:
        return c.pattern_matches(pattern, name, "not", witness.pointer, default=True)

    alternatives = []
    for name in declared(base):
        if witness.covers(name, matches, c.valid):
            branch = base.copy()
            if name not in branch.required:
                branch.required.append(name)
            if witness.value is not None:
                branch.obj_parts.append(ObjPart({name: witness.value}, {}, None, witness.pointer,
                                                declares=False))
            alternatives.append(_object_members(c, branch, depth, None))
    try:
        alternatives.append(_object_members(c, base, depth, witness))
    except _Widened:
        return _object_members(c, base, depth, None)   # lenient: the witness dropped
    return alternation(alternatives)


def _object_members(c: "Compiler", flat: Flat, depth: int, witness: SomeMember | None) -> Node | None:
    parts: list[ObjPart] = flat.obj_parts
    required = set(flat.required)
    names_subs = flat.property_names
    entries = []          # (key regex, value regex, required)
    excluded = []
    for name in declared(flat):
        if names_subs and not all(c.valid(name, s) for s in names_subs):
            if name in required:
                return None
            excluded.append(name)
            continue
        if len(parts) == 1:
            subs = member_subs(c, parts[0], name)
        else:
            subs = [s for part in parts for s in member_subs(c, part, name)]
        value = c.element(subs, depth + 1)
        excluded.append(name)
        if value is None:
            if name in required:
                return None
            continue
        entries.append((strs.json_string_literal(name), value, name in required))
    extras = _extras(c, flat, parts, excluded, depth)
    extra = [(e.key, c.element(e.subs, depth + 1)) for e in extras]
    extra = [(key, value) for key, value in extra if key is not None and value is not None]
    if witness is None:
        return _members(c, entries, extra, flat.min_props, flat.max_props, depth)
    witnessed = []
    for e in extras:
        key = _witness_key(c, e, witness)
        if key is not None:
            value = c.element(e.subs + ([witness.value] if witness.value is not None else []),
                              depth + 1)
            if value is not None:
                witnessed.append((key, value))
    return _members(c, entries, extra, flat.min_props, flat.max_props, depth, witnessed)


def _witness_key(c: "Compiler", extra: _Extra, witness: SomeMember) -> Node | None:
    """The keys of the additional members ``extra`` that can be the witness.

    Raises :class:`_Widened` in lenient mode where the intersection has no exact regex.
    """
    if extra.key is None:
        return None
    try:
        if witness.key_schema is not None:
            # canonical spellings only: "\u0061" is the name "a", which may well fit
            fitting = _key(c, [witness.key_schema], [], witness.pointer)
            keys = strs.canonical_string_regex()
            if fitting is not None:
                keys = difference(keys, fitting)
        elif witness.pattern is not None:
            keys = strs.translate_pattern(witness.pattern)
        elif witness.others:
            keys = _keys_matching_none(list(witness.others))
        else:
            keys = strs.keys_except([])
        if keys is not None and extra.all_but is None:
            keys = intersect(extra.key, keys)
        # declared names (of this object and of the negated schema) are witnesses elsewhere
        avoid = sorted(set(witness.names) | set(extra.all_but or ()))
        if keys is not None and avoid:
            keys = difference(keys, _names(avoid))
        return keys
    except (strs.PatternUnsupported, algebra.NoExactRegex):
        pass
    c.unsupported("not", witness.pointer, "negated patternProperties/additionalProperties: "
                  "no exact regex for the keys that break them")
    raise _Widened()


def _names(names) -> Node | None:
    """The JSON texts of these names, as one alternation (a literal set, built
    as a minimal automaton, when ``LITERAL_SET_MIN`` or more are plain text)."""
    trees = [strs.json_string_literal(n) for n in names]
    if len(trees) >= LITERAL_SET_MIN and all(tree.__class__ is Text for tree in trees):
        return literal_set(tree.text for tree in trees)
    return alternation(trees)


def _extras(c: "Compiler", flat: Flat, parts: list[ObjPart], excluded: list[str],
            depth: int) -> list[_Extra]:
    """Undeclared members, as alternatives (none: no undeclared member is allowed)."""
    with_patterns = []
    for p in parts:
        if p.patterns:
            with_patterns.append(p)
        elif p.additional is not None and p.additional.schema is False:
            return []   # closed: no undeclared member
    key_subs = flat.property_names
    every_but = None if key_subs else tuple(excluded)
    if not with_patterns:
        subs = [p.additional for p in parts if p.additional is not None]
        if c.element(subs, depth + 1) is None:
            return []
        return [_Extra(_key(c, key_subs, excluded, parts[0].pointer if parts else ""), subs, every_but)]
    if len(with_patterns) > 1:
        c.unsupported("patternProperties", with_patterns[1].pointer,
                      "patternProperties in more than one subschema of an allOf")
    part = with_patterns[0]
    others = [p.additional for p in parts if p is not part and p.additional is not None]
    pieces: list[_Piece] = []
    for pattern, sub in part.patterns.items():
        try:
            key = strs.translate_pattern(pattern)
        except strs.PatternUnsupported as exc:
            c.unsupported("patternProperties", part.pointer, str(exc))
            continue
        if key is None:
            continue
        all_but = None
        if regex_subset(strs.keys_except([]), key):
            # the pattern takes every key (".*"): the extras are every undeclared key
            key, all_but = strs.keys_except(excluded), tuple(excluded)
        elif any(c.pattern_matches(pattern, name, "patternProperties", part.pointer)
                 for name in excluded):
            # the declared names are written with the declared members, not again here
            try:
                key = difference(key, _names(excluded))
            except algebra.NoExactRegex as exc:
                c.unsupported("patternProperties", part.pointer,
                              f"pattern {pattern!r} also matches a declared property name ({exc})")
            if key is None:
                continue
        if key_subs:
            c.unsupported("propertyNames", part.pointer, "propertyNames with patternProperties")
        value = c.element([sub] + others, depth + 1)
        pieces.append(_Piece(key, value, pattern, [sub] + others, all_but))
    patterns = [piece.pattern for piece in pieces]
    if len(pieces) > 1 and len({p.value for p in pieces}) > 1 \
            and not _disjoint_keys([p.key for p in pieces]):
        pieces = _key_regions(c, pieces, others, part.pointer, depth)
    additional = part.additional
    result = [p.extra() for p in pieces if p.value is not None]
    if additional is not None and additional.schema is False:
        return result
    if any(p.key == strs.keys_except(excluded) for p in pieces):
        return result           # a pattern such as ".*" matches every key
    # keys that match no pattern: need the complement of the patterns
    rest_subs = ([additional] if additional is not None else []) + others
    value = c.element(rest_subs, depth + 1)
    if len(patterns) == 1 and not key_subs and all(
            c.pattern_matches(patterns[0], name, "patternProperties", part.pointer) for name in excluded):
        rest = strs.pattern_complement(patterns[0])
        if rest is not None:
            return result + ([_Extra(rest, rest_subs)] if value is not None else [])
    anything = c.element([], depth + 1)
    if len(result) == len(pieces) and all(p.value == anything for p in pieces) and value == anything:
        return [_Extra(_key(c, key_subs, excluded, part.pointer), [], every_but)]
    if value is None and len(result) == len(pieces):
        return result
    if not key_subs and value is not None:
        try:
            rest = _keys_matching_none(patterns)
            if rest is not None and excluded:
                rest = difference(rest, _names(excluded))
            return result + ([_Extra(rest, rest_subs)] if rest is not None else [])
        except (algebra.NoExactRegex, strs.PatternUnsupported):
            pass
    c.unsupported("additionalProperties" if additional is not None else "patternProperties",
                  part.pointer,
                  "properties that match no pattern (or a pattern whose schema is false) "
                  "would need the complement of the patterns")
    if value is not None:
        result.append(_Extra(_key(c, key_subs, excluded, part.pointer), rest_subs))
    return result


def _key_regions(c: "Compiler", pieces: list[_Piece], others: list[Sub], pointer: str,
                 depth: int) -> list[_Piece]:
    """Overlapping patterns cut into disjoint key regions, each with every schema that applies.

    A key that matches several patterns must satisfy all their schemas, so
    the keys are split by which patterns they match (intersections and
    differences of the key regexes); one member alternative per non-empty
    region, its value held to the union of the schemas.
    """
    regions: list[tuple[Node, list[int]]] = []
    try:
        for i, piece in enumerate(pieces):
            refined, alone = [], piece.key
            for region, members in regions:
                both = intersect(region, piece.key)
                if both is None:
                    refined.append((region, members))
                    continue
                refined.append((both, members + [i]))
                left = difference(region, piece.key)
                if left is not None:
                    refined.append((left, members))
                if alone is not None:
                    alone = difference(alone, region)
            if alone is not None:
                refined.append((alone, [i]))
            regions = refined
            if len(regions) > MAX_KEY_REGIONS:
                raise algebra.NoExactRegex(f"more than {MAX_KEY_REGIONS} key regions")
    except algebra.NoExactRegex as exc:
        c.unsupported("patternProperties", pointer,
                      f"overlapping patterns with different schemas ({exc})")
        return pieces
    split = []
    for region, members in regions:
        subs = [pieces[i].subs[0] for i in members] + others
        first = pieces[members[0]]
        same = len(members) == 1 and region == first.key
        split.append(_Piece(region, c.element(subs, depth + 1), None, subs,
                            first.all_but if same else None))
    return split


def _key(c: "Compiler", key_subs: list[Sub], excluded: list[str], pointer: str) -> Node | None:
    """Regex for the undeclared keys that ``propertyNames`` (``key_subs``) allow."""
    if not key_subs:
        names = tuple(excluded)
        return c.deferred_piece(("keys except", names), lambda: strs.keys_except(names))
    flat = Flat()
    for sub in key_subs:
        c.absorb(flat, sub)
    if flat.false:
        return None
    if flat.enum is not None:
        # jsonschema checks each name against the whole of propertyNames, combinators too
        # (not against the enum each name comes from: listed)
        taken = set(excluded)
        names = [v for v in flat.enum if isinstance(v, str) and v not in taken
                 and all(c.valid(v, s, listed=True) for s in key_subs)]
        return _names(names)
    if flat.choices or flat.nots:
        try:
            regex = _names_satisfying(c, key_subs, 0)
            if regex is not None and excluded:
                regex = difference(regex, _names(excluded))
            return regex
        except (algebra.NoExactRegex, strs.PatternUnsupported, _NoKeyRegex) as exc:
            c.unsupported("propertyNames", pointer, f"propertyNames with combinators: {exc}")
            return strs.keys_except(excluded)
    flat.types = frozenset({"string"})
    regex = string(c, flat)
    if regex is None:
        return None
    if any(fullmatch(regex, json.dumps(n, ensure_ascii=False)) for n in excluded):
        if flat.patterns or flat.formats:
            c.unsupported("propertyNames", pointer,
                          "a declared property name also fits propertyNames")
        elif flat.min_length == 0 and flat.max_length is None:
            return strs.keys_except(excluded)
        else:
            c.unsupported("propertyNames", pointer,
                          "propertyNames lengths together with declared properties")
    return regex


class _NoKeyRegex(Exception):
    """A ``propertyNames`` schema whose names :func:`_names_satisfying` cannot write."""


MAX_KEY_NESTING = 8


def _names_satisfying(c: "Compiler", subs: list, nesting: int) -> Node | None:
    """The canonical JSON texts of the names every item of ``subs`` accepts
    (``Sub`` or :class:`~.ir.Negated`; None: no name).

    ``not``, ``anyOf``/``oneOf``/``if`` are written with the algebra of key
    sets: the names of ``not S`` are every name less those of ``S``, a choice
    the union of its alternatives' names. Raises :class:`_NoKeyRegex`, or
    :class:`~tokendfa.analysis.algebra.NoExactRegex` where the result has no
    regex within the algebra's limits.
    """
    if nesting > MAX_KEY_NESTING:
        raise _NoKeyRegex(f"combinators nested more than {MAX_KEY_NESTING} deep")
    flat = Flat()
    negated = []
    for item in subs:
        if isinstance(item, Negated):
            negated.append(item.sub)
        else:
            c.absorb(flat, item)
    if flat.false:
        return None
    negated += flat.nots
    if flat.enum is not None:
        return _names([v for v in flat.enum if isinstance(v, str)
                       and all(c.valid(v, s, listed=True) for s in subs if isinstance(s, Sub))
                       and not any(c.valid(v, s) for s in negated)])
    if "string" not in flat.types:
        return None
    if flat.witnesses:
        raise _NoKeyRegex("an object constraint on a name")
    plain = flat.copy()
    plain.choices, plain.nots = [], []
    plain.types = frozenset({"string"})
    regex = string(c, plain)
    if regex is not None:
        # canonical spellings only, as every other key regex
        regex = intersect(regex, strs.canonical_string_regex())
    for choice in flat.choices:
        if regex is None:
            return None
        options = [_names_satisfying(c, list(option), nesting + 1) for option in choice.alternatives]
        union = alternation([o for o in options if o is not None])
        regex = None if union is None else intersect(regex, union)
    for sub in negated:
        if regex is None:
            return None
        names = _names_satisfying(c, [sub], nesting + 1)
        if names is not None:
            regex = difference(regex, names)
    return regex


def _disjoint_keys(regexes: list[Node]) -> bool:
    return all(regex_disjoint(a, b) for i, a in enumerate(regexes) for b in regexes[i + 1:])


def _keys_matching_none(patterns: list[str]) -> Node | None:
    """Keys (JSON text) that match none of the ECMA ``patterns`` (raises NoExactRegex/PatternUnsupported)."""
    matched = alternation([strs.translate_pattern(p) for p in patterns])
    if matched is None:
        return strs.keys_except([])
    return difference(strs.keys_except([]), matched)


def member_chain(members: list, comma: Node) -> tuple[Node | None, bool]:
    """The declared members of an object in their order, each ``(member, required)``
    (``member`` its key, colon and value): the tree of the members written, at
    least one of them, and whether one is required (then at least one is always
    written)."""
    chain: Node | None = None     # at least one member written, after the members so far
    seen_required = False
    # once a required member is written, each later one only follows: the
    # chain is then concat(*after), made once (a concatenation a member at
    # a time flattened the growing chain again each time, and interned each)
    after: list[Node] = []
    for member, req in members:
        if chain is None:
            chain = member
        elif seen_required:
            after.append(concat(comma, member) if req else optional(concat(comma, member)))
        else:
            step = concat(chain, concat(comma, member) if req else optional(concat(comma, member)))
            # unless a required member came before, this one may be the first written
            chain = alternation([step, member])
        if req and not seen_required:
            seen_required = True
            after = [chain]
    if len(after) > 1:
        chain = concat(*after)
    return chain, seen_required


def _members(c: "Compiler", entries, extras, min_props: int, max_props: int | None,
             depth: int, witnessed: list | None = None) -> Node | None:
    """The object: declared members in order (O(k) regex), then extra members.

    ``entries`` are ``(key, value, required)`` regexes of the declared
    members, ``extras`` ``(key, value)`` regexes of the additional ones. With
    ``witnessed`` (``(key, value)`` regexes, each within some extra member),
    at least one of the extra members must be one of those.
    """
    layout = c.layout
    comma = layout.comma(depth)
    colon = layout.colon()
    if max_props is not None and max_props < min_props:
        return None
    n_required = 0
    members = []
    for k, v, r in entries:
        if r:
            n_required += 1
        members.append((concat(k, colon, v), r))
    if max_props is not None and n_required > max_props:
        return None
    extra = alternation([concat(k, colon, v) for k, v in extras if k is not None]) if extras else None
    # written up to three times below (after the declared members, alone, and
    # repeated after each): with share_values one definition, compiled once by
    # a lazy index, when first reached
    extra = c.value_definition(extra)
    # bounds that every object of this shape meets need no count: the required members
    # alone reach the minimum ({"minProperties": 1, "required": ["id"]}, common in
    # Snowplow's schemas), or no more members than the maximum can be written at all
    if min_props <= n_required:
        min_props = 0
    if max_props is not None and extra is None and max_props >= len(members):
        max_props = None
    counting = min_props > 0 or max_props is not None
    if not counting:
        chain, seen_required = member_chain(members, comma)
        bodies = []
        if witnessed is not None:
            # some extra member is a witness: extras, the witness, extras
            hit = alternation([k + colon + v for k, v in witnessed])
            if hit is None or extra is None:
                return None
            around = repeat(comma + extra, 0, None)
            if chain is not None:
                bodies.append(chain + around + comma + hit + around)
            if not seen_required:
                bodies.append(repeat(extra + comma, 0, None) + hit + around)
            return c.container("{", "}", alternation(bodies), False, depth)
        if chain is not None:
            bodies.append(chain + repeat(comma + extra, 0, None) if extra is not None else chain)
        if extra is not None and not seen_required:
            bodies.append(extra + repeat(comma + extra, 0, None))
        return c.container("{", "}", alternation(bodies), not seen_required, depth)
    # with a count: chains[c] = written exactly c members (c capped at cap)
    cap = len(members)
    if cap > MAX_PROPERTY_COUNT_CHAIN:
        c.unsupported("maxProperties" if max_props is not None else "minProperties", "",
                      f"property counts on an object of more than {MAX_PROPERTY_COUNT_CHAIN} properties")
        return _members(c, entries, extras, 0, None, depth)
    chains: dict[int, Node] = {}
    seen_required = False
    for member, req in members:
        new: dict[int, list[Node]] = {}
        for count, regex in chains.items():
            new.setdefault(count + 1, []).append(regex + comma + member)
            if not req:
                new.setdefault(count, []).append(regex)
        if not seen_required:
            new.setdefault(1, []).append(member)
        seen_required = seen_required or req
        merged: dict[int, list[Node]] = {}
        for count, rs in new.items():
            if max_props is not None and count > max_props:
                continue
            # without a maximum, every count past the minimum behaves alike
            merged.setdefault(count if max_props is not None else min(count, max(min_props, 1)),
                              []).extend(rs)
        chains = {count: alternation(rs) for count, rs in merged.items()}
    bodies = []
    for count, regex in chains.items():
        a = max(0, min_props - count)
        b = None if max_props is None else max_props - count
        if extra is None:
            if a == 0:
                bodies.append(regex)
            continue
        bodies.append(regex + repeat(comma + extra, a, b))
    if not seen_required and extra is not None:
        a = max(1, min_props)
        b = max_props
        if b is None or b >= 1:
            bodies.append(extra + repeat(comma + extra, a - 1, None if b is None else b - 1))
    can_be_empty = not seen_required and min_props == 0
    return c.container("{", "}", alternation(bodies), can_be_empty, depth)


# --- comparing key sets ------------------------------------------------------------------------

def regex_subset(a: Node, b: Node) -> bool:
    """Whether every text ``a`` matches, ``b`` matches too (byte DFA product; False if unsure)."""
    # b's dead state is followed too: a text a still matches after b died is a counterexample.
    return _product_reaches(a, b, lambda in_a, in_b: in_a and not in_b, b_may_die=True) is False


def regex_disjoint(a: Node, b: Node) -> bool:
    """Whether two regexes (our dialect) match no common text: a product of their byte DFAs."""
    return _product_reaches(a, b, lambda in_a, in_b: in_a and in_b, b_may_die=False) is False


def _product_reaches(a: Node, b: Node, wanted, *, b_may_die: bool) -> bool | None:
    """Whether some pair of states reachable in the product of the byte DFAs
    of ``a`` and ``b`` has ``wanted(a final, b final)``; None when either
    regex cannot be compiled (the callers then answer "not known")."""
    try:
        ta, fa = _byte_tables(a)
        tb, fb = _byte_tables(b)
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
        # the successor pairs of all 256 bytes at once (a loop over the bytes
        # in Python was most of an object's patternProperties check: o10293)
        row_a, row_b = ta[x], tb[y]
        keep = row_a != 0 if b_may_die else (row_a != 0) & (row_b != 0)
        for pair in set(zip(row_a[keep].tolist(), row_b[keep].tolist())):
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
    return False


# Byte DFAs of key regexes, kept for the process (_byte_tables): at most this
# many, of at most this many bytes each (a few MB in all).
_TABLES_KEPT = 64
_TABLE_MAX_BYTES = 1 << 16
_TABLES: dict = {}


def _byte_tables(tree: Node):
    """The byte DFA of a key regex (read only); a small one is kept, since the
    same few key sets (every key, a pattern's) are compared again and again."""
    from ..analysis.regex_compiler import byte_tables_from_regex

    found = _TABLES.get(tree)
    if found is None:
        found = byte_tables_from_regex(tree)
        if found[0].nbytes <= _TABLE_MAX_BYTES:
            if len(_TABLES) >= _TABLES_KEPT:
                _TABLES.clear()
            _TABLES[tree] = found
    return found
