"""The direct schema front end (tokendfa.schema.direct) against the general path.

Every JSONSchemaBench schema (``--schema-dir``, or $TOKENDFA_JSONSCHEMABENCH)
and every schema of the JSON-Schema-Test-Suite (``--suite``) is compiled with
a lazy index's options (what ``Index.from_schema`` passes) through both
paths; the direct path must either decline (None) or give what the general
path gives: the same tree (node for node, and the same interned object),
the same definitions in the same order (computed and deferred, and equal
again once every deferred one is computed), the same notes, widenings and
dialect, and the general path must not raise where the direct one accepts.
Prints how many schemas each source has, how many the direct path takes,
and every difference (exit status 1 if any).

    .venv/bin/python benchmarks/direct_equality.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LAZY = {"max_recursion_depth": 3, "any_depth": 32, "state_budget": None, "share_free_levels": True,
        "share_counts": True, "share_values": True, "defer_recursion": True}


class _Declined(Exception):
    """The direct path declined: the general path is not run (nothing to compare)."""


def compare(schema, options=LAZY) -> tuple[bool, str]:
    """(taken by the direct path, the first difference found or "")."""
    from tokendfa.schema import direct
    from tokendfa.schema.api import regex_from_schema

    original = direct.compile_direct

    def deciding(*args, **kwargs):
        result = original(*args, **kwargs)
        if result is None:
            raise _Declined
        return result

    direct.compile_direct = deciding
    try:
        got = regex_from_schema(schema, **options)
    except _Declined:
        return False, ""
    finally:
        direct.compile_direct = original
    direct.ENABLED[0] = False
    try:
        want = regex_from_schema(schema, **options)
    except Exception as exc:  # noqa: BLE001 - the general path refuses what the direct one took
        return True, f"the general path raised {exc!r}"
    finally:
        direct.ENABLED[0] = True
    return True, difference(want, got)


def difference(want, got) -> str:
    if want.tree != got.tree:
        return "trees differ"
    if want.tree is not got.tree:
        return "trees equal but not the same interned object"
    for name in ("widenings", "notes", "draft"):
        if getattr(want, name) != getattr(got, name):
            return f"{name} differ: {getattr(want, name)!r} / {getattr(got, name)!r}"
    if (want.deferred is None) != (got.deferred is None):
        return f"deferred {want.deferred!r} / {got.deferred!r}"
    if list(want.tree_definitions.items()) != list(got.tree_definitions.items()):
        return "definitions differ (or their order)"
    if want.deferred is not None:
        keys = [key for key in list(want.tree_definitions) + list(want.deferred.compiler.pieces)]
        for key in keys:
            if want.deferred.defines(key) != got.deferred.defines(key):
                return f"defines({key!r}) differs"
        wanted_keys = list(want.deferred.compiler.pieces)
        if wanted_keys != list(got.deferred.pieces):
            return "deferred pieces differ"
        for key in wanted_keys:
            if want.deferred.matches_something(key) != got.deferred.matches_something(key):
                return f"matches_something({key!r}) differs"
        for key in list(want.tree_definitions):
            if want.deferred.matches_something(key) != got.deferred.matches_something(key):
                return f"matches_something({key!r}) differs"
        if list(want.deferred.everything().items()) != list(got.deferred.everything().items()):
            return "deferred definitions differ once computed"
    return ""


def bench_schemas(directory: Path):
    for path in sorted(directory.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                yield path.name.split(".")[0], f"{path.name.split('.')[0]}:{i}", json.loads(line)["schema"]


def suite_schemas(directory: Path):
    for draft in ("draft2020-12", "draft7"):
        for path in sorted((directory / draft).glob("*.json")):
            for i, group in enumerate(json.loads(path.read_text())):
                yield f"suite-{draft}", f"{draft}/{path.name}:{i}", group["schema"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema-dir", type=Path, default=Path(os.environ.get(
        "TOKENDFA_JSONSCHEMABENCH", ROOT.parent / "shared/data/jsonschemabench")))
    parser.add_argument("--suite", type=Path, default=Path(os.environ.get(
        "TOKENDFA_JSON_SCHEMA_TEST_SUITE", ROOT.parent / "shared/data/json-schema-test-suite")))
    parser.add_argument("--limit", type=int, default=0, help="schemas per source at most (0: all)")
    parser.add_argument("--lenient", action="store_true", help="compile with lenient=True")
    args = parser.parse_args()

    from tokendfa.schema.api import regex_from_schema

    regex_from_schema({"type": "object"}, **LAZY)   # the free values' table, as a warm process has it
    counts: dict = {}
    differences = []
    for source, name, schema in [*bench_schemas(args.schema_dir), *suite_schemas(args.suite)]:
        total, taken = counts.get(source, (0, 0))
        if args.limit and total >= args.limit:
            continue
        if not isinstance(schema, dict):
            counts[source] = (total + 1, taken)
            continue
        try:
            was_taken, diff = compare(schema, {**LAZY, "lenient": args.lenient})
        except Exception as exc:  # noqa: BLE001 - a crash of the direct path is a difference
            was_taken, diff = True, f"crash {exc!r}"
        counts[source] = (total + 1, taken + was_taken)
        if diff:
            differences.append((name, diff))
            print(f"DIFF {name}: {diff}", flush=True)
    all_total = sum(t for t, _ in counts.values())
    all_taken = sum(k for _, k in counts.values())
    for source, (total, taken) in counts.items():
        print(f"{source:28s} {taken:5d} of {total:5d} taken")
    print(f"all: {all_taken} of {all_total} taken by the direct path; {len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
