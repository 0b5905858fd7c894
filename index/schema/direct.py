"""The common schemas straight to the compiler's trees, without its general machinery.

:func:`compile_direct` takes a schema (a dict) and the options a lazy index
compiles with (``Index.from_schema``'s defaults, see
:func:`~tokendfa.schema.api.regex_from_schema`) and returns the very
:class:`~tokendfa.schema.api.SchemaRegex` the general path would return, or
None: the general path then runs as it is. It takes only schemas it is sure
of: every subschema uses only ``type``, ``properties``, ``required``,
``additionalProperties``, ``items`` (one schema), ``enum``/``const``
(beside ``type`` and annotations alone), ``format``, ``pattern``,
``minLength``/``maxLength`` (below the shared counts), ``minimum``/``maximum``,
``minItems``/``maxItems``, ``anyOf`` (beside annotations alone), ``oneOf``
(beside annotations alone, each branch a ``type`` no other branch's meets:
the compiler writes it as an ``anyOf``), and plain
local ``$ref`` to the root's ``definitions``/``$defs`` (non-recursive;
every definition is written, so checked), with the annotations ``title``,
``description``, ``$comment``, ``default``, ``examples``, ``readOnly``,
``writeOnly``, ``deprecated``, keys no dialect defines (whose JSON holds no
reference), and at the root ``$schema`` (a dialect the compiler knows) and
``$id`` (or draft 4's ``id``); each value of a shape that every dialect's meta-schema accepts.
Anything else (another keyword, an odd value, a schema the general path
would refuse or narrow) is declined, so that the general path raises its
error or widens as it does. A walk of the keys comes first, so that a
schema with another keyword deep inside is declined before any tree is
written.

Why: in a worker forked from a warm server process, the general front end
(the schema's shape, the meta-schema check, the ``referencing`` resolver,
the :class:`~.compiler.Compiler` and its flats) was ~0.8-0.9 ms and ~110
copy-on-write page faults of a ~1.3 ms first mask at MaskBench's median,
while building the final trees alone cost ~0.07 ms (``benchmarks/HISTORY.md``,
"Issue #29: what a compiled schema front end would save"). A fork's cost is
a tax on each distinct thing first touched (a function's code, a dict
written), so this is a few functions over the user's dicts, with the shared
pieces (scalars, free values, formats, separators) taken from the same
process-wide tables the compiler fills.

The trees are what :meth:`Compiler.value <tokendfa.schema.compiler.Compiler.value>`
writes for these keywords with ``share_values``, ``share_free_levels``,
``share_counts`` and ``defer_recursion``: the same nodes (interned), the
same placeholders in the same order (each value of ``SHARE_VALUE_MIN_LENGTH``
characters a definition, an object's additional keys a deferred piece),
the same notes. ``benchmarks/direct_equality.py`` and
``tests/test_schema_direct.py`` hold the two paths equal on real schemas.
"""

from __future__ import annotations

import math

from ..analysis.errors import UnsupportedSchemaError
from ..analysis.regex_tree import Call, concat
from . import numbers as nums
from . import strings as strs
from .compiler import (
    MAX_DEFINITIONS,
    MAX_VALUE_DEFINITIONS,
    PLACEHOLDER_BASE,
    SHARE_MIN_LENGTH,
    SHARE_VALUE_MIN_LENGTH,
    SHARED_COUNT_MIN,
    Layout,
    definition_matches,
    stored_free_value,
    used_definitions,
)
from .depth import written_size
from .formats import FORMATS, NARROWED, format_tree
from .numbers import to_decimal
from .objects import member_chain
from .regexes import alternation, counted, lit, repeat
from .scalars import LITERAL_SET_MIN, number_literal

__all__ = ["ENABLED", "DirectDefinitions", "compile_direct"]

# Switched off (ENABLED[0] = False) by the benchmarks that compare the two paths.
ENABLED = [True]

# The dialects a root "$schema" may name: URI -> (draft, meta-schema URI), as api._DRAFT_OF_URI
# reads them (filled by the api, which owns that table).
DIALECTS: dict = {}
_NO_DIALECT = (2020, "https://json-schema.org/draft/2020-12/schema")

