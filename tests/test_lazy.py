"""The lazy index serves exactly what the eager index serves, and completes to it.

Every test pairs a lazy state with the eager state reached by the same
tokens (breadth-first over the tokens each allows) and compares what the two
allow there; ``complete()`` must give the eager arrays array for array.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from cases import CASES
from conftest import TOY_EOS, TOY_TOKENS, cached_vocabulary, json_string_chain
from tokendfa import (BuildLimitError, EmptyLanguageError, Guide, Index, InvalidStateError,
                      TokenNotAllowedError, Vocabulary, VocabularyCoverageError)
from tokendfa.analysis.construct import byte_dfa_from_regex
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.lazydfa import UNKNOWN, LazyByteDFA
from tokendfa.analysis.regex_tree import Alt, Call, Chars, Concat, Node, Repeat, Text, parse_regex
from tokendfa.analysis.dfa import INITIAL as INITIAL_STATE
from tokendfa.analysis import lazydfa as lazydfa_module
import tokendfa.lazy as lazy_module
from tokendfa.lazy import index as lazy_index_module, kernels as lazy_kernels, plans as lazy_plans
from tokendfa.lazy import tables as lazy_tables
from tokendfa.lazy import LAZY_ANY_DEPTH, LazyIndex
from tokendfa.schema.api import regex_from_schema

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}
EXTRA_PATTERNS = [r"(a|b)*a(a|b){5}", r"a*b*", r"[^x]*x[^x]{3}", r"(\d+|\w+)-\s*", r"(ab3|a)c",
                  r"(?i)[a-f]{2,3}|x"]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}}, "extra": {}},
    "required": ["name", "age"]}
PERSON_INSTANCES = [{"name": "Ada", "age": 36},
                    {"name": "Grace Hopper", "age": 85, "tags": ["navy", "cobol"],
                     "extra": {"a": [1, 2.5, None], "b": {"c": "é日"}}},
                    {"name": "", "age": 0, "tags": [], "extra": "free"}]


def lockstep(lazy, eager, max_pairs: int | None = None) -> int:
    """Walk both breadth-first over every allowed token; returns the pairs seen."""
    start = (lazy.initial_state, eager.initial_state)
    seen, queue = {start}, [start]
    for lazy_state, eager_state in queue:
        assert np.array_equal(lazy.get_mask(lazy_state), eager.get_mask(eager_state))
        assert lazy.is_final(lazy_state) == eager.is_final(eager_state)
        tokens = eager.get_tokens(eager_state)
        assert np.array_equal(lazy.get_tokens(lazy_state), tokens)
        reached = set()
        for token in tokens.tolist():
            pair = (lazy.advance(lazy_state, token), eager.advance(eager_state, token))
            if token not in lazy.eos_token_ids:
                reached.add(pair[0])
            if pair not in seen and (max_pairs is None or len(seen) < max_pairs):
                seen.add(pair)
                queue.append(pair)
        # the row's own end states (what completion follows) hold every state
        # the tokens lead to (a chain row names its whole chain, each length
        # whether or not a token has it)
        if isinstance(lazy, LazyIndex) and lazy._successors.get(lazy_state) is not None:
            assert reached <= set(lazy._successors[lazy_state].tolist())
    return len(seen)


def compiled_walk(monkeypatch, module) -> None:
    """Use ``module`` as the compiled walk (None: the numpy code, and the
    class runs' too) in every module of the lazy engine that calls it."""
    for holder in (lazy_kernels, lazy_plans, lazy_tables, lazy_index_module):
        monkeypatch.setattr(holder, "_cwalk", module)
    if module is None:
        monkeypatch.setattr(lazy_tables, "_classruns", None)


@pytest.fixture(params=["compiled", "python"])
def native(request, monkeypatch):
    """Each lazy automaton and row computed by the compiled code
    (analysis/_lazycore.c, index/lazy/_cwalk.c) and by the Python and numpy
    code it stands in for where it is not built."""
    if request.param == "python":
        monkeypatch.setattr(lazydfa_module, "_lazycore", None)
        compiled_walk(monkeypatch, None)
    elif lazydfa_module._lazycore is None or lazy_kernels._cwalk is None:
        if os.environ.get("TOKENDFA_NATIVE") == "0":
            pytest.skip("TOKENDFA_NATIVE=0 turns the compiled code off")
        pytest.fail("the compiled code is not built (no C compiler at install?)")
    return request.param


# --- the lazy byte automaton ---------------------------------------------------

@pytest.mark.parametrize("pattern", [c.pattern for c in CASES] + EXTRA_PATTERNS)
def test_explored_lazy_dfa_is_the_eager_dfa(pattern, native):
    eager = byte_dfa_from_regex(pattern)
    lazy = canonical_byte_dfa(*LazyByteDFA(pattern).explore())
    assert np.array_equal(lazy.transitions, eager.transitions)
    assert np.array_equal(lazy.finals, eager.finals)


@pytest.mark.parametrize("any_depth", [1, 2, 4])
def test_explored_lazy_dfa_with_shared_definitions(any_depth, native):
    compiled = regex_from_schema(PERSON, any_depth=any_depth, state_budget=None)
    assert compiled.definitions  # the free value is a shared definition
    eager = byte_dfa_from_regex(compiled.pattern, definitions=compiled.definitions)
    lazy = canonical_byte_dfa(*LazyByteDFA(compiled.pattern, definitions=compiled.definitions).explore())
    assert np.array_equal(lazy.transitions, eager.transitions)
    assert np.array_equal(lazy.finals, eager.finals)


@pytest.mark.parametrize("any_depth", [0, 1, 3])
def test_free_value_levels_shared_one_by_one_keep_the_language(any_depth):
    # What Index.from_schema(lazy=True) asks for: each level of a free value its
    # own definition, so the first mask compiles one level, not three.
    schema = {"type": "object", "properties": {"a": {"type": "array"}, "b": {}}, "required": ["a"]}
    apart = regex_from_schema(schema, any_depth=any_depth, state_budget=None, share_free_levels=True)
    together = regex_from_schema(schema, any_depth=any_depth, state_budget=None)
    assert len(apart.definitions) == any_depth + 1  # one a level, however short
    assert len(together.definitions) <= 1
    left = canonical_byte_dfa(*LazyByteDFA(apart.pattern, definitions=apart.definitions).explore())
    right = canonical_byte_dfa(*LazyByteDFA(together.pattern,
                                            definitions=together.definitions or None).explore())
    assert np.array_equal(left.transitions, right.transitions)
    assert np.array_equal(left.finals, right.finals)
    assert np.array_equal(left.transitions, byte_dfa_from_regex(apart.regex).transitions)


@pytest.mark.parametrize("low, high", [(0, 256), (3, 300), (300, None), (257, 258)])
def test_long_string_counts_shared_by_digits_keep_the_language(low, high):
    # What Index.from_schema(lazy=True) asks for: a length bound of 256 or more
    # written with O(log n) definitions (Compiler.counted), not n copies.
    schema = {"type": "string", "minLength": low, **({} if high is None else {"maxLength": high})}
    shared = regex_from_schema(schema, state_budget=None, share_counts=True)
    written = regex_from_schema(schema, state_budget=None)
    assert len(shared.pattern) + sum(map(len, shared.definitions.values())) < 3_000
    assert not written.definitions
    explored = explored_like_eager(shared.pattern, shared.definitions)
    left = canonical_byte_dfa(*explored.explore())
    right = byte_dfa_from_regex(written.pattern)
    assert np.array_equal(left.transitions, right.transitions)
    assert np.array_equal(left.finals, right.finals)


def test_counts_in_one_schema_share_the_powers_of_their_unit():
    # Compiler.counted keeps the powers of a unit, and each count, for the
    # whole compilation: three bounds written from the same definitions
    strings = {"a": (0, 300), "b": (257, 258), "c": (5, 300), "d": (256, None), "e": (0, 300)}
    schema = {"type": "object", "required": list(strings), "additionalProperties": False,
              "properties": {name: {"type": "string", "minLength": low,
                                    **({} if high is None else {"maxLength": high})}
                             for name, (low, high) in strings.items()}}
    shared = regex_from_schema(schema, state_budget=None, share_counts=True)
    written = regex_from_schema(schema, state_budget=None)
    explored = explored_like_eager(shared.pattern, shared.definitions)
    left = canonical_byte_dfa(*explored.explore())
    right = byte_dfa_from_regex(written.pattern)
    assert np.array_equal(left.transitions, right.transitions)
    assert np.array_equal(left.finals, right.finals)


def test_many_long_strings_compile_lazily_in_a_small_nfa():
    # Snowplow/sp_0 of JSONSchemaBench: 36 strings of maxLength 1024 and one of
    # 65535 needed a 1.4 GiB NFA written out, over the memory budget.
    properties = {f"p{i}": {"type": ["string", "null"], "maxLength": 1024} for i in range(40)}
    properties["huge"] = {"type": "string", "maxLength": 65535}
    compiled = regex_from_schema({"type": "object", "properties": properties,
                                  "additionalProperties": False}, state_budget=None,
                                 share_free_levels=True, share_counts=True)
    dfa = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)

    def accepts(text: str) -> bool:
        state = dfa.initial
        for byte in text.encode():
            state = dfa.step(state, byte)
            if state == 0:
                return False
        return dfa.is_final(state)

    assert dfa.num_nfa_states < 5_000
    assert accepts('{"p0":"' + "é" * 1024 + '","p7":null,"huge":"' + "x" * 3000 + '"}')
    assert not accepts('{"p0":"' + "é" * 1025 + '"}')
    assert accepts('{"p3":"' + "\\n" * 1024 + '"}')
    assert not accepts('{"p3":"' + "\\n" * 1025 + '"}')
    assert dfa.num_nfa_states < 5_000  # entering a string compiled its definitions once


def test_first_mask_of_an_open_object_compiles_one_free_value_level():
    from tokendfa import Vocabulary

    vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_token_ids=256)
    index = Index.from_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, vocab, lazy=True)
    index.get_mask(index.initial_state)
    # the pattern's own states and one level of the free value (of 32): 350 states;
    # 2,990 when a definition holds three levels
    assert index.byte_dfa.num_nfa_states < 1000


def test_lazy_schema_metadata_is_the_eager_ones_and_the_compiled_schema():
    # the metadata says what an eager index's says of the schema, and what was
    # compiled: a caller that changes its dict afterwards changes neither
    from tokendfa import Vocabulary

    vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_token_ids=256)
    schema = {"type": "object", "properties": {"a": {"type": "integer", "format": "int32"},
                                               "\ud800": {"type": "string"}}, "required": ["a"]}
    compiled = json.loads(json.dumps(schema))
    lazy = Index.from_schema(schema, vocab, lazy=True, lenient=True)
    lazy.get_mask(lazy.initial_state)
    eager = Index.from_schema(schema, vocab, lazy=False, lenient=True)
    schema["properties"]["b"] = {"type": "null"}
    schema["required"].append("b")
    for key in ("kind", "schema", "whitespace", "widenings"):   # notes: the lazy depth differs
        assert lazy.metadata[key] == eager.metadata[key], key
    assert json.loads(lazy.metadata["schema"]) == compiled


@pytest.mark.parametrize("kind", ["dict", "OrderedDict", "text"])
def test_lazy_schema_text_is_the_schema_as_built_whatever_its_types(kind, tmp_path):
    # the lazy index copies the schema at build and writes its text when the
    # metadata is read (a dict subclass is written at once): the text is
    # json.dumps' of the schema as it was built, floats, booleans, big numbers and
    # non-ASCII keys included, in the metadata and in a saved file alike
    from collections import OrderedDict

    from tokendfa import Vocabulary

    vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_token_ids=256)
    properties = {"\u00e9t\u00e9": {"enum": [1.5, True, None, "x\ud800"]}, "n": {"const": 10 ** 30}}
    schema = {"type": "object", "properties": properties, "required": ["n"],
              "additionalProperties": False}
    if kind == "OrderedDict":
        schema = OrderedDict(schema)
    expected = json.dumps(schema)
    given = expected if kind == "text" else schema
    lazy = Index.from_schema(given, vocab, lazy=True)
    lazy.get_mask(lazy.initial_state)
    if kind != "text":
        schema["required"].append("\u00e9t\u00e9")
        properties["m"] = {"type": "null"}
    assert lazy.metadata["schema"] == expected
    path = tmp_path / "lazy.tdfa"
    lazy.save(path)
    assert Index.load(path).metadata["schema"] == expected


# Placeholders of shared definitions are lone surrogates.
P, Q, R = "\ud800", "\ud801", "\ud802"
NESTED = {P: rf"a(?:{Q}|b)c", Q: rf"x[0-9]+{R}?y", R: r"(?:z|)"}


def written_out(pattern: str, definitions: dict[str, str]) -> str:
    """``pattern`` with every placeholder replaced by its definition in a group
    (a class of plain characters and placeholders becomes an alternation)."""
    import re

    def classes_out(text: str) -> str:
        return re.sub(r"\[([^\]\\]*[\ud800-\udfff][^\]\\]*)\]",
                      lambda m: "(?:" + "|".join(m.group(1)) + ")", text)

    pattern = classes_out(pattern)
    while any(p in pattern for p in definitions):
        for placeholder, text in definitions.items():
            pattern = pattern.replace(placeholder, f"(?:{classes_out(text)})")
    return pattern


def accepts(dfa: LazyByteDFA, data: bytes) -> bool:
    state = dfa.initial
    for byte in data:
        state = int(dfa.row(state)[byte])
        if state == 0:
            return False
    return dfa.is_final(state)


def explored_like_eager(pattern: str, definitions: dict[str, str]) -> LazyByteDFA:
    """The lazy automaton of ``pattern``, explored, after checking that it
    minimises to the eager automaton (definitions stamped in) and to the
    automaton of the pattern with its definitions written out."""
    explored = LazyByteDFA(pattern, definitions=definitions)
    lazy = canonical_byte_dfa(*explored.explore())
    eager = byte_dfa_from_regex(pattern, definitions=definitions)
    assert np.array_equal(lazy.transitions, eager.transitions)
    assert np.array_equal(lazy.finals, eager.finals)
    assert np.array_equal(lazy.transitions, byte_dfa_from_regex(written_out(pattern, definitions)).transitions)
    return explored


@pytest.mark.parametrize("pattern", [P, f"{P}*", f"(?:{P}|{Q})+-{Q}", f"[{P}{Q}k]{{1,3}}", f"{R}{R}q",
                                     f"(?:{P}{P}){{2}}|{Q}"])
def test_nested_definitions_are_called_not_copied(pattern):
    # The NFA holds each definition once, however often it is used.
    explored = explored_like_eager(pattern, NESTED)
    plain = written_out(pattern, NESTED)
    import re
    for text in ["axyc", "abc", "ax12zyc", "ax1yc", "x3y", "x3zy-x4y", "abcabc", "abcabcabcabc", "k", "kk",
                 "zzq", "zq", "q", "abcx1y", "x1y", "ax1zzyc"]:
        assert accepts(explored, text.encode()) == bool(re.fullmatch(plain, text)), text


def test_definition_nfa_grows_with_the_written_pattern():
    # Ten levels of definitions each using the one below twice: 2^10 copies
    # written out, ten fragments called.
    chain = {chr(0xD800 + i): rf"\[{chr(0xD801 + i)}(?:,{chr(0xD801 + i)})*\]|n" for i in range(10)}
    chain[chr(0xD80A)] = "n"
    dfa = LazyByteDFA(chr(0xD800), definitions=chain)
    assert dfa.num_nfa_states < 400
    assert accepts(dfa, b"[[[n,n],n]]") and not accepts(dfa, b"[[n,n]")
    assert accepts(dfa, b"[" * 10 + b"n" + b"]" * 10) and not accepts(dfa, b"[" * 11 + b"n" + b"]" * 11)


def test_text_definitions_need_placeholders_trees_any_key():
    # a definition given as text is called by its placeholder (one lone
    # surrogate): any other key is refused, with trees beside it or not; a
    # tree's key is any hashable (a schema's free value levels are tuples)
    p = chr(0xD806)
    for definitions in ({"ab": "x"}, {("level", 1): Text("y"), "ab": "x"}, {p: "x", "q": "y"}):
        with pytest.raises(ValueError, match="placeholder"):
            LazyByteDFA(f"a{p}", definitions=definitions)
    dfa = LazyByteDFA(Concat((Text("a"), Call(("level", 1)))), definitions={("level", 1): Text("yz"), p: "x"})
    assert accepts(dfa, b"ayz") and not accepts(dfa, b"ax")


def test_a_definition_that_surely_matches_is_compiled_when_first_entered():
    # _LazyNFA._decide reads a definition's tree before compiling it to tell
    # whether it matches anything: an alternation that begins with a word (a
    # JSON Schema's free value begins with null) surely does, so the
    # construction compiles nothing and the first match that enters it does
    p = chr(0xD805)
    dfa = LazyByteDFA(f"a{p}b|c", definitions={p: "null|x[0-9]+"})
    nfa = dfa._nfa
    assert nfa.start_of[nfa.number[p]] < 0
    assert accepts(dfa, b"anullb") and accepts(dfa, b"ax12b") and accepts(dfa, b"c")
    assert not accepts(dfa, b"ab") and not accepts(dfa, b"axb")
    assert nfa.start_of[nfa.number[p]] >= 0


def test_a_definition_whose_callees_surely_match_is_not_compiled_up_front():
    # _LazyNFA._matches_something reads the trees of the definitions a tree
    # calls: a value that calls values (an object property's, calling its
    # members') is decided without compiling either; the first match that
    # enters them does
    p, q = chr(0xD806), chr(0xD807)
    definitions = {p: parse_regex(rf"\[{q}(?:,{q})*\]", calls=True), q: parse_regex('"[a-z]*"', calls=True)}
    pattern = rf'\{{"k":{p}\}}'
    dfa = LazyByteDFA(pattern, definitions=definitions)
    nfa = dfa._nfa
    assert nfa.start_of[nfa.number[p]] < 0 and nfa.start_of[nfa.number[q]] < 0
    assert accepts(dfa, b'{"k":["ab",""]}') and not accepts(dfa, b'{"k":[]}')
    assert not accepts(dfa, b'{"k":[ab]}') and not accepts(dfa, b'{"k":}')
    assert nfa.start_of[nfa.number[p]] >= 0 and nfa.start_of[nfa.number[q]] >= 0
    lazy = canonical_byte_dfa(*LazyByteDFA(pattern, definitions=definitions).explore())
    eager = byte_dfa_from_regex(pattern, definitions=definitions)
    assert np.array_equal(lazy.transitions, eager.transitions) and np.array_equal(lazy.finals, eager.finals)


