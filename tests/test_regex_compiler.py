"""The direct regex compiler against interegular and against Python's ``re``.

:mod:`tokendfa.analysis.regex_compiler` replaces the interegular front end, so every
pattern is checked three ways:

* array for array against the interegular path (``interegular_oracle.py``:
  interegular's character FSM lifted to bytes, then ``canonical_byte_dfa``),
  wherever interegular gets the pattern right;
* on seeded random strings over the pattern's own characters, on strings
  spelled by random walks through the DFA, and on small edits of those,
  against ``re.fullmatch(pattern, text, re.ASCII)``;
* for one-character patterns, on every code point at once.

``INTEREGULAR_DIFFERS`` lists each pattern where interegular refuses or is
wrong, and why; those are held to Python's ``re`` only.
"""

from __future__ import annotations

import functools
import random
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from tokendfa.analysis.dfa import ByteDFA
from tokendfa.analysis.errors import BuildLimitError, RegexError, UnsupportedRegexError
from tokendfa.analysis.minimise import canonical_byte_dfa
from tokendfa.analysis.regex_compiler import byte_tables_from_regex
from tokendfa.analysis.regex_syntax import normalize_pattern
from cases import CASES
from interegular_oracle import byte_dfa_from_interegular

DATA = Path(__file__).parent / "data"

WORDS_50 = "|".join(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega one two three four five six seven eight nine ten "
    "eleven twelve red green blue cyan magenta yellow black white null true false none nil "
    "some any".split())

EXTRA_PATTERNS = [
    r"((ab){1,2}c){2,3}",
    r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}",
    r"(?:(?:x{1,3}){1,5}){1,3}",
    r"(?:x{2,3}){0,4}y",
    r"(?:[a-c]{0,2}-){1,3}",
    r"[^\W\d]+",
    r"[\s\S]",
    r"[\W\d]",
    r"[\]\-\\]+",
    r"[a\-z]",
    r"[\w-]+",
    r"[+--]",
    r"\x41\x00",
    r"\u00e9",
    r"[\u00e0-\u00ff]+",
    r"\U0001F600",
    r"\N{LATIN SMALL LETTER E WITH ACUTE}",
    r"(?i)abc",
    r"(?i)[a-f]+",
    r"(?i)[^a]",
    r"(?i)[Z-a]",
    r"(?i)k",
    r"(?i)é",
    r"(?i)[é]",
    r"(?i)ß",
    r"(?i)ǅ",
    r"(?i:a)b",
    r"(?i)a(?-i:b)",
    r"(?i)[^\W\d]+",
    r"(?s)(?i).",
    r"a{0}",
    r"a{0}b",
    r"(a|)",
    r"x|",
    r"(|)",
    r"()",
    r"a{2,}",
    r"a{,3}",
    r"a+?",
    r"\d{2,3}?",
    r"(?:a|b)*?c",
    r"(?:ab)+",
    r"(?P<first>ab)c",
    r"(?#comment)a",
    r"\.\/",
    r"\$\^",
    r"[$^]",
    r"[😀-🙏]+",
    r"[🙏-🙏]",
    r'[^"\\\x00-\x1f]*',
    r"[\x80-\xff]",
    r"[^\x00-\x7f]",
    r"\t\n\r\f\v\a",
    r"[\b]",
    r"\0",
    r"[]a]",
    r"[^]a]",
    r"[\S\W]",
    r"a{",
    r"a{1",
    r"a{x}",
    r"{}",
    r"(?m)a",
    r"(?x) a b # comment",
    r"(?a)\w",
    r"(?s).",
    r".*",
    r"(a*b)*",
    r"(a|ab)(c|bcd)",
    r"\w+@\w+\.com",
    WORDS_50,
    f"({WORDS_50})(,({WORDS_50})){{0,3}}",
]

