"""``oneOf`` branches told apart by a member the schema around them requires.

A ``oneOf`` branch is written as "this branch and not the others it may
overlap"; when the enclosing schema requires a discriminating member
(``required`` beside the ``oneOf``, before or after it), branches whose
values for it are disjoint never overlap, and no branch carries the
negations of the others (which, for closed objects, we cannot always write).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

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


# --- branches that are choices themselves (JSONSchemaBench Github_ultra:95) -------------------

def _compiler(schema):
    from tokendfa.schema.api import _setup

    return _setup(schema, whitespace="compact", lenient=False, max_recursion_depth=3,
                  max_whitespace=0, indent=2, any_depth=0, registry=None,
                  default_draft=None, max_regex_length=10**6)


def _repository(kinds):
    return {"type": "object", "required": ["type", "url"],
            "properties": {"type": {"type": "string", "enum": kinds}, "url": {"type": "string"}}}


# A composer.json "repositories" item: a repository (a oneOf of $refs, each
# naming its "type") or an object {"name": false} that turns one off.
REPOSITORIES = {
    "definitions": {
        "repository": {"type": "object", "oneOf": [{"$ref": "#/definitions/vcs"},
                                                   {"$ref": "#/definitions/path"}]},
        "vcs": _repository(["vcs", "git"]),
        "path": _repository(["path"]),
    },
    "type": "array",
    "items": {"oneOf": [{"$ref": "#/definitions/repository"},
                        {"type": "object", "additionalProperties": {"type": "boolean", "enum": [False]},
                         "minProperties": 1, "maxProperties": 1}]},
}
SWITCH_OFF = {"type": "object", "additionalProperties": {"type": "boolean", "enum": [False]}}


def test_a_choice_is_disjoint_when_each_of_its_options_is():
    compiler, root = _compiler(REPOSITORIES)
    item = root.child(REPOSITORIES["items"], "items")
    repository = item.child(REPOSITORIES["items"]["oneOf"][0], "oneOf", 0)
    switch_off = item.child(SWITCH_OFF, "oneOf", 1)
    # every option requires "type", whose string value the other side's
    # additionalProperties (false only) refuses, though that side does not require it
    assert disjoint(compiler, repository, switch_off, Flat())
    assert disjoint(compiler, switch_off, repository, Flat())
    # one option that may be {"x": false} is enough to make them overlap
    loose = item.child({"oneOf": [{"$ref": "#/definitions/vcs"}, {"type": "object"}]}, "oneOf", 0)
    assert not disjoint(compiler, loose, switch_off, Flat())


def test_required_names_count_against_max_properties():
    compiler, root = _compiler({})
    two = root.child({"required": ["a", "b", "a"]}, "oneOf", 0)
    one = root.child({"maxProperties": 1}, "oneOf", 1)
    objects = Flat()
    objects.types = frozenset({"object"})
    assert disjoint(compiler, two, one, objects)
    assert not disjoint(compiler, root.child({"required": ["a", "a"]}, "oneOf", 0), one, objects)


def test_repository_items_compile_exactly():
    agrees(REPOSITORIES,
           [[{"type": "vcs", "url": "u"}, {"packagist.org": False}], [{"type": "path", "url": "u"}],
            [{"x": False}], [{"x": False, "y": False}], [{"type": "zip", "url": "u"}], [{"x": True}],
            [{"type": False}], [{"type": "git"}], [{}]],
           must_accept=[[{"type": "git", "url": "u"}, {"x": False}]], any_depth=1)


BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))


def test_composer_schema_needs_no_negation(monkeypatch):
    """JSONSchemaBench Github_ultra:95 (composer.json): its repository items
    are a oneOf of "repository" (six $refs, each with its "type") and
    {"<name>": false}. Negating the repository meant negating the whole
    ~30-property package it nests through "$ref": "#", and the lazy
    compilation ran past 30 s; the branches are disjoint, so nothing is
    negated and it compiles in about 0.2 s."""
    path = BENCH / "Github_ultra.jsonl.gz"
    if not path.exists():
        pytest.skip(f"no JSONSchemaBench at {BENCH}")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        schema = json.loads(handle.read().split("\n")[95])["schema"]
    assert "repositories" in schema["properties"]
    from tokendfa.schema import compiler as compiler_module
    from tokendfa.schema.api import regex_from_schema

    def refused(c, sub):
        raise AssertionError(f"negated {sub.pointer}")

    monkeypatch.setattr(compiler_module, "negate", refused)
    result = regex_from_schema(schema, any_depth=3, state_budget=None, share_free_levels=True,
                               share_counts=True, defer_recursion=True)
    assert not result.widenings
