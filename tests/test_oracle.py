"""Agreement with an outside engine: xgrammar's regex matcher.

On real vocabularies, random walks through our index compare the allowed set
with xgrammar's at every step. xgrammar's regex dialect differs from
Python's in a few places (see tests/xgrammar_oracle.py), so a few patterns
are handed to it in an equivalent spelling, and one documented deviation of
xgrammar is discounted: it accepts encoded surrogates (ED A0..BF), which are
not UTF-8 and which our byte DFA rightly refuses.
"""

from __future__ import annotations

import functools
import random
import re

import numpy as np
import pytest

from cases import CASES
from conftest import cached_index, cached_vocabulary

# Same language, in xgrammar's dialect.
XGRAMMAR_SPELLING = {
    "dot": r"x[^\n]y",                          # xgrammar's "." also matches a newline
    "case_insensitive": r"[yY][eE][sS]|[nN][oO]",  # xgrammar has no inline flags
    "anchored": r"ab",                          # anchors are redundant for whole matches
    # (X*)* is X*; xgrammar's Earley matcher stalls on the ambiguous nesting.
    "url": r"(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})[\/\w \.-]*\/?",
}
SKIPPED = {"empty_pattern"}  # xgrammar cannot compile an empty regex; tested against the brute force
ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")
WALKS, MAX_STEPS = 4, 24


@functools.lru_cache(maxsize=None)
def oracle_for(vocab_name: str):
    xgrammar_oracle = pytest.importorskip("xgrammar_oracle")
    vocab = cached_vocabulary(vocab_name)
    return xgrammar_oracle.XGrammarRegexOracle(list(vocab.tokens), list(vocab.eos_token_ids))


def _allowed_bits(index, state: int) -> np.ndarray:
    bits = np.unpackbits(index.get_mask(state).view(np.uint8), bitorder="little")
    return bits[:index.vocab_size].astype(bool)


def _discount_surrogates(theirs: np.ndarray, ours: np.ndarray, text: bytes, tokens) -> np.ndarray:
    extra = np.flatnonzero(theirs & ~ours)
    for token_id in extra:
        data = tokens[token_id] or b""
        if ENCODED_SURROGATE.search(text[-3:] + data):
            theirs[token_id] = False
    return theirs


cases = [case for case in CASES if case.name not in SKIPPED]


@pytest.mark.slow
@pytest.mark.parametrize("vocab_name", ["qwen2.5", "mistral-sp32k"])
@pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])
def test_random_walks_agree_with_xgrammar(case, vocab_name):
    vocab = cached_vocabulary(vocab_name)
    index = cached_index(case.pattern, vocab_name)
    matcher = oracle_for(vocab_name).compile(XGRAMMAR_SPELLING.get(case.name, case.pattern))
    rng = random.Random(f"{case.name}/{vocab_name}")
    eos = set(vocab.eos_token_ids)
    steps = 0
    for walk in range(WALKS):
        matcher.reset()
        state, text = index.initial_state, b""
        # Start one walk from a real tokenization of a match, so walks reach deep states.
        forced = vocab.encode(case.matches[walk % len(case.matches)]) if walk % 2 else []
        for step in range(MAX_STEPS):
            ours = _allowed_bits(index, state)
            theirs = _discount_surrogates(matcher.allowed_mask(), ours, text, vocab.tokens)
            if not np.array_equal(ours, theirs):
                only_ours = np.flatnonzero(ours & ~theirs)[:5].tolist()
                only_theirs = np.flatnonzero(theirs & ~ours)[:5].tolist()
                pytest.fail(
                    f"after {text!r} (state {state}): only we allow "
                    f"{[vocab.tokens[t] for t in only_ours]} {only_ours}, only xgrammar allows "
                    f"{[vocab.tokens[t] for t in only_theirs]} {only_theirs}")
            steps += 1
            if forced:
                token_id = forced.pop(0)
            else:
                choices = np.flatnonzero(ours)
                token_id = int(rng.choice(choices.tolist()))
            if token_id in eos:
                break
            state = index.advance(state, token_id)
            matcher.advance(token_id)
            text += vocab.tokens[token_id]
    assert steps >= WALKS
