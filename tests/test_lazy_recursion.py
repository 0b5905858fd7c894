"""A lazy schema index computes recursive definitions when a match first reaches them.

With ``lazy=True`` a value that enters a recursive ``$ref`` is a deferred
definition (``tokendfa.schema.compiler``): the lazy automaton asks for its
text the first time a match calls it. The index must still be the eager
one array for array, must not compute what no match reached, and must keep
the work of a mutually recursive schema small where the eager compiler's is
exponential.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TOY_TOKENS
from tokendfa import EmptyLanguageError, Guide, Index
from tokendfa.schema.api import regex_from_schema

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}

# (keys and values the toy vocabulary spells: a, b, c, x, digits, braces)
TREE = {"$defs": {"tree": {"type": "object", "properties": {
    "a": {"type": "integer", "minimum": 0, "maximum": 2},
    "b": {"$ref": "#/$defs/tree"}, "c": {"$ref": "#/$defs/tree"}},
    "additionalProperties": False}}, "$ref": "#/$defs/tree"}
# two definitions that call each other, through an anyOf and a required property
MUTUAL = {"$defs": {
    "a": {"type": "object", "required": ["b"], "properties": {
        "b": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "integer", "minimum": 0, "maximum": 1}]}},
        "additionalProperties": False},
    "b": {"type": "object", "properties": {"c": {"$ref": "#/$defs/a"}}, "additionalProperties": False}},
    "$ref": "#/$defs/a"}
# recursion under a oneOf, whose exclusions negate the recursive branch
NEGATED = {"$defs": {"n": {"oneOf": [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}, "additionalProperties": False},
    {"type": "integer", "minimum": 0, "maximum": 1}]}}, "$ref": "#/$defs/n"}
# a recursive property beside plain ones, in properties that are not recursive
BESIDE = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 3},
                                           "c": {"$ref": "#/$defs/tree"}},
          "required": ["c"], "additionalProperties": False, "$defs": TREE["$defs"]}


def _word(n: int) -> dict:
    schema: dict = {}
    for _ in range(n):
        schema = {"required": ["a"], "properties": {"a": schema}}
    return schema


WORD = {"type": "object", "properties": {"a": {"$ref": "#/definitions/w"}}, "additionalProperties": False}
# every value nests five levels: three unrollings leave none, five do
FIVE = {"definitions": {"w": WORD}, "allOf": [{"$ref": "#/definitions/w"}, _word(5)]}


def _mesh(k: int) -> dict:
    """``k`` definitions, each with an optional property per definition: every
    one reaches every other, and a value's recursion counts take ~k**3 forms."""
    names = [f"d{i}" for i in range(k)]
    return {"$defs": {name: {"type": "object", "additionalProperties": False, "properties": {
        other: {"$ref": f"#/$defs/{other}"} for other in names}} for name in names},
        "$ref": "#/$defs/d0"}


def _deferred(index):
    return index._dfa._nfa.source


@pytest.mark.parametrize("name, schema, depth", [("tree", TREE, 3), ("tree1", TREE, 1),
                                                 ("mutual", MUTUAL, 3), ("negated", NEGATED, 2),
                                                 ("beside", BESIDE, 2), ("five", FIVE, 3)])
def test_lazy_recursive_schema_completes_to_the_eager_index(name, schema, depth, toy_vocab):
    lazy = Index.from_schema(schema, toy_vocab, lazy=True, any_depth=1, max_recursion_depth=depth)
    assert _deferred(lazy) is not None  # the recursion was deferred
    eager = Index.from_schema(schema, toy_vocab, any_depth=1, max_recursion_depth=depth, lazy=False)
    assert lazy.complete().arrays.equals(eager.arrays)
    assert any("unrolled" in note for note in lazy.metadata["notes"])


