"""The direct schema front end (tokendfa.schema.direct) gives what the general path gives, or declines.

``regex_from_schema`` with a lazy index's options (what ``Index.from_schema``
passes) first asks :func:`tokendfa.schema.direct.compile_direct`; each test
compiles a schema with the hook on and off (``direct.ENABLED``) and holds
the results equal: the same tree (the same interned object), definitions in
the same order, deferred pieces, notes, widenings and dialect. Whether the
direct path took the schema is read from the result (its deferred source,
or a recording of ``compile_direct``), so that a case meant to be taken
fails when it is declined, and one meant to be declined fails when it is
taken. ``benchmarks/direct_equality.py`` runs the same comparison over
every JSONSchemaBench schema and the JSON-Schema-Test-Suite.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import pytest
from tokendfa.analysis.errors import TokenDFAError
from tokendfa.schema import direct
from tokendfa.schema.api import regex_from_schema

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))
LAZY = {"max_recursion_depth": 3, "any_depth": 32, "state_budget": None, "share_free_levels": True,
        "share_counts": True, "share_values": True, "defer_recursion": True}


@pytest.fixture(autouse=True, scope="module")
def _free_values():
    # the free values' table, as a warm process has it (the direct path declines without it)
    regex_from_schema({"type": "object"}, **LAZY)


def _result_or_error(schema, options):
    try:
        return regex_from_schema(schema, **options)
    except TokenDFAError as exc:
        return exc


def _both(schema, **options):
    """(what the direct path returned, or None; the general path's result or error)."""
    options = {**LAZY, **options}
    taken = []
    original = direct.compile_direct

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        taken.append(result)
        return result

    direct.compile_direct = recording
    try:
        got = _result_or_error(schema, options)
    finally:
        direct.compile_direct = original
    direct.ENABLED[0] = False
    try:
        want = _result_or_error(schema, options)
    finally:
        direct.ENABLED[0] = True
    chosen = taken[0] if taken else None
    if chosen is not None:
        assert got is chosen
    return chosen, got, want


def _assert_same(want, got) -> None:
    assert not isinstance(want, Exception), want
    assert want.tree is got.tree
    assert (want.widenings, want.notes, want.draft) == (got.widenings, got.notes, got.draft)
    assert list(want.tree_definitions.items()) == list(got.tree_definitions.items())
    assert (want.deferred is None) == (got.deferred is None)
    if want.deferred is not None:
        pieces = list(want.deferred.compiler.pieces)
        assert pieces == list(got.deferred.compiler.pieces)
        for key in pieces + list(want.tree_definitions):
            assert want.deferred.defines(key) and got.deferred.defines(key)
            assert want.deferred.matches_something(key) == got.deferred.matches_something(key)
        assert list(want.deferred.everything().items()) == list(got.deferred.everything().items())
        assert want.pattern == got.pattern and want.definitions == got.definitions


def _taken_and_equal(schema, **options):
    chosen, got, want = _both(schema, **options)
    assert chosen is not None, "declined"
    _assert_same(want, got)
    return got


def _declined(schema, **options):
    chosen, got, want = _both(schema, **options)
    assert chosen is None, "taken"
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want)
    else:
        _assert_same(want, got)


