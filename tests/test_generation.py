"""Generation with transformers: the logits processor drives a real ``generate``.

The model is a tiny Llama with random weights (seeded, CPU, no download):
its text means nothing, so whatever it writes is the processor's doing. Two
sizes:

* over the toy vocabulary (30 tokens, see ``conftest.py``) with 64 logits,
  fast enough for every run;
* over the real Qwen2.5 vocabulary (151,665 tokens) with Qwen2.5's real
  output width, 151,936 logits, so the 271 ids past the vocabulary exist and
  must never be picked (``slow``).

A spy processor placed after ours checks, at every step and for every row,
that the allowed logits are exactly ``index.get_tokens(guide.state)`` (only
EOS once a row has ended) and that no id past the vocabulary is allowed.
Every pattern here is bounded, so ``max_new_tokens = max_generation_length``
lets each generation end on its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jsonschema
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor

from conftest import TOY_EOS, TOY_TOKENS, cached_index, cached_vocabulary
from tokendfa import Guide, Index, TokenNotAllowedError
from tokendfa.integrations.transformers import (
    TokenDFALogitsProcessor,
    generate_constrained,
    index_for,
    max_generation_length,
)

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}
TOY_PAD = 17            # <pad>: a special token, never text, never allowed
TOY_LOGITS = 64         # 34 ids past the toy vocabulary
QWEN_LOGITS = 151_936   # Qwen2.5's output width: 271 ids past its 151,665 tokens

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]{1,8}$"},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "choice": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "ok": {"type": "boolean"},
            "note": {"type": ["string", "null"], "maxLength": 4},
        },
        "required": ["color", "ok", "note"],
        "additionalProperties": False,
    },
    "numbers": {
        "type": "array",
        "items": {"type": "integer", "minimum": -99, "maximum": 99},
        "minItems": 1,
        "maxItems": 4,
    },
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The model is tiny: on two shared cores, torch's second thread only
    adds synchronisation (measured 100x slower per small matmul under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_llama(width: int, eos: list[int], pad: int, seed: int = 0) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=width, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        bos_token_id=None, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def toy_model() -> LlamaForCausalLM:
    return tiny_llama(TOY_LOGITS, [TOY_EOS], TOY_PAD)


@pytest.fixture(scope="module")
def qwen_model() -> LlamaForCausalLM:
    vocab = cached_vocabulary("qwen2.5")
    return tiny_llama(QWEN_LOGITS, list(vocab.eos_token_ids), vocab.eos_token_ids[0])


class MaskSpy(LogitsProcessor):
    """Runs right after ``processor`` and checks the mask it applied."""

    def __init__(self, processor: TokenDFALogitsProcessor) -> None:
        self.processor = processor
        self.steps = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        index = self.processor.index
        allowed = torch.isfinite(scores)   # the random model's logits are all finite
        assert not allowed[:, index.vocab_size:].any(), "an id past the vocabulary is allowed"
        for row, guide in enumerate(self.processor.guides):
            ended = guide.is_finished() and not guide.can_end()
            expected = sorted(index.eos_token_ids) if ended else index.get_tokens(guide.state).tolist()
            assert allowed[row].nonzero().flatten().tolist() == expected, (self.steps, row)
        self.steps += 1
        return scores


def sample(model, index: Index, prompts: list[list[int]], pad: int, **kwargs):
    """``generate`` under ``index`` with the spy; returns the processor, the
    spy and each row's new tokens."""
    width = max(len(p) for p in prompts)
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    processor = TokenDFALogitsProcessor(index)
    spy = MaskSpy(processor)
    bound = max_generation_length(index)
    assert bound is not None, "test patterns must be bounded"
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=True,
                         logits_processor=[processor, spy], max_new_tokens=bound,
                         eos_token_id=list(index.eos_token_ids), pad_token_id=pad, **kwargs)
    return processor, spy, out[:, width:].tolist()


def split_at_eos(row: list[int], eos: set[int]) -> tuple[list[int], list[int]]:
    """The tokens before the first EOS, and those after it."""
    end = next(i for i, t in enumerate(row) if t in eos)
    return row[:end], row[end + 1:]


# --- the processor alone, on hand-made calls -----------------------------------------------

