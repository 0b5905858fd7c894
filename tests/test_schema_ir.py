"""The compiler's internal forms made the fast way give what their plain
definitions give: ``Flat``'s written-out ``copy``/``trivial`` and
``empty_flat()`` against the dataclass, ``make_sub`` against ``Sub(...)``,
and a property name's literal against the character-by-character path."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tokendfa.analysis.regex_tree import Text, concat
from tokendfa.schema import ir, strings


def _values(flat):
    return {f.name: getattr(flat, f.name) for f in fields(ir.Flat)}


def test_empty_flat_is_flat_with_lists_of_its_own():
    made, plain = ir.empty_flat(), ir.Flat()
    assert _values(made) == _values(plain)
    for name, value in _values(made).items():
        if isinstance(value, list):
            assert value is not getattr(ir.empty_flat(), name), name


@pytest.mark.parametrize("name", [f.name for f in fields(ir.Flat)])
def test_copy_keeps_every_field_and_copies_lists(name):
    flat = ir.Flat()
    old = getattr(flat, name)
    marker = ["x"] if isinstance(old, list) else ("changed", name)
    setattr(flat, name, marker)
    copied = flat.copy()
    assert _values(copied) == _values(flat)
    if isinstance(marker, list):
        assert getattr(copied, name) is not marker
        getattr(copied, name).append("y")
        assert marker == ["x"]


@pytest.mark.parametrize("name", [f.name for f in fields(ir.Flat)])
def test_trivial_reads_every_field_but_bookkeeping(name):
    flat = ir.Flat()
    setattr(flat, name, ["x"] if isinstance(getattr(flat, name), list) else ("changed", name))
    assert flat.trivial() is (name in ir._BOOKKEEPING)
    assert ir.Flat().trivial()


def test_make_sub_is_sub():
    made = ir.make_sub({"type": "string"}, "resolver", "/a", ("r",), True)
    plain = ir.Sub({"type": "string"}, "resolver", "/a", ("r",), True)
    assert type(made) is ir.Sub
    assert [getattr(made, f.name) for f in fields(ir.Sub)] == [getattr(plain, f.name) for f in fields(ir.Sub)]
    with pytest.raises(AttributeError):   # still frozen
        made.pointer = "/b"


@pytest.mark.parametrize("name", ["", "name", "a b", "caf\u00e9", "\u00a0nbsp", "zero\u200bwidth",
                                  "del\x7f", "c1\x85", "tab\t", "quote\"", "back\\slash",
                                  "lone\ud800", "emoji\U0001f600", "\u2028line"])
def test_literal_of_a_name_is_the_character_by_character_text(name):
    # every character's own canonical spelling, joined (what the slow path writes)
    slow = concat(strings._QUOTE, *[strings._canonical_unit_tree(ord(ch)) for ch in name], strings._QUOTE)
    assert strings.json_string_literal(name) == slow
    if name.isprintable() and '"' not in name and "\\" not in name:
        assert strings.json_string_literal(name) == Text(f'"{name}"')
