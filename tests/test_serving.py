"""Serving: masks, advance, EOS, and the Guide cursor."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TOY_EOS, TOY_TOKENS, cached_index, cached_vocabulary
from tokendfa import Guide, IdTypeError, Index, InvalidStateError, MaskBufferError, TokenNotAllowedError

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}


def test_mask_layout_matches_get_tokens():
    index = cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5")
    for state in range(index.num_states):
        mask = index.get_mask(state)
        assert mask.dtype == np.uint32 and mask.shape == ((index.vocab_size + 31) // 32,)
        from_bits = [i for i in range(index.vocab_size) if (int(mask[i // 32]) >> (i % 32)) & 1]
        assert from_bits == index.get_tokens(state).tolist()
        assert index.get_tokens(state).dtype == np.int32


def test_eos_only_in_final_states_and_keeps_them():
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    assert TOY_EOS not in index.get_tokens(0)
    after_a = index.advance(0, TOKEN[b"a"])
    assert index.is_final(after_a) and TOY_EOS in index.get_tokens(after_a)
    assert index.advance(after_a, TOY_EOS) == after_a
    with pytest.raises(TokenNotAllowedError, match="EOS token 11 is not allowed in state 0"):
        index.advance(0, TOY_EOS)


def test_disallowed_and_out_of_range_tokens():
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    with pytest.raises(TokenNotAllowedError) as caught:
        index.advance(0, TOKEN[b"x"])
    assert caught.value.state == 0 and caught.value.token_id == TOKEN[b"x"]
    assert "b'x'" in str(caught.value)
    with pytest.raises(TokenNotAllowedError, match="special token"):
        index.advance(0, 17)
    with pytest.raises(InvalidStateError, match="token id 30 is out of range"):
        index.advance(0, 30)
    with pytest.raises(InvalidStateError, match="token id -1 is out of range"):
        index.advance(0, -1)
    with pytest.raises(InvalidStateError, match="state 99 is out of range"):
        index.get_mask(99)


def test_guide_walk_rollback_and_copy():
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    guide = Guide(index)
    guide.advance(TOKEN[b"a"])
    assert guide.can_end() and not guide.is_finished()
    twin = guide.copy()
    guide.advance(TOKEN[b".5"])
    assert guide.num_tokens == 2 and twin.num_tokens == 1
    assert TOKEN[b".5"] in twin.get_tokens()  # the copy did not move
    guide.rollback(1)
    assert guide.state == twin.state
    guide.advance(TOKEN[b"."])
    assert not guide.can_end()
    assert set(guide.get_tokens().tolist()) == {TOKEN[b"1"], TOKEN[b"2"], TOKEN[b"5"],
                                                TOKEN[b"0"], TOKEN[b"12"]}
    with pytest.raises(InvalidStateError, match="only 2 were consumed"):
        guide.rollback(3)
    guide.reset()
    assert guide.state == 0 and guide.num_tokens == 0


def test_guide_ends_on_eos():
    index = cached_index(r"(ab)+", "toy")
    guide = Guide(index)
    guide.advance(TOKEN[b"ab"])
    guide.advance(TOY_EOS)
    assert guide.is_finished() and len(guide.get_tokens()) == 0
    assert not guide.get_mask().any()
    with pytest.raises(TokenNotAllowedError, match="already ended"):
        guide.advance(TOKEN[b"ab"])
    guide.rollback(1)
    assert not guide.is_finished() and TOY_EOS in guide.get_tokens()


def test_guide_is_finished_when_only_eos_remains():
    index = cached_index(r"a|abc", "toy")
    guide = Guide(index)
    guide.advance(TOKEN[b"abc"])
    assert guide.is_finished() and guide.get_tokens().tolist() == [TOY_EOS]


@pytest.mark.slow
def test_outlines_core_blind_spots_are_served(qwen_vocab):
    """outlines-core 0.2.14 drops tokens after points where the regex could
    already end; these are the cases it gets wrong, answered right."""
    def ids(text):
        found = qwen_vocab.ids_for_bytes(text.encode())
        assert found, text
        return found[0]

    # After "a" in a(\.[0-9]+)?, "." must be allowed (so the model can write a.5 as a + . + 5).
    index = cached_index(r"a(\.[0-9]+)?", "qwen2.5")
    state = index.advance(0, ids("a"))
    assert index.is_allowed(state, ids("."))
    state = index.advance(state, ids("."))
    assert index.is_allowed(state, ids("5")) and not index.is_final(state)
    # After "ab" in (ab)+, "a" must be allowed.
    index = cached_index(r"(ab)+", "qwen2.5")
    state = index.advance(0, ids("ab"))
    assert index.is_allowed(state, ids("a")) and index.is_final(state)
    # In a|abc, the generation can go on past "a".
    index = cached_index(r"a|abc", "qwen2.5")
    state = index.advance(0, ids("a"))
    assert index.is_allowed(state, ids("b")) and index.is_allowed(state, ids("bc"))
    # 1.5 in the number regex, token by token.
    index = cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5")
    state = index.advance(0, ids("1"))
    state = index.advance(state, ids("."))
    assert index.is_final(index.advance(state, ids("5")))


# --- fast-forward ------------------------------------------------------------------

def _walk(index, vocab, text):
    state = 0
    for token_id in vocab.encode(text):
        state = index.advance(state, token_id)
    return state


@pytest.mark.slow
def test_forced_tokens_stop_inside_a_shared_key_prefix(qwen_vocab):
    # Keys orderId and orderName share "order": nothing inside it is forced,
    # because the model may write "orderId" or "orderName" as one token.
    index = cached_index(r'\{("orderId":[0-9]+)?(,?"orderName":"[a-z]*")?\}', "qwen2.5")
    state = _walk(index, qwen_vocab, '{"')
    assert index.forced_tokens(state).tolist() == []


@pytest.mark.slow
def test_forced_tokens_spell_a_required_key_and_stop_before_the_quote(qwen_vocab):
    index = cached_index(r'\{"name_of_the_person":"[a-zA-Z ]*"\}', "qwen2.5")
    guide = Guide(index)
    for token_id in qwen_vocab.encode('{"'):
        guide.advance(token_id)
    forced = guide.forced_tokens().tolist()
    assert b"".join(qwen_vocab.tokens[t] for t in forced) == b"name_of_the_person"
    assert forced == qwen_vocab.encode("name_of_the_person")  # the tokenizer's own segmentation
    for token_id in forced:
        guide.advance(token_id)
    assert guide.forced_tokens().tolist() == []  # '":"' could be one token: the model chooses


@pytest.mark.parametrize("pattern", [r'\{"id": [0-9]+, "kind": "(a|b)"\}', r"(ab)+c", r"x(yz|yw)"])
def test_forced_tokens_are_allowed_and_spell_forced_bytes(pattern):
    from tokendfa.analysis.construct import byte_dfa_from_regex
    from tokendfa.analysis.literals import forced_run

    index = cached_index(pattern, "qwen2.5")
    vocab = index.vocabulary
    dfa = byte_dfa_from_regex(pattern)
    # Walk every state with the text that reaches it, and compare with the DFA.
    texts, queue = {0: b""}, [0]
    for state in queue:
        for token_id in index.get_tokens(state).tolist():
            if token_id in vocab.eos_token_ids:
                continue
            nxt = index.advance(state, token_id)
            if nxt not in texts:
                texts[nxt] = texts[state] + vocab.tokens[token_id]
                queue.append(nxt)
    for state, text in texts.items():
        forced = index.forced_tokens(state).tolist()
        run, _ = forced_run(dfa, dfa.walk(dfa.initial, text))
        spelled = b"".join(vocab.tokens[t] for t in forced)
        assert run.startswith(spelled)
        current = state
        for token_id in forced:
            current = index.advance(current, token_id)


def test_write_mask_into_numpy_and_torch_rows():
    index = cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5")
    words = (index.vocab_size + 31) // 32
    batch = np.full((3, words + 9), -1, dtype=np.int32)  # wider, like a model's logits
    index.write_mask_into(1, batch, row=2)
    assert np.array_equal(batch[2, :words].view(np.uint32), index.get_mask(1))
    assert not batch[2, words:].any() and (batch[:2] == -1).all()
    single = np.zeros(words, dtype=np.uint32)
    index.write_mask_into(0, single)
    assert np.array_equal(single, index.get_mask(0))
    with pytest.raises(MaskBufferError, match="the buffer has 3 words"):
        index.write_mask_into(0, np.zeros(3, dtype=np.int32))
    with pytest.raises(MaskBufferError, match="int32 or uint32 words.*float32"):
        index.write_mask_into(0, np.zeros(words, dtype=np.float32))
    with pytest.raises(MaskBufferError, match="shape"):
        index.write_mask_into(0, np.zeros((2, words), dtype=np.int32))   # a batch needs a row
    with pytest.raises(MaskBufferError, match="row 5 is outside a batch of shape"):
        index.write_mask_into(0, batch, row=5)
    torch = pytest.importorskip("torch")
    tensor = torch.full((2, words + 1), -1, dtype=torch.int32)
    index.write_mask_into(1, tensor, row=1)
    assert np.array_equal(tensor[1, :words].numpy().view(np.uint32), index.get_mask(1))
    assert tensor[1, words] == 0 and (tensor[0] == -1).all()
    exact = torch.zeros(words, dtype=torch.int32)
    index.write_mask_into(1, exact)
    assert np.array_equal(exact.numpy().view(np.uint32), index.get_mask(1))
    with pytest.raises(MaskBufferError, match="row 2 is outside"):
        index.write_mask_into(1, tensor, row=2)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_lazy_write_mask_into_copies_every_bit(dtype):
    """A lazy index's quick copy (a numpy row exactly as wide as the
    vocabulary, alone or a row of a batch) writes the mask's words bit for
    bit, the top bit of a word included; other buffers take the checked
    copy and get the same words."""
    vocab = cached_vocabulary("qwen2.5")
    index = Index.from_regex(r"[^0-9]*", vocab, lazy=True)
    mask = index.get_mask(index.initial_state)
    words = len(mask)
    assert (mask >> 31).any()  # words with their sign bit set, as int32
    buffers = [(np.full(words, 7, dtype=dtype), None), (np.full((1, words), 7, dtype=dtype), 0),
               (np.full((3, words), 7, dtype=dtype), 1), (np.full((2, words + 5), 7, dtype=dtype), 1)]
    for out, row in buffers:
        index.write_mask_into(index.initial_state, out, row)
        target = out if row is None else out[row]
        assert np.array_equal(target[:words].view(np.uint32), mask)
        assert not target[words:].any()
        if row is not None:
            assert (np.delete(out, row, axis=0) == 7).all()


def test_write_mask_into_a_tensor_that_changed_its_memory():
    # The index remembers numpy views of recently seen tensors; a tensor
    # given new memory in place must be written in its new memory.
    torch = pytest.importorskip("torch")
    index = cached_index(r"-?[0-9]+(\.[0-9]+)?", "qwen2.5")
    words = (index.vocab_size + 31) // 32
    tensor = torch.zeros((2, words), dtype=torch.int32)
    index.write_mask_into(0, tensor, row=0)
    old = tensor.clone()
    tensor.set_(torch.full((3, words), -1, dtype=torch.int32))
    index.write_mask_into(1, tensor, row=2)
    assert np.array_equal(tensor[2].numpy().view(np.uint32), index.get_mask(1))
    assert (tensor[:2] == -1).all()
    for _ in range(20):   # many short-lived buffers: each written correctly
        fresh = torch.zeros(words, dtype=torch.int32)
        index.write_mask_into(1, fresh)
        assert np.array_equal(fresh.numpy().view(np.uint32), index.get_mask(1))
    assert np.array_equal(old[0].numpy().view(np.uint32), index.get_mask(0))


NOT_IDS = ["3", 1.5, None, [1], b"\x01", 2.0]


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("bad", NOT_IDS, ids=repr)
def test_ids_that_are_not_integers_get_a_precise_error(lazy, bad):
    # A string, float or None as a state or token id: IdTypeError (an
    # InvalidStateError and a TypeError) naming the value, from the warm
    # paths as from the cold ones, never a bare comparison TypeError.
    index = Index.from_regex(r"[ab]+c", cached_vocabulary("toy"), lazy=lazy)
    state = index.initial_state
    index.get_mask(state)  # a warm state: the fast paths
    calls = {
        "advance(state, bad)": lambda: index.advance(state, bad),
        "advance(bad, a)": lambda: index.advance(bad, TOKEN[b"a"]),
        "is_allowed(state, bad)": lambda: index.is_allowed(state, bad),
        "is_allowed(bad, a)": lambda: index.is_allowed(bad, TOKEN[b"a"]),
        "get_mask(bad)": lambda: index.get_mask(bad),
        "get_tokens(bad)": lambda: index.get_tokens(bad),
        "is_final(bad)": lambda: index.is_final(bad),
        "write_mask_into(bad)": lambda: index.write_mask_into(bad, np.zeros(1, np.int32)),
        "Guide.advance(bad)": lambda: Guide(index).advance(bad),
    }
    for name, call in calls.items():
        with pytest.raises(IdTypeError, match=r"is not an integer \(got ") as caught:
            call()
        assert isinstance(caught.value, InvalidStateError) and isinstance(caught.value, TypeError), name
    guide = Guide(index)
    guide.advance(TOKEN[b"a"])
    with pytest.raises(IdTypeError, match="rollback count"):
        guide.rollback(bad)
    assert guide.state == index.advance(state, TOKEN[b"a"])  # nothing undone


@pytest.mark.parametrize("lazy", [False, True])
def test_numpy_integers_are_ids(lazy):
    index = Index.from_regex(r"[ab]+c", cached_vocabulary("toy"), lazy=lazy)
    state = index.initial_state
    for kind in (np.int32, np.int64, np.uint16):
        following = index.advance(kind(state), kind(TOKEN[b"a"]))
        assert following == index.advance(state, TOKEN[b"a"])
        assert index.is_allowed(kind(state), kind(TOKEN[b"b"]))
        assert np.array_equal(index.get_mask(kind(following)), index.get_mask(following))