def test_mask_matches_the_guides_and_hides_ids_past_the_vocabulary():
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    processor = TokenDFALogitsProcessor(index)
    torch.manual_seed(0)
    ids = torch.tensor([[3, 3], [3, 5]])             # two prompts, "xx" and "x "
    continuations = [[TOKEN[b"a"], TOKEN[b"."], TOKEN[b"5"]],
                     [TOKEN[b"a."], TOKEN[b"12"], TOY_EOS]]
    for step in range(4):
        scores = torch.randn(2, 70)   # not a multiple of 32, 40 ids past the vocabulary
        out = processor(ids, scores.clone())
        for row in range(2):
            guide = Guide(index)
            for token in ids[row, 2:].tolist():
                guide.advance(token)
            expected = guide.get_tokens().tolist() or [TOY_EOS]   # only EOS once ended
            allowed = torch.isfinite(out[row])
            assert allowed.nonzero().flatten().tolist() == expected
            assert torch.equal(out[row][allowed], scores[row][allowed])   # untouched
        if step < 3:
            ids = torch.cat([ids, torch.tensor([[c[step]] for c in continuations])], dim=1)
    for dtype in (torch.float16, torch.bfloat16):
        out = TokenDFALogitsProcessor(index)(ids[:, :2], torch.randn(2, 70).to(dtype))
        assert out.dtype == dtype
        assert torch.isfinite(out[0]).nonzero().flatten().tolist() == index.get_tokens(0).tolist()


def test_a_refused_token_names_its_row():
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    for bad in (TOKEN[b"b"], TOY_EOS, 40):     # refused, EOS too early, past the vocabulary
        processor = TokenDFALogitsProcessor(index)
        processor(torch.tensor([[3], [3]]), torch.zeros(2, 64))
        with pytest.raises(TokenNotAllowedError, match=r"^row 1, position 1: ") as caught:
            processor(torch.tensor([[3, TOKEN[b"a"]], [3, bad]]), torch.zeros(2, 64))
        assert caught.value.token_id == bad and caught.value.state == 0
    # refused="end" (for beam search) closes the row instead: only EOS from then on.
    processor = TokenDFALogitsProcessor(index, refused="end")
    processor(torch.tensor([[3], [3]]), torch.zeros(2, 64))
    out = processor(torch.tensor([[3, TOKEN[b"a"]], [3, TOKEN[b"b"]]]), torch.zeros(2, 64))
    after_a = index.advance(0, TOKEN[b"a"])
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == index.get_tokens(after_a).tolist()
    assert torch.isfinite(out[1]).nonzero().flatten().tolist() == [TOY_EOS]


def test_rows_are_followed_through_reordering_and_rollback():
    """Beam search swaps rows; assisted decoding adds several tokens and
    takes some back. Each row's guide must be the one of its own tokens."""
    index = cached_index(r"a(\.[0-9]+)?", "toy")
    processor = TokenDFALogitsProcessor(index)
    a, dot, one, two, five = (TOKEN[t] for t in (b"a", b".", b"1", b"2", b"5"))
    calls = [
        [[9, 9], [9, 9]],
        [[9, 9, a, dot], [9, 9, a, TOY_EOS]],              # two tokens at once
        [[9, 9, a, TOY_EOS, TOY_PAD], [9, 9, a, dot, one]],  # swapped, one more each
        [[9, 9, a, dot], [9, 9, a, dot]],                  # rolled back, duplicated
        [[9, 9, a, dot, two, five], [9, 9, a, TOY_EOS, TOY_PAD, TOY_PAD]],
    ]
    for call in calls:
        out = processor(torch.tensor(call), torch.zeros(2, 32))
        for row, tokens in enumerate(call):
            guide = Guide(index)
            for token in tokens[2:]:
                if guide.is_finished() and not guide.can_end():
                    break                                   # padding after EOS
                guide.advance(token)
            assert processor.guides[row].state == guide.state
            expected = guide.get_tokens().tolist() or [TOY_EOS]
            assert torch.isfinite(out[row]).nonzero().flatten().tolist() == expected
    with pytest.raises(ValueError, match="reset"):
        processor(torch.tensor([[8, 8, 8], [8, 8, 8]]), torch.zeros(2, 32))


def test_max_generation_length():
    assert max_generation_length(cached_index(r"a(\.[0-9]+)?", "toy")) is None
    # "a", "b", "c" one token each ("abc" is one token too, but shorter), then EOS
    assert max_generation_length(cached_index(r"ab?c?", "toy")) == 4
    assert max_generation_length(cached_index(r"a|b", "toy")) == 2


