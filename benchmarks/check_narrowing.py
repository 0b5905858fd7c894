"""The schema path against ``jsonschema``, on instances mutated from real ones: silent narrowings and widenings.

For each schema of a deterministic sample of JSONSchemaBench (every k-th line
of ``../shared/data/jsonschemabench/<source>.jsonl.gz``) and of the
JSON-Schema-Test-Suite, in a child process with a time limit, the schema is
compiled strictly (``Index.from_schema``, lazy, over a vocabulary of one token
per byte, so that any text walks byte by byte). The dataset's instances, and
mutants of each (strings shortened, lengthened, recased, given other
characters; numbers moved by one, a half, a sign; members dropped, added,
retyped; arrays emptied, shortened, repeated), are labelled by ``jsonschema``
(the schema's draft, with the formats the compiler asserts checked as it
checks them) and walked:

* a **valid** value, written as the regex writes JSON (``instance_text``),
  that the index refuses is a *narrowing*, unless it is one of the
  documented forms (an integer written with a fraction, ``1.0``; a number
  written with an exponent, ``1e-07``, which bounds refuse);
* an **invalid** value, written compactly, that the index accepts is a
  *widening* (unsound).

One JSON line per finding goes to ``--out`` (schema name, kind, text); the
summary counts schemas compiled, refused, values checked and findings.

``--patterns`` checks the ``pattern`` translation alone against ECMA-262
(``regress``): every k-th distinct pattern of the bench, on the strings of
its schema's instances, random others and variants of each (a final newline,
U+2028, an accent, an emoji, upper case, ...).

    pip install --target /tmp/regress regress     # ECMA-262 patterns, optional
    python benchmarks/check_narrowing.py --every 40 --sources bench --mutants 20 --jobs 2 \
        --regress /tmp/regress --out /tmp/narrowing.jsonl
    python benchmarks/check_narrowing.py --patterns --every 8 --regress /tmp/regress

Findings (bdebc48, 2 CPUs): the bench, every 40th schema: 209 schemas, 199
compiled, 12,422 values, no narrowing, no widening; the suite's draft2020-12
groups: 257, 177 compiled, 6,898 values, none; patterns: every 8th of the
2,088 distinct ones, 111,464 strings, no difference. Without ``--regress``
jsonschema's Python reading of patterns shows dialect differences only
(``$`` before a final newline: Github_medium/o74593). What the checks and
probes around them found is refused or noted since: ``(?i)``/``(?s)``/``(?m)``
ignored, ``\\Z`` read as a letter, ``x{,3}`` read as Python's ``x{0,3}``, an
escaped surrogate pair in a pattern matching nothing, a lone surrogate in an
``enum`` dropped, narrowed formats without a note.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TOKENDFA_SHARED_DATA", ROOT.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
EXTRA_STRINGS = ["", "x", "A", "0", "é", "日本", "\u2028", "\n", " ", "a b", "\U0001F600", "-1",
                 "2024-01-01", "user@example.com", "http://a.b/c", "\t", "\\", '"']


def _schemas(every: int, sources=("bench", "suite")):
    """(name, schema, [instances]) from JSONSchemaBench and the test suite."""
    bench = DATA / "jsonschemabench"
    for path in sorted(bench.glob("*.jsonl.gz")) if "bench" in sources else ():
        with gzip.open(path, "rt") as handle:
            for i, line in enumerate(handle):
                if i % every:
                    continue
                record = json.loads(line)
                yield record["name"], record["schema"], [t["data"] for t in record.get("tests", [])]
    suite = DATA / "json-schema-test-suite"
    for draft in ("draft2020-12", "draft7") if "suite" in sources else ():
        for path in sorted((suite / draft).glob("*.json")):
            for group in json.loads(path.read_text()):
                schema = group["schema"]
                if isinstance(schema, dict) and "$schema" not in schema and draft == "draft7":
                    schema = dict(schema, **{"$schema": "http://json-schema.org/draft-07/schema#"})
                yield (f"{draft}/{path.name}/{group['description']}", schema,
                       [t["data"] for t in group["tests"]])


def _mutants(value, rng: random.Random, budget: int) -> list:
    """Values near ``value``: each mutation changes one place."""
    # each place with the function that rebuilds the whole value around a new one there
    def chain(v, wrap):
        out = [(v, wrap)]
        if isinstance(v, dict):
            for k in list(v):
                out += chain(v[k], lambda new, v=v, k=k, wrap=wrap: wrap({**v, k: new}))
        elif isinstance(v, list):
            for i, item in enumerate(v):
                out += chain(item, lambda new, v=v, i=i, wrap=wrap: wrap(v[:i] + [new] + v[i + 1:]))
        return out

    made = []
    for v, wrap in chain(value, lambda new: new):
        for new in _changes(v, rng):
            made.append(wrap(new))
    rng.shuffle(made)
    return made[:budget]


def _changes(v, rng: random.Random) -> list:
    out = [None, 0, "", [], {}, True]
    if isinstance(v, bool):
        out.append(not v)
    elif isinstance(v, (int, float)):
        for d in (1, -1, 0.5, -0.5, 2):
            out.append(v + d)
        out += [-v, v * 10, v // 2 if isinstance(v, int) else v / 2, 10 ** 12, -(10 ** 12), 0.1, 1e-7]
    elif isinstance(v, str):
        out += [v[:-1], v + "x", v + "0", v.upper(), v.lower(), v * 2, v[1:], v + " ",
                v + rng.choice(EXTRA_STRINGS), rng.choice(EXTRA_STRINGS)]
    elif isinstance(v, list):
        out += [v[:-1], v[1:], v + v[:1], v[:1] * 2, list(reversed(v))]
    elif isinstance(v, dict):
        for k in v:
            out.append({kk: vv for kk, vv in v.items() if kk != k})
        out += [{**v, "zz_extra": 1}, {**v, "": None}, {**v, "Extra Key": "x"}]
    return out


def _documented_form(v) -> bool:
    """A value holding a number whose json.dumps text is outside the form the regex
    writes: an integral float (``1.0``), or an exponent where bounds apply (``1e-07``)."""
    if isinstance(v, float):
        return not math.isfinite(v) or v == int(v) or "e" in repr(v)
    if isinstance(v, dict):
        return any(_documented_form(x) for x in v.values())
    if isinstance(v, list):
        return any(_documented_form(x) for x in v)
    return False


def _ecma_patterns(cls):
    """``cls`` with ``pattern`` read as ECMA-262 (by ``regress``, the u flag where the
    pattern allows it), when ``regress`` is importable (``--regress PATH``):
    jsonschema reads patterns with Python's re, which differs (``$`` before a final
    newline, Unicode ``\\d``, ``\\s`` without U+FEFF, ``x{,3}``)."""
    try:
        import regress
    except ImportError:
        return cls
    import functools

    import jsonschema

    @functools.lru_cache(maxsize=4096)
    def compiled(pattern):
        try:
            return regress.Regex(pattern, "u")
        except Exception:  # noqa: BLE001 - not valid with the u flag: Annex B reading
            return regress.Regex(pattern)

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string") and compiled(patrn).find(instance) is None:
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    return jsonschema.validators.extend(cls, {"pattern": pattern})


def _byte_vocabulary():
    from tokendfa import Vocabulary

    return Vocabulary([bytes([b]) for b in range(256)] + [None], eos_token_ids=256, name="bytes")


def _accepts(index, text: str) -> bool:
    state = index.initial_state
    for byte in text.encode("utf-8", "surrogatepass"):
        if not index.is_allowed(state, byte):
            return False
        state = index.advance(state, byte)
    return index.is_final(state)


def check_one(job) -> dict:
    name, schema, instances, mutants, time_limit, seed = job
    import jsonschema

    from tokendfa import Index, TokenDFAError
    from tokendfa.schema import api
    from tokendfa.schema.api import instance_text

    out = {"name": name, "findings": [], "checked": 0}
    try:
        index = Index.from_schema(schema, _byte_vocabulary(), time_limit=time_limit)
    except TokenDFAError as exc:
        out["refused"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return out
    except Exception as exc:  # noqa: BLE001 - a crash is a finding too
        out["crash"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return out
    try:
        cls = _ecma_patterns(jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))
        validator = cls(schema, format_checker=api._format_checker())
    except Exception as exc:  # noqa: BLE001
        out["refused"] = f"validator: {exc}"
        return out
    rng = random.Random(seed)
    values = list(instances)
    for instance in instances:
        values += _mutants(instance, rng, mutants)
    seen = set()
    for value in values:
        key = json.dumps(value, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        try:
            valid = validator.is_valid(value)
        except Exception:  # noqa: BLE001 - jsonschema's own trouble (a bad pattern for re)
            continue
        try:
            if valid:
                if _documented_form(value):
                    continue
                text = instance_text(schema, value)
                ok = _accepts(index, text)
                kind = "narrowing"
            else:
                text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                ok = not _accepts(index, text)
                kind = "widening"
        except TokenDFAError:
            continue
        out["checked"] += 1
        if not ok:
            out["findings"].append({"kind": kind, "text": text[:400]})
            if len(out["findings"]) >= 5:
                break
    return out


def _run(job):
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    try:
        return check_one(job)
    except Exception as exc:  # noqa: BLE001
        return {"name": job[0], "findings": [], "checked": 0, "crash": f"{type(exc).__name__}: {exc}"}


def check_patterns(every: int, seed: int = 0) -> dict:
    """Our reading of each pattern (``pattern_matches``) against ``regress``'s."""
    import regress

    from tokendfa.schema import strings as strs

    per: dict = {}
    everything: set = set()
    for _name, schema, instances in _schemas(1, ("bench",)):
        patterns: set = set()
        _patterns_of(schema, patterns)
        texts: set = set()
        for instance in instances:
            _strings_of(instance, texts)
        texts = {t for t in texts if len(t) < 300}
        everything |= texts
        for pattern in patterns:
            per.setdefault(pattern, set()).update(texts)
    pool = sorted(everything)
    rng = random.Random(seed)
    counts = {"patterns": 0, "refused": 0, "strings": 0, "differ": 0}
    for pattern in sorted(per)[::every]:
        try:
            strs.translate_pattern(pattern)
        except strs.PatternUnsupported:
            counts["refused"] += 1
            continue
        try:
            ecma = regress.Regex(pattern, "u")
        except Exception:  # noqa: BLE001 - not valid with the u flag: Annex B reading
            try:
                ecma = regress.Regex(pattern)
            except Exception:  # noqa: BLE001
                continue
        counts["patterns"] += 1
        sample = set(sorted(per[pattern])[:40]) | set(rng.sample(pool, min(15, len(pool)))) | set(EXTRA_STRINGS)
        for text in list(sample):
            sample |= {text + "\n", "\n" + text, text + "é", text.upper(), text + "\U0001F600",
                       text + "\u2028", "x" + text, text[:-1]}
        for text in sorted(sample):
            try:
                ours = strs.pattern_matches(pattern, text)
            except strs.PatternUnsupported:
                continue
            counts["strings"] += 1
            if ours != (ecma.find(text) is not None):
                counts["differ"] += 1
                print(f"{pattern!r} on {text!r}: ours {ours}", file=sys.stderr)
    return counts


