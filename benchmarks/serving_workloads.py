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

import gzip
import json
import os
import pickle
import select
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SCHEMA_DIR = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                                  Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))
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


# --- a forked child with a hard timeout ---------------------------------------------

def run_forked(fn: Callable[[], Any], timeout: float) -> dict:
    """Run ``fn`` in a forked child (its own process group) and return
    ``{"status": "ok", "value": ...}`` (the value must be JSON),
    ``{"status": "error", "error": ...}``, ``{"status": "timeout"}`` or
    ``{"status": "crashed", "error": ...}``. The child's group is killed on
    timeout and reaped in every case."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            try:
                payload = {"status": "ok", "value": fn()}
            except BaseException as exc:  # report everything, the parent decides
                payload = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc(limit=5)}
            data = json.dumps(payload).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it (or is gone)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"status": "timeout"}
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"status": "crashed", "error": f"child exited with status {status} and no answer"}


def _limit_memory(gib: int) -> None:
    import resource

    limit = gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# --- selection -------------------------------------------------------------------------

def _records(source: str, schema_dir: Path):
    with gzip.open(schema_dir / f"{source}.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line_no, line in enumerate(fh):
            yield line_no, json.loads(line)


def compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def walk_ours(index, tokens: list[int]) -> str | None:
    """None when ``tokens`` spell a complete match; else why not."""
    state = index.initial_state
    for position, token in enumerate(tokens):
        try:
            state = index.advance(state, token)
        except Exception as exc:
            return f"refused at token {position} of {len(tokens)} ({type(exc).__name__})"
    if not index.is_final(state):
        return "incomplete: the regex is not matched at the end"
    return None


def select_schemas(vocab, outlines_vocab, *, count: int, workdir: Path, schema_dir: Path = SCHEMA_DIR,
                   sources: tuple[str, ...] = SOURCES, min_chars: int, max_chars: int,
                   build_timeout: float, log: Callable[..., None]) -> tuple[list[SchemaWorkload], list[str]]:
    """The first ``count`` schemas that qualify (see the module docstring),
    round-robin over ``sources``. Returns them and notes on what was passed over."""
    from tokendfa import Index

    iterators = {src: _records(src, schema_dir) for src in sources
                 if (schema_dir / f"{src}.jsonl.gz").exists()}
    notes = [f"source not found, skipped: {src}" for src in sources if src not in iterators]
    reasons = ("no valid instance", "unconvertible", "regex too short", "regex too long",
               "duplicate regex", "ours build timeout/failure", "outlines-core build timeout/failure",
               "no instance accepted by ours")
    passed: dict[str, dict[str, int]] = {src: dict.fromkeys(reasons, 0) for src in iterators}
    examples: list[str] = []
    seen: set[str] = set()
    chosen: list[SchemaWorkload] = []
    while len(chosen) < count and iterators:
        for src in list(iterators):
            if len(chosen) >= count:
                break
            for line_no, record in iterators[src]:
                label = f"{src}:{line_no}"
                valid = [t["data"] for t in record.get("tests", []) if t.get("valid")]
                if not valid:
                    passed[src]["no valid instance"] += 1
                    continue
                schema_text = json.dumps(record["schema"])

                def convert(text=schema_text):
                    _limit_memory(4)
                    from outlines_core.json_schema import build_regex_from_schema
                    return build_regex_from_schema(text)

                converted = run_forked(convert, timeout=5.0)
                if converted["status"] != "ok":
                    passed[src]["unconvertible"] += 1
                    continue
                regex = converted["value"]
                if len(regex) < min_chars:
                    passed[src]["regex too short"] += 1
                    continue
                if len(regex) > max_chars:
                    passed[src]["regex too long"] += 1
                    continue
                if regex in seen:
                    passed[src]["duplicate regex"] += 1
                    continue
                seen.add(regex)
                stem = label.replace(":", "_")
                ours_path = workdir / f"{stem}.tdfa"
                outlines_path = workdir / f"{stem}.outlines.pickle"

                def build_ours(regex=regex, path=ours_path):
                    t0 = time.perf_counter()
                    index = Index.from_regex(regex, vocab, progress=False)
                    seconds = time.perf_counter() - t0
                    index.save(path)
                    return {"seconds": seconds, "states": index.num_states}

                def build_outlines(regex=regex, path=outlines_path):
                    import outlines_core

                    t0 = time.perf_counter()
                    index = outlines_core.Index(regex, outlines_vocab)
                    seconds = time.perf_counter() - t0
                    with open(path, "wb") as fh:
                        pickle.dump(index, fh, protocol=pickle.HIGHEST_PROTOCOL)
                    return {"seconds": seconds}

                log(f"  {label} ({record.get('name', '')}): regex of {len(regex):,} chars, building ...")
                ours = run_forked(build_ours, build_timeout)
                if ours["status"] != "ok":
                    passed[src]["ours build timeout/failure"] += 1
                    examples.append(f"{label}: ours build {ours['status']} {ours.get('error', '')}".strip())
                    log(f"    ours: {ours['status']} {ours.get('error', '')}")
                    continue
                outl = run_forked(build_outlines, build_timeout)
                if outl["status"] != "ok":
                    passed[src]["outlines-core build timeout/failure"] += 1
                    examples.append(f"{label}: outlines-core build {outl['status']} "
                                    f"{outl.get('error', '')}".strip())
                    log(f"    outlines-core: {outl['status']} {outl.get('error', '')}")
                    ours_path.unlink(missing_ok=True)
                    outlines_path.unlink(missing_ok=True)
                    continue
                index = Index.load(ours_path, vocab)
                instances, skipped = [], []
                for number, data in enumerate(valid):
                    text = compact(data)
                    tokens = vocab.encode(text)
                    why = walk_ours(index, tokens)
                    if why is None:
                        instances.append(Instance(f"{label}#{number}", text, tokens))
                    else:
                        skipped.append(f"{label}#{number}: {why}")
                del index
                if not instances:
                    passed[src]["no instance accepted by ours"] += 1
                    examples.extend(skipped)
                    ours_path.unlink(missing_ok=True)
                    outlines_path.unlink(missing_ok=True)
                    continue
                chosen.append(SchemaWorkload(
                    label=label, name=str(record.get("name", "")), regex=regex,
                    ours_path=ours_path, outlines_path=outlines_path,
                    ours_build_s=ours["value"]["seconds"], outlines_build_s=outl["value"]["seconds"],
                    num_states=ours["value"]["states"], instances=instances, skipped=skipped))
                log(f"    built: ours {ours['value']['seconds']:.1f} s ({ours['value']['states']} states), "
                    f"outlines-core {outl['value']['seconds']:.1f} s; {len(instances)} instance(s), "
                    f"{len(skipped)} skipped")
                break
            else:
                del iterators[src]
    for src, counts in passed.items():
        parts = [f"{n} {reason}" for reason, n in counts.items() if n]
        if parts:
            notes.append(f"{src}: passed over " + ", ".join(parts))
    notes.extend(examples)
    return chosen, notes
