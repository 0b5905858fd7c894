"""JSON numbers as regexes: integer ranges, decimal bounds, ``multipleOf``.

A JSON number is ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``. Its text
has no leading zeros, so an integer has exactly one spelling (``-0`` aside,
which is the value 0), and a range of integers is a regular language of
digit strings that we can write down exactly: :func:`integer_range_regex`
splits the range by number of digits and then, within one length, digit by
digit (the classic construction, e.g. ``[13, 271]`` becomes
``1[3-9]|[2-9][0-9]|1[0-9]{2}|2[0-6][0-9]|27[01]``).

Decimal bounds are exact too, on the plain decimal notation: the integer
part is an integer range and the digits after the point are compared to the
bound's digits as a fraction, digit by digit (:func:`_fraction`). What is
*not* regular is a bound together with an exponent: ``0.00...01e+N <= 10``
compares a count of zeros with the decimal value ``N``. So a bounded number
is written without an exponent, except where a sign alone decides the bound
(``minimum: 0`` accepts ``1e300``). That is a narrowing, never a widening:
every text accepted has a value in range.

``multipleOf`` is exact when the divisor is a power of ten times 1 (``0.01``,
``1``, ``100``: a limit on fraction digits or trailing zeros, combinable with
bounds), when the range holds few enough multiples to list them, or when the
divisor is an integer ``k``: divisibility is then read digit by digit (the
remainder so far, ``k`` states) and written back by state elimination,
intersected with the range (:func:`integer_multiples_regex`; the regex grows
fast with ``k``, 30,000 characters for 7, past the limit for 11 unbounded).
Its complement gives ``not {multipleOf: k}`` on integers. Non-integers with
bounds are the bounded numbers intersected with "has a non-zero fraction
digit". Anything else raises :class:`~tokendfa.analysis.errors.UnsupportedSchemaError`
through the caller, which knows the JSON pointer.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

from ..analysis.regex_tree import EMPTY, Alt, Node, chars, optional, parse_regex, repeat, text, to_regex
from .regexes import alternation as tree_alternation
from .regexes import text_alternation as alternation, text_group as group

__all__ = [
    "INTEGER", "NUMBER", "integer_range_regex", "number_regex", "literal_alternation",
    "NumberUnsupported", "to_decimal",
]

INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# Any JSON number, any integer, as trees (read once, when the module is imported).
NUMBER_TREE = parse_regex(NUMBER)
INTEGER_TREE = parse_regex(INTEGER)
_DIGIT = chars([(0x30, 0x39)])
_NONZERO = chars([(0x31, 0x39)])
_DIGITS_0 = repeat(_DIGIT, 0, None)
_DIGITS_1 = repeat(_DIGIT, 1, None)
_ZEROS_0 = repeat(chars([(0x30, 0x30)]), 0, None)
_ZEROS_1 = repeat(chars([(0x30, 0x30)]), 1, None)
_EXPONENT = r"(?:[eE][+-]?[0-9]+)?"
_EXPONENT_TREE = parse_regex(_EXPONENT)
_ANY_FRACTION = r"(?:\.[0-9]+)?"
# Past this many multiples in a range, listing them is not worth it.
MAX_LISTED_MULTIPLES = 1000


class NumberUnsupported(ValueError):
    """A numeric constraint with no exact regex here; the caller names the keyword."""


# --- small regex helpers ------------------------------------------------------

def _digits(lo: int, hi: int) -> Node:
    return text(str(lo)) if lo == hi else chars([(0x30 + lo, 0x30 + hi)])


# --- integers -------------------------------------------------------------------

def _same_length(lo: str, hi: str) -> list[Node]:
    """Alternatives for the digit strings between ``lo`` and ``hi`` (same length)."""
    if lo == hi:
        return [text(lo)]
    n = len(lo)
    if lo[0] == hi[0]:
        return [text(lo[0]) + tree_alternation(_same_length(lo[1:], hi[1:]))]
    rest = n - 1
    first_lo, first_hi = int(lo[0]), int(hi[0])
    out: list[Node] = []
    # lo[0] followed by lo[1:]..99..9, unless lo[1:] is all zeros (then it joins the middle)
    if rest and lo[1:] != "0" * rest:
        out.append(text(lo[0]) + tree_alternation(_same_length(lo[1:], "9" * rest)))
        first_lo += 1
    top_full = not rest or hi[1:] == "9" * rest
    middle_hi = first_hi if top_full else first_hi - 1
    if first_lo <= middle_hi:
        out.append(_digits(first_lo, middle_hi) + repeat(_DIGIT, rest, rest))
    if not top_full:
        out.append(text(hi[0]) + tree_alternation(_same_length("0" * rest, hi[1:])))
    return out


def _magnitude_tree(lo: int, hi: int | None) -> Node | None:
    """Canonical digit strings of the integers in ``[lo, hi]`` (``lo >= 0``; ``hi`` None: no bound)."""
    if hi is not None and hi < lo:
        return None
    parts: list[Node] = []
    lo_len = len(str(lo))
    top_len = lo_len if hi is None else len(str(hi))
    for length in range(lo_len, top_len + 1):
        first = 0 if length == 1 else 10 ** (length - 1)
        last = 10 ** length - 1
        a = max(lo, first)
        b = last if hi is None else min(hi, last)
        if a <= b:
            parts.extend(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(_NONZERO + repeat(_DIGIT, lo_len, None))
    return tree_alternation(parts)


def _magnitude_range(lo: int, hi: int | None) -> str | None:
    """:func:`_magnitude_tree` as regex text (one atom)."""
    return _atom_text(_magnitude_tree(lo, hi))


def integer_range_tree(lo: int | None, hi: int | None) -> Node | None:
    """The JSON integers ``n`` with ``lo <= n <= hi`` (None: unbounded), as a tree.

    Integers are spelled canonically (no leading zeros, no fraction); ``-0``
    is accepted exactly when 0 is in range, as the plain integer regex does.
    Returns None when the range is empty.
    """
    if lo is not None and hi is not None and lo > hi:
        return None
    if lo is None and hi is None:
        return INTEGER_TREE
    parts: list[Node | None] = []
    # negative side: magnitudes in [max(0, -hi), -lo], and -0 when 0 is in range
    if lo is None or lo <= 0:
        neg_lo = 0 if hi is None or hi >= 0 else -hi
        neg_hi = None if lo is None else -lo
        magnitudes = _magnitude_tree(neg_lo, neg_hi)
        if magnitudes is not None:
            parts.append(text("-") + magnitudes)
    if hi is None or hi >= 0:
        parts.append(_magnitude_tree(max(lo, 0) if lo is not None else 0, hi))
    return tree_alternation(parts)


def integer_range_regex(lo: int | None, hi: int | None) -> str | None:
    """:func:`integer_range_tree` as regex text.

    Example::

        >>> integer_range_regex(-5, 12)
        '(?:-[0-5]|[0-9]|1[0-2])'
    """
    if lo is None and hi is None:
        return INTEGER
    return _atom_text(integer_range_tree(lo, hi))


def _atom_text(node: Node | None) -> str | None:
    """A tree as regex text that is one atom where an alternation would not be."""
    if node is None:
        return None
    written = to_regex(node)
    return f"(?:{written})" if isinstance(node, Alt) else written


# --- decimal fractions ------------------------------------------------------------

def _strip(digits: str) -> str:
    return digits.rstrip("0")


def _fraction(lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool,
              limit: int | None) -> tuple[Node | None, bool]:
    """Digit strings ``F`` (after the point) with ``lo <= 0.F <= hi``.

    ``lo``/``hi`` are digit strings (None: no bound; ``hi`` None means below
    1, always true), compared as fractions, so ``"5"`` and ``"50"`` are the
    same bound. ``limit`` caps the digits that may be non-zero (for
    ``multipleOf: 0.01``), trailing zeros are always allowed. Returns
    ``(tree for non-empty F or None, whether the empty F, i.e. 0, is in)``.
    """
    lo = _strip(lo) if lo is not None else None
    hi = _strip(hi) if hi is not None else None
    zero_ok = ((lo is None or lo == "" and lo_incl)
               and (hi is None or hi != "" or hi_incl))
    if limit == 0:
        return (_ZEROS_1 if zero_ok else None), zero_ok
    lo_free = lo is None or (lo == "" and lo_incl)
    if lo_free and hi is None:
        if limit is None:
            return _DIGITS_1, True
        return repeat(_DIGIT, 1, limit) + _ZEROS_0, True
    if lo == "" and not lo_incl and hi is None and limit is None:
        return _DIGITS_0 + _NONZERO + _DIGITS_0, False
    if hi == "" and not (lo_free and hi_incl):
        return None, False          # below or at 0 but 0 excluded
    if hi == "":
        return _ZEROS_1, True
    parts = []
    low_digit = int(lo[0]) if lo else 0
    high_digit = int(hi[0]) if hi is not None else 9
    next_limit = None if limit is None else limit - 1
    free_from, free_to = None, None
    for d in range(low_digit, high_digit + 1):
        sub_lo, sub_lo_incl = (lo[1:], lo_incl) if (lo and d == low_digit) else (None, True)
        if lo == "" and not lo_incl and d == 0:
            sub_lo, sub_lo_incl = "", False     # still need something non-zero
        sub_hi, sub_hi_incl = (hi[1:], hi_incl) if (hi is not None and d == high_digit) else (None, True)
        if sub_lo is None and sub_hi is None:
            if free_from is None:
                free_from = d
            free_to = d
            continue
        rest, rest_empty = _fraction(sub_lo, sub_lo_incl, sub_hi, sub_hi_incl, next_limit)
        if rest is not None:
            parts.append(text(str(d)) + (optional(rest) if rest_empty else rest))
        elif rest_empty:
            parts.append(text(str(d)))
    if free_from is not None:
        tail = _DIGITS_0 if next_limit is None else repeat(_DIGIT, 0, next_limit) + _ZEROS_0
        parts.insert(0, _digits(free_from, free_to) + tail)
    return tree_alternation(parts), zero_ok


def _fraction_part(lo, lo_incl, hi, hi_incl, limit) -> Node | None:
    """``(\\.F)?`` for the fractions in range, or None if none is."""
    body, empty_ok = _fraction(lo, lo_incl, hi, hi_incl, limit)
    if body is None:
        return EMPTY if empty_ok else None
    return optional(text(".") + body) if empty_ok else text(".") + body


def _split(value: Decimal) -> tuple[int, str]:
    """Non-negative ``value`` as (integer part, fraction digits)."""
    text = format(value, "f")
    whole, _, frac = text.partition(".")
    return int(whole), frac


def _magnitudes(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool,
                limit: int | None, exponent: bool) -> Node | None:
    """Plain decimals ``I(.F)?`` with ``lo <= value <= hi`` (``lo >= 0``)."""
    li, lf = _split(lo)
    parts: list[Node | None] = []
    frac_any = _fraction_part(None, True, None, True, limit)
    tail = _EXPONENT_TREE if exponent else EMPTY
    if hi is None:
        above = _magnitude_tree(li + 1, None)
        if above is not None:
            parts.append(above + frac_any + tail)
        head = _fraction_part(lf, lo_incl, None, True, limit)
        if head is not None:
            parts.append(text(str(li)) + head + tail)
        return tree_alternation(parts)
    hi_i, hf = _split(hi)
    if li == hi_i:
        frac = _fraction_part(lf, lo_incl, hf, hi_incl, limit)
        return None if frac is None else text(str(li)) + frac
    middle = _magnitude_tree(li + 1, hi_i - 1) if hi_i - 1 >= li + 1 else None
    if middle is not None:
        parts.append(middle + frac_any)
    low = _fraction_part(lf, lo_incl, None, True, limit)
    if low is not None:
        parts.append(text(str(li)) + low)
    high = _fraction_part(None, True, hf, hi_incl, limit)
    if high is not None:
        parts.append(text(str(hi_i)) + high)
    return tree_alternation(parts)


def _signed_magnitudes(lo, lo_incl, hi, hi_incl, limit) -> Node | None:
    """Plain decimals with ``lo <= value <= hi`` and the exponent where the
    sign alone decides, both signs, ``-0`` spellings included: the end of
    :func:`number_regex` (and of :func:`number_tree`)."""
    parts: list[Node | None] = []
    # non-negative side
    if hi is None or hi > 0 or (hi == 0 and hi_incl):
        if lo is None or lo < 0:
            p_lo, p_incl = Decimal(0), True
        else:
            p_lo, p_incl = lo, lo_incl
        exponent = hi is None and limit is None and p_lo == 0
        # with lo == 0 and no upper bound the sign alone decides: a
        # mantissa >= 0 (> 0) keeps its sign whatever the exponent
        parts.append(_magnitudes(p_lo, p_incl, hi, hi_incl, limit, exponent))
    # negative side: -x with x in [max(0, -hi), -lo]
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            n_lo, n_incl = Decimal(0), False
        else:
            n_lo, n_incl = -hi, hi_incl
        n_hi, n_hi_incl = (None, True) if lo is None else (-lo, lo_incl)
        exponent = n_hi is None and limit is None and n_lo == 0
        mags = _magnitudes(n_lo, n_incl, n_hi, n_hi_incl, limit, exponent)
        if mags is not None:
            parts.append(text("-") + mags)
    # -0 and its decimal spellings are the value 0
    if (lo is None or lo < 0 or (lo == 0 and lo_incl)) and (hi is None or hi > 0 or (hi == 0 and hi_incl)):
        parts.append(text("-0") + optional(text(".") + _ZEROS_1))
    return tree_alternation(parts)


def number_tree(*, lo=None, lo_incl: bool = True, hi=None, hi_incl: bool = True,
                integer: bool = False, multiple_of=None, nonzero_fraction: bool = False) -> Node | None:
    """:func:`number_regex` as a tree. Ranges of integers and of numbers are
    built as trees; ``multipleOf`` and ``nonzero_fraction`` (rarer, and
    worked with the algebra on automata) are computed as text and read once
    per distinct text."""
    if multiple_of is not None or nonzero_fraction:
        regex = number_regex(lo=lo, lo_incl=lo_incl, hi=hi, hi_incl=hi_incl, integer=integer,
                             multiple_of=multiple_of, nonzero_fraction=nonzero_fraction)
        return None if regex is None else parse_regex(regex, anchors=False)
    with localcontext() as ctx:
        ctx.prec = 200
        lo = None if lo is None else to_decimal(lo)
        hi = None if hi is None else to_decimal(hi)
        if lo is not None and hi is not None and (lo > hi or lo == hi and not (lo_incl and hi_incl)):
            return None
        if integer:
            return integer_range_tree(None if lo is None else _ceil(lo, lo_incl),
                                      None if hi is None else _floor(hi, hi_incl))
        if lo is None and hi is None:
            return NUMBER_TREE
        return _signed_magnitudes(lo, lo_incl, hi, hi_incl, None)


def to_decimal(value) -> Decimal:
    """A JSON number as an exact Decimal (a float by its shortest repr: 0.1 is 0.1)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def number_regex(*, lo=None, lo_incl: bool = True, hi=None, hi_incl: bool = True,
                 integer: bool = False, multiple_of=None, nonzero_fraction: bool = False) -> str | None:
    """A regex for JSON numbers in the given range, or None if there are none.

    ``lo``/``hi`` are numbers (int, float, Decimal; None: unbounded),
    ``integer`` asks for integers (spelled without fraction), ``multiple_of``
    is the ``multipleOf`` value, ``nonzero_fraction`` asks for numbers that
    are *not* integers (``not: {type: integer}``). Raises
    :class:`NumberUnsupported` when no exact regex is available.
    """
    with localcontext() as ctx:
        ctx.prec = 200
        lo = None if lo is None else to_decimal(lo)
        hi = None if hi is None else to_decimal(hi)
        step = None if multiple_of is None else to_decimal(multiple_of)
        if lo is not None and hi is not None and (lo > hi or lo == hi and not (lo_incl and hi_incl)):
            return None
        if step is not None and step <= 0:
            raise NumberUnsupported("multipleOf must be positive")
        spelled_integer = integer
        if step is not None and integer:
            # an integer n is a multiple of a/b (reduced) exactly when a divides n
            step = Decimal(Fraction(step).numerator)
        if step is not None:
            step = step.normalize()
            sign, digits, exp = step.as_tuple()
            mantissa = int("".join(map(str, digits)))
            if mantissa == 1 and exp >= 0:
                integer = True           # a multiple of 10**k is an integer
            elif mantissa == 1:
                pass                     # 10**-s: at most s fraction digits
            elif lo is None and hi is None and exp >= 0 and _tail_modulus(int(step)) is not None:
                whole = _multiples_by_last_digits(int(step))
                return whole if spelled_integer else group(whole) + r"(?:\.0+)?"
            else:
                try:
                    return _listed_multiples(lo, lo_incl, hi, hi_incl, step, integer)
                except NumberUnsupported:
                    if exp < 0:
                        raise
                whole = integer_multiples_regex(
                    int(step), lo=None if lo is None else _ceil(lo, lo_incl),
                    hi=None if hi is None else _floor(hi, hi_incl))
                if whole is None or integer:
                    return whole
                return group(whole) + r"(?:\.0+)?"
        if integer and not spelled_integer:
            # a number that must be a whole multiple may still be written 2.0
            whole = number_regex(lo=lo, lo_incl=lo_incl, hi=hi, hi_incl=hi_incl, integer=True,
                                 multiple_of=step, nonzero_fraction=nonzero_fraction)
            return None if whole is None else group(whole) + r"(?:\.0+)?"
        if integer:
            if nonzero_fraction:
                return None
            ilo = None if lo is None else _ceil(lo, lo_incl)
            ihi = None if hi is None else _floor(hi, hi_incl)
            if step is not None and step >= 1:
                k = int(step)
                zeros = len(str(k)) - 1
                mlo = None if ilo is None else -((-ilo) // k)
                mhi = None if ihi is None else ihi // k
                if mlo is not None and mhi is not None and mlo > mhi:
                    return None
                parts = []
                if (mlo is None or mlo <= 0) and (mhi is None or mhi >= 0):
                    parts.append("-?0")
                positive = _magnitude_range(max(1, mlo) if mlo is not None else 1, mhi) \
                    if mhi is None or mhi >= 1 else None
                if positive is not None:
                    parts.append(positive + "0" * zeros)
                negative = _magnitude_range(max(1, -mhi) if mhi is not None else 1,
                                            None if mlo is None else -mlo) \
                    if mlo is None or mlo <= -1 else None
                if negative is not None:
                    parts.append("-" + negative + "0" * zeros)
                return alternation(parts)
            return integer_range_regex(ilo, ihi)
        limit = None
        if step is not None:
            limit = -step.as_tuple().exponent
        if lo is None and hi is None and limit is None and not nonzero_fraction:
            return NUMBER
        if nonzero_fraction:
            fraction = r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"
            if limit is None and lo is None and hi is None:
                return fraction
            # the bounded numbers that are not integers (plain decimals, no exponent)
            from ..analysis import algebra

            bounded = number_regex(lo=lo, lo_incl=lo_incl, hi=hi, hi_incl=hi_incl, multiple_of=step)
            try:
                return None if bounded is None else algebra.intersect(bounded, fraction)
            except algebra.NoExactRegex as exc:
                raise NumberUnsupported(f"a non-integer number with bounds or multipleOf: {exc}") from None
        return _atom_text(_signed_magnitudes(lo, lo_incl, hi, hi_incl, limit))


def integer_multiples_regex(k: int, *, lo: int | None = None, hi: int | None = None,
                            complement: bool = False) -> str | None:
    """Integers in ``[lo, hi]`` divisible by ``k`` (``complement``: not divisible).

    Divisibility by ``k`` is read digit by digit (the remainder so far, ``k``
    states), so the language is regular whatever ``k``; the automaton is
    written back as a regex by state elimination and intersected with the
    range (:mod:`tokendfa.analysis.algebra`). Raises :class:`NumberUnsupported`
    past that module's size limits.
    """
    import numpy as np

    from ..analysis import algebra
    from ..analysis.minimise import canonical_byte_dfa

    if k <= 0:
        raise NumberUnsupported("multipleOf must be positive")
    if k > algebra.MAX_STATES:
        raise NumberUnsupported(f"multipleOf {k}: more than {algebra.MAX_STATES:,} remainders")
    # states: 0 dead, 1 start, 2 after '-', 3 the zero, 4 + r: remainder r after [1-9][0-9]*
    table = np.zeros((4 + k, 256), dtype=np.int32)
    digits = [ord(c) for c in "0123456789"]
    table[1, ord("-")] = 2
    for s in (1, 2):
        table[s, digits[0]] = 3
        for d in range(1, 10):
            table[s, digits[d]] = 4 + d % k
    for r in range(k):
        for d in range(10):
            table[4 + r, digits[d]] = 4 + (10 * r + d) % k
    finals = np.zeros(4 + k, dtype=bool)
    finals[3] = not complement
    finals[4] = not complement
    finals[5:] = complement
    # minimal: for 10, two states (last digit 0 or not), not ten
    dfa = canonical_byte_dfa(table, finals)
    if dfa.num_states < 2:
        return None  # no integer at all (not multipleOf 1)
    try:
        regex = algebra.regex_of_table(dfa.transitions, dfa.finals, algebra.MAX_LENGTH)
        if regex is None or (lo is None and hi is None):
            return regex
        bounded = integer_range_regex(lo, hi)
        return None if bounded is None else algebra.intersect(regex, bounded)
    except algebra.NoExactRegex as exc:
        raise NumberUnsupported(f"{'not ' if complement else ''}multipleOf {k}: {exc}") from None


def _ceil(value: Decimal, inclusive: bool) -> int:
    whole = int(value.to_integral_value(rounding="ROUND_CEILING"))
    if not inclusive and whole == value:
        whole += 1
    return whole


def _floor(value: Decimal, inclusive: bool) -> int:
    whole = int(value.to_integral_value(rounding="ROUND_FLOOR"))
    if not inclusive and whole == value:
        whole -= 1
    return whole


def _tail_modulus(k: int) -> int | None:
    """The m (at most 3) with k dividing 10**m: the last m digits decide divisibility."""
    for m in range(1, 4):
        if (10 ** m) % k == 0:
            return m
    return None


def _multiples_by_last_digits(k: int) -> str:
    """Integers divisible by ``k`` (a divisor of 1000), unbounded: by their last digits."""
    m = _tail_modulus(k)
    tails = [f"{t:0{m}d}" for t in range(0, 10 ** m, k)]
    small = [str(t) for t in range(0, 10 ** m, k) if t > 0]
    positive = alternation([literal_alternation(small), "[1-9][0-9]*" + group(literal_alternation(tails))])
    return f"(?:-?0|-?{group(positive)})"


def _listed_multiples(lo, lo_incl, hi, hi_incl, step: Decimal, integer: bool) -> str | None:
    """Every multiple of ``step`` in a bounded range, listed (few enough)."""
    if lo is None or hi is None:
        raise NumberUnsupported(f"multipleOf {step} without both bounds")
    frac_step = Fraction(step)
    first = -((-Fraction(lo)) // frac_step)
    last = Fraction(hi) // frac_step
    if not lo_incl and first * frac_step == Fraction(lo):
        first += 1
    if not hi_incl and last * frac_step == Fraction(hi):
        last -= 1
    if last - first + 1 > MAX_LISTED_MULTIPLES:
        raise NumberUnsupported(f"multipleOf {step} in a range of more than "
                                f"{MAX_LISTED_MULTIPLES} multiples")
    whole, fractional = [], []
    for n in range(int(first), int(last) + 1):
        value = n * frac_step
        if value.denominator == 1:
            whole.append(_canonical(value, integer))
        elif not integer:
            fractional.append(_canonical(value, integer))
    # other spellings of the same values: 2.0 and 2.50 (trailing zeros)
    parts = []
    if whole:
        parts.append(literal_alternation(whole) + ("" if integer else r"(?:\.0+)?"))
    if fractional:
        parts.append(group(literal_alternation(fractional)) + "0*")
    return alternation(parts)


def _canonical(value: Fraction, integer: bool) -> str:
    """The plain decimal spelling of an exact decimal value (``2.5``, ``-3``)."""
    if value.denominator == 1:
        return str(value.numerator)
    with localcontext() as ctx:
        ctx.prec = 200
        text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def literal_alternation(texts: list[str], escape=None) -> str | None:
    """An alternation of literal texts, factored as a trie (shared prefixes once).

    ``escape`` turns one character into regex text (default: ``re.escape``).
    """
    import re

    escape = escape or re.escape
    texts = list(dict.fromkeys(texts))
    if not texts:
        return None
    trie: dict = {}
    for text in texts:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = []
        optional = "" in node
        for ch, child in node.items():
            if ch == "":
                continue
            branches.append(escape(ch) + emit(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if optional:
            return f"(?:{body})?"
        return body

    return emit(trie) if len(texts) > 1 or texts[0] else ""
