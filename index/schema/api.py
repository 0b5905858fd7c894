"""JSON Schema -> regex: the widest exact coverage we can write, and an honest error elsewhere.

:func:`regex_from_schema` turns a JSON Schema (a dict, a bool, or JSON text)
into a regex in our dialect (Python ``re`` syntax matched against the whole
text) whose matches are JSON texts of values the schema accepts. Feed it to
:meth:`tokendfa.Index.from_regex` to constrain generation.

The package's code map, in reading order, is in :mod:`tokendfa.schema`.

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
  ``a``); unconstrained strings accept every JSON spelling; a lone surrogate
  (in an ``enum``, a ``const``, a property name) is spelled as its escape
  ``\\ud800``, as UTF-8 text has no other spelling for it, and refused in
  a ``pattern``; in an annotation it changes nothing;
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

Keywords that assert nothing we know (``title``, ``description``,
``examples``, ``x-*`` extensions, other vocabularies' keywords) are
annotations, as the specification says, and change nothing.

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
import gc
import json
import numbers
import re
import traceback
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Loaded with the front end although only some schemas need them: a server
# forks its workers from a warm process, and a module first imported inside
# one schema's compilation adds its import to that schema's time to first
# mask (numpy.ma, which np.unique imports on first use in the string
# algebra: 17.7 ms against 1.3 ms for Handwritten:25 in a fresh fork).
import numpy.ma  # noqa: F401
from . import disjoint  # noqa: F401 - oneOf's branches (keywords._k_one_of)
from ..analysis import limits
from ..analysis.errors import BuildLimitError, SchemaError, UnsupportedSchemaError
from ..analysis.regex_compiler import free_in_background
from ..analysis.regex_tree import Node, intern_mark, release_interned_since, to_regex
from ..analysis.utf8 import SURROGATES
from .depth import (DEFAULT_REGEX_BUDGET, DEFAULT_STATE_BUDGET, Compiled, compile_within_bounds,
                    written_size)
# At the top, not in the functions that use them: a relative import run in a
# function asks the module spec's parent (a Python property) and, from a
# package, importlib's _handle_fromlist, each time (~14 such imports a
# schema on the lazy path, ~2% of its first mask in a fresh fork).
from . import direct, ir
from .compiler import Compiler, DeferredDefinitions, Layout
from .ir import Sub, json_pointer

__all__ = ["regex_from_schema", "instance_text", "SchemaRegex", "WHITESPACE_MODES"]

WHITESPACE_MODES = ("compact", "flexible", "pretty")
DEFAULT_MAX_REGEX_LENGTH = 20_000_000

_DRAFTS = {  # validator class name -> (draft number, meta-schema URI)
    "Draft4Validator": (4, "http://json-schema.org/draft-04/schema#"),
    "Draft6Validator": (6, "http://json-schema.org/draft-06/schema#"),
    "Draft7Validator": (7, "http://json-schema.org/draft-07/schema#"),
    "Draft201909Validator": (2019, "https://json-schema.org/draft/2019-09/schema"),
    "Draft202012Validator": (2020, "https://json-schema.org/draft/2020-12/schema"),
}

# The meta-schema URIs a schema declares in "$schema", with or without the empty
# fragment, to the validator class name: looked up here as jsonschema's
# validator_for does (which normalises the URI with urllib, and is called
# with warnings caught).
_DRAFT_OF_URI = {variant: name for name, (_, uri) in _DRAFTS.items()
                 for variant in (uri, uri.rstrip("#"), uri.rstrip("#") + "#")}
direct.DIALECTS.update((variant, _DRAFTS[name]) for variant, name in _DRAFT_OF_URI.items())


@dataclass(frozen=True)
class SchemaRegex:
    """The result of :func:`regex_from_schema`.

    ``regex`` is our dialect (whole-text match); ``widenings`` says, in
    lenient mode, which keyword at which JSON pointer was dropped (empty in
    strict mode); ``notes`` lists the documented narrowings that applied
    (recursion cut, formats not checked); ``draft`` is the dialect the
    schema was read as.

    The compiler writes a regex tree (:mod:`tokendfa.analysis.regex_tree`),
    ``tree``, which the builders take as it is. Large schemas repeat large
    pieces (a ``$ref`` used in many places, values nested in values); the
    compiler writes each such piece once, as ``tree_definitions[key]``, and
    calls it (:class:`~tokendfa.analysis.regex_tree.Call`) wherever it
    stands; the build compiles each definition once (see
    :mod:`tokendfa.analysis.regex_compiler`). The keys are placeholder
    characters (lone surrogates, which no JSON text contains), so the same
    is also regex text: ``pattern`` with ``definitions`` (written from the
    trees on first use), and ``regex``, the language written out in full; it
    can be far longer than ``size``.
    """

    tree: Node
    widenings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    draft: str = ""
    tree_definitions: dict = field(default_factory=dict)
    # the byte DFA, when regex_from_schema built it to check its size (the build reuses it)
    automaton: Any = field(default=None, compare=False, repr=False)
    # with defer_recursion: the DeferredDefinitions (a growing DefinitionSource) a lazy index
    # pulls the deferred definitions from; `tree_definitions` then holds those computed so
    # far (the text forms, `pattern` and `definitions`, compute them all first)
    deferred: Any = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def pattern(self) -> str:
        """The regex text with a placeholder wherever a definition is called."""
        return to_regex(self.tree, names=self._placeholders)

    @functools.cached_property
    def definitions(self) -> dict[str, str]:
        """Placeholder -> the regex text of its definition."""
        names = self._placeholders
        return {names[key]: to_regex(node, names=names) for key, node in self.tree_definitions.items()}

    @functools.cached_property
    def _placeholders(self) -> dict:
        """Definition key -> its placeholder in the text: lone surrogates, in order."""
        if self.deferred is not None:
            self.deferred.everything()  # text names every definition: the whole unrolling
        return {key: chr(SURROGATES[0] + i) for i, key in enumerate(self.tree_definitions)}

    @functools.cached_property
    def regex(self) -> str:
        definitions = self.tree_definitions if self.deferred is None else self.deferred.everything()
        return to_regex(self.tree, definitions)

    @property
    def size(self) -> int:
        """About the characters of the pattern and of every definition, each written once."""
        return written_size(self.tree, self.tree_definitions)


def regex_from_schema(schema: dict | bool | str, *, whitespace: str = "compact",
                      lenient: bool = False, max_recursion_depth: int = 3,
                      max_whitespace: int = 4, indent: int = 2, any_depth: int | str = "auto",
                      registry: Any = None, default_draft: str | None = None,
                      regex_budget: int | None = DEFAULT_REGEX_BUDGET,
                      state_budget: int | None = DEFAULT_STATE_BUDGET,
                      max_regex_length: int = DEFAULT_MAX_REGEX_LENGTH,
                      share_free_levels: bool = False, share_counts: bool = False,
                      share_values: bool = False, defer_recursion: bool = False) -> SchemaRegex:
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
    ``share_free_levels=True`` writes every level of a free value as a
    shared definition of its own, however short (the same language): what a
    lazy index wants, since it compiles a definition only when a match
    first enters it, so the first mask compiles one level (a few hundred NFA
    states) rather than the three levels a definition otherwise holds
    (about 3,000); ``Index.from_schema(..., lazy=True)`` passes it.
    ``share_counts=True`` writes a string length bound of 256 or more
    with O(log n) shared definitions instead of n copies of a character
    (the same language, see :meth:`Compiler.counted`); the lazy index
    passes it too, since it compiles a definition only when entered.
    ``share_values=True`` writes every value regex of at least
    ``SHARE_VALUE_MIN_LENGTH`` characters (a property's, an item's, the
    additional members of an object) as a shared definition, however short:
    a lazy index then compiles an object's keys with calls of its values,
    and a value when a match first reaches it (the lazy index passes it).

    ``max_recursion_depth`` is how many times a recursive ``$ref`` is
    unrolled; values nested deeper are not accepted. If that leaves no value
    at all while a recursion was cut, the schema is compiled again with one
    more unrolling at a time, up to ``AUTO_RECURSION_DEPTH`` (6), and the
    first depth with a value is used (listed in :attr:`SchemaRegex.notes`).

    ``defer_recursion=True`` (what ``Index.from_schema(..., lazy=True)``
    passes) writes a value that enters a recursive ``$ref`` as a call
    (:class:`~tokendfa.analysis.regex_tree.Call`) of a definition whose tree
    is computed when a lazy automaton first calls it (:attr:`SchemaRegex.deferred`; see
    :mod:`tokendfa.schema.compiler`): the same language, without writing
    every unrolling up front, whose number grows exponentially with
    mutually recursive references. Each point of the schema is still
    compiled once before this returns, so errors and widenings are reported
    as without it; the notes say that recursion is unrolled
    ``max_recursion_depth`` times whenever a value was deferred (whether a
    cut is met depends on the matches the automaton explores). Whether the
    cut leaves no value at all is then the lazy automaton's to find (it
    raises :class:`~tokendfa.analysis.errors.EmptyLanguageError`), and
    ``Index.from_schema`` unrolls deeper as above.

    # Errors

    * :class:`~tokendfa.analysis.errors.SchemaError`: JSON text that does not parse
      (naming line and column), a schema its meta-schema rejects (naming the
      JSON pointer), a ``$ref`` that cannot be resolved;
    * :class:`~tokendfa.analysis.errors.UnsupportedSchemaError` (a ``SchemaError``):
      a keyword we cannot compile exactly, naming it and its JSON pointer
      (never raised with ``lenient=True``, except
      :class:`~tokendfa.analysis.errors.RegexTooLongError` for a regex over
      ``max_regex_length`` characters even at the shallowest depths);
    * :class:`~tokendfa.analysis.errors.EmptyLanguageError`: no value satisfies the schema.
    """
    _check_count("max_recursion_depth", max_recursion_depth)
    if any_depth != "auto":
        _check_count("any_depth", any_depth)
    # A lazy index's options (Index.from_schema's defaults): the common schemas go
    # straight to their trees (see .direct), the others on the general path below.
    if (defer_recursion and share_values and share_free_levels and share_counts
            and schema.__class__ is dict and whitespace == "compact" and registry is None
            and default_draft is None and state_budget is None and any_depth.__class__ is int
            and max_whitespace.__class__ is int and max_whitespace >= 0
            and indent.__class__ is int and indent >= 0 and direct.ENABLED[0]):
        if not _PREPARED:
            _prepare_dialects()   # the general path's dependencies, as for any schema (jsonschema)
        collecting = gc.isenabled()
        gc.disable()   # (as below: the trees are many small objects and no cycle)
        try:
            result = direct.compile_direct(
                schema, layout=_layout(whitespace, max_whitespace, indent), any_depth=any_depth,
                lenient=lenient, max_regex_length=max_regex_length, regex_budget=regex_budget,
                result_type=SchemaRegex)
        finally:
            if collecting:
                gc.enable()
        if result is not None:
            return result

    def compile_at(depth_a: int, depth_r: int):
        try:
            # (the meta-schema check in _setup recurses too: jsonschema's validator)
            compiler, root = _setup(schema, whitespace=whitespace, lenient=lenient,
                                    max_recursion_depth=depth_r, max_whitespace=max_whitespace,
                                    indent=indent, any_depth=depth_a, registry=registry,
                                    default_draft=default_draft, max_regex_length=max_regex_length,
                                    share_free_levels=share_free_levels, share_counts=share_counts,
                                    share_values=share_values, defer_recursion=defer_recursion)
            regex = compiler.value([root], 0)
            if compiler.defer_recursion:
                compiler.visit_each_point()
            return compiler, regex
        except RecursionError:
            raise UnsupportedSchemaError("the schema nests too deeply to compile") from None

    # The trees are many small tracked objects (a node, its tuple of children)
    # and hold no reference cycle: the cyclic collector, run again and again
    # while they are made, walked everything alive (in a forked server child
    # that also copies every page it touches: Kubernetes:376, 101 -> 126 ms
    # with it running, in a fresh fork of a warm process).
    collecting = gc.isenabled()
    gc.disable()
    mark = intern_mark()
    try:
        compiled = compile_within_bounds(
            compile_at, any_depth=any_depth, max_recursion_depth=max_recursion_depth,
            regex_budget=regex_budget, state_budget=state_budget, max_regex_length=max_regex_length,
            layout=(whitespace, max_whitespace, indent))
    except BuildLimitError as exc:
        if collecting:
            # What the stopped compilation made is young (the collector was off), and
            # the first pass after gc.enable() walked all that was still alive (~300 ms
            # past a 4 s limit on the corpus's allOf of 12 anyOfs): the trees its frames
            # (and those of the errors it was handling) hold, and its nodes in the
            # process-wide table of interned nodes (~100,000 there). The nodes are taken
            # out of the table here; they and the frames are freed on a thread of their
            # own (the nodes a chunk at a time), which turns the collector back on.
            seen: set = set()
            tracebacks = []
            error: BaseException | None = exc
            while error is not None and id(error) not in seen:
                seen.add(id(error))
                tracebacks.append(error.__traceback__)
                error = error.__cause__ or error.__context__
            free_in_background([release_interned_since(mark)], tracebacks)
            collecting = False
        raise
    finally:
        if collecting:
            gc.enable()
    return _result(compiled)


