"""Time to first mask, lazy, on a JSONSchemaBench sample: a warm process and a fresh fork per schema.

MaskBench's TTFM method for tokendfa alone, quick to rerun before and after a
change: the vocabulary is set up and one trivial schema compiled in the
parent; each schema is compiled (``Index.from_schema(..., lazy=True)``) and
its first mask taken in a fork of it. Prints p50/p90/max of the child's CPU
time (steady on a shared machine) and of wall time, and writes the rows as JSON.

    .venv/bin/python benchmarks/ttfm_fork.py --per-source 8 --out /tmp/ttfm.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample  # noqa: E402

SOURCES = ["Github_easy", "Github_medium", "Github_hard", "Glaiveai2K", "JsonSchemaStore",
           "Kubernetes", "Snowplow", "WashingtonPost", "Handwritten", "Synthesized"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-source", type=int, default=4, help="schemas a source (sample())")
    parser.add_argument("--vocab", default="qwen2.5", help="a builtin vocabulary")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds a schema")
    parser.add_argument("--out", default=None, help="rows as JSON")
    args = parser.parse_args()

    from tokendfa import Guide, Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab)
    vocab.prepare()
    Guide(Index.from_schema({"type": "object", "properties": {"a": {"type": "string"}}}, vocab,
                            lazy=True)).get_mask()
    import tokendfa.builder.fast  # noqa: F401 - what a server has imported

    rows = []
    for source in SOURCES:
        for record in sample(source, args.per_source):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    wall, cpu = time.perf_counter(), time.process_time()
                    Guide(Index.from_schema(record.schema, vocab, lazy=True,
                                            time_limit=args.time_limit)).get_mask()
                    out = {"ms": (time.perf_counter() - wall) * 1e3,
                           "cpu": (time.process_time() - cpu) * 1e3}
                except Exception as exc:  # noqa: BLE001 - reported, not raised
                    out = {"error": type(exc).__name__}
                os.write(write, json.dumps(out).encode())
                os._exit(0)
            os.close(write)
            data = b""
            while chunk := os.read(read, 65536):
                data += chunk
            os.close(read)
            os.waitpid(pid, 0)
            row = json.loads(data or b'{"error": "crashed"}')
            row["label"] = record.label
            rows.append(row)
    done = [row for row in rows if "ms" in row]
    print(f"{len(rows)} schemas, {len(done)} compiled; "
          f"errors: {sorted(row['error'] for row in rows if 'error' in row)}")
    for key, name in (("cpu", "CPU "), ("ms", "wall")):
        values = sorted(row[key] for row in done)
        if values:
            print(f"{name} ms: p50 {statistics.median(values):.1f}  "
                  f"p90 {values[min(len(values) - 1, int(0.9 * len(values)))]:.1f}  max {values[-1]:.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