_TYPE_NAMES = {"null": ("null",), "boolean": ("boolean",), "integer": ("integer",),
               "number": ("integer", "fraction"), "string": ("string",), "array": ("array",),
               "object": ("object",)}
_ALL_TYPES = frozenset({"null", "boolean", "integer", "fraction", "string", "array", "object"})
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples", "readOnly",
                          "writeOnly", "deprecated"})
_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                   "const", "format", "pattern", "minLength", "maxLength", "minimum", "maximum",
                   "minItems", "maxItems"}) | _ANNOTATIONS
_ENUM_BESIDE = frozenset({"type", "enum", "const"}) | _ANNOTATIONS
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum")
# Every keyword some dialect's meta-schema gives a meaning (draft 4 to 2020-12): a key
# among them that this front end does not read is declined, any other key (``x-*``,
# ``nullable``, ...) with a scalar value is an annotation, as for the compiler.
_RESERVED = frozenset({
    "id", "$id", "$schema", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
    "$recursiveAnchor", "$vocabulary", "$comment", "$defs", "definitions", "title", "description",
    "default", "examples", "deprecated", "readOnly", "writeOnly", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "additionalItems", "items", "prefixItems", "maxItems", "minItems", "uniqueItems", "contains",
    "maxContains", "minContains", "maxProperties", "minProperties", "required", "properties",
    "patternProperties", "additionalProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "propertyNames", "enum", "const", "type", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else", "format", "contentEncoding", "contentMediaType", "contentSchema",
    "unevaluatedItems", "unevaluatedProperties"})
_MAX_BRANCHES = 64
# the keys only the root may have: its dialect and the definitions a $ref names
_CONTAINERS = ("definitions", "$defs")
_ROOT_ONLY = frozenset({"$schema", "definitions", "$defs", "$id"})
# Subschemas taken at most: past it the general path (which checks the time limit
# as it goes) compiles the schema.
_MAX_SUBSCHEMAS = 2000
_SCALAR_PARTS: dict = {}     # types -> (constants, number tree or None, string?) for emit


_ABSENT = object()
_UNSET = object()
_NO_EXAMPLES: list = []
_TRIVIAL = object()


class _Decline(Exception):
    """The schema is not one this front end is sure of: the general path compiles it."""


class DirectDefinitions:
    """The definitions of a direct compilation whose objects' additional keys
    are deferred pieces: a :class:`~tokendfa.analysis.lazydfa.DefinitionSource`
    answering as :class:`~.compiler.DeferredDefinitions` does for the same
    schema (no recursion: nothing but the pieces is ever deferred). It is its
    own ``compiler`` for the callers that ask one whether recursion was cut."""

    __slots__ = ("_matching", "definitions", "pieces")

    recursion_cut = False
    computed = 0
    waiting = 0

    def __init__(self, definitions: dict, pieces: dict) -> None:
        self.definitions = definitions
        self.pieces = pieces      # placeholder -> the names whose keys it excludes
        self._matching: dict = {}

    @property
    def compiler(self) -> DirectDefinitions:
        return self

    def defines(self, key) -> bool:
        return key in self.definitions or key in self.pieces

    def tree(self, key):
        known = self.definitions.get(key)
        if known is not None:
            return known
        names = self.pieces.pop(key)
        self.definitions[key] = tree = strs.keys_except(names)
        return tree

    def matches_something(self, key) -> bool:
        return definition_matches(key, self.pieces, self.definitions, self._matching)

    def everything(self) -> dict:
        while self.pieces:
            self.tree(next(iter(self.pieces)))
        return self.definitions