def test_a_schema_source_says_which_written_definitions_surely_match():
    # With deferred recursion the definitions come from the schema compiler
    # (DeferredDefinitions), which says which written definitions surely
    # match: the nested object's value is not compiled with the first fragment
    strings = {"type": "array", "items": {"type": "string"}}
    schema = {"type": "object", "required": ["outer"], "additionalProperties": False, "properties": {
        "outer": {"type": "object", "required": ["a", "b"], "additionalProperties": False, "properties": {
            "a": {"type": "string"}, "b": strings, "c": {"type": "array", "items": strings},
            "d": {"enum": ["one", "two", "three"]}}},
        "tree": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "additionalProperties": False, "properties": {
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}
    compiled = regex_from_schema(schema, any_depth=LAZY_ANY_DEPTH, state_budget=None, share_free_levels=True,
                                 share_counts=True, share_values=True, defer_recursion=True)
    assert compiled.deferred is not None
    dfa = LazyByteDFA(compiled.tree, definitions=compiled.deferred)
    built = dfa.num_nfa_states
    assert built < 40
    assert accepts(dfa, b'{"outer":{"a":"x","b":["y"],"d":"two"},"tree":{"kids":[{}]}}')
    assert not accepts(dfa, b'{"outer":{"a":"x"}}') and not accepts(dfa, b'{"outer":{"a":"x","b":[],"d":"on"}}')
    assert dfa.num_nfa_states > 2 * built


def test_the_rest_of_a_long_pattern_is_compiled_when_a_match_reaches_it():
    # _LazyNFA._rest_deferred: a long concatenation keeps its first items in
    # the automaton's main fragment; the others are a definition of their own,
    # built when a match first reaches them, with the same language
    members = [f'"key{i}":(?:true|false|-?(?:0|[1-9][0-9]*)|"[a-z]*")' for i in range(24)]
    pattern = r"\{" + ",".join(members) + r"\}"
    dfa = LazyByteDFA(pattern)
    built = dfa.num_nfa_states
    text = "{" + ",".join(f'"key{i}":{"true" if i % 2 else chr(34) + "ab" + chr(34)}' for i in range(24)) + "}"
    assert accepts(dfa, text.encode()) and not accepts(dfa, text[:-1].encode())
    assert dfa.num_nfa_states > 4 * built
    lazy = canonical_byte_dfa(*LazyByteDFA(pattern).explore())
    eager = byte_dfa_from_regex(pattern)
    assert np.array_equal(lazy.transitions, eager.transitions) and np.array_equal(lazy.finals, eager.finals)


@pytest.mark.parametrize("nothing", [Chars(((0xD800, 0xDFFF),)), Text("x\ud800"),
                                     Alt((Text("\udc00"), Chars(((0xD900, 0xD9FF),)))),
                                     Concat((Text("x"), Chars(()))), Repeat(Chars(((0xD800, 0xD8FF),)), 1, 3)])
def test_a_definition_of_lone_surrogates_still_matches_nothing(nothing):
    # what the tree reading cannot vouch for is compiled to decide: a
    # character or text of lone surrogates has no UTF-8, so no match
    p = chr(0xD805)
    dfa = LazyByteDFA(f"a{p}|b", definitions={p: nothing})
    assert accepts(dfa, b"b") and int(dfa.row(dfa.initial)[ord("a")]) == 0
    with pytest.raises(EmptyLanguageError):
        LazyByteDFA(f"a{p}", definitions={p: nothing})


class _EveryFragmentBuilt(lazydfa_module._LazyNFA):
    """Parses and builds every definition from its own text, never from
    another of the same shape."""

    def _shape(self, text, remember=False):
        return None, ()


S, T = "\ud803", "\ud804"
SAME_SHAPES = [
    # a JSON Schema's free value, one definition a level: every level one shape
    ("free values", *(lambda c: (c.pattern, c.definitions))(regex_from_schema(
        PERSON, any_depth=3, state_budget=None, share_free_levels=True)), None),
    # two texts of one shape calling their callees in the other order
    ("callees swapped", f"{P}-{S}|{T}", {P: f"a{Q}b{R}", S: f"a{R}b{Q}", T: f"[{Q}{R}]c[{R}{Q}]",
                                         Q: "x+", R: "y?"}, None),
    # recursion under a stack bound: everything compiled up front
    ("mutual recursion", P, {P: rf"\({Q}?\)", Q: rf"\({P}?\)"}, 4),
]


def test_shapes_kept_by_tree_call_their_own_callees(monkeypatch):
    # The process keeps the shapes of the trees of definitions keyed by
    # tuples (named alike in every schema), with their callees as keys
    # (_SharedFragments.shape_of): the same tree in another automaton, its
    # callees numbered otherwise, calls that automaton's definitions of the
    # same keys; another tree of the same size is another shape.
    monkeypatch.setattr(lazydfa_module, "_SHARED_FRAGMENTS", lazydfa_module._SharedFragments())
    first = Concat((Text("a"), Call(Q), Text("b"), Call(R)))
    other = Concat((Text("c"), Call(R), Text("d"), Call(Q)))
    assert first.size == other.size
    leaves = {Q: parse_regex("x+"), R: parse_regex("y?z")}
    one, two = ("level", 1), ("level", 2)
    pattern = Concat((Call(one), Text("-"), Call(two)))
    for definitions in ({one: first, two: other, **leaves}, {**leaves, two: first, one: other}):
        dfa = LazyByteDFA(pattern, definitions=definitions)
        lazy = canonical_byte_dfa(*dfa.explore())
        eager = byte_dfa_from_regex(pattern, definitions=definitions)
        assert np.array_equal(lazy.transitions, eager.transitions)
        assert np.array_equal(lazy.finals, eager.finals)
        assert lazydfa_module._SHARED_FRAGMENTS.shape_of(first) is not None
    assert accepts(dfa, b"cyzdxx-axbyz") and not accepts(dfa, b"axbz-czdx")
    # a placeholder's tree is not kept (placeholders are numbered per schema)
    LazyByteDFA(f"{P}-", definitions={P: Concat((Text("q"), Call(Q))), **leaves}).explore()
    assert lazydfa_module._SHARED_FRAGMENTS.shape_of(Concat((Text("q"), Call(Q)))) is None


def test_shapes_kept_by_tree_are_bounded():
    shared = lazydfa_module._SharedFragments()
    shared.MAX_SHAPES, shared.MAX_SHAPES_SIZE, shared.MAX_SHAPE_SIZE = 2, 6, 5
    a, bb, ccc, big = (Concat((Text(text), Call(Q))) for text in ("a", "bb", "ccc", "dddddd"))
    for tree in (a, bb, ccc, big):
        shared.keep_shape(tree, tree, (Q,))
    # ccc (size 4) dropped a (past two trees), then bb (past size 6); big (7) is never kept
    assert [shared.shape_of(tree) is not None for tree in (a, bb, ccc, big)] == [False, False, True, False]
    shared.MAX_SHAPES_SIZE = 100
    shared.keep_shape(a, a, (Q,))
    shared.shape_of(ccc)
    shared.keep_shape(bb, bb, (Q,))     # the oldest (ccc) goes first, read or not
    assert shared.shape_of(ccc) is None and shared.shape_of(a) is not None and shared.shape_of(bb) is not None
    shared.clear()
    assert shared.shape_of(ccc) is None


def test_fragments_kept_drop_the_least_recently_read_and_a_read_writes_nothing():
    shared = lazydfa_module._SharedFragments()
    shared.MAX_STATES = 4

    def template(states):
        return lazydfa_module._FragmentTemplate(0, ((),) * states, ((),) * states, (), 0, states - 1)

    a, b, c = (Text(text) for text in ("a", "b", "c"))
    shared.keep(a, template(2))
    shared.keep(b, template(2))
    order = list(shared._kept)
    assert shared.get(a) is not None and shared.get(c) is None
    assert list(shared._kept) == order   # the read moved nothing (a forked child copies no page)
    shared.keep(c, template(2))          # past 4 states: b, read least recently, goes; a stays
    assert shared.get(a) is not None and shared.get(b) is None and shared.get(c) is not None
    shared.clear()
    assert shared.get(a) is None


@pytest.mark.parametrize("name, pattern, definitions, max_depth", SAME_SHAPES,
                         ids=[case[0] for case in SAME_SHAPES])
def test_fragments_of_one_shape_are_copied_as_built(name, pattern, definitions, max_depth, monkeypatch):
    # the process's fragments of other automata left out: this one's own templates are checked
    monkeypatch.setattr(lazydfa_module, "_SHARED_FRAGMENTS", lazydfa_module._SharedFragments())
    # A definition whose text has the shape of one compiled before is a copy of
    # that fragment with its states and callees renamed: the tables are those
    # of building it from its text, state for state.
    copied = lazydfa_module._LazyNFA(pattern, definitions, lazydfa_module.DEFAULT_MAX_NFA_STATES, max_depth)
    built = _EveryFragmentBuilt(pattern, definitions, lazydfa_module.DEFAULT_MAX_NFA_STATES, max_depth)
    for nfa in (copied, built):
        nfa.compile_everything()
    compiled = sum(start >= 0 for start in copied.start_of)
    assert compiled > len(copied.templates) >= 1  # some fragments were copies
    assert not built.templates
    for table in ("eps", "edges", "calls", "ends", "start_of", "end_of", "callees", "span",
                  "completes", "need", "need_byte"):
        assert getattr(copied, table) == getattr(built, table), table
    # templates for texts and trees whose length or size another shares (one
    # shape, one length), and for trees that call nothing, that a tuple keys
    # (a later one of the same shape may come from a growing source, or from
    # another schema) or whose fragment is large
    def kept(d, text):
        if copied.length_count[lazydfa_module._source_length(text)] > 1:
            return True
        if not isinstance(text, Node):
            return False
        base, stop = copied.span[d]
        return (not text.calls or copied.placeholders[d].__class__ is tuple
                or stop - base >= lazydfa_module._TEMPLATE_MIN_STATES)

    shared = {copied._shape(copied._tree(d))[0] for d, text in enumerate(copied.texts)
              if copied.start_of[d] >= 0 and kept(d, text)}
    assert set(copied.templates) == shared - {None}
    # a template shares the rows its fragment kept whole through pruning
    for template in copied.templates.values():
        for rows, kept in ((template.eps, copied.eps), (template.edges, copied.edges)):
            for i, row in enumerate(rows):
                now = kept[template.base + i]
                assert now is row or now != row
    if max_depth is None:
        explored_like_eager(pattern, definitions)
    dfa = LazyByteDFA(pattern, definitions=definitions, max_depth=max_depth)
    for text, matches in SAME_SHAPE_TEXTS.get(name, []):
        assert accepts(dfa, text.encode()) == matches, text


SAME_SHAPE_TEXTS = {
    "callees swapped": [("axby-abx", True), ("axxb-aybxx", True), ("axb-ayb", False), ("ab-abx", False),
                        ("xcy", True), ("ycx", True), ("c", True), ("xxcyy", False)],
    "mutual recursion": [("()", True), ("(())", True), ("(()", False), ("()()", False)],
}


def test_deep_free_values_lazily(native):
    compiled = regex_from_schema(PERSON, any_depth=12, state_budget=None)
    dfa = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)
    import jsonschema

    def instance(levels: int):
        value = {"x": [1, "é", None]}
        for _ in range(levels):
            value = [value] if _ % 2 else {"k": value, "n": 2.5}
        return {"name": "n", "age": 3, "extra": value}

    for levels in range(0, 16):
        data = instance(levels)
        jsonschema.validate(data, PERSON)
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        # extra's value nests levels + 2 arrays and objects: 12 levels at most
        assert accepts(dfa, text) == (levels + 2 <= 12), levels
    assert not accepts(dfa, b'{"name":"n","age":-1}') and accepts(dfa, b'{"name":"n","age":0}')


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_recursive_definition_with_a_stack_bound(depth):
    lists = {P: rf"\[(?:{P}(?:,{P})*)?\]"}
    lazy = canonical_byte_dfa(*LazyByteDFA(P, definitions=lists, max_depth=depth).explore())
    written = r"\[\]"
    for _ in range(depth):
        written = rf"\[(?:{written}(?:,{written})*)?\]"
    eager = byte_dfa_from_regex(written)
    assert np.array_equal(lazy.transitions, eager.transitions)
    assert np.array_equal(lazy.finals, eager.finals)
    # left recursion, and a path whose byte must be taken before the call
    left = canonical_byte_dfa(*LazyByteDFA(f"(?:{P}a|b)", definitions={P: f"(?:{P}a|b)"},
                                           max_depth=depth).explore())
    assert np.array_equal(left.transitions, byte_dfa_from_regex(f"ba{{0,{depth}}}").transitions)
    right = canonical_byte_dfa(*LazyByteDFA(f"a{P}|b", definitions={P: f"a{P}|b"},
                                            max_depth=depth).explore())
    assert np.array_equal(right.transitions, byte_dfa_from_regex(f"a{{0,{depth}}}b").transitions)
    with pytest.raises(EmptyLanguageError):
        LazyByteDFA(f"a{P}", definitions={P: f"a{P}"}, max_depth=depth)


def test_recursive_definition_needs_a_bound():
    from tokendfa import RegexError

    with pytest.raises(RegexError, match="uses itself"):
        LazyByteDFA(P, definitions={P: rf"\[{P}?\]"})


def test_recursive_tree_definitions_are_refused_in_either_order():
    # trees that call only later definitions pass a check made inline
    # (_LazyNFA); a call of itself or of an earlier one goes to the search,
    # which refuses a cycle and passes the rest
    from tokendfa import RegexError

    a, b = Call(("def", "a")), Call(("def", "b"))
    for definitions in ({("def", "a"): Concat((Text("["), a, Text("]")))},
                        {("def", "a"): Concat((Text("["), b)), ("def", "b"): Alt((a, Text("x")))},
                        {("def", "b"): Alt((a, Text("x"))), ("def", "a"): Concat((Text("["), b))}):
        with pytest.raises(RegexError, match="uses itself"):
            LazyByteDFA(Concat((Text("<"), a)), definitions=definitions)
    for definitions in ({("def", "a"): Concat((Text("["), b)), ("def", "b"): Text("x")},
                        {("def", "b"): Text("x"), ("def", "a"): Concat((Text("["), b))}):
        dfa = LazyByteDFA(Concat((Text("<"), a)), definitions=definitions)
        assert accepts(dfa, b"<[x") and not accepts(dfa, b"<[")


def test_lazy_dfa_rows_on_demand_and_dead_is_empty():
    dfa = LazyByteDFA(r"ab|ac")
    assert dfa.num_materialised == 1  # the dead row only
    after_a = int(dfa.row(1)[ord("a")])
    assert after_a > 1 and dfa.row(1)[ord("b")] == 0 and not dfa.is_final(after_a)
    assert dfa.num_materialised == 2
    # both continuations end in one final state; a dead-end NFA branch never makes a state
    assert dfa.is_final(int(dfa.row(after_a)[ord("b")]))
    assert dfa.row(after_a)[ord("b")] == dfa.row(after_a)[ord("c")]
    with pytest.raises(EmptyLanguageError):
        LazyByteDFA(r"a[^\x00-\U0010ffff]")


def test_lazy_dfa_cells_are_resolved_only_when_asked():
    dfa = LazyByteDFA("(?:abc|abd|x[0-9]+)y")
    assert (dfa.table[INITIAL_STATE] == UNKNOWN).all()
    found = dfa.successors(np.array([INITIAL_STATE, INITIAL_STATE]), np.array([ord("a"), ord("q")]))
    after_a = int(found[0])
    assert after_a > 1 and found[1] == 0
    row = dfa.table[INITIAL_STATE]
    assert row[ord("a")] == after_a and row[ord("q")] == 0 and row[ord("x")] == UNKNOWN
    assert dfa.num_materialised == 1  # no whole row yet: the dead row only
    assert dfa.step(after_a, ord("b")) == dfa.row(after_a)[ord("b")] > 1
    assert dfa.num_materialised == 2
    # cells resolved one by one give the eager automaton, once explored
    eager = byte_dfa_from_regex("(?:abc|abd|x[0-9]+)y")
    lazy = canonical_byte_dfa(*dfa.explore())
    assert np.array_equal(lazy.transitions, eager.transitions)


WIDE_PATTERNS = [r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,3}"', r"[^é]*x",
                 r"(?:[α-ω]|[^\x00-\x7f])+y", r"(?:.|\n){2,4}", r"[a-z]*é|[^a]日", r"(?:[^\x00-\x7f]{2}|a)+b"]


def _walked_wide_target(dfa: LazyByteDFA, state: int) -> int:
    """The state every wide character leads to, walked through the DFA's
    rows (what LazyIndex did before the NFA read it), or -1."""
    from tokendfa.analysis.lazydfa import WIDE_SEQUENCES
    reached = set()
    for sequence in WIDE_SEQUENCES:
        current = {state}
        for lo, hi in sequence:
            current = {int(t) for at in current for t in dfa.row(at)[lo:hi + 1]}
        reached |= current
    return next(iter(reached)) if len(reached) == 1 and 0 not in reached else -1


@pytest.mark.parametrize("pattern", WIDE_PATTERNS)
def test_wide_target_read_off_the_nfa_is_the_dfa_walk(pattern):
    dfa = LazyByteDFA(pattern)
    dfa.explore()
    read = {state: dfa.wide_target(state) for state in range(1, dfa.num_states)}
    for state, target in read.items():
        if target is not None:
            assert (target if target != 0 else -1) == _walked_wide_target(dfa, state), (pattern, state)
    if "é" in pattern or "α" in pattern:  # classes that split a UTF-8 range: the walk decides
        assert any(target is None for target in read.values())
    else:  # the NFA read is used
        assert any(target is not None and target > 0 for target in read.values())