def test_deferred_definitions_are_computed_when_a_match_reaches_them(toy_vocab):
    lazy = Index.from_schema(TREE, toy_vocab, lazy=True, any_depth=1)
    deferred = _deferred(lazy)
    before, waiting = deferred.computed, deferred.waiting
    assert waiting > 0  # deeper unrollings are not written yet
    guide = Guide(lazy)
    guide.get_mask()
    assert deferred.computed == before  # the first mask needs none of them
    for byte in b'{"b":{"c":{"b":{':
        guide.advance(TOKEN[bytes([byte])])
        guide.get_mask()
    assert deferred.computed > before  # walking into the recursion computed them
    lazy.complete()
    assert deferred.waiting == 0


def test_points_naming_one_definition_share_its_deferred_value(toy_vocab):
    """TREE's ``b`` and ``c`` are each a ``$ref`` alone to one definition:
    keyed by its target, that is one deferred value per recursion count,
    not one per point, each computed again when a match first calls it
    (Kubernetes kb_209: JSONSchemaProps named from allOf, anyOf, oneOf,
    not, ... took six ~0.4 ms copies in one step)."""
    lazy = Index.from_schema(TREE, toy_vocab, lazy=True, any_depth=1, max_recursion_depth=3)
    deferred = _deferred(lazy)
    assert deferred.waiting == 1  # b and c: one value
    eager = Index.from_schema(TREE, toy_vocab, any_depth=1, max_recursion_depth=3, lazy=False)
    assert lazy.complete().arrays.equals(eager.arrays)
    assert deferred.computed <= 3 + 3  # the root's members and one value per level


def test_recursion_unrolled_deeper_when_the_cut_leaves_no_value_lazy(toy_vocab):
    lazy = Index.from_schema(FIVE, toy_vocab, lazy=True, any_depth=1)
    assert any("unrolled 5 times instead" in note for note in lazy.metadata["notes"])
    seven = {"definitions": {"w": WORD}, "allOf": [{"$ref": "#/definitions/w"}, _word(7)]}
    with pytest.raises(EmptyLanguageError):
        Index.from_schema(seven, toy_vocab, lazy=True, any_depth=1)


def test_mutual_recursion_computes_one_definition_a_point(toy_vocab):
    """Eight definitions that all reach each other: the eager compiler writes
    one value per point and per recursion counts (thousands); deferred, one
    per point is computed before the first mask (to report what the schema
    holds), and the first mask computes none."""
    lazy = Index.from_schema(_mesh(8), toy_vocab, lazy=True, any_depth=1)
    deferred = _deferred(lazy)
    computed = deferred.computed
    assert computed <= 8 * 8 + 8  # one per property of each definition, and the roots
    Guide(lazy).get_mask()
    assert deferred.computed == computed
    assert deferred.waiting > computed  # the further unrollings, known and not computed


def test_deferred_regex_expands_every_definition():
    result = regex_from_schema(TREE, defer_recursion=True)
    assert result.deferred is not None and result.deferred.waiting > 0
    eager = regex_from_schema(TREE)
    import re

    nest = lambda d: {} if d == 0 else {"b": nest(d - 1)}
    for depth in range(5):
        text = json.dumps(nest(depth), separators=(",", ":"))
        assert bool(re.fullmatch(result.regex, text)) == bool(re.fullmatch(eager.regex, text)) == (depth <= 3)
    assert result.deferred.waiting == 0


def test_unsupported_keyword_in_a_recursive_definition_is_reported_at_once(toy_vocab):
    from tokendfa import UnsupportedSchemaError

    # the lookahead is met only inside the recursion (in m, which only n reaches)
    schema = {"$defs": {"n": {"type": "object", "properties": {
        "a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/m"}}},
        "m": {"type": "object", "properties": {"x": {"type": "string", "pattern": "a(?=b)"},
                                               "c": {"$ref": "#/$defs/n"}}}},
        "$ref": "#/$defs/n"}
    with pytest.raises(UnsupportedSchemaError, match="pattern"):
        regex_from_schema(schema)
    with pytest.raises(UnsupportedSchemaError, match="pattern"):
        Index.from_schema(schema, toy_vocab, lazy=True, any_depth=1)
    lazy = Index.from_schema(schema, toy_vocab, lazy=True, any_depth=1, lenient=True)
    assert lazy.metadata["widenings"]
    assert np.any(Guide(lazy).get_mask())


