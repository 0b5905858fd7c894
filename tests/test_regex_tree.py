"""Regex trees (tokendfa.analysis.regex_tree): text in and out, the parse cache,
and the schema compiler writing trees without reading text back.

* ``to_regex`` round trip: the text a tree renders reads back to a tree with
  the same minimal byte DFA;
* the schema corpus: a schema's tree with its definitions (what the builders
  take) has the minimal byte DFA of its regex text written out in full
  (``SchemaRegex.regex``, which Python's parser reads as any user regex);
* the parse cache is bounded, by texts and by characters;
* a schema without ``pattern`` (nor ``multipleOf``, ``format``, negations,
  which are still computed as text) compiles without Python's regex parser.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
from pathlib import Path

import pytest

from tokendfa.analysis import regex_tree
from tokendfa.analysis.errors import RegexError, TokenDFAError, UnsupportedRegexError
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.regex_compiler import byte_tables_from_regex
from tokendfa.analysis.regex_syntax import normalize_pattern
from tokendfa.analysis.regex_tree import (EMPTY, NOTHING, Alt, Call, Chars, Repeat, Text, alt,
                                          chars, concat, parse_regex, repeat, text, to_regex)
from tokendfa.schema.api import regex_from_schema
from cases import CASES
from test_regex_compiler import EXTRA_PATTERNS

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))

PATTERNS = [case.pattern for case in CASES] + EXTRA_PATTERNS


def _dfa(pattern, definitions=None):
    return canonical_byte_dfa(*byte_tables_from_regex(pattern, definitions=definitions))


def _same(a, b) -> bool:
    return (a.transitions.shape == b.transitions.shape and bool((a.transitions == b.transitions).all())
            and bool((a.finals == b.finals).all()))


def _readable(pattern: str):
    try:
        return parse_regex(pattern)
    except TokenDFAError:
        return None


@pytest.mark.parametrize("pattern", PATTERNS)
def test_round_trip_keeps_the_language(pattern):
    tree = _readable(pattern)
    if tree is None:
        pytest.skip("refused (the regex compiler's tests check the refusal)")
    written = to_regex(tree)
    assert re.compile(written)  # Python's own syntax
    again = parse_regex(written)
    assert _same(_dfa(tree), _dfa(again)), written
    assert to_regex(again) == written  # one spelling per tree, and a fixed point


@pytest.mark.parametrize("pattern", PATTERNS)
def test_tree_and_text_build_one_automaton(pattern):
    tree = _readable(pattern)
    if tree is None:
        pytest.skip("refused")
    assert _same(_dfa(tree), _dfa(normalize_pattern(pattern)))


def test_nodes_are_interned_and_normalised():
    a = concat(text("ab"), chars([(0x30, 0x39)]), text("c"))
    b = concat(text("a"), text("b"), Chars(((0x30, 0x39),)), text("c"))
    assert a is b and hash(a) == hash(b)
    assert alt([a, b, NOTHING]) is a
    assert alt([text("x"), alt([text("y"), text("x")])]) == Alt((Text("x"), Text("y")))
    assert concat(a, EMPTY) is a and concat(a, NOTHING) is NOTHING
    assert repeat(repeat(chars([(0x61, 0x61)]), 1, 3), 2, 2) is Repeat(Chars(((0x61, 0x61),)), 2, 6)
    assert repeat(a, 0, 0) is EMPTY and repeat(a, 1, 1) is a
    assert (text("a") + text("b")) is Text("ab")
    assert pickle.loads(pickle.dumps(a)) is a
    called = concat(text("x"), Call("k"), repeat(Call("j"), 0, None))
    assert regex_tree.calls_in(called) == {"k", "j"}
    with pytest.raises(AttributeError):
        a.size = 3


def test_equal_trees_across_an_intern_purge(monkeypatch):
    before = concat(text("purge"), chars([(0x61, 0x7A)]))
    monkeypatch.setattr(regex_tree, "_INTERNED", {})
    after = concat(text("purge"), chars([(0x61, 0x7A)]))
    assert after is not before and after == before and hash(after) == hash(before)


def test_interning_keeps_few_objects_a_node():
    """A new Text or Concat keeps the node and its hash, not a key tuple as
    well: each object a schema keeps lands in a free slot of the parent's
    pages in a fresh fork (a page copied), and the key tuples were a third
    of the small blocks a median MaskBench schema kept."""
    import sys

    texts = [f"interning {i} keeps" for i in range(2000)]
    before = sys.getallocatedblocks()
    made = [Text(value) for value in texts]
    # the node and its hash (an int past the small ones); the list is one block
    assert sys.getallocatedblocks() - before <= 2 * len(texts) + 5
    pairs = [(made[i], made[i + 1]) for i in range(0, len(made), 2)]
    before = sys.getallocatedblocks()
    joined = [regex_tree.Concat(items) for items in pairs]
    assert sys.getallocatedblocks() - before <= 2 * len(pairs) + 5
    # interned: made again, the same objects, and no more blocks kept
    before = sys.getallocatedblocks()
    assert all(regex_tree.Concat(items) is node for items, node in zip(pairs, joined))
    assert all(Text(value) is node for value, node in zip(texts, made))
    assert sys.getallocatedblocks() - before <= 5


def test_interned_kinds_stay_apart():
    """Text and Concat are interned by their field alone: a Concat and an Alt
    of the same items, and a Text and a call of the same key, stay distinct."""
    a, b = Text("kinds a"), Text("kinds b")
    joined, either = regex_tree.Concat((a, b)), Alt((a, b))
    assert joined is not either and joined != either and joined.__class__ is regex_tree.Concat
    assert either.__class__ is Alt and regex_tree.Concat((a, b)) is joined and Alt((a, b)) is either
    assert Call("kinds a") is not a and Call("kinds a") != a and Text("kinds a") is a
    assert Chars(((0x61, 0x62),)) is not regex_tree.Concat((a,)) and hash(joined) == hash((a, b))


def test_calls_render_as_definitions_or_names():
    tree = concat(text("<"), Call("d"), text(">"))
    assert to_regex(tree, {"d": alt([text("a"), text("b")])}) == "<(?:a|b)>"
    assert to_regex(tree, names={"d": "\ud800"}) == "<\ud800>"
    assert _same(_dfa(tree, {"d": repeat(text("a"), 1, None)}), _dfa("<a+>"))


def test_refusals_keep_their_error_classes():
    for pattern, error in [("a(?=b)", UnsupportedRegexError), ("a\\b", UnsupportedRegexError),
                           ("(?u)a", UnsupportedRegexError), ("(a)\\1", UnsupportedRegexError),
                           ("a^b", UnsupportedRegexError), ("(ab", RegexError), ("a{2,1}", RegexError)]:
        with pytest.raises(error):
            parse_regex(pattern)


def test_flags_are_resolved_when_read():
    assert parse_regex("(?i)k") == chars([(0x4B, 0x4B), (0x6B, 0x6B)])  # not the Kelvin sign
    assert parse_regex("(?i)é") == text("é")
    assert parse_regex("(?s).") == chars([(0, 0x10FFFF)])
    assert parse_regex(".") == chars([(0, 9), (11, 0x10FFFF)])
    assert parse_regex("^ab$") == text("ab")


def test_parse_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(regex_tree, "PARSE_CACHE_ENTRIES", 8)
    monkeypatch.setattr(regex_tree, "PARSE_CACHE_CHARACTERS", 200)
    regex_tree.clear_parse_cache()
    for i in range(50):
        parse_regex(f"a{{{i}}}b")
        texts, characters = regex_tree.parse_cache_info()
        assert texts <= 8 and characters <= 200
    parse_regex("x" * 150)
    parse_regex("y" * 150)
    texts, characters = regex_tree.parse_cache_info()
    assert characters <= 200
    first = parse_regex("a{49}b")
    assert parse_regex("a{49}b") is first  # a hit
    regex_tree.clear_parse_cache()
    assert regex_tree.parse_cache_info() == (0, 0)


def test_a_text_is_parsed_once(monkeypatch):
    """Once by Python's parser, checking and reading it together, and not
    again from the cache."""
    from tokendfa.analysis import regex_syntax

    regex_tree.clear_parse_cache()
    calls = []
    real = regex_syntax.parse_tree
    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(regex_tree, "parse_tree", counted)
    monkeypatch.setattr(regex_syntax, "parse_tree", counted)
    for _ in range(3):
        parse_regex("[a-z]+@[a-z]+")
    assert len(calls) == 1
    parse_regex("^[a-z]+$")  # the anchors dropped: the text without them is parsed again
    assert len(calls) == 3


NO_PATTERN_SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "string", "maxLength": 30},
                                      "c": {"type": "integer"}, "d": {"type": "boolean"},
                                      "e": {"enum": ["x", "y", 3, None]}, "f": {}},
     "required": ["a"]},
    {"type": "array", "items": {"type": "object", "properties": {"k": {"const": "v"}},
                                "additionalProperties": False}, "minItems": 1, "maxItems": 3},
    {"anyOf": [{"type": "string", "minLength": 2}, {"type": "null"}]},
    {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    {"type": "object", "properties": {"i": {"type": "integer", "minimum": 3, "maximum": 250},
                                      "n": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 10},
                                      "m": {"type": "number", "minimum": 0}}},
    True,
]


@pytest.mark.parametrize("lazy", [False, True])
def test_no_regex_parser_for_a_schema_without_pattern(monkeypatch, lazy):
    # the compiler's constants (a JSON string, a number) are read once, when it is imported
    import tokendfa.schema.compiler  # noqa: F401

    regex_tree.clear_parse_cache()

    def refuse(*args):
        raise AssertionError(f"Python's regex parser called on {args[0][:80]!r}")

    monkeypatch.setattr(regex_tree, "parse_tree", refuse)
    for schema in NO_PATTERN_SCHEMAS:
        compiled = regex_from_schema(schema, share_free_levels=lazy, share_counts=lazy,
                                     state_budget=None if lazy else 80_000)
        _dfa(compiled.tree, compiled.tree_definitions)


def _bench_schemas(per_source: int = 3):
    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                if i == per_source:
                    break
                yield f"{path.name[:-9]}:{i}", json.loads(line)["schema"]


SCHEMAS = [("object", NO_PATTERN_SCHEMAS[0]), ("array", NO_PATTERN_SCHEMAS[1]),
           ("pattern", {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{2,4}$"},
                                                         "at": {"type": "string", "format": "date"}}}),
           ("counted", {"type": "string", "maxLength": 300})]


@pytest.mark.parametrize("name, schema", SCHEMAS + list(_bench_schemas()),
                         ids=[n for n, _ in SCHEMAS] + [n for n, _ in _bench_schemas()])
def test_schema_tree_and_its_text_build_one_automaton(name, schema):
    # the tree with its definitions (as the builders take it) against the
    # regex text written out in full, read back by Python's parser
    try:
        compiled = regex_from_schema(schema, lenient=True, any_depth=2, share_counts=True,
                                     share_free_levels=True, state_budget=None)
    except TokenDFAError:
        pytest.skip("not compiled")
    if len(compiled.regex) > 200_000:
        pytest.skip("written out, too long to build twice here")
    try:
        from_tree = _dfa(compiled.tree, compiled.tree_definitions)
    except TokenDFAError:
        pytest.skip("over a build limit")
    assert _same(from_tree, _dfa(compiled.regex))
    # the text with placeholders and its text definitions: the same again
    assert _same(from_tree, _dfa(compiled.pattern, compiled.definitions))


def test_definitions_of_trees_are_built_once_per_process(monkeypatch):
    # a free value's levels are the same trees in every schema: the second
    # schema's lazy automaton stamps the fragments the first one built
    from tokendfa.analysis import lazydfa

    monkeypatch.setattr(lazydfa, "_SHARED_FRAGMENTS", lazydfa._SharedFragments())
    built = []
    real = lazydfa._LazyNFA._build
    monkeypatch.setattr(lazydfa._LazyNFA, "_build", lambda self, tree: built.append(tree) or real(self, tree))

    def explored(schema):
        compiled = regex_from_schema(schema, any_depth=3, share_free_levels=True, share_counts=True,
                                     state_budget=None)
        dfa = lazydfa.LazyByteDFA(compiled.tree, definitions=compiled.tree_definitions)
        lazy = canonical_byte_dfa(*dfa.explore())
        assert _same(lazy, _dfa(compiled.tree, compiled.tree_definitions))
        return compiled

    first = explored({"type": "object", "properties": {"a": {"type": "string"}}})
    first_builds = len(built)
    built.clear()
    second = explored({"type": "array", "items": {"type": "object", "properties": {"b": {}}}})
    shared = set(first.tree_definitions) & set(second.tree_definitions)
    assert shared  # the free value's levels
    assert len(built) < first_builds
    assert not {tree for tree in built} & {first.tree_definitions[k] for k in shared}


def test_nodes_are_off_the_collectors_lists():
    """With the compiled core, a node, its intern key and its tuple of
    children are untracked by the cyclic collector when made (a schema's
    trees were most of the objects a lazy index kept alive, and each full
    collection walked them); a node calling a key the collector follows (an
    arbitrary object), and what holds it, stay tracked, and so does a
    literal set (its automaton is set later)."""
    import gc

    if regex_tree._untrack is None:
        pytest.skip("the compiled core is off (TOKENDFA_NATIVE=0) or not built")

    class Key:  # a key that could refer back to the node calling it
        pass

    def nodes(node):
        yield node
        for child in getattr(node, "items", ()):
            yield from nodes(child)
        if isinstance(node, Repeat):
            yield from nodes(node.body)

    collecting = gc.isenabled()
    gc.disable()  # a collection untracks tuples of untracked objects itself
    try:
        fresh = "untracked-node-test"
        plain = alt([concat(Text(fresh), Call("\ue123"), Repeat(Chars(((0x30, 0x39), (0x41, 0x46))), 1, None)),
                     concat(Text(fresh + "!"), Call(("ref", fresh)))])
        made = list(nodes(plain))
        plain_tracked = [gc.is_tracked(node) for node in made]
        fields_tracked = [gc.is_tracked(node.items) for node in made if isinstance(node, (Alt, regex_tree.Concat))]
        odd = concat(Text(fresh + "?"), Call(Key()))
        odd_tracked = [gc.is_tracked(odd), gc.is_tracked(odd.items[1])]
        literals = regex_tree.LiteralSet((fresh + "a", fresh + "b"))
        literals_tracked = gc.is_tracked(literals)
    finally:
        if collecting:
            gc.enable()
    assert len(made) == 9
    assert not any(plain_tracked) and not any(fields_tracked)
    assert odd_tracked == [True, True]
    assert literals_tracked


def test_surely_matches_leaves_no_cycle_holding_its_callback():
    """``surely_matches`` (a lazy automaton's check of a definition's tree)
    leaves nothing that refers to its callback once it returns: the callback
    refers to the automaton's NFA, which a cycle through the recursive helper
    kept until a full collection of the cyclic collector (7 of 16 NFAs a run
    in benchmarks/bench_batch.py, freed inside a later row's collection)."""
    import gc
    import weakref

    class Callback:
        def __call__(self, key) -> bool:
            return key == "x"

    tree = regex_tree.concat(regex_tree.text("a"), regex_tree.alt([regex_tree.call("y"), regex_tree.call("x")]))
    callback = Callback()
    held = weakref.ref(callback)
    enabled = gc.isenabled()
    gc.disable()  # freed by reference counting alone
    try:
        assert regex_tree.surely_matches(tree, callback)
        del callback
        assert held() is None
    finally:
        if enabled:
            gc.enable()


def test_a_node_hashes_by_the_structural_hash_it_stored():
    made = regex_tree.concat(regex_tree.text("ab"), regex_tree.char(66), regex_tree.repeat(regex_tree.char(67), 0, None))
    again = regex_tree.concat(regex_tree.text("ab"), regex_tree.char(66), regex_tree.repeat(regex_tree.char(67), 0, None))
    assert made is again and hash(made) == made._hash == hash(made.items)
    assert hash(Text("xy")) == hash("xy")     # a text's key is its text
    assert {made: 1}[again] == 1 and len({made, again, Text("xy")}) == 2
    with pytest.raises(AttributeError):
        made._hash = 0
    if os.environ.get("TOKENDFA_NATIVE", "1") != "0" and regex_tree._NodeBase is not None:
        # compiled: the hash is the base type's slot, not a Python method
        assert isinstance(made, regex_tree._NodeBase)
        assert type(made).__hash__ is regex_tree._NodeBase.__hash__
    else:
        assert type(made).__hash__ is regex_tree.Node.__dict__["__hash__"]


@pytest.mark.parametrize("names, single, accepted", [
    (("ab", "b_"), ((0x5F, 0x5F), (0x61, 0x62)), True),
    (("ab", "b_"), ((0x61, 0x62),), False),            # "_" in no range of single
    (("a\u00e9",), ((0x20, 0x7F),), False),            # a character past ASCII
    (("ab",), ((0x20, 0x80),), False),                 # single past ASCII
    (("a b",), ((-5, 0x20), (0x61, 0x62)), True),      # a range starting below 0 holds the space
    ((), ((0x61, 0x61),), True),
])
def test_excluding_checks_every_name_character_is_in_single(names, single, accepted):
    """Excluding's builders rely on each character of a name being one byte of
    ``single``: a name with any other character, or a ``single`` reaching past
    ASCII, is refused (the same answers with the set of ``single``'s characters
    kept per ``single``, asked twice)."""
    def make():
        return regex_tree.Excluding(tuple(sorted(names)), single, Text("!"), Text("?"))

    for _ in range(2):
        if accepted:
            assert make().names == tuple(sorted(names))
        else:
            with pytest.raises(ValueError, match="single must be ASCII"):
                make()
