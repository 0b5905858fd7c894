"""The official JSON-Schema-Test-Suite against our JSON Schema -> regex compiler.

Data: ``../shared/data/json-schema-test-suite`` (read in place, never copied),
the keyword files of ``draft2020-12/`` and ``draft7/`` and the ``remotes/``
that remote ``$ref`` point to (served to the compiler through a
``referencing`` registry under ``http://localhost:1234/``, as the suite
expects).

For every group (one schema, several instances) the compiler either claims
the schema (returns a regex) or raises ``UnsupportedSchemaError``, which
skips the group and is counted. For a claimed group, every instance must
be classified exactly as the suite says, with ``re.fullmatch`` in our dialect:

* a **valid** instance is written the way the regex writes JSON: compact,
  with object keys in the schema's declared order (``instance_text``
  reorders the parsed dict: declared properties first, in declared order,
  then the others). The suite's own texts may have any key order, which is
  the same value but another text, so this is the fair comparison;
* an **invalid** instance must be rejected as the suite wrote it (compact);
  no key order makes an invalid value valid.

Exclusions are listed below with their reason; nothing else is skipped.
The per-file counts are printed by ``test_summary`` (``pytest -s`` or the
terminal report shows them).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest

from tokendfa.analysis.errors import EmptyLanguageError, UnsupportedSchemaError
from tokendfa.schema.api import instance_text
from tokendfa.schema.api import regex_from_schema as compile_schema

# Python's re is the oracle here, on regexes written out in full, where a free value
# nesting 6 levels is a megabyte long: these tests fix the depth at 2, and
# any_depth="auto" (the default) is tested on its own.
regex_from_schema = functools.partial(compile_schema, any_depth=2)

SUITE = Path(os.environ.get("TOKENDFA_JSON_SCHEMA_TEST_SUITE",
                            Path(__file__).resolve().parents[2] / "shared/data/json-schema-test-suite"))
DRAFTS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
}

# (file name, group description, test description): why the case is not checked.
EXCLUDED = {
    ("type.json", "integer type matches integers", "a float with zero fractional part is an integer"):
        "integers are written without a fraction part: 1.0 is a valid integer whose text "
        "'1.0' we do not generate (the value 1 is accepted as '1')",
}

pytestmark = pytest.mark.skipif(not SUITE.is_dir(), reason=f"test suite not found at {SUITE}")

COUNTS: dict[str, dict[str, int]] = {}


def _registry():
    import referencing
    import referencing.jsonschema as rj

    registry = referencing.Registry()
    remotes = SUITE / "remotes"
    for path in sorted(remotes.rglob("*.json")):
        relative = path.relative_to(remotes).as_posix()
        spec = rj.DRAFT7 if relative.startswith(("draft7/", "draft6/", "draft4/")) else rj.DRAFT202012
        resource = referencing.Resource.from_contents(json.loads(path.read_text()),
                                                      default_specification=spec)
        registry = registry.with_resource(f"http://localhost:1234/{relative}", resource)
    return registry


@pytest.fixture(scope="module")
def registry():
    return _registry()


def _files():
    if not SUITE.is_dir():
        return []
    return [(draft, path.name) for draft in DRAFTS for path in sorted((SUITE / draft).glob("*.json"))]


@pytest.mark.parametrize("draft, name", _files())
def test_suite_file(registry, draft, name):
    groups = json.loads((SUITE / draft / name).read_text())
    default = DRAFTS[draft]
    counts = COUNTS.setdefault(f"{draft}/{name}", {"claimed": 0, "skipped": 0, "cases": 0,
                                                   "excluded": 0})
    failures = []
    for group in groups:
        schema = group["schema"]
        try:
            regex = re.compile(regex_from_schema(schema, registry=registry, default_draft=default).regex,
                               re.ASCII)
        except UnsupportedSchemaError:
            counts["skipped"] += 1
            continue
        except EmptyLanguageError:
            regex = None
        counts["claimed"] += 1
        for case in group["tests"]:
            if (name, group["description"], case["description"]) in EXCLUDED:
                counts["excluded"] += 1
                continue
            counts["cases"] += 1
            if case["valid"]:
                text = instance_text(schema, case["data"], registry=registry, default_draft=default)
            else:
                text = json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False)
            got = regex is not None and regex.fullmatch(text) is not None
            if got != case["valid"]:
                failures.append(f"{group['description']!r} / {case['description']!r}: {text[:120]} "
                                f"should be {'accepted' if case['valid'] else 'rejected'}")
    assert not failures, "\n".join(failures)


def test_exclusions_exist():
    """Every exclusion names a real case (so none outlives its reason silently)."""
    found = set()
    for draft in DRAFTS:
        for path in (SUITE / draft).glob("*.json"):
            for group in json.loads(path.read_text()):
                for case in group["tests"]:
                    found.add((path.name, group["description"], case["description"]))
    assert set(EXCLUDED) <= found


def test_summary(capsys):
    """Print how many groups each file had claimed and skipped (runs last in this module)."""
    if not COUNTS:
        pytest.skip("no suite file ran")
    lines = [f"{'file':45s} {'claimed':>7s} {'skipped':>7s} {'cases':>6s} {'excluded':>8s}"]
    total = {"claimed": 0, "skipped": 0, "cases": 0, "excluded": 0}
    for name, c in sorted(COUNTS.items()):
        lines.append(f"{name:45s} {c['claimed']:7d} {c['skipped']:7d} {c['cases']:6d} {c['excluded']:8d}")
        for k in total:
            total[k] += c[k]
    lines.append(f"{'total':45s} {total['claimed']:7d} {total['skipped']:7d} {total['cases']:6d} "
                 f"{total['excluded']:8d}")
    with capsys.disabled():
        print("\nJSON-Schema-Test-Suite groups claimed/skipped by the schema compiler:\n"
              + "\n".join(lines))
    assert total["claimed"] > total["skipped"]