D4 = "http://json-schema.org/draft-04/schema#"
OBJECT = {"type": "object", "properties": {
    "name": {"type": "string", "description": "who"}, "age": {"type": "integer"},
    "score": {"type": "number"}, "on": {"type": "boolean"}, "none": {"type": "null"},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age"]}


@pytest.mark.parametrize("schema", [
    OBJECT,
    {**OBJECT, "additionalProperties": False},
    {**OBJECT, "additionalProperties": {"type": "integer"}},
    {**OBJECT, "additionalProperties": True},
    {"type": "object", "required": ["a", "b"]},                        # names required, undeclared
    {"type": "object", "properties": {"a": {}}, "required": ["z"], "additionalProperties": {"type": "string"}},
    {"type": "object"},
    {"type": "array"},
    {"type": ["string", "null"]},
    {"type": ["integer", "number", "object"], "properties": {"a": {"type": "string"}}},
    {"type": "string", "format": "date-time"},                          # narrowed: a note
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "int64"},                              # unknown: a note
    {"format": "date"},                                                 # every type, a formatted string
    {"enum": ["a", 1, True, None, "b"]},                                # mixed types
    {"type": "string", "enum": ["a", 1, "b", None]},                    # the others left out
    {"type": ["integer", "null"], "enum": [1, "x", None, -20]},
    {},
    {"title": "anything", "x-note": 3, "nullable": True},              # annotations: the free value
    {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"a": {"type": "integer"}}}]},
    {"description": "d", "anyOf": [{"$ref": "#/definitions/a"}, {"type": "null"}],
     "definitions": {"a": {"type": "object", "properties": {"x": {"$ref": "#/definitions/b"}},
                           "additionalProperties": False},
                     "b": {"type": "string", "format": "email"}}},
    {"$ref": "#/$defs/root", "$defs": {"root": {"type": "array", "items": {"$ref": "#/$defs/leaf"}},
                                       "leaf": {"enum": ["x", "y"]}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", **OBJECT},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a/b~c": {"type": "string", "format": "ipv4"}}},  # pointer escapes
    {"type": "object", "properties": {"nested": OBJECT, "again": OBJECT}},
    {"type": "string", "const": "tools/list"},
    {"type": ["string", "null"], "minLength": 1, "maxLength": 20},
    {"type": "string", "maxLength": 255},                               # below the shared counts
    {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 8},
    {"type": "string", "pattern": "ab"},                                # unanchored
    {"type": "integer", "minimum": 0},
    {"type": "number", "minimum": -1.5, "maximum": 100},
    {"type": ["integer", "string"], "maximum": 7, "minLength": 0},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "array", "minItems": 2, "maxItems": 4},
    {"minLength": 0},                                                   # constrains nothing
    {"$id": "http://example.com/s.json", "type": "object",
     "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "integer"}}},
    {"type": "object", "self": {"vendor": "x", "format": "jsonschema"}},  # an annotation's JSON
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}}, "x-extra": [{"n": 1}]},
    # oneOf whose branches' types never meet: written as anyOf is, the pointers under /oneOf
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},              # Kubernetes' int-or-string
    {"oneOf": [{"type": "string"}, {"type": "number"}]},
    {"oneOf": [{"type": "string"}]},
    {"description": "d", "oneOf": [{"type": "string", "format": "date"},
                                   {"type": "number", "minimum": 0}, {"type": "null"}]},
    {"oneOf": [{"type": ["string", "null"], "maxLength": 3},
               {"type": "array", "items": {"oneOf": [{"type": "boolean"}, {"type": "object"}]}}]},
    {"type": "object", "properties": {"port": {"oneOf": [
        {"type": "string", "pattern": "^[a-z]+$"}, {"type": "integer", "maximum": 65535}]}},
     "required": ["port"], "additionalProperties": False},
    {"oneOf": [{"type": "string", "enum": ["a", 1]}, {"type": "integer", "enum": [1, "a"]}]},
    # draft 4's root "id" (its "$id"): the base URI local references are read under
    {"$schema": D4, "id": "http://example.com/s.json#", "type": "object",
     "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "integer"}}},
    {"$schema": D4, "id": "http://example.com/s.json", "type": "string", "format": "date"},
    {"$schema": "http://json-schema.org/draft-04/schema", "id": "schema.json", "type": "object",
     "properties": {"b": {"$ref": "#/definitions/b"}}, "definitions": {"b": {"enum": ["x"]}}},
    {"$schema": D4, "id": "urn:example:s", "anyOf": [{"$ref": "#/definitions/a"}, {"type": "null"}],
     "definitions": {"a": {"type": "array", "items": {"type": "string"}}}},
])
def test_taken_and_equal(schema):
    _taken_and_equal(schema)


