"""Checking a regex before it reaches the automaton builder.

interegular, our regex front end, silently accepts some constructs it cannot
honour (a lookahead becomes an empty language) and reports others without a
position. This module gives every bad pattern a precise error first: syntax
errors from Python's own parser (which knows the position), then a scan for
constructs that no finite automaton over whole strings can express.

Matching is always against the whole text, so a ``^`` at the very start and
a ``$`` at the very end say nothing and are removed; anywhere else they are
rejected.
"""

from __future__ import annotations

import re
import warnings

try:  # Python 3.11+
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre_parse  # type: ignore[no-redef]

from .errors import RegexError, UnsupportedRegexError

_GROUP_OPENERS = {
    "(?=": "lookahead",
    "(?!": "negative lookahead",
    "(?<=": "lookbehind",
    "(?<!": "negative lookbehind",
    "(?P=": "named backreference",
    "(?(": "conditional group",
    "(?>": "atomic group",
}
_UNSUPPORTED_ESCAPES = {
    "b": "word boundary \\b",
    "B": "non-boundary \\B",
    "A": "start anchor \\A",
    "Z": "end anchor \\Z",
    "z": "end anchor \\z",
    "k": "named backreference \\k",
    "G": "anchor \\G",
}


def normalize_pattern(pattern: str) -> str:
    """Validate ``pattern`` and return it without redundant outer anchors.

    Raises :class:`RegexError` for invalid syntax and
    :class:`UnsupportedRegexError` for constructs an automaton cannot express;
    both messages name the construct and its position.
    """
    if not isinstance(pattern, str):
        raise RegexError(f"a regex must be a str, not {type(pattern).__name__}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarnings about nested sets are not errors
        try:
            # Parsing finds every syntax error a compile would (with its
            # position) at half the cost of a compile, which is a third of
            # the whole front end on a megabyte schema regex. What only the
            # compile step rejects (a variable-width lookbehind) is rejected
            # by the scan below anyway.
            _sre_parse.parse(pattern)
        except re.error as exc:
            position = f" at position {exc.pos}" if exc.pos is not None else ""
            raise RegexError(f"invalid regex{position}: {exc.msg} in {pattern!r}") from None
        except (RecursionError, OverflowError) as exc:
            raise RegexError(f"invalid regex {pattern!r}: {exc}") from None
    start, end = _find_unsupported(pattern)
    return pattern[start:end]


def _find_unsupported(pattern: str) -> tuple[int, int]:
    """Scan for unsupported constructs; return the slice without outer anchors."""
    start, end = 0, len(pattern)
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escaped = pattern[i + 1] if i + 1 < len(pattern) else ""
            if not in_class:
                if escaped in "123456789" and escaped:
                    _reject("backreference \\" + escaped, i, pattern)
                if escaped in _UNSUPPORTED_ESCAPES:
                    _reject(_UNSUPPORTED_ESCAPES[escaped], i, pattern)
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            i += 1
            continue
        if char == "[":
            in_class = True
            i += 1
            # A ']' right after '[' or '[^' is a literal, not the end of the class.
            if i < len(pattern) and pattern[i] == "^":
                i += 1
            if i < len(pattern) and pattern[i] == "]":
                i += 1
            continue
        if char == "(":
            for opener, name in _GROUP_OPENERS.items():
                if pattern.startswith(opener, i):
                    _reject(name, i, pattern)
        elif char == "^":
            if i != 0:
                _reject("anchor ^ (only allowed at the very start)", i, pattern)
            start = 1
        elif char == "$":
            if i != len(pattern) - 1:
                _reject("anchor $ (only allowed at the very end)", i, pattern)
            end = i
        i += 1
    return start, end


def _reject(construct: str, position: int, pattern: str) -> None:
    raise UnsupportedRegexError(
        f"unsupported regex construct: {construct} at position {position} in {pattern!r} "
        "(a token index can only follow patterns a finite automaton can match)"
    )


def regex_char(cp: int, in_class: bool) -> str:
    """``cp`` as regex text matching exactly that character."""
    ch = chr(cp)
    if 0x21 <= cp <= 0x7E:
        if ch.isalnum() or ch == "_":
            return ch
        if in_class and ch not in "\\]^-[":
            return ch
        return "\\" + ch
    if cp == 0x20:
        return " "
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"
