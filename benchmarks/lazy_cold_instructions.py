#!/usr/bin/env python
"""The lazy engine's cold work on the MaskBench sample as callgrind instructions, which do not move with the load.

On the shared 2-core machine a paired ``lazy_slow_steps.py --against`` run
moves by a dozen slow steps from one try to the next, which hides a change
that saves a few percent of a cold row. This builds each schema's lazy
index in this process, after the vocabulary is prepared and a trivial
schema built (as a MaskBench child starts), and walks its instances as
``bench_maskbench.py`` does (a mask and a commit a token); under callgrind
started with ``--instr-atstart=no`` it turns the instrumentation on
(``callgrind_control -i on``) for the builds and walks only, so that the
``Collected`` line valgrind prints at exit counts them and not the
vocabulary's preparation. Without valgrind it runs the same walks untimed.

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.this \\
        .venv/bin/python benchmarks/lazy_cold_instructions.py --names sp_0

For an A/B, run it again with ``PYTHONPATH`` naming a folder whose
``tokendfa`` is the other version (the engine imported is that one, the
walk the same), and compare the two ``Collected`` lines;
``callgrind_annotate`` on the output files says where they differ.

The schemas share one process, so a schema's rows find the per-vocabulary
plans and masks the schemas before it made (in MaskBench each starts from
the prepared parent's): name one schema (``--names``) for what a fresh
child does. The count leaves out what a fork costs (page faults, ~3-4 us
each on this machine, and copy-on-write), which ``lazy_step_faults.py``
counts.

Measured (qwen2.5, 7ff0ec1): Snowplow sp_0 647.2M instructions; the whole
sample (4 a source, one process) ~10.04G. Repeated runs of one version
agree to within ~0.02-0.1%.

A development aid, not a benchmark of record.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import compact, named_sample, sample_arguments, warm_vocabulary  # noqa: E402


def _instrument(on: bool) -> None:
    """Turn callgrind's instrumentation of this process on or off (nothing
    when callgrind_control is not on the PATH: a plain run)."""
    control = shutil.which("callgrind_control")
    if control is not None:
        subprocess.run([control, "-i", "on" if on else "off", str(os.getpid())], capture_output=True, check=False)


def main(argv: list[str] | None = None) -> int:
    args = sample_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), argv)
    from tokendfa import Guide, Index

    vocab = warm_vocabulary(args.vocab)
    records = named_sample(args.per_source, args.names)
    # the instances tokenised outside the counted part
    texts = [[vocab.encode(compact(instance)) for valid in (True, False) for instance in record.instances(valid)]
             for record in records]
    row = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    steps = built = 0
    _instrument(True)
    for record, encoded in zip(records, texts):
        try:
            index = Index.from_schema(record.schema, vocab, lazy=True)
        except Exception:  # noqa: BLE001 - a schema the lazy engine refuses has no steps
            continue
        built += 1
        for tokens in encoded:
            guide = Guide(index)
            for token in tokens:
                steps += 1
                try:
                    guide.write_mask_into(row)
                    guide.advance(token)
                except Exception:  # noqa: BLE001 - a refused token ends the instance, as in MaskBench
                    break
    _instrument(False)
    print(f"{built} schemas built, {steps:,} steps walked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
