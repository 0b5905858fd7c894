"""Regex syntax: Python's parser, shared by both dialects, and checks before building.

Both regex dialects the library reads go through Python's own parser
(``re._parser``, ``sre_parse`` before 3.11), which knows every position:
our patterns (Python ``re`` syntax with ``re.ASCII`` classes, compiled by
:mod:`tokendfa.analysis.regex_compiler`) and JSON Schema's ECMA-262
``pattern`` (rewritten to Python spelling and translated by the schema
compiler). This module is the one place that imports that parser
(:data:`sre_parse`, :data:`sre`) and the one place that reads its character
sets: :func:`parse_tree` gives a parse tree or a precise error, and
:func:`set_ranges` turns a one-character item of the tree into code-point
ranges under a dialect's meaning of ``.``, ``\\d``, ``\\w`` and ``\\s``.

:func:`normalize_pattern` checks a pattern before it reaches the automaton
builder: syntax errors from the parser, then a scan for constructs that no
finite automaton over whole strings can express. Matching is always against
the whole text, so a ``^`` at the very start and a ``$`` at the very end say
nothing and are removed; anywhere else they are rejected.
"""

from __future__ import annotations

import gc
import re
import warnings
from collections.abc import Mapping

try:  # Python 3.11+
    from re import _constants as sre
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from . import limits
from .errors import RegexError, UnsupportedRegexError
from .utf8 import MAX_CODEPOINT, CodepointRange, complement_ranges, merge_ranges

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
    # Parsing finds every syntax error a compile would (with its position) at
    # half the cost of a compile, which is a third of the whole front end on a
    # megabyte schema regex. What only the compile step rejects (a
    # variable-width lookbehind) is rejected by the scan below anyway.
    parse_tree(pattern)
    start, end = _find_unsupported(pattern)
    return pattern[start:end]


def normalize_and_parse(pattern: str, flags: int):
    """``(normalize_pattern(pattern), its parse tree under flags)``, the same
    answers and errors as the two calls, with one parse where the two would
    parse the same text twice (Python's parser is most of the time of an
    NFA construction: ~1 us a character)."""
    if not isinstance(pattern, str):
        return normalize_pattern(pattern), None  # raises
    try:
        tree = parse_tree(pattern, flags)
    except UnsupportedRegexError:
        tree = None  # (?u) under re.ASCII: reported in the order the two calls would
    if tree is None:
        body = normalize_pattern(pattern)
        return body, parse_tree(body, flags)
    start, end = _find_unsupported(pattern)
    body = pattern[start:end]
    return body, (tree if body == pattern else parse_tree(body, flags))


# Patterns from this length on are parsed where a deadline can interrupt the
# wait: ~30 ms of parsing, against the ~0.1 ms a thread costs.
_PARSE_IN_THREAD_FROM = 10_000