def test_lazy_dfa_successors_resolve_every_cell_asked():
    # Cells asked together are resolved state by state, a range at its first
    # cell: every cell asked, however many share a range, comes back resolved.
    dfa = LazyByteDFA(r"(?:ab|ac|[b-d]x|é)+y")
    states = [INITIAL_STATE, dfa.step(INITIAL_STATE, ord("a")), dfa.step(INITIAL_STATE, ord("b"))]
    order = np.random.default_rng(7).permutation(3 * 512)  # every byte of each state twice, shuffled
    asked_states = np.repeat(np.array(states), 512)[order]
    asked_bytes = np.tile(np.arange(256), 6)[order]
    found = dfa.successors(asked_states, asked_bytes)
    assert UNKNOWN not in found
    assert dfa.num_materialised == 1
    rows = {s: dfa.row(s) for s in states}
    assert np.array_equal(found, [rows[s][b] for s, b in zip(asked_states.tolist(), asked_bytes.tolist())])


def test_lazy_dfa_range_successors_resolve_only_the_range():
    # _wide_target follows every UTF-8 sequence through these: the cells of
    # the range get resolved (LazyIndex.advance reads them), nothing else.
    dfa = LazyByteDFA('"(?:[^"\\\\]|\\\\n)*"')
    inside = dfa.step(INITIAL_STATE, ord('"'))
    assert dfa.range_successors(inside, ord("a"), ord("c")) == {inside}
    row = dfa.table[inside]
    assert (row[ord("a"):ord("c") + 1] == inside).all()
    assert row[ord('"')] == UNKNOWN and row[ord("\\")] == UNKNOWN and row[0xE4] == UNKNOWN
    lead = dfa.step(inside, 0xE4)  # a character of three bytes
    middle = dfa.range_successors(lead, 0x90, 0x9F)  # inside the cut's range 80-BF: all of it resolved
    assert len(middle) == 1 and UNKNOWN not in middle and 0 not in middle
    assert (dfa.table[lead, 0x80:0xC0] == next(iter(middle))).all()
    assert (dfa.table[lead, :0x80] == 0).all()  # outside the cut: dead
    assert dfa.range_successors(next(iter(middle)), 0x80, 0xBF) == {inside}
    assert dfa.num_materialised == 1  # cells only, no whole row
    assert dfa.range_successors(inside, 0x22, 0x23) == {int(dfa.row(inside)[0x22]), inside}
    eager = byte_dfa_from_regex('"(?:[^"\\\\]|\\\\n)*"')
    assert np.array_equal(canonical_byte_dfa(*dfa.explore()).transitions, eager.transitions)


# One definition called from several places: its states recur on several
# stacks, which share cuts and closures (LazyByteDFA._cut_of, _local_closure);
# key alternatives that share first letters give cuts of equal ranges, and
# overlapping classes cuts in parts.
SHAPES = {P: r'"(?:[^"\\]|\\["n])*"', Q: r"(?:ab|ac|b[a-z]|[a-c]x)+",
          R: rf"\[{P}(?:,{P})*\]|{Q}"}


@pytest.mark.parametrize("pattern", [rf"\{{{P}:{P},{P}:{R}\}}", rf"{R}-{R}|{Q}{P}", rf"(?:{P}|{Q})+"])
def test_states_of_one_definition_on_many_stacks_are_the_eager_dfa(pattern, native):
    explored = explored_like_eager(pattern, SHAPES)
    assert explored.num_stacks > 2  # the definitions were called from several places


# A definition reached under many return stacks: an object's values, an
# array's items and a nested object all call the same string and record.
MANY_STACKS = {P: r'"(?:[^"\\]|\\["n])*"', Q: rf"\{{(?:{P}:(?:{P}|[0-9]+)(?:,{P}:(?:{P}|[0-9]+))*)?\}}",
               R: rf"\[(?:{Q}(?:,{Q})*)?\]"}


@pytest.mark.skipif(not lazydfa_module.NATIVE_CORE, reason="the compiled core is not built here (or TOKENDFA_NATIVE=0)")
def test_the_store_publishes_a_kernel_only_when_python_needs_it(monkeypatch):
    """The native store is the record of the states and stacks it finds: its
    walks publish the count, not the kernels or stacks, and a state Python
    discovers goes into the containers alone. The core over the Python containers
    stepping to a kernel the store found and has not published gets the
    store's id (nothing published), never a second id for it; a
    kernel read past the published ones (a cut, a wide target) is made from
    the store, nothing published; ids and kernels are the Python
    reference's."""
    core = lazydfa_module._lazycore
    pattern = rf"\{{{P}:{Q},{P}:{R},{P}:{P}\}}"
    native, twin = LazyByteDFA(pattern, definitions=MANY_STACKS), LazyByteDFA(pattern, definitions=MANY_STACKS)
    monkeypatch.setattr(lazydfa_module, "_lazycore", None)
    reference = LazyByteDFA(pattern, definitions=MANY_STACKS)
    rng = np.random.default_rng(7)
    for _ in range(1500):
        state = int(rng.integers(1, reference.num_states))
        byte = int(rng.choice([ord(c) for c in '"{}[],:\\n0a9x'] + [int(rng.integers(0, 256))]))
        for dfa in (native, twin, reference):
            dfa.partial_row(state, 1 << byte)
    count = reference.num_states
    assert native.num_states == twin.num_states == count
    published = core.store_info(native._core_context)["published"]
    assert published == len(native._kernels) < count - 10, (published, count)
    # a state Python discovered (at a definition's first call) went into the
    # containers alone, not after every state the store found before it
    assert sorted(native._kernels) != list(range(published)), sorted(native._kernels)
    # the store's call stacks wait for a reader too
    assert len(native._stack_parent) < native.num_stacks == reference.num_stacks
    state, config = next((s, c) for s, kernel in reference._kernels.items()
                         if s not in native._kernels and len(kernel) == 1 and (c := next(iter(kernel))) not in native._steps)
    with native.resolving():
        assert core.step(native._core_context, config, 0) == state
    info = core.store_info(native._core_context)
    assert native.num_states == count and info["store_ids"] == 1 and info["published"] == published, info
    native._publish()
    assert native._kernels == reference._kernels
    assert all(native._ids[kernel] == s for s, kernel in reference._kernels.items())
    assert (native._stack_parent, native._stack_top, native._stack_depth, native._pushes) == (
        reference._stack_parent, reference._stack_top, reference._stack_depth, reference._pushes)
    published = len(twin._kernels)
    assert published < count and count - 1 not in twin._kernels and count - 2 not in twin._kernels
    with twin.resolving():
        cut = core.cut_of(twin._core_context, count - 1)
        assert core.wide_targets(twin._core_context, count - 2) == reference._wide_targets(count - 2)
    assert tuple(map(list, cut[:3])) == tuple(map(list, reference._cut_of(count - 1)[:3]))
    info = core.store_info(twin._core_context)
    assert info["published"] == len(twin._kernels) == published and info["kernels_lent"] >= 2, info
    twin._publish()
    assert twin._kernels == reference._kernels and twin._ids == reference._ids


@pytest.mark.skipif(not lazydfa_module.NATIVE_CORE, reason="the compiled core is not built here (or TOKENDFA_NATIVE=0)")
@pytest.mark.parametrize("pattern", [rf"\{{{P}:{Q},{P}:{R},{P}:{P}\}}", rf"(?:{Q}|{R})(?:,(?:{Q}|{R}))*"])
def test_states_under_many_stacks_are_numbered_as_the_reference(pattern, monkeypatch):
    """The native core resolves the same cells in the same order to the same
    states as the Python reference, state for state (ids, kernels, table
    cells), where one definition's states recur under many stacks: cells one
    range at a time from seeded random states (the order a walk resolves
    them in), then whole rows breadth-first."""
    native = LazyByteDFA(pattern, definitions=MANY_STACKS)
    monkeypatch.setattr(lazydfa_module, "_lazycore", None)
    reference = LazyByteDFA(pattern, definitions=MANY_STACKS)
    assert native._core_context is not None and reference._core_context is None
    rng = np.random.default_rng(7)
    for _ in range(1500):
        state = int(rng.integers(1, reference.num_states))
        byte = int(rng.choice([ord(c) for c in '"{}[],:\\n0a9x'] + [int(rng.integers(0, 256))]))
        for dfa in (native, reference):
            dfa.partial_row(state, 1 << byte)
        assert native.num_states == reference.num_states
    count = reference.num_states
    native._publish()
    assert native._kernels == reference._kernels
    np.testing.assert_array_equal(native.table[:count], reference.table[:count])  # UNKNOWN cells alike
    assert native.num_stacks >= 6  # the definitions were reached under several stacks
    state = 1
    while state < reference.num_states and reference.num_states < 3000:
        end = reference.num_states
        for dfa in (native, reference):
            dfa.materialise(range(state, end))
        state = end
    count = reference.num_states
    native._publish()
    assert native.num_states == count and native._kernels == reference._kernels
    np.testing.assert_array_equal(native.table[:count], reference.table[:count])
    np.testing.assert_array_equal(native.finals[:count], reference.finals[:count])
    # most states are a fragment's states seen before under another stack
    stride, first = reference._stride, {}
    again = sum(first.setdefault(frozenset(c % stride for c in kernel), stacks) != stacks
                for state, kernel in reference._kernels.items() if state >= 1
                and len(stacks := {c // stride for c in kernel}) == 1)
    assert again > count // 3, (again, count)


# A $ref'd record under several properties, an array's items and a recursive
# $ref: its states recur under many return stacks.
REFERENCED_RECORD = {
    "definitions": {"item": {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}},
                             "required": ["id"]}},
    "type": "object",
    "properties": {"a": {"$ref": "#/definitions/item"}, "b": {"$ref": "#/definitions/item"},
                   "list": {"type": "array", "items": {"$ref": "#/definitions/item"}}, "next": {"$ref": "#"}}}


def test_rows_of_a_referenced_definition_under_many_stacks_are_the_reference(native):
    """Cold token rows of states of one definition reached under many stacks
    (properties, array items, recursion) are the eager index's, unrolled
    deeper than the text goes (the brute-force build of these ~18k states
    takes minutes; the eager build is held to it on smaller cases)."""
    vocab = cached_vocabulary("qwen2.5")
    index = Index.from_schema(REFERENCED_RECORD, vocab, lazy=True)
    reference = Index.from_schema(REFERENCED_RECORD, vocab, lazy=False, max_recursion_depth=5)
    assert not isinstance(reference, LazyIndex)
    text = ('{"a":{"id":"x","n":1},"list":[{"id":"y"},{"id":"z","n":22}],'
            '"next":{"b":{"id":"w\\u00e9"},"next":{"a":{"id":"v"},"list":[]}}}')
    state, expected = index.initial_state, reference.initial_state
    for token in vocab.encode(text):
        np.testing.assert_array_equal(index.get_mask(state), reference.get_mask(expected))
        state, expected = index.advance(state, token), reference.advance(expected, token)
    assert index.is_final(state) and reference.is_final(expected)
    assert index.byte_dfa.num_stacks > 6


def test_lazy_dfa_bound():
    dfa = LazyByteDFA(r"(a|b)*a(a|b){24}", max_states=1000)
    with pytest.raises(BuildLimitError) as caught:
        dfa.explore()
    assert caught.value.reached == 1001


# --- the lazy index against the eager one -----------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_lazy_index_serves_the_eager_index_toy(case, toy_vocab, native):
    try:
        eager = Index.from_regex(case.pattern, toy_vocab, lazy=False)
    except VocabularyCoverageError:
        with pytest.raises(VocabularyCoverageError):
            Index.from_regex(case.pattern, toy_vocab, lazy=True)
        return
    lazy = Index.from_regex(case.pattern, toy_vocab, lazy=True)
    assert isinstance(lazy, LazyIndex)
    lockstep(lazy, eager)
    assert lazy.complete().arrays.equals(eager.arrays)


@pytest.mark.parametrize("reserved", [2, 7])
def test_lazy_table_past_its_reserved_rows_grows_and_serves_the_same(reserved, toy_vocab, native, monkeypatch):
    """The byte table reserves its rows (65,536 by default) and sets each one
    when its state is discovered; past the reservation it doubles, inside
    the walks that discover states. With a reservation of a few rows every
    state past it comes through the growing path, and the rows, the
    explored automaton and the completed index are still the eager ones."""
    monkeypatch.setattr(lazydfa_module, "_RESERVED_ROWS", reserved)
    compiled = regex_from_schema(PERSON, any_depth=2, state_budget=None)
    dfa = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)
    assert len(dfa.table) == reserved
    transitions, finals = dfa.explore()
    assert len(dfa.table) >= dfa.num_states > 8 * reserved  # it grew, several times
    explored = canonical_byte_dfa(transitions, finals)
    eager_dfa = byte_dfa_from_regex(compiled.pattern, definitions=compiled.definitions)
    assert np.array_equal(explored.transitions, eager_dfa.transitions)
    with pytest.raises(IndexError, match="not discovered"):
        dfa.step(dfa.num_states, ord("a"))  # a row past the count is undefined, not read
    case = next(c for c in CASES if c.name == "url")  # 79 states
    lazy, eager = Index.from_regex(case.pattern, toy_vocab, lazy=True), Index.from_regex(case.pattern, toy_vocab, lazy=False)
    lockstep(lazy, eager)
    assert lazy.complete().arrays.equals(eager.arrays)


class _RefusingTable:
    """A table memory that never grows in place: every growth copies."""

    def __init__(self, memory) -> None:
        self.memory = memory

    def grow(self, rows: int) -> bool:
        return False


@pytest.mark.parametrize("in_place", [True, False])
def test_a_table_grown_many_times_keeps_its_rows(in_place, monkeypatch):
    """With the compiled core the table's memory (_lazycore.Table) grows in
    place: a table of a few reserved rows, grown many times while rows are
    materialised, keeps one address (nothing copied; an array taken before
    a growth reads the same rows as the new one) and ends with the very
    states and rows the Python reference discovers. Where the memory cannot
    grow in place, each growth copies into a new Table, with the same rows."""
    if lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    monkeypatch.setattr(lazydfa_module, "_RESERVED_ROWS", 2)
    if not in_place:
        made = lazydfa_module._reserved_table
        monkeypatch.setattr(lazydfa_module, "_reserved_table",
                            lambda rows, most: (lambda t, m: (t, _RefusingTable(m)))(*made(rows, most)))
    compiled = regex_from_schema(PERSON, any_depth=2, state_budget=None)
    dfa = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)
    taken, state = [dfa.table], INITIAL_STATE
    while state < dfa.num_states:  # explore()'s waves, each table kept as a reader would
        end = dfa.num_states
        dfa.materialise(range(state, end))
        state = end
        if dfa.table is not taken[-1]:
            taken.append(dfa.table)
    table, finals = dfa.table[:dfa.num_states], dfa.finals[:dfa.num_states]
    assert len(taken) > 6  # it grew, many times
    addresses = {old.ctypes.data for old in taken}
    assert len(addresses) == (1 if in_place else len(taken))
    for old in taken:
        rows = min(len(old), dfa.num_states)
        if in_place:
            assert np.array_equal(old[:rows], table[:rows])  # the same memory, longer
        else:  # a copy: every cell resolved before the growth, the same
            resolved = old[:rows] != UNKNOWN
            assert np.array_equal(old[:rows][resolved], table[:rows][resolved])
    monkeypatch.setattr(lazydfa_module, "_lazycore", None)  # the reference
    reference = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)
    transitions, reference_finals = reference.explore()
    assert np.array_equal(table, transitions)
    assert np.array_equal(finals, reference_finals)


def test_token_liveness_when_bytes_are_not_all_tokens(toy_vocab):
    # "ab" keeps the bytes alive (ab3c) but no token spells "3": the eager
    # index refuses it, and so must the lazy one.
    lazy = Index.from_regex(r"(ab3|a)c", toy_vocab, lazy=True)
    eager = Index.from_regex(r"(ab3|a)c", toy_vocab, lazy=False)
    assert lazy.is_allowed(lazy.initial_state, TOKEN[b"a"])
    assert not lazy.is_allowed(lazy.initial_state, TOKEN[b"ab"])
    lockstep(lazy, eager)


def test_serving_errors_eos_and_buffers(toy_vocab):
    lazy = Index.from_regex(r"a(\.[0-9]+)?", toy_vocab, lazy=True)
    start = lazy.initial_state
    with pytest.raises(TokenNotAllowedError, match="EOS token 11 is not allowed"):
        lazy.advance(start, TOY_EOS)
    with pytest.raises(TokenNotAllowedError, match="b'x'"):
        lazy.advance(start, TOKEN[b"x"])
    with pytest.raises(TokenNotAllowedError, match="special token"):
        lazy.advance(start, 17)
    with pytest.raises(InvalidStateError, match="token id 30 is out of range"):
        lazy.advance(start, 30)
    with pytest.raises(InvalidStateError):
        lazy.get_mask(0)  # the dead state is never served
    with pytest.raises(InvalidStateError):
        lazy.get_mask(10_000)
    after_a = lazy.advance(start, TOKEN[b"a"])
    assert lazy.is_final(after_a) and lazy.advance(after_a, TOY_EOS) == after_a
    assert TOY_EOS in lazy.get_tokens(after_a).tolist()
    assert lazy.forced_tokens(after_a).size == 0
    out = np.full((2, 3), -1, dtype=np.int32)
    lazy.write_mask_into(after_a, out, row=1)
    assert np.array_equal(out[1, :1].view(np.uint32), lazy.get_mask(after_a))
    assert (out[1, 1:] == 0).all() and (out[0] == -1).all()
    guide = Guide(lazy)
    guide.advance(TOKEN[b"a"])
    guide.advance(TOY_EOS)
    assert guide.is_finished() and guide.get_tokens().size == 0