# Where interegular (0.3.3) refuses the pattern or gives another language.
INTEREGULAR_DIFFERS = {
    r"\u00e9": r"refuses \u escapes",
    r"[\u00e0-\u00ff]+": r"refuses \u escapes",
    r"\U0001F600": r"refuses \U escapes",
    r"\N{LATIN SMALL LETTER E WITH ACUTE}": r"refuses \N escapes",
    r"(?i)é": "folds non-ASCII letters (é matches É); re.ASCII does not",
    r"(?i)[é]": "folds non-ASCII letters (é matches É); re.ASCII does not",
    r"(?i)ß": "crashes: 'ß'.upper() is 'SS', two characters",
    r"(?i)ǅ": "folds with str.lower/upper only: (?i)ǅ does not match ǅ itself",
    r"(?s)(?i).": "a second inline flag group replaces the first: DOTALL is lost",
    r"(?#comment)a": "crashes on comments",
    r"\0": r"refuses \0 alone",
    r"[]a]": "reads [] as an empty class, then a]",
    r"[^]a]": "reads [^] as any character, then a]",
    r"[\S\W]": r"takes the union of \S and \W as the complement of [\s\w]",
    r"a{": "refuses a { that is not a repeat",
    r"a{1": "refuses a { that is not a repeat",
    r"a{x}": "refuses a { that is not a repeat",
    r"(?m)a": "refuses the MULTILINE flag",
    r"(?x) a b # comment": "refuses the VERBOSE flag",
    r"(?a)\w": "refuses the ASCII flag",
}

ALL_PATTERNS = [case.pattern for case in CASES] + EXTRA_PATTERNS
GENERIC_CHARS = "aAbB0 9_-.\n\t\"\\/éÉ日😀\x00\x1f\u212a\u017f"


def compile_ours(pattern: str) -> ByteDFA:
    return canonical_byte_dfa(*byte_tables_from_regex(normalize_pattern(pattern)), pattern=pattern)


def python_fullmatch(pattern: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning: possible set difference
        return re.compile(pattern, re.ASCII).fullmatch


def distances_to_final(dfa: ByteDFA) -> np.ndarray:
    """Fewest bytes from each state to a final state (a large number when none)."""
    far = np.iinfo(np.int64).max // 2
    dist = np.where(dfa.finals, 0, far)
    while True:
        new = np.minimum(dist, 1 + dist[dfa.transitions].min(axis=1))
        if np.array_equal(new, dist):
            return dist
        dist = new


def random_walk(dfa: ByteDFA, dist: np.ndarray, rng: random.Random, budget: int = 40) -> str:
    """A string the DFA accepts: random steps (to a random next state, then a
    random byte into it), then the shortest way to a final state."""
    state, out = 1, bytearray()
    for _ in range(rng.randint(0, budget)):
        if dfa.finals[state] and rng.random() < 0.15:
            break
        row = dfa.transitions[state]
        targets = np.unique(row[row != 0])
        if len(targets) == 0:
            break
        target = rng.choice(targets.tolist())
        out.append(rng.choice(np.flatnonzero(row == target).tolist()))
        state = target
    while not dfa.finals[state]:
        row = dfa.transitions[state]
        byte = rng.choice(np.flatnonzero(dist[row] == dist[state] - 1).tolist())
        out.append(byte)
        state = int(row[byte])
    return out.decode("utf-8")


def mutate(text: str, alphabet: str, rng: random.Random) -> str:
    """A small edit: delete, insert, replace or duplicate a piece."""
    i = rng.randint(0, len(text))
    j = min(len(text), i + rng.randint(1, 3))
    kind = rng.randrange(4)
    if kind == 0:
        return text[:i] + text[j:]
    if kind == 1:
        return text[:i] + rng.choice(alphabet) + text[i:]
    if kind == 2:
        return text[:i] + rng.choice(alphabet) + text[i + 1:]
    return text[:j] + text[i:j] + text[j:]


def check_against_python(pattern: str, dfa: ByteDFA, *, extra_chars: str = "",
                         random_strings: int = 300, walks: int = 60, max_length: int = 8,
                         walk_budget: int = 40) -> None:
    fullmatch = python_fullmatch(pattern)
    rng = random.Random(pattern)
    chars = set(pattern) | set(GENERIC_CHARS) | set(extra_chars)
    alphabet = "".join(sorted(chars | {c.swapcase() for c in chars if len(c.swapcase()) == 1}))
    for _ in range(random_strings):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_length)))
        assert dfa.accepts(text.encode()) == bool(fullmatch(text)), (pattern, text)
    dist = distances_to_final(dfa)
    for _ in range(walks):
        text = random_walk(dfa, dist, rng, walk_budget)
        assert fullmatch(text), (pattern, text)
        edited = mutate(text, alphabet, rng)
        assert dfa.accepts(edited.encode()) == bool(fullmatch(edited)), (pattern, edited)


# --- the table contract ---------------------------------------------------------

