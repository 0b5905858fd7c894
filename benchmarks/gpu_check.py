"""Checks that need a GPU: constrained generation with a real model on CUDA,
and the masks written into CUDA logits checked token for token.

CI has no GPU, so these run by hand on a machine with one (an NVIDIA card,
torch with CUDA, transformers; ``gguf`` and ``accelerate`` to read the model):

    python benchmarks/gpu_check.py --gguf PATH/gemma-3-270m-q4_k_m.gguf   # or --model FOLDER
    TOKENDFA_TEST_DEVICE=cuda python -m pytest -q tests/test_vllm_processor.py tests/test_vllm_runners.py

The second line runs the vLLM processors' tests (V1 and the Model Runner
V2's interface with speculative decoding) with CUDA tensors and pinned
buffers; it needs vLLM's Python package importable, not a running engine.

This script, on Gemma 3 270M (bf16, on the GPU), for the 4 JSON Schemas x 4
prompts of ``bench_vllm.py``:

* generates each schema's 4 prompts as one batch, greedy, through
  transformers' ``generate`` with tokendfa's logits processor, which closes
  each text within ``--max-new-tokens`` (``--no-closing``: it does not), and
  checks each text: ended by EOS, valid JSON, valid for its schema (jsonschema);
* generates the same batches without a constraint, for the time ratio;
* replays every generated sequence through a fresh processor with random
  logits on the GPU and checks, at every step, that the finite logits are
  exactly the tokens of a :class:`~tokendfa.Guide` with the same budget,
  computed on the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))

from bench_vllm import PROMPTS, SCHEMAS  # noqa: E402
from support.provenance import command_line, log, now  # noqa: E402

from tokendfa import Guide, Index, Vocabulary  # noqa: E402
from tokendfa.integrations.transformers import TokenDFALogitsProcessor  # noqa: E402


def model_folder(args) -> Path:
    if args.model:
        return Path(args.model)
    from gemma_model import _convert

    out = Path(tempfile.mkdtemp(prefix="gemma-hf-"))
    started = time.perf_counter()
    _convert(Path(args.gguf), out)
    log(f"converted {args.gguf} in {time.perf_counter() - started:.1f} s")
    return out


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def generate(model, input_ids, attention_mask, eos, max_new_tokens, processor=None):
    from transformers import LogitsProcessorList

    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                  pad_token_id=eos[0])
    if processor is not None:
        kwargs["logits_processor"] = LogitsProcessorList([processor])
    sync(input_ids.device.type)
    started = time.perf_counter()
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    sync(input_ids.device.type)
    return out[:, input_ids.shape[1]:].tolist(), time.perf_counter() - started


def replay(index: Index, sequences: list[list[int]], width: int, eos: set[int],
           device: str, budget: int | None) -> int:
    """Every step of every sequence: the processor's finite logits on the GPU
    equal the allowed tokens of a CPU guide with the same budget (the
    index's own tokens without one). Returns the steps checked."""
    checked = 0
    generator = torch.Generator(device=device).manual_seed(0)
    # the processor serves plain masks, with a warning, to a pattern that may not close within the budget
    closes = budget is not None and index.finish_bound(index.initial_state, budget) <= budget
    for sequence in sequences:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            processor = TokenDFALogitsProcessor(index, max_new_tokens=budget)
        guide = Guide(index, max_tokens=budget if closes else None)
        prompt = torch.zeros((1, 1), dtype=torch.long, device=device)
        for step in range(len(sequence) + 1):
            ids = torch.cat([prompt, torch.tensor([sequence[:step]], dtype=torch.long,
                                                  device=device)], dim=1)
            scores = torch.randn((1, width), generator=generator, device=device)
            masked = processor(ids, scores)
            allowed = torch.isfinite(masked[0]).nonzero().flatten().tolist()
            expected = guide.get_tokens().tolist()
            if allowed != expected:
                raise AssertionError(f"step {step}: {len(allowed)} finite logits, "
                                     f"{len(expected)} allowed tokens")
            checked += 1
            if step == len(sequence) or sequence[step] in eos:
                break
            guide.advance(sequence[step])
    return checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gguf", help="Gemma 3 270M's GGUF file (converted to bf16 first)")
    source.add_argument("--model", help="a transformers folder")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, help="write the report here (markdown)")
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu for a smoke run")
    parser.add_argument("--no-closing", action="store_true",
                        help="do not pass max_new_tokens to the processor (texts may be cut off)")
    args = parser.parse_args(argv)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device", file=sys.stderr)
        return 2
    import jsonschema
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_folder(args)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to(device).eval()
    started = time.perf_counter()
    vocab = Vocabulary.from_pretrained(str(folder))
    vocab.prepare()
    log(f"vocabulary: {vocab.size} tokens in {time.perf_counter() - started:.2f} s")
    width = model.config.vocab_size
    budget = None if args.no_closing else args.max_new_tokens
    lines = [f"# GPU check ({now()})", "", f"`{command_line('gpu_check.py', argv)}`", "",
             f"- device: {torch.cuda.get_device_name() if device == 'cuda' else device}, "
             f"torch {torch.__version__}",
             f"- model: Gemma 3 270M bf16, {width} logits, greedy, "
             f"max_new_tokens {args.max_new_tokens}, "
             f"{'no closing' if budget is None else 'the processor closes within it'}", "",
             "| schema | texts valid (EOS, JSON, schema) | constrained s | unconstrained s "
             "| steps replayed, masks equal |", "|---|---|---|---|---|"]
    total_valid = total = replayed = 0
    totals = [0.0, 0.0]
    for name, schema in SCHEMAS.items():
        index = Index.from_schema(schema, vocab)
        eos = list(index.eos_token_ids)
        prompts = PROMPTS[name]
        encoded = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
        input_ids = encoded["input_ids"].to(device)
        attention_mask = encoded["attention_mask"].to(device)
        generate(model, input_ids, attention_mask, eos, 4)   # warm-up (kernels, caches)
        sequences, constrained = generate(model, input_ids, attention_mask, eos,
                                          args.max_new_tokens,
                                          TokenDFALogitsProcessor(index, max_new_tokens=budget))
        unconstrained, free = generate(model, input_ids, attention_mask, eos, args.max_new_tokens)
        valid = 0
        for row in sequences:
            end = next((i for i, t in enumerate(row) if t in eos), None)
            if end is None:
                log(f"{name}: cut at {len(row)} tokens: {vocab.decode(row)[:80]!r}")
                continue
            text = vocab.decode(row[:end]).decode("utf-8")
            try:
                jsonschema.validate(json.loads(text), schema)
                valid += 1
            except (ValueError, jsonschema.ValidationError) as error:
                log(f"{name}: invalid {text!r}: {error}")
        trimmed = [row[:next((i + 1 for i, t in enumerate(row) if t in eos), len(row))]
                   for row in sequences]
        steps = replay(index, trimmed, width, set(eos), device, budget)
        counts = [sum(len(r) for r in trimmed),
                  sum(next((i + 1 for i, t in enumerate(r) if t in eos), len(r))
                      for r in unconstrained)]
        total_valid, total, replayed = total_valid + valid, total + len(sequences), replayed + steps
        totals[0] += constrained
        totals[1] += free
        lines.append(f"| {name} | {valid}/{len(sequences)} | {constrained:.2f} ({counts[0]} tokens) "
                     f"| {free:.2f} ({counts[1]} tokens) | {steps} |")
        log(lines[-1])
    lines += [f"| all | {total_valid}/{total} | {totals[0]:.2f} | {totals[1]:.2f} "
              f"| {replayed} |", ""]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    return 0 if total_valid == total else 1


if __name__ == "__main__":
    sys.exit(main())