def test_the_default_index_is_lazy_and_lazy_false_is_the_eager_build(toy_vocab, tmp_path):
    regex = Index.from_regex(r"[a-c]{2,4}x?", toy_vocab)
    schema = Index.from_schema({"type": "integer", "maximum": 99}, toy_vocab)
    assert isinstance(regex, LazyIndex) and isinstance(schema, LazyIndex)
    assert regex.num_served_states == 0  # nothing computed before it is asked for
    for name in ("arrays", "num_states", "final_states", "num_transitions", "nbytes"):
        with pytest.raises(AttributeError, match=f"no '{name}' until it is complete.*lazy=False"):
            getattr(regex, name)  # code written for the eager default is told what to do
        assert not hasattr(regex, name)
    with pytest.raises(AttributeError, match="'LazyIndex' object has no attribute 'no_such_name'"):
        regex.no_such_name
    eager = Index.from_regex(r"[a-c]{2,4}x?", toy_vocab, lazy=False)
    assert type(eager) is Index
    assert regex.complete().arrays.equals(eager.arrays)
    # a file always holds the whole index
    Index.from_regex(r"[a-c]{2,4}x?", toy_vocab).save(tmp_path / "default.tdfa")
    assert Index.load(tmp_path / "default.tdfa", toy_vocab).arrays.equals(eager.arrays)
    assert schema.complete().arrays.equals(
        Index.from_schema({"type": "integer", "maximum": 99}, toy_vocab, lazy=False).arrays)


def _lockstep_through_the_map(lazy, completed, vocab, walks: int, steps: int, seed: int = 0) -> int:
    """Random token walks through ``lazy``, checking at every state that
    ``completed_state`` gives the completed index's state with the same mask,
    finality, and successors; returns the number of steps checked."""
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(walks):
        state = lazy.initial_state
        assert lazy.completed_state(state) == completed.initial_state
        for _ in range(steps):
            mapped = lazy.completed_state(state)
            assert np.array_equal(lazy.get_mask(state), completed.get_mask(mapped))
            assert lazy.is_final(state) == completed.is_final(mapped)
            allowed = [t for t in lazy.get_tokens(state).tolist() if t not in vocab.eos_token_ids]
            if not allowed:
                break
            token = int(rng.choice(allowed))
            state = lazy.advance(state, token)
            assert lazy.completed_state(state) == completed.advance(mapped, token)
            checked += 1
    return checked


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("number", "url", "json_string", "iso_date")],
                         ids=lambda c: c.name)
def test_lazy_states_map_onto_the_completed_index_toy(case, toy_vocab):
    lazy = Index.from_regex(case.pattern, toy_vocab)
    first = int(lazy.get_tokens(lazy.initial_state)[0])
    before = lazy.advance(lazy.initial_state, first)
    completed = lazy.complete()
    assert lazy.advance(lazy.initial_state, first) == before  # served ids stay what they were
    assert _lockstep_through_the_map(lazy, completed, toy_vocab, walks=20, steps=30) > 20
    assert lazy.state_map()[0] == -1
    with pytest.raises(InvalidStateError):
        lazy.completed_state(0)


def test_guide_over_a_lazy_index_goes_on_across_completion_qwen():
    vocab = cached_vocabulary("qwen2.5")
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["name", "n"], "additionalProperties": False}
    lazy = Index.from_schema(schema, vocab)
    guide = Guide(lazy)
    tokens = vocab.encode('{"name":"Ada","n":42}')
    for token in tokens[:3]:
        guide.advance(token)
    completed = lazy.complete()
    moved = guide.completed()
    assert moved.index is completed and moved.num_tokens == 3
    for token in tokens[3:]:
        assert np.array_equal(guide.get_mask(), moved.get_mask())
        assert lazy.completed_state(guide.advance(token)) == moved.advance(token)
    assert guide.can_end() and moved.can_end()
    moved.rollback(len(tokens) - 1)  # the history came across too
    assert moved.num_tokens == 1 and moved.state == lazy.completed_state(lazy.advance(lazy.initial_state, tokens[0]))
    assert _lockstep_through_the_map(lazy, completed, vocab, walks=5, steps=25) > 10


def test_completion_explores_the_served_automaton_without_compiling_again(toy_vocab, monkeypatch):
    """complete() minimises the lazy automaton explored from where serving
    left it: the pattern is not compiled again, and the states materialised
    while serving are not computed again."""
    from tokendfa.builder import pipeline

    lazy = Index.from_regex(cached_case("url"), toy_vocab)
    guide = Guide(lazy)
    for token in toy_vocab.encode("ab.abc.xa"):
        guide.advance(token)
    served = lazy.byte_dfa.num_states

    def compiled_again(*args, **kwargs):
        raise AssertionError("the pattern was compiled again")

    monkeypatch.setattr(pipeline, "byte_dfa_from_regex", compiled_again)
    dfa = lazy.byte_dfa
    rows_before = {state for state in range(served) if dfa._materialised[state]}
    computed = []
    compute_row = dfa._compute_row
    monkeypatch.setattr(dfa, "_compute_row", lambda state: (computed.append(state), compute_row(state))[1])
    completed = lazy.complete()
    assert rows_before and computed and not rows_before & set(computed)
    monkeypatch.undo()
    assert completed.arrays.equals(Index.from_regex(cached_case("url"), toy_vocab, lazy=False).arrays)


def test_completing_a_lazy_schema_past_its_bound_says_what_to_do(tmp_path):
    """The default lazy schema index nests free values 32 levels, which an
    open object's completion cannot hold: save() says to build the whole
    index with lazy=False (as tokendfa build does)."""
    vocab = cached_vocabulary("qwen2.5")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    lazy = Index.from_schema(schema, vocab, max_states=2000)
    with pytest.raises(BuildLimitError, match="lazy=False"):
        lazy.save(tmp_path / "open.tdfa")
    assert not (tmp_path / "open.tdfa").exists()
    Index.from_schema(schema, vocab, lazy=False).save(tmp_path / "open.tdfa")  # the advice works
    with pytest.raises(BuildLimitError) as caught:  # a chosen depth: nothing to advise
        Index.from_schema(schema, vocab, any_depth=30, max_states=2000).complete()
    assert "lazy=False" not in str(caught.value)


def test_save_writes_the_completed_index(toy_vocab, tmp_path):
    lazy = Index.from_regex(r"[a-c]{2,4}x?", toy_vocab, lazy=True)
    lazy.save(tmp_path / "lazy.tdfa")
    loaded = Index.load(tmp_path / "lazy.tdfa", toy_vocab)
    assert loaded.arrays.equals(Index.from_regex(r"[a-c]{2,4}x?", toy_vocab, lazy=False).arrays)


def test_background_completion(toy_vocab):
    lazy = Index.from_regex(cached_case("url"), toy_vocab, lazy=True)
    lazy.start_completion()
    assert lazy.wait_completion(timeout=60)
    served = lazy.num_served_states
    eager = Index.from_regex(cached_case("url"), toy_vocab, lazy=False)
    assert served >= eager.num_states  # lazy states are not minimal
    lockstep(lazy, eager)
    assert lazy.num_served_states == served  # nothing was left to compute


def cached_case(name: str) -> str:
    return next(c.pattern for c in CASES if c.name == name)


# --- real vocabularies --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["number", "iso_date", "email", "key_list", "json_string"])
def test_lazy_index_serves_the_eager_index_qwen(name, native):
    vocab = cached_vocabulary("qwen2.5")
    pattern = cached_case(name)
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    eager = Index.from_regex(pattern, vocab, lazy=False)
    lockstep(lazy, eager, max_pairs=60)
    assert lazy.complete().arrays.equals(eager.arrays)


# Patterns whose cold rows take each shortcut of LazyIndex._raw_row on Qwen:
# a state that loops on most characters (cached loop rows, resume points for
# long tokens), one whose first character leads into such a loop (a key
# prefix, a string after its first character), a narrow loop (its rest is
# most of the vocabulary), escapes inside a loop, and a counted class.
SHORTCUT_PATTERNS = [
    r'\{"(?:name|nick|note)":"[^"\\\x00-\x1f]*","(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])+":[0-9]+\}',
    r'"[^"\\\x00-\x1f]{2}[^"\\\x00-\x1f]*"(?:,"[a-z]+")*',
    r'[a-z]+(?:-[a-z0-9]+)*\.json',
    r'"[ -~]{3,12}"',
    # counted classes: the chain rows (ASCII; JSON string characters, wide and
    # escaped; a count that ends in a loop)
    r'I[0-9a-f]{40}"',
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){5,9}"',
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){11,}"',
    # longer than Qwen's longest token of string characters (128): the whole chain
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,150}"',
    # wide characters whose NFA edges cut a UTF-8 sequence's range: each link's wide
    # target is the DFA walk's (the chain's ChainEnd.ASK)
    '"(?:[a-z]|[\u0080-\u00bf]{1,1}|[\u00c0-\U0010ffff]){0,150}"',
]


def test_compiled_modules_are_built():
    """The package builds its C walk and automaton core wherever a compiler
    is (CI included): an install that fell back to Python silently would
    serve slower rows."""
    if os.environ.get("TOKENDFA_NATIVE") == "0":
        assert not lazy_module.NATIVE_WALK and not lazydfa_module.NATIVE_CORE and lazy_tables._classruns is None
    else:
        assert lazy_module.NATIVE_WALK, "tokendfa.lazy._cwalk did not build"
        assert lazydfa_module.NATIVE_CORE, "tokendfa.analysis._lazycore did not build"
        assert lazy_tables._classruns is not None, "tokendfa.lazy._classruns did not build"


def test_native_off_serves_the_same_masks_in_a_fresh_process():
    """``TOKENDFA_NATIVE=0`` loads neither compiled module, and a lazy index
    then serves what the eager one does (a fresh interpreter: the modules
    are chosen at import)."""
    script = textwrap.dedent("""
        from tokendfa import Index, Vocabulary
        from tokendfa.analysis import lazydfa
        import tokendfa.lazy as lazy
        assert not lazydfa.NATIVE_CORE and not lazy.NATIVE_WALK
        tokens = [bytes([b]) for b in range(128)] + [b'"a', b'",', b'bc"', b'ab', None]
        vocab = Vocabulary(tokens, len(tokens) - 1)
        pattern = '"[a-c ]{0,6}",?'
        lazy_index, eager = Index.from_regex(pattern, vocab, lazy=True), Index.from_regex(pattern, vocab, lazy=False)
        assert lazy_index.complete().arrays.equals(eager.arrays)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TOKENDFA_NATIVE": "0"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("bound", ["count", "bytes"])
def test_walk_plans_are_bounded_and_rows_are_the_same_without_them(bound, monkeypatch, native):
    """A vocabulary keeps at most _PLAN_CACHE_SIZE walk plans, in at most
    _PLAN_CACHE_BYTES, and none of more than _PLAN_MAX_TOKENS tokens (a row
    whose every byte is live would keep megabytes); rows whose plan was
    dropped or never kept are the eager index's all the same."""
    if bound == "count":
        monkeypatch.setattr(lazy_plans, "_PLAN_CACHE_SIZE", 2)
        monkeypatch.setattr(lazy_plans, "_PLAN_MAX_TOKENS", 3)
    else:
        monkeypatch.setattr(lazy_plans, "_PLAN_CACHE_BYTES", 400)
    # every row with no loop makes its plan (none walks its groups in place instead)
    from tokendfa.lazy import index as lazy_index_module
    monkeypatch.setattr(lazy_index_module, "_SPAN_MAX_RANGES", -1)
    from tokendfa import Vocabulary
    tokens = [bytes([b]) for b in b'abcdxyz"'] + [b"ab", b"abc", b"xy", b"zz", b'"a', b'c"', None]
    vocab = Vocabulary(tokens, eos_token_ids=len(tokens) - 1)
    pattern = r'"(ab|cd)*x[yz]{1,3}"|[a-d]+z|xyz'
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    assert lockstep(lazy, Index.from_regex(pattern, vocab, lazy=False)) >= 8
    plans = lazy_module.vocabulary_tables(vocab).walk_plans
    if bound == "count":
        assert 0 < len(plans) <= 2
        assert all(len(plan.tokens) <= 3 for plan in plans.values())
    else:
        held = [lazy_plans._plan_bytes(plan) for plan in plans.values()]
        assert 0 < sum(held) <= 400 and len(held) < 8, held


def test_a_plan_read_since_it_was_made_outlives_older_plans_not_read(monkeypatch):
    """Past its bound a plan cache drops the oldest plan not read since it
    was made (or since it was last passed over): the plans prepare() makes
    stay while schemas keep reading them."""
    monkeypatch.setattr(lazy_plans, "_PLAN_CACHE_SIZE", 3)
    cache = lazy_plans._PlanCache()

    class Plan:   # what the cache reads of a plan: its tokens and its arrays' bytes
        def __init__(self):
            self.tokens = np.zeros(1, dtype=np.int64)

    plans = {key: cache.remember(key, Plan()) for key in "abc"}
    assert cache.get("a") is plans["a"]          # read: "b" is now the first to go
    cache.remember("d", Plan())
    assert cache.get("b") is None and cache.get("a") is plans["a"] and len(cache) == 3
    plans["d"] = cache.get("d")                  # "a" and "d" read, "c" never
    cache.remember("e", Plan())
    assert cache.get("c") is None and cache.get("a") is plans["a"] and cache.get("d") is plans["d"]
    for key in "fgh":                            # every plan read: one pass, then the oldest goes
        for kept in list(cache._plans):
            cache.get(kept)
        plans[key] = cache.remember(key, Plan())
        assert len(cache) == 3 and cache.get(key) is plans[key]


def test_a_loop_entry_read_since_it_was_made_outlives_older_entries_not_read():
    """The loop and chain rows' caches (tail sets, loop masks, class runs,
    chain masks) drop, past their size, the oldest entry not read since it
    was made or last passed over: the JSON string's entries, made ahead and
    read by every schema, stay while schemas with loop sets of their own
    come and go (they were dropped oldest first)."""
    from tokendfa.lazy import tables as lazy_tables

    cache = lazy_tables._SecondChance()
    for key in "abc":
        lazy_tables._remember(cache, key, key.upper(), size=3)
    assert cache.get("a") == "A"                 # read: "b" is now the first to go
    lazy_tables._remember(cache, "d", "D", size=3)
    assert "b" not in cache and cache.get("a") == "A" and len(cache) == 3
    assert cache["d"] == "D"                     # "a" and "d" read, "c" never
    lazy_tables._remember(cache, "e", "E", size=3)
    assert "c" not in cache and list(cache) == ["a", "d", "e"]
    for key in "fgh":                            # every entry read: one pass, then the oldest goes
        for kept in list(cache):
            cache.get(kept)
        lazy_tables._remember(cache, key, key.upper(), size=3)
        assert len(cache) == 3 and cache[key] == key.upper()
    assert cache.get("zz", 5) == 5 and "zz" not in cache.read
    cache.clear()
    assert not cache and not cache.read
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    for name in ("tail_sets", "last_leaving", "loop_masks", "loop_bits", "class_runs", "chain_masks"):
        assert isinstance(getattr(tables, name), lazy_tables._SecondChance), name


def test_prepare_leaves_the_first_schema_no_table_to_make(monkeypatch):
    """Vocabulary.prepare() makes the lazy engine's per-vocabulary tables
    (through the preparer the package registers), so a prepared process's
    first schema makes none: its first mask and walk never call the makers."""
    qwen = cached_vocabulary("qwen2.5")
    vocab = Vocabulary(qwen.tokens, qwen.eos_token_ids, name="qwen2.5 copy")  # a fresh object: nothing made yet
    assert not lazy_module.tables_ready(vocab)
    vocab.prepare()
    assert lazy_module.tables_ready(vocab)
    tables = lazy_module.vocabulary_tables(vocab)
    tail_sets, class_runs = set(tables.tail_sets), set(tables.class_runs)

    def made_again(*args):
        raise AssertionError("a per-vocabulary table was made after prepare()")

    monkeypatch.setattr(lazy_tables, "_vocabulary_tables", made_again)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "code": {"type": "string", "maxLength": 12},
                                               "n": {"type": "integer"}}}
    index = Index.from_schema(schema, vocab)
    guide = Guide(index)
    for token in vocab.encode('{"name":"Ada Lovelace","code":"x1","n":42}'):
        guide.get_mask()
        guide.advance(token)
    assert guide.can_end()
    assert set(tables.tail_sets) == tail_sets and set(tables.class_runs) == class_runs


def test_lazy_tables_come_with_the_json_string_rows_made():
    """A vocabulary's lazy tables are made with what any schema's strings
    need (a free string's tail set and loop mask, a counted string's class
    runs), so no fresh process pays them inside a mask; a lazy index of a
    string with maxLength on Qwen finds them there and adds no class runs."""
    vocab = cached_vocabulary("qwen2.5")
    tables = lazy_module.vocabulary_tables(vocab)
    key = json_string_chain(tables).key
    assert tables.tail_sets[key] is not None and key in tables.class_runs
    assert any(loop_key == key for _, loop_key in tables.loop_masks)
    runs_before = set(tables.class_runs)
    index = Index.from_schema({"type": "string", "maxLength": 300}, vocab, lazy=True)
    guide = Guide(index)
    for token in vocab.encode('"hello world, this is a string"'):
        guide.get_mask()
        guide.advance(token)
    assert guide.is_finished()
    assert index._chain_links  # the rows inside the string were chain rows
    assert set(tables.class_runs) == runs_before