@pytest.mark.parametrize("pattern", ["", "a", "(ab)*", r"[^\s\S]", "é|日本"])
def test_tables_follow_the_determinise_contract(pattern):
    transitions, finals = byte_tables_from_regex(pattern)
    assert transitions.dtype == np.int32 and transitions.ndim == 2
    assert transitions.shape[1] == 256
    assert finals.dtype == bool and finals.shape == (transitions.shape[0],)
    assert transitions.shape[0] >= 2  # dead state 0 and initial state 1
    assert not transitions[0].any() and not finals[0]
    assert transitions.min() >= 0 and transitions.max() < transitions.shape[0]
    assert finals[1] == bool(re.fullmatch(pattern, ""))


def test_empty_language_has_only_the_dead_state():
    for pattern in (r"[^\s\S]", r"a[^\s\S]b", r"[^\S\W]"):
        dfa = canonical_byte_dfa(*byte_tables_from_regex(pattern))
        assert dfa.num_states == 1, pattern


# --- against interegular, array for array ------------------------------------------

@pytest.mark.parametrize("pattern", ALL_PATTERNS)
def test_same_dfa_as_interegular(pattern):
    if pattern in INTEREGULAR_DIFFERS:
        pytest.skip(f"interegular {INTEREGULAR_DIFFERS[pattern]}")
    ours = compile_ours(pattern)
    reference = byte_dfa_from_interegular(pattern)
    assert np.array_equal(ours.transitions, reference.transitions), pattern
    assert np.array_equal(ours.finals, reference.finals), pattern


# --- against Python's re -------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_cases_against_python_re(case):
    dfa = compile_ours(case.pattern)
    for text in case.matches:
        assert dfa.accepts(text.encode()), (case.pattern, text)
    for text in case.rejects:
        assert not dfa.accepts(text.encode()), (case.pattern, text)
    check_against_python(case.pattern, dfa,
                         extra_chars=case.alphabet + "".join(case.matches + case.rejects))


@pytest.mark.parametrize("pattern", EXTRA_PATTERNS)
def test_extra_patterns_against_python_re(pattern):
    check_against_python(pattern, compile_ours(pattern))


ONE_CHARACTER = [
    r"\w", r"\W", r"\d", r"\D", r"\s", r"\S", r".", r"(?s).", r"[^\W\d]", r"[\S\W]", r"[\s\S]",
    r"(?i)[a-z]", r"(?i)[^k]", r"(?i)é", r"(?i)ſ", r"(?i)\u212a", r"(?i)[Z-a]", r"(?i)[^\W_]",
    r"[😀-🙏]", r'[^"\\\x00-\x1f]', r"[\x00-\U0010ffff]", r"[^a-c]",
]


EVERY_CODEPOINT = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)])


def utf8_columns(codepoints: np.ndarray) -> list[np.ndarray]:
    """The UTF-8 bytes of code points that all have the same encoded length."""
    top = int(codepoints.max())
    if top < 0x80:
        return [codepoints]
    if top < 0x800:
        return [0xC0 | codepoints >> 6, 0x80 | codepoints & 0x3F]
    if top < 0x10000:
        return [0xE0 | codepoints >> 12, 0x80 | codepoints >> 6 & 0x3F, 0x80 | codepoints & 0x3F]
    return [0xF0 | codepoints >> 18, 0x80 | codepoints >> 12 & 0x3F,
            0x80 | codepoints >> 6 & 0x3F, 0x80 | codepoints & 0x3F]


@functools.lru_cache(maxsize=None)
def utf8_by_length() -> list[tuple[np.ndarray, list[np.ndarray]]]:
    groups = []
    for low, high in ((0, 0x80), (0x80, 0x800), (0x800, 0x10000), (0x10000, 0x110000)):
        codepoints = EVERY_CODEPOINT[(EVERY_CODEPOINT >= low) & (EVERY_CODEPOINT < high)]
        groups.append((codepoints, [c.astype(np.intp) for c in utf8_columns(codepoints)]))
    return groups


def accepted_codepoints(dfa: ByteDFA) -> np.ndarray:
    """Every code point (surrogates excluded) whose UTF-8 encoding the DFA accepts."""
    accepted = []
    flat = dfa.transitions.ravel()
    for codepoints, columns in utf8_by_length():
        states = np.full(len(codepoints), 1, dtype=np.intp)
        for column in columns:
            states = flat[states * 256 + column]
        accepted.append(codepoints[dfa.finals[states]])
    return np.concatenate(accepted)


