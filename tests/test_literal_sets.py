"""Literal sets as minimal acyclic automata (tokendfa.analysis.literal_sets).

The automaton built from the strings is held to the regex compiler's
canonical DFA of the same alternation built the Thompson way, array for
array; the regex and schema paths that use it are held to the same
languages and indexes as without it (and, on a 300-value enum, to the
brute-force reference build).
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cached_vocabulary, masks_along
from tokendfa import Guide, Index
from tokendfa.analysis import lazydfa, literal_sets, regex_compiler
from tokendfa.analysis.construct import byte_dfa_from_regex
from tokendfa.analysis.errors import RegexError
from tokendfa.analysis.lazydfa import LazyByteDFA
from tokendfa.analysis.literal_sets import minimal_literal_dfa
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.regex_tree import NOTHING, LiteralSet, literal_set, text as text_node, to_regex
from tokendfa.schema import scalars


@pytest.fixture
def thompson_only(monkeypatch):
    """Alternations of literals built as Thompson branches (the reference here)."""
    def use(on: bool):
        monkeypatch.setattr(regex_compiler, "LITERAL_SET_MIN_BRANCHES", 2 if on else 10**9)
        monkeypatch.setattr(lazydfa, "LAZY_LITERAL_SET_MIN_BRANCHES", 2 if on else 10**9)
    return use


def alternation_of(strings) -> str:
    return "(?:" + "|".join(map(re.escape, strings)) + ")"


def same_dfa(a, b) -> bool:
    return np.array_equal(a.transitions, b.transitions) and np.array_equal(a.finals, b.finals)


def thompson_dfa(strings):
    saved = regex_compiler.LITERAL_SET_MIN_BRANCHES
    regex_compiler.LITERAL_SET_MIN_BRANCHES = 10**9
    try:
        return byte_dfa_from_regex(alternation_of(strings))
    finally:
        regex_compiler.LITERAL_SET_MIN_BRANCHES = saved


# Small alphabets make shared prefixes and suffixes likely; é and 日 are 2 and 3 bytes.
_TEXT = st.text(alphabet=st.sampled_from("ab0é日"), max_size=6)


@pytest.mark.parametrize("construction", ["incremental", "arrays"])
@settings(max_examples=150, deadline=None)
@given(strings=st.lists(_TEXT, min_size=1, max_size=40))
def test_minimal_automaton_is_the_canonical_dfa_of_the_alternation(construction, strings):
    saved = literal_sets._SMALL_SET_BYTES
    literal_sets._SMALL_SET_BYTES = 10**9 if construction == "incremental" else -1
    try:
        literal = minimal_literal_dfa(strings)
    finally:
        literal_sets._SMALL_SET_BYTES = saved
    expected = thompson_dfa(strings)
    assert same_dfa(canonical_byte_dfa(*literal.table()), expected)
    assert same_dfa(literal.byte_dfa(), expected)  # numbered without minimising again
    # minimal already: the canonical form only adds the dead state
    assert literal.num_states == expected.num_states - 1
    # every edge goes forward, the last state is the one final state without edges
    sources = np.repeat(np.arange(literal.num_states), np.diff(literal.starts))
    assert (literal.target > sources).all()
    assert literal.finals[-1] and literal.starts[-1] == literal.starts[-2]
    assert all(literal.accepts(s.encode()) for s in strings)


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, min_size=2, max_size=30), st.sampled_from(["", "x", "(?:ab)+"]))
def test_regex_alternation_built_as_a_literal_set_keeps_the_language(strings, tail):
    pattern = alternation_of(strings) + tail
    saved = regex_compiler.LITERAL_SET_MIN_BRANCHES, lazydfa.LAZY_LITERAL_SET_MIN_BRANCHES
    try:
        regex_compiler.LITERAL_SET_MIN_BRANCHES = 10**9
        expected = byte_dfa_from_regex(pattern)
        regex_compiler.LITERAL_SET_MIN_BRANCHES = lazydfa.LAZY_LITERAL_SET_MIN_BRANCHES = 2
        assert same_dfa(byte_dfa_from_regex(pattern), expected)
        lazy = LazyByteDFA(pattern)
        assert same_dfa(canonical_byte_dfa(*lazy.explore()), expected)
    finally:
        regex_compiler.LITERAL_SET_MIN_BRANCHES, lazydfa.LAZY_LITERAL_SET_MIN_BRANCHES = saved


def test_literal_set_is_used_and_merges_byte_ranges(thompson_only, monkeypatch):
    digits = [str(d) for d in range(10)]
    literal = minimal_literal_dfa([f"v{d}" for d in digits])
    assert literal.num_states == 3
    assert (literal.lo.tolist(), literal.hi.tolist()) == ([ord("v"), ord("0")], [ord("v"), ord("9")])
    # the regex compiler stamps the set in: one NFA state per automaton state but the
    # initial one, against a chain per branch
    # (explored: the rest of a long pattern is a definition compiled when a match
    # reaches it, whose fragment the process keeps: each build starts without)
    words = [f"word{i:03d}" for i in range(200)]

    def nfa_states() -> int:
        monkeypatch.setattr(lazydfa, "_SHARED_FRAGMENTS", lazydfa._SharedFragments())
        dfa = LazyByteDFA(alternation_of(words))
        dfa.explore()
        return dfa.num_nfa_states

    thompson_only(True)
    with_set = nfa_states()
    thompson_only(False)
    assert with_set < nfa_states() / 4


def test_empty_string_empty_set_and_duplicates():
    assert minimal_literal_dfa([]).num_states == 0
    only_empty = minimal_literal_dfa([""])
    assert only_empty.num_states == 1 and only_empty.accepts(b"") and not only_empty.accepts(b"a")
    repeated, once = minimal_literal_dfa(["ab", "ab", b"ab", ""]), minimal_literal_dfa(["", "ab"])
    assert all(np.array_equal(a, b) for a, b in zip(repeated, once))
    assert once.num_states == 3 and once.finals.tolist() == [True, False, True]
    assert literal_set([]) is NOTHING and literal_set(["a", "a"]) == text_node("a")
    assert literal_set(["b", "a", "b"]) == LiteralSet(("a", "b"))



def test_order_and_repeats_do_not_matter_in_a_large_set():
    # sorted distinct members skip the sort: anything else must still be sorted
    words = [f"w{i:05d}" for i in range(1000)]  # 6,000 bytes: the array construction
    built = minimal_literal_dfa(words)
    for other in (words[::-1], words + words[-1:], words[:500] + words[499:]):
        assert all(np.array_equal(a, b) for a, b in zip(minimal_literal_dfa(other), built))
    assert built.accepts(b"w00999") and not built.accepts(b"w01000")


def test_lone_surrogate_is_refused_and_matches_nothing_in_a_regex(thompson_only):
    with pytest.raises(RegexError, match="surrogate"):
        minimal_literal_dfa(["ok", "\ud800x"])
    # a tree's literal set leaves such a member out: it matches nothing
    assert literal_set(["ok", "\udc00", "no"]) == literal_set(["ok", "no"])
    # in a regex a lone surrogate matches nothing: its branch drops out
    pattern = "(?:" + "|".join([f"w{i}" for i in range(10)] + ["\ud800"]) + ")"
    thompson_only(True)
    with_set = byte_dfa_from_regex(pattern)
    thompson_only(False)
    assert same_dfa(with_set, byte_dfa_from_regex(pattern))


def test_literal_set_node_is_the_set():
    members = ["a.b", "c|d", "(x)", "é", "", "[\\]"]
    node = literal_set(members)
    assert node.__class__ is LiteralSet
    text = to_regex(node)
    assert all(re.fullmatch(text, m) for m in members)
    assert not re.fullmatch(text, "axb")
    # built from its members in both compilers
    eager = byte_dfa_from_regex(node)
    assert same_dfa(eager, thompson_dfa(members))
    assert same_dfa(canonical_byte_dfa(*LazyByteDFA(node).explore()), eager)
    definitions = {"\ud801": node}
    pattern = "<\ud801>"
    expected = byte_dfa_from_regex("<(?:" + text + ")>")
    assert same_dfa(byte_dfa_from_regex(pattern, definitions=definitions), expected)
    assert same_dfa(canonical_byte_dfa(*LazyByteDFA(pattern, definitions=definitions).explore()),
                    expected)


def test_literal_set_node_written_as_text_and_pickled():
    import pickle

    from tokendfa.analysis.regex_tree import concat, repeat

    node = literal_set(["b.", "a"])
    assert node is literal_set(["a", "b.", "a"])  # interned, members sorted and distinct
    assert to_regex(concat(text_node("x"), node)) == "x(?:a|b\\.)"
    assert to_regex(repeat(node, 0, None)) == "(?:a|b\\.)*"
    assert pickle.loads(pickle.dumps(node)) == node
    assert node.automaton() is node.automaton()  # built once per node


def test_alternation_of_literals_as_the_whole_pattern_needs_no_nfa(monkeypatch):
    """From LITERAL_SET_MIN_BRANCHES plain literals, the whole pattern is the
    set's minimal automaton numbered (no Thompson NFA, no subsets)."""
    from tokendfa.analysis import construct

    words = [f"{chr(97 + i % 26)}{i}" for i in range(40)]  # no common prefix for re to factor out
    expected = thompson_dfa(words)

    def refuse(*args, **kwargs):
        raise AssertionError("built through the NFA")

    monkeypatch.setattr(construct, "byte_tables_from_regex", refuse)
    assert same_dfa(byte_dfa_from_regex(alternation_of(words)), expected)
    assert same_dfa(byte_dfa_from_regex(literal_set(words)), expected)
    with pytest.raises(AssertionError, match="NFA"):
        byte_dfa_from_regex(alternation_of(words[:20]))  # below the threshold: branches


