"""``propertyNames`` with ``not``, ``anyOf``, ``oneOf`` and ``if``: the algebra of key sets.

The names a combinator accepts are written from its parts: ``not S`` is
every name less the names of ``S``, a choice the union of its alternatives.
``not {propertyNames: S}`` ("some name breaks S") then has an exact key set
too, so JSONSchemaBench's ``existsName`` ("some member is named 0") compiles.
"""

from __future__ import annotations

from schema_oracle import agrees

OBJECTS = [{}, {"0": 1}, {"1": 1}, {"0": 1, "1": 2}, {"00": 1}, {"a": None, "0": []},
           {"ab": 1}, {"abc": 1}, {"b": 1}, {"ba": 1, "x": 2}, {"xy": 1, "0": 2}, {"": 1}, 1, "0"]


def test_some_member_named_0():
    # Handwritten/existsName1 of JSONSchemaBench
    agrees({"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}}, OBJECTS,
           must_accept=[{"0": 1}, {"x": 1, "0": 2}], any_depth=1)


def test_names_under_not_any_of_and_one_of():
    agrees({"type": "object", "propertyNames": {"not": {"pattern": "^a"}}}, OBJECTS,
           must_accept=[{"b": 1}], any_depth=1)
    agrees({"type": "object", "propertyNames": {"anyOf": [{"maxLength": 1}, {"pattern": "^a"}]}},
           OBJECTS, must_accept=[{"abc": 1, "b": 2}], any_depth=1)
    # oneOf: a name of one length or starting with "a", not both
    agrees({"type": "object", "propertyNames": {"oneOf": [{"maxLength": 2}, {"pattern": "^a"}]}},
           OBJECTS, must_accept=[{"abc": 1, "b": 2}, {"xy": 1}], any_depth=1)


def test_some_member_whose_name_breaks_a_combinator():
    # not propertyNames anyOf: some name is long and does not start with "a"
    agrees({"type": "object", "not": {"propertyNames": {"anyOf": [{"maxLength": 1}, {"pattern": "^a"}]}}},
           OBJECTS, must_accept=[{"ba": 1, "x": 2}], any_depth=1)


def test_declared_names_are_left_out_of_the_additional_keys():
    agrees({"type": "object", "properties": {"ab": {"type": "integer"}},
            "propertyNames": {"not": {"pattern": "b$"}}},
           OBJECTS + [{"ab": "x"}, {"ab": 1}, {"cb": 1}], any_depth=1)


def test_object_keywords_on_a_name_assert_nothing():
    # a name is a string: {"propertyNames": {"const": "a"}} holds of it, so not not of it does too
    agrees({"type": "object", "propertyNames": {"not": {"not": {"propertyNames": {"const": "a"}}}}},
           OBJECTS, must_accept=[{"0": 1, "b": 2}], any_depth=1)
    agrees({"type": "object", "propertyNames": {"not": {"propertyNames": {"const": "a"}}}},
           OBJECTS, must_accept=[{}], any_depth=1)


def test_keys_except_is_every_key_but_the_names():
    # keys_except writes the exits of a trie of plain ASCII names once for
    # every node (a character past ASCII, an escape) after a trie of all
    # paths: the same language as every canonical key less the names
    import random

    from tokendfa.schema.objects import regex_subset
    from tokendfa.schema.regexes import difference
    from tokendfa.schema.strings import canonical_string_regex, json_string_literal, keys_except
    from tokendfa.analysis.regex_tree import alt

    rng = random.Random(7)
    for _ in range(60):
        names = ["".join(rng.choice("ab_~ \x7f") for _ in range(rng.randint(0, 4)))
                 for _ in range(rng.randint(1, 6))]
        wanted = difference(canonical_string_regex(), alt([json_string_literal(n) for n in names]))
        got = keys_except(names)
        assert regex_subset(got, wanted) and regex_subset(wanted, got), names
