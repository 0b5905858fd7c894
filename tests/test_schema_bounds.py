"""A regex over ``max_regex_length``: compiled shallower, else RegexTooLongError (a precise type).

Shared pieces keep most regexes short, so these schemas are compiled with a
``registry``, which turns sharing off and writes every piece inline.
"""

from __future__ import annotations

import re

import pytest
import referencing

from tokendfa import RegexTooLongError, UnsupportedSchemaError
from tokendfa.schema.api import regex_from_schema

NESTED = {"type": "array", "items": {"type": "array"}}   # inline: 3,357 / 14,365 / 58,397 chars at depth 1 / 2 / 3


def test_a_regex_over_the_length_limit_is_compiled_with_shallower_free_values():
    result = regex_from_schema(NESTED, any_depth=3, max_regex_length=20_000,
                               registry=referencing.Registry())
    assert len(result.regex) <= 20_000
    assert result.notes[0].startswith("regex over 20,000 characters: generic values nest 2 level(s)")
    # two levels of the schema's own arrays, then free values two levels deep (not three)
    assert re.fullmatch(result.regex, "[[[[1]]]]") and not re.fullmatch(result.regex, "[[[[[1]]]]]")


def test_a_regex_over_the_length_limit_at_every_depth_is_a_regex_too_long_error():
    with pytest.raises(RegexTooLongError, match=r"the regex for the schema at /items exceeds 1,000"):
        regex_from_schema(NESTED, any_depth=3, max_regex_length=1_000, lenient=True,
                          registry=referencing.Registry())
    assert issubclass(RegexTooLongError, UnsupportedSchemaError)


def test_an_error_that_mentions_exceeds_is_not_taken_for_a_length_limit():
    # the compiler once recognised "too long" by the word in the message
    with pytest.raises(UnsupportedSchemaError, match="lookaround") as caught:
        regex_from_schema({"type": "string", "pattern": "(?=exceeds)x"})
    assert not isinstance(caught.value, RegexTooLongError)
