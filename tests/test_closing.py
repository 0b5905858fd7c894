"""Closing within a token budget: the distances (tokendfa.analysis.closing)
against plain searches, and the masks of a guide with ``max_tokens``
against the brute-force set they must equal: of the allowed tokens, those
after which what closing needs (the distance to a final state, plus one for
EOS) fits in the tokens left, and EOS in a final state."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from tokendfa import Guide, Index
from tokendfa.analysis.closing import (CLOSURE_ALLOWANCE, FAR, UNKNOWN, LazyDistances, TableSteps,
                                       distances_to_final)
from tokendfa.analysis.construct import byte_dfa_from_regex
from tokendfa.analysis.lazydfa import LazyByteDFA

SCHEMA = {"type": "object",
          "properties": {"id": {"type": "integer"},
                         "name": {"type": "string", "minLength": 3, "maxLength": 12},
                         "kind": {"enum": ["alpha", "beta", "gamma"]},
                         "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                         "where": {"type": "object", "properties": {"x": {"type": "number"},
                                                                  "y": {"type": "number"}},
                                   "required": ["x", "y"]}},
          "required": ["id", "name", "where"]}
TOY_PATTERN = r'\{"a":(-?[0-9]+(\.[0-9]+)?|"[a-c ]*"|\[("abc",)*"x"\])(,"b":"[ab]{2,6}")?\}'


def naive_byte_distance(dfa, state: int, steps) -> int:
    """Breadth-first over the single-byte steps, one cell at a time."""
    seen, queue = {state}, deque([(state, 0)])
    while queue:
        node, depth = queue.popleft()
        if dfa.is_final(node):
            return depth
        for byte in steps:
            following = dfa.step(node, byte)
            if following and following not in seen:
                seen.add(following)
                queue.append((following, depth + 1))
    return FAR


def explored(pattern: str, step_chars: str):
    """The pattern's lazy automaton explored, the steps (bytes counted as
    one token each) and every live state's true distance under them."""
    steps = np.zeros(256, dtype=bool)
    steps[[ord(c) for c in step_chars]] = True
    lazy = LazyByteDFA(pattern)
    lazy.explore()
    byte_list = np.flatnonzero(steps).tolist()
    return lazy, steps, {s: naive_byte_distance(lazy, s, byte_list) for s in range(1, lazy.num_states)}


def naive_token_distance(index: Index, state: int) -> int:
    seen, queue = {state}, deque([(state, 0)])
    eos = set(index.eos_token_ids)
    while queue:
        node, depth = queue.popleft()
        if index.is_final(node):
            return depth
        for token in index.get_tokens(node).tolist():
            if token in eos:
                continue
            following = index.advance(node, token)
            if following not in seen:
                seen.add(following)
                queue.append((following, depth + 1))
    return FAR


def single_bytes(vocab) -> list[int]:
    """The steps a lazy index counts: ASCII and UTF-8 continuation bytes
    that are tokens of their own."""
    return sorted({data[0] for data in vocab.tokens if data is not None and len(data) == 1 and data[0] < 0xC0})


def walk_states(index, vocab, seed: int, count: int) -> list[int]:
    """States along a few random generations (long tokens preferred, so
    that they reach inside values)."""
    rng = np.random.default_rng(seed)
    eos = set(index.eos_token_ids)
    found = []
    for _ in range(3):
        state = index.initial_state
        for _ in range(40):
            found.append(state)
            tokens = [t for t in index.get_tokens(state).tolist() if t not in eos]
            if not tokens:
                break
            lengths = np.array([len(vocab.tokens[t]) for t in tokens], dtype=float)
            state = index.advance(state, int(rng.choice(tokens, p=lengths / lengths.sum())))
    picked = list(dict.fromkeys(found))
    rng.shuffle(picked)
    return picked[:count]


def brute_force(index, state: int, remaining: int, need_of) -> set[int]:
    eos = set(index.eos_token_ids)
    allowed = set()
    for token in index.get_tokens(state).tolist():
        if token in eos:
            allowed.add(token)
        else:
            need = need_of(index.advance(state, token))
            if need <= remaining - 1 or need > FAR:   # no counted path: the bound cannot tell
                allowed.add(token)
    return allowed


# --- the distances ----------------------------------------------------------------------