class _State:
    """One compilation's shared pieces, as the Compiler keeps them."""

    __slots__ = (
        "active",
        "any_depth",
        "budget",
        "definitions",
        "formatted",
        "free",
        "layout",
        "max_regex_length",
        "notes",
        "piece_of",
        "pieces",
        "placeholder_of",
        "placeholders",
        "root",
        "seen",
        "targets",
    )

    def __init__(self, layout: Layout, any_depth: int, max_regex_length: int) -> None:
        self.layout = layout
        self.any_depth = any_depth
        self.definitions: dict = {}
        self.placeholder_of: dict = {}
        self.placeholders = 0
        self.pieces: dict = {}
        self.piece_of: dict = {}
        self.notes: list = []
        self.free = None
        self.max_regex_length = max_regex_length
        self.budget = _MAX_SUBSCHEMAS
        self.root: dict = {}
        self.targets: dict = {}    # id(a $ref's target) -> its value tree (Compiler._values)
        self.active: set = set()   # ids of the targets being written (a cycle: declined)
        self.seen: set = set()     # ids of the targets written (as values or anyOf branches)
        self.formatted: set = set()  # ids of the subschemas whose format was noted


def compile_direct(schema: dict, *, layout: Layout, any_depth: int, lenient: bool,
                   max_regex_length: int, regex_budget: int | None, result_type):
    """The ``result_type`` (:class:`~tokendfa.schema.api.SchemaRegex`) the general path
    gives for ``schema`` with a lazy index's options, or None where this front end
    is not sure (see the module notes). ``lenient`` changes nothing here: a schema
    that would widen is declined."""
    if layout.mode != "compact":
        return None
    dialect = _NO_DIALECT
    declared = schema.get("$schema")
    if declared is not None:
        dialect = DIALECTS.get(declared) if declared.__class__ is str else None
        if dialect is None:
            return None
    draft, meta_uri = dialect
    ident = schema.get("$id")
    old_ident = schema.get("id", _ABSENT)
    if old_ident is not _ABSENT:
        # draft 4's root "id" is its "$id" (399 JSONSchemaBench schemas, draft 4, are
        # declined for it alone); a keyword in no other dialect this front end reads
        if draft != 4 or ident is not None or old_ident is None:
            return None
        ident = old_ident
    # the root's base URI: local references read the same document under it; a
    # fragment (which 2019-09 and later refuse; an empty one, a lone "#" at the end,
    # they take) or an empty $id is declined
    if ident is not None and (ident.__class__ is not str or not ident
                              or "#" in (ident[:-1] if ident[-1] == "#" else ident)):
        return None
    if not _scan(schema, old_ident is not _ABSENT):
        return None
    st = _State(layout, any_depth, max_regex_length)
    st.root = schema
    try:
        regex = _value(st, schema, (), 0, draft, True)
        for container in _CONTAINERS:
            definitions = schema.get(container)
            # each definition checked as the meta-schema would: by writing it, so
            # one no $ref reaches is declined
            if definitions is not None and (definitions.__class__ is not dict or any(
                    id(target) not in st.seen for target in definitions.values())):
                return None
    except (_Decline, UnsupportedSchemaError, RecursionError, strs.PatternUnsupported):
        return None
    except Exception:  # noqa: BLE001 - anything unforeseen: the general path decides
        return None
    if regex is None:
        return None
    notes = st.notes
    if st.free is not None:
        notes.append(f"values the schema leaves free (an empty schema, additional properties) "
                     f"nest arrays and objects at most {any_depth} level(s) deep; "
                     f"deeper ones are not accepted")
    if st.pieces:
        return result_type(regex, [], notes, meta_uri, st.definitions, None,
                           DirectDefinitions(st.definitions, st.pieces))
    used = used_definitions(st.definitions, regex)
    if regex_budget is not None and written_size(regex, used) > regex_budget:
        return None   # the general path compiles it again shallower
    return result_type(regex, [], notes, meta_uri, used, None)


# what _scan allows besides the keys read (the rest is checked as the trees are written)
_SCANNED = _KEYS | _ROOT_ONLY | {"$ref", "anyOf", "oneOf"}
_ONE_SUBSCHEMA = ("items", "additionalProperties")
_SUBSCHEMAS = ("properties", "definitions", "$defs")
_NULL_TAKEN = frozenset({"const", "default", "examples"})
# Subschemas nested at most: the general path compiles them recursively, and
# refuses as too deep a schema nested ~200 levels (tests/test_schema_direct_fuzz.py);
# real schemas nest far less.
_MAX_NESTING = 40


