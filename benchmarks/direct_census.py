"""Why the direct schema front end (tokendfa.schema.direct) declines: a census.

For each schema the direct path declines, the reason: the keywords the key walk
(``_scan``) refuses (every one in the schema, counted once a schema), or, past
the walk, the line of ``direct.py`` whose ``_Decline`` (or other exception)
ended the compilation. ``--per-source N`` reads MaskBench's sample
(``benchmarks.support.data.sample``, what ``ttfm_fork.py --per-source N``
compiles); ``--per-source 0`` every JSONSchemaBench schema.

    .venv/bin/python benchmarks/direct_census.py --per-source 4
"""

from __future__ import annotations

import argparse
import collections
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.direct_equality import LAZY
from benchmarks.support.data import records, sample, source_names


_NAMED = ("properties", "patternProperties", "definitions", "$defs", "dependencies",
          "dependentSchemas")
_LISTED = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_ONE = ("items", "additionalProperties", "additionalItems", "not", "if", "then", "else",
        "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties")


def scan_keys(schema) -> set:
    """The reserved keys ``_scan`` refuses anywhere in ``schema`` (walking on past them)."""
    from tokendfa.schema import direct

    found: set = set()
    stack = [schema]
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    draft4 = isinstance(declared, str) and direct.DIALECTS.get(declared, (0,))[0] == 4
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in direct._RESERVED and (key not in direct._SCANNED
                                            or value is None and key not in direct._NULL_TAKEN):
                if not (key == "id" and node is schema and draft4 and value is not None):
                    found.add(key if value is not None else f"{key}=null")   # (draft 4's root id: read)
            if key in _NAMED and isinstance(value, dict):
                stack.extend(value.values())
            elif key in _LISTED and isinstance(value, list):
                stack.extend(value)
            elif key in _ONE:
                stack.append(value)
    return found


def reason(schema) -> str | None:
    """None where the direct path takes ``schema``; else why it declines."""
    from tokendfa.schema import direct
    from tokendfa.schema.api import regex_from_schema

    if not isinstance(schema, dict):
        return "not a dict"
    keys = scan_keys(schema)
    if keys:
        return "keys: " + ",".join(sorted(keys))
    caught: list = []
    original_value, original = direct._value, direct.compile_direct

    def watched(st, *args, **kwargs):
        try:
            return original_value(st, *args, **kwargs)
        except Exception as exc:
            if not caught:
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                caught.append(f"{type(exc).__name__} at direct.py:{frame.lineno} "
                              f"{frame.line.strip()[:60]} in {frame.name}")
            raise

    results: list = []

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        results.append(result)
        return result

    direct._value, direct.compile_direct = watched, recording
    try:
        regex_from_schema(schema, **LAZY)
    except Exception as exc:  # noqa: BLE001
        return f"general path raised {type(exc).__name__}"
    finally:
        direct._value, direct.compile_direct = original_value, original
    if results and results[0] is not None:
        return None
    if not results:
        return "not asked (before the direct path)"
    return caught[0] if caught else ("declined before or after the trees (the walk's size or nesting, "
                                     "the dialect or id, definitions unused, the size)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-source", type=int, default=4, help="0: every schema")
    parser.add_argument("--list", action="store_true", help="print each declined schema's reason")
    args = parser.parse_args()

    from tokendfa.schema.api import regex_from_schema

    regex_from_schema({"type": "object"}, **LAZY)
    by_key: collections.Counter = collections.Counter()
    by_reason: collections.Counter = collections.Counter()
    total = taken = 0
    for source in source_names():
        chosen = sample(source, args.per_source) if args.per_source else list(records(source))
        for record in chosen:
            total += 1
            why = reason(record.schema)
            if why is None:
                taken += 1
                continue
            by_reason[why] += 1
            if why.startswith("keys: "):
                for key in why[6:].split(","):
                    by_key[key] += 1
            if args.list:
                print(f"{record.label}  {why}")
    print(f"{taken} of {total} taken")
    print("keywords the key walk refuses (schemas with each):")
    for key, count in by_key.most_common(30):
        print(f"  {count:5d}  {key}")
    print("reasons (first 30):")
    for why, count in by_reason.most_common(30):
        print(f"  {count:5d}  {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