# closures off (the per-state search alone), past their allowance after a few
# states (both), and as served
CLOSURES = [0, 5, CLOSURE_ALLOWANCE]


@pytest.mark.parametrize("closure_states", CLOSURES)
@pytest.mark.parametrize("pattern", [TOY_PATTERN, r"(ab|c)*d{3}|x[0-9]{5,9}y", r"[a-z]+@[a-z]+\.(com|org)"])
def test_lazy_distances_equal_a_plain_search_at_every_limit(pattern, closure_states):
    steps = np.zeros(256, dtype=bool)
    steps[[ord(c) for c in 'abcdxy0123456789{}":,.-[] @']] = True
    eager = byte_dfa_from_regex(pattern)
    table = TableSteps(eager.transitions, eager.finals)
    lazy = LazyByteDFA(pattern)
    lazy.explore()
    byte_list = np.flatnonzero(steps).tolist()
    for dfa, states in ((table, range(1, eager.num_states)), (lazy, range(1, lazy.num_states))):
        for limit in (0, 1, 3, 8, 1000):
            distances = LazyDistances(dfa, steps, closure_allowance=closure_states)
            for state in states:
                truth = naive_byte_distance(lazy if dfa is lazy else _Stepping(eager), state, byte_list)
                got = distances.distance(state, limit)
                if truth <= limit:
                    assert got == truth, (pattern, state, limit)
                else:
                    assert got > limit, (pattern, state, limit)


class _Stepping:
    def __init__(self, dfa):
        self.dfa = dfa

    def step(self, state, byte):
        return int(self.dfa.transitions[state, byte])

    def is_final(self, state):
        return bool(self.dfa.finals[state])


@pytest.mark.parametrize("closure_states", CLOSURES)
def test_memoised_distances_stay_exact_in_any_order(closure_states):
    pattern = TOY_PATTERN
    lazy, steps, truth = explored(pattern, 'abcx0123456789{}":,.-[] ')
    for seed in range(3):
        order = list(truth)
        np.random.default_rng(seed).shuffle(order)
        distances = LazyDistances(lazy, steps, closure_allowance=closure_states)
        for state in order:
            assert distances.distance(state, FAR) == truth[state]


def test_a_search_past_its_state_bound_says_so_and_is_exact_otherwise():
    pattern = r"[a-z]{0,3}(x[0-9]{6}|y)"
    lazy, steps, truth = explored(pattern, "abcdefghijklmnopqrstuvwxyz0123456789")
    gave_up = 0
    for limit in (2, 5, 100):
        distances = LazyDistances(lazy, steps, max_search_states=3, closure_allowance=0)
        for state, true in truth.items():
            got = distances.distance(state, limit)
            if got == UNKNOWN:
                gave_up += 1
                assert distances.distance(state, limit) == UNKNOWN   # memoised
            elif true <= limit:
                assert got == true, (state, limit)
            else:
                assert got > limit, (state, limit)
    assert gave_up


@pytest.mark.parametrize("pattern", [TOY_PATTERN, r"[a-z]{0,3}(x[0-9]{6}|y)", r"x([a-c]{0,6}#|y[0-9]{3})"])
def test_a_closure_makes_every_distance_exact_where_a_search_gives_up(pattern, monkeypatch):
    """A closure that finishes makes every state's distance exact at any
    limit, even with a search bound of no states at all: FAR where no
    counted path reaches a final state (``#`` is not a step here), however
    deep what the state reaches is. (Its bound relative to the search's
    states is lifted here: a limit of 0 stops that search at once.)"""
    from tokendfa.analysis import closing

    monkeypatch.setattr(closing, "CLOSURE_MIN_STATES", 10_000)
    lazy, steps, truth = explored(pattern, 'abcx0123456789{}":,.-[] y')
    assert FAR in truth.values() or pattern != r"x([a-c]{0,6}#|y[0-9]{3})"
    for limit in (0, 2, FAR):
        distances = LazyDistances(lazy, steps, max_search_states=0)
        for state, true in truth.items():
            assert distances.distance(state, limit) == true, (pattern, state, limit)