def _scan(schema: dict, root_id: bool = False) -> bool:
    """Whether every subschema's keys may be taken (a quick walk, no tree written):
    a schema that uses another keyword deep inside is declined before any work
    (a Kubernetes schema with a oneOf past its first hundred subschemas took
    ~4 ms in process to decline while written). A keyword whose value is null
    (which no keyword but ``const`` and the annotations takes) is declined here,
    where the trees' reads would take it as absent, and so is nesting deeper
    than ``_MAX_NESTING`` subschemas, where the general path may refuse the
    schema as too deep. ``root_id``: the root's ``id`` (draft 4's, checked) is taken."""
    stack = [(schema, 0)]
    budget = _MAX_SUBSCHEMAS
    while stack:
        node, level = stack.pop()
        if node.__class__ is not dict:
            continue
        budget -= 1
        if budget < 0 or level > _MAX_NESTING:
            return False
        for key, value in node.items():
            if key in _RESERVED and (key not in _SCANNED or value is None and key not in _NULL_TAKEN):
                if root_id and key == "id" and node is schema:
                    continue
                return False
        level += 1
        for key in _ONE_SUBSCHEMA:
            sub = node.get(key)
            if sub is not None:
                stack.append((sub, level))
        for key in _SUBSCHEMAS:
            subs = node.get(key)
            if subs.__class__ is dict:
                stack.extend((sub, level) for sub in subs.values())
        for key in ("anyOf", "oneOf"):
            options = node.get(key)
            if options.__class__ is list:
                stack.extend((option, level) for option in options)
    return True


def _value(st: _State, schema, path: tuple, depth: int, draft: int, root: bool = False):
    """The value tree of ``schema`` at ``path`` (a chain of (parent, key)) as
    :meth:`Compiler.value` writes it (None: no value)."""
    if schema is True:
        return _free(st)
    if schema is False:
        return None
    if schema.__class__ is not dict:
        raise _Decline
    st.budget -= 1
    if st.budget < 0:
        raise _Decline
    if "$ref" in schema:
        # a $ref beside annotations is its target's value, written once per target
        # (Compiler.value keys it as the target: keywords.referenced)
        target, where = _target(st, schema, root)
        known = st.targets.get(id(target))
        if known is not None:
            return known
        if id(target) in st.active:
            raise _Decline   # recursion: deferred by the compiler, not written here
        st.active.add(id(target))
        st.seen.add(id(target))
        tree = _value(st, target, where, depth, draft)
        st.active.discard(id(target))
        if tree is None:
            raise _Decline
        st.targets[id(target)] = tree
        return tree
    keyword = "anyOf"
    choices = schema.get("anyOf", _ABSENT)
    if "oneOf" in schema:
        if choices is not _ABSENT:
            raise _Decline
        keyword = "oneOf"
        choices = _apart_by_type(schema["oneOf"])
    if choices is _ABSENT:
        tree = _flat_tree(st, schema, path, depth, draft, root)
        if tree is _TRIVIAL:
            return _free(st)   # constrains nothing (Flat.trivial): the free value
    else:
        # anyOf beside annotations alone: each branch is its alternative's flat,
        # emitted in place (Compiler._split), and the value their alternation; a
        # oneOf whose branches no value can hold together is the same
        if choices.__class__ is not list or not choices or len(choices) > _MAX_BRANCHES:
            raise _Decline
        for key in schema:
            if key in _KEYS and key not in _ANNOTATIONS or key in _ROOT_ONLY and not root:
                raise _Decline
        _check_annotations(schema, root, keyword)
        parts = []
        for i, option in enumerate(choices):
            if option.__class__ is not dict:
                raise _Decline
            where = ((path, keyword), i)
            cycle = None
            if "$ref" in option:
                # absorbed into the branch as its target is (keywords.absorb)
                option, where = _target(st, option, False)
                if option.__class__ is not dict or id(option) in st.active:
                    raise _Decline
                cycle = id(option)
                st.active.add(cycle)
                st.seen.add(cycle)
            if "anyOf" in option or "oneOf" in option or "$schema" in option or "$ref" in option:
                raise _Decline
            st.budget -= 1
            tree = _flat_tree(st, option, where, depth, draft, False)
            if cycle is not None:
                st.active.discard(cycle)
            if tree is _TRIVIAL:
                raise _Decline   # a branch of every type, not the free value: not written here
            parts.append(tree)
        tree = alternation(parts)
    if tree is not None and tree.size > st.max_regex_length:
        raise _Decline
    return _value_definition(st, tree)


