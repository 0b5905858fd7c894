"""The regex trees the schema compiler writes: alternations, sequences, counted repeats.

Every module of the schema compiler builds its regexes as trees
(:mod:`tokendfa.analysis.regex_tree`), never as text; these are the few
shapes they all build, with ``None`` for "no value at all" (a branch the
schema rules out) next to the tree's own :data:`EMPTY` (the empty string).
Trees compare by structure, so the same language built the same way is one
tree (the shared pieces of :class:`~tokendfa.schema.api.SchemaRegex` are
found by comparing trees).

The ``text_*`` helpers write regex *text* for the few places that still
compute a regex as text (number ranges, the algebra on automata, ECMA
pattern complements) before it is read once into a tree.
"""

from __future__ import annotations

import functools
import re

from ..analysis.regex_tree import (EMPTY, Node, alt, char, chars, concat, literal_set,
                                   parse_regex, repeat as _repeat, text, to_regex)

__all__ = ["alternation", "counted", "repeat", "optional", "group", "seq", "lit", "from_text",
           "intersect", "difference", "fullmatch", "as_text",
           "EMPTY", "Node", "chars", "char", "literal_set", "to_regex",
           "text_alternation", "text_counted", "text_group"]


def alternation(parts) -> Node | None:
    """One of the parts that are not None (duplicates dropped); None when none is left."""
    kept = []   # a loop: a comprehension is a function made and called (3.11)
    for p in parts:
        if p is not None:
            kept.append(p)
    if not kept:
        return None
    return alt(kept)


def seq(*parts) -> Node | None:
    """The parts one after the other; None when one is None."""
    if any(p is None for p in parts):
        return None
    return concat(*parts)


def lit(value: str) -> Node:
    """The literal text ``value`` (not a regex)."""
    return text(value)


def counted(unit: Node, lo: int, hi: int | None) -> Node:
    """``unit`` ``lo`` to ``hi`` times (None: no bound)."""
    return _repeat(unit, lo, hi)


def repeat(piece: Node, lo: int, hi: int | None) -> Node:
    """``piece`` ``lo`` to ``hi`` times; the empty string when ``hi <= 0``."""
    return _repeat(piece, lo, hi)


def optional(piece: Node) -> Node:
    return _repeat(piece, 0, 1)


def group(piece: Node) -> Node:
    """A tree needs no group: kept for the modules' symmetry with text."""
    return piece


def from_text(regex: str | None) -> Node | None:
    """A regex text computed elsewhere (the algebra, number ranges) as a tree,
    read once per distinct text (a bounded process-wide cache)."""
    if regex is None:
        return None
    return parse_regex(regex, anchors=False)


def as_text(node: Node | None) -> str | None:
    """A tree as regex text, for the algebra on automata (which reads text)."""
    return None if node is None else to_regex(node)


# --- the algebra on automata, over trees ------------------------------------------------

def intersect(a: Node, b: Node) -> Node | None:
    """The texts both match (:func:`tokendfa.analysis.algebra.intersect`), as a tree."""
    from ..analysis import algebra

    return from_text(algebra.intersect(a, b))


def difference(a: Node, b: Node) -> Node | None:
    """The texts ``a`` matches and ``b`` does not, as a tree."""
    from ..analysis import algebra

    return from_text(algebra.difference(a, b))


@functools.lru_cache(maxsize=1024)
def _compiled(node: Node):
    return re.compile(to_regex(node))


def fullmatch(node: Node, value: str) -> bool:
    """Whether the text ``value`` is a match of ``node`` (Python's ``re``)."""
    return _compiled(node).fullmatch(value) is not None


# --- text, where a regex is still computed as text --------------------------------------

def text_alternation(parts) -> str | None:
    """``(?:a|b|...)`` of the distinct parts that are not None; None when none is left."""
    parts = list(dict.fromkeys(p for p in parts if p is not None))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def text_counted(unit: str, lo: int, hi: int | None) -> str:
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


def text_group(regex: str) -> str:
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