def test_compiled_class_runs_are_the_numpy_ones(monkeypatch):
    """The per-vocabulary tables of a counted class, made whole in C
    (_classruns.class_runs) and with the runs token by token in C
    (_cwalk.leading_runs), are array for array what the numpy passes over
    the byte columns make, on Qwen's 151k tokens, for ASCII classes (eight
    bytes at a time in C, _classruns.c's ascii_runs, with and without the
    tail bytes) and for classes with every wide character; bad spellings
    are refused by name."""
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    classruns = pytest.importorskip("tokendfa.lazy._classruns")
    vocab = cached_vocabulary("qwen2.5")
    classes = []
    printable = "".join(map(chr, range(0x20, 0x7F)))
    for chars, wide in [("0123456789abcdef", False), ("abcdefghijklmnopqrstuvwxyz ", False),
                        (printable.replace('"', "").replace("\\", "").replace("~", ""), False), ("", False),
                        ("".join(map(chr, range(0x20, 0x7F))).replace('"', "").replace("\\", ""), True),
                        ("", True)]:
        ascii_bytes = np.zeros(128, dtype=bool)
        ascii_bytes[[ord(c) for c in chars]] = True
        classes.append(lazy_tables._class_key(ascii_bytes, wide))

    def runs_of(compiled: bool, whole: bool = False):
        compiled_walk(monkeypatch, cwalk if compiled else None)
        monkeypatch.setattr(lazy_tables, "_classruns", classruns if whole else None)
        tables = lazy_tables._vocabulary_tables(vocab)  # fresh caches
        return [lazy_tables._class_runs(tables, key) for key in classes]

    numpy_runs = runs_of(False)
    for made in (runs_of(True), runs_of(True, whole=True)):
        for ours, theirs in zip(made, numpy_runs):
            for name in lazy_tables._ClassRuns.__dataclass_fields__:
                mine, expected = getattr(ours, name), getattr(theirs, name)
                assert mine.dtype == expected.dtype and np.array_equal(mine, expected), name
    tables = lazy_tables._vocabulary_tables(vocab)
    for key, theirs in zip(classes, numpy_runs):  # without the tail bytes: every token's run read
        inside = lazy_tables._loop_bytes(key).view(np.uint8)
        parts = classruns.class_runs(tables.spellings, tables.spelling_offsets, tables.first_char, inside, key[2])
        for at, (part, name) in enumerate(zip(parts, lazy_tables._ClassRuns.__dataclass_fields__)):
            mine = np.frombuffer(part, dtype=np.int16 if at < 2 else np.int64)
            assert np.array_equal(mine, getattr(theirs, name)), name
    with pytest.raises(ValueError, match="256 flags"):
        classruns.class_runs(np.zeros(1, np.uint8), np.zeros(2, np.int64), np.zeros(1, np.int8),
                             np.zeros(3, np.uint8), True)
    with pytest.raises(IndexError, match="outside the spellings"):
        classruns.class_runs(np.zeros(1, np.uint8), np.array([0, 2]), np.zeros(1, np.int8),
                             np.zeros(256, np.uint8), True)
    with pytest.raises(ValueError, match="a tail array"):
        classruns.class_runs(np.zeros(1, np.uint8), np.array([0, 1]), np.zeros(1, np.int8),
                             np.zeros(256, np.uint8), False, np.zeros(2, np.uint64), np.zeros(1, np.uint64),
                             np.zeros(1, np.uint8))
    with pytest.raises(ValueError, match="8-byte items"):
        classruns.class_runs(np.zeros(1, np.uint8), np.array([0, 1], np.int32), np.zeros(1, np.int8),
                             np.zeros(256, np.uint8), True)
    outputs = [np.zeros(1, np.int32) for _ in range(3)]
    with pytest.raises(ValueError, match="256 flags"):
        cwalk.leading_runs(np.zeros(1, np.uint8), np.zeros(2, np.int64), np.zeros(3, np.uint8), True, *outputs)
    with pytest.raises(IndexError, match="outside the spellings"):
        cwalk.leading_runs(np.zeros(1, np.uint8), np.array([0, 2]), np.zeros(256, np.uint8), True, *outputs)


@pytest.mark.parametrize("name", ["qwen2.5", "mistral-sp32k"])
def test_tail_sets_from_tail_bytes_are_the_last_leaving_ones(name, monkeypatch):
    """Whether a token's tail stays in a loop set, read off the per-token
    tail bytes (two ANDs), is exactly "its last byte outside the set comes
    before its first character ends", for 60 random sets (with and without
    every wide character), the empty set and the full ones, on a byte-level
    BPE and a SentencePiece vocabulary; the tail set built from it keeps
    those tokens and only those, and the compiled split (_cwalk.tail_split)
    and resume points (_cwalk.skips) make the numpy ones' arrays; the rest
    packed in one pass (_cwalk.tail_pack) is the rest packed token by token."""
    vocab = cached_vocabulary(name)
    tables = lazy_tables._vocabulary_tables(vocab)  # fresh caches
    everything = (1 << 64) - 1
    keys = [(0, 0, False), (0, 0, True), (everything, everything, False), (everything, everything, True)]
    rng = np.random.default_rng(13)
    for _ in range(60):
        keys.append(lazy_tables._class_key(rng.random(128) < rng.random(), bool(rng.random() < 0.5)))
    text = tables.first_char > 0
    for key in keys:
        inside = lazy_tables._inside_tail(tables, key)
        assert np.array_equal(inside, lazy_tables._last_leaving(tables, key) < tables.first_char), key
        assert not inside[~text].any()
    # a JSON string's characters: most text tokens, not the ones with a quote after the first character
    chain = json_string_chain(tables)
    key, string = chain.key, chain.first[:128]   # the class's ASCII characters
    inside = lazy_tables._inside_tail(tables, key)
    quoted = [t for t, data in enumerate(vocab.tokens) if data and b'"' in data[1:] and text[t]]
    assert quoted and not inside[quoted].any()
    tail = lazy_tables._tail_tokens(tables, key)
    members = np.flatnonzero(np.unpackbits(tail.mask.view(np.uint8), bitorder="little")[:vocab.size])
    assert np.array_equal(members, np.flatnonzero(inside))
    assert np.array_equal(np.sort(tail.rest), np.setdiff1d(tables.by_first_byte, members))
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    compared = packed_some = 0
    for key in keys[:20]:
        tables.tail_sets.clear()
        compiled = lazy_tables._tail_tokens(tables, key)
        compiled_walk(monkeypatch, None)
        tables.tail_sets.clear()
        numpy = lazy_tables._tail_tokens(tables, key)
        compiled_walk(monkeypatch, cwalk)
        assert (compiled is None) == (numpy is None), key
        if compiled is not None:
            compared += 1
            for field in lazy_tables._TailTokens.__dataclass_fields__:
                if field != "packing":   # made on use (_tail_packed), empty in both
                    assert np.array_equal(getattr(compiled, field), getattr(numpy, field)), (key, field)
            if len(compiled.rest) <= lazy_plans._PLAN_MAX_TOKENS:
                # the rest packed from the grouped spellings in one pass (_cwalk.tail_pack), as
                # packed token by token from the spellings, with common_prefixes' shared prefixes
                packed = lazy_tables._tail_packed(tables, compiled)
                expected = lazy_plans._packed(tables, compiled.rest, np.maximum(compiled.rest_skips, 1).astype(np.int64))
                shared = np.empty(len(compiled.rest), np.uint8)
                cwalk.common_prefixes(expected.data, expected.offsets, shared)
                assert np.array_equal(packed.data, expected.data), key
                assert np.array_equal(packed.offsets, expected.offsets) and packed.offsets.dtype == np.int32, key
                assert np.array_equal(packed.shared, shared), key
                packed_some += 1
    assert compared >= 3 and packed_some >= 1
    # the loop masks of the JSON string's set for first-byte sets of every size,
    # the compiled side (_cwalk.loop_bits) against the numpy one, and against
    # their definition: the tail set's tokens that start with a byte of the set
    for density in (0.02, 0.3, 0.7, 0.98):
        first = np.zeros(256, dtype=bool)
        first[:128] = string & (rng.random(128) < density)
        first[lazy_tables._LEAD_BYTES] = density > 0.5
        tables.loop_masks.clear()
        tables.loop_bits.clear()
        mask, rest = lazy_tables._loop_mask(tables, first, key, tail)
        compiled_walk(monkeypatch, None)
        tables.loop_masks.clear()
        tables.loop_bits.clear()
        numpy_mask, numpy_rest = lazy_tables._loop_mask(tables, first, key, tail)
        compiled_walk(monkeypatch, cwalk)
        assert np.array_equal(mask, numpy_mask) and np.array_equal(rest.tokens, numpy_rest.tokens)
        starting = first[tables.columns[0][members]] & (tables.lengths[members] > 0)
        expected = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab.size])
        assert np.array_equal(expected, members[starting]), density
    with pytest.raises(IndexError, match="group outside"):
        cwalk.group_bits(np.zeros(tables.num_words, np.uint32), tables.by_first_byte, tables.first_offsets,
                         np.array([256]))
    loop_bits_args = [tail.mask, tables.by_first_byte, tables.first_offsets, first.view(np.uint8)]
    with pytest.raises(IndexError, match="group outside"):
        cwalk.loop_bits(tail.mask, tables.by_first_byte[:100], tables.first_offsets, first.view(np.uint8))
    with pytest.raises(IndexError, match="outside the mask"):
        cwalk.loop_bits(tail.mask[:10], *loop_bits_args[1:])
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.loop_bits(*loop_bits_args[:3], first.view(np.uint8)[:255])
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.loop_bits(tail.mask, tables.by_first_byte, tables.first_offsets[:256], first.view(np.uint8))
    with pytest.raises(TypeError, match="4 arguments"):
        cwalk.loop_bits(tail.mask)
    arrays = [tables.tail_low, tables.tail_high, tables.tail_wide.view(np.uint8), tables.first_char,
              tables.by_first_byte, tables.first_offsets]
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.tail_split(*arrays, 0, 0, False, np.zeros(1, np.uint32), np.zeros(1, np.int64), np.zeros(257, np.int64))
    with pytest.raises(TypeError, match="12 arguments"):
        cwalk.tail_split(*arrays)


def test_compiled_wide_ends_are_the_python_ones():
    """Where every character of two or more bytes goes from an NFA state,
    compiled (_lazycore.nfa_wide_ends, over its own copy of the UTF-8
    sequences), is the Python method's answer for every NFA state of
    patterns whose wide characters loop, part ways, end in a call, or die;
    None (undecided) and empty (dead) included."""
    core = lazydfa_module._lazycore
    if core is None:
        pytest.skip("the compiled core is not built")
    assert core.wide_sequences() == lazydfa_module.WIDE_SEQUENCES
    compiled = regex_from_schema({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 300}, "tags": {"type": "array", "items": {"type": "string"}},
        "any": {}}}, any_depth=2, state_budget=None)
    cases = [(compiled.pattern, compiled.definitions),
             ("[\u0080-\u07ff]x|[\u0800-\U0010ffff]y", None),  # parts ways after the first byte
             ("(?:[^a]|\u00e9z)*", None),                           # a range's bytes part ways
             ("a[\u00e0-\u00ff]+b|c", None), ("abc", None)]
    kinds = set()
    for pattern, definitions in cases:
        dfa = LazyByteDFA(pattern, definitions=definitions)
        dfa._nfa.compile_everything()
        for q in range(len(dfa._nfa.eps)):
            theirs = LazyByteDFA._nfa_wide_ends(dfa, q)
            assert core.nfa_wide_ends(dfa._core_context, q) == theirs, (pattern[:40], q)
            kinds.add("undecided" if theirs is None else "some" if theirs else "dead")
    assert kinds == {"undecided", "some", "dead"}
    # NFA states the regex compiler does not make, appended to the last
    # automaton's tables (the lists its context holds): every sequence's first
    # range covered in part only (undecided), or whole but through a state with
    # an epsilon move, a call, a return or the final state (undecided), or
    # whole and plain (decided)
    eps, edges, calls, ends = dfa._nfa.eps, dfa._nfa.edges, dfa._nfa.calls, dfa._nfa.ends

    def state(own_edges=(), own_eps=(), own_calls=(), end=0) -> int:
        eps.append(tuple(own_eps))
        edges.append(tuple(x for edge in own_edges for x in edge))  # flat triples, as the NFA keeps them
        calls.append(tuple(own_calls))
        ends.append(end)
        return len(eps) - 1

    def wide_state(partial: bool, **inner) -> int:
        goal = state()
        firsts = []
        for sequence in lazydfa_module.WIDE_SEQUENCES:
            target = goal
            for lo, hi in reversed(sequence[1:]):
                target = state([(lo, hi, target)], **(inner if lo == sequence[1][0] else {}))
            lo, hi = sequence[0]
            firsts.append((lo, lo if partial else hi, target))
        return state(firsts)

    synthetic = [wide_state(False), wide_state(True), wide_state(False, own_eps=[1]),
                 wide_state(False, own_calls=[(0, 1)]), wide_state(False, end=1)]
    answers = [core.nfa_wide_ends(dfa._core_context, q) for q in synthetic]
    assert answers == [LazyByteDFA._nfa_wide_ends(dfa, q) for q in synthetic]
    assert answers[0] and answers[1:] == [None] * 4
    with pytest.raises(IndexError, match="outside the tables"):
        core.nfa_wide_ends(dfa._core_context, len(dfa._nfa.eps) + 5)


def test_compiled_core_refuses_edge_rows_not_flat_triples():
    """The NFA keeps a state's byte edges as one flat tuple of (lo, hi,
    target) triples, and a cut its ranges' starts and ends as bytes; the
    compiled core refuses a row of another length, a row of nested
    triples, or a cut of lists or of lengths that differ (a TypeError, no
    read past a row or a cut)."""
    core = lazydfa_module._lazycore
    if core is None:
        pytest.skip("the compiled core is not built")
    for bad in [(0x80, 0xBF), ((0x80, 0xBF, 1),)]:
        dfa = LazyByteDFA("ab")
        dfa._nfa.eps.append(())
        dfa._nfa.edges.append(bad)
        dfa._nfa.calls.append(())
        dfa._nfa.ends.append(0)
        q = len(dfa._nfa.eps) - 1
        with pytest.raises(TypeError, match="not a tuple"):
            core.nfa_wide_ends(dfa._core_context, q)
        with pytest.raises(TypeError, match="expected types"):
            core.alive(dfa._nfa.eps, dfa._nfa.edges, dfa._nfa.calls, [], q, q + 1, q)
        with pytest.raises(TypeError, match="not a tuple"):
            dfa._kernels[dfa._count] = frozenset([q])
            core.cut_of(dfa._core_context, dfa._count)
    for starts, ends, targets in [([97], [97], [2]), (b"a", b"", [2]), (b"ab", b"ab", [2])]:
        dfa = LazyByteDFA("ab")
        dfa._cut_bases[INITIAL_STATE] = 0
        dfa._cuts[INITIAL_STATE] = (starts, ends, targets, None)
        with pytest.raises(TypeError, match="bytes of one length"):
            core.step_held(dfa._core_context, INITIAL_STATE, 97)
        # resolve_bytes reads the native state store (the NFA's own edges),
        # never the cut kept in Python: the bad cut is not read at all
        core.resolve_bytes(dfa._core_context, INITIAL_STATE, 1 << 97)
        assert dfa.table[INITIAL_STATE, 97] == LazyByteDFA("ab").step(INITIAL_STATE, 97)


def test_native_state_store_refuses_edges_outside_bytes_and_the_nfa():
    """The native state store copies an NFA state's edges once, checking
    each: a byte range outside 0..255 or a target outside the NFA is a
    ValueError when a cell needs it, never a write past a row or a read
    past the NFA's tables."""
    core = lazydfa_module._lazycore
    if core is None:
        pytest.skip("the compiled core is not built")
    for bad in [(0, 300, 1), (5, 3, 1), (0, 10, 1 << 40), (-1, 10, 1)]:
        dfa = LazyByteDFA("ab")
        q = len(dfa._nfa.eps)
        dfa._nfa.eps.append(())
        dfa._nfa.edges.append(bad)
        dfa._nfa.calls.append(())
        dfa._nfa.ends.append(0)
        with dfa.resolving():
            state = dfa._count
            dfa._kernels[state] = frozenset([q])
            dfa._ids[dfa._kernels[state]] = state
            dfa._table[state] = UNKNOWN
            dfa._count = state + 1
            with pytest.raises(ValueError, match="outside"):
                core.resolve_bytes(dfa._core_context, dfa._count - 1, 1 << 4)


def test_lazy_nfa_rows_are_immutable_and_untracked(native):
    """The lazy NFA's per-state rows are tuples; with the compiled core they,
    and the lists holding them, are off the cyclic collector's lists from
    the start, definitions compiled on first call included (a
    maxLength-1024 string's fragment has ~64k states, which every collection
    of their generation walked). The explored automaton is the eager one
    either way."""
    import gc
    compiled = regex_from_schema(PERSON, any_depth=2, state_budget=None)
    collecting = gc.isenabled()
    gc.disable()  # a collection would untrack int tuples itself
    try:
        dfa = LazyByteDFA(compiled.pattern, definitions=compiled.definitions)
        transitions, finals = dfa.explore()
        nfa = dfa._nfa
        tracked = sum(gc.is_tracked(row) for row in nfa.eps + nfa.edges)
        tables_tracked = [gc.is_tracked(table) for table in (nfa.eps, nfa.edges, nfa.calls)]
    finally:
        if collecting:
            gc.enable()
    lazy = canonical_byte_dfa(transitions, finals)
    assert nfa.resolved and all(nfa.resolved)  # every definition was compiled on the way
    assert all(type(row) is tuple for row in nfa.eps + nfa.edges)
    if native == "compiled":
        assert tracked == 0 and tables_tracked == [False] * 3
    eager = byte_dfa_from_regex(compiled.pattern, definitions=compiled.definitions)
    assert np.array_equal(lazy.transitions, eager.transitions)
    assert np.array_equal(lazy.finals, eager.finals)


def test_dropped_lazy_automaton_is_freed_without_the_collector(native):
    """The compiled core's context refers to its automaton weakly: a dropped
    automaton (and its table, up to 200 MB) goes at once, not at the cyclic
    collector's next pass."""
    import gc
    import weakref
    collecting = gc.isenabled()
    gc.disable()
    try:
        dfa = LazyByteDFA(r"(ab|cd)*x[0-9]{2}")
        dfa.explore()
        dropped = weakref.ref(dfa)
        del dfa
        assert dropped() is None
    finally:
        if collecting:
            gc.enable()