def test_importing_tokendfa_does_not_import_transformers_or_torch(tmp_path):
    code = ("import sys; from tokendfa import Index, Guide; "
            "assert 'transformers' not in sys.modules and 'torch' not in sys.modules, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


# --- generate with the toy model ----------------------------------------------------------

def test_rows_end_independently(toy_model):
    pattern = r"[0125]{1,8}"
    index = cached_index(pattern, "toy")
    torch.manual_seed(1)
    prompts = [[TOKEN[b"x"]] * (1 + i % 3) for i in range(8)]   # left padding too
    processor, spy, rows = sample(toy_model, index, prompts, TOY_PAD)
    vocab = cached_vocabulary("toy")
    texts = [split_at_eos(row, {TOY_EOS}) for row in rows]
    last = max(len(text) for text, _ in texts)
    for (text, after), guide in zip(texts, processor.guides):
        assert re.fullmatch(pattern, vocab.decode(text).decode())
        assert after == [TOY_PAD] * len(after)      # generate pads the ended row
        # The processor saw the row's EOS unless it was the last token generated.
        assert guide.is_finished() and guide.num_tokens == len(text) + (len(text) < last)
    assert len({len(text) for text, _ in texts}) > 1, "rows should end at different steps"
    assert spy.steps == last + 1


def test_generate_constrained_greedy_sampled_and_beams(toy_model):
    vocab = cached_vocabulary("toy")
    pattern = r'\{"a":(1|2|5)(\.[0-9]{1,3})?\}'
    index = cached_index(pattern, "toy")
    torch.manual_seed(2)
    texts = generate_constrained(toy_model, vocab, index, ["x", "ab", "-"], do_sample=True)
    texts.append(generate_constrained(toy_model, vocab, index, "x"))   # greedy, one prompt
    texts += generate_constrained(toy_model, vocab, index, "x", num_beams=4,
                                  num_return_sequences=3, do_sample=True)
    assert len(texts) == 7
    for text in texts:
        assert re.fullmatch(pattern, text), text


def test_generate_constrained_builds_a_schema_once_through_the_cache(toy_model, tmp_path):
    from tokendfa.cache import IndexCache

    vocab = cached_vocabulary("toy")
    schema = {"type": "object", "properties": {"a": {"enum": ["a", "ab", "cab"]}}, "required": ["a"],
              "additionalProperties": False}
    cache = IndexCache(tmp_path)
    torch.manual_seed(4)
    for _ in range(2):
        for text in generate_constrained(toy_model, vocab, schema, ["x", "ab"], cache=cache,
                                         do_sample=True):
            assert json.loads(text)["a"] in ("a", "ab", "cab")
    assert (cache.stats.builds, cache.stats.hits) == (1, 1)
    # A regex, built in memory: nothing more in the folder.
    assert re.fullmatch("12|5", generate_constrained(toy_model, vocab, "12|5", "x", cache=False))
    assert len(cache.entries()) == 1


# --- generate with the real Qwen2.5 vocabulary and width ------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_sampled_json_validates_against_its_schema(name, qwen_model):
    from tokendfa.schema.api import regex_from_schema

    schema = SCHEMAS[name]
    regex = regex_from_schema(schema).regex
    vocab = cached_vocabulary("qwen2.5")
    index = cached_index(regex, "qwen2.5")
    torch.manual_seed(3)
    prompts = [vocab.encode(p) for p in ("JSON:", "Here is the value as JSON: ")] * 10
    pad = vocab.eos_token_ids[0]
    processor, spy, rows = sample(qwen_model, index, prompts, pad)
    eos = set(vocab.eos_token_ids)
    assert len(rows) == 20 and spy.steps > 1
    for row in rows:
        tokens, after = split_at_eos(row, eos)
        assert all(t == pad for t in after)
        text = vocab.decode(tokens).decode("utf-8")
        assert re.fullmatch(regex, text, re.ASCII), text
        jsonschema.validate(json.loads(text), schema)


@pytest.mark.slow
def test_the_example_runs(capsys, gemma_dir):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "generate.py"
    spec = importlib.util.spec_from_file_location("generate_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # The default model is the Gemma folder the fixture built.
    assert example.main(["--samples", "3", "--pattern", r"[0-9]{3}-[a-z]{2}"]) == 0
    out = capsys.readouterr().out
    assert "3/3 match" in out and f"model: {gemma_dir} (transformers)" in out
    schema = json.dumps(SCHEMAS["person"])
    assert example.main(["--model", "random", "--samples", "2", "--schema", schema]) == 0
    assert "2/2 match" in capsys.readouterr().out


# --- the real Gemma 3 270M model ------------------------------------------------------

@pytest.mark.slow
def test_gemma_writes_valid_json_for_every_schema(gemma_dir, tmp_path):
    """A real model (the base Gemma 3 270M, its own tokenizer): every
    generation is a complete document valid for its schema, greedy and sampled."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gemma_cases import MAX_TOKENS, PROMPTS, SCHEMAS

    tokenizer = AutoTokenizer.from_pretrained(gemma_dir)
    # bf16 as saved: half the time of float32 on this project's CPUs (which have AMX).
    model = AutoModelForCausalLM.from_pretrained(gemma_dir, dtype=torch.bfloat16).eval()
    torch.manual_seed(0)
    for name, schema in SCHEMAS.items():
        for options in ({"do_sample": False}, {"do_sample": True, "temperature": 0.8}):
            texts = generate_constrained(model, tokenizer, schema, PROMPTS[name], cache=tmp_path,
                                         max_new_tokens=MAX_TOKENS, **options)
            for text in texts:
                jsonschema.validate(json.loads(text), schema)


@pytest.mark.slow
def test_outlines_takes_the_processor_as_it_is(gemma_dir, tmp_path):
    """outlines (1.x) drives a transformers model through any transformers
    logits processor (``Generator(model, processor=...)``, which calls
    ``reset()`` before each generation): tokendfa's needs no adapter."""
    outlines = pytest.importorskip("outlines", reason="pip install outlines")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gemma_cases import PROMPTS, REGEX, REGEX_PROMPT, SCHEMAS

    tokenizer = AutoTokenizer.from_pretrained(gemma_dir)
    model = outlines.from_transformers(
        AutoModelForCausalLM.from_pretrained(gemma_dir, dtype=torch.bfloat16).eval(), tokenizer)
    phone = outlines.Generator(model, processor=TokenDFALogitsProcessor(
        index_for(REGEX, tokenizer, cache=tmp_path)))
    schema = SCHEMAS["weather"]
    weather = outlines.Generator(model, processor=TokenDFALogitsProcessor(
        index_for(schema, tokenizer, cache=tmp_path)))
    # One processor serves call after call, single prompts and batches.
    for _ in range(2):
        assert re.fullmatch(REGEX, phone(REGEX_PROMPT, max_new_tokens=20))
    for text in weather.batch(PROMPTS["weather"], max_new_tokens=60):
        jsonschema.validate(json.loads(text), schema)
    torch.manual_seed(1)
    assert re.fullmatch(REGEX, phone(REGEX_PROMPT, max_new_tokens=20, do_sample=True))


# --- closing within max_new_tokens --------------------------------------------------------

LONG = r'\{"a":"[abc ]*"(,"b":-?[0-9]+)?\}'   # a string and a number without end


class KeepWriting(LogitsProcessor):
    """Favours the string's characters and digits, as a model that goes on
    writing would: without a budget, the text runs to max_new_tokens."""

    def __call__(self, input_ids, scores):
        scores[:, [TOKEN[b"abc"], TOKEN[b"a"], TOKEN[b" "], TOKEN[b"12"], TOKEN[b"1"]]] += 20.0
        return scores


class BudgetSpy(LogitsProcessor):
    """Checks that each row's mask is its guide's, budget included."""

    def __init__(self, processor) -> None:
        self.processor = processor
        self.steps = 0

    def __call__(self, input_ids, scores):
        allowed = torch.isfinite(scores)
        for row, guide in enumerate(self.processor.guides):
            expected = sorted(guide.index.eos_token_ids) if guide.ended else guide.get_tokens().tolist()
            assert allowed[row].nonzero().flatten().tolist() == expected, (self.steps, row)
        self.steps += 1
        return scores


@pytest.mark.parametrize("budget", [9, 11, 16])
def test_rows_close_within_max_new_tokens(toy_model, budget):
    vocab = cached_vocabulary("toy")
    index = Index.from_regex(LONG, vocab)
    prompts = torch.tensor([[TOKEN[b"x"]], [TOKEN[b"a"]], [TOKEN[b"-"]]])
    rows = {}
    for closing in (False, True):
        processor = TokenDFALogitsProcessor(index, max_new_tokens=budget if closing else None)
        torch.manual_seed(5)
        out = toy_model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                 logits_processor=[KeepWriting(), processor, BudgetSpy(processor)],
                                 max_new_tokens=budget, eos_token_id=[TOY_EOS], pad_token_id=TOY_PAD)
        rows[closing] = out[:, 1:].tolist()
    assert not any(TOY_EOS in row for row in rows[False]), "the test should run out of tokens without closing"
    for row in rows[True]:
        assert TOY_EOS in row and row.index(TOY_EOS) < budget
        assert re.fullmatch(LONG, vocab.decode(row[:row.index(TOY_EOS)]).decode())


def test_generate_constrained_closes_within_max_new_tokens_or_warns(toy_model):
    vocab = cached_vocabulary("toy")
    index = Index.from_regex(LONG, vocab)
    torch.manual_seed(6)
    texts = generate_constrained(toy_model, vocab, index, ["x", "ab", "-"], do_sample=True,
                                 max_new_tokens=9, logits_processor=[KeepWriting()])
    assert all(re.fullmatch(LONG, text) for text in texts), texts
    least = index.finish_bound(index.initial_state)
    with pytest.warns(UserWarning, match=f"max_new_tokens={least - 1}"):
        TokenDFALogitsProcessor(index, max_new_tokens=least - 1)
    with pytest.raises(ValueError):
        TokenDFALogitsProcessor(index, max_new_tokens=0)
