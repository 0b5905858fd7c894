"""The benchmark workloads: named regexes, and real JSON schemas turned into regexes.

Both engines are always given the very same regex string. The JSON-schema
regexes come from outlines-core's own ``build_regex_from_schema``, so the
schemas are the ones outlines-core can handle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.data import SCHEMA_DIR, SchemaRecord, outlines_regex, passed_over_notes, round_robin

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


def schema_workloads(count: int, *, max_regex_chars: int, schema_dir: Path = SCHEMA_DIR,
                     log=print) -> tuple[list[Workload], list[str]]:
    """The first ``count`` schemas, taken round-robin over :data:`SCHEMA_SOURCES`
    in file order, that outlines-core turns into a regex of at most
    ``max_regex_chars`` characters, without lookarounds, not already chosen.

    Returns the workloads and notes on what was passed over. Each conversion
    runs in a forked child (2 s timeout, 4 GiB address space), because some
    schemas make outlines-core abort on memory.
    """
    seen: set[str] = set()

    def qualify(record: SchemaRecord) -> Workload | str:
        converted = outlines_regex(record.schema, timeout=2.0)
        if converted["status"] != "ok":
            return "schema(s) outlines-core could not convert"
        regex = converted["regex"]
        if len(regex) > max_regex_chars:
            return f"with a regex over {max_regex_chars:,} chars"
        if any(look in regex for look in LOOKAROUNDS):
            return "with a lookaround (from a `pattern` or `format`; neither engine builds those)"
        if regex in seen:
            return "repeating an earlier regex"
        seen.add(regex)
        log(f"  schema {record.label} ({record.name}): regex of {len(regex)} chars")
        return Workload(record.label, "schema", regex, note=record.name)

    if count <= 0:
        return [], []
    chosen, passed, missing = round_robin(SCHEMA_SOURCES, count, qualify, schema_dir)
    return chosen, passed_over_notes(passed, missing)