def test_compiled_walk_refuses_bad_arrays():
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    dfa = LazyByteDFA("ab")
    spellings = np.frombuffer(b"ab", dtype=np.uint8)
    offsets = np.array([0, 2], dtype=np.int64)  # one token, "ab"
    zero, initial = np.zeros(1, dtype=np.int64), np.full(1, INITIAL_STATE, dtype=np.int64)

    def walk(*arrays):
        ended_tokens, ended_states = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        with dfa.resolving():
            return cwalk.walk(dfa, *arrays, ended_tokens, ended_states), ended_states

    with pytest.raises(TypeError, match="8 arguments"):
        cwalk.walk(dfa, spellings)
    with pytest.raises(ValueError, match="mismatched"):
        walk(spellings, offsets, zero, np.zeros(2, dtype=np.int64), zero)
    with pytest.raises(TypeError, match="items of 8 bytes"):
        walk(spellings, offsets, zero.astype(np.int32), initial, zero)
    with pytest.raises(IndexError, match="outside the tables"):
        walk(spellings, offsets, zero + 1, initial, zero)  # token 1 of a vocabulary of one
    with pytest.raises(IndexError, match="outside the automaton"):
        walk(spellings, offsets, zero, initial + 1000, zero)  # no such state
    with pytest.raises(IndexError, match="outside the tables"):
        walk(spellings, offsets, zero, initial, zero + 3)  # past the token's end
    # "ab" from the initial state: the cells are resolved on the way
    ended, ends = walk(spellings, offsets, zero, initial, zero)
    assert ended == 1 and dfa.is_final(int(ends[0]))
    # "b" alone (from position 1) dies
    assert walk(spellings, offsets, zero, initial, zero + 1)[0] == 0


def test_compiled_loop_rests_are_the_numpy_ones(monkeypatch):
    """A loop row's rest where the tail set's rest is not packed whole (a
    narrow loop's: lowercase letters and a space, as WashingtonPost wp_76's),
    picked and packed in one C call (_cwalk.loop_rest) from the grouped
    spellings, is array for array the numpy rest, and its packed bytes are
    those rest tokens packed token by token; past the most it packs, none;
    bad arrays are refused by name."""
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    vocab = cached_vocabulary("qwen2.5")
    ascii_bytes = np.zeros(128, dtype=bool)
    ascii_bytes[list(b" abcdefghijklmnopqrstuvwxyz")] = True
    key = lazy_tables._class_key(ascii_bytes, False)
    rng = np.random.default_rng(5)
    firsts = [ascii_bytes.copy(), np.zeros(128, dtype=bool), rng.random(128) < 0.3]
    firsts[1][list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")] = True

    def rests(compiled: bool):
        compiled_walk(monkeypatch, cwalk if compiled else None)
        tables = lazy_tables._vocabulary_tables(vocab)  # fresh caches
        tail = lazy_tables._tail_tokens(tables, key)
        found = []
        for ascii_first in firsts:
            first = np.zeros(256, dtype=bool)
            first[:128] = ascii_first
            found.append(lazy_tables._loop_mask(tables, first, key, tail)[1])
        return tables, tail, found

    _, _, expected = rests(False)
    tables, tail, made = rests(True)
    assert len(tail.rest) > lazy_plans._PLAN_MAX_TOKENS  # its rest is not packed whole
    assert all(len(rest.tokens) for rest in made), [len(rest.tokens) for rest in made]
    for ours, theirs in zip(made, expected):
        for name in ("tokens", "positions", "skipped", "first_bytes"):
            mine, wanted = getattr(ours, name), getattr(theirs, name)
            assert mine.dtype == wanted.dtype and np.array_equal(mine, wanted), name
        packed = lazy_plans._packed(tables, ours.tokens, ours.positions)
        assert np.array_equal(ours.packed.data, packed.data) and np.array_equal(ours.packed.offsets, packed.offsets)
    grouped, grouped_offsets = lazy_plans._grouped_spellings(tables)
    arrays = [tail.mask, tables.by_first_byte, tables.first_offsets, grouped, grouped_offsets, tail.rest,
              tail.rest_offsets, tail.rest_skips, np.flatnonzero(firsts[0])]
    *_, data, offsets = cwalk.loop_rest(*arrays, 10)
    assert data is None and offsets is None
    with pytest.raises(ValueError, match="ascending bytes"):
        cwalk.loop_rest(*arrays[:-1], np.array([5, 3]), 10)
    with pytest.raises(ValueError, match="outside the mask, in its order"):
        cwalk.loop_rest(*arrays[:5], tail.rest[::-1].copy(), *arrays[6:], 1 << 20)
    with pytest.raises(TypeError, match="rest_skips"):
        cwalk.loop_rest(*arrays[:7], tail.rest_skips.astype(np.int32), arrays[8], 10)


def test_tables_in_huge_pages_are_the_same_arrays():
    """The prepared tables' hot arrays and the grouped spellings, copied into
    a block advised for 2 MB pages (kernels._in_huge_pages), hold the
    arrays they were made from, read-only, each where the block's pages
    start or after the one before; fewer bytes than a huge page stay as
    they are."""
    vocab = cached_vocabulary("qwen2.5")
    made = lazy_tables._vocabulary_tables(vocab)
    prepared = lazy_tables._made_ahead(lazy_tables._vocabulary_tables(vocab))
    for name in lazy_tables._TABLE_ARRAYS:
        ours, theirs = getattr(prepared, name), getattr(made, name)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), name
        assert name not in lazy_tables._HUGE_ARRAYS or not ours.flags.writeable, name
    if lazy_kernels._cwalk is not None:
        data, offsets = lazy_plans._grouped_spellings(prepared)
        assert not data.flags.writeable and not offsets.flags.writeable
    small = {"a": np.arange(10), "b": np.ones(3, dtype=bool)}
    assert all(small[name] is array for name, array in lazy_kernels._in_huge_pages(small).items())
    if hasattr(__import__("mmap"), "MADV_HUGEPAGE"):
        big = {"a": np.arange(300_000, dtype=np.int64), "b": np.arange(5, dtype=np.uint8), "c": np.eye(3)}
        copies = lazy_kernels._in_huge_pages(big)
        for name, array in big.items():
            assert copies[name] is not array and np.array_equal(copies[name], array)
            assert copies[name].dtype == array.dtype and not copies[name].flags.writeable
        assert copies["a"].ctypes.data % lazy_kernels._HUGE_PAGE == 0
        assert copies["b"].ctypes.data % 64 == 0 and copies["c"].ctypes.data % 64 == 0


def test_packed_walk_refuses_bad_arrays():
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    dfa = LazyByteDFA("ab")
    data = np.frombuffer(b"abb", dtype=np.uint8)  # two entries: "ab" and "b"
    offsets = np.array([0, 2, 3], dtype=np.int32)
    initial = np.full(2, INITIAL_STATE, dtype=np.int64)

    def walk(data, offsets, states):
        ended_entries, ended_states = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
        with dfa.resolving():
            ended = cwalk.walk_packed(dfa, data, offsets, states, ended_entries, ended_states)
        return ended_entries[:ended].tolist(), ended_states[:ended]

    with pytest.raises(TypeError, match="6 arguments"):
        cwalk.walk_packed(dfa, data)
    with pytest.raises(ValueError, match="mismatched"):
        walk(data, offsets[:2], initial)
    with pytest.raises(IndexError, match="outside the data"):
        walk(data, np.array([0, 2, 4], dtype=np.int32), initial)
    with pytest.raises(TypeError, match="offsets: items of 4 bytes"):   # a plan's packed offsets are int32
        walk(data, offsets.astype(np.int64), initial)
    with pytest.raises(IndexError, match="outside the automaton"):
        walk(data, offsets, initial + 1000)
    entries, ends = walk(data, offsets, initial)  # "ab" lives, "b" dies
    assert entries == [0] and dfa.is_final(int(ends[0]))
    # pack: the bytes each token has left, one after another, exactly filling data
    spellings = np.frombuffer(b"abcde", dtype=np.uint8)
    token_offsets = np.array([0, 2, 5], dtype=np.int64)  # "ab", "cde"
    packed = np.zeros(2, dtype=np.uint8)
    cwalk.pack(spellings, token_offsets, np.array([1, 0]), np.array([1, 2]), packed)
    assert packed.tobytes() == b"de"
    with pytest.raises(ValueError, match="remaining bytes"):
        cwalk.pack(spellings, token_offsets, np.array([1, 0]), np.array([1, 2]), np.zeros(3, dtype=np.uint8))
    with pytest.raises(IndexError, match="outside the tables"):
        cwalk.pack(spellings, token_offsets, np.array([2]), np.array([0]), np.zeros(0, dtype=np.uint8))


def test_walk_and_pack_walks_as_walk_and_packs_as_pack():
    """A plan's first walk packs its tokens' remaining bytes as it goes: the
    same entries end alive in the same states as walked by id, and the bytes
    it keeps are what ``pack`` writes."""
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    spellings = np.frombuffer(b"ababbab", dtype=np.uint8)
    offsets = np.array([0, 2, 3, 4, 7], dtype=np.int64)  # "ab", "a", "b", "bab"
    tokens = np.array([0, 1, 3, 2, 0], dtype=np.int64)
    positions = np.array([0, 0, 1, 0, 1], dtype=np.int64)  # "ab", "a", "ab", "b", "b"
    dfa = LazyByteDFA("(ab)*")
    states = np.full(5, INITIAL_STATE, dtype=np.int64)
    by_id, packed = np.zeros((2, 5), dtype=np.int64), np.zeros((2, 5), dtype=np.int64)
    packed_offsets = np.zeros(6, dtype=np.int32)
    with dfa.resolving():
        ended = cwalk.walk(dfa, spellings, offsets, tokens, states, positions, *by_id)
        # a plan's tokens and positions: int32
        ended_packed, data = cwalk.walk_and_pack(dfa, spellings, offsets, tokens.astype(np.int32), states,
                                                 positions.astype(np.int32), *packed, packed_offsets)
    assert ended == ended_packed == 3  # "b" alone dies (twice)
    assert tokens[packed[0, :ended]].tolist() == by_id[0, :ended].tolist()
    assert packed[1, :ended].tolist() == by_id[1, :ended].tolist()
    expected = np.zeros(7, dtype=np.uint8)
    cwalk.pack(spellings, offsets, tokens, positions, expected)
    assert data == expected.tobytes() == b"abaabbb"
    assert packed_offsets.tolist() == [0, 2, 3, 5, 6, 7]
    with pytest.raises(TypeError, match="9 arguments"):
        cwalk.walk_and_pack(dfa, spellings)
    with dfa.resolving():
        with pytest.raises(ValueError, match="mismatched"):
            cwalk.walk_and_pack(dfa, spellings, offsets, tokens.astype(np.int32), states, positions.astype(np.int32),
                                *packed, packed_offsets[:5])
        with pytest.raises(IndexError, match="outside the tables"):
            cwalk.walk_and_pack(dfa, spellings, offsets, (tokens + 4).astype(np.int32), states,
                                positions.astype(np.int32), *packed, packed_offsets)
        with pytest.raises(TypeError, match="tokens: items of 4 bytes"):
            cwalk.walk_and_pack(dfa, spellings, offsets, tokens, states, positions.astype(np.int32), *packed,
                                packed_offsets)
        with pytest.raises(TypeError, match="positions: items of 4 bytes"):
            cwalk.walk_and_pack(dfa, spellings, offsets, tokens.astype(np.int32), states, positions, *packed,
                                packed_offsets)


def test_forged_spelling_offsets_are_refused_not_read():
    """Offsets that point before the spellings (a forged lazy tables file in
    the cache folder) are refused by every compiled walk, not read."""
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    spellings = np.frombuffer(b"ababbab", dtype=np.uint8)
    offsets = np.array([-4096, 2, 3, 4, 7], dtype=np.int64)  # token 0 starts far before the data
    tokens, positions = np.array([0], dtype=np.int64), np.array([0], dtype=np.int64)
    dfa = LazyByteDFA("(ab)*")
    states = np.full(1, INITIAL_STATE, dtype=np.int64)
    ended = np.zeros((2, 1), dtype=np.int64)
    with dfa.resolving():
        with pytest.raises(IndexError, match="outside the tables"):
            cwalk.walk(dfa, spellings, offsets, tokens, states, positions, *ended)
        with pytest.raises(IndexError, match="outside the tables"):
            cwalk.walk_and_pack(dfa, spellings, offsets, tokens.astype(np.int32), states, positions.astype(np.int32),
                                *ended, np.zeros(2, dtype=np.int32))
    with pytest.raises(IndexError, match="outside the tables"):
        cwalk.pack(spellings, offsets, tokens, positions, np.zeros(8192, dtype=np.uint8))


def test_packed_plans_walk_as_the_token_ids_do():
    """The plans a lazy index keeps on Qwen (loop rows' walk plans and a
    counted string's chain plans) are packed by their first walk:
    each token's remaining bytes, in the plan's order; walked packed, from
    the same states, they end alive in the same states as the tokens walked
    by id."""
    if not lazy_module.NATIVE_WALK:
        pytest.skip("plans are packed only for the compiled walk, which is off (TOKENDFA_NATIVE=0 or not built)")
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    vocab = cached_vocabulary("qwen2.5")
    schema = {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-f0-9]{8}-[a-z]+$"},
        "note": {"type": "string", "maxLength": 40}, "tags": {"type": "array", "items": {"type": "string"}},
        "n": {"type": "number"}}, "required": ["id", "note", "tags", "n"], "additionalProperties": False}
    index = Index.from_schema(schema, vocab, lazy=True)
    guide = Guide(index)
    for token in vocab.encode(json.dumps({"id": "0a1b2c3d-abc", "note": "Quite a note, \u00e9t\u00e9 2024",
                                           "tags": ["x", "y z"], "n": -1.5e3}, separators=(",", ":"))):
        guide.get_mask()
        guide.advance(token)
    tables, dfa = index._tables, index._dfa
    plans = list(tables.walk_plans.values()) + list(tables.chain_plans.values())
    kinds = {type(plan).__name__ for plan in plans if plan.packing.packed is not None}
    assert kinds == {"_WalkPlan", "_ChainPlan"}, kinds
    rng = np.random.default_rng(5)
    alive = 0
    for plan in plans:
        # a loop row's group plan keeps none: its token lengths less its packed bytes
        positions = lazy_plans._plan_positions(tables, plan)
        packed_bytes = plan.packing.packed or lazy_plans._packed(tables, plan.tokens, positions)
        data, offsets = packed_bytes.data.tobytes(), packed_bytes.offsets
        for i, (token, position) in enumerate(zip(plan.tokens.tolist(), positions.tolist())):
            assert data[offsets[i]:offsets[i + 1]] == vocab.tokens[token][position:]
        states = rng.integers(1, dfa.num_states, len(plan.tokens)).astype(np.int64)
        by_id = np.empty((2, len(plan.tokens)), dtype=np.int64)
        packed = np.empty((2, len(plan.tokens)), dtype=np.int64)
        with dfa.resolving():
            ended = cwalk.walk(dfa, tables.spellings, tables.spelling_offsets, plan.tokens.astype(np.int64),
                               states, positions.astype(np.int64), by_id[0], by_id[1])
            ended_packed = cwalk.walk_packed(dfa, packed_bytes.data, packed_bytes.offsets, states,
                                             packed[0], packed[1])
        assert ended == ended_packed
        alive += ended
        assert np.array_equal(plan.tokens[packed[0, :ended]], by_id[0, :ended])
        assert np.array_equal(packed[1, :ended], by_id[1, :ended])
    assert alive > 100


@pytest.mark.slow
@pytest.mark.parametrize("pattern", SHORTCUT_PATTERNS)
def test_lazy_shortcuts_serve_the_eager_index_qwen(pattern, native):
    vocab = cached_vocabulary("qwen2.5")
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    eager = Index.from_regex(pattern, vocab, lazy=False)
    assert lockstep(lazy, eager, max_pairs=25) >= 8
    assert lazy.complete().arrays.equals(eager.arrays)


def _string_class(chars: str = "".join(map(chr, range(0x20, 0x7F))).replace('"', "").replace("\\", "")) -> int:
    """``wanted`` of LazyByteDFA.class_chain: bit b for each byte of ``chars``
    (a JSON string's unescaped ASCII characters by default; the wide
    characters are its ``wide`` flag, as in a chain row's class key)."""
    return sum(1 << ord(c) for c in chars)


# (pattern, the bytes to the chain's start, class, wide, limit, how the chain ends, its length)
CHAINS = [
    # a schema's counted string (JSON string characters, wide ones and escapes), longer than the limit
    (regex_from_schema({"type": "string", "maxLength": 300}).pattern, b'"', _string_class(), True, 128,
     lazydfa_module.ChainEnd.LIMIT, 128),
    # ... shorter than it: the class bytes lead on to the closing quote's state, where they are dead
    (regex_from_schema({"type": "string", "minLength": 2, "maxLength": 40}).pattern, b'"ab',
     _string_class(), True, 128, lazydfa_module.ChainEnd.DEAD, 38),
    (r'I[0-9a-f]{40}"', b"I", _string_class("0123456789abcdef"), False, 128,
     lazydfa_module.ChainEnd.DEAD, 40),
    # the wide characters die after five while the ASCII ones go on: the chain leaves the class there
    ('"[a-z\u0080-\U0010ffff]{5}[a-z]{0,100}"', b'"', _string_class("abcdefghijklmnopqrstuvwxyz"), True,
     128, lazydfa_module.ChainEnd.LEAVES, 5),
    # the wide characters lead to a new state of their own, the ASCII ones to another: both are
    # discovered, in the reference's order (the class's cells, then the wide target)
    ('"(?:[a-z]{5}|[\u0080-\U0010ffff]{2})"', b'"', _string_class("abcdefghijklmnopqrstuvwxyz"), True, 128,
     lazydfa_module.ChainEnd.LEAVES, 0),
    # a range of wide characters the NFA's byte edges cut inside a UTF-8 sequence: the caller decides
    ('"[a-z\u0100-\uffff]{0,50}"', b'"', _string_class("abcdefghijklmnopqrstuvwxyz"), True, 128,
     lazydfa_module.ChainEnd.ASK, 0),
    # a count that ends in a loop
    ('"[a-z]{3,}"', b'"', _string_class("abcdefghijklmnopqrstuvwxyz"), False, 128,
     lazydfa_module.ChainEnd.LOOPS, 3),
]


