"""The benchmark workloads: named regexes, and real JSON schemas turned into regexes.

Both engines are always given the very same regex string. The JSON-schema
regexes come from outlines-core's own ``build_regex_from_schema``, so the
schemas are the ones outlines-core can handle.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

SCHEMA_DIR = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                                  Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))

# Sources visited round-robin, one schema from each in turn. Synthesized is
# left out (outlines-core converts none of its first schemas), and so is
# Github_ultra (its schemas make regexes of many megabytes, and converting
# some of them aborts on memory).
SCHEMA_SOURCES = (
    "Github_easy", "Github_medium", "Github_hard", "Kubernetes", "Snowplow",
    "JsonSchemaStore", "Glaiveai2K", "WashingtonPost", "Handwritten", "JME",
    "MCPspec", "BFCL_simple", "Github_trivial",
)


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str        # "regex" or "schema"
    pattern: str
    note: str = ""


# --- named regexes -------------------------------------------------------------

URL = r"(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?"
EMAIL = r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}"
# ISO 8601 / RFC 3339 date-time: calendar date, 'T', time with optional
# fraction (up to nanoseconds), and 'Z' or a +hh:mm / -hh:mm offset. Seconds
# go to 60 for leap seconds. Digits are spelled [0-9]: \d means any Unicode
# digit to outlines-core (Rust regex) but only 0-9 to Python regex engines
# such as interegular.
ISO_DATETIME = (
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
PHONE = r"[0-9]{3}-[0-9]{4}"

WORDS_50 = (
    "apple", "banana", "cherry", "garden", "window", "mountain", "river", "forest",
    "teacher", "student", "kitchen", "library", "morning", "evening", "weather",
    "thunder", "island", "village", "harbor", "bridge", "pencil", "notebook",
    "journey", "silver", "golden", "winter", "summer", "autumn", "spring", "ocean",
    "desert", "valley", "castle", "market", "doctor", "engine", "planet", "rocket",
    "camera", "guitar", "violin", "coffee", "butter", "orange", "purple", "yellow",
    "candle", "blanket", "ladder", "whisper",
)
assert len(WORDS_50) == 50 and len(set(WORDS_50)) == 50
ALTERNATION50 = "(" + "|".join(WORDS_50) + ")"

# A JSON object with 30 fixed keys in a fixed order; values are integers,
# strings without escapes, booleans or numbers.
_INT = r"-?(0|[1-9][0-9]*)"
_NUM = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"
_STR = r'"[^"\\\x00-\x1f]*"'
_BOOL = r"(true|false)"
KEYS_30 = (
    ("id", _INT), ("name", _STR), ("email", _STR), ("age", _INT), ("active", _BOOL),
    ("created_at", _STR), ("updated_at", _STR), ("country", _STR), ("city", _STR),
    ("street", _STR), ("postal_code", _STR), ("phone", _STR), ("score", _NUM),
    ("rank", _INT), ("verified", _BOOL), ("language", _STR), ("timezone", _STR),
    ("balance", _NUM), ("currency", _STR), ("plan", _STR), ("seats", _INT),
    ("trial", _BOOL), ("referrer", _STR), ("notes", _STR), ("tags_count", _INT),
    ("last_login", _STR), ("login_count", _INT), ("admin", _BOOL), ("team", _STR),
    ("quota", _NUM),
)
KEYLIST = r"\{" + ", ".join(f'"{key}": {value}' for key, value in KEYS_30) + r"\}"

REGEX_WORKLOADS = (
    Workload("url", "regex", URL),
    Workload("email", "regex", EMAIL),
    Workload("iso_datetime", "regex", ISO_DATETIME),
    Workload("phone", "regex", PHONE),
    Workload("alternation50", "regex", ALTERNATION50),
    Workload("keylist", "regex", KEYLIST),
)
QUICK_REGEXES = ("url", "email", "phone")


# --- JSON schemas --------------------------------------------------------------

# Lookarounds (they come from a schema's "pattern" or "format") make both
# engines refuse the regex, so such a schema measures nothing.
LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")


def _convert(schema_json: str) -> dict:
    from outlines_core.json_schema import build_regex_from_schema

    return {"regex": build_regex_from_schema(schema_json)}


def _limit_memory(gib: int) -> None:
    import resource

    limit = gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def schema_workloads(count: int, *, max_regex_chars: int, log=print) -> tuple[list[Workload], list[str]]:
    """The first ``count`` schemas, taken round-robin over :data:`SCHEMA_SOURCES`
    in file order, that outlines-core turns into a regex of at most
    ``max_regex_chars`` characters, without lookarounds, not already chosen.

    Returns the workloads and notes on what was passed over. Each conversion
    runs in a forked child (2 s timeout, 4 GiB address space), because some
    schemas make outlines-core abort on memory.
    """
    from isolated import run_in_child

    if count <= 0:
        return [], []
    iterators = {src: _schemas(src) for src in SCHEMA_SOURCES if (SCHEMA_DIR / f"{src}.jsonl.gz").exists()}
    missing = [src for src in SCHEMA_SOURCES if src not in iterators]
    notes = [f"source not found, skipped: {src}" for src in missing]
    chosen: list[Workload] = []
    passed_over = {src: {"unconvertible": 0, "too long": 0, "lookaround": 0, "duplicate": 0}
                   for src in iterators}
    seen: set[str] = set()
    while len(chosen) < count and iterators:
        for src in list(iterators):
            if len(chosen) >= count:
                break
            for line_no, name, schema in iterators[src]:
                text = json.dumps(schema)

                def convert(text=text):
                    _limit_memory(4)
                    return _convert(text)

                result = run_in_child(convert, timeout=2.0)
                if result["status"] != "ok":
                    passed_over[src]["unconvertible"] += 1
                    continue
                regex = result["regex"]
                if len(regex) > max_regex_chars:
                    passed_over[src]["too long"] += 1
                    continue
                if any(look in regex for look in LOOKAROUNDS):
                    passed_over[src]["lookaround"] += 1
                    continue
                if regex in seen:
                    passed_over[src]["duplicate"] += 1
                    continue
                seen.add(regex)
                label = f"{src}:{line_no}"
                chosen.append(Workload(label, "schema", regex, note=str(name)))
                log(f"  schema {label} ({name}): regex of {len(regex)} chars")
                break
            else:
                del iterators[src]
    for src, counts in passed_over.items():
        if any(counts.values()):
            notes.append(f"{src}: passed over {counts['unconvertible']} schema(s) outlines-core "
                         f"could not convert, {counts['too long']} with a regex over "
                         f"{max_regex_chars:,} chars, {counts['lookaround']} with a lookaround "
                         f"(from a `pattern` or `format`; neither engine builds those) and "
                         f"{counts['duplicate']} repeating an earlier regex")
    return chosen, notes


def _schemas(source: str):
    with gzip.open(SCHEMA_DIR / f"{source}.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line_no, line in enumerate(fh):
            record = json.loads(line)
            yield line_no, record.get("name", ""), record["schema"]
