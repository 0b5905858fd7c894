"""Scalar leaves (a subschema that says only its type) are stamped from a
process-wide table (``compiler._LEAVES``): the trees and definitions must be
exactly those the general path (absorb, split, emit) writes, in every layout
and draft, and for every kind of schema around the leaves."""

from __future__ import annotations

import pytest

from tokendfa.analysis.regex_tree import to_regex
from tokendfa.schema import compiler
from tokendfa.schema.api import regex_from_schema

LEAF_TYPES = ["string", "integer", "number", "boolean", "null", ["string", "null"],
              ["integer", "boolean"], ["number", "string", "null"]]

SCHEMAS = [
    {"type": "object", "properties": {
        f"p{i}": {"type": t, "description": f"leaf {i}"} for i, t in enumerate(LEAF_TYPES)},
     "required": ["p0", "p3"], "additionalProperties": False},
    {"type": "array", "items": {"type": "number", "title": "n"}},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
    {"anyOf": [{"type": "string"}, {"type": "integer", "examples": [1]}]},
    # beside a leaf, keywords that are not leaves: each is compiled the general way
    {"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 3}, "b": {"type": "string"},
        "c": {"type": "integer", "minimum": 2}, "d": {"type": "integer"},
        "e": {"type": "string", "format": "date"}, "f": {"type": "string", "enum": ["x", "y"]},
        "g": {"type": "string", "$comment": "annotation"}, "h": {"type": "string", "x-kind": 3},
        "i": {"type": "string", "uniqueItems": True}}},
    {"$defs": {"s": {"type": "string"}}, "type": "object",
     "properties": {"r": {"$ref": "#/$defs/s"}, "s": {"type": "string"}}},
]


def _compiled(schema, draft, **options):
    if draft is not None and isinstance(schema, dict):
        schema = dict(schema, **{"$schema": draft})
    result = regex_from_schema(schema, **options)
    return (to_regex(result.tree, result.tree_definitions), result.notes, result.widenings)


_DRAFTS = [None, "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"]


@pytest.mark.parametrize("options", [
    {}, {"whitespace": "flexible"}, {"whitespace": "pretty"},
    {"share_values": True, "share_free_levels": True, "share_counts": True},
], ids=["compact", "flexible", "pretty", "lazy-sharing"])
@pytest.mark.parametrize("number, draft", [
    (number, draft) for number in range(len(SCHEMAS)) for draft in _DRAFTS
    if draft is None or number != 2])   # schema 2's prefixItems is 2020-12 only
def test_stamped_leaves_are_the_general_trees(monkeypatch, number, options, draft):
    schema = SCHEMAS[number]
    stamped = _compiled(schema, draft, **options)
    stamped_again = _compiled(schema, draft, **options)   # now from the table
    monkeypatch.setattr(compiler.Compiler, "_typed_leaf", lambda self, sub, depth: compiler._NOT_LEAF)
    general = _compiled(schema, draft, **options)
    assert stamped == general
    assert stamped_again == general


def test_leaves_are_kept_once_per_options():
    compiler._LEAVES.clear()
    regex_from_schema({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "description": "x"}, "c": {"type": "integer"}}})
    assert sorted(key[0] for key in compiler._LEAVES) == ["integer", "string"]
    regex_from_schema({"type": "string"}, whitespace="flexible")
    assert len(compiler._LEAVES) == 3   # another layout: another tree


RESOLVED = [
    {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "$ref"]}}},
    {"type": "object", "properties": {"a": {"$id": "https://example.com/a", "type": "integer"}}},
    {"$id": "https://example.com/root", "type": "array", "items": {"type": "string"}},
    {"$defs": {"s": {"type": "string", "minLength": 2}}, "properties": {"r": {"$ref": "#/$defs/s"}}},
    {"type": "object", "properties": {"a": {"type": "string"}},
     "dependentSchemas": {"a": {"required": ["b"]}}},
    # a property named "$ref" is an object's key "$ref": counted (the check reads keys only)
    {"type": "object", "properties": {"$ref": {"type": "integer"}}},
    {"$defs": {"s": {"type": "string"}}, "anyOf": [{"type": "null"}, {"$ref": "#/$defs/s"}]},
]


@pytest.mark.parametrize("number", range(len(RESOLVED)))
def test_schemas_without_references_share_one_resolver(monkeypatch, number):
    # api._resolver reads a schema that looks nothing up with one resolver made
    # once; the trees are those of a resolver made for the schema
    from tokendfa.schema import api

    schema = RESOLVED[number]
    shared = _compiled(schema, None)
    calls = []
    original = api._resolver
    monkeypatch.setattr(api, "_resolver", lambda schema, meta_uri, registry, references: (
        calls.append(references) or original(schema, meta_uri, registry, True)))
    assert _compiled(schema, None) == shared
    # the schemas with a $ref look something up (one inside an anyOf's list); so may
    # one with a property named "$ref" (a key); a string "$ref" elsewhere (an enum
    # value) is no reference
    assert calls and set(calls) == {number in (3, 5, 6)}   # one call a compilation tried