@pytest.mark.parametrize("schema", [TREE, MUTUAL, NEGATED, BESIDE], ids=["tree", "mutual", "negated", "beside"])
def test_from_regex_takes_a_deferred_schema_regex_in_both_modes(schema, toy_vocab):
    result = regex_from_schema(schema, any_depth=1, defer_recursion=True)
    assert result.deferred.waiting > 0
    lazy = Index.from_regex(result, toy_vocab, lazy=True)
    eager_from_deferred = Index.from_regex(regex_from_schema(schema, any_depth=1, defer_recursion=True),
                                           toy_vocab, lazy=False)
    eager = Index.from_schema(schema, toy_vocab, any_depth=1, lazy=False)
    assert eager_from_deferred.arrays.equals(eager.arrays)
    assert lazy.complete().arrays.equals(eager.arrays)



def test_values_keyed_without_counts_keep_json_types_apart():
    """Values that reach no recursion are keyed by what they hold (a
    constraint the compiler wrote is a new object each time): ``1`` and
    ``true``, equal in Python, must not share a key."""
    from tokendfa.schema.compiler import _where
    from tokendfa.schema.ir import NotValues, Sub

    one, true = Sub(NotValues((1,)), None, ""), Sub(NotValues((True,)), None, "")
    assert _where(one) != _where(true)
    assert _where(one) == _where(Sub(NotValues((1,)), None, ""))


class _Source:
    """A growing DefinitionSource over fixed texts (given as their trees) that
    counts what it is asked."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts, self.read = texts, []

    def defines(self, key) -> bool:
        return key in self.texts

    def tree(self, key):
        from tokendfa.analysis.regex_tree import parse_regex

        self.read.append(key)
        return parse_regex(self.texts[key], calls=True, anchors=False)


P, Q, R = "\ud800", "\ud801", "\ud802"


def test_growing_source_is_read_when_called_and_gives_the_mapping_automaton():
    from tokendfa.analysis.lazydfa import DefinitionSource, LazyByteDFA
    from tokendfa.analysis.minimise import canonical_byte_dfa

    texts = {P: f"a{Q}|b", Q: f"c{R}?", R: "d+"}
    source = _Source(texts)
    assert isinstance(source, DefinitionSource)
    dfa = LazyByteDFA(f"x{P}", definitions=source)
    assert R not in source.read  # Q is decided without its optional callee
    assert source.read.count(P) == 1
    grown = canonical_byte_dfa(*dfa.explore())
    assert sorted(source.read) == sorted(texts)  # each read once
    fixed = canonical_byte_dfa(*LazyByteDFA(f"x{P}", definitions=texts).explore())
    assert np.array_equal(grown.transitions, fixed.transitions)


def test_growing_source_that_calls_itself_is_refused():
    from tokendfa.analysis.errors import RegexError
    from tokendfa.analysis.lazydfa import LazyByteDFA

    with pytest.raises(RegexError, match="uses itself"):
        LazyByteDFA(P, definitions=_Source({P: f"a{Q}|b", Q: f"c{P}"})).explore()


def _count_builds(monkeypatch) -> list:
    """The trees the lazy NFA builds fragments from, listed as it builds them."""
    from tokendfa.analysis import lazydfa

    built = []
    build = lazydfa._LazyNFA._build

    def counted(self, tree):
        built.append(tree)
        return build(self, tree)

    monkeypatch.setattr(lazydfa._LazyNFA, "_build", counted)
    return built


def test_growing_source_copies_a_shape_read_after_its_first_fragment(monkeypatch):
    """Two definitions of one shape from a growing source, the second read
    only after the first is compiled: the second is a copy of the first's
    fragment, not built again, where the fragment is large (a template is
    made at its first build), also where the process keeps no template for
    it (a fragment over _SharedFragments.MAX_FRAGMENT_STATES: Kubernetes
    kb_188's 25,759-state fragment was built twice, ~40-80 ms each time,
    inside a step). The automaton is the mapping's."""
    from tokendfa.analysis import lazydfa
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.analysis.minimise import canonical_byte_dfa

    shared = lazydfa._SharedFragments()
    shared.MAX_FRAGMENT_STATES = 0  # the process keeps no fragment: only the automaton's own templates
    monkeypatch.setattr(lazydfa, "_SHARED_FRAGMENTS", shared)
    built = _count_builds(monkeypatch)
    # Q and R: one shape (~1,200 states), read one after the other
    texts = {P: f"a{Q}|b{R}", Q: "(cd){600}e", R: "(cd){600}e"}
    source = _Source(texts)
    dfa = LazyByteDFA(f"x{P}", definitions=source)
    grown = canonical_byte_dfa(*dfa.explore())
    assert sorted(source.read) == sorted(texts)
    assert len(built) == 3  # the pattern, P and Q: R is a copy of Q's fragment
    fixed = canonical_byte_dfa(*LazyByteDFA(f"x{P}", definitions=texts).explore())
    assert np.array_equal(grown.transitions, fixed.transitions)


