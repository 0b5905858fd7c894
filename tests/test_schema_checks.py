"""checks.py answers what jsonschema answers, on every draft, for the keywords it
reproduces, and leaves the rest to jsonschema."""

from __future__ import annotations

import functools
import itertools

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import specification_with
from tokendfa.schema import checks
from tokendfa.schema import compiler as compiler_module
from tokendfa.schema.ir import Sub, enter

DRAFTS = {4: jsonschema.Draft4Validator, 6: jsonschema.Draft6Validator, 7: jsonschema.Draft7Validator,
          2019: jsonschema.Draft201909Validator, 2020: jsonschema.Draft202012Validator}

VALUES = [
    None, True, False, 0, 1, 1.0, 0.0, -1, 1.5, 2, 2.0, 3, 10, -0.5, 1e300, 2 ** 53 + 1, float(2 ** 53),
    2 ** 70, float("nan"), float("inf"),
    "", "a", "ab", "aaa", "é", "\U0001F600\U0001F600", "\U0001F600", "1", "true", "null", "foo", "bar",
    [], [1], [1, 2, 3], [True], [1.0], [[1]], [1, 2, 3, 4, 5],
    {}, {"foo": 1}, {"foo": True}, {"foo": 1.0}, {"bar": "x"}, {"a": 1, "b": 2}, {"x1": 1},
    {"foo": 1, "bar": 2}, {"baz": "quux"}, {"1": [123, 123], "2": [123, 123]}, {"foo": [1]},
]

