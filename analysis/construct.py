"""Building a :class:`~tokendfa.analysis.dfa.ByteDFA` from a regex: the one entry point.

The pipeline, one module per step:

1. :mod:`tokendfa.analysis.regex_syntax` checks the pattern and gives every
   bad one a precise error (invalid syntax with its position, constructs no
   automaton can express), and drops redundant outer anchors;
2. :mod:`tokendfa.analysis.regex_compiler` turns it into a complete byte
   table: Python's parse tree, a Thompson NFA over UTF-8 byte ranges, subset
   construction;
3. :mod:`tokendfa.analysis.minimise` trims, minimises and renumbers the table
   into the canonical form, so the same language always gives the same arrays.

The first front end went through interegular's DFA over characters; it took
33 s on a 15k-character regex from a JSON schema, where this one takes about
1.5 s. The tests still hold the two to identical tables
(``tests/interegular_oracle.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from . import limits
from .dfa import INITIAL, ByteDFA
from .errors import EmptyRegexError
from .minimise import canonical_byte_dfa
from .literal_sets import minimal_literal_dfa
from . import regex_compiler
from .regex_compiler import DEFAULT_MAX_NFA_STATES, byte_tables_from_regex
from .regex_tree import Alt, Call, LiteralSet, Node, literal_members, parse_regex, to_regex

__all__ = ["byte_dfa_from_regex"]


def byte_dfa_from_regex(pattern: "str | Node", *, max_nfa_states: int | None = None,
                        definitions: "Mapping | None" = None,
                        max_dfa_states: int | None = None) -> ByteDFA:
    """Compile ``pattern`` (a regex tree, or Python ``re`` syntax with
    ``re.ASCII`` classes, whole-string match) to a canonical byte DFA.

    ``definitions`` are shared pieces the pattern calls (key -> tree, or
    placeholder -> text; see :mod:`tokendfa.analysis.regex_compiler`);
    ``max_dfa_states`` bounds the automaton before minimisation
    (:class:`~tokendfa.analysis.errors.BuildLimitError`).

    Raises :class:`RegexError`, :class:`UnsupportedRegexError`,
    :class:`EmptyLanguageError` or (past ``max_nfa_states``)
    :class:`~tokendfa.analysis.errors.BuildLimitError`, each naming the problem.
    """
    limits.check()
    # One cached parse serves the checks and the construction (Python's parser is
    # ~1 us a character and not interruptible); a tree is taken as it is.
    tree = pattern if isinstance(pattern, Node) else parse_regex(pattern, calls=bool(definitions))
    text = pattern if isinstance(pattern, str) else ""
    whole = tree
    if whole.__class__ is Call and definitions and whole.key in definitions:
        whole = definitions[whole.key]
    members = (literal_members(whole) if whole.__class__ is Alt
               and len(whole.items) >= regex_compiler.LITERAL_SET_MIN_BRANCHES else None)
    if whole.__class__ is LiteralSet or members:
        # a set of literals (a schema's enum, a regex's alternation of words) as the
        # whole pattern: minimal from the start
        automaton = whole.automaton() if whole.__class__ is LiteralSet else minimal_literal_dfa(members)
        dfa = automaton.byte_dfa(text)
    else:
        limit = DEFAULT_MAX_NFA_STATES if max_nfa_states is None else max_nfa_states
        transitions, finals = byte_tables_from_regex(pattern, max_nfa_states=limit, definitions=definitions,
                                                     max_dfa_states=max_dfa_states, tree=tree)
        dfa = canonical_byte_dfa(transitions, finals, pattern=text)
    if dfa.num_states <= INITIAL:
        if not text:
            text = to_regex(pattern, definitions if definitions and isinstance(
                next(iter(definitions.values())), Node) else None)
        # a generated regex can run to megabytes: its head is enough to recognise it
        shown = repr(text[:200]) + (f" (+{len(text) - 200:,} characters)" if len(text) > 200 else "")
        raise EmptyRegexError(f"regex {shown} matches no string at all")
    return dfa