def _result(compiled: Compiled) -> SchemaRegex:
    compiler, regex = compiled.compiler, compiled.regex
    notes = compiled.notes + list(compiler.notes)
    if compiler.generic_values_used:
        # A narrowing like the recursion cut: say so for this schema, not only in the docs.
        notes.append(f"values the schema leaves free (an empty schema, additional properties) "
                     f"nest arrays and objects at most {compiler.any_depth} level(s) deep; "
                     f"deeper ones are not accepted")
    if compiler.defers:
        if compiler.deferred_computed or compiler.pending:
            notes.append(f"recursive $ref are unrolled {compiler.max_recursion_depth} times; "
                         "deeper values are not accepted")
        # the definitions grow as the automaton computes the deferred ones: the live dict
        return SchemaRegex(regex, list(compiler.widenings), notes, compiler.meta_uri,
                           compiler.definitions, compiled.automaton, DeferredDefinitions(compiler))
    used = compiler.used_definitions(regex) if compiled.used is None else compiled.used
    return SchemaRegex(regex, list(compiler.widenings), notes, compiler.meta_uri, used,
                       compiled.automaton)


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
    from .strings import json_text

    arranged = compiler.arrange([root], value)
    if whitespace == "pretty":
        return json_text(arranged, indent=indent)
    return json_text(arranged, separators=(",", ":"))