EVERY_CHARACTER = EVERY_CODEPOINT.astype("<u4").tobytes().decode("utf-32-le")


def python_codepoints(pattern: str) -> np.ndarray:
    """Every code point (surrogates excluded) that ``pattern`` matches alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The pattern matches one character at a time: deleting its matches
        # leaves exactly the characters it does not match.
        missed = re.sub(pattern, "", EVERY_CHARACTER, flags=re.ASCII)
    missed_codepoints = np.frombuffer(missed.encode("utf-32-le"), dtype="<u4")
    return np.setdiff1d(EVERY_CODEPOINT, missed_codepoints, assume_unique=True)


@pytest.mark.parametrize("pattern", ONE_CHARACTER)
def test_one_character_sets_on_every_codepoint(pattern):
    assert np.array_equal(accepted_codepoints(compile_ours(pattern)), python_codepoints(pattern))


def test_case_folding_is_ascii_only():
    """(?i) folds A-Z/a-z and nothing else, as re.ASCII | re.IGNORECASE."""
    dfa = compile_ours(r"(?i)[a-zé]+")
    assert dfa.accepts("aZé".encode())
    assert not dfa.accepts("É".encode())
    assert not dfa.accepts("\u212a".encode())  # the Kelvin sign folds to k only in Unicode mode
    assert not dfa.accepts("\u017f".encode())  # nor does the long s fold to s


def test_lazy_repeats_accept_the_same_strings_as_greedy():
    for lazy, greedy in ((r"a+?b*?", r"a+b*"), (r"(ab){1,3}?c??", r"(ab){1,3}c?")):
        assert np.array_equal(compile_ours(lazy).transitions, compile_ours(greedy).transitions)


def test_nested_counted_repeats_flatten_without_changing_the_language():
    fullmatch_cases = [
        r"(?:x{1,3}){2,4}", r"(?:x{2,3}){0,3}", r"(?:x{2,}){0,2}", r"(?:x{0,2}){3,}",
        r"(?:(?:x{1,2}){2}){1,3}", r"(?:x{3}){1,3}", r"(?:x{0}){2,}", r"(?:x{2,3})*",
    ]
    for pattern in fullmatch_cases:
        dfa = compile_ours(pattern)
        fullmatch = python_fullmatch(pattern)
        for n in range(30):
            assert dfa.accepts(b"x" * n) == bool(fullmatch("x" * n)), (pattern, n)


# --- errors -----------------------------------------------------------------------

@pytest.mark.parametrize("pattern, construct", [
    (r"a*+a", "possessive"),
    (r"a++", "possessive"),
    (r"(?>ab)", "atomic group"),
    (r"a(?=b)", "lookaround"),
    (r"a(?!b)", "negative lookaround"),
    (r"(?<=a)b", "lookaround"),
    (r"(a)\1", "backreference"),
    (r"(a)?(?(1)b|c)", "conditional"),
    (r"a^b", "anchor"),
    (r"a$b", "anchor"),
    (r"\bword", "boundary"),
    (r"(?u)\w", "Unicode flag"),
    (r"(?u:\w)", "Unicode flag"),
])
def test_unsupported_constructs_are_named(pattern, construct):
    # Called without normalize_pattern, which would reject most of these first.
    with pytest.raises(UnsupportedRegexError, match=construct):
        byte_tables_from_regex(pattern)


@pytest.mark.parametrize("pattern", [r"a(", r"[a", r"a{2,1}", r"*a", "a{99999999999}"])
def test_invalid_syntax_is_a_regex_error(pattern):
    with pytest.raises(RegexError):
        byte_tables_from_regex(pattern)


def test_huge_bounded_repeats_hit_the_state_limit_at_once():
    for pattern in (r"(?:(?:a|b){1000}){1000}", r"(?:(?:ab){1000}){1000}", r"(?:a{2}b){1000000}"):
        with pytest.raises(BuildLimitError) as info:
            byte_tables_from_regex(pattern)
        assert info.value.reached > 2_000_000
    with pytest.raises(BuildLimitError):
        byte_tables_from_regex(r"(?:ab){100}", max_nfa_states=100)
    byte_tables_from_regex(r"(?:ab){10}", max_nfa_states=100)


def test_dfa_state_limit():
    with pytest.raises(BuildLimitError) as info:
        byte_tables_from_regex(r"[ab]*a[ab]{12}", max_dfa_states=1000)
    assert info.value.reached == 1001


# --- a real schema regex ------------------------------------------------------------

def test_big_schema_regex():
    """A 14,645-character regex from JSONSchemaBench (Github_easy/o10088).

    The interegular path takes about 45 s on it and gives the same arrays
    (checked once by hand); here it is held to Python's ``re`` on strings
    the DFA spells and on edits of them.
    """
    pattern = (DATA / "o10088.regex").read_text(encoding="utf-8").rstrip("\n")
    assert len(pattern) == 14645
    start = time.perf_counter()
    transitions, finals = byte_tables_from_regex(normalize_pattern(pattern))
    compiled = time.perf_counter()
    dfa = canonical_byte_dfa(transitions, finals, pattern=pattern)
    done = time.perf_counter()
    print(f"\no10088: compile {compiled - start:.2f} s ({transitions.shape[0]} states), "
          f"canonical {done - compiled:.2f} s ({dfa.num_states} states)")
    assert dfa.num_states == 382
    check_against_python(pattern, dfa, random_strings=100, walks=150)


# --- minimisation ---------------------------------------------------------------------

def plain_minimal_dfa(transitions: np.ndarray, finals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The textbook way, for comparison: trim, Moore refinement on whole rows
    of block numbers until nothing splits, breadth-first numbering by byte."""
    n = len(finals)
    live = finals.copy()
    changed = True
    while changed:
        grown = live | live[transitions].any(axis=1)
        changed = bool((grown != live).any())
        live = grown
    live[0] = False
    table = np.where(live[transitions], transitions, 0)
    table[~live] = 0
    block = np.where(live, 1 + (finals & live), 0)
    while True:
        signature = np.concatenate([block[:, None], block[table]], axis=1)
        _, refined = np.unique(signature, axis=0, return_inverse=True)
        refined = refined.ravel()
        if len(np.unique(refined)) == len(np.unique(block)):
            break
        block = refined
    number = {block[0]: 0}
    order = []
    if block[1] != block[0]:
        number[block[1]] = 1
        order.append(1)
    for state in order:  # grows while we iterate
        for byte in range(256):
            target = int(table[state, byte])
            if block[target] not in number:
                number[block[target]] = len(number)
                order.append(target)
    rows = np.zeros((len(number), 256), dtype=np.int32)
    kept = np.zeros(len(number), dtype=bool)
    for state in order:
        rows[number[block[state]]] = [number[block[t]] for t in table[state]]
        kept[number[block[state]]] = finals[state]
    return rows, kept


