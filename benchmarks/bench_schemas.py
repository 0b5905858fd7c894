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
import gzip
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent

from isolated import run_in_child  # noqa: E402

DATA = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH", HERE.parents[1] / "shared/data/jsonschemabench"))
MEMORY_GIB = 8


def _records(source: str):
    with gzip.open(DATA / f"{source}.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh.read().split("\n"):      # not splitlines(): U+2028 may sit in a string
            line = line.strip().lstrip("\ufeff")
            if line:
                yield json.loads(line)


def sample(source: str, limit: int | None, shift: float = 0.0) -> list[dict]:
    """Every k-th record, so the sample spreads over the whole file, deterministically.

    ``shift`` (0 <= shift < 1) starts that fraction of a step later: another
    sample of the same size, disjoint from the first where the file is long.
    """
    records = list(_records(source))
    if limit is None or limit >= len(records):
        return records
    step = len(records) / limit
    return [records[int((i + shift) * step)] for i in range(limit)]


def _limit_memory(gib: int) -> None:
    import resource

    limit = gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _walk(index, vocab, text: str) -> bool:
    state = index.initial_state
    for token in vocab.encode(text):
        if not index.is_allowed(state, token):
            return False
        state = index.advance(state, token)
    return index.is_final(state)


def _texts(schema, tests):
    from tokendfa.schema.api import instance_text

    valid, invalid = [], []
    for case in tests:
        if case["valid"]:
            try:
                valid.append(instance_text(schema, case["data"]))
            except Exception:  # noqa: BLE001 - a schema we cannot read: compact text
                valid.append(json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False))
        else:
            invalid.append(json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False))
    return valid, invalid


def run_ours(record: dict, vocab, lenient: bool, timeout: float) -> dict:
    from tokendfa import Index
    from tokendfa.schema.api import regex_from_schema

    _limit_memory(MEMORY_GIB)
    start = time.perf_counter()
    result = regex_from_schema(record["schema"], lenient=lenient)
    compiled = time.perf_counter()
    index = Index.from_regex(result, vocab)  # shared pieces compiled once each
    built = time.perf_counter()
    valid, invalid = _texts(record["schema"], record["tests"])
    accepted = [_walk(index, vocab, t) for t in valid]
    rejected = [not _walk(index, vocab, t) for t in invalid]
    return {"regex_chars": result.size, "compile_s": compiled - start,
            "build_s": built - start, "states": index.num_states,
            "valid": len(valid), "valid_ok": sum(accepted), "invalid": len(invalid),
            "invalid_ok": sum(rejected), "widenings": len(result.widenings),
            "valid_failed": [t[:300] for t, ok in zip(valid, accepted) if not ok][:3]}


def run_outlines_regex(record: dict) -> dict:
    from outlines_core.json_schema import build_regex_from_schema

    _limit_memory(MEMORY_GIB)
    start = time.perf_counter()
    regex = build_regex_from_schema(json.dumps(record["schema"]))
    return {"regex": regex, "convert_s": time.perf_counter() - start}


def run_outlines_index(record: dict, regex: str, vocab, check: str) -> dict:
    import re

    _limit_memory(MEMORY_GIB)
    start = time.perf_counter()
    valid, invalid = _texts(record["schema"], record["tests"])
    if check == "re":
        compiled = re.compile(regex)
        built = time.perf_counter()
        accepted = [compiled.fullmatch(t) is not None for t in valid]
        rejected = [compiled.fullmatch(t) is None for t in invalid]
        states = None
    else:
        from tokendfa import Index

        index = Index.from_regex(regex, vocab)
        built = time.perf_counter()
        accepted = [_walk(index, vocab, t) for t in valid]
        rejected = [not _walk(index, vocab, t) for t in invalid]
        states = index.num_states
    return {"regex_chars": len(regex), "build_s": built - start, "states": states,
            "valid": len(valid), "valid_ok": sum(accepted), "invalid": len(invalid),
            "invalid_ok": sum(rejected)}


def measure(source: str, record: dict, vocab, args) -> list[dict]:
    rows = []
    base = {"source": source, "name": record.get("name", "")}
    if "ours" in args.engines:
        for mode in args.modes:
            row = run_in_child(lambda: run_ours(record, vocab, mode == "lenient", args.timeout),
                               timeout=args.timeout + args.walk_timeout)
            if row["status"] == "ok" and row["build_s"] > args.timeout:
                row = {"status": "timeout", "error": f"build took {row['build_s']:.1f} s"}
            rows.append({**base, "engine": _ours(mode), "mode": mode, **row})
    if "outlines" in args.engines:
        converted = run_in_child(lambda: run_outlines_regex(record), timeout=args.timeout)
        row = {**base, "engine": "outlines-core", "regex_status": converted["status"]}
        if converted["status"] != "ok":
            row.update(status="no regex", error=converted.get("error", ""))
        else:
            regex = converted["regex"]
            checked = run_in_child(lambda: run_outlines_index(record, regex, vocab, args.outlines_check),
                                   timeout=args.timeout + args.walk_timeout)
            if checked["status"] == "ok" and checked["build_s"] > args.timeout:
                checked = {"status": "timeout", "error": f"build took {checked['build_s']:.1f} s"}
            row.update(checked)
        rows.append(row)
    return rows