def _setup(schema, *, whitespace, lenient, max_recursion_depth, max_whitespace, indent, any_depth,
           registry, default_draft, max_regex_length, share_free_levels=False, share_counts=False,
           share_values=False, defer_recursion=False):
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

    shape = _schema_shape(schema)
    # jsonschema's meta-schema check cannot look at the deadline, and takes its time
    # on a large schema (5.6 s for a 5-deep nest of 8-way anyOfs of arrays, 32,768
    # leaves): under a time limit it runs where the caller can stop waiting for it,
    # unless the schema is small (see _META_CHECK_INLINE)
    _prepare_dialects()
    if shape.references is not None and shape.values <= _META_CHECK_INLINE:
        limits.check()
        validator_cls, draft, meta_uri = _dialect(schema, default_draft)
    else:
        validator_cls, draft, meta_uri = limits.call_within_deadline(_dialect, schema, default_draft)
    keys = shape.references
    references = keys is None or bool(keys)
    resolver, full_registry = _resolver(schema, meta_uri, registry, references)
    compiler = Compiler(
        draft=draft, layout=_layout(whitespace, max_whitespace, indent), lenient=lenient,
        max_recursion_depth=max_recursion_depth, any_depth=any_depth,
        validator_cls=_bounded_patterns(validator_cls), registry=full_registry,
        format_checker=_format_checker(),
        max_regex_length=max_regex_length, meta_uri=meta_uri,
        share=registry is None,
        share_free_levels=share_free_levels, share_counts=share_counts, share_values=share_values,
        defer_recursion=defer_recursion)
    if keys is not None and "$ref" not in keys:
        compiler.no_references()
    elif keys is not None:
        compiler.references_from(resolver, schema, local=keys == _ONLY_REF)
    return compiler, Sub(schema, resolver, "")


