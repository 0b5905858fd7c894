"""Property counts that every object of the shape meets are not counted.

``minProperties`` no larger than the number of required members, or
``maxProperties`` no smaller than the number of members a closed object can
have, hold of every object the members allow, so the regex needs no count
(counting is refused on objects of more than 64 properties).
"""

from __future__ import annotations

import pytest

from tokendfa.analysis.errors import UnsupportedSchemaError
from tokendfa.schema.api import regex_from_schema

from schema_oracle import agrees

MANY = {f"p{i}": {"type": "integer"} for i in range(70)}


def test_min_properties_met_by_the_required_members_needs_no_count():
    schema = {"type": "object", "properties": MANY, "required": ["p3"], "minProperties": 1,
              "additionalProperties": False}
    agrees(schema, [{}, {"p0": 1}, {"p3": "x"}, {"p3": 1, "q": 1}],
           must_accept=[{"p3": 1}, {"p0": 0, "p3": 1, "p69": 2}])


def test_max_properties_above_what_a_closed_object_can_hold_needs_no_count():
    schema = {"type": "object", "properties": MANY, "maxProperties": 70, "additionalProperties": False}
    agrees(schema, [{"q": 1}, {"p1": None}], must_accept=[{}, dict.fromkeys(MANY, 1)])


def test_small_objects_still_count_exactly():
    schema = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "required": ["a"],
              "minProperties": 2, "maxProperties": 2}
    agrees(schema, [{"a": 1}, {"a": 1, "b": 2, "c": 3}, {"b": 1, "c": 2}, {"a": 1, "z": 2, "y": 3}],
           must_accept=[{"a": 1, "b": 2}, {"a": 1, "z": 1}], any_depth=1)


def test_a_count_the_required_members_do_not_meet_is_still_refused_past_64_properties():
    schema = {"type": "object", "properties": MANY, "required": ["p3"], "minProperties": 2}
    with pytest.raises(UnsupportedSchemaError, match="more than 64 properties"):
        regex_from_schema(schema)