def test_closures_given_up_past_the_search_they_outgrow_leave_exact_searches(monkeypatch):
    """Unbounded but by the allowance, the first question, from the initial
    state, makes every state's distance known (one closure). A closure that grows past a few times the
    states its plain search needed is given up (here at once: factor 1, no
    minimum): the first question then leaves states unknown, and the
    searches answer, exact as ever."""
    from tokendfa.analysis import closing

    lazy, steps, truth = explored(TOY_PATTERN, 'abcx0123456789{}":,.-[] ')
    monkeypatch.setattr(closing, "CLOSURE_MIN_STATES", 10_000)   # no bound but the allowance
    whole = LazyDistances(lazy, steps)
    assert whole.distance(1, FAR) == truth[1]
    assert all(whole.known(state) == true for state, true in truth.items())
    monkeypatch.setattr(closing, "CLOSURE_FACTOR", 1)
    monkeypatch.setattr(closing, "CLOSURE_MIN_STATES", 1)
    distances = LazyDistances(lazy, steps)
    assert distances.distance(1, FAR) == truth[1]
    assert sum(distances.known(state) is None for state in truth) > len(truth) // 2
    for state in truth:
        assert distances.distance(state, FAR) == truth[state]


def test_distances_to_final_over_adjacency_arrays():
    # 0 -> 1 -> 2 (final), 0 -> 3 -> 3, 4 -> 0; -1 is no edge
    offsets = np.array([0, 2, 3, 3, 4, 6])
    targets = np.array([1, 3, 2, 3, 0, -1])
    finals = np.array([False, False, True, False, False])
    assert distances_to_final(offsets, targets, finals).tolist() == [2, 1, 0, FAR, 3]


# --- the masks ----------------------------------------------------------------------------

def _check_masks(index, vocab, need_of, states, budgets):
    restricted = 0
    for state in states:
        for remaining in budgets(need_of(state)) if callable(budgets) else budgets:
            expected = brute_force(index, state, remaining, need_of)
            guide = Guide(index, state, max_tokens=remaining)
            plain = set(index.get_tokens(state).tolist())
            if not expected:   # nothing leaves room to close: the plain mask
                assert not index.is_final(state) and need_of(state) > remaining
                assert set(guide.get_tokens().tolist()) == plain
                continue
            got = set(guide.get_tokens().tolist())
            assert got == expected, (state, remaining, sorted(got ^ expected)[:10])
            assert got, (state, remaining)
            words = np.zeros((2, index.get_mask(state).shape[0] + 1), dtype=np.int32)
            guide.write_mask_into(words, row=1)
            bits = np.unpackbits(words[1].view(np.uint8), bitorder="little")
            assert set(np.flatnonzero(bits).tolist()) == expected
            assert np.array_equal(guide.get_mask(), words[1][:-1].view(np.uint32))
            restricted += got != set(index.get_tokens(state).tolist())
    return restricted


@pytest.mark.parametrize("lazy", [True, False])
def test_toy_budget_masks_equal_the_brute_force_set(toy_vocab, lazy):
    index = Index.from_regex(TOY_PATTERN, toy_vocab, lazy=lazy)
    if lazy:
        steps = single_bytes(toy_vocab)
        need_of = lambda s: naive_byte_distance(index.byte_dfa, s, steps) + 1  # noqa: E731
    else:
        need_of = lambda s: naive_token_distance(index, s) + 1  # noqa: E731
    states = walk_states(index, toy_vocab, 0, 25)
    restricted = _check_masks(index, toy_vocab, need_of, states, range(1, 16))
    assert restricted > 10


@pytest.mark.parametrize("lazy", [True, False])
def test_qwen_budget_masks_equal_the_brute_force_set(qwen_vocab, lazy):
    index = Index.from_schema(SCHEMA, qwen_vocab, lazy=lazy)
    if lazy:
        steps = single_bytes(qwen_vocab)
        memo: dict[int, int] = {}

        def need_of(state):
            if state not in memo:
                memo[state] = naive_byte_distance(index.byte_dfa, state, steps) + 1
            return memo[state]
    else:
        memo = {}

        def need_of(state):
            if state not in memo:
                memo[state] = naive_token_distance(index, state) + 1
            return memo[state]
    states = walk_states(index, qwen_vocab, 1, 8)
    restricted = _check_masks(index, qwen_vocab, need_of, states,
                              lambda least: (1, least - 1, least, least + 1, least + 4, least + 12, least + 40))
    assert restricted >= 5