@pytest.mark.skipif(not lazydfa_module.NATIVE_CORE, reason="the compiled core is not built here (or TOKENDFA_NATIVE=0)")
@pytest.mark.parametrize("pattern, start, wanted, wide, limit, end, length", CHAINS)
def test_native_class_chain_is_the_reference(pattern, start, wanted, wide, limit, end, length, monkeypatch):
    """LazyByteDFA.class_chain in one compiled call over the native state
    store follows the very chain of the Python reference (a class_successor
    and a wide_target a link): the same states with the same ids, kernels
    and table cells (UNKNOWN alike), the same end, from the start of a
    counted class and again from inside it (partly known, a shorter limit)."""
    native = LazyByteDFA(pattern)
    with monkeypatch.context() as patched:
        patched.setattr(lazydfa_module, "_lazycore", None)
        reference = LazyByteDFA(pattern)
    assert native._core_context is not None and reference._core_context is None
    calls = []
    compiled = lazydfa_module._lazycore.class_chain
    monkeypatch.setattr(lazydfa_module._lazycore, "class_chain", lambda *args: calls.append(args) or compiled(*args))

    def chains(dfa):
        state = INITIAL_STATE
        for byte in start:
            state = int(dfa.partial_row(state, 1 << byte)[byte])
        first = dfa.class_chain(state, wanted, wide, limit)
        middle = first.states[len(first.states) // 2] if first.states else state
        again = dfa.class_chain(middle, wanted, wide, 7)
        return first, again

    found, expected = chains(native), chains(reference)
    assert calls, "the compiled chain did not run"
    assert found == expected
    assert found[0].end == end and len(found[0].states) == length
    count = reference.num_states
    native._publish()
    assert native.num_states == count and native._kernels == reference._kernels
    np.testing.assert_array_equal(native.table[:count], reference.table[:count])
    np.testing.assert_array_equal(native.finals[:count], reference.finals[:count])


@pytest.mark.slow
def test_counted_class_rows_follow_the_chain_qwen():
    """A state inside ``[0-9a-f]{40}`` serves its row from the chain of the
    next states (the tokens of n hex digits end n states on) rather than
    a walk, and the chain's rows agree with the eager index along a hash
    typed token by token."""
    vocab = cached_vocabulary("qwen2.5")
    pattern = r'I[0-9a-f]{40}"'
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    eager = Index.from_regex(pattern, vocab, lazy=False)
    lazy_state = lazy.advance(lazy.initial_state, vocab.encode("I")[0])
    eager_state = eager.advance(eager.initial_state, vocab.encode("I")[0])
    lazy.get_mask(lazy_state)
    # followed as far as the longest token of hex digits (7 on Qwen), not walked
    assert sum(links.count for links in lazy._chain_links.values()) >= 6
    for token in vocab.encode("0123456789abcdef0123456789abcdef01234567" + '"'):
        assert np.array_equal(lazy.get_mask(lazy_state), eager.get_mask(eager_state))
        lazy_state, eager_state = lazy.advance(lazy_state, token), eager.advance(eager_state, token)
    assert lazy.is_final(lazy_state) and eager.is_final(eager_state)


@pytest.mark.parametrize("kind, source, text, dies", [
    # a counted JSON string: at its last characters ASCII and wide characters die alike
    ("schema", {"type": "string", "maxLength": 6}, '"ab中文cd"', 2),
    # ASCII characters die after four, wide ones go on: the longer tokens with one are walked
    ("regex", r"(?:[ -~]|[^\x00-\x7f]){0,4}[^\x00-\x7f]*", "ab中文中文", 1)])
def test_chain_rows_at_the_end_of_a_count_are_the_eager_rows_qwen(kind, source, text, dies, native, monkeypatch):
    """Along the last characters of a counted class a chain row drops the
    tokens longer than the chain without a walk where every character of
    the class dies after it (``dies`` 2: the chain's ASCII bytes and its
    wide characters), and walks those with a wide character where only the
    ASCII bytes die (1); the rows are the eager index's either way, a
    character at a time."""
    vocab = cached_vocabulary("qwen2.5")
    asked = []
    chain_plan = lazy_index_module._chain_plan

    def recording(*args):
        asked.append(args[4])
        return chain_plan(*args)

    monkeypatch.setattr(lazy_index_module, "_chain_plan", recording)
    build = Index.from_schema if kind == "schema" else Index.from_regex
    lazy, eager = build(source, vocab, lazy=True), build(source, vocab, lazy=False)
    lazy_state, eager_state = lazy.initial_state, eager.initial_state
    for token in [token for character in text for token in vocab.encode(character)]:
        assert np.array_equal(lazy.get_mask(lazy_state), eager.get_mask(eager_state))
        lazy_state, eager_state = lazy.advance(lazy_state, token), eager.advance(eager_state, token)
    assert lazy.is_final(lazy_state) and eager.is_final(eager_state)
    assert dies in asked and set(asked) <= {0, 1, 2}


def test_shorter_chain_plans_are_made_whole_qwen(native):
    """A chain plan where every longer token dies, made from the kept plan
    one link longer (its first entries, and their packed bytes where its
    first walk packed them), is the plan made from scratch, array for array,
    at every length down from past the longest run; and the rows along a
    counted string that use them stay the eager index's (the test above)."""
    vocab = cached_vocabulary("qwen2.5")
    tables = lazy_tables.vocabulary_tables(vocab)
    key, runs, first, others = json_string_chain(tables)
    compiled = lazy_plans._cwalk is not None
    cache = tables.chain_plans
    saved = cache._plans, cache._sizes, cache._held
    made = {}

    def empty() -> None:
        cache._plans, cache._sizes, cache._held = lazy_plans._SecondChance(), {}, 0

    try:
        empty()
        for length in range(len(runs.full_offsets) + 1, 0, -1):
            plan = made[length] = lazy_plans._chain_plan(tables, key, runs, length, 2, first, others)
            if compiled and length % 3:  # packed as its first walk packs it (not every one: both ways)
                plan.packing.packed = lazy_plans._packed(tables, plan.tokens, plan.positions)
        for length, plan in made.items():
            empty()
            whole = lazy_plans._chain_plan(tables, key, runs, length, 2, first, others)
            for field in ("tokens", "links", "first_bytes", "positions"):
                assert np.array_equal(getattr(plan, field), getattr(whole, field)), (length, field)
            packed = plan.packing.packed
            if compiled and length % 3 != 1:  # (one longer was packed)
                by_id = lazy_plans._packed(tables, whole.tokens, whole.positions)
                assert packed is not None and np.array_equal(packed.offsets, by_id.offsets), length
                assert np.array_equal(packed.data, by_id.data), length
    finally:
        cache._plans, cache._sizes, cache._held = saved
    assert len({len(plan.tokens) for plan in made.values()}) >= 20


@pytest.mark.parametrize("order", ["shorter", "longer", "apart"])
def test_chain_masks_made_from_their_neighbours_are_made_whole_qwen(order):
    """A chain mask made from the one a length longer (clearing the tokens
    of that length) or shorter (setting the tokens of its own) is the mask
    made from scratch, for every length up to past the longest run."""
    vocab = cached_vocabulary("qwen2.5")
    tables = lazy_tables.vocabulary_tables(vocab)
    key, runs, _, _ = json_string_chain(tables)
    longest = len(runs.full_offsets) - 2
    lengths = list(range(1, longest + 3))
    lengths = {"shorter": lengths, "longer": lengths[::-1], "apart": lengths[::2]}[order]
    saved = dict(tables.chain_masks)
    tables.chain_masks.clear()
    try:
        made = {length: lazy_tables._chain_mask(tables, key, length, runs) for length in lengths}
        for length, mask in made.items():
            tables.chain_masks.clear()
            whole = lazy_tables._chain_mask(tables, key, length, runs)
            assert np.array_equal(mask, whole), length
            count = int(np.unpackbits(whole.view(np.uint8)).sum())
            assert count == runs.full_offsets[min(length + 1, longest + 1)] - runs.full_offsets[1]
    finally:
        tables.chain_masks.clear()
        tables.chain_masks.update(saved)
    assert len(made) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("schema", [{"type": "string", "maxLength": 300}, {"type": "string", "minLength": 200}])
def test_counted_string_chain_discovers_the_class_states_only_qwen(schema):
    """Following a counted JSON string's chain resolves only the class's
    cells of each link: the state past a quote or a backslash at each of
    the 127 links (Qwen's longest string token) is left undiscovered until a
    token asks for it. Before, the first row there discovered 265 states;
    without the filter on stop bytes that some token asks for, 218."""
    vocab = cached_vocabulary("qwen2.5")
    lazy = Index.from_schema(schema, vocab, lazy=True)
    state = lazy.advance(lazy.initial_state, vocab.encode('"')[0])
    before = lazy.byte_dfa.num_states
    lazy.get_mask(state)
    links = sum(links.count for links in lazy._chain_links.values())
    assert links >= 120
    assert lazy.byte_dfa.num_states - before <= links + 24


def walk_masks(index, vocab, instances) -> list[bytes]:
    """The mask at every step of every instance, then the end state's finality."""
    seen = []
    for instance in instances:
        guide = Guide(index)
        for token in vocab.encode(json.dumps(instance, separators=(",", ":"), ensure_ascii=False)):
            seen.append(guide.get_mask().tobytes())
            guide.advance(token)
        seen.append(guide.get_mask().tobytes())
        assert guide.can_end()
    return seen


@pytest.mark.slow
def test_lazy_schema_index_qwen():
    vocab = cached_vocabulary("qwen2.5")
    lazy = Index.from_schema(PERSON, vocab, lazy=True, any_depth=2)
    eager = Index.from_schema(PERSON, vocab, any_depth=2, lazy=False)
    assert walk_masks(lazy, vocab, PERSON_INSTANCES) == walk_masks(eager, vocab, PERSON_INSTANCES)
    assert lazy.metadata["kind"] == "schema" and lazy.metadata["build"]["method"] == "lazy"
    completed = lazy.complete()
    assert completed.arrays.equals(eager.arrays)
    assert completed.metadata["kind"] == "schema"


@pytest.mark.slow
def test_lazy_schema_with_a_shared_length_bound_qwen():
    # maxLength 300 is written with digit definitions lazily, with 300 copies eagerly
    schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 300}},
              "required": ["s"], "additionalProperties": False}
    vocab = cached_vocabulary("qwen2.5")
    lazy = Index.from_schema(schema, vocab, lazy=True)
    eager = Index.from_schema(schema, vocab, lazy=False)
    assert lazy.byte_dfa.num_nfa_states < 1_000
    assert lockstep(lazy, eager, max_pairs=40) >= 30
    instances = [{"s": "é日" * 150}, {"s": "ab"}, {"s": "a\\n\"" * 75}]  # 300 characters
    assert walk_masks(lazy, vocab, instances) == walk_masks(eager, vocab, instances)
    assert lazy.complete().arrays.equals(eager.arrays)


def test_lazy_schema_free_values_nest_deep_by_default(toy_vocab):
    import jsonschema

    schema = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    lazy = Index.from_schema(schema, toy_vocab, lazy=True)  # the toy vocabulary has no "[": objects
    for levels in (1, 5, LAZY_ANY_DEPTH - 1, LAZY_ANY_DEPTH, LAZY_ANY_DEPTH + 5):
        data = {"a": 1}
        for _ in range(levels - 1):
            data = {"a": data}
        jsonschema.validate({"a": data}, schema)
        text = json.dumps({"a": data}, separators=(",", ":")).encode()
        guide, ok = Guide(lazy), True
        for byte in text:  # the toy vocabulary spells every byte
            token = TOKEN[bytes([byte])]
            if not lazy.is_allowed(guide.state, token):
                ok = False
                break
            guide.advance(token)
        # the free value nests `levels` objects: within the default depth, every one is accepted
        assert (ok and guide.can_end()) == (levels <= LAZY_ANY_DEPTH), levels


@pytest.mark.slow
def test_many_guides_on_threads_agree_with_serial_use():
    vocab = cached_vocabulary("qwen2.5")
    eager = Index.from_schema(PERSON, vocab, any_depth=2, lazy=False)
    expected = walk_masks(eager, vocab, PERSON_INSTANCES)
    lazy = Index.from_schema(PERSON, vocab, lazy=True, any_depth=2)  # cold: threads race to fill it
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def run(number: int) -> None:
        try:
            results[number] = walk_masks(lazy, vocab, PERSON_INSTANCES[number % 3:] +
                                         PERSON_INSTANCES[:number % 3])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    lazy.start_completion()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for number, masks in results.items():
        shift = number % 3
        order = PERSON_INSTANCES[shift:] + PERSON_INSTANCES[:shift]
        assert masks == walk_masks(eager, vocab, order)
    assert sorted(set(expected)) == sorted(set(m for r in results.values() for m in r))
    lazy.close()


# --- a pattern whose automaton explodes ---------------------------------------------

HOSTILE = r"(a|b)*a(a|b){24}"


def run_limited(code: str, timeout: float) -> subprocess.CompletedProcess:
    """Run ``code`` in a subprocess limited to 2 GiB of address space."""
    prelude = ("import resource, sys\n"
               "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
               f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout)


def test_hostile_pattern_is_served_lazily_within_a_bound():
    done = run_limited(f"""
        from conftest import toy_vocabulary
        from tokendfa import Guide, Index
        vocab = toy_vocabulary()
        lazy = Index.from_regex({HOSTILE!r}, vocab, lazy=True, max_states=5000)
        guide = Guide(lazy)
        for token in [0, 22, 1, 0, 0, 18, 0]:  # a ab b a a abc a: "abc" is refused
            if lazy.is_allowed(guide.state, token):
                guide.advance(token)
        print(guide.num_tokens, lazy.byte_dfa.num_states)
    """, timeout=120)
    assert done.returncode == 0, done.stderr
    steps, states = map(int, done.stdout.split())
    assert steps == 6 and states <= 5000


def test_hostile_pattern_eager_build_stops_at_its_bound():
    done = run_limited(f"""
        from conftest import toy_vocabulary
        from tokendfa import BuildLimitError, Index
        try:
            Index.from_regex({HOSTILE!r}, toy_vocabulary(), max_states=5000, lazy=False)
        except BuildLimitError as exc:
            print(exc.reached)
    """, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 10_001


@pytest.mark.slow
def test_hostile_pattern_eager_build_default_bound_within_memory():
    done = run_limited(f"""
        from tokendfa import BuildLimitError, Index, Vocabulary
        try:
            Index.from_regex({HOSTILE!r}, Vocabulary([b"a", b"b", None], eos_token_ids=2), lazy=False)
        except BuildLimitError as exc:
            print(exc.reached)
    """, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 400_001


def test_background_completion_stops_at_its_time_limit():
    """The lazy index's completion thread runs under the build's time limit:
    an exploding pattern stops with TimeLimitError shortly after it, which
    wait_completion re-raises; the rows served before stay right."""
    import time

    from tokendfa import TimeLimitError

    lazy = Index.from_regex(r"(a|b)*a(a|b){24}", cached_vocabulary("toy"), lazy=True,
                            time_limit=0.5, max_states=10**7)
    started = time.perf_counter()
    lazy.start_completion()
    with pytest.raises(TimeLimitError):
        lazy.wait_completion(timeout=30)
    assert time.perf_counter() - started < 1.5
    assert lazy.is_allowed(lazy.initial_state, 0)  # "a" is still allowed at the start


def _ab_vocabulary(length: int) -> Vocabulary:
    """Every byte, and every string of ``length`` a's and b's: from a state
    inside ``(a|b)*a(a|b){20}`` each of those walks into states of its own."""
    import itertools

    tokens = [bytes([b]) for b in range(256)] + [bytes(t) for t in itertools.product(b"ab", repeat=length)]
    return Vocabulary(tokens + [None], eos_token_ids=[len(tokens)], name=f"ab{length}")


def _limited_row(index, state: int, limit: float) -> np.ndarray | None:
    """``index.get_mask(state)``, or None when the row's time limit fired
    (asserted to fire within half a second of its deadline)."""
    import time

    from tokendfa import TimeLimitError

    started = time.perf_counter()
    try:
        return index.get_mask(state)
    except TimeLimitError:
        assert time.perf_counter() - started < limit + 0.5
        return None


def test_time_limit_bounds_each_row_served_later():
    """time_limit= bounds each row a lazy index computes after its
    construction, from the moment that row starts: an expensive row (65k
    tokens that each discover states) raises TimeLimitError within the
    limit + 0.5 s, the rows around it keep serving the unbounded index's
    answers, and the same row asked again goes on from the cells resolved
    before (each try bounded again) to the exact mask."""
    import gc

    vocab = _ab_vocabulary(16)
    pattern = "x|y(a|b)*a(a|b){20}"
    reference = Index.from_regex(pattern, vocab)  # no limit (and the vocabulary's tables made)
    # The whole test session's objects out of the collector's reach while rows are
    # timed: a full collection of them (the row's new containers make one due) is a
    # pause no deadline check can interrupt. In the full suite this row once came
    # 0.55 s past its deadline (most likely such a pause: the test alone passes in
    # 2 s, every try in time). What is asserted is the library's own checks.
    gc.collect()
    gc.freeze()
    try:
        _rows_bounded_one_at_a_time(vocab, pattern, reference)
    finally:
        gc.unfreeze()


def _rows_bounded_one_at_a_time(vocab, pattern: str, reference) -> None:
    # the row takes ~0.13 s with the native state store (~1.2 s in Python)
    limit = 0.03
    index = Index.from_regex(pattern, vocab, time_limit=limit)  # the construction passes
    initial = index.initial_state
    after_y = index.advance(initial, ord("y"))
    assert _limited_row(index, after_y, limit) is None  # the first try cannot finish in time
    for text in (b"", b"x"):  # the rows around it, exactly
        state, expected = initial, reference.initial_state
        for byte in text:
            state, expected = index.advance(state, byte), reference.advance(expected, byte)
        np.testing.assert_array_equal(index.get_mask(state), reference.get_mask(expected))
    for _ in range(1000):  # each try resolves more cells
        mask = _limited_row(index, after_y, limit)
        if mask is not None:
            break
    expected = reference.get_mask(reference.advance(reference.initial_state, ord("y")))
    np.testing.assert_array_equal(mask, expected)
    # and a step into the region the failed tries discovered is the reference's
    token = vocab.size - 2  # b"bbbb...": ends in a state that is not final
    np.testing.assert_array_equal(index.get_mask(index.advance(after_y, token)),
                                  reference.get_mask(reference.advance(
                                      reference.advance(reference.initial_state, ord("y")), token)))


def test_rows_without_a_time_limit_are_unbounded_and_take_an_ambient_one():
    """With no time_limit= a later row has no deadline of its own (the same
    expensive row finishes), and one run under the caller's limits (what the
    vLLM integration does each step) is bounded by them."""
    import time

    from tokendfa import TimeLimitError
    from tokendfa.analysis import limits

    # 65k tokens (~0.12 s with the native state store, 16k took ~0.04)
    vocab = _ab_vocabulary(16)
    index = Index.from_regex("x|y(a|b)*a(a|b){22}", vocab)
    after_y = index.advance(index.initial_state, ord("y"))
    started = time.perf_counter()
    with limits.limits(time_limit=0.01), pytest.raises(TimeLimitError):
        index.get_mask(after_y)
    stopped = time.perf_counter() - started
    assert index.get_mask(after_y).any()
    # compared with the same row unbounded in a fresh index, measured here in
    # the same minutes (~0.07 s quiet on c2137ca; the limited one stops after
    # ~11 ms): a fixed bound failed under CI's load, with the row itself
    # taking twice its quiet time, and a quarter of the row's time failed
    # once under a helper's load (10.9 against 42.6 ms) after rows got
    # cheaper; a row that ran to its end takes the whole time. The row
    # finished in the same index is no measure, since it only adds what the
    # stopped one had not discovered yet
    fresh = Index.from_regex("x|y(a|b)*a(a|b){22}", vocab)
    after_y = fresh.advance(fresh.initial_state, ord("y"))
    started = time.perf_counter()
    assert np.array_equal(fresh.get_mask(after_y), index.get_mask(index.advance(index.initial_state, ord("y"))))
    whole = time.perf_counter() - started
    assert stopped < whole / 2, (stopped, whole)


@pytest.mark.skipif(not (lazydfa_module.NATIVE_CORE and lazy_module.NATIVE_WALK),
                    reason="the compiled core or walk is not built here (or TOKENDFA_NATIVE=0)")
@pytest.mark.slow  # the brute-force reference of this schema takes ~20 s
def test_the_native_state_store_resolves_cold_rows_and_publishes_its_states():
    """A cold row's walk resolves its cells in the native state store (no
    Python, no GIL), across stacks and overlapping ranges, and hands back
    only what needs the stack (a call or an end on the way); every state it
    discovers is published to the automaton's kernels and ids, and the rows
    are the brute-force reference's."""
    from tokendfa.analysis import _lazycore

    vocab = cached_vocabulary("qwen2.5")
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 6}, "code": {"type": "string", "pattern": "^[a-f0-9]{4}$"},
        "tags": {"type": "array", "items": {"enum": ["alpha", "beta", "alphabet"]}}}, "required": ["name"]}
    index = Index.from_schema(schema, vocab)
    guide = Guide(index)
    text = '{"name":"ab\u00e9c","code":"0fa9","tags":["alpha","alphabet"]}'
    for token in vocab.encode(text):
        guide.get_mask()
        guide.advance(token)
    dfa = index.byte_dfa
    info = _lazycore.store_info(dfa._core_context)
    assert info["fast_discovered"] > 20 and info["fast_found"] > 0, info
    assert info["handed_back"] < info["fast_discovered"], info
    # the store is the record: the walk published the count, not the kernels
    assert info["states"] == dfa.num_states > info["published"] == len(dfa._kernels), info
    dfa._publish()
    assert _lazycore.store_info(dfa._core_context)["published"] == dfa.num_states == len(dfa._kernels)
    assert all(dfa._ids[kernel] == state for state, kernel in dfa._kernels.items())
    assert sorted(dfa._kernels) == list(range(dfa.num_states))
    reference = Index.from_schema(schema, vocab, method="reference", lazy=False)
    assert not isinstance(reference, LazyIndex)
    state, expected = index.initial_state, reference.initial_state
    for token in vocab.encode(text):
        np.testing.assert_array_equal(index.get_mask(state), reference.get_mask(expected))
        state, expected = index.advance(state, token), reference.advance(expected, token)


