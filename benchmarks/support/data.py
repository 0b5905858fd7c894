"""JSONSchemaBench as the benchmarks read it: records, deterministic samples,
round-robin selection over sources, and the compact text of an instance.

The files are ``<source>.jsonl.gz``, one JSON object a line (``name``,
``schema``, ``tests``: a list of ``{"data", "valid"}``), in
``../shared/data/jsonschemabench`` beside the repository, or wherever
``$TOKENDFA_JSONSCHEMABENCH`` says.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from .provenance import ROOT

SCHEMA_DIR = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH", ROOT.parent / "shared/data/jsonschemabench"))
SUFFIX = ".jsonl.gz"

T = TypeVar("T")


@dataclass(frozen=True)
class TestCase:
    data: Any
    valid: bool


@dataclass(frozen=True)
class SchemaRecord:
    source: str
    line: int              # 0-based line of the file
    name: str
    schema: Any
    tests: tuple[TestCase, ...]

    @property
    def label(self) -> str:
        return f"{self.source}:{self.line}"

    def instances(self, valid: bool) -> list[Any]:
        return [case.data for case in self.tests if case.valid == valid]


def compact(data: Any) -> str:
    """An instance as the benchmarks feed it to every engine: no whitespace, UTF-8 as is."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def source_names(schema_dir: Path = SCHEMA_DIR) -> list[str]:
    """Every source in ``schema_dir`` (file stems), sorted."""
    return sorted(p.name[:-len(SUFFIX)] for p in Path(schema_dir).glob(f"*{SUFFIX}"))


def records(source: str, schema_dir: Path = SCHEMA_DIR) -> Iterator[SchemaRecord]:
    """The records of one source, in file order."""
    with gzip.open(Path(schema_dir) / f"{source}{SUFFIX}", "rt", encoding="utf-8") as fh:
        text = fh.read()
    # split("\n"), not splitlines(): U+2028 and friends may stand inside a string.
    for line_no, line in enumerate(text.split("\n")):
        line = line.strip().lstrip("\ufeff")
        if not line:
            continue
        raw = json.loads(line)
        tests = tuple(TestCase(t["data"], bool(t["valid"])) for t in raw.get("tests", []))
        yield SchemaRecord(source, line_no, str(raw.get("name", "")), raw["schema"], tests)


def sample(source: str, limit: int | None, shift: float = 0.0,
           schema_dir: Path = SCHEMA_DIR) -> list[SchemaRecord]:
    """Every k-th record (k = size / limit, fractional), so the sample spreads
    over the whole file, deterministically; all records when ``limit`` is None
    or at least the size.

    ``shift`` (0 <= shift < 1) starts that fraction of a step later: another
    sample of the same size, disjoint from the first where the file is long.
    """
    found = list(records(source, schema_dir))
    if limit is None or limit >= len(found):
        return found
    step = len(found) / limit
    return [found[int((i + shift) * step)] for i in range(limit)]


def round_robin(sources: tuple[str, ...] | list[str], count: int,
                qualify: Callable[[SchemaRecord], T | str],
                schema_dir: Path = SCHEMA_DIR) -> tuple[list[T], dict[str, Counter], list[str]]:
    """The first ``count`` records that qualify, one source after another in
    turn, each source in file order.

    ``qualify(record)`` returns what to keep, or a string: the reason the
    record is passed over. Returns what was kept, the reasons counted per
    source, and the sources that were not found.
    """
    iterators = {src: records(src, schema_dir) for src in sources
                 if (Path(schema_dir) / f"{src}{SUFFIX}").exists()}
    missing = [src for src in sources if src not in iterators]
    passed: dict[str, Counter] = {src: Counter() for src in iterators}
    chosen: list[T] = []
    while len(chosen) < count and iterators:
        for src in list(iterators):
            if len(chosen) >= count:
                break
            for record in iterators[src]:
                kept = qualify(record)
                if isinstance(kept, str):
                    passed[src][kept] += 1
                    continue
                chosen.append(kept)
                break
            else:
                del iterators[src]
    return chosen, passed, missing


def passed_over_notes(passed: dict[str, Counter], missing: list[str]) -> list[str]:
    """One line per source saying what :func:`round_robin` passed over and why."""
    notes = [f"source not found, skipped: {src}" for src in missing]
    for src, counts in passed.items():
        if counts:
            notes.append(f"{src}: passed over " + ", ".join(f"{n} {why}" for why, n in counts.items()))
    return notes


def outlines_regex(schema: Any, timeout: float = 5.0, memory_gib: float = 4) -> dict[str, Any]:
    """outlines-core's ``build_regex_from_schema`` in a forked child (some
    schemas make it abort on memory): ``{"status": "ok", "regex": ...}`` or a
    failure as :func:`support.isolation.run_in_child` reports it."""
    from .isolation import run_in_child

    text = json.dumps(schema)

    def convert() -> dict[str, Any]:
        from outlines_core.json_schema import build_regex_from_schema

        return {"regex": build_regex_from_schema(text)}

    return run_in_child(convert, timeout=timeout, memory_gib=memory_gib)


def named_sample(per_source: int, names: str = "", schema_dir: Path = SCHEMA_DIR) -> list[SchemaRecord]:
    """MaskBench's sample (``per_source`` records of every source; 0: all of
    them), kept to the records whose name holds one of the comma-separated
    parts of ``names`` ('' keeps every record)."""
    wanted = [n for n in names.split(",") if n]
    return [record for source in source_names(schema_dir) for record in sample(source, per_source or None,
                                                                               schema_dir=schema_dir)
            if not wanted or any(n in record.name for n in wanted)]


def sample_arguments(parser, argv: list[str] | None = None):
    """The lazy engine's step tools' options (``--per-source``, ``--vocab``,
    ``--names``) added to ``parser`` and parsed from ``argv``."""
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--names", default="", help="comma-separated parts of schema names ('': all)")
    args = parser.parse_args(argv)
    if args.per_source < 0:
        parser.error("--per-source must be at least 0 (0: every schema)")
    return args


def warm_vocabulary(name: str):
    """The built-in vocabulary ``name``, prepared, with one trivial lazy
    schema built on it (the state MaskBench's parent forks from)."""
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(name).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    return vocab
