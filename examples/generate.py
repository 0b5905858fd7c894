"""Constrained sampling with transformers: every sample matches the pattern.

By default this builds an index for a small JSON-like pattern with the
built-in Qwen2.5 vocabulary (151,665 tokens, no download) and samples from a
tiny *randomly initialised* Llama model whose output layer is as wide as a
real model's (the vocabulary rounded up to a multiple of 128, so ids past the
vocabulary exist and must be masked). The text is meaningless, but it always
matches the pattern, and generation always ends, because the processor only
lets the model pick tokens that keep the text a prefix of a match and EOS
only on a complete one::

    python examples/generate.py                       # built-in pattern, random model
    python examples/generate.py phone.tdfa            # an index file (tokendfa build ...)
    python examples/generate.py --pattern '[0-9]{3}-[0-9]{4}' --samples 8

With a real model from a local folder (never downloaded), the vocabulary
comes from the model's own tokenizer (``Vocabulary.from_pretrained(PATH)``)
and the model from ``AutoModelForCausalLM.from_pretrained(PATH,
local_files_only=True)``; an index file given as well must have been built
for that tokenizer (``tokendfa build --vocab PATH ...``)::

    python examples/generate.py --model /models/Qwen2.5-0.5B-Instruct \\
        --prompt 'A person, as JSON: '
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import torch  # noqa: E402

from tokendfa import Index, Vocabulary  # noqa: E402
from tokendfa.integrations.transformers import (  # noqa: E402
    generate_constrained,
    max_generation_length,
)

DEFAULT_PATTERN = (r'\{"name": "[A-Z][a-z]{1,9}", "age": (0|[1-9][0-9]?|1[01][0-9]|120), '
                   r'"role": "(admin|user|guest)"\}')
UNBOUNDED_MAX_NEW_TOKENS = 64


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=("With a real local model: --model PATH loads "
                "AutoModelForCausalLM.from_pretrained(PATH, local_files_only=True) and "
                "Vocabulary.from_pretrained(PATH); without it, a random tiny Llama is used."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", nargs="?", help="an index file (default: build one for --pattern)")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="regex to build an index for when no index file is given")
    parser.add_argument("--vocab", default="qwen2.5",
                        help="vocabulary without --model: a built-in name or a path (default qwen2.5)")
    parser.add_argument("--model", metavar="PATH",
                        help="a local transformers model folder (never downloaded)")
    parser.add_argument("--prompt", default="Here is a record: ")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int,
                        help="default: the longest generation the pattern allows, "
                             f"or {UNBOUNDED_MAX_NEW_TOKENS} if it has no bound")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    started = time.perf_counter()
    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        vocab = Vocabulary.from_pretrained(args.model)
        tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    else:
        vocab = Vocabulary.from_spec(args.vocab)
        tokenizer = vocab  # prompts encoded with vocab.encode
        model = tiny_random_llama(vocab, seed=args.seed)
    model.eval()
    loaded = time.perf_counter()

    if args.index:
        index = Index.load(args.index, vocab)
    else:
        index = Index.from_regex(args.pattern, vocab)
    pattern = index.pattern
    built = time.perf_counter()

    max_new_tokens = args.max_new_tokens or max_generation_length(index) or UNBOUNDED_MAX_NEW_TOKENS
    texts = generate_constrained(
        model, tokenizer, index, [args.prompt] * args.samples,
        do_sample=True, temperature=args.temperature, max_new_tokens=max_new_tokens)
    done = time.perf_counter()

    width = model.config.get_text_config().vocab_size
    print(f"model: {args.model or f'random tiny Llama, {width:,} logits'}; "
          f"vocabulary: {vocab.name} ({len(vocab):,} tokens)")
    print(f"index: {index!r}")
    print(f"pattern: {pattern}")
    matched = 0
    for i, text in enumerate(texts):
        ok = re.fullmatch(pattern, text, re.ASCII) is not None  # the index's dialect: ASCII classes
        matched += ok
        print(f"  [{i}] {'match   ' if ok else 'NO MATCH'} {text!r}")
    print(f"{matched}/{len(texts)} match; load {loaded - started:.1f} s, index "
          f"{built - loaded:.1f} s, generate {done - built:.1f} s "
          f"(max_new_tokens={max_new_tokens})")
    return 0 if matched == len(texts) else 1


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