# --- JSON Schema enums --------------------------------------------------------------------

def enum_values(count: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    words = ["alpha", "beta", "river", "stone", "north", "garden", "é", "日本", 'q"t', "b\\s", "t\tab"]
    values: set[str] = set()
    while len(values) < count:
        code = "".join(rng.choice("ABCDEFGH") for _ in range(rng.randint(1, 3)))
        values.add(f"{code}{rng.randint(0, 999)}-{rng.choice(words)}")
    return sorted(values)


def accepts(index, vocab, text: str) -> bool:
    guide = Guide(index)
    for token in vocab.encode(text):
        if not guide.get_mask()[token >> 5] >> (token & 31) & 1:
            return False
        guide.advance(token)
    return guide.can_end()


def test_enum_of_many_strings_is_a_literal_set_with_the_same_language():
    from tokendfa.schema import regex_from_schema

    values = enum_values(300) + ["\x1bA", "x\x0b"]  # two spellings each: kept as text
    schema = {"enum": values + [1, None, ["a"]]}
    compiled = regex_from_schema(schema)
    sets = [d for d in compiled.tree_definitions.values() if isinstance(d, LiteralSet)]
    assert len(sets) == 1 and len(sets[0].members) == 300
    dfa = byte_dfa_from_regex(compiled.tree, definitions=compiled.tree_definitions)
    # the same automaton from its regex text (the set written out, read back)
    assert same_dfa(dfa, byte_dfa_from_regex(compiled.pattern, definitions=compiled.definitions))
    for value in values + [1, None, ["a"]]:
        assert dfa.accepts(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    assert dfa.accepts(b'"\\u001bA"') and dfa.accepts(b'"\\u001BA"') and dfa.accepts(b"1.0")
    assert not dfa.accepts(b'"AB1-nope"') and not dfa.accepts(b'"' + values[0].encode() + b'x"')
    # the same language as the enum written out as text
    original = scalars.LITERAL_SET_MIN
    scalars.LITERAL_SET_MIN = 10**9
    try:
        text = regex_from_schema(schema)
    finally:
        scalars.LITERAL_SET_MIN = original
    assert not any(isinstance(d, LiteralSet) for d in text.tree_definitions.values())
    assert same_dfa(dfa, byte_dfa_from_regex(text.pattern, definitions=text.definitions))


def test_enum_values_are_checked_against_the_rest_of_the_schema():
    from tokendfa.schema import regex_from_schema

    values = enum_values(200)
    schema = {"allOf": [{"enum": values}, {"maxLength": 9}, {"not": {"const": values[0]}}],
              "type": "string"}
    compiled = regex_from_schema(schema)
    dfa = byte_dfa_from_regex(compiled.pattern, definitions=compiled.definitions)
    for value in values:
        kept = len(value) <= 9 and value != values[0]
        assert dfa.accepts(json.dumps(value, ensure_ascii=False).encode()) == kept, value
    # a type that only some values have: decided per type, still exact
    mixed = regex_from_schema({"type": "integer", "enum": [1, 2.0, 2.5, "a", True, None] + values})
    dfa = byte_dfa_from_regex(mixed.pattern, definitions=mixed.definitions)
    assert dfa.accepts(b"1") and dfa.accepts(b"2") and not dfa.accepts(b"2.5")
    assert not dfa.accepts(b'"a"') and not dfa.accepts(b"true") and not dfa.accepts(b"null")
    # no float among them: one value of each Python type decides for its type
    for types, kept in (("string", values[:3]), (["integer", "null"], [1, None]),
                        (["boolean", "array"], [True, [1]])):
        mixed = regex_from_schema({"type": types, "enum": [1, True, None, [1]] + values})
        dfa = byte_dfa_from_regex(mixed.pattern, definitions=mixed.definitions)
        for value in [1, True, None, [1]] + values:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
            wanted = any(type(k) is type(value) and k == value for k in kept) or \
                isinstance(value, str) and types == "string"
            assert dfa.accepts(text) == wanted, (types, value)


@pytest.mark.slow
def test_enum_of_300_strings_lazy_and_eager_are_the_reference_qwen(monkeypatch):
    from tokendfa.builder import fast

    vocab = cached_vocabulary("qwen2.5")
    values = enum_values(300)
    schema = {"type": "string", "enum": values}
    reference = Index.from_schema(schema, vocab, method="reference", lazy=False)
    eager = Index.from_schema(schema, vocab, lazy=False)
    lazy = Index.from_schema(schema, vocab, lazy=True)
    assert eager.arrays.equals(reference.arrays)
    # walked byte by byte from every state, as a large set is (the trie walk in rounds)
    walked = []
    original = fast.narrow_edges

    def recording(dfa, narrow, vocabulary, max_steps=None):
        walked.append(max_steps)
        return original(dfa, narrow, vocabulary, max_steps)

    monkeypatch.setattr(fast, "narrow_edges", recording)
    monkeypatch.setattr(fast, "EXACT_MIN_STATES", 0)
    assert Index.from_schema(schema, vocab, lazy=False).arrays.equals(reference.arrays)
    assert len(walked) == 1 and walked[0] is not None  # everywhere, and nothing coarse after
    texts = [json.dumps(v, ensure_ascii=False) for v in values[::37]]
    assert masks_along(lazy, vocab, texts, endings=True) == masks_along(eager, vocab, texts, endings=True)
    assert lazy.complete().arrays.equals(reference.arrays)


@pytest.mark.slow
def test_enum_of_60000_strings_qwen():
    vocab = cached_vocabulary("qwen2.5")
    values = enum_values(60_000, seed=11)
    schema = {"type": "string", "enum": values}
    lazy = Index.from_schema(schema, vocab, lazy=True, time_limit=60)
    eager = Index.from_schema(schema, vocab, time_limit=120, lazy=False)
    texts = [json.dumps(v, ensure_ascii=False) for v in values[::6007]]
    assert masks_along(lazy, vocab, texts, endings=True) == masks_along(eager, vocab, texts, endings=True)
    for index in (lazy, eager):
        assert all(accepts(index, vocab, t) for t in texts)
        assert not accepts(index, vocab, '"ABC1000-alpha"')    # codes go to 999
        assert not accepts(index, vocab, texts[0][:-1] + 'x"')
        assert not accepts(index, vocab, texts[0][:-2] + '"')


# --- the eager token build of a mostly narrow automaton --------------------------------

@pytest.mark.parametrize("steps", [10**6, 0])  # the walk byte by byte everywhere, or its fallback
def test_exact_walk_everywhere_is_the_reference_toy(steps, monkeypatch):
    from cases import CASES

    from tokendfa.builder import fast
    from tokendfa.builder import narrow as narrow_module

    vocab = cached_vocabulary("toy")
    monkeypatch.setattr(fast, "EXACT_MIN_STATES", 0)
    monkeypatch.setattr(fast, "EXACT_MIN_NARROW", 0.0)
    monkeypatch.setattr(fast, "EXACT_STEPS_PER_STATE", steps)
    monkeypatch.setattr(fast, "_DIRECT_TOKENS", 0)  # the toy vocabulary is small enough for that
    walked = []
    original = narrow_module.narrow_edges

    def counting(dfa, narrow, vocabulary, max_steps=None):
        if max_steps is not None:
            walked.append(max_steps)
        return original(dfa, narrow, vocabulary, max_steps)

    monkeypatch.setattr(fast, "narrow_edges", counting)
    compared = 0
    for case in CASES:
        try:
            reference = Index.from_regex(case.pattern, vocab, method="reference", lazy=False)
        except Exception:  # noqa: BLE001 - cases the toy vocabulary cannot spell
            continue
        assert Index.from_regex(case.pattern, vocab, lazy=False).arrays.equals(reference.arrays), case.name
        compared += 1
    assert compared >= 10 and walked  # the path was taken


@pytest.mark.slow
def test_enum_of_5000_strings_walked_byte_by_byte_is_the_reference_qwen(monkeypatch):
    from tokendfa.builder import fast

    vocab = cached_vocabulary("qwen2.5")
    rng = random.Random(5)
    values = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
                     + f"-{rng.randint(0, 99)}" for _ in range(5000)})
    schema = {"type": "string", "enum": values}
    walked = []
    original = fast.narrow_edges

    def recording(dfa, narrow, vocabulary, max_steps=None):
        result = original(dfa, narrow, vocabulary, max_steps)
        walked.append((max_steps, int(narrow.sum())))
        return result

    monkeypatch.setattr(fast, "narrow_edges", recording)
    eager = Index.from_schema(schema, vocab, lazy=False)
    assert walked[0][0] is not None and walked[0][1] >= fast.EXACT_MIN_STATES  # walked everywhere
    # the same arrays as the coarse walk (which the tests hold to the reference build)
    monkeypatch.setattr(fast, "EXACT_MIN_STATES", 10**9)
    walked.clear()
    coarse = Index.from_schema(schema, vocab, lazy=False)
    assert walked[0][0] is None
    assert coarse.arrays.equals(eager.arrays)


def test_enum_inside_an_object_is_compiled_when_first_reached_qwen():
    from test_lazy import lockstep

    vocab = cached_vocabulary("qwen2.5")  # byte-level: no alphabet to compile up front
    values = enum_values(200, seed=17)
    schema = {"type": "object", "properties": {"code": {"enum": values}}, "required": ["code"],
              "additionalProperties": False}
    lazy = Index.from_schema(schema, vocab, lazy=True)
    Guide(lazy).get_mask()
    before = lazy.byte_dfa.num_nfa_states
    eager = Index.from_schema(schema, vocab, lazy=False)
    texts = [json.dumps({"code": v}, ensure_ascii=False, separators=(",", ":")) for v in values[::41]]
    assert masks_along(lazy, vocab, texts, endings=True) == masks_along(eager, vocab, texts, endings=True)
    # the set's automaton joined the NFA only when a match reached it
    assert lazy.byte_dfa.num_nfa_states > before + 100
    assert lockstep(lazy, eager, max_pairs=60) >= 30
    assert not accepts(lazy, vocab, '{"code":"' + values[0] + 'x"}')