@pytest.mark.parametrize("schema", [
    {"type": "object", "required": []},                     # empty required: draft 4 refuses it
    {"type": "string", "title": 5},                         # an annotation of the wrong type
    {"type": "string", "description": ["x"]},
    {"type": "string", "examples": "x"},
    {"type": "string", "format": 3},
    {"type": "object", "required": ["a", "a"]},             # not unique
    {"type": ["string", "string"]},
    {"type": []},
    {"type": "strin"},
    {"type": "string", "minLength": 1, "format": "date"},   # lengths beside a format
    {"type": "string", "maxLength": 1024},                  # a shared count
    {"type": "string", "minLength": 1.5},
    {"type": "string", "minLength": -1},
    {"type": "string", "maxLength": 2, "minLength": 3},     # no string
    {"type": "string", "pattern": "(?<=a)b"},               # a pattern not written exactly
    {"type": "string", "pattern": 5},
    {"type": "integer", "minimum": 5, "maximum": 1},
    {"type": "integer", "minimum": "0"},
    {"type": "integer", "exclusiveMinimum": 0},             # a keyword not covered
    {"type": "array", "maxItems": 0},
    {"type": "array", "minItems": 3, "maxItems": 2},
    {"type": "string", "const": "a", "enum": ["a"]},
    {"type": "object", "self": {"$ref": "#/definitions/x"}},
    {"type": "object", "properties": {"a": {"type": "string", "not": {"pattern": "^a"}}}},
    {"enum": [1.5, 2]},                                     # floats: the check is the validator's
    {"enum": []},
    {"enum": ["a", "a"]},
    {"type": "string", "enum": ["a"], "format": "date"},
    {"type": "integer", "properties": {"a": {"type": "string"}}},   # not compiled, so not checked
    {"type": "object", "properties": {"a": True}},
    {"type": "object", "x-extra": {"nested": {"$ref": "#"}}},  # a reference the recursion search reads
    {"type": "object", "definitions": {"unused": {"type": "string"}}},
    {"$ref": "#/definitions/a", "definitions": {"a": {"type": "array", "items": {"$ref": "#/definitions/a"}}}},
    {"$ref": "#/definitions/missing", "definitions": {}},
    {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"anyOf": [{}, {"type": "string"}]},
    {"$schema": "http://example.com/unknown", "type": "string"},
    {"type": "string", "$id": "http://example.com/s#frag"},   # a fragment: 2019-09 on refuse it
    {"type": "object", "properties": {"a": {"$id": "http://example.com/a", "type": "string"}}},
    {"oneOf": [{"type": "number"}, {"type": "integer"}]},       # types that meet: negations
    {"oneOf": [{"type": ["string", "null"]}, {"type": "null"}]},
    {"oneOf": [{"type": "string"}, {"enum": ["a", 1]}]},        # a branch without a type
    {"oneOf": [{"type": "string"}, {}]},
    {"oneOf": [{"$ref": "#/definitions/a"}, {"type": "null"}], "definitions": {"a": {"type": "string"}}},
    {"type": "object", "oneOf": [{"type": "object", "required": ["a"]}, {"type": "string"}]},
    {"anyOf": [{"type": "string"}], "oneOf": [{"type": "integer"}]},
    {"oneOf": []},
    {"oneOf": {"type": "string"}},
    {"oneOf": [{"type": "string"}, "x"]},
    {"oneOf": [{"type": "strin"}, {"type": "null"}]},
    {"oneOf": [{"type": "string", "oneOf": [{"type": "string"}]}, {"type": "null"}]},
    {"oneOf": [{"type": "integer", "minimum": 3, "maximum": 1}, {"type": "string"}]},  # as alone
    {"id": "http://example.com/s.json", "type": "string"},     # "id" outside draft 4: not read
    {"$schema": "http://json-schema.org/draft-07/schema#", "id": "http://example.com/s", "type": "string"},
    {"$schema": D4, "id": "#root", "type": "string"},           # a fragment: a plain-name anchor
    {"$schema": D4, "id": "http://example.com/s#frag", "type": "string"},
    {"$schema": D4, "id": "", "type": "string"},
    {"$schema": D4, "id": None, "type": "string"},
    {"$schema": D4, "id": 5, "type": "string"},
    {"$schema": D4, "id": "http://example.com/a", "$id": "http://example.com/b", "type": "string"},
    {"$schema": D4, "type": "object", "properties": {"a": {"id": "http://example.com/a", "type": "string"}}},
    {"$schema": D4, "id": "http://example.com/s", "$ref": "#/definitions/a",
     "definitions": {"a": {"id": "http://example.com/a", "type": "string"}}},
])
def test_declined(schema):
    _declined(schema)