def _apart_by_type(choices):
    """A ``oneOf``'s branches where each names a ``type`` that no other branch's
    ``type`` shares (``{"oneOf": [{"type": "string"}, {"type": "integer"}]}``,
    Kubernetes' int-or-string): :func:`~.disjoint.disjoint` tells such a pair
    apart from their types alone, so :func:`~.keywords._k_one_of` writes each
    branch without the negations of the others, as an ``anyOf`` branch is.
    Declined for any other ``oneOf`` (a ``$ref`` branch, a branch without a
    ``type``, two branches whose types meet)."""
    if choices.__class__ is not list:
        raise _Decline
    seen: set = set()
    for option in choices:
        if option.__class__ is not dict or "$ref" in option:
            raise _Decline
        types = _types(option.get("type"))
        if not seen.isdisjoint(types):
            raise _Decline
        seen |= types
    return choices


def _target(st: _State, schema: dict, root: bool) -> tuple:
    """The target of ``schema``'s ``$ref`` (a definition of the root, by name) and
    its path; declined for anything else, or for a keyword beside it."""
    ref = schema["$ref"]
    for key in schema:
        if key != "$ref" and (key in _KEYS and key not in _ANNOTATIONS
                              or key in _ROOT_ONLY and not root):
            raise _Decline
    _check_annotations(schema, root, "$ref")
    if ref.__class__ is not str or ref[:2] != "#/":
        raise _Decline
    container, _, name = ref[2:].partition("/")
    if container not in _CONTAINERS or not name or "/" in name or "~" in name or "%" in name:
        raise _Decline
    definitions = st.root.get(container)
    target = definitions.get(name) if definitions.__class__ is dict else None
    if target.__class__ is not dict or "$id" in target or "id" in target:
        raise _Decline
    return target, (((), container), name)


def _check_annotations(schema: dict, root: bool, also: str = "") -> None:
    """Every key of ``schema`` one this front end knows, or a scalar-valued key that
    no dialect gives a meaning (an annotation); the annotations of the shapes their
    meta-schemas ask."""
    for key, value in schema.items():
        if key not in _KEYS and not (root and (key in _ROOT_ONLY or key == "id")) and key != also:
            if key in _RESERVED or key[:1] == "$":
                raise _Decline
            if value.__class__ in (dict, list):
                _check_inert(value)
    for key in ("title", "description", "$comment", "format"):
        value = schema.get(key, "")
        if value.__class__ is not str:
            raise _Decline
    for key in ("readOnly", "writeOnly", "deprecated"):
        if schema.get(key, False).__class__ is not bool:
            raise _Decline
    if schema.get("examples", _NO_EXAMPLES).__class__ is not list:
        raise _Decline


def _check_inert(value) -> None:
    """Decline an annotation's JSON that holds a reference (the compiler's search for
    recursion walks it; anything else in it is never read)."""
    stack = [value]
    budget = 256
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise _Decline
        if node.__class__ is dict:
            if "$ref" in node or "$dynamicRef" in node or "$recursiveRef" in node:
                raise _Decline
            stack.extend(node.values())
        elif node.__class__ is list:
            stack.extend(node)


def _count(schema: dict, key: str):
    """A ``min*``/``max*`` count (None: absent), declined unless a non-negative integer."""
    value = schema.get(key)
    if value is not None and (value.__class__ is not int or value < 0):
        raise _Decline
    return value