def counted_hash_weights(monkeypatch, first_weights=None) -> list:
    """Count the minimiser's hashed refinements (one list entry each); with
    ``first_weights``, the first one hashes with those weights instead.
    Every table goes to the array minimiser, small ones included."""
    import tokendfa.analysis.minimise as minimise

    monkeypatch.setattr(minimise, "_SMALL_TABLE_STATES", 0)
    calls = []
    real = minimise._hash_weights

    def weights(seed, size):
        calls.append(seed)
        if first_weights is not None and len(calls) == 1:
            return first_weights(size)
        return real(seed, size)

    monkeypatch.setattr(minimise, "_hash_weights", weights)
    return calls


def random_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Long forced chains (what counted repeats give), cycles, unreachable and
    dead-end states."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    alphabet = rng.choice(256, size=int(rng.integers(1, 5)), replace=False)
    density = rng.random()
    table = np.zeros((n, 256), dtype=np.int32)
    for state in range(1, n):
        for byte in alphabet:
            if rng.random() < density:
                table[state, byte] = rng.integers(0, n)
        if rng.random() < 0.6 and state + 1 < n:
            table[state, alphabet[0]] = state + 1  # a chain
    finals = rng.random(n) < 0.3 * rng.random()
    finals[0] = False
    return table, finals


@pytest.mark.parametrize("seed", range(40))
def test_minimisation_matches_plain_moore_refinement(seed, monkeypatch):
    """Random tables held to the textbook way. The hashed refinement runs
    once: its first result already passes the congruence check, so it gets
    the partition right by itself, without a retry."""
    calls = counted_hash_weights(monkeypatch)
    table, finals = random_table(seed)
    expected_table, expected_finals = plain_minimal_dfa(table, finals)
    dfa = canonical_byte_dfa(table, finals)
    assert np.array_equal(dfa.transitions, expected_table)
    assert np.array_equal(dfa.finals, expected_finals)
    assert len(calls) == 1


