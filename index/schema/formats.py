"""``format`` as regexes: the formats we assert, each the body of a JSON string.

A ``format`` is asserted for the names in :data:`FORMATS` (``date-time``,
``date``, ``time``, ``duration``, ``uuid``, ``email``, ``hostname``,
``ipv4``, ``ipv6``, ``uri``, ``uri-reference``, ``json-pointer``,
``relative-json-pointer``); any other format is an annotation, which the
compiler lists in its notes. Each regex is the canonical JSON text of the
string without its quotes (every character of these formats is printable
ASCII, except in JSON pointers, which may hold any character). Some are
narrowed, never widened: no quoted e-mail local parts, no IP-literal URI
hosts, leap seconds only at ``23:59:60`` UTC, host names within two sound
families of label counts and lengths (see ``_HOSTNAME``); :data:`NARROWED`
says what each leaves out, and the compiler lists it in its notes.

A value is checked (an ``enum``/``const`` member, a branch of a ``oneOf``)
with :func:`check_format`, which answers for the full format where a plain
test can (a leap second in any offset, a host name of any valid shape) and
raises :class:`UndecidedFormat` where it cannot (a quoted e-mail local part,
an address literal, an IP-literal URI host): the validator's answer must not
be the narrowed regex's, or a refused member would vanish without a word and
a negated format would let valid values through.

:func:`format_regex` is what the string emitter and the negation of a
``format`` read; the ``jsonschema`` format checker of
:mod:`tokendfa.schema.api` asserts these same regexes, so that an ``enum``
value is checked the way the regex would check it.
"""

from __future__ import annotations

import functools
import json
import re

from ..analysis.errors import UnsupportedSchemaError
from ..analysis.utf8 import complement_ranges, merge_ranges
from ..analysis.regex_tree import Node, parse_regex
from .strings import char_set_regex

__all__ = ["FORMATS", "FORMAT_WIDTHS", "NARROWED", "UndecidedFormat", "check_format", "format_regex",
           "format_tree"]

_HEX = "[0-9a-fA-F]"
_YEAR = "[0-9]{4}"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_MONTH_DAY = ("(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              "|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_OFFSET = "(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_FRACTION = r"(?:\.[0-9]+)?"
# A leap second (:60) is valid only at 23:59:60 UTC; we accept it with a zero
# offset only (other offsets would need clock arithmetic).
_TIME = (f"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRACTION}{_OFFSET}"
         f"|23:59:60{_FRACTION}(?:[zZ]|[+-]00:00))")
_DURATION = ("P(?:[0-9]+W|(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
             "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
             "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))")
_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = f"{_HEX}{{1,4}}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = ("(?:" + "|".join([
    f"(?:{_H16}:){{6}}{_LS32}",
    f"::(?:{_H16}:){{5}}{_LS32}",
    f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
]) + ")")
# RFC 1123 host names: labels of 1-63 letters, digits and inner hyphens, at
# most 253 characters in all. The total cannot be counted alongside the
# labels, so we accept two sound families: up to 4 labels of up to 62
# characters, or up to 8 labels of up to 30 (both stay within 253).
_LABEL62 = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,60}[A-Za-z0-9])?"
_LABEL30 = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,28}[A-Za-z0-9])?"
_HOSTNAME = rf"(?:{_LABEL62}(?:\.{_LABEL62}){{0,3}}|{_LABEL30}(?:\.{_LABEL30}){{4,7}})"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
# The dot-atom form of RFC 5321 (no quoted local parts, no address literals).
_EMAIL = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@{_HOSTNAME}"
# RFC 3986, without IP-literal hosts ([v6]).
_PCT = f"%{_HEX}{{2}}"
_UNRESERVED = "[A-Za-z0-9._~-]"
_SUB_DELIMS = "[!$&'()*+,;=]"
_PCHAR = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_AUTHORITY = (f"(?:(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?"
              f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*(?::[0-9]*)?")
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_QUERY = f"(?:{_PCHAR}|[/?])*"
_HIER = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ}(?:/{_SEGMENT})*|)"
_URI = rf"[A-Za-z][A-Za-z0-9+.-]*:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_RELATIVE = (rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*|)"
             rf"(?:\?{_QUERY})?(?:#{_QUERY})?")
_URI_REFERENCE = f"(?:{_URI}|{_RELATIVE})"

FORMATS: dict[str, str] = {
    "date-time": f"{_DATE}[tT]{_TIME}",
    "date": _DATE,
    "time": _TIME,
    "duration": _DURATION,
    "uuid": _UUID,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
}

