"""JSON strings as regexes: characters, ``pattern``, lengths (``format`` is :mod:`.formats`).

A regex here describes the *JSON text* of a string, quotes included, so
every character of the string value becomes the text that encodes it:

* an unconstrained string (only ``minLength``/``maxLength``) accepts every
  spelling JSON allows: any character but ``"``, ``\\`` and controls, a short
  escape (``\\n``), or ``\\uXXXX``; a surrogate pair ``\\ud83d\\ude00`` is one
  character, as in Python and in JSON Schema's count, and a lone surrogate
  escape is refused (it is no character);
* a string under ``pattern``, ``format``, ``enum`` or ``const`` accepts the
  canonical spelling of each character, the one
  ``json.dumps(value, ensure_ascii=False)`` writes (short escapes for ``"``
  ``\\`` and ``\\b\\f\\n\\r\\t``, ``\\u00XX`` for other controls, everything
  else as itself). Every valid value still has its text; we do not also
  list the ``\\u0061`` spellings of ``a``.

``pattern`` is ECMA-262 syntax. We parse it with Python's own parser (after
rewriting the few spellings that differ: ``(?<name>``, ``\\u{...}``,
``\\cX``, ``[^]``, ``[]``, an escaped surrogate pair ``\\ud83d\\ude00`` as
its character), give ``\\s`` and ``.`` their ECMA meaning, and
emit each character set as the text of its canonical characters. What the
dialects read differently is refused rather than guessed: inline flags
(``(?i)``, ``(?s:...)``; ECMA has none), an escaped letter ECMA gives no
meaning (``\\Z`` is the letter Z to ECMA without the ``u`` flag, an error
with it, the end of the text to Python's ``re``), and a lone surrogate (our
patterns read characters, which it is not). A lone surrogate in a literal
(``enum``, ``const``, a property name) is written as its escape
``\\ud800``, the only spelling UTF-8 text has for it. JSON
Schema's ``pattern`` is *not* anchored: ``"abc"`` means "contains abc", so
each top-level alternative gets ``.*`` on the side where it has no ``^`` or
``$``. Lookarounds, backreferences, word boundaries and inner anchors cannot
be expressed and are reported.

Length and pattern together need an intersection. We fold the lengths into
the pattern when it is a sequence with a single variable-width run of one
character class (``^[a-z][a-z0-9_]*$`` with ``maxLength: 63`` becomes
``[a-z][a-z0-9_]{0,62}``) or when the pattern's own width already implies
them; otherwise the schema compiler intersects the two regexes
(:mod:`tokendfa.analysis.algebra`), which is reported when too large.
"""

from __future__ import annotations

import functools
import json
import re

from ..analysis.errors import RegexError, UnsupportedSchemaError
from ..analysis.regex_syntax import class_escapes, compile_untrusted, parse_tree, regex_char, set_ranges
from ..analysis.regex_syntax import sre as _sre, sre_parse as _sre_parse
from ..analysis.utf8 import MAX_CODEPOINT, SURROGATES, complement_ranges, merge_ranges
from ..analysis.regex_tree import (EMPTY, Alt, Concat, Excluding, Node, Repeat, Text, alt, chars, concat,
                                   parse_regex, repeat, text)
from .regexes import from_text, text_counted as _counted

__all__ = [
    "STRING", "CHAR", "string_regex", "json_string_literal", "json_text", "keys_except",
    "PatternUnsupported", "translate_pattern", "pattern_matches", "canonical_string_regex",
    "pattern_complement", "char_set_regex",
]


# One character of a JSON string, any spelling.
CHAR = (r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}'
        r'|[dD][0-7][0-9a-fA-F]{2}|[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))')
# Without a length to count, every escape may stand alone (a lone surrogate
# escape is grammatical JSON), which keeps the regex short.
CHAR_LOOSE = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
STRING_TEXT = f'"{CHAR_LOOSE}*"'
# The same as trees, read once when the module is imported.
STRING = parse_regex(STRING_TEXT)
CHAR_TREE = parse_regex(CHAR)
_QUOTE = text('"')

_SHORT_ESCAPES = {0x22: '\\\\"', 0x5C: r"\\\\", 0x08: r"\\b", 0x0C: r"\\f",
                  0x0A: r"\\n", 0x0D: r"\\r", 0x09: r"\\t"}
# the text each short escape is (a backslash and a letter)
_SHORT_TEXT = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r",
               0x09: "\\t"}


class PatternUnsupported(ValueError):
    """A pattern (or a pattern with lengths) with no exact regex here."""


class SplitSurrogatePair(UnsupportedSchemaError):
    """A literal string (``enum``, ``const``, a property name) holding a high and a
    low surrogate as two characters; ``text`` is the string, ``located`` whether
    the message names the keyword and pointer yet (the compiler adds them)."""

    text: str = ""
    located: bool = False


# --- characters ---------------------------------------------------------------

def _canonical_unit(cp: int) -> str:
    """Regex for the canonical JSON spelling of one character (hex digits in either case)."""
    if cp in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[cp]
    if cp < 0x20:
        low = cp & 15
        digit = f"[{low:x}{low:X}]" if low > 9 else f"{low:x}"
        return f"\\\\u00{cp >> 4:x}{digit}"
    if SURROGATES[0] <= cp <= SURROGATES[1]:
        return "\\\\u" + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{cp:04x}")
    return regex_char(cp, False)