@pytest.mark.parametrize("seed", range(200))
def test_small_table_minimisation_matches_plain_moore_refinement(seed, monkeypatch):
    """The list-based path for small tables, held to the textbook way on the
    same random tables (up to 80 states: all of them take that path here)."""
    import tokendfa.analysis.minimise as minimise

    calls = counted_hash_weights(monkeypatch)
    monkeypatch.setattr(minimise, "_SMALL_TABLE_STATES", 10**9)
    table, finals = random_table(seed)
    expected_table, expected_finals = plain_minimal_dfa(table, finals)
    dfa = canonical_byte_dfa(table, finals)
    assert calls == []  # no hashed refinement ran: the small path did it all
    assert np.array_equal(dfa.transitions, expected_table)
    assert np.array_equal(dfa.finals, expected_finals)
    assert dfa.transitions.dtype == expected_table.dtype and dfa.finals.dtype == bool
    assert not dfa.transitions.flags.writeable and not dfa.finals.flags.writeable


@pytest.mark.parametrize("pattern", ALL_PATTERNS)
def test_both_minimisers_give_the_same_arrays(pattern, monkeypatch):
    """Every compiled test pattern, through the small-table path and the
    array path: identical canonical arrays."""
    import tokendfa.analysis.minimise as minimise

    transitions, finals = byte_tables_from_regex(normalize_pattern(pattern))
    monkeypatch.setattr(minimise, "_SMALL_TABLE_STATES", 10**9)
    small = canonical_byte_dfa(transitions, finals)
    monkeypatch.setattr(minimise, "_SMALL_TABLE_STATES", 0)
    arrays = canonical_byte_dfa(transitions, finals)
    assert np.array_equal(small.transitions, arrays.transitions)
    assert np.array_equal(small.finals, arrays.finals)


def test_minimisation_retries_after_a_hash_collision(monkeypatch):
    """With every hash weight 1, a signature's hash is the sum of its blocks,
    so states 1, 2 and 3 below (blocks 1+1+1, 1+2+0, 1+0+2) collide and the
    first refinement leaves them in one block. The congruence check must see
    that, and the retry with real weights must give the minimal DFA."""
    table = np.zeros((5, 256), dtype=np.int32)
    a, b = ord("a"), ord("b")
    table[1, a], table[1, b] = 2, 3
    table[2, a] = 4
    table[3, b] = 4
    finals = np.array([False, False, False, False, True])
    calls = counted_hash_weights(monkeypatch, lambda size: np.ones(size, dtype=np.uint64))
    dfa = canonical_byte_dfa(table, finals)
    assert len(calls) == 2
    expected_table, expected_finals = plain_minimal_dfa(table, finals)
    assert np.array_equal(dfa.transitions, expected_table)
    assert np.array_equal(dfa.finals, expected_finals)
    assert dfa.num_states == 5 and dfa.accepts(b"aa") and dfa.accepts(b"bb")
    assert not dfa.accepts(b"ab") and not dfa.accepts(b"ba")


@pytest.mark.parametrize("seed", range(40))
def test_minimisation_survives_a_collision_on_random_tables(seed, monkeypatch):
    """The same random tables with a useless first hash (all weights 1): the
    result is still the textbook one, whether or not the check had to retry."""
    calls = counted_hash_weights(monkeypatch, lambda size: np.ones(size, dtype=np.uint64))
    table, finals = random_table(seed)
    expected_table, expected_finals = plain_minimal_dfa(table, finals)
    dfa = canonical_byte_dfa(table, finals)
    assert np.array_equal(dfa.transitions, expected_table)
    assert np.array_equal(dfa.finals, expected_finals)
    assert len(calls) in (1, 2)


# --- shared definitions: placeholders stamped as minimal DFAs -----------------------

P, Q, R = "\ud800", "\ud801", "\ud802"
SHARED = {P: "(?:ab|c)+", Q: f"x{P}y|z", R: "[^a]"}


def _expanded(pattern: str) -> str:
    for _ in range(len(SHARED)):
        for placeholder, text in SHARED.items():
            pattern = pattern.replace(placeholder, f"(?:{text})")
    return pattern