def _quietly(function, *args):
    """``function(*args)`` with the cyclic collector off: Python's regex parser and
    compiler make a few small objects a character and no reference cycle, and the
    collector's full passes, each holding the interpreter lock, were half of a
    600,000-character parse (5-11 passes of 40-130 ms) and what the deadline
    waited on when it fell inside one (a time limit overshot by up to 241 ms)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return function(*args)
    finally:
        if collecting:
            gc.enable()


def compile_untrusted(pattern: str, flags: int = 0) -> "re.Pattern":
    """``re.compile(pattern, flags)`` for a pattern from outside (a schema's, which
    ``jsonschema`` then finds in ``re``'s cache), within the current deadline: a
    long one compiles where the deadline can stop waiting, as :func:`parse_tree`
    parses (Python's compile of 600,000 characters: 0.2-0.4 s past a limit)."""
    if len(pattern) < _PARSE_IN_THREAD_FROM:
        return re.compile(pattern, flags)
    return limits.call_within_deadline(_quietly, re.compile, pattern, flags)


def parse_tree(pattern: str, flags: int = 0):
    """Python's parse tree of ``pattern`` under ``flags`` (a ``SubPattern``;
    its global flags are ``tree.state.flags``).

    # Errors

    * :class:`RegexError` for invalid syntax, with the position, and for
      nesting too deep for the parser;
    * :class:`UnsupportedRegexError` for the Unicode flag ``(?u)`` under
      ``re.ASCII`` (the parser's ValueError).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarnings about nested sets are not errors
        try:
            if len(pattern) < _PARSE_IN_THREAD_FROM:
                return _quietly(sre_parse.parse, pattern, flags)
            # a long pattern's parse (pure Python, ~3 us a character) cannot check the
            # deadline itself: it runs where the deadline can still be kept
            return limits.call_within_deadline(_quietly, sre_parse.parse, pattern, flags)
        except re.error as exc:
            position = f" at position {exc.pos}" if exc.pos is not None else ""
            raise RegexError(f"invalid regex{position}: {exc.msg} in {_shown(pattern)}") from None
        except ValueError:  # only raised for (?u) clashing with re.ASCII
            raise UnsupportedRegexError(
                f"unsupported regex construct: the Unicode flag (?u) in {pattern!r} "
                r"(\d, \w, \s and (?i) are ASCII only here)") from None
        except (RecursionError, OverflowError) as exc:
            raise RegexError(f"invalid regex {_shown(pattern)}: {exc}") from None


# --- character sets -------------------------------------------------------------

DIGIT: tuple[CodepointRange, ...] = ((0x30, 0x39),)
WORD: tuple[CodepointRange, ...] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
ASCII_SPACE: tuple[CodepointRange, ...] = ((0x09, 0x0D), (0x20, 0x20))
EVERYTHING: tuple[CodepointRange, ...] = ((0, MAX_CODEPOINT),)


def class_escapes(space) -> dict:
    """The ranges of ``\\d \\D \\w \\W \\s \\S`` by the parser's category
    codes, for a dialect whose ``\\s`` is ``space`` (``\\d`` and ``\\w``
    are ASCII in both dialects)."""
    space = tuple(merge_ranges(space))
    return {
        sre.CATEGORY_DIGIT: DIGIT,
        sre.CATEGORY_NOT_DIGIT: tuple(complement_ranges(list(DIGIT))),
        sre.CATEGORY_WORD: WORD,
        sre.CATEGORY_NOT_WORD: tuple(complement_ranges(list(WORD))),
        sre.CATEGORY_SPACE: space,
        sre.CATEGORY_NOT_SPACE: tuple(complement_ranges(list(space))),
    }


def set_ranges(op, av, *, escapes: Mapping, dot, ignore_case: bool = False
               ) -> tuple[CodepointRange, ...]:
    """Sorted, disjoint code-point ranges of a one-character item of a parse
    tree (``LITERAL``, ``NOT_LITERAL``, ``ANY``, ``IN``).

    ``escapes`` gives the class escapes (:func:`class_escapes`) and ``dot``
    what ``.`` matches. ``ignore_case`` is ``re.IGNORECASE`` under
    ``re.ASCII``: the other case of every ASCII letter joins the set (before
    a negation applies). Raises :class:`UnsupportedRegexError` for a class
    item outside those.
    """
    if op is sre.ANY:
        return tuple(dot)
    negate = op is sre.NOT_LITERAL
    if op is sre.IN:
        ranges = []
        for item_op, item in av:
            if item_op is sre.NEGATE:
                negate = True
            elif item_op is sre.LITERAL:
                ranges.append((item, item))
            elif item_op is sre.RANGE:
                ranges.append(tuple(item))
            elif item_op is sre.CATEGORY and item in escapes:
                ranges.extend(escapes[item])
            else:
                raise UnsupportedRegexError(
                    f"unsupported item in a character class: {item_op} {item}")
        positive = tuple(merge_ranges(ranges))
    else:
        positive = ((av, av),)
    if ignore_case:
        positive = _ascii_case_closure(positive)
    return tuple(complement_ranges(list(positive))) if negate else positive


def _ascii_case_closure(ranges: tuple[CodepointRange, ...]) -> tuple[CodepointRange, ...]:
    """Add the other case of every ASCII letter in ``ranges``.

    This is ``re.IGNORECASE`` under ``re.ASCII``: a character matches when
    its ASCII lower case is the lower case of a member. No other character
    has a case there (not ``é``/``É``, not the Kelvin sign).
    """
    extra = []
    for lo, hi in ranges:
        for first, last, shift in ((0x41, 0x5A, 0x20), (0x61, 0x7A, -0x20)):
            low, high = max(lo, first), min(hi, last)
            if low <= high:
                extra.append((low + shift, high + shift))
    return tuple(merge_ranges(ranges + tuple(extra))) if extra else ranges


# --- constructs no automaton can express ------------------------------------------

_SCAN_CHECK_EVERY = 1 << 15


def _find_unsupported(pattern: str) -> tuple[int, int]:
    """Scan for unsupported constructs; return the slice without outer anchors."""
    start, end = 0, len(pattern)
    i, in_class = 0, False
    checked = _SCAN_CHECK_EVERY   # the deadline, every so many characters (~0.1 us each)
    while i < len(pattern):
        if i >= checked:
            limits.check()    # 70-200 ms on a 600,000-character pattern
            checked = i + _SCAN_CHECK_EVERY
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


def _shown(pattern: str) -> str:
    """A pattern for an error message: its head, so a megabyte pattern gives a one-line error."""
    if len(pattern) <= 200:
        return repr(pattern)
    return f"{pattern[:200]!r} (+{len(pattern) - 200:,} characters)"
