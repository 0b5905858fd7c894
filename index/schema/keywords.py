"""Reading a subschema into a :class:`~.ir.Flat`: the keyword table, and the constraints' absorbers.

:func:`absorb` is the one door into the compiler. A user's schema (a dict)
is read keyword by keyword through :data:`KEYWORDS`, the JSON Schema
keywords that assert something; any other keyword (``title``,
``description``, ``default``, ``$comment``, ``x-*`` extensions, keywords of
other vocabularies) is an annotation and changes nothing, except the few in
:data:`UNSUPPORTED`, which assert what we cannot write. A constraint the
compiler wrote (:class:`~.ir.Constraint`) is absorbed by the function
:data:`ABSORBERS` holds for its type; no dict ever takes that path.

Flattening merges by meaning instead of evaluating: ``allOf`` parts and
``$ref`` targets are absorbed into the same flat (types intersected,
bounds tightened, ``required`` united, property schemas collected per
part), while ``anyOf``, ``oneOf``, ``if``/``then``/``else`` and
dependencies become :class:`~.ir.Choice`\\ s, split later by the compiler,
and ``not`` is kept in ``flat.nots`` for :mod:`.negation`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..analysis import limits
from .ir import (ALL_TYPES, ArrPart, Choice, Conjunction, Contains, Elements, Flat, ItemCount,
                 Literals, Members, MultipleOf, Negated, NotMultipleOf, NotValues, NumberBound,
                 ObjPart, PropertyCount, Required, SomeMember, StringIn, StringLength, Sub, Types,
                 Unique, enter, json_key, local_target, make_sub)
from .numbers import to_decimal

if TYPE_CHECKING:
    from .compiler import Compiler

_JSON_TYPES = {
    "null": {"null"}, "boolean": {"boolean"}, "integer": {"integer"},
    "number": {"integer", "fraction"}, "string": {"string"}, "array": {"array"},
    "object": {"object"},
}
# Keywords that assert what no regex here can write (or only in part).
UNSUPPORTED = frozenset({
    "uniqueItems", "minContains", "maxContains", "$dynamicRef", "$recursiveRef",
})


def absorb(c: "Compiler", flat: Flat, sub: Sub) -> None:
    """Add what ``sub`` says to ``flat`` (following ``$ref`` and ``allOf``)."""
    limits.check()  # a long allOf, or an absorption per branch of a product
    schema = sub.schema
    if schema is True:
        return
    if schema is False:
        flat.false = True
        return
    absorber = ABSORBERS.get(type(schema))
    if absorber is not None:
        absorber(c, flat, sub, schema)
        return
    if not isinstance(schema, dict):
        return
    if not sub.internal:
        flat.sources.append(sub)
    if "$ref" in schema and isinstance(schema["$ref"], str):
        target = _follow(c, sub, schema["$ref"])
        if target is None:
            flat.false = True
            return
        absorb(c, flat, target)
        if c.draft <= 7:
            return  # siblings of $ref are ignored before 2019-09
    for keyword, value in schema.items():
        handler = KEYWORDS.get(keyword)
        if handler is not None:
            handler(c, flat, sub, value)
        elif keyword in UNSUPPORTED:
            _unsupported_keyword(c, flat, sub, keyword, value)
        if flat.false:
            return


def resolve(c: "Compiler", sub: Sub, ref: str) -> Sub | None:
    """The subschema ``ref`` points to from ``sub``; None for a reference that does
    not resolve or lies past the recursion bound. Nothing is noted."""
    from ..analysis.errors import SchemaError

    try:
        return _follow(c, sub, ref, quiet=True)
    except SchemaError:
        return None


def referenced(c: "Compiler", sub: Sub) -> Sub | None:
    """The subschema that ``sub`` stands for when it says nothing but a
    ``$ref`` (annotations aside, or anything beside it before 2019-09): it
    absorbs exactly as that target does. None for any other subschema, a
    reference past the recursion bound, or one that does not resolve (the
    absorption reports those); nothing is noted here."""
    schema = sub.schema
    if schema.__class__ is not dict:
        return None
    ref = schema.get("$ref")
    if ref.__class__ is not str:
        return None
    if c.draft > 7:
        for keyword in schema:
            if keyword in KEYWORDS or keyword in UNSUPPORTED:
                return None
    from ..analysis.errors import SchemaError

    try:
        return _follow(c, sub, ref, quiet=True)
    except SchemaError:
        return None


def _follow(c: "Compiler", sub: Sub, ref: str, quiet: bool = False) -> Sub | None:
    """The subschema ``ref`` points to, or None past the recursion bound
    (noted, unless ``quiet``)."""
    found = local_target(c.local_root, sub.resolver, ref)
    if found is None:
        from referencing import exceptions as refexc

        from ..analysis.errors import SchemaError

        try:
            resolved = sub.resolver.lookup(ref)
        except (refexc.Unresolvable, refexc.Unretrievable, refexc.NoSuchResource,
                refexc.CannotDetermineSpecification, LookupError, ValueError, TypeError) as exc:
            # only what a lookup raises for a bad reference: anything else (an interrupt,
            # a caller's timeout raised from a signal handler) must pass through unchanged
            raise SchemaError(f"cannot resolve $ref {ref!r} at {sub.pointer or '/'}: {exc}") from None
        found = resolved.contents, resolved.resolver
    contents, resolver = found
    key = id(contents)
    if sub.refs.count(key) > c.max_recursion_depth:
        if quiet:
            return None
        c.recursion_cut = True
        c.note(f"recursive $ref {ref!r} at {sub.pointer or '/'} unrolled "
               f"{c.max_recursion_depth} times; deeper values are not accepted")
        return None
    fragment = ref.partition("#")[2]
    pointer = fragment if ref.startswith("#") and fragment.startswith("/") else (
        fragment if ref.startswith("#") else ref)
    if isinstance(contents, dict):
        resolver = enter(resolver, contents)
    return make_sub(contents, resolver, pointer, sub.refs + (key,), sub.internal)


def _unsupported_keyword(c: "Compiler", flat: Flat, sub: Sub, keyword: str, value) -> None:
    if keyword == "uniqueItems" and value is False:
        return
    if keyword == "uniqueItems":
        flat.choices.append(Choice("uniqueItems", ((sub.derived(Unique()),),), sub.pointer))
        return
    if keyword in ("minContains", "maxContains"):
        return  # meaningless without contains, reported with it
    c.unsupported(keyword, sub.pointer, "not expressible as a regex here")


# --- merging, shared by the keywords and the constraints -----------------------------------

def _narrow_types(flat: Flat, types) -> None:
    flat.types = flat.types & frozenset(types)
    if not flat.types:
        flat.false = True


def _intersect_enum(flat: Flat, values: list) -> None:
    if flat.enum is None and set(map(type, values)) == {str}:
        flat.enum = list(dict.fromkeys(values))  # a string's key is the string
    elif flat.enum is None:
        seen, unique = set(), []
        for at, v in enumerate(values):
            if at & 1023 == 0:
                limits.check()   # 30,000 objects' keys: 80 ms
            # a string's key without the call: an enum of 60,000 strings spent 60 ms here
            key = ("str", v) if type(v) is str else json_key(v)
            if key not in seen:
                seen.add(key)
                unique.append(v)
        flat.enum = unique
    else:
        keys = set()
        for at, v in enumerate(values):
            if at & 1023 == 0:
                limits.check()
            keys.add(json_key(v))
        kept = []
        for at, v in enumerate(flat.enum):
            if at & 1023 == 0:
                limits.check()
            if json_key(v) in keys:
                kept.append(v)
        flat.enum = kept
    if not flat.enum:
        flat.false = True


def _bound(flat: Flat, value, lower: bool, inclusive: bool) -> None:
    try:
        v = to_decimal(value)
    except (TypeError, ArithmeticError, ValueError):
        return
    if lower:
        if flat.lo is None or v > flat.lo or v == flat.lo and not inclusive:
            flat.lo, flat.lo_incl = v, inclusive
    else:
        if flat.hi is None or v < flat.hi or v == flat.hi and not inclusive:
            flat.hi, flat.hi_incl = v, inclusive


def _multiple_of(flat: Flat, value, pointer: str) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        flat.multiple_of.append((to_decimal(value), pointer))


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


def _count(lower: str, upper: str, flat: Flat, minimum, maximum) -> None:
    """Tighten the count fields ``lower``/``upper`` of ``flat`` (a ``min*``/``max*`` pair)."""
    if minimum is not None:
        setattr(flat, lower, _raised_lower_bound(getattr(flat, lower), minimum))
    if maximum is not None:
        setattr(flat, upper, _lowered_upper_bound(getattr(flat, upper), maximum))


def _add_required(flat: Flat, names) -> None:
    for name in names:
        if isinstance(name, str) and name not in flat.required:
            flat.required.append(name)


def _add_object_part(flat: Flat, sub: Sub, marker, properties: dict, patterns: dict,
                     additional, additional_keyword: str) -> None:
    """One subschema's member schemas, as children of ``sub``; read once per ``marker``."""
    for p in flat.obj_parts:   # loops, not comprehensions (each a function made and called)
        if p.marker == marker:
            return
    child = sub.child
    members = {}
    for k, v in properties.items():
        members[k] = child(v, "properties", k)
    flat.obj_parts.append(ObjPart(
        members, {k: child(v, "patternProperties", k) for k, v in patterns.items()} if patterns else {},
        None if additional is None else child(additional, additional_keyword),
        sub.pointer, marker=marker))


