"""A lazy index's bounded memory: past its row budget the least recently
used token rows are dropped and computed again when asked, with the same
answers as an index that keeps every row."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import cached_vocabulary
from tokendfa import Guide, Index
from tokendfa.lazy import DEFAULT_ROW_BUDGET, LazyIndex

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8}, "id": {"type": "string", "pattern": "^[a-f0-9]{6}$"},
    "n": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}},
    "x": {"type": "number"}}, "required": ["name", "n"]}


def random_walks(index, vocab, seed: int, walks: int, steps: int) -> list:
    """Each walk's masks, finality and states' successors along random
    allowed tokens (EOS avoided while any other token is allowed)."""
    rng = np.random.default_rng(seed)
    seen = []
    eos = set(vocab.eos_token_ids)
    for _ in range(walks):
        guide = Guide(index)
        for _ in range(steps):
            tokens = guide.get_tokens()
            seen.append((guide.get_mask().tobytes(), index.is_final(guide.state)))
            choices = [t for t in tokens.tolist() if t not in eos]
            if not choices:
                break
            guide.advance(int(choices[rng.integers(len(choices))]))
    return seen


@pytest.mark.parametrize("vocab_name", ["toy", "qwen2.5"])
def test_a_tiny_row_budget_gives_the_answers_of_an_unbounded_index(vocab_name):
    vocab = cached_vocabulary(vocab_name)
    if vocab_name == "qwen2.5":
        build = lambda budget: Index.from_schema(SCHEMA, vocab, row_budget=budget)  # noqa: E731
    else:  # the toy vocabulary does not cover every byte: token-liveness is searched over rows
        build = lambda budget: Index.from_regex(r'\{"(a|b|c|x)*":(12|1\.5|-?[0-9]+)(,"[abc]{1,4}":[0-9]{2,5})*\}',  # noqa: E731
                                                vocab, row_budget=budget)
    unbounded = build(1 << 40)
    mask_bytes = (vocab.size + 31) // 32 * 4
    tiny = build(3 * mask_bytes)  # a few rows at a time
    expected = random_walks(unbounded, vocab, 7, walks=12, steps=40)
    assert random_walks(tiny, vocab, 7, walks=12, steps=40) == expected
    # it did drop rows (and computed them again): far fewer kept than served
    assert unbounded.num_served_states > 4 * tiny.num_served_states
    assert tiny.row_bytes <= 3 * mask_bytes + 2048
    if vocab_name != "toy":
        return  # the schema's whole automaton is past max_states: only the toy one is completed
    # the completion thread and complete() still see every row they need
    tiny.start_completion()
    assert tiny.wait_completion(60)
    assert tiny.complete().num_states == unbounded.complete().num_states


def test_row_budget_defaults_and_checks():
    vocab = cached_vocabulary("toy")
    index = Index.from_regex("[0-9]+", vocab)
    assert isinstance(index, LazyIndex) and index._row_budget == DEFAULT_ROW_BUDGET
    index.get_mask(index.initial_state)
    assert 0 < index.row_bytes < DEFAULT_ROW_BUDGET
    with pytest.raises(ValueError):
        Index.from_regex("[0-9]+", vocab, row_budget=0)


def _colliding(monkeypatch):
    """Every new row's mask fingerprint made 0, as if all of them collided."""
    for name in ("_compiled_row", "_numpy_row"):
        def colliding(self, state, _method=getattr(LazyIndex, name)):
            key, successors, _ = _method(self, state)
            return key, successors, 0

        monkeypatch.setattr(LazyIndex, name, colliding)


@pytest.mark.parametrize("collide", [False, True])
def test_equal_masks_are_one_array_and_distinct_ones_stay_apart(collide, monkeypatch):
    """The rows' masks are kept by fingerprint and compared bytewise: states
    with equal masks serve one array, and distinct masks stay distinct even
    when every fingerprint is the same, with a budget that drops rows too."""
    vocab = cached_vocabulary("qwen2.5")
    expected = random_walks(Index.from_schema(SCHEMA, vocab), vocab, 3, walks=8, steps=30)
    if collide:
        _colliding(monkeypatch)
    index = Index.from_schema(SCHEMA, vocab)
    assert random_walks(index, vocab, 3, walks=8, steps=30) == expected
    arrays = {}
    for mask in index._masks.values():
        arrays.setdefault(mask.tobytes(), set()).add(id(mask))
    assert all(len(ids) == 1 for ids in arrays.values())
    assert len(arrays) < len(index._masks)  # some masks are shared
    kept = [mask for masks in index._distinct_masks.values() for mask in masks]
    assert sorted(mask.tobytes() for mask in kept) == sorted(arrays)
    if collide:
        assert list(index._distinct_masks) == [0]
    mask_bytes = (vocab.size + 31) // 32 * 4
    tiny = Index.from_schema(SCHEMA, vocab, row_budget=3 * mask_bytes)
    assert random_walks(tiny, vocab, 3, walks=8, steps=30) == expected
    kept = [mask for masks in tiny._distinct_masks.values() for mask in masks]
    assert sorted(mask.tobytes() for mask in kept) == sorted({mask.tobytes() for mask in tiny._masks.values()})
    assert sum(users for users, _ in tiny._mask_users.values()) == len(tiny._masks)
