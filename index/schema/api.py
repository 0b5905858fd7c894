"""JSON Schema -> regex: the widest exact coverage we can write, and an honest error elsewhere.

:func:`regex_from_schema` turns a JSON Schema (a dict, a bool, or JSON text)
into a regex in our dialect (Python ``re`` syntax matched against the whole
text) whose matches are JSON texts of values the schema accepts. Feed it to
:meth:`tokendfa.Index.from_regex` to constrain generation.

Code map, in reading order:

* :mod:`tokendfa.schema.api`          this module: options, schema checking, ``$ref`` registry
* :mod:`tokendfa.schema.compiler`  flattening (``allOf``/``$ref``), choices (``anyOf``/``oneOf``/
  ``if``), negation (``not``), and the per-type emitters (objects, arrays)
* :mod:`tokendfa.schema.numbers`  integer ranges, decimal bounds, ``multipleOf``
* :mod:`tokendfa.schema.strings`  JSON string characters, ECMA ``pattern``, ``format``
* :mod:`tokendfa.analysis.algebra`  intersection and difference of two regexes, as a regex
  (several ``pattern``, ``pattern`` with ``format`` or lengths, ``not {pattern}``, member keys)

**Exact** means: every text the regex accepts is the JSON text of a valid
instance, and every valid instance has a text the regex accepts, *in the
form we write*. The form is fixed in a few documented ways:

* properties appear in declared order (``properties`` order, then names that
  ``required`` adds, then additional properties), since models write them
  that way; an instance with other key order has the same meaning but another text;
* compact whitespace by default: exactly
  ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` between
  tokens; ``whitespace="flexible"`` allows up to ``max_whitespace`` JSON
  whitespace characters between any two tokens (bounded, so a model cannot
  loop on spaces); ``whitespace="pretty"`` is ``json.dumps(value, indent=indent,
  ensure_ascii=False)``;
* strings under ``pattern``/``format``/``enum``/``const`` and additional
  property names are spelled canonically (``\\u0061`` is not accepted for
  ``a``); unconstrained strings accept every JSON spelling;
* integers have no fraction part (``2``, not ``2.0``); numbers with bounds
  have no exponent (``1e2`` is not accepted for ``maximum: 1000``), except
  where the sign alone decides;
* ``$ref`` recursion is unrolled ``max_recursion_depth`` times (deeper, up
  to 6, when that cut alone leaves no value at all), and the
  generic value of ``{}``/``true`` (also what an absent ``additionalProperties``
  allows) nests arrays and objects ``any_depth`` levels deep (by default
  2 to 5, as deep as keeps the automaton within 30,000 states);
* ``format`` is asserted for the formats we know (``date-time``, ``date``,
  ``time``, ``duration``, ``uuid``, ``email``, ``hostname``, ``ipv4``,
  ``ipv6``, ``uri``, ``uri-reference``, ``json-pointer``,
  ``relative-json-pointer``), sometimes narrowed (no quoted e-mail local
  parts, leap seconds only at ``23:59:60Z``); other formats are annotations
  and are listed in :attr:`SchemaRegex.notes`.

These narrowings never let an invalid value through. A constraint that
cannot be written at all (``uniqueItems`` beyond a few literal item values, ``maxContains``, a ``pattern`` with
lookarounds, an intersection of string constraints too large to write back, ...) raises
:class:`~tokendfa.analysis.errors.UnsupportedSchemaError` naming the keyword and its
JSON pointer; with ``lenient=True`` it is dropped instead (the regex is
*wider* than the schema there) and listed in :attr:`SchemaRegex.widenings`.

Example::

    >>> from tokendfa.schema.api import regex_from_schema
    >>> result = regex_from_schema({"type": "object", "properties": {
    ...     "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    ...     "required": ["age"], "additionalProperties": False})
    >>> import re
    >>> bool(re.fullmatch(result.regex, '{"age":42}')), bool(re.fullmatch(result.regex, '{"age":121}'))
    (True, False)
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..analysis.errors import (BuildLimitError, EmptyLanguageError, SchemaError, TimeLimitError,
                             UnsupportedSchemaError)

__all__ = ["regex_from_schema", "instance_text", "SchemaRegex", "WHITESPACE_MODES"]

WHITESPACE_MODES = ("compact", "flexible", "pretty")
DEFAULT_MAX_REGEX_LENGTH = 20_000_000
DEFAULT_REGEX_BUDGET = 1_000_000
# The automaton's size decides the build's time and memory (35k states build in
# ~20 s on a 151k vocabulary, 130k states do not fit in 8 GB): a schema whose
# automaton passes this many states before minimisation is compiled again shallower,
# like a regex over the budget. Checked on regexes of at least STATE_CHECK_CHARS.
DEFAULT_STATE_BUDGET = 80_000
STATE_CHECK_CHARS = 50_000
# When no value fits within max_recursion_depth unrollings only because the
# recursion was cut, unrolling is retried one level deeper at a time up to this.
AUTO_RECURSION_DEPTH = 6
# any_depth="auto": free values nest AUTO_MIN_ANY_DEPTH levels, and one level deeper
# at a time, up to AUTO_MAX_ANY_DEPTH, while the automaton stays within
# AUTO_DEPTH_STATES states (each level about doubles the states every copy of a free
# value takes: ~280 at 2 levels, ~2,600 at 5 in compact JSON; 25k states build in
# about 7 s on a 151k vocabulary).
AUTO_MIN_ANY_DEPTH = 2
AUTO_MAX_ANY_DEPTH = 5
AUTO_DEPTH_STATES = 30_000

_DRAFTS = {  # validator class name -> (draft number, meta-schema URI)
    "Draft4Validator": (4, "http://json-schema.org/draft-04/schema#"),
    "Draft6Validator": (6, "http://json-schema.org/draft-06/schema#"),
    "Draft7Validator": (7, "http://json-schema.org/draft-07/schema#"),
    "Draft201909Validator": (2019, "https://json-schema.org/draft/2019-09/schema"),
    "Draft202012Validator": (2020, "https://json-schema.org/draft/2020-12/schema"),
}


@dataclass(frozen=True)
class SchemaRegex:
    """The result of :func:`regex_from_schema`.

    ``regex`` is our dialect (whole-text match); ``widenings`` says, in
    lenient mode, which keyword at which JSON pointer was dropped (empty in
    strict mode); ``notes`` lists the documented narrowings that applied
    (recursion cut, formats not checked); ``draft`` is the dialect the
    schema was read as.

    Large schemas repeat large pieces (a ``$ref`` used in many places, values
    nested in values). The compiler writes each such piece once:
    ``pattern`` holds a placeholder character (a lone surrogate, which no
    JSON text contains) wherever ``definitions[placeholder]`` stands, and
    the build compiles each definition once (see
    :mod:`tokendfa.analysis.regex_compiler`). ``regex`` is the same language written
    out in full, built on first use; it can be far longer than ``size``.
    """

    pattern: str
    widenings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    draft: str = ""
    definitions: dict[str, str] = field(default_factory=dict)
    # the byte DFA, when regex_from_schema built it to check its size (the build reuses it)
    automaton: Any = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def regex(self) -> str:
        return expand_definitions(self.pattern, self.definitions)

    @property
    def size(self) -> int:
        """Characters of the pattern and of every definition, each written once."""
        return _written_size(self.pattern, self.definitions)


def _written_size(pattern: str, definitions: dict[str, str]) -> int:
    return len(pattern) + sum(len(text) for text in definitions.values())


def expand_definitions(pattern: str, definitions: dict[str, str]) -> str:
    """``pattern`` with every placeholder replaced by its definition, in a group."""
    if not definitions:
        return pattern
    placeholder = re.compile("[" + "".join(sorted(definitions)) + "]")
    expanded: dict[str, str] = {}

    def expand(text: str) -> str:
        return placeholder.sub(lambda m: group(m.group()), text)

    def group(key: str) -> str:
        if key not in expanded:
            expanded[key] = "(?:" + expand(definitions[key]) + ")"
        return expanded[key]

    return expand(pattern)


def regex_from_schema(schema: dict | bool | str, *, whitespace: str = "compact",
                      lenient: bool = False, max_recursion_depth: int = 3,
                      max_whitespace: int = 4, indent: int = 2, any_depth: int | str = "auto",
                      registry: Any = None, default_draft: str | None = None,
                      regex_budget: int | None = DEFAULT_REGEX_BUDGET,
                      state_budget: int | None = DEFAULT_STATE_BUDGET,
                      max_regex_length: int = DEFAULT_MAX_REGEX_LENGTH) -> SchemaRegex:
    """Compile a JSON Schema into a regex for the JSON texts of its valid instances.

    ``schema`` is a dict, a bool, or JSON text. ``whitespace`` is
    ``"compact"``, ``"flexible"`` (up to ``max_whitespace`` whitespace
    characters between tokens) or ``"pretty"`` (``indent`` spaces per
    level). ``lenient`` drops what cannot be expressed instead of raising
    (see :attr:`SchemaRegex.widenings`). ``registry`` is a
    ``referencing.Registry`` of other schemas that ``$ref`` may point to (no
    schema is ever fetched from the network). ``default_draft`` (a
    meta-schema URI) is the dialect of a schema without ``$schema``; by
    default the newest of 2020-12, draft 7, draft 4 that accepts it.

    Nested optional structures double the regex at every level (an array
    writes its element twice: first, and after each comma), so a regex
    longer than ``regex_budget`` characters is compiled again with shallower
    generic values (``any_depth``), then fewer recursion unrollings, down to
    1 each; each step is a narrowing and is listed in
    :attr:`SchemaRegex.notes`. The same happens when the automaton of a
    long regex passes ``state_budget`` states before minimisation (that
    automaton is kept in :attr:`SchemaRegex.automaton` for the build).
    ``regex_budget=None, state_budget=None`` keeps the depths asked for.

    ``any_depth`` is how many levels of arrays and objects a value the
    schema leaves free (an empty schema, open ``additionalProperties``)
    may nest. ``"auto"`` (the default) takes ``AUTO_MIN_ANY_DEPTH`` (2)
    levels, and deeper, one level at a time up to ``AUTO_MAX_ANY_DEPTH``
    (5), while the automaton stays within ``AUTO_DEPTH_STATES`` (30,000)
    states; the depth taken is in :attr:`SchemaRegex.notes`.

    ``max_recursion_depth`` is how many times a recursive ``$ref`` is
    unrolled; values nested deeper are not accepted. If that leaves no value
    at all while a recursion was cut, the schema is compiled again with one
    more unrolling at a time, up to ``AUTO_RECURSION_DEPTH`` (6), and the
    first depth with a value is used (listed in :attr:`SchemaRegex.notes`).

    # Errors

    * :class:`~tokendfa.analysis.errors.SchemaError`: JSON text that does not parse
      (naming line and column), a schema its meta-schema rejects (naming the
      JSON pointer), a ``$ref`` that cannot be resolved;
    * :class:`~tokendfa.analysis.errors.UnsupportedSchemaError` (a ``SchemaError``):
      a keyword we cannot compile exactly, naming it and its JSON pointer
      (never raised with ``lenient=True``, except for a regex over
      ``max_regex_length`` characters);
    * :class:`~tokendfa.analysis.errors.EmptyLanguageError`: no value satisfies the schema.
    """
    _check_count("max_recursion_depth", max_recursion_depth)
    if any_depth != "auto":
        _check_count("any_depth", any_depth)
    compiled: dict = {}  # (any depth, recursion depth) -> (compiler, regex), or the error raised

    def compile_at(depth_a: int, depth_r: int):
        if (depth_a, depth_r) in compiled:
            result = compiled.pop((depth_a, depth_r))
            if isinstance(result, Exception):
                raise result
            return result
        compiler, root = _setup(schema, whitespace=whitespace, lenient=lenient,
                                max_recursion_depth=depth_r, max_whitespace=max_whitespace,
                                indent=indent, any_depth=depth_a, registry=registry,
                                default_draft=default_draft, max_regex_length=max_regex_length)
        try:
            return compiler, compiler.value([root], 0)
        except RecursionError:
            raise UnsupportedSchemaError("the schema nests too deeply to compile") from None

    automata: dict = {}  # (any depth, recursion depth) -> automaton built to measure it
    over_budget: set = set()  # (any depth, recursion depth) whose automaton passed state_budget

    def automaton_at(depth_a: int, depth_r: int, limit: int | None):
        """Compile at these depths; keep the result and its automaton for the attempts below."""
        compiler, regex = compiled[(depth_a, depth_r)] = compile_at(depth_a, depth_r)
        if regex is None:
            return None
        automaton = _automaton(regex, compiler.used_definitions(regex), limit)
        automata[(depth_a, depth_r)] = automaton
        return automaton

    def measured(depth_a: int, limit: int | None):
        """The automaton at this free-value depth, or None past ``limit`` or any other bound."""
        try:
            return automaton_at(depth_a, max_recursion_depth, limit)
        except TimeLimitError:
            raise  # a caller's time limit, not a bound of ours
        except (BuildLimitError, UnsupportedSchemaError):
            return None

    def choose_any_depth() -> tuple[int, str]:
        """The depth any_depth="auto" takes, and a note saying why (none if free values are unused)."""
        depth, depth_r = AUTO_MIN_ANY_DEPTH, max_recursion_depth
        try:
            compiler, regex = compiled[(depth, depth_r)] = compile_at(depth, depth_r)
        except UnsupportedSchemaError as exc:
            if "exceeds" not in str(exc):
                raise
            compiled[(depth, depth_r)] = exc  # for the attempts below, not written twice
            return depth, ""
        if regex is None or not compiler.generic_values_used:
            return depth, ""  # the depth changes nothing
        automaton = measured(depth, state_budget)
        if automaton is None:
            over_budget.add((depth, depth_r))
            return depth, ""  # the attempts below narrow or report it
        shallow, deeper = (_free_value_states(d, whitespace, max_whitespace, indent)
                           for d in (depth, depth + 1))
        growth = deeper / shallow  # a little above what deeper levels add
        states = {depth: automaton.num_states}

        def at_most(level: int) -> float:
            """States at ``level`` if every state at the shallowest were in a free value."""
            return states[AUTO_MIN_ANY_DEPTH] * growth ** (level - AUTO_MIN_ANY_DEPTH)

        if at_most(AUTO_MAX_ANY_DEPTH) <= AUTO_DEPTH_STATES:
            target = AUTO_MAX_ANY_DEPTH  # small enough whatever the copies: no need to measure
        else:
            if at_most(depth + 1) > AUTO_DEPTH_STATES:
                return depth, ""
            automaton = measured(depth + 1, 4 * AUTO_DEPTH_STATES)
            if automaton is None or automaton.num_states > AUTO_DEPTH_STATES:
                return depth, ""
            states[depth + 1] = automaton.num_states
            target, added = depth + 1, states[depth + 1] - states[depth]
            while target < AUTO_MAX_ANY_DEPTH:  # each level adds about `growth` times the last
                added *= growth
                if states[target] + added > AUTO_DEPTH_STATES:
                    break
                states[target + 1] = round(states[target] + added)
                target += 1
        depth = target
        if (depth, depth_r) not in automata:
            automaton = measured(depth, 4 * AUTO_DEPTH_STATES)
            if automaton is None or automaton.num_states > AUTO_DEPTH_STATES * 5 // 4:
                depth -= 1  # the estimate was short: one level less, built as usual
                states.setdefault(depth, round(at_most(depth)))
            else:
                states[depth] = automaton.num_states
        return depth, (f'any_depth="auto" took {depth} levels (about {states[depth]:,} automaton '
                       f"states; a level deeper while within {AUTO_DEPTH_STATES:,}, "
                       f"{AUTO_MAX_ANY_DEPTH} levels at most)")

    auto_note = ""
    if any_depth == "auto":
        any_depth, auto_note = choose_any_depth()
    attempts = [(any_depth, max_recursion_depth)]
    if regex_budget is not None or state_budget is not None:
        depth_a, depth_r = any_depth, max_recursion_depth
        while depth_a > 1:
            depth_a -= 1
            attempts.append((depth_a, depth_r))
        while depth_r > 1:
            depth_r -= 1
            attempts.append((depth_a, depth_r))
    notes: list[str] = [auto_note] if auto_note else []

    for attempt, (depth_a, depth_r) in enumerate(attempts):
        try:
            compiler, regex = compile_at(depth_a, depth_r)
        except UnsupportedSchemaError as exc:
            if "exceeds" in str(exc) and attempt + 1 < len(attempts):
                over = f"regex over {max_regex_length:,} characters"
                continue
            raise
        if regex is None:
            empty = EmptyLanguageError("no JSON value satisfies this schema"
                                       + (f" ({compiler.notes[0]})" if compiler.notes else ""))
            if not any(n.startswith("recursive $ref") for n in compiler.notes):
                raise empty
            # empty only because recursion was cut? unroll deeper, up to a bound
            for deeper in range(depth_r + 1, max(depth_r, AUTO_RECURSION_DEPTH) + 1):
                try:
                    compiler, regex = compile_at(depth_a, deeper)
                except UnsupportedSchemaError as exc:
                    if "exceeds" in str(exc):
                        raise empty from None
                    raise
                if regex is not None:
                    notes.append(f"no value within {depth_r} recursion unrolling(s): "
                                 f"unrolled {deeper} times instead")
                    return _result(regex, compiler, notes)
            if AUTO_RECURSION_DEPTH > depth_r:
                raise EmptyLanguageError(f"{empty}; none within {AUTO_RECURSION_DEPTH} unrollings either")
            raise empty
        last = attempt + 1 == len(attempts)
        used = compiler.used_definitions(regex)
        size = _written_size(regex, used)
        if regex_budget is not None and size > regex_budget and not last:
            over = f"regex over the budget of {regex_budget:,} characters"
            continue
        automaton = automata.get((depth_a, depth_r))
        if automaton is None and state_budget is not None and size >= STATE_CHECK_CHARS and not last:
            if (depth_a, depth_r) in over_budget:
                over = f"automaton over the budget of {state_budget:,} states"
                continue
            try:
                automaton = _automaton(regex, used, state_budget)
            except TimeLimitError:
                raise  # a caller's time limit, not this budget
            except BuildLimitError:
                over = f"automaton over the budget of {state_budget:,} states"
                continue
        if attempt:
            notes.append(f"{over}: generic values nest {depth_a} level(s) (any_depth) and "
                         f"recursion is unrolled {depth_r} time(s)")
        return _result(regex, compiler, notes, automaton, used)
    raise AssertionError("unreachable")


@functools.lru_cache(maxsize=32)
def _free_value_states(depth: int, whitespace: str, max_whitespace: int, indent: int) -> int:
    """States of the minimal automaton of one free value nesting ``depth`` levels."""
    free = regex_from_schema(True, whitespace=whitespace, max_whitespace=max_whitespace,
                             indent=indent, any_depth=depth, regex_budget=None, state_budget=None)
    return _automaton(free.pattern, free.definitions, None).num_states


def _automaton(regex: str, definitions: dict[str, str], state_budget: int | None):
    from ..analysis.construct import byte_dfa_from_regex

    return byte_dfa_from_regex(regex, definitions=definitions, max_dfa_states=state_budget)


def _result(regex: str, compiler, notes: list[str], automaton=None, used=None) -> SchemaRegex:
    notes = notes + list(compiler.notes)
    if compiler.generic_values_used:
        # A narrowing like the recursion cut: say so for this schema, not only in the docs.
        notes.append(f"values the schema leaves free (an empty schema, additional properties) "
                     f"nest arrays and objects at most {compiler.any_depth} level(s) deep; "
                     f"deeper ones are not accepted")
    used = compiler.used_definitions(regex) if used is None else used
    return SchemaRegex(regex, list(compiler.widenings), notes, compiler.meta_uri, used, automaton)


def instance_text(schema: dict | bool | str, value: Any, *, whitespace: str = "compact",
                  indent: int = 2, registry: Any = None, default_draft: str | None = None) -> str:
    """The JSON text of ``value`` as the schema's regex writes it.

    Keys are put in the order the regex expects (declared properties in
    declared order, then names ``required`` adds, then the others in their
    own order); ``whitespace`` is ``"compact"`` (also a valid text under
    ``"flexible"``) or ``"pretty"``. Useful for few-shot examples and for
    checking a regex against known-valid instances.

    Example::

        >>> instance_text({"properties": {"a": {}, "b": {}}}, {"b": 1, "a": 2})
        '{"a":2,"b":1}'
    """
    compiler, root = _setup(schema, whitespace=whitespace, lenient=True, max_recursion_depth=3,
                            max_whitespace=0, indent=indent, any_depth=0, registry=registry,
                            default_draft=default_draft, max_regex_length=DEFAULT_MAX_REGEX_LENGTH)
    arranged = compiler.arrange([root], value)
    if whitespace == "pretty":
        return json.dumps(arranged, indent=indent, ensure_ascii=False)
    return json.dumps(arranged, separators=(",", ":"), ensure_ascii=False)


def _setup(schema, *, whitespace, lenient, max_recursion_depth, max_whitespace, indent, any_depth,
           registry, default_draft, max_regex_length):
    """Check the options and the schema; return the compiler and the root subschema."""
    if whitespace not in WHITESPACE_MODES:
        raise ValueError(f"whitespace must be one of {WHITESPACE_MODES}, not {whitespace!r}")
    for name, value in (("max_recursion_depth", max_recursion_depth),
                        ("max_whitespace", max_whitespace), ("indent", indent),
                        ("any_depth", any_depth)):
        _check_count(name, value)
    if isinstance(schema, (str, bytes)):
        schema = _parse_json(schema)
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON Schema is an object or a boolean, not {type(schema).__name__}")

    from . import compiler as sc

    validator_cls, draft, meta_uri = _dialect(schema, default_draft)
    resolver, full_registry = _resolver(schema, meta_uri, registry)
    compiler = sc.Compiler(
        draft=draft, layout=sc.Layout(whitespace, max_whitespace, indent), lenient=lenient,
        max_recursion_depth=max_recursion_depth, any_depth=any_depth,
        validator_cls=validator_cls, registry=full_registry, format_checker=_format_checker(),
        max_regex_length=max_regex_length)
    compiler.meta_uri = meta_uri
    compiler.share = registry is None and not _may_hold_surrogates(schema)
    return compiler, sc.Sub(schema, resolver, "")


def _check_count(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        also = ' or "auto"' if name == "any_depth" else ""
        raise ValueError(f"{name} must be an integer >= 0{also}, not {value!r}")


# a surrogate, raw, or as an escape (\ud83d in JSON or ECMA text, \u{d800} in a pattern)
_SURROGATE_TEXT = re.compile(r"[\ud800-\udfff]|\\u\{?0*[dD][89a-fA-F]")


def _may_hold_surrogates(schema) -> bool:
    """True if the schema has a surrogate, raw or as an escape (in a pattern, say).

    Placeholders of shared pieces are lone surrogates; a schema that could put
    one in the regex itself is compiled without sharing (rare, and still exact).
    """
    return _SURROGATE_TEXT.search(json.dumps(schema, ensure_ascii=False)) is not None


# --- reading and checking the schema --------------------------------------------

def _parse_json(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise SchemaError(f"invalid JSON: {exc}") from None


def _dialect(schema: dict | bool, default_draft: str | None):
    """The validator class for the schema (checked against its meta-schema)."""
    from ..analysis.errors import import_optional

    import_optional("jsonschema", extra="build", needed_for="compiling a JSON Schema")
    from jsonschema import exceptions, validators

    candidates = []
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls = validators.validator_for(schema, default=None)
        if cls is None:
            raise UnsupportedSchemaError(f"unsupported keyword '$schema' at /: unknown dialect {declared!r}")
        candidates = [cls]
    elif default_draft is not None:
        cls = validators.validator_for({"$schema": default_draft}, default=None)
        if cls is None:
            raise ValueError(f"unknown default_draft {default_draft!r}")
        candidates = [cls]
    else:
        candidates = [validators.Draft202012Validator, validators.Draft7Validator,
                      validators.Draft4Validator]
    first_error = None
    for cls in candidates:
        if cls.__name__ not in _DRAFTS:
            raise UnsupportedSchemaError(
                f"unsupported keyword '$schema' at /: dialect {cls.__name__} is not supported "
                "(draft 4 and newer are)")
        # check_schema would also test each "pattern" with Python's re, which
        # refuses valid ECMA syntax (\p{L}); the compiler reads patterns itself
        error = exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
        if error is not None:
            if first_error is None:
                first_error = error
            continue
        draft, uri = _DRAFTS[cls.__name__]
        return cls, draft, uri
    exc = first_error
    where = "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in exc.path)
    raise SchemaError(f"invalid schema at {where}: {exc.message}") from None


def _resolver(schema, meta_uri: str, registry):
    import referencing
    import referencing.jsonschema as rj
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS

    from . import compiler as sc

    spec = rj.specification_with(meta_uri)
    sc._DEFAULT_SPEC[0] = spec
    resource = spec.create_resource(schema)
    base = registry if registry is not None else referencing.Registry()
    full = base.combine(SPECIFICATIONS) if base is not SPECIFICATIONS else base
    uri = ""
    if isinstance(schema, dict):
        ident = schema.get("$id", schema.get("id") if meta_uri.startswith("http://json-schema.org/draft-04") else None)
        if isinstance(ident, str):
            uri = ident.rstrip("#")
    full = full.with_resource(uri, resource)
    return full.resolver(base_uri=uri), full


_CHECKER = []


def _format_checker():
    """A FormatChecker that asserts the formats the compiler writes, with the same regexes."""
    if _CHECKER:
        return _CHECKER[0]
    from jsonschema import FormatChecker

    from . import strings as strs

    checker = FormatChecker(formats=())
    for name in strs.FORMATS:
        compiled = re.compile(strs.format_regex(name))

        def check(instance, compiled=compiled) -> bool:
            if not isinstance(instance, str):
                return True
            return compiled.fullmatch(json.dumps(instance, ensure_ascii=False)) is not None

        checker.checks(name)(check)
    _CHECKER.append(checker)
    return checker
