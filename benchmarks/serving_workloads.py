"""Workloads of the serving benchmark: real JSON schemas, their regex, their
valid instances as token ids, and both engines' prebuilt index files.

Schemas come from JSONSchemaBench, visited round-robin over a few sources in
file order (deterministic). A schema is taken when

* it has at least one valid test instance,
* outlines-core's ``build_regex_from_schema`` converts it (in a forked child:
  a few schemas make it abort on memory) into a regex of ``min_chars`` to
  ``max_chars`` characters not seen before,
* ours (``Index.from_regex``) and outlines-core (``outlines_core.Index``) each
  build that regex within ``build_timeout`` seconds (each in its own forked
  child, killed on timeout), and
* our index accepts at least one of its instances, serialized compactly.

Each build child writes its index to a file (ours with ``Index.save``,
outlines-core's with ``pickle.dumps``), which the benchmark then loads.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from support.data import SCHEMA_DIR, SchemaRecord, compact, outlines_regex, passed_over_notes, round_robin
from support.engines import walk_index
from support.isolation import run_in_child

SOURCES = ("Github_easy", "Github_medium", "Kubernetes", "Snowplow")


@dataclass
class Instance:
    label: str            # "<schema label>#<test number>"
    text: str             # compact JSON
    tokens: list[int]     # our tokenizer's ids, EOS not included


@dataclass
class SchemaWorkload:
    label: str            # "<source>:<line number>"
    name: str
    regex: str
    ours_path: Path
    outlines_path: Path
    ours_build_s: float
    outlines_build_s: float
    num_states: int
    instances: list[Instance]
    skipped: list[str] = field(default_factory=list)   # instances our index refused, and why


# --- selection -------------------------------------------------------------------------

def select_schemas(vocab, outlines_vocab, *, count: int, workdir: Path, schema_dir: Path = SCHEMA_DIR,
                   sources: tuple[str, ...] = SOURCES, min_chars: int, max_chars: int,
                   build_timeout: float, log: Callable[..., None]) -> tuple[list[SchemaWorkload], list[str]]:
    """The first ``count`` schemas that qualify (see the module docstring),
    round-robin over ``sources``. Returns them and notes on what was passed over."""
    from tokendfa import Index

    examples: list[str] = []
    seen: set[str] = set()

    def build_ours(regex: str, path: Path) -> dict:
        t0 = time.perf_counter()
        index = Index.from_regex(regex, vocab, progress=False, lazy=False)
        seconds = time.perf_counter() - t0
        index.save(path)
        return {"seconds": seconds, "states": index.num_states}

    def build_outlines(regex: str, path: Path) -> dict:
        import outlines_core

        t0 = time.perf_counter()
        index = outlines_core.Index(regex, outlines_vocab)
        seconds = time.perf_counter() - t0
        with open(path, "wb") as fh:
            pickle.dump(index, fh, protocol=pickle.HIGHEST_PROTOCOL)
        return {"seconds": seconds}

    def qualify(record: SchemaRecord) -> SchemaWorkload | str:
        label = record.label
        valid = record.instances(valid=True)
        if not valid:
            return "no valid instance"
        converted = outlines_regex(record.schema, timeout=5.0)
        if converted["status"] != "ok":
            return "unconvertible"
        regex = converted["regex"]
        if len(regex) < min_chars:
            return "regex too short"
        if len(regex) > max_chars:
            return "regex too long"
        if regex in seen:
            return "duplicate regex"
        seen.add(regex)
        stem = label.replace(":", "_")
        ours_path, outlines_path = workdir / f"{stem}.tdfa", workdir / f"{stem}.outlines.pickle"
        log(f"  {label} ({record.name}): regex of {len(regex):,} chars, building ...")
        built = {}
        for engine, build, path in (("ours", build_ours, ours_path),
                                    ("outlines-core", build_outlines, outlines_path)):
            result = run_in_child(lambda: build(regex, path), build_timeout)
            if result["status"] != "ok":
                examples.append(f"{label}: {engine} build {result['status']} {result.get('error', '')}".strip())
                log(f"    {engine}: {result['status']} {result.get('error', '')}")
                ours_path.unlink(missing_ok=True)
                outlines_path.unlink(missing_ok=True)
                return f"{engine} build timeout/failure"
            built[engine] = result
        index = Index.load(ours_path, vocab)
        instances, skipped = [], []
        for number, data in enumerate(valid):
            text = compact(data)
            tokens = vocab.encode(text)
            why = walk_index(index, tokens)
            if why is None:
                instances.append(Instance(f"{label}#{number}", text, tokens))
            else:
                skipped.append(f"{label}#{number}: {why}")
        del index
        if not instances:
            examples.extend(skipped)
            ours_path.unlink(missing_ok=True)
            outlines_path.unlink(missing_ok=True)
            return "no instance accepted by ours"
        ours, outl = built["ours"], built["outlines-core"]
        log(f"    built: ours {ours['seconds']:.1f} s ({ours['states']} states), "
            f"outlines-core {outl['seconds']:.1f} s; {len(instances)} instance(s), {len(skipped)} skipped")
        return SchemaWorkload(
            label=label, name=record.name, regex=regex, ours_path=ours_path, outlines_path=outlines_path,
            ours_build_s=ours["seconds"], outlines_build_s=outl["seconds"], num_states=ours["states"],
            instances=instances, skipped=skipped)

    chosen, passed, missing = round_robin(sources, count, qualify, schema_dir)
    return chosen, passed_over_notes(passed, missing) + examples