def _add_array_part(flat: Flat, sub: Sub, prefix, prefix_keyword: str, items, items_keyword: str) -> None:
    flat.arr_parts.append(ArrPart(tuple(sub.child(s, prefix_keyword, i) for i, s in enumerate(prefix)),
                                  None if items is None else sub.child(items, items_keyword),
                                  sub.pointer))


def _dependency(flat: Flat, sub: Sub, keyword: str, name: str, present: list) -> None:
    """Either no member ``name``, or the ``present`` items hold."""
    absent = sub.derived(Members(((name, False),)))
    flat.choices.append(Choice(keyword, ((absent,), tuple(present)), sub.pointer))


# --- the keyword table: a user's schema ----------------------------------------------------

def _k_type(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    names = value if isinstance(value, list) else [value]
    allowed: set[str] = set()
    for name in names:
        if name == "any":
            allowed |= ALL_TYPES
        allowed |= _JSON_TYPES.get(name, set()) if isinstance(name, str) else set()
    _narrow_types(flat, allowed)


def _k_enum(c, flat, sub, value):
    _intersect_enum(flat, list(value) if isinstance(value, list) else [value])


def _k_const(c, flat, sub, value):
    _intersect_enum(flat, [value])


def _k_minimum(c, flat, sub, value):
    exclusive = c.draft <= 4 and sub.schema.get("exclusiveMinimum") is True
    _bound(flat, value, True, not exclusive)


def _k_maximum(c, flat, sub, value):
    exclusive = c.draft <= 4 and sub.schema.get("exclusiveMaximum") is True
    _bound(flat, value, False, not exclusive)


def _k_exclusive_minimum(c, flat, sub, value):
    if not isinstance(value, bool):     # draft 4's boolean is read with minimum
        _bound(flat, value, True, False)


def _k_exclusive_maximum(c, flat, sub, value):
    if not isinstance(value, bool):
        _bound(flat, value, False, False)


def _k_multiple_of(c, flat, sub, value):
    _multiple_of(flat, value, sub.pointer)


def _counting(lower: str, upper: str, is_max: bool):
    """The handler of a ``min*`` (``is_max`` False) or ``max*`` keyword on the fields lower/upper."""
    if is_max:
        return lambda c, flat, sub, value: _count(lower, upper, flat, None, value)
    return lambda c, flat, sub, value: _count(lower, upper, flat, value, None)


def _k_pattern(c, flat, sub, value):
    if isinstance(value, str) and value not in {p for p, _ in flat.patterns}:
        flat.patterns.append((value, sub.pointer))


def _k_format(c, flat, sub, value):
    if isinstance(value, str):
        flat.formats.append((value, sub.pointer))


def _k_items(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if isinstance(value, list):
        # draft <= 2019-09: a tuple; additionalItems for the rest
        _add_array_part(flat, sub, value, "items", schema.get("additionalItems"), "additionalItems")
        return
    if "prefixItems" in schema and c.draft >= 2020:
        return  # read with prefixItems
    _add_array_part(flat, sub, (), "items", value, "items")


def _k_prefix_items(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, list):
        _add_array_part(flat, sub, value, "prefixItems", sub.schema.get("items"), "items")


def _k_required(c, flat, sub, value):
    if isinstance(value, list):
        _add_required(flat, value)


def _k_properties(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    """``properties``, ``patternProperties`` and ``additionalProperties``: one part per schema."""
    schema = sub.schema
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    patterns = schema.get("patternProperties") if isinstance(schema.get("patternProperties"), dict) else {}
    additional = schema.get("additionalProperties")
    keyword = "additionalProperties"
    if additional is None and "unevaluatedProperties" in schema and _no_applicators(schema):
        # with no in-place applicator, "not evaluated" is "not declared, no pattern"
        additional, keyword = schema["unevaluatedProperties"], "unevaluatedProperties"
    _add_object_part(flat, sub, ("objpart", id(schema), sub.pointer), properties, patterns,
                     additional, keyword)


_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "$dynamicRef", "$recursiveRef",
                "dependentSchemas", "dependencies")


def _no_applicators(schema: dict) -> bool:
    return not any(k in schema for k in _APPLICATORS)


def _k_unevaluated_properties(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if value is True or "additionalProperties" in schema:
        return  # everything is evaluated already
    if _no_applicators(schema):
        _k_properties(c, flat, sub, value)
        return
    c.unsupported("unevaluatedProperties", sub.pointer,
                  "together with allOf/anyOf/oneOf/$ref/if in the same schema")


def _k_unevaluated_items(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    if value is True or "items" in schema and not isinstance(schema["items"], list) \
            or "additionalItems" in schema and isinstance(schema.get("items"), list):
        return
    if _no_applicators(schema) and "contains" not in schema:
        prefix = schema.get("prefixItems", schema.get("items"))
        prefix = prefix if isinstance(prefix, list) else []
        key = "prefixItems" if "prefixItems" in schema else "items"
        _add_array_part(flat, sub, prefix, key, value, "unevaluatedItems")
        return
    c.unsupported("unevaluatedItems", sub.pointer,
                  "together with allOf/anyOf/oneOf/$ref/if in the same schema")


def _k_contains(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
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


def _k_all_of(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, list):
        for i, part in enumerate(value):
            absorb(c, flat, sub.child(part, "allOf", i))
            if flat.false:
                return


def _k_any_of(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, list):
        options = tuple((sub.child(s, "anyOf", i),) for i, s in enumerate(value))
        flat.choices.append(Choice("anyOf", options, sub.pointer + "/anyOf"))


def _k_one_of(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, list):
        return
    from .disjoint import disjoint_pairs

    branches = [sub.child(s, "oneOf", i) for i, s in enumerate(value)]
    beside = sub.schema.get("required")
    required = tuple(n for n in beside if isinstance(n, str)) if isinstance(beside, list) else ()
    apart = disjoint_pairs(c, branches, flat, required)
    options = []
    for i, branch in enumerate(branches):
        # this branch, and not every other one it may overlap
        option: list = [branch]
        for j, other in enumerate(branches):
            if j != i and (i, j) not in apart:
                option.append(Negated(other))
        options.append(tuple(option))
    flat.choices.append(Choice("oneOf", tuple(options), sub.pointer + "/oneOf"))


def _k_not(c, flat, sub, value):
    flat.nots.append(sub.child(value, "not"))


def _k_if(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    schema = sub.schema
    then = schema.get("then")
    otherwise = schema.get("else")
    if then is None and otherwise is None:
        return
    condition = sub.child(value, "if")
    yes = (condition,) + ((sub.child(then, "then"),) if then is not None else ())
    no = (Negated(condition),) + ((sub.child(otherwise, "else"),) if otherwise is not None else ())
    flat.choices.append(Choice("if", (yes, no), sub.pointer + "/if"))


def _k_dependent_required(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if not isinstance(value, dict):
        return
    for name, needs in value.items():
        if isinstance(needs, list):
            if needs:
                _dependency(flat, sub, "dependentRequired", name,
                            [sub.derived(Required((name, *needs)))])
        else:
            _k_dependent_schema(flat, sub, name, needs, "dependencies")


def _k_dependencies(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if c.draft <= 7:      # split into dependentRequired/dependentSchemas in 2019-09
        _k_dependent_required(c, flat, sub, value)


def _k_dependent_schemas(c: "Compiler", flat: Flat, sub: Sub, value) -> None:
    if isinstance(value, dict):
        for name, schema in value.items():
            _k_dependent_schema(flat, sub, name, schema, "dependentSchemas")


def _k_dependent_schema(flat: Flat, sub: Sub, name: str, schema, keyword: str) -> None:
    _dependency(flat, sub, keyword, name,
                [sub.derived(Required((name,))), sub.child(schema, keyword, name)])


KEYWORDS = {
    "type": _k_type, "enum": _k_enum, "const": _k_const,
    "minimum": _k_minimum, "maximum": _k_maximum, "exclusiveMinimum": _k_exclusive_minimum,
    "exclusiveMaximum": _k_exclusive_maximum, "multipleOf": _k_multiple_of,
    "minLength": _counting("min_length", "max_length", False),
    "maxLength": _counting("min_length", "max_length", True),
    "pattern": _k_pattern, "format": _k_format,
    "minItems": _counting("min_items", "max_items", False),
    "maxItems": _counting("min_items", "max_items", True),
    "items": _k_items, "prefixItems": _k_prefix_items,
    "required": _k_required,
    "minProperties": _counting("min_props", "max_props", False),
    "maxProperties": _counting("min_props", "max_props", True),
    "properties": _k_properties, "patternProperties": _k_properties,
    "additionalProperties": _k_properties, "propertyNames": _k_property_names,
    "allOf": _k_all_of, "anyOf": _k_any_of, "oneOf": _k_one_of, "not": _k_not,
    "if": _k_if, "dependentRequired": _k_dependent_required, "dependencies": _k_dependencies,
    "dependentSchemas": _k_dependent_schemas,
    "unevaluatedProperties": _k_unevaluated_properties, "unevaluatedItems": _k_unevaluated_items,
    "contains": _k_contains,
}


# --- the constraints the compiler writes ------------------------------------------------------

def _a_types(c, flat: Flat, sub: Sub, node: Types) -> None:
    _narrow_types(flat, node.types)


def _a_bound(c, flat: Flat, sub: Sub, node: NumberBound) -> None:
    _bound(flat, node.value, node.lower, node.inclusive)


def _a_multiple_of(c, flat: Flat, sub: Sub, node: MultipleOf) -> None:
    _multiple_of(flat, node.step, sub.pointer)


def _a_not_multiple_of(c, flat: Flat, sub: Sub, node: NotMultipleOf) -> None:
    flat.not_multiple_of.append((node.step, sub.pointer))


def _counter(lower: str, upper: str):
    return lambda c, flat, sub, node: _count(lower, upper, flat, node.minimum, node.maximum)


def _a_string_in(c, flat: Flat, sub: Sub, node: StringIn) -> None:
    flat.string_regexes.append((node.regex, sub.pointer))


def _a_not_values(c, flat: Flat, sub: Sub, node: NotValues) -> None:
    flat.not_values.extend(node.values)


def _a_literals(c, flat: Flat, sub: Sub, node: Literals) -> None:
    _intersect_enum(flat, list(node.values))


def _a_required(c, flat: Flat, sub: Sub, node: Required) -> None:
    _add_required(flat, node.names)


def _a_members(c, flat: Flat, sub: Sub, node: Members) -> None:
    _add_object_part(flat, sub, ("objpart", id(node), sub.pointer), dict(node.properties), {},
                     None, "additionalProperties")


def _a_elements(c, flat: Flat, sub: Sub, node: Elements) -> None:
    _add_array_part(flat, sub, node.prefix, "prefixItems", node.items, "items")


def _a_contains(c, flat: Flat, sub: Sub, node: Contains) -> None:
    flat.contains.append(sub.child(node.schema, "contains"))


def _a_unique(c, flat: Flat, sub: Sub, node: Unique) -> None:
    # arrays of at most one element are always unique
    if flat.max_items is not None and flat.max_items <= 1:
        return
    if "array" in flat.types:
        flat.unique = sub.pointer    # written by the array emitter when the items are a few literals


def _a_negated(c, flat: Flat, sub: Sub, node: Negated) -> None:
    flat.nots.append(node.sub)


def _a_conjunction(c, flat: Flat, sub: Sub, node: Conjunction) -> None:
    for item in node.items:
        if isinstance(item, Negated):
            flat.nots.append(item.sub)
        else:
            absorb(c, flat, item)


def _a_some_member(c, flat: Flat, sub: Sub, node: SomeMember) -> None:
    flat.witnesses.append(node)


ABSORBERS = {
    Types: _a_types, NumberBound: _a_bound, MultipleOf: _a_multiple_of,
    NotMultipleOf: _a_not_multiple_of,
    StringLength: _counter("min_length", "max_length"),
    ItemCount: _counter("min_items", "max_items"),
    PropertyCount: _counter("min_props", "max_props"),
    StringIn: _a_string_in, NotValues: _a_not_values, Literals: _a_literals,
    Required: _a_required, Members: _a_members, Elements: _a_elements, Contains: _a_contains,
    Unique: _a_unique, Negated: _a_negated, Conjunction: _a_conjunction,
    SomeMember: _a_some_member,
}