def _types(kind) -> frozenset:
    """The JSON types (``integer`` and ``fraction`` for ``number``) a ``type``
    keyword's value names: one name, or a list of distinct names; declined for
    anything else."""
    if kind.__class__ is str:
        names = _TYPE_NAMES.get(kind)
        if names is None:
            raise _Decline
        return frozenset(names)
    if kind.__class__ is not list or not kind:
        raise _Decline
    allowed: set = set()
    for name in kind:
        names = _TYPE_NAMES.get(name) if name.__class__ is str else None
        if names is None:
            raise _Decline
        allowed.update(names)
    if len(set(kind)) != len(kind):
        raise _Decline
    return frozenset(allowed)


def _flat_tree(st: _State, schema: dict, path: tuple, depth: int, draft: int, root: bool):
    """What Compiler.emit (or the literals of an enum) writes for ``schema`` read alone
    into a flat; ``_TRIVIAL`` where it constrains nothing."""
    _check_annotations(schema, root)
    types = _ALL_TYPES
    kind = schema.get("type", _ABSENT)
    if kind is not _ABSENT:
        types = _types(kind)
    if "enum" in schema or "const" in schema:
        if not schema.keys() <= _ENUM_BESIDE or "enum" in schema and "const" in schema:
            raise _Decline
        tree = _enum(schema["enum"] if "enum" in schema else [schema["const"]], types)
    else:
        required = schema.get("required", _ABSENT)
        if required is not _ABSENT:
            if required.__class__ is not list or not required:
                raise _Decline     # (empty: refused by draft 4's meta-schema)
            for name in required:
                if name.__class__ is not str:
                    raise _Decline
            if len(set(required)) != len(required):
                raise _Decline
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        if pattern is not None and pattern.__class__ is not str:
            raise _Decline
        lo, hi = _count(schema, "minLength"), _count(schema, "maxLength")
        low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
        min_items, max_items = _count(schema, "minItems"), _count(schema, "maxItems")
        if types == _ALL_TYPES and fmt is None and "required" not in schema \
                and "properties" not in schema and "additionalProperties" not in schema \
                and "items" not in schema and pattern is None and not lo and hi is None \
                and low is None and high is None and not min_items and max_items is None:
            return _TRIVIAL
        parts = _scalars(types)
        tree_parts = list(parts[0])
        if parts[1] is not None:
            if low is None and high is None:
                tree_parts.append(parts[1])
            else:
                # scalars.number of a flat with bounds alone (no multipleOf, no exclusions)
                number = nums.number_tree(lo=low, lo_incl=True, hi=high, hi_incl=True,
                                          integer="fraction" not in types,
                                          nonzero_fraction="integer" not in types)
                if number is None:
                    raise _Decline
                tree_parts.append(number)
        lengths = lo is not None and lo > 0 or hi is not None
        if "string" in types and (pattern is not None or lengths):
            # scalars.string with a pattern and/or lengths, no format
            if fmt is not None or max(lo or 0, hi or 0) >= SHARED_COUNT_MIN:
                raise _Decline
            lo = lo or 0
            if pattern is None:
                tree = strs.string_regex(lo, hi, counted=counted)
            elif lengths:
                tree = strs.translate_pattern(pattern, lo, hi)
            else:
                tree = strs.translate_pattern(pattern)
            if tree is None:
                raise _Decline
            tree_parts.append(tree)
        elif "string" in types:
            if fmt is None:
                tree_parts.append(strs.STRING)
            else:
                # a dict met again (a Python caller's shared subschema): the general
                # path notes its format at the first place only; declined
                if id(schema) in st.formatted:
                    raise _Decline
                st.formatted.add(id(schema))
                pointer = _pointer(path) or "/"
                if fmt not in FORMATS:
                    _note(st, f"format {fmt!r} at {pointer} is not checked (an annotation)")
                    tree_parts.append(strs.STRING)
                else:
                    if fmt in NARROWED:
                        _note(st, f"format {fmt!r} at {pointer} is narrowed: {NARROWED[fmt]}")
                    tree_parts.append(format_tree(fmt))
        if "array" in types:
            tree_parts.append(_array(st, schema, path, depth, draft, min_items or 0, max_items))
        elif "items" in schema:
            raise _Decline   # not compiled, so not checked as the meta-schema would
        if "object" in types:
            tree_parts.append(_object(st, schema, path, depth, draft))
        elif "properties" in schema or "additionalProperties" in schema:
            raise _Decline
        tree = alternation(tree_parts)
    return tree


