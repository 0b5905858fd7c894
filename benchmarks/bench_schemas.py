"""JSONSchemaBench coverage: which real schemas become an index, and is the index right?

For each schema of a deterministic sample per source (every k-th line of
``../shared/data/jsonschemabench/<source>.jsonl.gz``), in a forked child
with a hard time limit (``--timeout``, 60 s by default: compile + build;
instances are walked after that and get ``--walk-timeout`` more):

* **ours**: ``regex_from_schema`` in each mode of ``--modes`` (``strict``
  by default; ``--modes strict,lenient`` measures both, side by side;
  ``--lenient`` is ``--modes lenient``),
  ``Index.from_regex`` on the vocabulary, then every instance is walked
  token by token (``vocab.encode`` of its text; ``is_allowed``/``advance``;
  ``is_final`` at the end). A valid instance is written as our regex writes
  JSON (``instance_text``: compact, keys in declared order); an invalid one
  as the dataset has it (compact). An invalid instance counts as rejected
  when some token is not allowed or the end is not final.
* **outlines-core**: its ``build_regex_from_schema`` (does it produce a
  regex?), then *our* index built from *its* regex (same time limit), walked
  with the same texts (its regex also writes declared order; its optional
  whitespace accepts compact text). With ``--outlines-check re`` the regex
  is checked with Python ``re.fullmatch`` instead of an index (faster; the
  table says which).

Output: a markdown table per engine and source (schemas, compiled %, valid
accepted %, invalid rejected %, median build time) written to ``--out``
together with the command that produced it, and, with ``--raw``, one JSON
line per schema and engine (with the error of each failure).

    python benchmarks/bench_schemas.py --limit-per-source 20 --jobs 2 \
        --modes strict,lenient --outlines-check re

Every table a build reads from the vocabulary (byte matrix, column layout,
sorted spellings, the tokenizer) is computed *before* the children fork, so
a child's build time is the build alone, as in a server that called
``Vocabulary.prepare()`` at start-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.data import SCHEMA_DIR, SchemaRecord, compact, records, sample, source_names
from support.engines import walk_index
from support.isolation import run_in_child
from support.provenance import BENCHMARKS, command_line, environment, now, provenance_lines
from support.report import pct, table as md_table, top_reasons

MEMORY_GIB = 8


def _accepts(index, vocab, text: str) -> bool:
    return walk_index(index, vocab.encode(text)) is None


def _texts(record: SchemaRecord) -> tuple[list[str], list[str]]:
    from tokendfa.schema.api import instance_text

    valid = []
    for data in record.instances(valid=True):
        try:
            valid.append(instance_text(record.schema, data))
        except Exception:  # noqa: BLE001 - a schema we cannot read: compact text
            valid.append(compact(data))
    return valid, [compact(data) for data in record.instances(valid=False)]


def run_ours(record: SchemaRecord, vocab, lenient: bool) -> dict:
    from tokendfa import Index
    from tokendfa.schema.api import regex_from_schema

    start = time.perf_counter()
    result = regex_from_schema(record.schema, lenient=lenient)
    compiled = time.perf_counter()
    index = Index.from_regex(result, vocab, lazy=False)  # shared pieces compiled once each
    built = time.perf_counter()
    valid, invalid = _texts(record)
    accepted = [_accepts(index, vocab, t) for t in valid]
    rejected = [not _accepts(index, vocab, t) for t in invalid]
    return {"regex_chars": result.size, "compile_s": compiled - start,
            "build_s": built - start, "states": index.num_states,
            "valid": len(valid), "valid_ok": sum(accepted), "invalid": len(invalid),
            "invalid_ok": sum(rejected), "widenings": len(result.widenings),
            "valid_failed": [t[:300] for t, ok in zip(valid, accepted) if not ok][:3]}


def run_outlines_index(record: SchemaRecord, regex: str, vocab, check: str) -> dict:
    import re

    start = time.perf_counter()
    valid, invalid = _texts(record)
    if check == "re":
        compiled = re.compile(regex)
        built = time.perf_counter()
        accepted = [compiled.fullmatch(t) is not None for t in valid]
        rejected = [compiled.fullmatch(t) is None for t in invalid]
        states = None
    else:
        from tokendfa import Index

        index = Index.from_regex(regex, vocab, lazy=False)
        built = time.perf_counter()
        accepted = [_accepts(index, vocab, t) for t in valid]
        rejected = [not _accepts(index, vocab, t) for t in invalid]
        states = index.num_states
    return {"regex_chars": len(regex), "build_s": built - start, "states": states,
            "valid": len(valid), "valid_ok": sum(accepted), "invalid": len(invalid),
            "invalid_ok": sum(rejected)}


def _within(row: dict, timeout: float) -> dict:
    """A build that finished, but after the limit (walking had extra time), is a timeout."""
    if row["status"] == "ok" and row["build_s"] > timeout:
        return {"status": "timeout", "error": f"build took {row['build_s']:.1f} s"}
    return row


def measure(record: SchemaRecord, vocab, args) -> list[dict]:
    from support.data import outlines_regex

    rows = []
    base = {"source": record.source, "name": record.name}
    limit = args.timeout + args.walk_timeout
    if "ours" in args.engines:
        for mode in args.modes:
            row = run_in_child(lambda: run_ours(record, vocab, mode == "lenient"), limit, MEMORY_GIB)
            rows.append({**base, "engine": _ours(mode), "mode": mode, **_within(row, args.timeout)})
    if "outlines" in args.engines:
        converted = outlines_regex(record.schema, args.timeout, MEMORY_GIB)
        row = {**base, "engine": "outlines-core", "regex_status": converted["status"]}
        if converted["status"] != "ok":
            row.update(status="no regex", error=converted.get("error", ""))
        else:
            regex = converted["regex"]
            checked = run_in_child(lambda: run_outlines_index(record, regex, vocab, args.outlines_check),
                                   limit, MEMORY_GIB)
            row.update(_within(checked, args.timeout))
        rows.append(row)
    return rows


def _ours(mode: str) -> str:
    """The engine name of our rows: ``ours`` in strict mode (as in older raw files)."""
    return "ours" if mode == "strict" else f"ours-{mode}"


def weighted_compiled(rows: list[dict], engine: str, sizes: dict[str, int]) -> str:
    """The compiled share each source's sample shows, weighted by the
    source's full size: an estimate for the whole set, where the plain total
    over a per-source sample over-weights the small sources."""
    mine = [r for r in rows if r["engine"] == engine]
    total = weighted = 0.0
    for source in {r["source"] for r in mine}:
        group = [r for r in mine if r["source"] == source]
        rate = sum(1 for r in group if r.get("status") == "ok") / len(group)
        weighted += rate * sizes[source]
        total += sizes[source]
    return "–" if not total else f"{100.0 * weighted / total:.1f}%"


def table(rows: list[dict], engine: str, sizes: dict[str, int] | None = None) -> list[str]:
    mine = [r for r in rows if r["engine"] == engine]
    with_regex = not engine.startswith("ours")
    head = ["source", "schemas", *(["regex %"] if with_regex else []), "compiled %", "valid accepted",
            "invalid rejected", "median build s"]
    body = []
    for source in sorted({r["source"] for r in mine}) + ["**all**"]:
        group = mine if source == "**all**" else [r for r in mine if r["source"] == source]
        ok = [r for r in group if r.get("status") == "ok"]
        n, v, vo = len(group), sum(r["valid"] for r in ok), sum(r["valid_ok"] for r in ok)
        i, io = sum(r["invalid"] for r in ok), sum(r["invalid_ok"] for r in ok)
        times = [r["build_s"] for r in ok]
        cells = [source, str(n)]
        if with_regex:
            cells.append(pct(sum(1 for r in group if r.get("regex_status") == "ok"), n))
        cells += [pct(len(ok), n), f"{pct(vo, v)} ({vo}/{v})", f"{pct(io, i)} ({io}/{i})",
                  f"{statistics.median(times):.2f}" if times else "–"]
        body.append(cells)
    sampled = [r["source"] for r in mine]
    if sizes and any(sampled.count(source) < sizes[source] for source in set(sampled)):
        full = sum(sizes[source] for source in set(sampled))
        body.append([f"**whole set, estimated** (each source's rate × its {full:,} schemas)", "–",
                     *(["–"] if with_regex else []), weighted_compiled(rows, engine, sizes), "–", "–", "–"])
    return md_table(head, body, align="l")


def failure_summary(rows: list[dict], engine: str) -> list[str]:
    return top_reasons(f"{r.get('status')}: {r.get('error', r.get('status', ''))}"
                       for r in rows if r["engine"] == engine and r.get("status") != "ok")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", default="all",
                        help="comma-separated source names (file stems), or 'all'")
    parser.add_argument("--limit-per-source", type=int, default=None,
                        help="a deterministic sample of N schemas per source (default: all)")
    parser.add_argument("--sample-shift", type=float, default=0.0,
                        help="start each source's sample this fraction of a step later (0 <= x < 1): "
                             "another deterministic sample")
    parser.add_argument("--jobs", type=int, default=1, help="schemas measured at once")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per compile + build")
    parser.add_argument("--walk-timeout", type=float, default=60.0,
                        help="extra seconds per schema for walking the instances")
    parser.add_argument("--engines", default="ours,outlines", help="ours, outlines, or both")
    parser.add_argument("--outlines-check", choices=("index", "re"), default="index",
                        help="check outlines-core's regex with our index (default) or with re")
    parser.add_argument("--modes", default="strict",
                        help="our compile modes, comma-separated: strict, lenient, or both")
    parser.add_argument("--lenient", action="store_true", help="the same as --modes lenient")
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--out", default=str(BENCHMARKS / "RESULTS.schemas.md"))
    parser.add_argument("--raw", default=None, help="also write one JSON line per measurement here")
    args = parser.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",")]
    args.modes = ["lenient"] if args.lenient else [m.strip() for m in args.modes.split(",")]
    if not set(args.modes) <= {"strict", "lenient"}:
        parser.error(f"--modes: strict and/or lenient, not {args.modes}")

    from tokendfa import Vocabulary

    sources = source_names() if args.sources == "all" else [s.strip() for s in args.sources.split(",")]
    vocab = Vocabulary.from_spec(args.vocab)
    # every table a build reads, computed before forking so that children share
    # it (copy-on-write) instead of each redoing it inside its timed build
    vocab.byte_matrix()
    vocab.prepare()
    # import the compilers before forking: every child runs the same code
    import tokendfa.builder.fast  # noqa: F401
    import tokendfa.schema.api  # noqa: F401
    import tokendfa.schema.compiler  # noqa: F401
    if "outlines" in args.engines:
        import outlines_core.json_schema  # noqa: F401
    sizes = {source: sum(1 for _ in records(source)) for source in sources}
    if not 0 <= args.sample_shift < 1:
        parser.error(f"--sample-shift: a fraction 0 <= x < 1, not {args.sample_shift}")
    work = [record for source in sources for record in sample(source, args.limit_per_source, args.sample_shift)]
    print(f"{len(work)} schemas from {len(sources)} sources, {args.jobs} at a time", flush=True)
    rows: list[dict] = []
    started = time.time()
    raw = open(args.raw, "w") if args.raw else None
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(measure, record, vocab, args) for record in work]
        for done, future in enumerate(futures, 1):
            for row in future.result():
                rows.append(row)
                if raw:
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
            if done % 20 == 0 or done == len(work):
                print(f"  {done}/{len(work)} schemas, {time.time() - started:.0f} s", flush=True)
    if raw:
        raw.close()
    meta = {"command": command_line("bench_schemas.py", argv), "date": now(),
            "environment": environment(("outlines-core", "numpy"))}
    out = [
        "# JSONSchemaBench coverage",
        "",
        *provenance_lines(meta, "bench_schemas.py"),
        "",
        f"Vocabulary `{args.vocab}`, schemas from `{SCHEMA_DIR}`, per-schema limit {args.timeout:g} s for compile + build, "
        f"{len(work)} schemas ({'all' if args.limit_per_source is None else f'every k-th, {args.limit_per_source} per source'}"
        f"{f', shifted {args.sample_shift:g} of a step' if args.sample_shift else ''}), "
        f"{' and '.join(args.modes)} mode for ours.",
        "",
        "*compiled*: a regex and an index within the limit. *valid accepted*: valid instances of "
        "compiled schemas whose tokens (text: compact, keys in declared order) walk to a final "
        "state. *invalid rejected*: invalid instances (compact, as given) that hit a refused token "
        "or end in a non-final state. Build time includes compiling the schema.",
        "",
    ]
    if "ours" in args.engines:
        for mode in args.modes:
            out += [f"## tokendfa (`regex_from_schema`, {mode} mode, + `Index.from_regex`)", ""]
            out += table(rows, _ours(mode), sizes)
            out += ["", "Why schemas did not compile (top reasons):", ""]
            out += failure_summary(rows, _ours(mode))
            out.append("")
        if len(args.modes) > 1:
            side = []
            for source in sorted({r["source"] for r in rows}) + ["**all**"]:
                cells = [source]
                for mode in args.modes:
                    group = [r for r in rows if r["engine"] == _ours(mode)
                             and (source == "**all**" or r["source"] == source)]
                    cells.append(pct(sum(1 for r in group if r.get("status") == "ok"), len(group)))
                side.append(cells)
            out += ["Side by side (compiled %):", "", *md_table(["source", *args.modes], side), ""]
    if "outlines" in args.engines:
        how = ("our index built from its regex" if args.outlines_check == "index"
               else "its regex checked with Python re.fullmatch (no index built)")
        out += [f"## outlines-core 0.2.14 `build_regex_from_schema` ({how})", ""]
        out += table(rows, "outlines-core", sizes)
        out += ["", "Why schemas did not compile (top reasons):", ""] + failure_summary(rows, "outlines-core")
        out.append("")
    Path(args.out).write_text("\n".join(out) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
