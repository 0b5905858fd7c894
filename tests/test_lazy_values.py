"""A lazy schema index compiles an object's values and additional keys when a match reaches them.

With ``lazy=True`` every value of a schema is a shared definition
(``share_values``) and the additional keys of an object are a piece
computed when first called (:meth:`tokendfa.schema.compiler.Compiler.deferred_piece`);
the lazy automaton decides whether a callee matches something from its
tree, without compiling it. The first mask then builds the object's keys
and calls, not the schema. The index must still be the eager one, array
for array, and a definition that matches nothing must still be found so.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TOY_TOKENS
from tokendfa import Guide, Index
from tokendfa.analysis.lazydfa import LazyByteDFA
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.construct import byte_dfa_from_regex
from tokendfa.analysis.regex_tree import NOTHING, Call, Text, alt, chars, concat

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}

# nested objects with open additional properties, keys the toy vocabulary spells
NESTED = {"type": "object", "properties": {
    "a": {"type": "object", "properties": {"b": {"type": "integer", "minimum": 0, "maximum": 9},
                                           "c": {"type": "string", "maxLength": 3}}},
    "x": {"type": "object", "properties": {"c": {"type": "array", "items": {"type": "integer"}}}},
    "b": {"type": "string", "minLength": 1, "maxLength": 4}}}


def _nfa(index):
    return index._dfa._nfa


def test_first_mask_compiles_the_object_not_its_values(toy_vocab):
    lazy = Index.from_schema(NESTED, toy_vocab, lazy=True, any_depth=1)
    nfa = _nfa(lazy)
    compiler = nfa.source.compiler
    Guide(lazy).get_mask()
    compiled = sum(1 for start in nfa.start_of if start >= 0)
    assert compiled < len(nfa.placeholders)  # the values of a and x are not compiled yet
    waiting = len(compiler.pieces)
    assert waiting >= 2  # nor the additional keys of a and x
    guide = Guide(lazy)
    for byte in b'{"a":{"':
        guide.advance(TOKEN[bytes([byte])])
        guide.get_mask()
    assert len(compiler.pieces) < waiting  # the keys of a, reached
    assert sum(1 for start in nfa.start_of if start >= 0) > compiled
    eager = Index.from_schema(NESTED, toy_vocab, any_depth=1, lazy=False)
    assert lazy.complete().arrays.equals(eager.arrays)


@pytest.mark.parametrize("schema", [
    NESTED,
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
     "required": ["a"], "additionalProperties": {"type": "object"}},
    {"type": "object", "properties": {"x": {"type": "object", "properties": {
        "bc": {"type": "integer"}}, "required": ["bc"]}}, "additionalProperties": False},
])
def test_lazy_values_complete_to_the_eager_index(schema, toy_vocab):
    lazy = Index.from_schema(schema, toy_vocab, lazy=True, any_depth=1)
    eager = Index.from_schema(schema, toy_vocab, any_depth=1, lazy=False)
    assert lazy.complete().arrays.equals(eager.arrays)


@pytest.mark.parametrize("empty", [NOTHING, chars([(0xD800, 0xDFFF)]), Text("a\ud800"),
                                   concat(Text("a"), Call("k2"))])
def test_a_callee_that_matches_nothing_is_found_empty(empty):
    # decided on its tree where a match is plain, else compiled and searched:
    # "a" then an empty callee is dead, so only "b" is accepted
    tree = alt([concat(Text("a"), Call("k1")), Text("b")])
    definitions = {"k1": concat(Text("c"), empty), "k2": concat(Text("d"), NOTHING)}
    transitions, finals = LazyByteDFA(tree, definitions=definitions).explore()
    # dead is empty: every state the lazy automaton made but the dead one leads to a match
    live = set(np.flatnonzero(finals).tolist())
    grown = True
    while grown:
        grown = False
        for state in range(1, len(transitions)):
            if state not in live and live.intersection(transitions[state].tolist()):
                live.add(state)
                grown = True
    assert live == set(range(1, len(transitions)))
    explored = canonical_byte_dfa(transitions, finals)
    expected = byte_dfa_from_regex("b")
    assert np.array_equal(explored.transitions, expected.transitions)
    assert np.array_equal(explored.finals, expected.finals)