def _bound(schema: dict, key: str):
    """A ``minimum``/``maximum`` as the compiler reads it (None: absent)."""
    value = schema.get(key)
    if value is None:
        return None
    if value.__class__ is not int and (value.__class__ is not float or not math.isfinite(value)):
        raise _Decline
    return to_decimal(value)


def _scalars(types: frozenset) -> tuple:
    """(null/true/false literals, the number tree or None) of ``types``, as emit writes
    them (``constants`` and ``number`` of a flat with no other constraint)."""
    found = _SCALAR_PARTS.get(types)
    if found is None:
        constants = tuple(lit(word) for word, kind in (("null", "null"), ("true", "boolean"),
                                                       ("false", "boolean")) if kind in types)
        number = None
        if "integer" in types or "fraction" in types:
            number = nums.number_tree(integer="fraction" not in types,
                                      nonzero_fraction="integer" not in types)
        found = _SCALAR_PARTS[types] = (constants, number)
    return found


def _enum(values, types: frozenset):
    """The literals of an ``enum`` beside ``type`` alone (few scalars, no float,
    each once: the check of a value then depends on its type alone)."""
    if values.__class__ is not list or not values or len(values) >= LITERAL_SET_MIN:
        raise _Decline
    seen: set = set()
    parts = []
    for value in values:
        cls = value.__class__
        if cls is str:
            key = value
            if "string" in types:
                parts.append(strs.json_string_literal(value))
        elif cls is int:
            key = (int, value)
            if "integer" in types:
                parts.append(number_literal(value))
        elif cls is bool:
            key = (bool, value)
            if "boolean" in types:
                parts.append(lit("true" if value else "false"))
        elif value is None:
            key = (None,)
            if "null" in types:
                parts.append(lit("null"))
        else:
            raise _Decline
        if key in seen:
            raise _Decline   # (refused by draft 4's meta-schema)
        seen.add(key)
    if not parts:
        raise _Decline
    return alternation(parts)


def _check_items(items) -> None:
    if items.__class__ is not dict:
        raise _Decline


def _array(st: _State, schema: dict, path: tuple, depth: int, draft: int, lo: int, hi):
    """An array of ``items``, ``lo`` to ``hi`` of them (arrays.array with no prefix)."""
    if hi is not None and hi < max(lo, 1):
        raise _Decline   # (no element: items not compiled, so not checked)
    if "items" in schema:
        items = schema["items"]
        _check_items(items)
        rest = _value(st, items, (path, "items"), depth + 1, draft)
    else:
        rest = _free(st)
    if rest is None:
        raise _Decline
    layout = st.layout
    body = rest + repeat(layout.comma(depth) + rest, max(0, lo - 1), None if hi is None else hi - 1)
    return layout.container("[", "]", body, lo == 0, depth)


def _object(st: _State, schema: dict, path: tuple, depth: int, draft: int):
    """An object (objects._object_members and _members, without patterns,
    propertyNames, counts or witnesses)."""
    properties = schema.get("properties")
    if properties is not None and properties.__class__ is not dict or \
            properties is None and "properties" in schema:
        raise _Decline
    has_part = properties is not None or "additionalProperties" in schema
    additional = schema.get("additionalProperties", _ABSENT)
    if additional is not _ABSENT and additional.__class__ not in (dict, bool):
        raise _Decline
    required = schema.get("required") or ()
    names = list(properties) if properties else []
    for name in required:
        if name not in names:
            names.append(name)
    entries = []
    excluded = []
    additional_value = _UNSET
    for name in names:
        if properties is not None and name in properties:
            sub = properties[name]
            if sub.__class__ is not dict:
                raise _Decline
            value = _value(st, sub, ((path, "properties"), name), depth + 1, draft)
        elif has_part and additional is not _ABSENT:
            if additional_value is _UNSET:
                additional_value = _value(st, additional, (path, "additionalProperties"),
                                          depth + 1, draft)
            value = additional_value
        else:
            value = _free(st)
        excluded.append(name)
        if value is None:
            raise _Decline   # a member no value fits: rare, and not written here
        is_required = name in required
        entries.append((strs.json_string_literal(name), value, is_required))
    extras = []
    if additional is not False:
        if additional is _ABSENT:
            value = _free(st)
        elif additional_value is not _UNSET:
            value = additional_value
        else:
            value = _value(st, additional, (path, "additionalProperties"), depth + 1, draft)
        if value is None:
            raise _Decline
        extras.append((_keys_except(st, tuple(excluded)), value))
    return _members(st, entries, extras, depth)




