"""Writing regex text: alternations, counted repeats, groups.

Every module of the schema compiler writes regexes as text in our dialect
(Python ``re`` syntax, matched against the whole text); these are the few
shapes they all write, in one place so that the same language is always
spelled the same way (the shared pieces of :class:`~tokendfa.schema.api.SchemaRegex`
are found by comparing regex text).
"""

from __future__ import annotations

__all__ = ["alternation", "counted", "repeat", "optional", "group"]


def alternation(parts) -> str | None:
    """``(?:a|b|...)`` of the distinct parts that are not None; None when none is left."""
    parts = list(dict.fromkeys(p for p in parts if p is not None))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def counted(unit: str, lo: int, hi: int | None) -> str:
    """``unit`` (one atom: a character, a class or a group) ``lo`` to ``hi`` times (None: no bound)."""
    if hi is None:
        if lo == 0:
            return unit + "*"
        if lo == 1:
            return unit + "+"
        return f"{unit}{{{lo},}}"
    if lo == hi:
        return "" if lo == 0 else unit if lo == 1 else f"{unit}{{{lo}}}"
    if lo == 0 and hi == 1:
        return unit + "?"
    return f"{unit}{{{lo},{hi}}}"


def repeat(piece: str, lo: int, hi: int | None) -> str:
    """``piece`` (any regex) ``lo`` to ``hi`` times, in a group; empty when ``hi <= 0``."""
    if hi is not None and hi <= 0:
        return ""
    return counted(f"(?:{piece})", lo, hi)


def optional(regex: str) -> str:
    return f"(?:{regex})?"


def group(regex: str) -> str:
    """``regex`` as one atom: itself when it is one ``(?:...)`` group already."""
    return regex if regex.startswith("(?:") and _balanced_outer(regex) else f"(?:{regex})"


def _balanced_outer(regex: str) -> bool:
    """Whether ``regex`` is one group ``(?:...)`` from its first to its last character."""
    depth, i = 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            while i < len(regex) and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i != len(regex) - 1:
                return False
        i += 1
    return True