@functools.lru_cache(maxsize=64)
def _layout(whitespace: str, max_whitespace: int, indent: int) -> Layout:
    """The layout of these options, made once (it holds only trees, made when it is)."""
    return Layout(whitespace, max_whitespace, indent)


_PREPARED: list = []
# The optional modules each compilation uses, imported once by _prepare_dialects:
# an import statement run in a function asks the module's spec whether it is
# being initialised (and a package's, importlib's _handle_fromlist), which
# copies their pages in a fresh fork of a warm process.
_jsonschema = types.SimpleNamespace(validators=None, exceptions=None, referencing=None,
                                    specifications=None)


def _prepare_dialects() -> None:
    """Build, on the process's first schema, every dialect's tables that a
    schema's compilation reads: the compiled meta-schema checks
    (:func:`_meta_check`), the validator classes with bounded patterns
    (:func:`_bounded_patterns`), the format checker and the meta-schemas'
    registry. Built when a schema of that dialect first came, they were
    built again in each worker a server forked from a warm process that had
    met only the others: 1-2.5 ms more to the first mask of a draft 4 or
    draft 7 schema (30 of MaskBench's 84) in a fresh fork, where those
    classes are made with ``attrs`` and ``compile``. The dialects other than
    2020-12 (which every first schema builds anyway) add ~2 ms once."""
    if _PREPARED:
        return
    from ..analysis.errors import import_optional

    import_optional("jsonschema", extra="build", needed_for="compiling a JSON Schema")
    import referencing.jsonschema
    from jsonschema import exceptions, validators
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS

    _jsonschema.validators, _jsonschema.exceptions = validators, exceptions
    _jsonschema.referencing, _jsonschema.specifications = referencing.jsonschema, SPECIFICATIONS
    _flat_meta_validator()
    _known_schemas()
    _root_resolver()
    _format_checker()
    for name in _DRAFTS:
        cls = getattr(validators, name, None)
        if cls is not None:
            _meta_check(name)
            _bounded_patterns(cls)
    _PREPARED.append(True)