def _members(st: _State, entries: list, extras: list, depth: int):
    """objects._members without property counts or witnesses."""
    layout = st.layout
    comma = layout.comma(depth)
    colon = layout.colon()
    members = []
    for k, v, r in entries:
        members.append((concat(k, colon, v), r))
    extra = alternation([concat(k, colon, v) for k, v in extras]) if extras else None
    extra = _value_definition(st, extra)
    chain, seen_required = member_chain(members, comma)
    bodies = []
    if chain is not None:
        bodies.append(chain + repeat(comma + extra, 0, None) if extra is not None else chain)
    if extra is not None and not seen_required:
        bodies.append(extra + repeat(comma + extra, 0, None))
    return layout.container("{", "}", alternation(bodies), not seen_required, depth)


def _free(st: _State):
    """The free value (Compiler.any_value with share_free_levels), its levels'
    definitions taken from the process-wide table (declined when not built yet)."""
    free = st.free
    if free is None:
        free = stored_free_value(st.layout, st.any_depth)
        if free is None:
            raise _Decline
        definitions = st.definitions
        if not definitions.keys().isdisjoint(free.definitions) or \
                len(definitions) + len(free.definitions) > MAX_DEFINITIONS:
            raise _Decline
        definitions.update(free.definitions)
        merged = dict(free.placeholders)
        merged.update(st.placeholder_of)
        st.placeholder_of = merged
        st.free = free
    return free.tree


def _new_placeholder(st: _State):
    if st.placeholders >= MAX_DEFINITIONS:
        return None
    st.placeholders += 1
    return chr(PLACEHOLDER_BASE + st.placeholders - 1)


def _value_definition(st: _State, regex):
    """Compiler.value_definition: a call of a definition for a value of
    ``SHARE_VALUE_MIN_LENGTH`` characters or more."""
    if regex is None:
        return None
    if regex.size < SHARE_MIN_LENGTH and not (regex.size >= SHARE_VALUE_MIN_LENGTH
                                              and st.placeholders < MAX_VALUE_DEFINITIONS):
        return regex
    if regex.__class__ is Call and (regex.key in st.definitions or regex.key in st.pieces):
        return regex
    placeholder = st.placeholder_of.get(regex)
    if placeholder is None:
        placeholder = _new_placeholder(st)
        if placeholder is None:
            return regex
        st.definitions[placeholder] = regex
        st.placeholder_of[regex] = placeholder
    return Call(placeholder)


def _keys_except(st: _State, names: tuple):
    """Compiler.deferred_piece of the keys other than ``names``."""
    key = ("keys except", names)
    known = st.piece_of.get(key)
    if known is not None:
        return known
    placeholder = _new_placeholder(st) if st.placeholders < MAX_VALUE_DEFINITIONS else None
    if placeholder is None:
        return strs.keys_except(names)
    st.pieces[placeholder] = names
    st.piece_of[key] = call = Call(placeholder)
    return call


def _note(st: _State, message: str) -> None:
    if message not in st.notes:
        st.notes.append(message)


def _pointer(path: tuple) -> str:
    parts = []
    while path:
        path, key = path
        parts.append(key.replace("~", "~0").replace("/", "~1") if key.__class__ is str else str(key))
    return "".join("/" + part for part in reversed(parts))