# every keyword checks.py reproduces, alone and in the combinations the corpus holds
SCHEMAS = [
    True, False, {}, {"title": "t", "x-whatever": [1]}, {"_enum": ["a"]},
    {"type": "integer"}, {"type": "number"}, {"type": ["string", "null"]}, {"type": "boolean"},
    {"type": "object"}, {"type": "array"},
    {"enum": [1, "a", None]}, {"enum": [True]}, {"enum": [1]}, {"enum": [1.0]}, {"enum": [0]},
    {"enum": [False, 0]}, {"enum": [[1, 2, 3]]}, {"enum": [[True]]}, {"enum": [{"foo": 1}]},
    {"enum": [{"foo": True}, "bar"]}, {"enum": [2 ** 53 + 1]}, {"enum": [float(2 ** 53)]},
    {"enum": ["é", "\U0001F600"]}, {"enum": [[1.0], {"a": 1, "b": 2.0}]},
    {"const": 1}, {"const": True}, {"const": [1]}, {"const": {"foo": 1}}, {"const": None},
    {"const": "a"}, {"const": 1.0},
    {"minLength": 2}, {"maxLength": 1}, {"minLength": 1, "maxLength": 2}, {"maxLength": 2.0},
    {"minimum": 1}, {"maximum": 1.5}, {"exclusiveMinimum": 1}, {"exclusiveMaximum": 2},
    {"minimum": 1, "exclusiveMinimum": True}, {"maximum": 2, "exclusiveMaximum": False},
    {"minProperties": 1}, {"maxProperties": 1}, {"minItems": 2}, {"maxItems": 1},
    {"pattern": "^a*$"}, {"pattern": "a"}, {"pattern": "^[0-9]+$"},
    {"properties": {"foo": {"type": "integer"}}},
    {"properties": {"foo": {"type": "integer"}}, "required": ["foo"]},
    {"required": ["foo", "bar"]},
    {"additionalProperties": {"type": "boolean"}},
    {"additionalProperties": False, "properties": {"foo": True}},
    {"additionalProperties": False, "patternProperties": {"^[0-9]$": True, "^b": {}}},
    {"patternProperties": {"^[0-9]$": {"type": "array", "minItems": 2}}},
    {"patternProperties": {"^(1|4)$": False}},
    {"allOf": [{"enum": [{"baz": "quux"}]},
               {"not": {"oneOf": [{"properties": {"bar": True, "baz": True}, "required": ["bar"]},
                                  {"properties": {"foo": True}, "required": ["foo"]}]}}]},
    {"allOf": [{"enum": [1.1]}, {"not": {"type": "array"}}]},
    {"anyOf": [{"type": "object", "properties": {"tag_id": {"type": "string"}}},
               {"type": "string", "enum": ["green"]}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"oneOf": [{"minimum": 2}, {"maximum": 2}]},
    {"not": {"minProperties": 1}}, {"not": {"pattern": "^a*$"}}, {"not": {}},
    {"type": "string", "enum": ["a", "ab", 1], "minLength": 2},
    {"$ref": "#/definitions/d"}, {"$ref": "#/definitions/d", "type": "string"},
    {"$ref": "#/definitions/d", "enum": ["a"]},
    {"oneOf": [{"$ref": "#/definitions/d"}, {"type": "null"}]},
    {"items": {"type": "integer"}}, {"items": [{"type": "integer"}, {"type": "string"}]},
    {"items": True}, {"items": False}, {"items": {}, "additionalItems": False},
    {"items": [{}], "additionalItems": False}, {"items": [{"type": "integer"}], "additionalItems": {"maximum": 2}},
    {"additionalItems": False}, {"items": [True, False], "additionalItems": True},
    {"prefixItems": [{"type": "integer"}], "items": False}, {"prefixItems": [{"enum": [1]}, {}]},
    {"prefixItems": [{}], "items": {"type": "array"}},
    {"not": {"not": {"additionalItems": False, "items": {}}}},
    {"$ref": "#/definitions/e"},
]
DEFINITIONS = {"d": {"type": ["string", "integer"], "maxLength": 2},
               "e": {"anyOf": [{"$ref": "#/definitions/d"}, {"type": "boolean"}]}}
URIS = {4: "http://json-schema.org/draft-04/schema#", 6: "http://json-schema.org/draft-06/schema#",
        7: "http://json-schema.org/draft-07/schema#", 2019: "https://json-schema.org/draft/2019-09/schema",
        2020: "https://json-schema.org/draft/2020-12/schema"}

# keyword sets checks.py must answer itself (its point: no jsonschema in a fresh fork)
ANSWERED = [{"type": "string"}, {"enum": ["a"]}, {"$ref": "#/definitions/d"},
            {"allOf": [{"enum": [1]}, {"not": {"type": "array"}}]},
            {"not": {"additionalProperties": {"type": "boolean"}}},
            {"oneOf": [{"properties": {"bar": True}, "required": ["bar"]}]},
            {"minLength": 1, "maxLength": 3, "pattern": "^a"},
            {"markdownEnumDescriptions": ["x"], "enum": [1]}]


def _setting(draft: int, schema):
    cls = DRAFTS[draft]
    root = {"$schema": URIS[draft], "definitions": DEFINITIONS}
    if isinstance(schema, dict):
        root.update(schema)
    spec = specification_with(URIS[draft])
    registry = Registry().with_resource("urn:root", spec.create_resource(root))
    resolver = registry.resolver(base_uri="urn:root")

    def follow(sub, ref):
        try:
            resolved = sub.resolver.lookup(ref)
        except Exception:  # noqa: BLE001 - unresolvable: left to jsonschema
            return None
        contents, found = resolved.contents, resolved.resolver
        if isinstance(contents, dict):
            found = enter(found, contents)
        return Sub(contents, found, ref)

    context = checks.Context(draft, cls.VALIDATORS,
                             functools.partial(compiler_module._type_test, draft=draft), follow)
    target = root if isinstance(schema, dict) else schema
    validator = cls(target, registry=registry, _resolver=resolver)
    return checks.check_of(target, Sub(target, resolver, ""), context), validator


@pytest.mark.parametrize("draft", sorted(DRAFTS))
@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
def test_a_check_answers_as_jsonschema(draft, schema):
    test, validator = _setting(draft, schema)
    if test is None:
        return  # left to jsonschema: nothing to compare
    for value in VALUES:
        assert test(value) == validator.is_valid(value), (draft, schema, value)


@pytest.mark.parametrize("draft", sorted(DRAFTS))
def test_combined_keywords_answer_as_jsonschema(draft):
    dicts = [s for s in SCHEMAS if isinstance(s, dict) and "$ref" not in s]
    answered = 0
    for a, b in itertools.combinations(dicts, 2):
        if a.keys() & b.keys():
            continue
        test, validator = _setting(draft, {**a, **b})
        if test is None:
            continue
        answered += 1
        for value in VALUES:
            assert test(value) == validator.is_valid(value), (draft, a, b, value)
    assert answered > 500


@pytest.mark.parametrize("draft", sorted(DRAFTS))
@pytest.mark.parametrize("schema", ANSWERED, ids=[str(i) for i in range(len(ANSWERED))])
def test_common_keywords_are_answered_without_jsonschema(draft, schema):
    test, _ = _setting(draft, schema)
    assert test is not None


@pytest.mark.parametrize("draft,schema", [
    (4, {"minimum": 1}),                      # draft 4's minimum reads exclusiveMinimum
    (6, {"multipleOf": 3}), (2020, {"format": "date"}), (2020, {"uniqueItems": True}), (4, {"items": True}),
    (2020, {"if": {"type": "string"}, "then": {"minLength": 2}}),
    (7, {"dependencies": {"a": ["b"]}}), (2020, {"pattern": "("}),
    (2020, {"$ref": "#/definitions/missing"}),
])
def test_what_checks_do_not_reproduce_goes_to_jsonschema(draft, schema):
    test, _ = _setting(draft, schema)
    assert test is None


def test_a_recursive_definition_is_left_to_jsonschema_past_the_budget():
    schema = {"definitions": {"r": {"anyOf": [{"$ref": "#/definitions/r"}, {"$ref": "#/definitions/r"}]}},
              "$ref": "#/definitions/r"}
    test, _ = _setting(7, schema)
    assert test is None


def test_equal_is_jsonschemas():
    pairs = [(True, 1), (False, 0), (1, 1.0), ([1], [1.0]), ([True], [1]), ({"a": 1}, {"a": 1.0}),
             ({"a": True}, {"a": 1}), ("1", 1), (None, False), ([], {}), (2 ** 53 + 1, float(2 ** 53))]
    from jsonschema._utils import equal
    for one, two in pairs:
        assert checks.equal(one, two) == equal(one, two), (one, two)
        assert checks.equal(two, one) == equal(two, one), (two, one)


@pytest.mark.parametrize("draft", sorted(DRAFTS))
def test_the_compilers_validator_class_keeps_its_pattern_keywords_known(draft):
    """The compiler's class bounds the compile of patterns (api._bounded_patterns);
    its keywords still read as jsonschema's, so checks.py answers them."""
    from tokendfa.schema.api import _bounded_patterns

    cls = _bounded_patterns(DRAFTS[draft])
    schema = {"pattern": "^a", "patternProperties": {"^x": {"type": "integer"}},
              "additionalProperties": {"type": "boolean"}}
    test = checks.check_of(schema, Sub(schema, Registry().resolver(), ""), checks.Context(
        draft, cls.VALIDATORS, functools.partial(compiler_module._type_test, draft=draft), None))
    assert test is not None
    validator = cls(schema)
    for value in VALUES:
        assert test(value) == validator.is_valid(value), value


def test_enum_candidates_are_checked_without_jsonschema(monkeypatch):
    """Schemas of the corpus's shapes (Synthesized: an enum beside a negation, a
    reference to an enum of strings) compile without a jsonschema validator,
    and their literals are those jsonschema admits."""
    from tokendfa.schema.api import regex_from_schema

    def refuse(*args, **kwargs):
        raise AssertionError("jsonschema validator used")
    monkeypatch.setattr(compiler_module.Compiler, "_is_valid", staticmethod(refuse))
    cases = [
        ({"allOf": [{"enum": [{"foo": 1}, {"foo": True}]},
                    {"not": {"additionalProperties": {"type": "boolean"}}}]}, ['{"foo":1}']),
        ({"definitions": {"side": {"type": "string", "enum": ["left", "right", 3]}},
          "enum": ["left", "up", 3], "allOf": [{"$ref": "#/definitions/side"}]}, ['"left"']),
        ({"enum": ["a", "abc", 1.5, 2], "minLength": 2, "maximum": 1.8}, ['"abc"', "1.5"]),
    ]
    import re as python_re
    for schema, accepted in cases:
        regex = regex_from_schema(schema).regex
        for literal in accepted:
            assert python_re.fullmatch(regex, literal), (schema, literal)
        for literal in ['{"foo":true}', '"right"', '"up"', "3", '"a"', "2"]:
            if literal not in accepted:
                assert not python_re.fullmatch(regex, literal), (schema, literal)