@pytest.mark.parametrize("pattern", [
    P, f"{P}*", f"{Q}{{2,3}}", f"(?:{P}|q){Q}?",  # (?:P|q) is parsed as a class [Pq]
    f"{P}|{Q}|{R}|k", f"(?:{P}|{Q}){{2}}", f"{R}*{P}", f"({P}|{Q})+k", f"a{Q}{Q}b",
])
def test_shared_definitions_give_the_dfa_of_the_written_out_pattern(pattern):
    shared = canonical_byte_dfa(*byte_tables_from_regex(pattern, definitions=SHARED))
    written_out = canonical_byte_dfa(*byte_tables_from_regex(_expanded(pattern)))
    assert np.array_equal(shared.transitions, written_out.transitions)
    assert np.array_equal(shared.finals, written_out.finals)
    check_against_python(_expanded(pattern), shared)


def test_shared_definition_that_matches_nothing_is_a_dead_end():
    empty = {P: "[^\\x00-\\U0010ffff]"}
    dfa = canonical_byte_dfa(*byte_tables_from_regex(f"a{P}|b", definitions=empty))
    assert dfa.accepts(b"b") and not dfa.accepts(b"a") and not dfa.accepts(b"")


def test_shared_definitions_are_checked():
    with pytest.raises(ValueError, match="one surrogate character"):
        byte_tables_from_regex("a", definitions={"x": "b"})
    with pytest.raises(RegexError, match="uses itself"):
        byte_tables_from_regex(P, definitions={P: f"a{P}?"})
    with pytest.raises(RegexError, match="negated class"):
        byte_tables_from_regex(f"[^{P}a]", definitions=SHARED)


def test_a_kept_repeat_fragment_is_the_construction_it_stands_for():
    # ThompsonNFA._stamped: a repeat met again (here twice in one pattern, at
    # other state numbers and after other sources) is a relocated copy of the
    # fragment built before, state for state and edge for edge; a repeat is
    # kept the second time it is built, so the third construction copies
    # every one
    from tokendfa.analysis import regex_compiler as rc
    from tokendfa.analysis.regex_tree import parse_regex

    pattern = r'x(?:"(?:[^"\\]|\\["\\/bfnrt])*"|é{2,5})?y(?:"(?:[^"\\]|\\["\\/bfnrt])*"|é{2,5})z'
    tree = parse_regex(pattern)

    def construction():
        nfa = rc.ThompsonNFA(tree, 10_000)
        start = nfa.new_state()
        end = nfa.build(tree, start)
        return [list(row) for row in nfa.eps], [list(row) for row in nfa.edges], end

    saved, seen = dict(rc._STAMPS), dict(rc._SEEN)
    try:
        rc._STAMPS.clear()
        rc._SEEN.clear()
        construction()
        construction()
        assert any(key[1].__class__.__name__ == "Repeat" for key in rc._STAMPS)
        kept = dict(rc._STAMPS)
        stamped = construction()
        assert rc._STAMPS == kept  # nothing new: every repeat was copied
        rc._STAMPS.clear()
        minimum = rc._STAMPED_MIN_SIZE
        rc._STAMPED_MIN_SIZE = 1 << 30  # nothing kept: every repeat built anew
        try:
            built = construction()
        finally:
            rc._STAMPED_MIN_SIZE = minimum
    finally:
        rc._STAMPS.clear()
        rc._STAMPS.update(saved)
        rc._SEEN.clear()
        rc._SEEN.update(seen)
    assert stamped == built


def test_a_repeat_built_once_is_not_kept():
    # Most repeats of a schema are its own (an optional member with its name):
    # ThompsonNFA._stamped keeps a repeat's fragment only when it is built a
    # second time, so the first building copies no rows and the process-wide
    # store is left to the pieces that recur
    from tokendfa.analysis import regex_compiler as rc
    from tokendfa.analysis.regex_tree import parse_regex

    tree = parse_regex(r'\{(?:,"a_name_of_its_own":(?:true|false|null))?\}')

    def construction():
        nfa = rc.ThompsonNFA(tree, 10_000)
        nfa.build(tree, nfa.new_state())

    saved, seen = dict(rc._STAMPS), dict(rc._SEEN)
    try:
        rc._STAMPS.clear()
        rc._SEEN.clear()
        construction()
        assert not rc._STAMPS
        construction()
        assert len(rc._STAMPS) == 1
    finally:
        rc._STAMPS.clear()
        rc._STAMPS.update(saved)
        rc._SEEN.clear()
        rc._SEEN.update(seen)