def _patterns_of(node, out: set) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                out.add(value)
            if key == "patternProperties" and isinstance(value, dict):
                out.update(value)
            _patterns_of(value, out)
    elif isinstance(node, list):
        for value in node:
            _patterns_of(value, out)


def _strings_of(node, out: set) -> None:
    if isinstance(node, str):
        out.add(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            out.add(key)
            _strings_of(value, out)
    elif isinstance(node, list):
        for value in node:
            _strings_of(value, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=40, help="every k-th schema of each bench file")
    parser.add_argument("--mutants", type=int, default=40, help="mutants per instance")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=30.0, help="a child's wall clock per schema")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", default="", help="schemas whose name contains this")
    parser.add_argument("--sources", default="bench,suite", help="bench, suite or both")
    parser.add_argument("--patterns", action="store_true",
                        help="check the pattern translation alone against regress (needs --regress)")
    parser.add_argument("--out", default="narrowing.jsonl")
    parser.add_argument("--regress", default="", help="a folder holding the regress package "
                        "(pip install --target DIR regress): patterns judged as ECMA-262")
    args = parser.parse_args()
    if args.regress:
        sys.path.insert(0, args.regress)
    if args.patterns:
        print(json.dumps(check_patterns(args.every)))
        return
    jobs = [(name, schema, instances, args.mutants, args.time_limit, i)
            for i, (name, schema, instances) in enumerate(_schemas(args.every, args.sources.split(",")))
            if args.only in name]
    counts = {"schemas": len(jobs), "compiled": 0, "refused": 0, "crash": 0, "timeout": 0,
              "checked": 0, "narrowing": 0, "widening": 0}
    context = multiprocessing.get_context("fork")
    with open(args.out, "w") as report, context.Pool(args.jobs, maxtasksperchild=1) as pool:
        pending = [(job[0], pool.apply_async(_run, (job,))) for job in jobs]
        for name, future in pending:
            try:
                result = future.get(args.timeout)
            except multiprocessing.TimeoutError:
                result = {"name": name, "findings": [], "checked": 0, "timeout": True}
            for key in ("refused", "crash", "timeout"):
                if result.get(key):
                    counts[key] += 1
            if not any(result.get(k) for k in ("refused", "crash", "timeout")):
                counts["compiled"] += 1
            counts["checked"] += result["checked"]
            for finding in result["findings"]:
                counts[finding["kind"]] += 1
            if result["findings"] or result.get("crash"):
                report.write(json.dumps(result) + "\n")
                report.flush()
                print(name, result.get("crash", ""), [f["kind"] + " " + f["text"][:120] for f in result["findings"]],
                      file=sys.stderr, flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