def _ours(mode: str) -> str:
    """The engine name of our rows: ``ours`` in strict mode (as in older raw files)."""
    return "ours" if mode == "strict" else f"ours-{mode}"


def _pct(part: int, whole: int) -> str:
    return "–" if whole == 0 else f"{100.0 * part / whole:.1f}%"


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
    sources = sorted({r["source"] for r in mine})
    head = ("| source | schemas | regex % | compiled % | valid accepted | invalid rejected "
            "| median build s |" if not engine.startswith("ours") else
            "| source | schemas | compiled % | valid accepted | invalid rejected | median build s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    totals = {"n": 0, "regex": 0, "ok": 0, "v": 0, "vo": 0, "i": 0, "io": 0, "times": []}
    for source in sources + ["**all**"]:
        group = mine if source == "**all**" else [r for r in mine if r["source"] == source]
        ok = [r for r in group if r.get("status") == "ok"]
        n, v, vo = len(group), sum(r["valid"] for r in ok), sum(r["valid_ok"] for r in ok)
        i, io = sum(r["invalid"] for r in ok), sum(r["invalid_ok"] for r in ok)
        times = [r["build_s"] for r in ok]
        median = f"{statistics.median(times):.2f}" if times else "–"
        cells = [source, str(n)]
        if not engine.startswith("ours"):
            cells.append(_pct(sum(1 for r in group if r.get("regex_status") == "ok"), n))
        cells += [_pct(len(ok), n), f"{_pct(vo, v)} ({vo}/{v})", f"{_pct(io, i)} ({io}/{i})", median]
        lines.append("| " + " | ".join(cells) + " |")
    sampled = [r["source"] for r in mine]
    if sizes and any(sampled.count(source) < sizes[source] for source in set(sampled)):
        full = sum(sizes[source] for source in set(sampled))
        cells = [f"**whole set, estimated** (each source's rate × its {full:,} schemas)", "–"]
        if not engine.startswith("ours"):
            cells.append("–")
        cells += [weighted_compiled(rows, engine, sizes), "–", "–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def failure_summary(rows: list[dict], engine: str, top: int = 15) -> list[str]:
    import collections
    import re

    reasons = collections.Counter()
    for r in rows:
        if r["engine"] == engine and r.get("status") != "ok":
            message = r.get("error", r.get("status", ""))
            message = re.sub(r" at /\S*", " at …", message)
            message = re.sub(r"'[^']{30,}'", "'…'", message)
            reasons[f"{r.get('status')}: {message[:140]}"] += 1
    return [f"- {count} × {reason}" for reason, count in reasons.most_common(top)]


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
    parser.add_argument("--out", default=str(HERE / "RESULTS.schemas.md"))
    parser.add_argument("--raw", default=None, help="also write one JSON line per measurement here")
    args = parser.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",")]
    args.modes = ["lenient"] if args.lenient else [m.strip() for m in args.modes.split(",")]
    if not set(args.modes) <= {"strict", "lenient"}:
        parser.error(f"--modes: strict and/or lenient, not {args.modes}")

    from tokendfa import Vocabulary

    sources = sorted(p.name[:-len(".jsonl.gz")] for p in DATA.glob("*.jsonl.gz")) \
        if args.sources == "all" else [s.strip() for s in args.sources.split(",")]
    vocab = Vocabulary.builtin(args.vocab)
    # every table a build reads, computed before forking so that children share
    # it (copy-on-write) instead of each redoing it inside its timed build
    vocab.byte_matrix()
    vocab.prepare()
    # import the compilers before forking: every child runs the same code
    import tokendfa.build.fast  # noqa: F401
    import tokendfa.schema.api  # noqa: F401
    import tokendfa.schema.compiler  # noqa: F401
    if "outlines" in args.engines:
        import outlines_core.json_schema  # noqa: F401
    sizes = {source: sum(1 for _ in _records(source)) for source in sources}
    if not 0 <= args.sample_shift < 1:
        parser.error(f"--sample-shift: a fraction 0 <= x < 1, not {args.sample_shift}")
    work = [(source, record) for source in sources
            for record in sample(source, args.limit_per_source, args.sample_shift)]
    print(f"{len(work)} schemas from {len(sources)} sources, {args.jobs} at a time", flush=True)
    rows: list[dict] = []
    started = time.time()
    raw = open(args.raw, "w") if args.raw else None
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(measure, source, record, vocab, args) for source, record in work]
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
    command = "python benchmarks/bench_schemas.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = [
        "# JSONSchemaBench coverage",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d')} "
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}), "
        f"vocabulary `{args.vocab}`, per-schema limit {args.timeout:g} s for compile + build, "
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
            out += ["Side by side (compiled %):", "", "| source | " + " | ".join(args.modes) + " |",
                    "|---|" + "---|" * len(args.modes)]
            for source in sorted({r["source"] for r in rows}) + ["**all**"]:
                cells = []
                for mode in args.modes:
                    group = [r for r in rows if r["engine"] == _ours(mode)
                             and (source == "**all**" or r["source"] == source)]
                    cells.append(_pct(sum(1 for r in group if r.get("status") == "ok"), len(group)))
                out.append(f"| {source} | " + " | ".join(cells) + " |")
            out.append("")
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
