#!/usr/bin/env python
"""MaskBench on JSONSchemaBench: time to first mask, time between masks, and passing schemas.

The methodology of JSONSchemaBench's mask benchmark (arXiv:2501.10868), on
our vocabulary and engines. For every schema of the sample and every engine,
in a child forked for that pair alone (time limit ``--timeout``, address
space limit ``--memory``):

* **TTFM** (time to first mask): wall time from the schema (a JSON value) to
  an object that has produced the first token mask: compiling the schema
  (and, for outlines-core and tokendfa, building the whole index) plus one
  mask computation. The child's CPU time and minor page faults over the
  same region are kept beside it (a line under the results table): on a
  shared machine, preemption stretches the wall time and not these.
* **TBM** (time between masks): for every token of every test instance, the
  time of one mask computation plus one commit of that token (advance),
  pooled over every token step of every instance of every schema.
* **passing**: the engine compiled the schema and judged every test instance
  right. A valid instance is accepted when every token of its tokenization
  is accepted and EOS is allowed at the end (checked untimed); an invalid one
  is rejected when some token is refused or EOS is not allowed at the end.
  A schema without test instances passes when it compiles.

An instance is its compact JSON text (``json.dumps(data, separators=(",", ":"),
ensure_ascii=False)``) tokenized with the vocabulary's own tokenizer
(``Vocabulary.encode``). Engines (``--engines``):

* ``tokendfa``: ``Index.from_schema(schema, vocab, lazy=False)`` (the eager
  build) walked by a ``Guide`` (``write_mask_into`` an int32 numpy row, ``advance``);
* ``tokendfa-lazy``: the same with ``lazy=True`` (the library's default),
  reported as n/a while the installed tokendfa has no such option;
* ``outlines-core``: ``build_regex_from_schema``, ``Index`` over our token
  bytes, ``Guide.write_mask_into`` / ``advance``;
* ``xgrammar``: ``GrammarCompiler.compile_json_schema`` (defaults; compiler
  limited to one thread, as MaskBench runs every engine single-threaded),
  ``GrammarMatcher.fill_next_token_bitmask`` / ``accept_token``;
* ``llguidance``: ``LLMatcher(tokenizer, grammar_from("json_schema", ...))``,
  ``fill_next_token_bitmask`` / ``consume_token``.

Per-vocabulary work is done once in the parent before any child forks and is
not in any TTFM: the vocabulary's tables (``Vocabulary.prepare``),
outlines-core's ``Vocabulary``, xgrammar's ``TokenizerInfo`` and
``GrammarCompiler``, llguidance's ``LLTokenizer``. Each child also builds a
small schema (an object of five typed properties; ``--warm-up boolean``:
``{"type": "boolean"}``, the earlier method) with its engine before the timed
one, so lazy imports, other once-per-process start-up and the child's first
touch of the schema path's pages are not in TTFM either (MaskBench runs many
schemas per process, which hides them the same way). Before each fork the
parent runs a full collection and freezes what is alive (``--fork-gc``), the
gc module's recipe for a process that forks without exec, so a child does not
pay, inside its timings, for the interpreter's free lists and the harness's
own objects.

    python benchmarks/bench_maskbench.py --per-source 2          # a smoke run
    python benchmarks/bench_maskbench.py                         # 8 per source, every engine
    python benchmarks/bench_maskbench.py --per-source 0          # every schema (long)

Linux only (fork, RLIMIT_AS).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from support.data import SCHEMA_DIR, SchemaRecord, compact, sample, source_names
from support.engines import LLGUIDANCE, OUTLINES, TOKENDFA, TOKENDFA_LAZY, XGRAMMAR, EngineSetup
from support.isolation import run_in_child
from support.provenance import BENCHMARKS, command_line, environment, log, now, provenance_lines
from support.report import fmt_us, pct, table, top_reasons

ENGINES = (TOKENDFA, TOKENDFA_LAZY, OUTLINES, XGRAMMAR, LLGUIDANCE)
WARM_UP_SCHEMA = {"type": "boolean"}
# What each child builds, untimed, before its timed schema (--warm-up). A
# boolean runs little of a Python engine's schema path, so a child forked per
# schema met its object, string and number code for the first time inside
# TTFM: ~1,400 copy-on-write page faults, ~5 ms of a ~6 ms first mask for a
# two-property object on tokendfa, 96 faults and ~1.8 ms after a warm-up of
# this object (MaskBench itself runs many schemas in one process, where
# these pages are the process's own long before). Every engine builds it.
WARM_UP_SCHEMAS = {
    "object": {"type": "object", "properties": {
        "name": {"type": "string"}, "count": {"type": "integer"}, "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}}, "on": {"type": "boolean"}},
        "required": ["name"]},
    "boolean": WARM_UP_SCHEMA,
}
DEFAULT_OUT = BENCHMARKS / "RESULTS.maskbench.md"
DEFAULT_PLOT = BENCHMARKS / "maskbench_ttfm.png"
# How many of an engine's wrong judgements a result keeps, for the report.
KEEP_FAILURES = 3


@dataclass(frozen=True)
class Instance:
    number: int
    valid: bool
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Task:
    record: SchemaRecord
    instances: tuple[Instance, ...]


def tokenize(record: SchemaRecord, vocab) -> Task:
    return Task(record, tuple(Instance(n, case.valid, tuple(vocab.encode(compact(case.data))))
                              for n, case in enumerate(record.tests)))


# --- in the child: one engine on one schema ---------------------------------------------

def judge(matcher, instance: Instance, eos: int, step_ns: list[int]) -> str | None:
    """Walk one instance, timing mask + commit per token into ``step_ns``.
    Returns None when the engine judged it right, else what went wrong."""
    pc = time.perf_counter_ns
    accepted, refused_at = True, None
    try:
        for position, token in enumerate(instance.tokens):
            t0 = pc()
            matcher.fill_mask()
            ok = matcher.consume(token)
            step_ns.append(pc() - t0)
            if not ok:
                accepted, refused_at = False, position
                break
        end_ok = bool(matcher.allowed()[eos]) if accepted else False
    except Exception as exc:  # noqa: BLE001 - an engine failing on an instance judged it wrong
        return f"#{instance.number}: {type(exc).__name__}: {str(exc)[:200]}"
    if accepted and not end_ok:
        accepted = False
    if accepted == instance.valid:
        return None
    if instance.valid:
        where = (f"token {refused_at} of {len(instance.tokens)} refused" if refused_at is not None
                 else "EOS not allowed at the end")
        return f"#{instance.number} valid but rejected: {where}"
    return f"#{instance.number} invalid but accepted"


def run_engine(setup: EngineSetup, engine: str, task: Task, warm_up: str = "object") -> dict[str, Any]:
    """TTFM, every TBM step and the judgements of ``engine`` on one schema,
    after building the ``warm_up`` schema untimed (see WARM_UP_SCHEMAS)."""
    warm = setup.from_schema(engine, WARM_UP_SCHEMAS[warm_up])
    warm.fill_mask()
    del warm
    faults, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time_ns()
    t0 = time.perf_counter_ns()
    try:
        matcher = setup.from_schema(engine, task.record.schema)
        matcher.fill_mask()
    except Exception as exc:  # noqa: BLE001 - any refusal is a compile error
        return {"outcome": "compile error", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    ttfm_ns = time.perf_counter_ns() - t0
    cpu = time.process_time_ns() - cpu
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    eos = setup.vocab.eos_token_id
    steps: list[int] = []
    counts = {True: [0, 0], False: [0, 0]}    # valid -> [judged right, total]
    failures = []
    for instance in task.instances:
        matcher.reset()
        wrong = judge(matcher, instance, eos, steps)
        counts[instance.valid][1] += 1
        if wrong is None:
            counts[instance.valid][0] += 1
        elif len(failures) < KEEP_FAILURES:
            failures.append(wrong)
    return {"outcome": "compiled", "ttfm_ms": ttfm_ns / 1e6, "ttfm_cpu_ms": cpu / 1e6,
            "ttfm_faults": faults, "step_ns": steps,
            "valid_accepted": counts[True][0], "valid": counts[True][1],
            "invalid_rejected": counts[False][0], "invalid": counts[False][1],
            "failures": failures}


def measure(setup: EngineSetup, engine: str, task: Task, args) -> dict[str, Any]:
    record = task.record
    row: dict[str, Any] = {"engine": engine, "source": record.source, "line": record.line,
                           "name": record.name, "instances": len(task.instances)}
    if args.fork_gc == "freeze":
        # Python's recipe for a parent that forks without exec (the gc
        # module's docs), for every engine alike: a full collection empties
        # the interpreter's free lists, whose spare tuples lie one to a page
        # of the parent's heap (a child's new tuples landed there: 1,042 of
        # 5,464 copy-on-write faults of 32 first masks), and freezing takes
        # what is alive out of the child's collections, the harness's own
        # result rows included (they triggered a gen-0 collection inside
        # TTFM in 36 of 79 tokendfa children, 5 of llguidance's, ~0.47 ms
        # each). First masks' faults, median: 173-204 -> 111-131. Each
        # collection after the first walks only what the parent made since
        # (the first takes ~0.25 s with every engine set up).
        gc.collect()
        gc.freeze()
    elif args.fork_gc == "young":
        gc.collect(0)
    result = run_in_child(lambda: run_engine(setup, engine, task, args.warm_up), args.timeout, args.memory)
    status = result.pop("status")
    result.pop("pid", None)
    result.pop("traceback", None)
    if status == "ok":
        row.update(result)
        row["passing"] = (row["outcome"] == "compiled" and row["valid_accepted"] == row["valid"]
                          and row["invalid_rejected"] == row["invalid"])
        return row
    error = result.get("error", "")
    outcome = {"timeout": "timeout", "crashed": "crashed"}.get(status, "error")
    if "MemoryError" in error or "bad_alloc" in error:
        outcome = "out of memory"
    row.update(outcome=outcome, error=error, passing=False)
    return row


def lazy_available(vocab) -> bool:
    """Whether the installed tokendfa takes ``Index.from_schema(..., lazy=True)``
    (asked in a child, so nothing it builds stays in this process)."""
    def probe() -> dict[str, Any]:
        from tokendfa import Index

        try:
            Index.from_schema(WARM_UP_SCHEMA, vocab, lazy=True)
        except TypeError as exc:
            if "lazy" in str(exc):
                return {"lazy": False}
            raise
        return {"lazy": True}

    found = run_in_child(probe, timeout=120)
    return found.get("lazy", False) if found["status"] == "ok" else False


# --- the report -------------------------------------------------------------------------

def quantile(values, q: float) -> float | None:
    return float(np.quantile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def fmt_ms(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def engine_summary(rows: list[dict]) -> dict[str, Any]:
    compiled = [r for r in rows if r["outcome"] == "compiled"]
    ttfm = [r["ttfm_ms"] for r in compiled]
    steps = np.concatenate([np.asarray(r["step_ns"], dtype=np.int64) for r in compiled]) \
        if compiled else np.zeros(0, dtype=np.int64)
    tbm_us = steps / 1000.0
    return {
        "schemas": len(rows), "passing": sum(1 for r in rows if r["passing"]),
        "compile_errors": sum(1 for r in rows if r["outcome"] == "compile error"),
        "timeouts": sum(1 for r in rows if r["outcome"] == "timeout"),
        "other_failures": sum(1 for r in rows if r["outcome"] in ("crashed", "error", "out of memory")),
        "ttfm_ms": {f"p{q}": quantile(ttfm, q / 100) for q in (50, 90, 99)},
        # the child's CPU time and minor page faults over the same region (rows of runs
        # before these were recorded have none)
        "ttfm_cpu_ms": {f"p{q}": quantile([r["ttfm_cpu_ms"] for r in compiled if "ttfm_cpu_ms" in r], q / 100)
                        for q in (50, 90)},
        "ttfm_faults_p50": quantile([r["ttfm_faults"] for r in compiled if "ttfm_faults" in r], 0.5),
        "tbm_us": {f"p{q}": quantile(tbm_us, q / 100) for q in (50, 99)},
        "tbm_mean_us": float(tbm_us.mean()) if tbm_us.size else None,
        "tokens": int(steps.size),
        "valid": [sum(r["valid_accepted"] for r in compiled), sum(r["valid"] for r in compiled)],
        "invalid": [sum(r["invalid_rejected"] for r in compiled), sum(r["invalid"] for r in compiled)],
    }


def render(rows: list[dict], meta: dict[str, Any], plot_path: Path | None, out_path: Path) -> str:
    lines = ["# MaskBench: time to first mask, time between masks, passing schemas", ""]
    lines += provenance_lines(meta, "bench_maskbench.py")
    args = meta["args"]
    lines += [
        f"- Vocabulary `{meta['vocab']}`: {meta['vocab_size']:,} ids, EOS {meta['eos']} "
        f"(EOS at the end: id {meta['eos'][0]}); per-vocabulary setup (not in TTFM): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in meta["setup_seconds"].items()),
        f"- Schemas: {meta['schemas']} from `{meta['schema_dir']}`, "
        + ("every schema of each source" if not args["per_source"] else
           f"{args['per_source']} per source, every k-th in file order (k = the source's size / "
           f"{args['per_source']}, rounded down at each pick; all of a smaller source)")
        + f", {len(meta['sources'])} sources",
        f"- Limits per schema and engine (one forked child each): {args['timeout']:g} s of wall time "
        f"for everything (compile and walks), {args['memory']:g} GiB of address space (`RLIMIT_AS`); "
        f"{args['jobs']} schema(s) at a time; each child first builds, untimed, the "
        f"`{args.get('warm_up', 'boolean')}` warm-up schema (`--warm-up`)"
        + {"freeze": "; the parent runs `gc.collect()` and `gc.freeze()` before each fork (`--fork-gc`)",
           "young": "; the parent collects its youngest generation before each fork (`--fork-gc young`)",
           }.get(args.get("fork_gc", "none"), ""),
        f"- Total run time {meta['total_seconds'] / 60:.1f} min; load average {meta['loadavg_start']} at "
        f"the start, {meta['loadavg_end']} at the end (shared machine: compare engines within one run)",
        "",
    ]
    engines = [e for e in meta["engines"]]
    head = ["engine", "schemas", "passing", "compile errors", "timeouts", "crashed / OOM / other",
            "TTFM p50 ms", "TTFM p90 ms", "TTFM p99 ms", "TBM p50 µs", "TBM p99 µs", "TBM mean µs",
            "tokens", "valid accepted", "invalid rejected"]
    body = []
    for engine in engines:
        if engine in meta["unavailable"]:
            body.append([f"`{engine}`", "n/a", *(["–"] * (len(head) - 2))])
            continue
        s = engine_summary([r for r in rows if r["engine"] == engine])
        (va, vn), (ir, inn) = s["valid"], s["invalid"]
        body.append([f"`{engine}`", s["schemas"], f"{s['passing']} ({pct(s['passing'], s['schemas'])})",
                     s["compile_errors"], s["timeouts"], s["other_failures"],
                     *(fmt_ms(s["ttfm_ms"][k]) for k in ("p50", "p90", "p99")),
                     *(fmt_us(s["tbm_us"][k]) for k in ("p50", "p99")), fmt_us(s["tbm_mean_us"]),
                     f"{s['tokens']:,}", f"{va}/{vn}", f"{ir}/{inn}"])
    lines += ["## Results", ""] + table(head, body) + [""]
    lines += [
        "*passing*: compiled, every valid instance accepted and every invalid one rejected. TTFM "
        "quantiles are over the schemas the engine compiled within the limits; TBM (one mask + one "
        "commit) over every token step of every instance of those schemas, up to and including a "
        "refused token. *valid accepted* / *invalid rejected*: instances of compiled schemas. "
        "Engines that compile fewer schemas are timed on a different (usually easier) set: read "
        "TTFM and TBM together with *passing*.",
        "",
    ]
    cpu_lines = []
    for engine in engines:
        if engine not in meta["unavailable"]:
            s = engine_summary([r for r in rows if r["engine"] == engine])
            if s["ttfm_cpu_ms"]["p50"] is not None:
                cpu_lines.append(f"`{engine}` {fmt_ms(s['ttfm_cpu_ms']['p50'])} / {fmt_ms(s['ttfm_cpu_ms']['p90'])} ms, "
                                 f"{s['ttfm_faults_p50']:.0f} faults")
    if cpu_lines:
        # Wall time stretches when the shared machine preempts a child: a child that
        # has just run its warm-up is often switched out for a few ms inside the timed
        # region (runs minutes apart, same code: tokendfa-lazy p50 1.6 to 5.3 ms, CPU p50
        # 1.5-1.7 ms throughout). CPU time and faults over the same region do not.
        lines += ["TTFM in CPU time, p50 / p90 (the child's CPU over the same region, which "
                  "preemption on a loaded machine does not stretch), and the minor page faults' "
                  "p50: " + "; ".join(cpu_lines) + ".", ""]
    if plot_path is not None:
        lines += [f"![TTFM distribution per engine]({os.path.relpath(plot_path, out_path.parent)})", ""]
    measured = [e for e in engines if e not in meta["unavailable"]]
    sources = sorted({r["source"] for r in rows})
    per_source = [[source, *(f"{sum(1 for r in rows if r['engine'] == e and r['source'] == source and r['passing'])}"
                             f"/{sum(1 for r in rows if r['engine'] == e and r['source'] == source)}"
                             for e in measured)] for source in sources]
    lines += ["## Passing schemas per source", ""] + table(["source", *measured], per_source) + [""]
    lines += ["## Why schemas did not pass (top reasons per engine)", ""]
    for engine in measured:
        mine = [r for r in rows if r["engine"] == engine and not r["passing"]]
        if not mine:
            continue
        reasons = top_reasons(
            f"{r['outcome']}: {r.get('error', '')}" if r["outcome"] != "compiled"
            else f"wrong judgement: {r['failures'][0] if r['failures'] else ''}" for r in mine)
        lines += [f"`{engine}` ({len(mine)} schemas):", ""] + reasons + [""]
    for engine in meta["unavailable"]:
        lines += [f"- `{engine}`: n/a: {meta['unavailable'][engine]}"]
    if meta["unavailable"]:
        lines.append("")
    return "\n".join(lines)


def plot(rows: list[dict], engines: list[str], path: Path) -> str | None:
    """ECDF of TTFM per engine (log x axis). Returns why there is no plot, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = 0
    for engine in engines:
        ttfm = np.sort([r["ttfm_ms"] for r in rows if r["engine"] == engine and r["outcome"] == "compiled"])
        total = sum(1 for r in rows if r["engine"] == engine)
        if not ttfm.size:
            continue
        # The curve reaches the share of schemas compiled, not 1: failures stay visible.
        ax.step(ttfm, np.arange(1, ttfm.size + 1) / total, where="post",
                label=f"{engine} ({ttfm.size}/{total} compiled)")
        drawn += 1
    if not drawn:
        plt.close(fig)
        return "no engine compiled any schema: no plot"
    ax.set_xscale("log")
    ax.set_xlabel("time to first mask (ms, log scale)")
    ax.set_ylabel("share of schemas with a first mask within x")
    ax.set_ylim(0, 1.02)
    ax.set_title("MaskBench: TTFM per engine (ECDF)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# --- main -------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma-separated, from {', '.join(ENGINES)} (default: all)")
    p.add_argument("--per-source", type=int, default=8,
                   help="schemas per source, every k-th in file order (default 8; 0: every schema)")
    p.add_argument("--sources", default="all", help="comma-separated source names (file stems), or 'all'")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="wall seconds per schema and engine, compile and walks (default 30)")
    p.add_argument("--memory", type=float, default=8.0, help="GiB of address space per child (default 8)")
    p.add_argument("--jobs", type=int, default=1,
                   help="schemas measured at once (default 1: timings matter)")
    p.add_argument("--vocab", default="qwen2.5", help="built-in vocabulary name or path (default qwen2.5)")
    p.add_argument("--schema-dir", type=Path, default=SCHEMA_DIR)
    p.add_argument("--warm-up", choices=sorted(WARM_UP_SCHEMAS), default="object",
                   help="the schema each child builds untimed before the timed one: a small object "
                        "(default) or {\"type\": \"boolean\"} (the method of runs before 2026-11-27 10:00)")
    p.add_argument("--fork-gc", choices=("freeze", "young", "none"), default="freeze",
                   help="what the parent does before each fork, for every engine: freeze = a full "
                        "collection then gc.freeze() (Python's recipe for servers that fork; default), "
                        "young = collect generation 0 only, none = nothing (the method of the tables "
                        "before 2026-11-28 16:30 UTC)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"markdown report; the raw results go next to it as .json (default {DEFAULT_OUT.name})")
    p.add_argument("--plot", type=Path, default=None,
                   help=f"TTFM plot (default {DEFAULT_PLOT.name} with the default --out, else beside --out as .png)")
    args = p.parse_args(argv)
    if args.plot is None:   # a report written elsewhere never overwrites the committed plot
        args.plot = DEFAULT_PLOT if args.out == DEFAULT_OUT else args.out.with_suffix(".png")
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        p.error(f"--engines: unknown {', '.join(sorted(unknown))}; choose from {', '.join(ENGINES)}")
    if args.per_source < 0 or args.jobs < 1 or args.timeout <= 0 or args.memory <= 0:
        p.error("--per-source must be >= 0, --jobs >= 1, --timeout and --memory > 0")
    if args.out.suffix == ".json":
        # the raw results go to the report's name with .json: the same file,
        # which would overwrite the report after a 13-minute run
        p.error(f"--out {args.out} is the markdown report; the raw results are written next to it "
                f"as .json, so give a name ending in .md (e.g. {args.out.with_suffix('.md')})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    loadavg_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    from tokendfa import Vocabulary

    sources = (source_names(args.schema_dir) if args.sources == "all"
               else [s.strip() for s in args.sources.split(",")])
    if not sources:
        log(f"no JSONSchemaBench files in {args.schema_dir} (set TOKENDFA_JSONSCHEMABENCH)")
        return 1
    log(f"loading vocabulary {args.vocab} ...")
    vocab = Vocabulary.from_spec(args.vocab)
    t0 = time.perf_counter()
    vocab.byte_matrix()
    vocab.prepare()
    setup_seconds = {"tokendfa": time.perf_counter() - t0}
    # Import the compilers now: every child runs the same, already loaded, code.
    import tokendfa.builder.fast  # noqa: F401

    unavailable: dict[str, str] = {}
    if TOKENDFA_LAZY in args.engines and not lazy_available(vocab):
        unavailable[TOKENDFA_LAZY] = "this tokendfa's `Index.from_schema` has no `lazy` option"
    if OUTLINES in args.engines:
        import outlines_core.json_schema  # noqa: F401 - imported once, before the children fork
    setup = EngineSetup.prepare(vocab, [e for e in args.engines if e in (OUTLINES, XGRAMMAR, LLGUIDANCE)],
                                xgrammar_threads=1, log=log)
    setup_seconds.update(setup.setup_seconds)
    unavailable.update({e: f"could not start: {err}" for e, err in setup.errors.items()})
    engines = [e for e in args.engines if e not in unavailable]

    tasks = [tokenize(record, vocab) for source in sources
             for record in sample(source, args.per_source or None, schema_dir=args.schema_dir)]
    log(f"{len(tasks)} schemas from {len(sources)} sources; engines {', '.join(engines)}; "
        f"{args.jobs} at a time")

    def one_schema(task: Task) -> list[dict]:
        return [measure(setup, engine, task, args) for engine in engines]

    rows: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=args.jobs) if args.jobs > 1 else None
    results = pool.map(one_schema, tasks) if pool else map(one_schema, tasks)
    for done, found in enumerate(results, 1):
        rows.extend(found)
        log(f"  [{done}/{len(tasks)}] {found[0]['source']}:{found[0]['line']}: " + ", ".join(
            f"{r['engine']} {'pass' if r['passing'] else r['outcome']}"
            + (f" {r['ttfm_ms']:.1f} ms" if r["outcome"] == "compiled" else "") for r in found))
    if pool:
        pool.shutdown()

    meta = {
        "command": command_line("bench_maskbench.py", argv), "date": now(),
        "environment": environment(("outlines-core", "xgrammar", "llguidance", "torch", "numpy")),
        "vocab": args.vocab, "vocab_size": vocab.size, "eos": [vocab.eos_token_id] + [
            e for e in vocab.eos_token_ids if e != vocab.eos_token_id],
        "setup_seconds": setup_seconds, "schema_dir": str(args.schema_dir), "sources": sources,
        "schemas": len(tasks), "engines": args.engines, "unavailable": unavailable,
        "loadavg_start": loadavg_start, "loadavg_end": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "total_seconds": time.perf_counter() - started,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    why_no_plot = plot(rows, engines, args.plot)
    if why_no_plot:
        log(why_no_plot)
    text = render(rows, meta, None if why_no_plot else args.plot, args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    raw_path = args.out.with_suffix(".json")
    raw_path.write_text(json.dumps({"meta": meta, "results": rows}))
    log(f"wrote {args.out}, {raw_path}" + ("" if why_no_plot else f" and {args.plot}"))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