@pytest.mark.parametrize("lazy", [True, False])
def test_every_generation_within_its_budget_closes(qwen_vocab, lazy):
    index = Index.from_schema(SCHEMA, qwen_vocab, lazy=lazy)
    least = Guide(index).tokens_to_close()
    rng = np.random.default_rng(3)
    eos = set(index.eos_token_ids)
    for budget in (least, least + 3, least + 20, 80):
        for _ in range(3):
            guide = Guide(index, max_tokens=budget)
            while not guide.ended:
                assert guide.remaining >= 1, "ran past the budget"
                tokens = guide.get_tokens()
                text = [t for t in tokens.tolist() if t not in eos]
                # prefer what keeps the text open: the worst case for closing
                pick = int(rng.choice(text)) if text and rng.random() < 0.9 else int(rng.choice(tokens))
                guide.advance(pick)
            assert guide.num_tokens <= budget
            assert index.is_final(guide.state)


def test_a_guide_too_short_to_close_serves_the_plain_masks(qwen_vocab):
    index = Index.from_schema(SCHEMA, qwen_vocab, lazy=False)
    least = Guide(index).tokens_to_close()   # exact on an eager index: no token path is shorter
    guide = Guide(index, max_tokens=least - 1)
    assert guide.max_tokens == least - 1 and guide.remaining == least - 1
    while not guide.ended and guide.remaining > 0:
        assert np.array_equal(guide.get_mask(), index.get_mask(guide.state))
        guide.advance(int(guide.get_tokens()[0]))
    with pytest.raises(ValueError):
        Guide(index, max_tokens=-1)


def test_far_from_the_budget_the_check_is_a_lookup(qwen_vocab):
    index = Index.from_schema(SCHEMA, qwen_vocab)
    guide = Guide(index, max_tokens=400)
    guide.get_mask()
    calls = []
    original = type(index)._closing_successors
    type(index)._closing_successors = lambda self, state: calls.append(state) or original(self, state)
    try:
        for _ in range(50):
            assert guide.get_mask() is index.get_mask(guide.state)   # the plain mask itself
    finally:
        type(index)._closing_successors = original
    assert calls == []


def test_where_the_lazy_bound_cannot_tell_the_mask_is_not_restricted(qwen_vocab):
    """A search that gives up (past its bound on states) answers UNKNOWN,
    and a successor it answered so for restricts nothing: with a bound of
    no states at all, every mask is the index's own."""
    index = Index.from_schema(SCHEMA, qwen_vocab)
    steps = np.zeros(256, dtype=bool)
    steps[single_bytes(qwen_vocab)] = True
    index._distances = LazyDistances(index.byte_dfa, steps, max_search_states=0)
    assert index.finish_bound(index.initial_state) == UNKNOWN
    for state in walk_states(index, qwen_vocab, 2, 6):
        plain = index.get_tokens(state).tolist()
        for remaining in (2, 5, 12):
            assert Guide(index, state, max_tokens=remaining).get_tokens().tolist() == plain


def test_a_batch_near_its_budget_finds_its_restricted_masks_kept_the_next_round(qwen_vocab):
    # A batch of generations asks for its restricted masks in turn, step after
    # step, and again in the next round of the same requests: more than a
    # handful of them must stay kept, or each round makes every one again
    # from its state's row (bench_vllm.py's warm batch of 16: 20 masks a round).
    index = Index.from_schema(SCHEMA, qwen_vocab)
    asked = []
    for state in walk_states(index, qwen_vocab, 5, 40):
        least = index.finish_bound(state)
        for remaining in range(max(least, 1), least + 6):
            if index.closing_mask(state, remaining) is not None:
                asked.append((state, remaining))
    made = []
    original = type(index)._closing_mask
    type(index)._closing_mask = lambda self, *args: made.append(args) or original(self, *args)
    try:
        first = [index.closing_mask(state, remaining) for state, remaining in asked]
        second = [index.closing_mask(state, remaining) for state, remaining in asked]
    finally:
        type(index)._closing_mask = original
    assert 16 < len({id(mask) for mask in first}) < 64, len({id(mask) for mask in first})
    assert made == [] and all(a is b for a, b in zip(first, second))