def _complement(ranges) -> list[tuple[int, int]]:
    return complement_ranges(merge_ranges(ranges))


def _without_surrogates(ranges) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        if hi < SURROGATES[0] or lo > SURROGATES[1]:
            out.append((lo, hi))
            continue
        if lo < SURROGATES[0]:
            out.append((lo, SURROGATES[0] - 1))
        if hi > SURROGATES[1]:
            out.append((SURROGATES[1] + 1, hi))
    return out


def char_set_regex(ranges) -> str | None:
    """Regex for one character from the code-point ``ranges``, canonically spelled."""
    ranges = _without_surrogates(merge_ranges(ranges))
    if not ranges:
        return None
    special = [cp for cp in list(range(0x20)) + [0x22, 0x5C]
               if any(lo <= cp <= hi for lo, hi in ranges)]
    plain = []
    for lo, hi in ranges:
        cuts = [(lo, hi)]
        for cp in (0x22, 0x5C):
            next_cuts = []
            for a, b in cuts:
                if a <= cp <= b:
                    if a < cp:
                        next_cuts.append((a, cp - 1))
                    if cp < b:
                        next_cuts.append((cp + 1, b))
                else:
                    next_cuts.append((a, b))
            cuts = next_cuts
        for a, b in cuts:
            a = max(a, 0x20)
            if a <= b:
                plain.append((a, b))
    parts = []
    if plain:
        if len(plain) == 1 and plain[0][0] == plain[0][1]:
            parts.append(regex_char(plain[0][0], False))
        else:
            body = "".join(regex_char(a, True) if a == b else
                           f"{regex_char(a, True)}-{regex_char(b, True)}" if b > a + 1 else
                           regex_char(a, True) + regex_char(b, True)
                           for a, b in plain)
            parts.append(f"[{body}]")
    controls = [cp for cp in special if cp < 0x20]
    if len(controls) == 0x20:
        parts.append(r"\\[bfnrt]|\\u00[01][0-9a-fA-F]")
        special = [cp for cp in special if cp >= 0x20]
    parts.extend(_canonical_unit(cp) for cp in special)
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def json_string_literal(value: str) -> Node:
    """The canonical JSON text of ``value``, quotes included, as a tree.

    A lone surrogate is written as its escape (``\\ud800``, hex digits in
    either case): UTF-8 has no bytes for it, and a JSON parser reads the
    escape back as that one code unit. Only a Python string can hold a high
    and a low surrogate side by side; every JSON text of those two reads back
    as the one character they pair into, so such a string is refused."""
    # str methods first, no match object (a property name each): isprintable()
    # is false for controls and surrogates, and what else it refuses the
    # general path below writes as the same one text
    if value.isprintable() and '"' not in value and "\\" not in value:
        return Text(f'"{value}"')
    if _PLAIN.fullmatch(value):
        return Text('"' + value + '"')
    if _SPLIT_PAIR.search(value):
        exc = SplitSurrogatePair(split_pair_message(value))
        exc.text = value
        raise exc
    return concat(_QUOTE, *[_canonical_unit_tree(ord(ch)) for ch in value], _QUOTE)


def split_pair_message(value: str) -> str:
    return (f"the string {value[:60]!r} holds a surrogate pair as two characters, "
            "which no JSON text spells (JSON reads the two escapes as one character)")