def test_a_small_shape_is_copied_from_its_second_build(monkeypatch):
    """A small tree's fragment keeps no template at its first build (most of
    a schema's shapes are built once): the process records that its shape
    was built, and keeps the template of its second build, which the third
    definition of the shape copies, in this automaton and in the next."""
    from tokendfa.analysis import lazydfa
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.analysis.minimise import canonical_byte_dfa

    monkeypatch.setattr(lazydfa, "_SHARED_FRAGMENTS", lazydfa._SharedFragments())
    built = _count_builds(monkeypatch)
    S = "\ud803"
    texts = {P: f"a{Q}|b{R}|c{S}", Q: "(cd)+e", R: "(cd)+e", S: "(cd)+e"}
    dfa = LazyByteDFA(f"x{P}", definitions=_Source(texts))
    grown = canonical_byte_dfa(*dfa.explore())
    assert len(built) == 4  # the pattern, P, Q and R: S is a copy of R's fragment
    LazyByteDFA(f"y{Q}", definitions=_Source(texts)).explore()
    assert len(built) == 5  # the pattern: Q is a copy of the process's template
    fixed = canonical_byte_dfa(*LazyByteDFA(f"x{P}", definitions=texts).explore())
    assert np.array_equal(grown.transitions, fixed.transitions)


def test_growing_source_copies_a_large_shape_with_calls_read_after_its_first_fragment(monkeypatch):
    """A shape with calls of definitions keyed by strings is not looked for
    before its first build (a schema's placeholders seldom come back), but a
    large fragment's template is kept after it: a second definition of that
    shape, read only once the first is compiled (R is read when S, which Q
    calls, is entered), is a copy. The automaton is the mapping's."""
    from tokendfa.analysis import lazydfa
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.analysis.minimise import canonical_byte_dfa

    monkeypatch.setattr(lazydfa, "_SHARED_FRAGMENTS", lazydfa._SharedFragments())
    built = _count_builds(monkeypatch)
    S, T = "\ud803", "\ud804"
    texts = {Q: f"(cd){{600}}{S}", S: f"e{R}?", R: f"(cd){{600}}{T}", T: "f"}
    source = _Source(texts)
    dfa = LazyByteDFA(f"x{Q}", definitions=source)
    grown = canonical_byte_dfa(*dfa.explore())
    assert sorted(source.read) == sorted(texts)
    assert len(built) == 4  # the pattern, Q, S and T: R is a copy of Q's fragment
    fixed = canonical_byte_dfa(*LazyByteDFA(f"x{Q}", definitions=texts).explore())
    assert np.array_equal(grown.transitions, fixed.transitions)