def _check_count(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        also = ' or "auto"' if name == "any_depth" else ""
        raise ValueError(f"{name} must be an integer >= 0{also}, not {value!r}")


# --- reading and checking the schema --------------------------------------------

def _parse_json(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise SchemaError(f"invalid JSON: {exc}") from None


def _dialect(schema: dict | bool, default_draft: str | None):
    """The validator class for the schema (checked against its meta-schema);
    after :func:`_prepare_dialects`, which makes sure ``jsonschema`` imports."""
    validators, exceptions = _jsonschema.validators, _jsonschema.exceptions
    candidates = []
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        name = _DRAFT_OF_URI.get(declared)
        if name is not None:  # jsonschema's lookup normalises the URI and guards a warning
            cls = getattr(validators, name)
        else:
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
        if _meta_accepts(cls, schema):
            return cls, *_DRAFTS[cls.__name__]
        flat = _flat_meta_validator() if cls is validators.Draft202012Validator else None
        if flat is not None and flat.is_valid(schema):
            return cls, *_DRAFTS[cls.__name__]
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
    where = json_pointer(exc.path) or "/"
    raise SchemaError(f"invalid schema at {where}: {exc.message}") from None


_META_2020_12 = "https://json-schema.org/draft/2020-12/"
_VOCABULARIES_2020_12 = ("core", "applicator", "unevaluated", "validation", "meta-data",
                         "format-annotation", "content")
# What a vocabulary's meta-schema may hold besides its "properties" and "$defs"
# for the flattening to be exact: nothing else that constrains a schema.
_META_KEYS = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "type", "properties", "$defs"}


class _Unexpected(Exception):
    """The 2020-12 meta-schema is not shaped as _flat_meta_validator expects."""


@functools.lru_cache(maxsize=1)
def _flat_meta_validator():
    """A validator of the draft 2020-12 meta-schema written as one schema.

    The meta-schema is an ``allOf`` of seven vocabulary meta-schemas whose
    subschemas are ``{"$dynamicRef": "#meta"}``; jsonschema resolves that
    dynamic reference through the dynamic scope at every subschema, which
    makes the check of a schema most of its compilation's front end
    (measured: 3.5 s against 0.6 s for this one on the 84 schemas of
    MaskBench's sample). Validating a user's schema, the dynamic scope only
    ever holds the meta-schemas, so ``#meta`` is always the root meta-schema:
    this is the same schema with the vocabularies' ``properties`` and
    ``$defs`` merged into one (their names are distinct: checked here) and
    every ``$dynamicRef`` a plain ``$ref`` to the root. It only answers
    "valid"; the error of an invalid schema is reported by the meta-schema
    itself, as before. ``None`` if the meta-schema installed is not shaped
    as this expects (it then checks every schema itself).
    """
    from jsonschema import validators
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS

    def plain(node):
        if isinstance(node, list):
            return [plain(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$dynamicRef" and value == "#meta":
                out["$ref"] = "#"
            elif key == "$ref" and isinstance(value, str) and "#/$defs/" in value:
                out["$ref"] = "#/$defs/" + value.split("#/$defs/", 1)[1]
            elif key in ("$dynamicRef", "$ref"):
                raise _Unexpected(key)
            else:
                out[key] = plain(value)
        return out

    properties: dict = {}
    definitions: dict = {}
    parts = [SPECIFICATIONS.contents(_META_2020_12 + "meta/" + name) for name in _VOCABULARIES_2020_12]
    root = SPECIFICATIONS.contents(_META_2020_12 + "schema")
    try:
        shaped = ([item.get("$ref") for item in root.get("allOf", ())]
                  == [f"meta/{name}" for name in _VOCABULARIES_2020_12]
                  and set(root) <= _META_KEYS | {"allOf", "$comment"}
                  and all(set(part) <= _META_KEYS for part in parts)
                  and all(part.get("type") == ["object", "boolean"] for part in parts + [root]))
        for part in parts + [root]:
            for table, merged in (("properties", properties), ("$defs", definitions)):
                for name, sub in part.get(table, {}).items():
                    shaped = shaped and name not in merged
                    merged[name] = plain(sub)
    except _Unexpected:
        shaped = False
    if not shaped:
        return None
    flat = {"type": ["object", "boolean"], "properties": properties, "$defs": definitions}
    return validators.Draft202012Validator(flat)


def _meta_accepts(cls, schema) -> bool:
    """True if the meta-schema of validator class ``cls`` surely accepts
    ``schema`` (for 2020-12: the flat one, :func:`_flat_meta_validator`);
    False if it does not or if this cannot tell (the caller then asks
    jsonschema).

    jsonschema walks the meta-schema anew for every subschema (a validator
    evolved, a scope pushed, each keyword looked up): 0.6 ms of a 3.7 ms
    time to first mask at the MaskBench sample's median, 6 ms at its p90,
    and more for the 30 of its 84 schemas that declare draft 4 or 7 (their
    meta-schema is checked in full, with ``best_match``). This is the same
    meta-schema compiled once into Python closures (see
    :func:`_compile_meta`), about ten times faster.
    """
    check = _meta_check(cls.__name__)
    if check is None:
        return False
    try:
        return check(schema)
    except RecursionError:
        return False


@functools.lru_cache(maxsize=None)
def _meta_check(name: str):
    from jsonschema import validators

    try:
        if name == "Draft202012Validator":
            flat = _flat_meta_validator()
            return None if flat is None else _compile_meta(flat.schema, 2020)
        if name in ("Draft4Validator", "Draft6Validator", "Draft7Validator"):
            draft = _DRAFTS[name][0]
            return _compile_meta(getattr(validators, name).META_SCHEMA, draft)
    except _Unexpected:
        pass
    return None


def _meta_is_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


def _meta_is_integer(value) -> bool:  # draft 6 on: 1.0 is an integer
    return not isinstance(value, bool) and (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer()))


# jsonschema's type checker, one predicate a type name
_META_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _meta_is_number,
    "integer": _meta_is_integer,
}
_META_TYPES_4 = dict(_META_TYPES, integer=lambda v: not isinstance(v, bool) and isinstance(v, int))
# what asserts nothing here: annotations, and format (the meta-schema is checked without a format checker)
_META_ANNOTATIONS = frozenset({"$comment", "default", "deprecated", "format", "title", "description"})
# the meta-schema's own identity, at its root
_META_ROOT = frozenset({"$schema", "$id", "id", "$defs", "definitions"})


def _meta_unique(items: list) -> bool | None:
    """Whether ``items`` are distinct as JSON values (``uniqueItems``), for
    scalars; None for anything else (containers, NaN)."""
    keys = set()
    for item in items:
        if item is None or isinstance(item, str):
            key = item
        elif isinstance(item, bool):
            key = ("bool", item)  # True is not 1 in JSON
        elif isinstance(item, (int, float)) and item == item:
            key = ("number", item)  # 1 and 1.0 are the same number
        else:
            return None
        if key in keys:
            return False
        keys.add(key)
    return True


def _every(checks: list):
    """A predicate true when each of ``checks`` is (a loop: a generator a call
    of the meta-schema check, for every subschema of a user's schema, was most
    of the allocations of that check)."""
    def every(v) -> bool:
        for check in checks:
            if not check(v):
                return False
        return True
    return every


def _some(checks: list):
    """A predicate true when one of ``checks`` is (see :func:`_every`)."""
    def some(v) -> bool:
        for check in checks:
            if check(v):
                return True
        return False
    return some


def _compile_meta(root: dict, draft: int):
    """The meta-schema ``root`` of ``draft`` as a predicate; raises
    :class:`_Unexpected` on what it does not know (a ``$ref`` elsewhere than
    ``#`` and its definitions, a keyword the meta-schemas do not use). Each
    keyword does what jsonschema's does for that draft, so the predicate
    answers as ``is_valid``, except that it answers False where it is unsure
    (``uniqueItems`` of arrays or objects)."""
    compiled: dict[str, Any] = {}
    defs_key = "$defs" if draft >= 2019 else "definitions"
    definitions = root.get(defs_key, {})
    types = _META_TYPES_4 if draft <= 4 else _META_TYPES

    def ref(target: str):
        # late-bound: a reference may be compiled before its target (recursion through "#")
        if target not in compiled:
            compiled[target] = None
            prefix = f"#/{defs_key}/"
            if target == "#":
                compiled[target] = build(root, top=True)
            elif target.startswith(prefix) and target[len(prefix):] in definitions:
                compiled[target] = build(definitions[target[len(prefix):]])
            else:
                raise _Unexpected(target)
        return lambda v: compiled[target](v)

    def build(schema, top: bool = False):
        if schema is True:
            return lambda v: True
        if not isinstance(schema, dict):
            raise _Unexpected(repr(schema))
        if draft <= 7 and "$ref" in schema and len(schema) > 1:
            raise _Unexpected("$ref beside other keywords")  # ignored siblings: not needed here
        checks = []
        for key, value in schema.items():
            if key in _META_ANNOTATIONS or (top and key in _META_ROOT):
                continue
            checks.append(keyword(key, value, schema))
        if not checks:
            return lambda v: True
        if len(checks) == 1:
            return checks[0]
        return _every(checks)

    def keyword(key, value, schema):
        if key == "$ref":
            return ref(value)
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not all(name in types for name in names):
                raise _Unexpected(key)
            tests = [types[name] for name in names]
            return tests[0] if len(tests) == 1 else _some(tests)
        if key == "properties":
            subs = {name: build(sub) for name, sub in value.items()}

            def properties(v):
                if not isinstance(v, dict):
                    return True
                for name, item in v.items():
                    check = subs.get(name)
                    if check is not None and not check(item):
                        return False
                return True
            return properties
        if key == "additionalProperties":
            if "patternProperties" in schema:
                raise _Unexpected(key)
            sub, known = build(value), set(schema.get("properties", ()))

            def additional(v) -> bool:
                if isinstance(v, dict):
                    for name, item in v.items():
                        if name not in known and not sub(item):
                            return False
                return True
            return additional
        if key == "propertyNames":
            sub = build(value)
            return lambda v: not isinstance(v, dict) or all(sub(name) for name in v)
        if key == "dependencies":
            if not all(isinstance(names, list) for names in value.values()):
                raise _Unexpected(key)
            return lambda v: not isinstance(v, dict) or all(
                name in v for key_, names in value.items() if key_ in v for name in names)
        if key == "items":
            if "prefixItems" in schema or not (value is True or isinstance(value, dict)):
                raise _Unexpected(key)
            sub = build(value)

            def items(v) -> bool:
                if isinstance(v, list):
                    for item in v:
                        if not sub(item):
                            return False
                return True
            return items
        if key == "minItems":
            return lambda v: not isinstance(v, list) or len(v) >= value
        if key == "uniqueItems":
            if value is not True:
                raise _Unexpected(key)
            return lambda v: not isinstance(v, list) or bool(_meta_unique(v))
        if key == "enum":
            if not all(isinstance(item, str) for item in value):
                raise _Unexpected(key)
            members = frozenset(value)
            return lambda v: isinstance(v, str) and v in members
        if key == "minimum":
            if draft <= 4 and schema.get("exclusiveMinimum") is True:
                return lambda v: not _meta_is_number(v) or v > value
            return lambda v: not _meta_is_number(v) or v >= value
        if key == "exclusiveMinimum":
            if draft <= 4:  # a flag of minimum's
                return lambda v: True
            return lambda v: not _meta_is_number(v) or v > value
        if key == "pattern":
            search = re.compile(value).search
            return lambda v: not isinstance(v, str) or search(v) is not None
        if key in ("anyOf", "allOf"):
            subs = [build(sub) for sub in value]
            return _every(subs) if key == "allOf" else _some(subs)
        raise _Unexpected(key)

    return ref("#")


@functools.lru_cache(maxsize=1)
def _known_schemas():
    """The meta-schemas as a registry of their own (registries are immutable):
    combining them into an empty registry for every schema took 25-60 us
    warm, ~0.15 ms in a fresh fork of a prepared process."""
    import referencing
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS

    return referencing.Registry().combine(SPECIFICATIONS)


# The keywords that look a schema up through the resolver (jsonschema's
# validators follow the last two; the compiler reports them as unsupported).
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
# Values _schema_shape looks at, at most (past it, a cycle or a very large
# schema: unsure, as for a schema that is not JSON)
_SHAPE_WALK = 1 << 17
# A schema of at most this many values is checked against its meta-schema on the
# caller's thread even under a time limit: jsonschema's check takes up to ~100 us
# a value (its draft 2020-12 walk), so ~25 ms here, against the ~0.6 ms and ~100
# copy-on-write page faults a thread cost a ~1.3 ms first mask at MaskBench's
# median (34 values; 80% of its sample is below this) in a fresh fork.
_META_CHECK_INLINE = 256
_NO_KEYS: frozenset = frozenset()
_ONLY_REF = frozenset({"$ref"})
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


class _SchemaShape(NamedTuple):
    """What :func:`_setup` reads off the schema before compiling it."""

    references: "frozenset | None"   # the keys of _REFERENCE_KEYS it has; None: unsure
    values: int                      # its values (objects, arrays and scalars) counted


def _schema_shape(schema) -> _SchemaShape:
    """The keys of :data:`_REFERENCE_KEYS` that some object in ``schema`` has
    (anywhere: as a keyword or as a property's name; None when unsure: an
    object nested in itself, or past :data:`_SHAPE_WALK` values), and how
    many values it holds.

    A walk of the values, a few microseconds at MaskBench's median, instead of
    the schema's JSON text searched for ``"$ref"``: ``json.dumps`` makes a
    list of item pairs for every object and a string for every key and value
    (in children of one warm parent, put back before the first mask it cost
    ~0.15 ms and ~39 copy-on-write page faults of ~1.5 ms at MaskBench's
    median; between two checkouts the gain is within what the parent's heap
    layout moves, ~0.04 ms in four layouts). The text is written for an
    index's metadata only (see :meth:`~tokendfa.runtime.index.Index.from_schema`)."""
    found = None
    stack = [schema]
    budget = _SHAPE_WALK
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            return _SchemaShape(None, _SHAPE_WALK)
        if isinstance(node, dict):
            if "$ref" in node or "$dynamicRef" in node or "$recursiveRef" in node:
                found = (found or set()) | {key for key in _REFERENCE_KEYS if key in node}
            stack += node.values()
        elif isinstance(node, (list, tuple)):
            if len(node) > 64 and _SCALAR_TYPES.issuperset(map(type, node)):
                budget -= len(node)   # a long enum: counted, not walked (2 ms less for 60,000 values)
            else:
                stack += node
    if budget < 0:
        return _SchemaShape(None, _SHAPE_WALK)
    return _SchemaShape(_NO_KEYS if found is None else frozenset(found), _SHAPE_WALK - budget)


def _resolver(schema, meta_uri: str, registry, references: bool = True):
    """The resolver at the root of ``schema`` and the registry it reads.

    A schema that looks nothing up (no ``$ref``, ``$dynamicRef`` or
    ``$recursiveRef`` in its JSON text, so ``references`` is False), has no
    ``$id`` at its root and comes without a registry of the user's is read
    with a resolver made once for every such schema: its own resource was
    never looked up, and adding it made a registry a schema (~4% of the
    first mask of MaskBench's median schemas in a fresh fork)."""
    rj, SPECIFICATIONS = _jsonschema.referencing, _jsonschema.specifications
    spec = rj.specification_with(meta_uri)
    ir.DEFAULT_SPEC[0] = spec
    uri = ""
    if isinstance(schema, dict):
        ident = schema.get("$id", schema.get("id") if meta_uri.startswith("http://json-schema.org/draft-04") else None)
        if isinstance(ident, str):
            uri = ident.rstrip("#")
    if registry is None:
        full = _known_schemas()
        if not references and not uri:
            return _root_resolver(), full
    else:
        full = registry.combine(SPECIFICATIONS) if registry is not SPECIFICATIONS else registry
    full = full.with_resource(uri, spec.create_resource(schema))
    return full.resolver(base_uri=uri), full


@functools.lru_cache(maxsize=1)
def _root_resolver():
    """The meta-schemas' resolver at the empty base URI (see :func:`_resolver`)."""
    return _known_schemas().resolver(base_uri="")


_BOUNDED: dict = {}
# the keywords of jsonschema that compile a schema's patterns with Python's re
# (additionalProperties and unevaluatedProperties: the patternProperties beside them)
_PATTERN_KEYWORDS = ("pattern", "patternProperties", "additionalProperties", "unevaluatedProperties")


def _bounded_patterns(cls):
    """``cls`` whose keywords that compile the schema's patterns with Python's ``re``
    compile a long one first within the deadline (:func:`compile_untrusted`), so that
    their own ``re.search`` finds it in ``re``'s cache: the validator checks ``enum``
    values and property names, and its compile of a 600,000-character pattern ran
    0.2-0.4 s past a time limit."""
    bounded = _BOUNDED.get(cls)
    if bounded is not None:
        return bounded
    from jsonschema import validators

    from ..analysis.regex_syntax import compile_untrusted

    def patterns_of(keyword: str, value, schema) -> list:
        if keyword == "pattern":
            return [value]
        names = value if keyword == "patternProperties" else schema.get("patternProperties")
        if not isinstance(names, dict):
            return []
        return list(names) + ([] if keyword == "patternProperties" else ["|".join(names)])

    def bounded_keyword(keyword: str, original):
        # wraps: named as the keyword it bounds, so checks.py (whose own patterns
        # compile with compile_untrusted too) still knows the keyword
        @functools.wraps(original)
        def check(validator, value, instance, schema):
            if isinstance(instance, (str, dict)) and isinstance(schema, dict):
                for pattern in patterns_of(keyword, value, schema):
                    if isinstance(pattern, str):
                        compile_untrusted(pattern)
            return original(validator, value, instance, schema)
        return check

    bounded = _BOUNDED[cls] = validators.extend(cls, {
        keyword: bounded_keyword(keyword, cls.VALIDATORS[keyword])
        for keyword in _PATTERN_KEYWORDS if keyword in cls.VALIDATORS})
    return bounded


_CHECKER = []


def _format_checker():
    """A FormatChecker that asserts the formats the compiler writes: their regexes,
    and where a narrowed one refuses, the full format or
    :class:`~.formats.UndecidedFormat` (:func:`~.formats.check_format`)."""
    if _CHECKER:
        return _CHECKER[0]
    from jsonschema import FormatChecker

    from .formats import FORMATS, check_format

    checker = FormatChecker(formats=())
    for name in FORMATS:

        def check(instance, name=name) -> bool:
            return not isinstance(instance, str) or check_format(name, instance)

        checker.checks(name)(check)
    _CHECKER.append(checker)
    return checker