def json_text(value, **options) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` with each lone surrogate
    written as its escape, the canonical text :func:`json_string_literal` spells."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


def holds_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (a lone one, in a JSON value)."""
    return _SURROGATE.search(text) is not None


_SURROGATE = re.compile("[\ud800-\udfff]")
_SPLIT_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


# characters written as themselves (no escape)
_PLAIN = re.compile('[^"\\\\\x00-\x1f\ud800-\udfff]*')
_HEX_DIGIT = chars([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])


@functools.lru_cache(maxsize=4096)
def _unit(cp: int) -> Node:
    return _canonical_unit_tree(cp)


def _canonical_unit_tree(cp: int) -> Node:
    """The canonical JSON spelling of one character (hex digits in either case), as a tree."""
    if cp in _SHORT_ESCAPES:
        return Text(_SHORT_TEXT[cp])
    if cp < 0x20:
        low = cp & 15
        digit = chars([(ord(f"{low:x}"),) * 2, (ord(f"{low:X}"),) * 2]) if low > 9 else Text(f"{low:x}")
        return concat(Text(f"\\u00{cp >> 4:x}"), digit)
    if SURROGATES[0] <= cp <= SURROGATES[1]:
        # a lone surrogate (in an enum, a const or a property name): UTF-8 has no bytes
        # for it, so its one spelling is the escape, as json.dumps and JSON.stringify write it
        return concat(Text("\\u"), *[chars([(ord(d),) * 2, (ord(d.upper()),) * 2]) if d.isalpha()
                                       else Text(d) for d in f"{cp:04x}"])
    return Text(chr(cp))


def keys_except(names) -> Node:
    """A JSON string (canonical spelling) that is none of ``names``, as a tree.

    A string that is not a name either stops at a proper prefix of some
    name (a trie node that is not a name itself), or leaves the trie: it
    follows a branch, then takes a character no name takes there, then
    anything. The "anything" is shared by every exit, so the regex is
    ``"(EXITS ANY* | SHORT)"`` with both finite parts written as tries.
    Names of plain ASCII characters (a character past ASCII or an escape
    leaves the trie at any node alike) are an
    :class:`~tokendfa.analysis.regex_tree.Excluding`, which the builders
    make straight from the trie: sp_0's 91 names (1,330 characters) were
    ~4-6 ms of tree nodes and 6,000-7,000 NFA states written as branches,
    ~0.1 ms and ~960 states so.
    """
    return _keys_except(tuple(dict.fromkeys(names)))


@functools.lru_cache(maxsize=1024)
def _keys_except(names: tuple[str, ...]) -> Node:
    # objects with the same names recur within a schema (Kubernetes:376: 82 distinct of 181)
    any_run = repeat(_CANONICAL_CHAR, 0, None)
    if not names:
        return concat(_QUOTE, any_run, _QUOTE)
    if _PLAIN_TEXT("".join(names)):
        # the builders make this straight from the trie (regex_tree.Excluding)
        return concat(_QUOTE, Excluding(tuple(sorted(names)), _PLAIN_UNITS, _WIDE_OR_ESCAPED, any_run), _QUOTE)
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ord(ch), {})
        node[-1] = {}

    # Trie nodes are many (Kubernetes:188: 8k for 45 objects): the trees are made
    # directly, their parts being distinct already
    def exits(node: dict) -> Node:
        children = [cp for cp in node if cp >= 0]
        parts = []
        other = _except_units(children)
        if other is not None:
            parts.append(other)
        parts.extend(Concat((_unit(cp), exits(node[cp]))) for cp in children)
        return parts[0] if len(parts) == 1 else Alt(tuple(parts))

    def rest(node: dict) -> Node | None:
        """The strings below ``node`` (relative to it, the empty one too) that
        end at a trie node that is not a name: the keys that stop short."""
        parts = [] if -1 in node else [EMPTY]
        for cp, child in node.items():
            if cp >= 0:
                below = rest(child)
                if below is not None:
                    parts.append(_unit(cp) if below is EMPTY else Concat((_unit(cp), below)))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else Alt(tuple(parts))

    body = exits(trie) + any_run
    short = rest(trie)
    # the two closures call themselves through their cells, a cycle only the cyclic
    # collector frees: 4,096 such calls (an allOf of 12 anyOfs) left ~40,000 objects
    # for it to walk
    exits = rest = None  # noqa: F841
    return concat(_QUOTE, alt([body] if short is None else [body, short]), _QUOTE)


def _plain_ascii(ch: str) -> bool:
    """Whether ``ch`` is written as itself in JSON text and is ASCII."""
    return 0x20 <= ord(ch) < 0x7F and ch not in '"\\'


# the characters written as themselves in JSON text that are ASCII (DEL too): one byte each
_PLAIN_UNITS = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F))
# text of _plain_ascii characters only
_PLAIN_TEXT = re.compile('[ !#-\\[\\]-~]*').fullmatch


# one canonical character: not a quote, a backslash or a control; or a short escape; or \u00XX
_ESCAPED_CONTROL = alt([concat(Text("\\"), chars([(ord(c), ord(c)) for c in '"\\bfnrt'])),
                        concat(Text("\\u00"), chars([(0x30, 0x31)]), _HEX_DIGIT)])


# a canonical character past ASCII, or an escaped one
_WIDE_OR_ESCAPED = alt([chars([(0x80, MAX_CODEPOINT)]), _ESCAPED_CONTROL])


def _except_units(children: list[int]) -> Node | None:
    """One canonical character that is none of ``children`` (short form for ASCII children)."""
    return _except_units_of(tuple(sorted(children)))


@functools.lru_cache(maxsize=4096)
def _except_units_of(children: tuple[int, ...]) -> Node | None:
    # a long name's trie is a chain of one-child nodes: the same few sets again and again
    if all(0x20 <= cp < 0x7F and cp not in (0x22, 0x5C) for cp in children):
        taken = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)] + [(cp, cp) for cp in children]
        return alt([chars(_complement(taken)), _ESCAPED_CONTROL])
    return char_set_tree(_complement([(cp, cp) for cp in children]))


def char_set_tree(ranges) -> Node | None:
    """:func:`char_set_regex` as a tree (None: no character)."""
    return from_text(char_set_regex(ranges))


_CANONICAL_CHAR_TEXT = char_set_regex([(0, MAX_CODEPOINT)])
_CANONICAL_CHAR = parse_regex(_CANONICAL_CHAR_TEXT)


def string_regex(min_length: int = 0, max_length: int | None = None, *, counted=repeat) -> Node | None:
    """Any JSON string (every spelling) with a length between the bounds;
    ``counted(unit, lo, hi)`` writes the count (the compiler's may use shared
    definitions)."""
    if max_length is not None and max_length < min_length:
        return None
    if min_length == 0 and max_length is None:
        return STRING
    return concat(_QUOTE, counted(CHAR_TREE, min_length, max_length), _QUOTE)


def canonical_string_regex(min_length: int = 0, max_length: int | None = None) -> Node | None:
    """Any JSON string in its canonical spelling with a length between the bounds."""
    if max_length is not None and max_length < min_length:
        return None
    return concat(_QUOTE, repeat(_CANONICAL_CHAR, min_length, max_length), _QUOTE)


# --- ECMA-262 patterns ----------------------------------------------------------

# ECMA \s: WhiteSpace and LineTerminator (Unicode Zs, plus a few).
_ECMA_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
               (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
               (0xFEFF, 0xFEFF)]
# ECMA '.': anything but a line terminator
_DOT = _complement([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
_ESCAPES = class_escapes(_ECMA_SPACE)


def _ecma_to_python(pattern: str) -> str:
    """Rewrite the ECMA spellings Python's parser reads differently."""
    out = []
    i, in_class = 0, False
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "u" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise PatternUnsupported(f"bad escape \\u{{ in {pattern!r}")
                cp = int(pattern[i + 3:end], 16)
                if SURROGATES[0] <= cp <= SURROGATES[1]:
                    raise PatternUnsupported(_lone_surrogate(pattern, cp))
                out.append(f"\\U{cp:08x}")
                i = end + 1
                continue
            unit = _UNIT_ESCAPE.match(pattern, i)
            if unit is not None and SURROGATES[0] <= int(unit.group(1), 16) <= SURROGATES[1]:
                # ECMA reads \ud83d\ude00 as the two UTF-16 units of one character
                high = int(unit.group(1), 16)
                pair = _UNIT_ESCAPE.match(pattern, unit.end())
                low = int(pair.group(1), 16) if pair is not None else 0
                if not (high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF):
                    raise PatternUnsupported(_lone_surrogate(pattern, high))
                out.append(f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}")
                i = pair.end()
                continue
            if nxt == "c" and i + 2 < n and pattern[i + 2].isalpha():
                out.append(f"\\x{ord(pattern[i + 2]) % 32:02x}")
                i += 3
                continue
            if nxt in "pP":
                raise PatternUnsupported(f"Unicode property escape \\{nxt} in {pattern!r}")
            if nxt == "k" and i + 2 < n and pattern[i + 2] == "<":
                raise PatternUnsupported(f"backreference \\k in {pattern!r}")
            if nxt.isalpha() and nxt not in "dDwWsSbBnrtfvxu":
                # ECMA without the u flag reads \Z as the letter Z, with it refuses it; Python's
                # re (jsonschema's) reads \Z as the end: no reading is safe, so none is taken
                raise PatternUnsupported(
                    f"escape \\{nxt} in pattern {pattern!r} (ECMA-262 reads it as the letter "
                    f"{nxt!r} or refuses it, other dialects as an anchor or a class)")
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                out.append("\\[")
                i += 1
                continue
            out.append(c)
            i += 1
            continue
        if c == "[":
            if pattern.startswith("[^]", i):
                out.append("[\\s\\S]")
                i += 3
                continue
            if pattern.startswith("[]", i):
                out.append("[^\\s\\S]")
                i += 2
                continue
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            continue
        if c == "{" and _NO_LOWER_BOUND.match(pattern, i):
            # ECMA without the u flag reads x{,3} as the text "x{,3}", with it refuses it;
            # Python's re (jsonschema's) reads it as x{0,3}
            raise PatternUnsupported(f"quantifier {_NO_LOWER_BOUND.match(pattern, i).group()} in pattern "
                                     f"{pattern!r} (ECMA-262 reads it as text or refuses it, Python's "
                                     "re as a count from 0)")
        if c == "(" and pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        if SURROGATES[0] <= ord(c) <= SURROGATES[1]:
            raise PatternUnsupported(_lone_surrogate(pattern, ord(c)))
        out.append(c)
        i += 1
    return "".join(out)


_UNIT_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_NO_LOWER_BOUND = re.compile(r"\{,[0-9]+\}")


def _lone_surrogate(pattern: str, cp: int) -> str:
    return (f"lone surrogate U+{cp:04X} in pattern {pattern!r} (a pattern here reads "
            "characters, which a lone surrogate is not)")


# Python's global inline flags that change what the pattern means; ECMA-262
# patterns have none ((?x) changes only how it is written, and is read)
_MEANING_FLAGS = {_sre.SRE_FLAG_IGNORECASE: "i", _sre.SRE_FLAG_LOCALE: "L",
                  _sre.SRE_FLAG_MULTILINE: "m", _sre.SRE_FLAG_DOTALL: "s"}


def _parse(pattern: str):
    try:
        tree = parse_tree(_ecma_to_python(pattern), re.ASCII)
    except PatternUnsupported:
        raise
    except ValueError as exc:  # a RegexError, or the rewrite's own (a bad \u{...})
        raise PatternUnsupported(f"pattern {pattern!r} cannot be read: {exc}") from None
    flags = "".join(name for flag, name in _MEANING_FLAGS.items() if tree.state.flags & flag)
    if flags:
        raise PatternUnsupported(f"inline flags (?{flags}) in pattern {pattern!r} (ECMA-262 "
                                 "patterns have no inline flags; write the cases or characters out)")
    return tree


def _set_ranges(op, av) -> list[tuple[int, int]]:
    try:
        return list(set_ranges(op, av, escapes=_ESCAPES, dot=_DOT))
    except RegexError as exc:
        raise PatternUnsupported(str(exc)) from None


_SETS = (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN)
_ANCHOR_NAMES = {
    _sre.AT_BEGINNING: "^", _sre.AT_END: "$", _sre.AT_BEGINNING_STRING: "\\A",
    _sre.AT_END_STRING: "\\Z", _sre.AT_BOUNDARY: "\\b", _sre.AT_NON_BOUNDARY: "\\B",
}


def _emit(items, pattern: str) -> str | None:
    """Our-dialect regex (JSON text) for a parsed ECMA sequence; None: matches nothing."""
    out = []
    for op, av in items:
        if op in _SETS:
            piece = char_set_regex(_set_ranges(op, av))
        elif op is _sre.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags & ~(_sre.SRE_FLAG_ASCII | _sre.SRE_FLAG_UNICODE) or del_flags:
                raise PatternUnsupported(f"inline flags in {pattern!r}")
            piece = _emit(sub, pattern)
            if piece is not None:
                piece = f"(?:{piece})"
        elif op is _sre.BRANCH:
            branches = [b for b in (_emit(branch, pattern) for branch in av[1]) if b is not None]
            piece = None if not branches else "(?:" + "|".join(branches) + ")"
        elif op is _sre.MAX_REPEAT or op is _sre.MIN_REPEAT:
            lo, hi, sub = av
            body = _emit(sub, pattern)
            if body is None:
                piece = "" if lo == 0 else None
            else:
                piece = _counted(f"(?:{body})", lo, None if hi == _sre.MAXREPEAT else hi)
        elif op is _sre.AT:
            raise PatternUnsupported(f"anchor or boundary {_ANCHOR_NAMES.get(av, av)} inside "
                                     f"pattern {pattern!r}")
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            raise PatternUnsupported(f"lookaround in pattern {pattern!r}")
        elif op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
            raise PatternUnsupported(f"backreference in pattern {pattern!r}")
        else:
            raise PatternUnsupported(f"construct {op} in pattern {pattern!r}")
        if piece is None:
            return None
        out.append(piece)
    return "".join(out)


def _has_anchor(items) -> bool:
    for op, av in items:
        if op is _sre.AT and av in _STARTS + _ENDS:
            return True
        if op is _sre.SUBPATTERN and _has_anchor(av[3]):
            return True
        if op is _sre.BRANCH and any(_has_anchor(b) for b in av[1]):
            return True
    return False


_STARTS = (_sre.AT_BEGINNING, _sre.AT_BEGINNING_STRING)
_ENDS = (_sre.AT_END, _sre.AT_END_STRING)
_MAX_ALTERNATIVES = 64


def _anchored_alternatives(items, pattern: str = ""):
    """Split a parsed pattern into ``(left_anchored, right_anchored, core items)``.

    Groups and alternations that hold anchors are distributed over the
    sequence (Python's parser factors ``(^a$|^b$)`` into ``^(?:a$|b$)``), so
    every anchor ends up at an end of its alternative or is reported.
    """
    alternatives = [(False, False, [])]
    for op, av in items:
        if op is _sre.AT and av in _STARTS:
            updated = []
            for left, right, core in alternatives:
                if core and _width(core)[1] != 0:
                    continue  # ^ after a character: this alternative matches nothing
                updated.append((True, right, core))
            alternatives = updated
            continue
        if op is _sre.AT and av in _ENDS:
            alternatives = [(left, True, core) for left, right, core in alternatives]
            continue
        if op is _sre.SUBPATTERN and not av[1] and not av[2] and _has_anchor(av[3]):
            inner = _anchored_alternatives(av[3], pattern)
        elif op is _sre.BRANCH and _has_anchor([(op, av)]):
            inner = []
            for branch in av[1]:
                inner.extend(_anchored_alternatives(branch, pattern))
        else:
            inner = [(False, False, [(op, av)])]
        updated = []
        for left, right, core in alternatives:
            for in_left, in_right, in_core in inner:
                if right and in_core and _width(in_core)[0] > 0:
                    continue  # something after $: matches nothing
                if in_left and core and _width(core)[0] > 0:
                    continue
                updated.append((left or in_left, right or in_right, core + list(in_core)))
        if len(updated) > _MAX_ALTERNATIVES:
            raise PatternUnsupported(f"pattern {pattern!r} has too many anchored alternatives")
        alternatives = updated
    return alternatives


def _width(items) -> tuple[int, int | None]:
    if not items:
        return 0, 0
    try:
        lo, hi = _sre_parse.SubPattern(_sre_parse.State(), list(items)).getwidth()
    except (IndexError, TypeError, AttributeError):  # backreferences: widths unknown
        return 0, None
    return lo, (None if hi >= _sre.MAXREPEAT else hi)


@functools.lru_cache(maxsize=4096)
def translate_pattern(pattern: str, min_length: int = 0,
                      max_length: int | None = None) -> Node | None:
    """The JSON texts (quotes included) of strings that contain a match of
    the ECMA ``pattern`` and whose length is within the bounds, as a tree;
    computed once per distinct pattern and bounds (a bounded process-wide cache).

    A pattern anchored at both ends whose pieces are plain ASCII characters
    and classes, each repeated or not (``^[a-z0-9_]+$``, ``^\\d{4}-\\d{2}$``),
    is read straight into its tree (:func:`_plain_pattern`); any other goes
    through Python's parser and the regex text, as the reference.

    Raises :class:`PatternUnsupported` for what cannot be written exactly.
    """
    tree = _plain_pattern(pattern, min_length, max_length)
    if tree is not _NOT_PLAIN:
        return tree
    return from_text(_translate_pattern_text(pattern, min_length, max_length))


# --- plain patterns, read without Python's parser ---------------------------------------------
#
# Most patterns of real schemas are a whole-string sequence of ASCII
# characters and classes (^[a-zA-Z0-9_.]+$, ^\d{4}-\d{2}-\d{2}$). The general
# path parses one with Python's re parser, writes our regex text and parses
# that back: in a fresh fork of a warm process (a forked server worker's first
# schema, MaskBench's method) ~0.6-1.2 ms and 110-200 copy-on-write page
# faults a pattern on the MaskBench sample (benchmarks/ttfm_phases.py), often
# half of the schema's first mask. _plain_pattern reads that subset itself and
# builds the same tree with the same constructors; anything else (groups,
# alternatives, negated classes, an unanchored end, '"' or '\\' outside a
# class, non-ASCII) answers _NOT_PLAIN and takes the general path.
# tests/test_schema_patterns.py holds the two paths equal on every pattern of
# the JSONSchemaBench corpus, under several length bounds.

_NOT_PLAIN = object()
# Longer patterns take the general path, which reads them under the time
# limit (this loop does not look at the deadline; real plain patterns are
# tens of characters)
_PLAIN_MAX_LENGTH = 1024
# printable ASCII a JSON string holds as itself ('"' and '\\' are escaped there)
_PLAIN_FIRST, _PLAIN_LAST = 0x20, 0x7E
_JSON_ESCAPED = (0x22, 0x5C)
# outside a class: characters that stand for themselves
_PLAIN_LITERALS = frozenset(chr(c) for c in range(_PLAIN_FIRST, _PLAIN_LAST + 1)) - set('"\\.^$*+?()[]{}|')
# escapes outside and inside a class: a character class, or the character itself
_CLASS_ESCAPES = {"d": ((0x30, 0x39),), "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))}
_SELF_ESCAPES = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ")   # ASCII punctuation (and space)
_QUOTE_TEXT = Text('"')


def _plain_pattern(pattern: str, min_length: int, max_length: int | None):
    """The tree :func:`translate_pattern` makes of ``pattern``, or
    ``_NOT_PLAIN`` when it is not a plain pattern (see above) or the lengths
    cannot be folded into it (the general path then reports it)."""
    n = len(pattern)
    if not 3 <= n <= _PLAIN_MAX_LENGTH or pattern[0] != "^" or pattern[-1] != "$" or pattern[-2] == "\\":
        return _NOT_PLAIN
    pieces = []   # (ranges, lo, hi): a character set lo to hi times (hi None: no bound)
    i, end = 1, n - 1
    while i < end:
        c = pattern[i]
        if c == "[":
            ranges, i = _plain_class(pattern, i + 1, end)
            if ranges is None:
                return _NOT_PLAIN
        elif c == "\\":
            if i + 1 >= end:
                return _NOT_PLAIN
            e = pattern[i + 1]
            if e in _CLASS_ESCAPES:
                ranges = _CLASS_ESCAPES[e]
            elif e in _SELF_ESCAPES:
                ranges = ((ord(e), ord(e)),)
            else:
                return _NOT_PLAIN
            i += 2
        elif c in _PLAIN_LITERALS:
            ranges = ((ord(c), ord(c)),)
            i += 1
        else:
            return _NOT_PLAIN
        lo, hi, i = _plain_count(pattern, i, end)
        if lo is None:
            return _NOT_PLAIN
        pieces.append((ranges, lo, hi))
    if not pieces:
        return _NOT_PLAIN
    # the lengths, as _alternative folds them: within the pattern's own widths,
    # none; else into its one variable-width piece, when it has exactly one
    width_lo = sum(lo for _, lo, _ in pieces)
    width_hi = None if any(hi is None for _, _, hi in pieces) else sum(hi for _, _, hi in pieces)
    if max_length is not None and width_lo > max_length or width_hi is not None and width_hi < min_length:
        return None
    if not (width_lo >= min_length and (max_length is None or (width_hi is not None and width_hi <= max_length))):
        variable = [k for k, (_, lo, hi) in enumerate(pieces) if lo != hi]
        if len(variable) != 1:
            return _NOT_PLAIN
        k = variable[0]
        ranges, lo, hi = pieces[k]
        fixed = width_lo - lo
        new_lo = max(lo, min_length - fixed)
        new_hi = hi if max_length is None else (max_length - fixed if hi is None else min(hi, max_length - fixed))
        if new_hi is not None and new_lo > new_hi:
            return None
        pieces[k] = (ranges, new_lo, new_hi)
    parts = [_QUOTE_TEXT]
    for ranges, lo, hi in pieces:
        unit = _plain_unit(ranges)
        if unit is None:
            return _NOT_PLAIN
        parts.append(unit if lo == hi == 1 else repeat(unit, lo, hi))
    parts.append(_QUOTE_TEXT)
    return concat(*parts)


def _plain_class(pattern: str, i: int, end: int):
    """The merged ranges of the class whose body starts at ``i`` and the
    index after its ``]``, or ``(None, i)`` when it is not a plain class
    (negated, empty, a nested ``[``, a character not printable ASCII, an
    escape other than ``\\d``, ``\\w`` or a
    punctuation mark, a range with a class at an end)."""
    if i >= end or pattern[i] in "^]":
        return None, i
    ranges = []
    while i < end and pattern[i] != "]":
        c = pattern[i]
        if c == "[":
            return None, i
        if c == "\\":
            if i + 1 >= end:
                return None, i
            e = pattern[i + 1]
            i += 2
            if e in _CLASS_ESCAPES:
                if i < end and pattern[i] == "-" and i + 1 < end and pattern[i + 1] != "]":
                    return None, i   # a class at a range's end
                ranges.extend(_CLASS_ESCAPES[e])
                continue
            if e not in _SELF_ESCAPES:
                return None, i
            first = ord(e)
        else:
            first = ord(c)
            i += 1
        last = first
        if i + 1 < end and pattern[i] == "-" and pattern[i + 1] != "]":
            d = pattern[i + 1]
            if d == "\\":
                if i + 2 >= end or pattern[i + 2] not in _SELF_ESCAPES:
                    return None, i
                last = ord(pattern[i + 2])
                i += 3
            elif d == "[":
                return None, i
            else:
                last = ord(d)
                i += 2
            if last < first:
                return None, i
        ranges.append((first, last))
    if i >= end:
        return None, i
    merged = merge_ranges(ranges)
    if merged[0][0] < _PLAIN_FIRST or merged[-1][1] > _PLAIN_LAST:
        return None, i
    return tuple(merged), i + 1


def _plain_unit(ranges: tuple) -> Node | None:
    """One character of ``ranges`` (printable ASCII) as its canonical JSON
    text, the tree :func:`char_set_regex`'s text reads as: the characters
    JSON writes as themselves, then ``\\"`` and ``\\\\`` as alternatives
    when the set holds them; None when it holds only those two (their text
    reads back as a factored tree, left to the general path)."""
    plain = ranges
    escaped = [cp for cp in _JSON_ESCAPED if any(lo <= cp <= hi for lo, hi in ranges)]
    if escaped:
        plain = []
        for lo, hi in ranges:
            for cp in escaped:
                if lo <= cp <= hi:
                    if lo < cp:
                        plain.append((lo, cp - 1))
                    lo = cp + 1
            if lo <= hi:
                plain.append((lo, hi))
        if not plain:
            return None
    unit = text(chr(plain[0][0])) if len(plain) == 1 and plain[0][0] == plain[0][1] else chars(plain)
    if not escaped:
        return unit
    return alt([unit] + [_ESCAPED_UNITS[cp] for cp in escaped])


_ESCAPED_UNITS = {0x22: Text('\\"'), 0x5C: Text("\\\\")}


def _plain_count(pattern: str, i: int, end: int):
    """The quantifier at ``i``: ``(lo, hi, index after it)`` (1, 1 for none;
    hi None: no bound), or ``(None, None, i)`` for one that is not plain (a
    lazy one, ``{,n}``, or a brace that is no quantifier)."""
    if i >= end:
        return 1, 1, i
    c = pattern[i]
    if c in "*+?":
        lo, hi, i = (0, None, i + 1) if c == "*" else (1, None, i + 1) if c == "+" else (0, 1, i + 1)
    elif c == "{":
        close = pattern.find("}", i, end)
        if close < 0:
            return None, None, i
        body = pattern[i + 1:close]
        low, comma, high = body.partition(",")
        if not (low.isdigit() and low.isascii() and (not high or high.isdigit() and high.isascii())):
            return None, None, i
        lo = int(low)
        hi = lo if not comma else int(high) if high else None
        if hi is not None and hi < lo or lo > 1000 or (hi or 0) > 1000:
            return None, None, i
        i = close + 1
    else:
        return 1, 1, i
    if i < end and pattern[i] in "?*+{":
        return None, None, i   # lazy, or a quantifier of a quantifier
    return lo, hi, i


def _translate_pattern_text(pattern: str, min_length: int, max_length: int | None) -> str | None:
    tree = _parse(pattern)
    alternatives = _anchored_alternatives(list(tree), pattern)
    out = []
    for left, right, core in alternatives:
        piece = _alternative(core, left, right, min_length, max_length, pattern)
        if piece is not None:
            out.append(piece)
    if not out:
        return None
    body = out[0] if len(out) == 1 else "(?:" + "|".join(out) + ")"
    return f'"{body}"'


def _alternative(core, left: bool, right: bool, min_length: int, max_length: int | None,
                 pattern: str) -> str | None:
    anything = _sre_parse.SubPattern(_sre_parse.State(), [(_sre.IN, [(_sre.RANGE, (0, MAX_CODEPOINT))])])
    any_run = (_sre.MAX_REPEAT, (0, _sre.MAXREPEAT, anything))
    items = ([] if left else [any_run]) + list(core) + ([] if right else [any_run])
    items = [it for it in items]
    if not items:
        return "" if min_length == 0 else None
    lo, hi = _width(items)
    if max_length is not None and lo > max_length or hi is not None and hi < min_length:
        return None
    if lo >= min_length and (max_length is None or (hi is not None and hi <= max_length)):
        return _emit(items, pattern)
    # fold the lengths into the one variable-width run of a single character set
    fixed, variable = 0, None
    for position, (op, av) in enumerate(items):
        w_lo, w_hi = _width([(op, av)])
        if w_lo == w_hi:
            fixed += w_lo
            continue
        if variable is not None:
            variable = "many"
            break
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and len(av[2]) == 1 and av[2][0][0] in _SETS:
            variable = position
        else:
            variable = "many"
            break
    if variable is None or variable == "many":
        raise PatternUnsupported(
            f"minLength/maxLength together with pattern {pattern!r}: no exact regex for the "
            "intersection (only a pattern with one variable-width run of one character class "
            "can take the lengths)")
    op, (r_lo, r_hi, sub) = items[variable]
    r_hi = None if r_hi == _sre.MAXREPEAT else r_hi
    new_lo = max(r_lo, min_length - fixed)
    new_hi = r_hi if max_length is None else (max_length - fixed if r_hi is None
                                               else min(r_hi, max_length - fixed))
    if new_hi is not None and new_lo > new_hi:
        return None
    items[variable] = (op, (new_lo, _sre.MAXREPEAT if new_hi is None else new_hi, sub))
    return _emit(items, pattern)


def pattern_complement(pattern: str) -> Node | None:
    """The JSON texts of the strings that do *not* contain a match of ``pattern``, as a tree."""
    return from_text(_pattern_complement_text(pattern))


def _pattern_complement_text(pattern: str) -> str | None:
    """Regex (JSON text) for the strings that do *not* contain a match of ``pattern``.

    Only two common shapes are handled (else None): a whole-string run of one
    character class (``^[a-z_]+$``: some other character, or a length out
    of range) and a literal prefix (``^x-``: a proper prefix, or a string
    that leaves the prefix at some character).
    """
    try:
        alternatives = _anchored_alternatives(list(_parse(pattern)), pattern)
    except PatternUnsupported:
        return None
    if len(alternatives) != 1:
        return None
    left, right, core = alternatives[0]
    any_unit = _CANONICAL_CHAR_TEXT
    if left and right and len(core) == 1 and core[0][0] in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
        lo, hi, sub = core[0][1]
        if len(sub) != 1 or sub[0][0] not in _SETS:
            return None
        ranges = _set_ranges(*sub[0])
        unit, other = char_set_regex(ranges), char_set_regex(_complement(ranges))
        parts = []
        if other is not None:
            parts.append(f"{any_unit}*{other}{any_unit}*")
        if unit is not None:
            if lo > 0:
                parts.append(_counted(unit, 0, lo - 1))
            if hi != _sre.MAXREPEAT:
                parts.append(_counted(unit, hi + 1, None))
        elif lo > 0:
            parts.append("")
        return '"(?:' + "|".join(parts) + ')"' if parts else None
    if left and not right and all(op is _sre.LITERAL for op, _ in core) and core:
        prefix = [av for _, av in core]
        exits, prefixes = [], [""]
        for i, cp in enumerate(prefix):
            other = char_set_regex(_complement([(cp, cp)]))
            head = "".join(_canonical_unit(c) for c in prefix[:i])
            if other is not None:
                exits.append(head + other + any_unit + "*")
            if i > 0:
                prefixes.append(head)
        return '"(?:' + "|".join(exits + prefixes) + ')"'
    return None


def pattern_matches(pattern: str, value: str) -> bool:
    """Whether ``value`` contains a match of the ECMA ``pattern`` (our reading of it)."""
    compiled = _pattern_compiled(pattern)
    if compiled is None:
        return False
    if _SURROGATE.search(value):
        # ECMA and Python read a lone surrogate as one more code unit that '.' or [^a]
        # match; our patterns are over characters, which it is not
        raise PatternUnsupported(f"pattern {pattern!r} tested against {value[:60]!r}, "
                                 "which holds a lone surrogate")
    return compiled.fullmatch(json.dumps(value, ensure_ascii=False)) is not None


@functools.lru_cache(maxsize=1024)
def _pattern_compiled(pattern: str):
    """The ECMA ``pattern``'s translation, compiled by Python's ``re`` (None: it matches nothing)."""
    regex = _translate_pattern_text(pattern, 0, None)
    return None if regex is None else compile_untrusted(regex)
