"""``oneOf`` branches told apart by a member the schema around them requires.

A ``oneOf`` branch is written as "this branch and not the others it may
overlap"; when the enclosing schema requires a discriminating member
(``required`` beside the ``oneOf``, before or after it), branches whose
values for it are disjoint never overlap, and no branch carries the
negations of the others (which, for closed objects, we cannot always write).
"""

from __future__ import annotations

import pytest

from tokendfa.schema.disjoint import disjoint
from tokendfa.schema.ir import Flat

from schema_oracle import agrees


def closed(kind: str, **extra):
    return {"properties": {"kind": {"const": kind}, **extra}, "additionalProperties": False}


BRANCHES = [closed("a", x={"type": "integer"}), closed("b", y={"type": "string"}), closed("c")]
VALUES = [
    {"kind": "a"}, {"kind": "a", "x": 1}, {"kind": "b", "y": "s"}, {"kind": "c"},
    {"kind": "a", "y": "s"}, {"kind": "b", "x": 1}, {"kind": "c", "x": 1}, {"kind": "d"},
    {"x": 1}, {}, {"kind": "a", "x": "s"}, {"kind": "b", "z": None},
]


@pytest.mark.parametrize("order", ["required first", "required last"])
def test_oneof_discriminated_by_a_required_member_compiles_exactly(order):
    schema = ({"type": "object", "required": ["kind"], "oneOf": BRANCHES} if order == "required first"
              else {"type": "object", "oneOf": BRANCHES, "required": ["kind"]})
    agrees(schema, VALUES, must_accept=[{"kind": "a", "x": 1}, {"kind": "c"}])


def test_without_the_required_member_the_branches_still_overlap():
    # {} satisfies all three branches: none of the oneOf holds exactly one
    schema = {"type": "object", "oneOf": [{"properties": {"kind": {"const": "a"}}},
                                          {"properties": {"kind": {"const": "b"}}}]}
    agrees(schema, [{}, {"kind": "a"}, {"kind": "b"}, {"kind": "c"}, {"z": 1}],
           must_accept=[{"kind": "a"}])


def test_disjoint_takes_the_names_the_context_requires():
    from tokendfa.schema.api import _setup

    compiler, root = _setup({}, whitespace="compact", lenient=False, max_recursion_depth=3,
                            max_whitespace=0, indent=2, any_depth=0, registry=None,
                            default_draft=None, max_regex_length=10**6)
    a = root.child({"properties": {"kind": {"const": "a"}}}, "oneOf", 0)
    b = root.child({"properties": {"kind": {"const": "b"}}}, "oneOf", 1)
    objects = Flat()
    objects.types = frozenset({"object"})
    assert not disjoint(compiler, a, b, objects)
    assert disjoint(compiler, a, b, objects, ("kind",))
    # "required" holds of objects only: any other value satisfies both branches
    assert not disjoint(compiler, a, b, Flat(), ("kind",))
    context = objects.copy()
    context.required.append("kind")
    assert disjoint(compiler, a, b, context)