# What each narrowed format leaves out: the compiler lists it in its notes where the
# format applies, as it does a recursion cut (these refuse valid values, never admit
# invalid ones).
_HOSTNAMES = ("host names of up to 4 labels of up to 62 characters or up to 8 labels of "
              "up to 30 (a longer valid one is refused)")
NARROWED: dict[str, str] = {
    "date-time": "a leap second only at 23:59:60 with a zero offset",
    "time": "a leap second only at 23:59:60 with a zero offset",
    "email": f"no quoted local parts or address literals; {_HOSTNAMES}",
    "hostname": _HOSTNAMES,
    "uri": "no IP-literal hosts ([v6])",
    "uri-reference": "no IP-literal hosts ([v6])",
}


# JSON pointers: any characters, ~ written ~0 and / written ~1 inside a token
_POINTER_CHAR = char_set_regex(complement_ranges(merge_ranges([(ord("/"), ord("/")), (ord("~"), ord("~"))])))
_POINTER = f"(?:/(?:{_POINTER_CHAR}|~[01])*)*"
FORMATS["json-pointer"] = _POINTER
FORMATS["relative-json-pointer"] = f"(?:0|[1-9][0-9]*)(?:#|{_POINTER})"


def format_regex(name: str) -> str | None:
    """Regex (JSON text, quotes included) for a string of a known format, else None."""
    body = FORMATS.get(name)
    return None if body is None else f'"{body}"'


# formats whose strings all have one length (min, max): lengths around them are settled here
FORMAT_WIDTHS = {"date": (10, 10), "uuid": (36, 36)}


@functools.lru_cache(maxsize=None)
def format_tree(name: str) -> Node | None:
    """:func:`format_regex` as a tree, read once per process (None: not a known format)."""
    regex = format_regex(name)
    return None if regex is None else parse_regex(regex, anchors=False)


class UndecidedFormat(UnsupportedSchemaError):
    """A narrowed format met a value its regex refuses and a plain test cannot settle."""


def check_format(name: str, value: str) -> bool:
    """Whether ``value`` (the string, not its JSON text) is a valid ``name``.

    The format's regex answers, except where it refuses a value that the
    narrowing may have left out: then the full format answers (leap seconds,
    host names), or :class:`UndecidedFormat` is raised (quoted e-mail local
    parts, address literals, IP-literal hosts)."""
    if _checkers()[name].fullmatch(_json_text(value)) is not None:
        return True
    if name not in NARROWED:
        return False
    if name == "time":
        return _leap_second(value)
    if name == "date-time":
        return (len(value) > 11 and value[10] in "tT" and _checkers()["date"].fullmatch(f'"{value[:10]}"')
                is not None and _leap_second(value[11:]))
    if name == "hostname":
        return _hostname(value)
    if name == "email" and '"' not in value and "[" not in value:
        # no quoted local part, no address literal: a dot-atom local part (no '@'
        # in it) and a host name
        local, _, host = value.rpartition("@")
        return _DOT_ATOM.fullmatch(local) is not None and _hostname(host)
    if name != "email" and "[" not in value:   # every IP-literal URI host is written in [ ]
        return False
    raise UndecidedFormat(f"format {name!r}, which is narrowed ({NARROWED[name]}), cannot tell "
                          "whether the value is valid")


@functools.lru_cache(maxsize=None)
def _checkers() -> dict:
    return {name: re.compile(format_regex(name)) for name in FORMATS}


def _json_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


_LEAP = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9]):60(?:\.[0-9]+)?(?:[zZ]|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))")
_LABEL = re.compile("[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_DOT_ATOM = re.compile(rf"{_ATEXT}+(?:\.{_ATEXT}+)*")


def _leap_second(text: str) -> bool:
    """Whether ``text`` is a time whose second is 60 at 23:59 UTC (RFC 3339)."""
    m = _LEAP.fullmatch(text)
    if m is None:
        return False
    minutes = int(m.group(1)) * 60 + int(m.group(2))
    if m.group(3):
        offset = int(m.group(4)) * 60 + int(m.group(5))
        minutes -= offset if m.group(3) == "+" else -offset
    return minutes % (24 * 60) == 23 * 60 + 59


def _hostname(text: str) -> bool:
    """RFC 1123: labels of 1-63 letters, digits and inner hyphens, 253 characters in all."""
    return 0 < len(text) <= 253 and all(_LABEL.fullmatch(label) for label in text.split("."))
