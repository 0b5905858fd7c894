"""Keywords the compiler does not know are annotations: ``x-*`` extensions change nothing.

The compiler once carried its internal forms as dicts with ``x-*`` keys
(``x-types``, ``x-all``, ``x-string-regex``, ...), and a user's schema that
held one of those keys (OpenAPI writes its extensions as ``x-...``) was
obeyed, or crashed the compiler. Each case here is a schema with such keys,
checked three ways: its regex is the regex of the same schema without them,
every valid instance (by ``jsonschema``) is accepted, every invalid one is
rejected.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from tokendfa.schema.api import instance_text
from tokendfa.schema.api import regex_from_schema

INTEGERS_ONLY = {"type": "integer"}

# (schema with x- keys, valid instances, invalid instances)
CASES = {
    "x-types narrows nothing": (
        {"type": "string", "x-types": ["integer"]},
        ["abc", ""], [1, None, ["abc"]]),
    "x-string-regex asserts nothing": (
        {"type": "string", "x-string-regex": '"abc"'},
        ["abc", "xyz", ""], [1, {"abc": 1}]),
    "x-all is not a conjunction": (
        {"x-all": [{}]},
        [1, "a", None, [1, [2]], {"a": {"b": 1}}], []),
    "x-all holding a schema": (
        {"type": "string", "x-all": [{"type": "integer"}]},
        ["text"], [3]),
    "x-keys in nested properties": (
        {"type": "object", "properties": {
            "a": {"type": "integer", "x-types": ["string"], "x-not-values": [1, 2]},
            "b": {"type": "string", "maxLength": 3, "x-string-regex": '"zz"'}},
         "required": ["a"], "additionalProperties": False},
        [{"a": 1}, {"a": 2, "b": "abc"}], [{"a": "s"}, {"a": 1, "b": "long"}, {"b": "x"}]),
    "x-keys under items": (
        {"type": "array", "items": {"type": "integer", "x-not-values": [1, 2],
                                    "x-not-multiple-of": 2},
         "maxItems": 3, "x-unique": True},
        [[1, 2], [1, 1, 4], []], [["a"], [1, 2, 3, 4], [1.5]]),
    "x-keys in $defs": (
        {"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 20,
                         "x-not-multiple-of": 3, "x-types": ["fraction"]}},
         "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}},
         "additionalProperties": False},
        [{"n": 3}, {"n": 0}, {"n": 20}, {}], [{"n": 21}, {"n": -1}, {"n": 2.5}]),
    "an x-key whose value looks like a compiler form": (
        {"type": "object", "properties": {"a": {"const": 1}},
         "x-some-member": {"names": [], "pattern": "^b", "others": None, "value": None,
                           "pointer": "", "key_schema": None},
         "x-all": [["not", {"type": "object"}]],
         "x-string-regex": "[0-9]+", "x-not-values": [{"a": 1}]},
        [{"a": 1}, {}, {"a": 1, "b": True}], [{"a": 2}, 1, "s"]),
    "x-keys beside combinators": (
        {"anyOf": [{"type": "integer", "x-types": ["null"]}, {"type": "boolean"}],
         "not": {"const": 5, "x-all": [{"const": 6}]}, "x-unique": True},
        [1, True, False, 6], [5, None, "s"]),
}


def without_extensions(schema):
    """The schema with every ``x-*`` key removed, at any depth."""
    if isinstance(schema, dict):
        return {k: without_extensions(v) for k, v in schema.items() if not k.startswith("x-")}
    if isinstance(schema, list):
        return [without_extensions(v) for v in schema]
    return schema


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("name", list(CASES))
def test_extension_keywords_change_nothing(name):
    schema, valid, invalid = CASES[name]
    plain = without_extensions(schema)
    assert plain != schema  # the case does hold x- keys
    result = regex_from_schema(schema, any_depth=2)
    expected = regex_from_schema(plain, any_depth=2)
    assert (result.pattern, result.definitions) == (expected.pattern, expected.definitions)
    validator = jsonschema.Draft202012Validator(schema)
    regex = re.compile(result.regex)
    for value in valid:
        assert validator.is_valid(value), value
        assert regex.fullmatch(instance_text(schema, value)), value
    for value in invalid:
        assert not validator.is_valid(value), value
        assert not regex.fullmatch(compact(value)), value


def test_a_negation_the_compiler_wrote_is_checked_against_literals_exactly():
    # not oneOf(A, B) is "A and B, or neither": the compiler writes each oneOf branch with
    # the other's negation. enum values are checked against those negations too, and
    # jsonschema cannot read what the compiler wrote: it must be evaluated as meant.
    schema = {"not": {"oneOf": [{"minimum": 2}, {"maximum": 2}]}, "anyOf": [{"enum": [1, 2, 3]}]}
    validator = jsonschema.Draft202012Validator(schema)
    assert [v for v in (1, 2, 3) if validator.is_valid(v)] == [2]
    regex = re.compile(regex_from_schema(schema).regex)
    assert [v for v in (1, 2, 3) if regex.fullmatch(str(v))] == [2]


def test_the_cli_builds_a_schema_with_an_x_all_key(tmp_path, capsys):
    from tokendfa import Index
    from tokendfa.cli import main

    schema = tmp_path / "f.json"
    schema.write_text('{"x-all": [{}]}')
    out = tmp_path / "x.tdfa"
    code = main(["build", "--schema", str(schema), "--vocab", "sp32k", "--any-depth", "1",
                 "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    index = Index.load(out)
    assert index.pattern == regex_from_schema({}, any_depth=1).pattern
