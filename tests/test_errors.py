"""Bad patterns get precise errors from the library, with the construct and position."""

from __future__ import annotations

import pytest

from conftest import toy_vocabulary
from tokendfa import (
    EmptyLanguageError,
    Index,
    RegexError,
    TokenDFAError,
    UnsupportedRegexError,
)


@pytest.mark.parametrize("pattern, error, message", [
    ("[0-9", RegexError, "invalid regex at position 0: unterminated character set"),
    ("(ab", RegexError, "missing ), unterminated subpattern"),
    ("a**", RegexError, "at position 2: multiple repeat"),
    ("[z-a]", RegexError, "at position 1: bad character range z-a"),
    ("(?=a)b", UnsupportedRegexError, "lookahead at position 0"),
    ("a(?!b)", UnsupportedRegexError, "negative lookahead at position 1"),
    ("(?<=a)b", UnsupportedRegexError, "lookbehind at position 0"),
    ("(a)\\1", UnsupportedRegexError, "backreference \\1 at position 3"),
    ("(?P<x>a)(?P=x)", UnsupportedRegexError, "named backreference at position 8"),
    ("\\bword", UnsupportedRegexError, "word boundary \\b at position 0"),
    ("a^b", UnsupportedRegexError, "anchor ^ (only allowed at the very start) at position 1"),
    ("a$|b", UnsupportedRegexError, "anchor $ (only allowed at the very end) at position 1"),
    ("[^\\s\\S]", EmptyLanguageError, "matches no string at all"),
    ("(a|b)[^\\d\\D]c", EmptyLanguageError, "matches no string at all"),
    ("a[^\x00-\U0010ffff]", EmptyLanguageError, "matches no string at all"),
])
def test_bad_patterns(pattern, error, message):
    with pytest.raises(error) as caught:
        Index.from_regex(pattern, toy_vocabulary())
    assert message in str(caught.value)
    assert isinstance(caught.value, TokenDFAError) and isinstance(caught.value, ValueError)


def test_an_empty_language_error_shows_the_head_of_a_long_regex():
    pattern = "(?:" + "|".join(f"word{i}" for i in range(2000)) + ")[^\\s\\S]"
    with pytest.raises(EmptyLanguageError) as caught:
        Index.from_regex(pattern, toy_vocabulary())
    message = str(caught.value)
    assert len(message) < 300 and message.startswith("regex '(?:word0|word1|")
    assert f"(+{len(pattern) - 200:,} characters) matches no string at all" in message


@pytest.mark.parametrize("pattern, body", [
    ("[a$^]+", "[a$^]+"), ("\\$\\^", "\\$\\^"), ("[\\b]", "[\\b]"), ("^ab$", "ab"),
    ("[]^]", "[]^]"), ("[^]$]", "[^]$]"),
])
def test_anchor_characters_that_are_not_anchors(pattern, body):
    from tokendfa.analysis.regex_syntax import normalize_pattern

    assert normalize_pattern(pattern) == body


def test_not_a_string():
    with pytest.raises(RegexError, match="must be a str"):
        Index.from_regex(b"abc", toy_vocabulary())


def test_pathological_repeat_fails_fast():
    import time

    from tokendfa import BuildLimitError

    started = time.perf_counter()
    with pytest.raises(BuildLimitError):
        Index.from_regex("((a|b){1000}){1000}", toy_vocabulary())
    assert time.perf_counter() - started < 60


@pytest.mark.parametrize("lazy", [True, False])
def test_an_empty_regex_is_an_empty_regex_error_in_both_modes(lazy):
    from tokendfa.analysis.errors import EmptyRegexError

    with pytest.raises(EmptyRegexError, match=r"regex '\[\^\\\\s\\\\S\]' matches no string at all"):
        Index.from_regex("[^\\s\\S]", toy_vocabulary(), lazy=lazy)


@pytest.mark.parametrize("lazy", [True, False])
def test_a_schema_found_empty_is_told_in_the_schemas_terms_not_the_regexs(lazy):
    from tokendfa.analysis.errors import EmptyRegexError

    # every value needs an "x" inside an "x": only the automaton (lazy) or the
    # unrolling (eager) finds that nothing is left
    schema = {"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
                              "required": ["x"]}}, "$ref": "#/$defs/a"}
    with pytest.raises(EmptyLanguageError, match="^no JSON value satisfies this schema") as raised:
        Index.from_schema(schema, toy_vocabulary(), lazy=lazy)
    assert not isinstance(raised.value, EmptyRegexError) and "regex" not in str(raised.value)
