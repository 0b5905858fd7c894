"""How deep to unroll: free-value depth, recursion depth, and the budgets that bound them.

A schema's regex depends on two depths: how many levels of arrays and
objects a value the schema leaves free may nest (``any_depth``), and how
many times a recursive ``$ref`` is unrolled (``max_recursion_depth``).
Both are narrowings, and both can blow up the regex (an array writes its
element twice, so nested optional structures double the regex at every
level), so :func:`compile_within_bounds` compiles at the depths asked for
and then, while the regex passes ``regex_budget`` characters or its
automaton passes ``state_budget`` states, shallower: free values first,
then recursion, down to 1 each (not a compilation that deferred its
recursion to a lazy automaton, which builds no automaton whole). A schema left with no value only because
its recursion was cut is unrolled deeper instead, up to
``AUTO_RECURSION_DEPTH``. ``any_depth="auto"`` picks the free-value depth
from a measured automaton (:func:`_choose_any_depth`).

Every depth other than the one asked for is a narrowing and is listed in
the notes. ``compile_at(any depth, recursion depth)`` is given by the caller
(:mod:`tokendfa.schema.api`) and returns the compiler and its regex.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.regex_tree import LiteralSet
from ..analysis.errors import (BuildLimitError, EmptyLanguageError, RegexTooLongError,
                               TimeLimitError, UnsupportedSchemaError)

# The automaton's size decides the build's time and memory (35k states build in
# ~20 s on a 151k vocabulary, 130k states do not fit in 8 GB): a schema whose
# automaton passes this many states before minimisation is compiled again shallower,
# like a regex over the budget. Checked on regexes of at least STATE_CHECK_CHARS.
DEFAULT_STATE_BUDGET = 80_000
DEFAULT_REGEX_BUDGET = 1_000_000
STATE_CHECK_CHARS = 50_000
# When no value fits within max_recursion_depth unrollings only because the
# recursion was cut, unrolling is retried one level deeper at a time up to this.
AUTO_RECURSION_DEPTH = 6
# any_depth="auto": free values nest AUTO_MIN_ANY_DEPTH levels, and one level deeper
# at a time, up to AUTO_MAX_ANY_DEPTH, while the automaton stays within
# AUTO_DEPTH_STATES states (each level about doubles the states every copy of a free
# value takes: ~280 at 2 levels, ~2,600 at 5 in compact JSON; 25k states build in
# about 7 s on a 151k vocabulary).
AUTO_MIN_ANY_DEPTH = 2
AUTO_MAX_ANY_DEPTH = 5
AUTO_DEPTH_STATES = 30_000


@dataclass(frozen=True)
class Compiled:
    """The regex chosen, the compiler that wrote it, the depth notes, and what was measured."""

    regex: Any                     # the tree
    compiler: Any
    notes: list
    automaton: Any = None          # the byte DFA, when it was built to measure it
    used: dict | None = None       # the definitions the regex reaches


def written_size(pattern, definitions: dict) -> int:
    """About the characters of a pattern and of every definition as regex
    text, each written once (:attr:`~tokendfa.analysis.regex_tree.Node.size`).

    A literal set (an ``enum`` of many strings) is not counted: no depth
    changes it, and the compilers build it from its strings, not its text."""
    return pattern.size + sum(node.size for node in definitions.values()
                              if node.__class__ is not LiteralSet)


def _automaton(regex, definitions: dict, state_budget: int | None):
    from ..analysis.construct import byte_dfa_from_regex

    return byte_dfa_from_regex(regex, definitions=definitions, max_dfa_states=state_budget)


@functools.lru_cache(maxsize=32)
def _free_value_states(depth: int, whitespace: str, max_whitespace: int, indent: int) -> int:
    """States of the minimal automaton of one free value nesting ``depth`` levels."""
    from .api import regex_from_schema   # the schema `true`, compiled like any other

    free = regex_from_schema(True, whitespace=whitespace, max_whitespace=max_whitespace,
                             indent=indent, any_depth=depth, regex_budget=None, state_budget=None)
    return _automaton(free.tree, free.tree_definitions, None).num_states


def compile_within_bounds(compile_at: Callable[[int, int], tuple], *, any_depth: int | str,
                          max_recursion_depth: int, regex_budget: int | None,
                          state_budget: int | None, max_regex_length: int,
                          layout: tuple[str, int, int]) -> Compiled:
    """Compile at the depths asked for, or shallower within the budgets, or deeper when empty.

    ``layout`` is ``(whitespace, max_whitespace, indent)``, for measuring free values.
    Raises :class:`EmptyLanguageError` when no value is left, and what ``compile_at`` raises.
    """
    compiled: dict = {}  # (any depth, recursion depth) -> (compiler, regex), or the error raised

    def compile_once(depth_a: int, depth_r: int):
        if (depth_a, depth_r) in compiled:
            result = compiled.pop((depth_a, depth_r))
            if isinstance(result, Exception):
                raise result
            return result
        return compile_at(depth_a, depth_r)

    automata: dict = {}  # (any depth, recursion depth) -> automaton built to measure it
    over_budget: set = set()  # (any depth, recursion depth) whose automaton passed state_budget

    def measured(depth_a: int, limit: int | None):
        """The automaton at this free-value depth, or None past ``limit`` or any other bound."""
        key = (depth_a, max_recursion_depth)
        try:
            compiler, regex = compiled[key] = compile_once(*key)
            if regex is None:
                return None
            automata[key] = _automaton(regex, compiler.used_definitions(regex), limit)
            return automata[key]
        except TimeLimitError:
            raise  # a caller's time limit, not a bound of ours
        except (BuildLimitError, UnsupportedSchemaError):
            return None

    def choose_any_depth() -> tuple[int, str]:
        """The depth any_depth="auto" takes, and a note saying why (none if free values are unused)."""
        depth, depth_r = AUTO_MIN_ANY_DEPTH, max_recursion_depth
        try:
            compiler, regex = compiled[(depth, depth_r)] = compile_once(depth, depth_r)
        except RegexTooLongError as exc:
            compiled[(depth, depth_r)] = exc  # for the attempts below, not written twice
            return depth, ""
        if regex is None or not compiler.generic_values_used:
            return depth, ""  # the depth changes nothing
        automaton = measured(depth, state_budget)
        if automaton is None:
            over_budget.add((depth, depth_r))
            return depth, ""  # the attempts below narrow or report it
        shallow, deeper = (_free_value_states(d, *layout) for d in (depth, depth + 1))
        growth = deeper / shallow  # a little above what deeper levels add
        states = {depth: automaton.num_states}

        def at_most(level: int) -> float:
            """States at ``level`` if every state at the shallowest were in a free value."""
            return states[AUTO_MIN_ANY_DEPTH] * growth ** (level - AUTO_MIN_ANY_DEPTH)

        if at_most(AUTO_MAX_ANY_DEPTH) <= AUTO_DEPTH_STATES:
            target = AUTO_MAX_ANY_DEPTH  # small enough whatever the copies: no need to measure
        else:
            if at_most(depth + 1) > AUTO_DEPTH_STATES:
                return depth, ""
            automaton = measured(depth + 1, 4 * AUTO_DEPTH_STATES)
            if automaton is None or automaton.num_states > AUTO_DEPTH_STATES:
                return depth, ""
            states[depth + 1] = automaton.num_states
            target, added = depth + 1, states[depth + 1] - states[depth]
            while target < AUTO_MAX_ANY_DEPTH:  # each level adds about `growth` times the last
                added *= growth
                if states[target] + added > AUTO_DEPTH_STATES:
                    break
                states[target + 1] = round(states[target] + added)
                target += 1
        depth = target
        if (depth, depth_r) not in automata:
            automaton = measured(depth, 4 * AUTO_DEPTH_STATES)
            if automaton is None or automaton.num_states > AUTO_DEPTH_STATES * 5 // 4:
                depth -= 1  # the estimate was short: one level less, built as usual
                states.setdefault(depth, round(at_most(depth)))
            else:
                states[depth] = automaton.num_states
        return depth, (f'any_depth="auto" took {depth} levels (about {states[depth]:,} automaton '
                       f"states; a level deeper while within {AUTO_DEPTH_STATES:,}, "
                       f"{AUTO_MAX_ANY_DEPTH} levels at most)")

    auto_note = ""
    if any_depth == "auto":
        any_depth, auto_note = choose_any_depth()
    attempts = [(any_depth, max_recursion_depth)]
    if regex_budget is not None or state_budget is not None:
        depth_a, depth_r = any_depth, max_recursion_depth
        while depth_a > 1:
            depth_a -= 1
            attempts.append((depth_a, depth_r))
        while depth_r > 1:
            depth_r -= 1
            attempts.append((depth_a, depth_r))
    notes: list[str] = [auto_note] if auto_note else []

    for attempt, (depth_a, depth_r) in enumerate(attempts):
        last = attempt + 1 == len(attempts)
        try:
            compiler, regex = compile_once(depth_a, depth_r)
        except RegexTooLongError:
            if last:
                raise
            over = f"regex over {max_regex_length:,} characters"
            continue
        if regex is None:
            return _unrolled_deeper(compile_once, compiler, depth_a, depth_r, notes)
        if _defers(compiler):
            # deferred recursion (a lazy index): no automaton is built whole, and the
            # shallower attempts would not shorten the definitions written to check the
            # schema; the index reads the compiler's definitions as it goes, so those the
            # regex reaches are not gathered here (a walk of a free value's 32 levels)
            return Compiled(regex, compiler, notes, None, None)
        used = compiler.used_definitions(regex)
        size = written_size(regex, used)
        if regex_budget is not None and size > regex_budget and not last:
            over = f"regex over the budget of {regex_budget:,} characters"
            continue
        automaton = automata.get((depth_a, depth_r))
        if automaton is None and state_budget is not None and size >= STATE_CHECK_CHARS and not last:
            if (depth_a, depth_r) in over_budget:
                over = f"automaton over the budget of {state_budget:,} states"
                continue
            try:
                automaton = _automaton(regex, used, state_budget)
            except TimeLimitError:
                raise  # a caller's time limit, not this budget
            except BuildLimitError:
                over = f"automaton over the budget of {state_budget:,} states"
                continue
        if attempt:
            notes.append(f"{over}: generic values nest {depth_a} level(s) (any_depth) and "
                         f"recursion is unrolled {depth_r} time(s)")
        return Compiled(regex, compiler, notes, automaton, used)
    raise AssertionError("unreachable")


def _defers(compiler) -> bool:
    """Whether the compilation deferred values to a lazy automaton (see :mod:`.compiler`)."""
    return bool(getattr(compiler, "defers", False))


def _unrolled_deeper(compile_once, compiler, depth_a: int, depth_r: int, notes: list[str]) -> Compiled:
    """No value at these depths: unroll recursion deeper if its cut alone emptied the schema."""
    empty = EmptyLanguageError("no JSON value satisfies this schema"
                               + (f" ({compiler.notes[0]})" if compiler.notes else ""))
    if not compiler.recursion_cut:
        raise empty
    for deeper in range(depth_r + 1, max(depth_r, AUTO_RECURSION_DEPTH) + 1):
        try:
            compiler, regex = compile_once(depth_a, deeper)
        except RegexTooLongError:
            raise empty from None
        if regex is not None:
            notes.append(f"no value within {depth_r} recursion unrolling(s): "
                         f"unrolled {deeper} times instead")
            return Compiled(regex, compiler, notes)
    if AUTO_RECURSION_DEPTH > depth_r:
        raise EmptyLanguageError(f"{empty}; none within {AUTO_RECURSION_DEPTH} unrollings either")
    raise empty