def test_other_options_take_the_general_path():
    # pretty layout, an eager build's options: never asked of the direct path
    for options in ({"whitespace": "pretty"}, {"defer_recursion": False}, {"state_budget": 1000}):
        # (compiled once first: a process's first free value of a layout is built, and its
        # definitions come in another order than when taken from the table afterwards)
        regex_from_schema(OBJECT, **{**LAZY, **options})
        chosen, got, want = _both(OBJECT, **options)
        assert chosen is None
        _assert_same(want, got)


def test_surrogate_pair_in_a_name_is_declined_and_reported_by_the_general_path():
    _declined({"type": "object", "properties": {"\ud83d\ude00": {"type": "string"}}})


def _bench_sample(count: int, seed: int):
    records = []
    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                records.append((f"{path.name.split('.')[0]}:{i}", line))
    chosen = random.Random(seed).sample(records, count)
    return [(name, json.loads(line)["schema"]) for name, line in chosen]


@pytest.mark.slow
@pytest.mark.skipif(not BENCH.is_dir(), reason=f"JSONSchemaBench not found at {BENCH}")
def test_real_schemas_equal():
    taken = 0
    for name, schema in _bench_sample(300, seed=29):
        if not isinstance(schema, dict):
            continue
        chosen, got, want = _both(schema)
        if chosen is None:
            continue
        taken += 1
        try:
            _assert_same(want, got)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    # 197 of these 300 are taken (5,237 of JSONSchemaBench's 7,952): fewer is a regression
    assert taken >= 197, taken


@pytest.mark.slow
@pytest.mark.skipif(not BENCH.is_dir(), reason=f"JSONSchemaBench not found at {BENCH}")
def test_masks_equal_end_to_end():
    """The lazy index of a schema the direct path takes serves the same masks
    as the general path's, along each valid instance of the record."""
    from conftest import cached_vocabulary
    from tokendfa import Guide, Index

    vocab = cached_vocabulary("qwen2.5")
    compared = 0
    for name, schema in _bench_sample(60, seed=35):
        if not isinstance(schema, dict) or _both(schema)[0] is None:
            continue
        record_tests = _tests_of(name)
        masks = []
        for enabled in (True, False):
            direct.ENABLED[0] = enabled
            try:
                index = Index.from_schema(schema, vocab)
            finally:
                direct.ENABLED[0] = True
            seen = []
            for case in record_tests:
                if not case["valid"]:
                    continue
                guide = Guide(index)
                for token in vocab.encode(json.dumps(case["data"], separators=(",", ":"),
                                                     ensure_ascii=False))[:40]:
                    seen.append(guide.get_mask().tobytes())
                    if not index.is_allowed(guide.state, token):
                        break
                    guide.advance(token)
            seen.append(Guide(index).get_mask().tobytes())
            masks.append(seen)
        assert masks[0] == masks[1], name
        compared += 1
    assert compared >= 38, compared   # the schemas of this sample the direct path takes


def _tests_of(name: str) -> list:
    source, _, line = name.rpartition(":")
    with gzip.open(BENCH / f"{source}.jsonl.gz", "rt", encoding="utf-8") as handle:
        for i, text in enumerate(handle):
            if i == int(line):
                return json.loads(text).get("tests", [])
    return []
