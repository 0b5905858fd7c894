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

import re

from . import limits
from .dfa import INITIAL, ByteDFA
from .errors import EmptyLanguageError
from .literal_sets import LiteralAlternation
from .minimise import canonical_byte_dfa
from .regex_compiler import DEFAULT_MAX_NFA_STATES, byte_tables_from_regex
from .regex_syntax import normalize_and_parse

__all__ = ["byte_dfa_from_regex"]


def byte_dfa_from_regex(pattern: str, *, max_nfa_states: int | None = None,
                        definitions: "dict[str, str] | None" = None,
                        max_dfa_states: int | None = None) -> ByteDFA:
    """Compile ``pattern`` (Python ``re`` syntax with ``re.ASCII`` classes,
    whole-string match) to a canonical byte DFA.

    ``definitions`` are shared pieces the pattern refers to by placeholder
    (see :mod:`tokendfa.analysis.regex_compiler`); ``max_dfa_states`` bounds the
    automaton before minimisation (:class:`~tokendfa.analysis.errors.BuildLimitError`).

    Raises :class:`RegexError`, :class:`UnsupportedRegexError`,
    :class:`EmptyLanguageError` or (past ``max_nfa_states``)
    :class:`~tokendfa.analysis.errors.BuildLimitError`, each naming the problem.
    """
    limits.check()
    # One parse serves the checks and the construction: Python's parser is ~1 us
    # a character, not interruptible, and parsing twice was ~0.05 ms of a
    # 2.7 ms first build of a 22-character pattern in a freshly forked process.
    if isinstance(pattern, LiteralAlternation):
        body, tree = pattern, None  # built from its members, never parsed
    else:
        body, tree = normalize_and_parse(pattern, int(re.ASCII))
    literal_set = body if isinstance(body, LiteralAlternation) else (definitions or {}).get(body)
    if isinstance(literal_set, LiteralAlternation):
        # a set of literals (a schema's enum) as the whole pattern: minimal from the start
        dfa = literal_set.automaton().byte_dfa(pattern)
    else:
        limit = DEFAULT_MAX_NFA_STATES if max_nfa_states is None else max_nfa_states
        transitions, finals = byte_tables_from_regex(body, max_nfa_states=limit, definitions=definitions,
                                                     max_dfa_states=max_dfa_states, tree=tree)
        dfa = canonical_byte_dfa(transitions, finals, pattern=pattern)
    if dfa.num_states <= INITIAL:
        # a generated regex can run to megabytes: its head is enough to recognise it
        shown = repr(pattern[:200]) + (f" (+{len(pattern) - 200:,} characters)" if len(pattern) > 200 else "")
        raise EmptyLanguageError(f"regex {shown} matches no string at all")
    return dfa