@pytest.mark.skipif(not lazy_module.NATIVE_WALK, reason="the compiled walk is not built (or TOKENDFA_NATIVE=0)")
@pytest.mark.parametrize("count", [10, 5000])
def test_compiled_bit_kernels_refuse_items_outside_their_arrays(count):
    """set_bits, group_bits, distinct and skips run their loops without the
    GIL from a few thousand items on, and refuse an item outside their
    arrays on both sides of that size, with the GIL taken back first."""
    from tokendfa.lazy import kernels

    cwalk = kernels._cwalk
    mask = np.zeros(8, dtype=np.uint32)  # 256 tokens
    tokens = np.arange(count, dtype=np.int64) % 256
    tokens[-1] = 256
    with pytest.raises(IndexError, match="outside the mask"):
        cwalk.set_bits(mask, tokens)
    offsets = np.array([0, count], dtype=np.int64)
    with pytest.raises(IndexError, match="outside the mask"):
        cwalk.group_bits(mask, tokens, offsets, np.zeros(1, dtype=np.int64))
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.group_bits(mask, tokens, offsets, np.array([1], dtype=np.int64))
    values = (np.arange(count) % 7).astype(np.int32)
    values[-1] = 9
    with pytest.raises(IndexError, match="outside the marks"):
        cwalk.distinct(values, np.zeros(8, dtype=np.uint8), np.zeros(count, dtype=np.int64))
    spellings = np.frombuffer(b"ab" * 4, dtype=np.uint8)
    spelled = np.arange(0, 9, 2, dtype=np.int64)  # four tokens of two bytes
    asked = np.arange(count, dtype=np.int64) % 4
    asked[-1] = 4
    with pytest.raises(IndexError, match="outside the tables"):
        cwalk.skips(spellings, spelled, np.ones(256, dtype=np.uint8), asked, np.ones(4, dtype=np.int8),
                    np.zeros(count, dtype=np.int16))


def test_a_state_past_the_count_is_checked_again_under_the_lock():
    """A walk that discovers states in the native state store publishes them
    to the count when it lets the lock go, while readers without the lock
    may already see their ids in cells: an id past the count is checked
    again under the lock (it waits for the walk), not refused at once."""
    import time

    dfa = LazyByteDFA("[a-c]+x?")
    dfa.row(INITIAL_STATE)
    count = dfa.num_states
    found: list[bool] = []
    with dfa.resolving():
        reader = threading.Thread(target=lambda: found.append(dfa.is_discovered(count)))
        reader.start()
        time.sleep(0.05)
        assert not found  # waiting for the lock
        dfa._count = count + 1  # what publishing a state does
    reader.join()
    assert found == [True]
    dfa._count = count
    assert not dfa.is_discovered(count) and not dfa.is_discovered(-1)
    with pytest.raises(IndexError):
        dfa.step(count, 97)


@pytest.mark.skipif(not (lazydfa_module.NATIVE_CORE and lazy_module.NATIVE_WALK),
                    reason="the compiled core or walk is not built here (or TOKENDFA_NATIVE=0)")
def test_time_without_the_gil_is_counted_only_when_asked():
    """released_ns() of the walk and of the core count the CPU time spent
    without the GIL once count_released(True) turns the count on, and not
    before (the thread's CPU clock is a system call)."""
    from tokendfa.analysis import _lazycore
    from tokendfa.lazy import _cwalk

    vocab = cached_vocabulary("qwen2.5")

    def cold_rows() -> None:
        index = Index.from_schema({"type": "object", "properties": {"note": {"type": "string"}}}, vocab)
        guide = Guide(index)
        for token in vocab.encode('{"note":"a cold row or two"}'):
            guide.get_mask()
            guide.advance(token)

    def released() -> int:
        return _cwalk.released_ns() + _lazycore.released_ns()

    before = released()
    cold_rows()
    assert released() == before
    _cwalk.count_released(True)
    _lazycore.count_released(True)
    try:
        cold_rows()
    finally:
        _cwalk.count_released(False)
        _lazycore.count_released(False)
    assert released() > before


@pytest.mark.skipif(not lazydfa_module.NATIVE_CORE, reason="the compiled core is not built here")
def test_the_native_core_context_is_named_field_by_field():
    """The compiled core reads the automaton through a Context of named
    fields: each is the automaton's own object, and a missing or unknown
    field is refused by name (no positional order to keep in step)."""
    from tokendfa.analysis import _lazycore

    dfa = LazyByteDFA("[a-c]+x?")
    context = dfa._core_context
    assert isinstance(context, _lazycore.Context)
    assert context.cuts is dfa._cuts and context.eps is dfa._nfa.eps and context.wide_ends is dfa._wide_ends
    assert context.resolved is dfa._nfa.resolved and context.max_states == dfa.max_states
    fields = {name: getattr(context, name) for name in (
        "dfa", "cuts", "shape_cuts", "steps", "closures", "local_closures", "ids", "kernels",
        "stride", "bounded", "check", "py_closure", "py_cut_of", "py_shape_cut", "py_local_closure",
        "py_discover", "eps", "edges", "calls", "ends", "final", "max_states", "pushes",
        "stack_parent", "stack_top", "stack_depth", "resolved", "start_of", "enter", "wide_ends", "cut_bases")}
    again = _lazycore.Context(**fields)
    assert again.steps is dfa._steps
    with pytest.raises(TypeError, match="'kernels' is missing"):
        _lazycore.Context(**{k: v for k, v in fields.items() if k != "kernels"})
    with pytest.raises(TypeError, match="no field named 'kernel'"):
        _lazycore.Context(**fields, kernel=1)
    with pytest.raises(TypeError, match="keyword only"):
        _lazycore.Context(*fields.values())
    with pytest.raises(TypeError, match="Context"):
        _lazycore.closure(tuple(fields.values()), 0)
    # the core serves through it: "a" leads somewhere live, "x" first is dead
    assert dfa.step(dfa.initial, ord("a")) != 0 and dfa.step(dfa.initial, ord("x")) == 0


def test_prepare_for_lazy_indexes_only_never_calls_the_encoder():
    """``prepare(eager=False)`` (what the vLLM processor calls) makes the lazy
    engine's tables but never runs the tokenizer: loading Gemma 3's encoder
    from tokenizer.json is most of a second a lazy server does not need."""
    qwen = cached_vocabulary("qwen2.5")
    calls = []

    def encoder(text):
        calls.append(text)
        return qwen.encode(text)

    vocab = Vocabulary(qwen.tokens, qwen.eos_token_ids, name="qwen2.5 counted", encoder=encoder)
    vocab.prepare(eager=False)
    assert lazy_module.tables_ready(vocab) and calls == []
    vocab.prepare()
    assert calls  # the full prepare warms the encoder up


@pytest.mark.skipif(lazydfa_module._lazycore is None, reason="the compiled core's lock (TOKENDFA_NATIVE=0 runs the class)")
def test_the_compiled_resolving_lock_excludes_and_waits_without_the_gil():
    """_lazycore.Exclusive, the resolving lock with the compiled core: a
    second taker waits until the holder releases it, and waits without the
    GIL (the holder's thread runs on meanwhile; a wait holding it would
    hang here); a release of a lock not held is refused, as
    threading.Lock refuses it."""
    import time

    lock = LazyByteDFA(r"a+").resolving()
    assert type(lock) is lazydfa_module._lazycore.Exclusive
    with pytest.raises(RuntimeError):
        lock.__exit__(None, None, None)
    entered: list[float] = []

    def take() -> None:
        with lock:
            entered.append(time.monotonic())

    lock.__enter__()
    waiter = threading.Thread(target=take)
    waiter.start()
    time.sleep(0.2)
    assert not entered  # still waiting: the lock is held
    released = time.monotonic()
    lock.__exit__(None, None, None)
    waiter.join(30)
    assert entered and entered[0] >= released
    with lock:  # and free again
        pass


def test_a_definition_source_is_recognised_by_the_protocol_members():
    # _LazyNFA looks the protocol's members up itself (typing's isinstance walks
    # the protocol on every call): the two lists must stay the same
    import typing

    assert set(lazydfa_module._SOURCE_MEMBERS) == set(typing._get_protocol_attrs(lazydfa_module.DefinitionSource))


def test_the_collector_stays_paused_while_any_automaton_resolves():
    """Resolving pauses the process's cyclic collector; two automata's
    sections that overlap (two threads, here nested on one) keep it paused
    until the last one ends, and it comes back on only if it was on."""
    import gc

    first, second = LazyByteDFA(r"a+"), LazyByteDFA(r"b+")
    was_on = gc.isenabled()
    try:
        gc.enable()
        first.resolving().__enter__()
        second.resolving().__enter__()
        first.resolving().__exit__(None, None, None)
        assert not gc.isenabled()  # the second is still resolving
        second.resolving().__exit__(None, None, None)
        assert gc.isenabled()
        gc.disable()
        with first.resolving():
            pass
        assert not gc.isenabled()  # a collector the caller turned off stays off
    finally:
        (gc.enable if was_on else gc.disable)()


# --- a loop state with a partner (LazyIndex._pair_row) ----------------------------------

def _counting_pair_rows(monkeypatch) -> list:
    """A list that gets the ends of each row served as a pair's."""
    served = []
    original = LazyIndex._pair_row

    def counted(self, *args):
        found = original(self, *args)
        if found is not None:
            served.append(found[0].ends)
        return found

    monkeypatch.setattr(LazyIndex, "_pair_row", counted)
    return served


def test_pair_rows_are_the_eager_rows(native, monkeypatch):
    """In ``[!-~]*[a-z]`` the letters lead from the loop state to a partner
    and every other character back: a token of those characters ends where
    its last one leads. The rows that say so with no walk are the eager
    index's, and name exactly the states their tokens end in."""
    monkeypatch.setattr(lazy_tables, "_LOOP_MIN_TOKENS", 1)  # the toy vocabulary's tail sets are kept
    served = _counting_pair_rows(monkeypatch)
    from tokendfa import Vocabulary
    printable = [bytes([b]) for b in range(0x21, 0x7F)]
    longer = [b"ab", b"a1", b"1a", b"12", b"a!b", b"!!", b'x"y', b"Zq", b"qZ", b"q\xc3\xa9", b"\xc3\xa9", b"9a9a"]
    tokens = printable + longer + [None]
    vocab = Vocabulary(tokens, eos_token_ids=len(tokens) - 1)
    pattern = r"[!-~]*[a-z]"
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    eager = Index.from_regex(pattern, vocab, lazy=False)
    assert lockstep(lazy, eager) == 2
    assert served and all(len(ends) == 2 for ends in served)
    for state, successors in lazy._successors.items():  # exactly the states some token reaches
        reached = {lazy.advance(state, t) for t in lazy.get_tokens(state).tolist() if t not in lazy.eos_token_ids}
        assert reached == set(successors.tolist())
    assert lazy.complete().arrays.equals(eager.arrays)


def test_a_pair_row_names_only_the_ends_its_tokens_have(native, monkeypatch):
    """Where no token of the pair's class ends with a letter but the
    single letters, the first row (whose first byte is not a letter) has
    tokens that all end in the loop state: the partner is not named
    there."""
    monkeypatch.setattr(lazy_tables, "_LOOP_MIN_TOKENS", 1)
    served = _counting_pair_rows(monkeypatch)
    from tokendfa import Vocabulary
    printable = [bytes([b]) for b in range(0x21, 0x7F)]
    tokens = printable + [b"a1", b"b!", b"12", b"1+", b"+1", b"-_", None]
    vocab = Vocabulary(tokens, eos_token_ids=len(tokens) - 1)
    pattern = r"[!-`{-~][!-~]*[a-z]"
    lazy = Index.from_regex(pattern, vocab, lazy=True)
    eager = Index.from_regex(pattern, vocab, lazy=False)
    lockstep(lazy, eager)
    assert sorted(len(ends) for ends in served) == [1, 2, 2]
    for state, successors in lazy._successors.items():
        reached = {lazy.advance(state, t) for t in lazy.get_tokens(state).tolist() if t not in lazy.eos_token_ids}
        assert reached == set(successors.tolist())


@pytest.mark.slow
def test_pair_rows_of_a_string_pattern_are_the_eager_rows_qwen(native, monkeypatch):
    """Github_easy o21855's pattern: inside the string, ``[a-z]+$`` makes
    a loop state and a partner; its rows are served as a pair's (a JSON
    string's tail set, ~6k tokens walked where the loop left 88k) and are
    the eager index's."""
    served = _counting_pair_rows(monkeypatch)
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": r"^(\{[a-z]+\})|([a-z]+)$"}},
              "required": ["p"], "additionalProperties": False}
    vocab = cached_vocabulary("qwen2.5")
    lazy = Index.from_schema(schema, vocab, lazy=True)
    eager = Index.from_schema(schema, vocab, lazy=False)
    instances = [{"p": "{resource}"}, {"p": "a.b-c d"}, {"p": "{x}y"}, {"p": "é日a"}, {"p": "{ab}\\n"}]
    assert walk_masks(lazy, vocab, [i for i in instances if i["p"] != "{ab}\\n"]) == \
        walk_masks(eager, vocab, [i for i in instances if i["p"] != "{ab}\\n"])
    assert served
    assert lockstep(lazy, eager, max_pairs=30) >= 20


def test_the_lazy_byte_dfa_keeps_few_enough_instance_attributes_to_share_keys():
    """A lazy byte automaton keeps at most 29 attributes in its dict: past
    that CPython 3.11 gives each instance a dict of its own (an instance's
    keys are shared with its class up to 30, less one per instance made
    before a key is added), and no ``self.method(...)`` call site of the
    class specialises. A new attribute goes somewhere else (``_nfa``)."""
    vocab = cached_vocabulary("qwen2.5")
    index = Index.from_schema(PERSON, vocab, lazy=True)
    Guide(index).get_mask()
    dfa = index.byte_dfa
    assert dfa.num_states > 2 and dfa.pattern and dfa.max_depth is None
    assert len(vars(dfa)) <= 29, sorted(vars(dfa))
