"""The compiler proper: a conjunction of subschemas -> a regex.

:meth:`Compiler.value` is the whole algorithm: absorb every subschema into
one :class:`~.ir.Flat` (:mod:`.keywords`), then split its choices one after
the other (each alternative absorbed into a copy of the flat), pushing each
``not`` down into a choice of its own (:mod:`.negation`), and finally emit
the regex per type: literals and scalars (:mod:`.scalars`), arrays
(:mod:`.arrays`), objects (:mod:`.objects`).

The :class:`Compiler` also holds what one compilation shares: the options
and the :class:`Layout` of whitespace, the widenings and notes so far,
validators for the literal check, and the shared pieces: each value regex is
computed once per (subschemas, recursion counts), and one of at least
``SHARE_MIN_LENGTH`` characters is written once, as a placeholder
character (see :class:`~tokendfa.schema.api.SchemaRegex`).

Recursion through ``$ref`` is unrolled ``max_recursion_depth`` times; past
that the reference is the empty schema ``false`` (an optional recursive
property is left out, a required one makes that branch impossible). The
generic value of ``{}`` nests arrays and objects ``any_depth`` levels deep
(:meth:`Compiler.any_value`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..analysis import limits
from ..analysis.errors import RegexTooLongError, TimeLimitError, UnsupportedSchemaError
from ..analysis.utf8 import SURROGATES
from . import numbers as nums
from . import strings as strs
from .arrays import array
from .ir import Choice, Constraint, Flat, Negated, Sub, json_key
from .keywords import absorb
from .negation import negate
from .objects import declared, member_subs, object_
from ..analysis.regex_tree import Call, calls_in, chars, concat
from .regexes import EMPTY, Node, alternation, counted, lit, optional, repeat
from .scalars import constants, literal, literals, number, string

MAX_CHOICES = 256
# A value regex this long, or longer, is written once and referred to by a
# placeholder: one of the 2,048 lone surrogates, which no JSON text holds.
SHARE_MIN_LENGTH = 2_000
# With ``share_counts``, a string length bound at least this large is written
# with a few shared definitions, one per digit (Compiler.counted). Snowplow/sp_0 (36 strings of
# maxLength 1024, one of 65535) would need a 1.4 GiB NFA with each count
# written out; below this bound the written-out repeat costs little.
SHARED_COUNT_MIN = 256
# The digits of such a count: each digit is a level of nested definitions and
# about two configurations in every state of the string. Base 2 (1024: ten
# levels) cost 1.19 ms a token inside a maxLength-1024 string on Qwen.
COUNT_BASE = 16
PLACEHOLDER_BASE = SURROGATES[0]
MAX_DEFINITIONS = SURROGATES[1] - SURROGATES[0] + 1


# JSON whitespace between tokens, in flexible layout
_WHITESPACE = chars([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


# Free values (Compiler.any_value) by options, depth and levels: the tree and
# the definitions it calls, made once per process; the same in every schema.
_FREE_VALUES: dict = {}
_FREE_VALUES_KEPT = 512


def _key_order(key) -> tuple:
    """Definition keys in an order that does not depend on the hash seed:
    the numbered placeholders, then the named pieces."""
    return (0, key) if isinstance(key, str) else (1, repr(key))


class Layout:
    """Where whitespace goes: compact, flexible (bounded) or pretty (indented)."""

    def __init__(self, mode: str, max_whitespace: int, indent: int) -> None:
        self.mode = mode
        self.indent = indent
        self.ws = EMPTY if mode != "flexible" or max_whitespace <= 0 else (
            repeat(_WHITESPACE, 0, max_whitespace))

    def _nl(self, depth: int) -> Node:
        return lit("\n" + " " * (self.indent * depth))

    def open(self, bracket: str, depth: int) -> Node:
        if self.mode == "pretty":
            return lit(bracket) + self._nl(depth + 1)
        return lit(bracket) + self.ws

    def close(self, bracket: str, depth: int) -> Node:
        if self.mode == "pretty":
            return self._nl(depth) + lit(bracket)
        return self.ws + lit(bracket)

    def empty(self, open_bracket: str, close_bracket: str) -> Node:
        return concat(lit(open_bracket), self.ws, lit(close_bracket))

    def comma(self, depth: int) -> Node:
        if self.mode == "pretty":
            return lit(",") + self._nl(depth + 1)
        return concat(self.ws, lit(","), self.ws)

    def colon(self) -> Node:
        if self.mode == "pretty":
            return lit(": ")
        return concat(self.ws, lit(":"), self.ws)


class Compiler:
    """One compilation: options, the widenings and notes so far, caches, shared pieces."""

    def __init__(self, *, draft: int, layout: Layout, lenient: bool, max_recursion_depth: int,
                 any_depth: int, validator_cls, registry, format_checker,
                 max_regex_length: int, share: bool = True, meta_uri: str = "",
                 share_free_levels: bool = False, share_counts: bool = False) -> None:
        self.draft = draft
        self.layout = layout
        self.lenient = lenient
        self.max_recursion_depth = max_recursion_depth
        self.any_depth = any_depth
        self.validator_cls = validator_cls
        self.registry = registry
        self.format_checker = format_checker
        self.max_regex_length = max_regex_length
        self.meta_uri = meta_uri
        self.widenings: list[str] = []
        self.notes: list[str] = []
        self.recursion_cut = False        # a recursive $ref was cut at max_recursion_depth
        self.generic_values_used = False  # a bounded-depth "any value" went into the regex
        self._any_cache: dict = {}
        self._validators: dict = {}
        # Shared pieces: off when the schema holds surrogates a placeholder could clash with.
        self.share = share
        self.share_free_levels = share_free_levels
        self.share_counts = share_counts
        self.definitions: dict = {}  # key -> tree: placeholder characters, or names (tuples)
        self._placeholder_of: dict = {}
        self._values: dict = {}

    # --- shared pieces -------------------------------------------------------------

    def shared(self, regex: Node | None, *, always: bool = False, key=None) -> Node | None:
        """``regex``, or a call of the definition that stands for it when it is
        large (or ``always``). ``key`` names the definition where the same
        piece is the same in every compilation with these options (a free
        value's level: see :meth:`any_value`); otherwise it is numbered here."""
        if not self.share or regex is None or (regex.size < SHARE_MIN_LENGTH and not always):
            return regex
        if regex.__class__ is Call and regex.key in self.definitions:
            return regex  # already a definition
        if key is not None:
            if key not in self.definitions:
                if len(self.definitions) >= MAX_DEFINITIONS:
                    return regex
                self.definitions[key] = regex
                self._placeholder_of.setdefault(regex, key)
            return Call(key)
        placeholder = self._placeholder_of.get(regex)
        if placeholder is None:
            if len(self.definitions) >= MAX_DEFINITIONS:
                return regex
            placeholder = chr(PLACEHOLDER_BASE + len(self.definitions))
            self.definitions[placeholder] = regex
            self._placeholder_of[regex] = placeholder
        return Call(placeholder)

    def counted(self, unit: Node, lo: int, hi: int | None) -> Node:
        """``unit`` ``lo`` to ``hi`` times (None: no bound).

        With ``share_counts`` and a bound of at least ``SHARED_COUNT_MIN``,
        the count is written in base ``COUNT_BASE`` with O(log n) shared
        definitions instead of n copies of the unit: ``P[j]`` is the unit
        ``B**j`` times (``P[j-1]`` written B times), ``U[k]`` is 0 to
        ``B**k - 1`` times (``P[k-1]`` 0 to B - 1 times, nested, then
        ``U[k-1]``), and 0 to n times, with ``n = d * B**k + r`` (its top
        digit d), is ``P[k]`` 0 to d - 1 times then ``U[k]``, or ``P[k]`` d
        times then 0 to r times. The language is the same; a lazy automaton
        compiles each definition once, when a match first enters it, and a
        state (one per count reached) holds about two configurations a
        digit.
        """
        if not (self.share and self.share_counts) or max(lo, hi or 0) < SHARED_COUNT_MIN:
            return counted(unit, lo, hi)
        base = COUNT_BASE
        powers = [self.shared(unit, always=True)]

        def power(j: int) -> Node:  # the unit base**j times
            while len(powers) <= j:
                powers.append(self.shared(concat(*[powers[-1]] * base), always=True))
            return powers[j]

        def up_to(piece: Node, times: int) -> Node:  # piece 0 to `times` times, nested optionals
            node = EMPTY
            for _ in range(times):
                node = optional(piece + node)
            return node

        below_powers: dict[int, Node] = {0: EMPTY}

        def below_power(k: int) -> Node:  # 0 to base**k - 1 times
            if k not in below_powers:
                below_powers[k] = self.shared(up_to(power(k - 1), base - 1) + below_power(k - 1),
                                              always=True)
            return below_powers[k]

        def at_most(n: int) -> Node:
            if n == 0:
                return EMPTY
            k = 0
            while base ** (k + 1) <= n:
                k += 1
            if n == base ** (k + 1) - 1:
                return below_power(k + 1)
            digit, rest = divmod(n, base ** k)
            return alternation([up_to(power(k), digit - 1) + below_power(k),
                                concat(*[power(k)] * digit) + at_most(rest)])

        exactly, j, m = [], 0, lo
        while m:
            m, digit = divmod(m, base)
            exactly.extend([power(j)] * digit)
            j += 1
        return concat(*exactly, repeat(powers[0], 0, None) if hi is None else at_most(hi - lo))

    def _value_key(self, subs: list[Sub], depth: int):
        """What a value regex depends on: the schemas, their base URIs, the recursion counts."""
        return (depth if self.layout.mode == "pretty" else 0,) + tuple(
            (id(sub.schema), getattr(sub.resolver, "_base_uri", id(sub.resolver)),
             tuple(sorted(Counter(sub.refs).items())), sub.internal) for sub in subs)

    def used_definitions(self, regex: Node | None) -> dict[str, Node]:
        """The definitions ``regex`` reaches, directly or through other definitions."""
        used: dict[str, Node] = {}
        pending = [] if regex is None else [regex]
        while pending:
            # sorted: the order of the definitions (and so the lazy automaton's
            # state numbering) does not depend on the hash seed
            for key in sorted(calls_in(pending.pop()) & self.definitions.keys(), key=_key_order):
                if key not in used:
                    used[key] = self.definitions[key]
                    pending.append(used[key])
        return used

    # --- reporting -------------------------------------------------------------

    def unsupported(self, keyword: str, pointer: str, detail: str) -> None:
        """Raise, or in lenient mode record the widening and go on without the constraint."""
        where = pointer or "/"
        if not self.lenient:
            raise UnsupportedSchemaError(f"unsupported keyword '{keyword}' at {where}: {detail}")
        message = f"'{keyword}' at {where} ignored: {detail}"
        if message not in self.widenings:
            self.widenings.append(message)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def _check_size(self, regex: Node | None, pointer: str) -> Node | None:
        if regex is not None and regex.size > self.max_regex_length:
            raise RegexTooLongError(
                f"the regex for the schema at {pointer or '/'} exceeds {self.max_regex_length:,} "
                "characters (references expanded inline); raise max_regex_length or simplify")
        return regex

    # --- the entry point ---------------------------------------------------------

    def value(self, subs: list[Sub], depth: int) -> Node | None:
        """Regex for a JSON value satisfying every subschema in ``subs`` (None: no value)."""
        if not self.share:
            return self._value(subs, depth)
        key = self._value_key(subs, depth)
        known = self._values.get(key)
        if known is not None:
            return known[1]
        # Only a $ref reaches the same schema objects twice, and what is reported
        # inside names the referenced schema's pointer, so nothing is lost here.
        regex = self.shared(self._value(subs, depth))
        self._values[key] = (tuple(subs), regex)  # holding subs keeps their ids unique
        return regex

    def _value(self, subs: list[Sub], depth: int) -> Node | None:
        flat = Flat()
        for sub in subs:
            self.absorb(flat, sub)
            if flat.false:
                return None
        pointer = subs[0].pointer if subs else ""
        if flat.trivial():
            return self.any_value(depth)
        return self._check_size(self._split(flat, depth, 0), pointer)

    def _split(self, flat: Flat, depth: int, fanout: int) -> Node | None:
        """Split the choices of ``flat`` one after the other, then emit each branch."""
        if flat.false:
            return None
        if flat.enum is not None:
            return literals(self, flat, depth)
        if flat.nots:
            flat = flat.copy()
            negated = flat.nots.pop(0)
            flat.negated.append(negated)
            flat.choices.insert(0, Choice("not", negate(self, negated), negated.pointer))
        if not flat.choices:
            return self.emit(flat, depth)
        choice = flat.choices[0]
        if fanout + len(choice.alternatives) > MAX_CHOICES:
            self.unsupported(choice.keyword, choice.pointer, f"more than {MAX_CHOICES} combinations "
                             "of anyOf/oneOf/not/if branches")
            rest = flat.copy()
            rest.choices.pop(0)
            return self._split(rest, depth, fanout)
        parts = []
        for alternative in choice.alternatives:
            branch = flat.copy()
            branch.choices.pop(0)
            for item in alternative:
                if isinstance(item, Negated):
                    branch.nots.append(item.sub)
                else:
                    self.absorb(branch, item)
                if branch.false:
                    break
            if not branch.false:
                parts.append(self._split(branch, depth, fanout + len(choice.alternatives)))
        return alternation(parts)

    def absorb(self, flat: Flat, sub: Sub) -> None:
        """Add what ``sub`` says to ``flat`` (see :func:`.keywords.absorb`)."""
        absorb(self, flat, sub)

    def emit(self, flat: Flat, depth: int) -> Node | None:
        """The regex of a flat without choices: one alternative per type it allows."""
        types = flat.types
        parts: list[Node | None] = constants(flat)
        if types & {"integer", "fraction"}:
            parts.append(number(self, flat))
        if "string" in types:
            parts.append(string(self, flat))
        if "array" in types:
            parts.append(array(self, flat, depth))
        if "object" in types:
            parts.append(object_(self, flat, depth))
        return alternation(parts)

    # --- what the emitters share -------------------------------------------------------

    def valid(self, value, sub: Sub) -> bool:
        """Whether ``value`` satisfies ``sub``: the user's JSON with ``jsonschema``, the
        compiler's own constraints by :meth:`~.ir.Constraint.holds`."""
        limits.check()  # one validation per enum value, each scanning the enum: quadratic
        if isinstance(sub.schema, Constraint):
            return sub.schema.holds(value, self.valid)
        key = id(sub)
        validator = self._validators.get(key)
        if validator is None:
            validator = self.validator_cls(sub.schema, registry=self.registry, _resolver=sub.resolver,
                                           format_checker=self.format_checker)
            self._validators[key] = (validator, sub)  # keep sub alive: its id stays unique
        else:
            validator = validator[0]
        try:
            return validator.is_valid(value)
        except TimeLimitError:
            raise
        except Exception as exc:  # noqa: BLE001 - a validator crash is the schema's problem
            raise UnsupportedSchemaError(
                f"cannot check enum/const value {value!r} at {sub.pointer or '/'}: {exc}") from None

    def admitted(self, flat: Flat, value) -> bool:
        """Whether a literal satisfies every subschema of ``flat`` and none it negates
        (negations not yet split, ``flat.nots``, count as much as those split already)."""
        return (all(self.valid(value, s) for s in flat.sources)
                and not any(self.valid(value, s) for s in flat.negated + flat.nots))

    def literal(self, value, depth: int) -> Node:
        return literal(self, value, depth)

    def pattern_matches(self, pattern: str, name: str, keyword: str, pointer: str, *,
                        default: bool = False, report: bool = True) -> bool:
        """Whether ``name`` matches the ECMA ``pattern``; a pattern we cannot read is
        reported as ``keyword`` (unless ``report`` is False) and answers ``default``."""
        try:
            return strs.pattern_matches(pattern, name)
        except strs.PatternUnsupported as exc:
            if report:
                self.unsupported(keyword, pointer, str(exc))
            return default

    def element(self, subs: list[Sub], depth: int) -> Node | None:
        """A value satisfying ``subs``, the generic value when there are none."""
        if not subs:
            return self.shared(self.any_value(depth))  # as value() writes it, so they compare
        return self.value(subs, depth)

    def container(self, open_b: str, close_b: str, body: Node | None, can_be_empty: bool,
                  depth: int) -> Node | None:
        """Brackets around ``body`` (None: no content), or the empty container too."""
        layout = self.layout
        parts = []
        if body is not None:
            parts.append(layout.open(open_b, depth) + body + layout.close(close_b, depth))
        if can_be_empty:
            parts.append(layout.empty(open_b, close_b))
        return alternation(parts)

    # --- the generic value ---------------------------------------------------------------------

    def any_value(self, depth: int, levels: int | None = None) -> Node:
        """Any JSON value, arrays and objects nested ``any_depth`` levels at most.

        With ``share_free_levels`` every level is a shared definition of its
        own, which calls the level below; otherwise a level is written out
        where it stands until it is ``SHARE_MIN_LENGTH`` long (three levels
        in compact JSON).
        """
        levels = self.any_depth if levels is None else levels
        self.generic_values_used = True
        key = (depth if self.layout.mode == "pretty" else 0, levels)
        cached = self._any_cache.get(key)
        if cached is not None:
            return cached
        # the same in every compilation with these options: built once per process
        layout = self.layout
        everywhere = ("free value", layout.mode, layout.ws, layout.indent, self.share,
                      self.share_free_levels) + key
        found = _FREE_VALUES.get(everywhere)
        if found is not None and self._adopt(found[1]):
            self._any_cache[key] = found[0]
            return found[0]
        scalars = [lit("null"), lit("true"), lit("false"), nums.NUMBER_TREE, strs.STRING]
        if levels > 0:
            below = everywhere[:-2] + (depth + 1 if layout.mode == "pretty" else 0, levels - 1)
            inner = self.shared(self.any_value(depth + 1, levels - 1), key=below)
            comma = self.layout.comma(depth)
            colon = self.layout.colon()
            array_body = inner + repeat(comma + inner, 0, None)
            member = strs.STRING + colon + inner
            object_body = member + repeat(comma + member, 0, None)
            scalars.append(self.container("[", "]", array_body, True, depth))
            scalars.append(self.container("{", "}", object_body, True, depth))
        else:
            scalars.append(self.container("[", "]", None, True, depth))
            scalars.append(self.container("{", "}", None, True, depth))
        regex = alternation(scalars)
        if self.share_free_levels:
            regex = self.shared(regex, always=True, key=everywhere)
        self._any_cache[key] = regex
        used = self.used_definitions(regex)
        if all(isinstance(k, tuple) for k in used):  # no piece numbered by this compilation
            if len(_FREE_VALUES) >= _FREE_VALUES_KEPT:
                _FREE_VALUES.clear()
            _FREE_VALUES[everywhere] = (regex, tuple(used.items()))
        return regex

    def _adopt(self, definitions) -> bool:
        """Take the definitions a free value built elsewhere calls (False: too many)."""
        missing = [(k, tree) for k, tree in definitions if k not in self.definitions]
        if len(self.definitions) + len(missing) > MAX_DEFINITIONS:
            return False
        for k, tree in missing:
            self.definitions[k] = tree
            self._placeholder_of.setdefault(tree, k)
        return True

    # --- instances in the order the regex writes them ----------------------------------------

    def arrange(self, subs: list[Sub], value: Any) -> Any:
        """``value`` with object keys in the order the regex expects (see :mod:`.objects`).

        Choices are settled by the first alternative the value satisfies
        (checked with the validator), as the regex for that branch would
        have to accept it.
        """
        if not isinstance(value, (dict, list)):
            return value
        flat = Flat()
        try:
            for sub in subs:
                self.absorb(flat, sub)
            guard = 0
            while flat.choices and not flat.false and guard < MAX_CHOICES:
                guard += 1
                choice = flat.choices.pop(0)
                for alternative in choice.alternatives:
                    items = [i for i in alternative if isinstance(i, Sub)]
                    if all(i.internal or self.valid(value, i) for i in items):
                        for item in items:
                            self.absorb(flat, item)
                        break
        except (UnsupportedSchemaError, RecursionError):
            return value
        if flat.false:
            return value
        if flat.enum is not None:
            key = json_key(value)
            for literal_value in flat.enum:
                if json_key(literal_value) == key:
                    return literal_value       # the regex writes the literal as given
        if isinstance(value, list):
            out = []
            for i, element in enumerate(value):
                element_subs = []
                for part in flat.arr_parts:
                    if i < len(part.prefix):
                        element_subs.append(part.prefix[i])
                    elif part.items is not None:
                        element_subs.append(part.items)
                out.append(self.arrange(element_subs, element))
            return out
        names = declared(flat)
        order = [n for n in names if n in value] + [n for n in value if n not in names]
        return {name: self.arrange([s for part in flat.obj_parts
                                    for s in member_subs(self, part, name, report=False)], value[name])
                for name in order}
