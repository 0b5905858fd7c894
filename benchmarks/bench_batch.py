"""A batch of new schemas, one generation each: the cold rows of a step
computed one after another, and by ``tokendfa.fill_masks`` on threads.

Each repeat builds fresh lazy indexes for the same ``--batch`` JSONSchemaBench
schemas (qwen2.5; construction not timed), then decodes each schema's first
valid instance (compact JSON, its tokens forced) in lockstep for up to
``--steps`` steps: each step is one ``fill_masks(guides, bitmask,
threads=k)`` call, timed. Nearly every state is new to its index, so most
rows are cold (the per-vocabulary caches are filled by a run before the
timed ones, as in a server that has seen other schemas). The modes alternate
within each repeat, and the table gives each mode's median total over the
repeats and its ratio to threads=1. The masks of every mode are checked equal.

The CPU time of every thread in ``fill_masks`` is given beside it: what
threads spend beyond the serial mode's is their hand-offs' cost (waking a
pool thread, passing the GIL), which a loaded machine does not hide.

Two threads can only overlap what runs without the GIL, so the run also
reports that share of the serial mode's CPU time (the compiled modules'
``released_ns()`` over the calling thread's CPU time in ``fill_masks``): a
bound on what threads can gain that a shared machine's load does not move;
and in how many sections (``released_count()``) it ran: each is a point where
the GIL may pass to another thread and back.

A control runs beside the modes in every repeat: ``--batch`` pieces of work
that hold no GIL at all (SHA-256 of a buffer sized so that one thread takes
about as long as the serial batch), on 1 and on k threads. Its ratio is what
this machine gives perfectly parallel work in the same minutes: on an idle
2-CPU machine about 0.5, on a loaded one up to 1.

    .venv/bin/python benchmarks/bench_batch.py --batch 16 --threads 1 2 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support.data import compact, round_robin, source_names  # noqa: E402


def pick_schemas(vocab, count: int):
    """The first ``count`` schemas (round robin over the sources) whose first
    valid instance the lazy index accepts, with that instance's tokens."""
    from tokendfa import Guide, Index

    def qualify(record):
        texts = [compact(data) for data in record.instances(True)]
        if not texts:
            return "no valid instance"
        try:
            index = Index.from_schema(record.schema, vocab)
            tokens = vocab.encode(texts[0])
            guide = Guide(index)
            for token in tokens:
                guide.advance(token)
        except Exception as exc:  # noqa: BLE001 - a schema or instance this engine refuses is passed over
            return type(exc).__name__
        return record, tokens

    chosen, _, _ = round_robin(source_names(), count, qualify)
    return chosen


CPU_SECONDS = [0.0]  # the calling thread's CPU time in fill_masks, threads=1
PROCESS_SECONDS = [0.0]  # the process's (every thread's) CPU time in fill_masks, the last run


def _counters(name: str) -> list:
    """The compiled modules' ``name`` functions (their GIL-free time
    counters), those built."""
    found = []
    for module_name in ("tokendfa.lazy._cwalk", "tokendfa.analysis._lazycore"):
        try:
            module = __import__(module_name, fromlist=[name])
        except ImportError:
            continue
        if hasattr(module, name):
            found.append(getattr(module, name))
    return found


def released_seconds() -> float:
    """CPU time the compiled modules have spent without the GIL (0 without them)."""
    return sum(released() for released in _counters("released_ns")) / 1e9


def released_sections() -> int:
    """How many sections the compiled modules have run without the GIL."""
    return sum(count() for count in _counters("released_count"))


def count_released() -> None:
    for count in _counters("count_released"):
        count(True)


def run_mode(chosen, vocab, steps: int, threads: int):
    """Fresh indexes, one guide each, decoding each schema's instance in
    lockstep (its tokens forced); ``fill_masks`` timed at every step."""
    from tokendfa import Guide, Index, fill_masks

    guides = [Guide(Index.from_schema(record.schema, vocab)) for record, _ in chosen]
    words = (vocab.size + 31) // 32
    bitmask = np.zeros((len(guides), words), dtype=np.int32)
    seconds, masks = [], []
    PROCESS_SECONDS[0] = 0.0
    for step in range(steps):
        live = [guide if step <= len(tokens) else None for guide, (_, tokens) in zip(guides, chosen)]
        if not any(live):
            break
        started = time.perf_counter()
        cpu, process = time.thread_time(), time.process_time()
        fill_masks(live, bitmask, threads=threads)
        seconds.append(time.perf_counter() - started)
        PROCESS_SECONDS[0] += time.process_time() - process
        if threads == 1:
            CPU_SECONDS[0] += time.thread_time() - cpu
        masks.append(bitmask.copy())
        for guide, (_, tokens) in zip(guides, chosen):
            if step < len(tokens):
                guide.advance(tokens[step])
    return seconds, masks


def control(pieces: int, piece_bytes: int, threads: int) -> float:
    """Seconds to hash ``pieces`` buffers of ``piece_bytes`` on ``threads``
    threads (hashlib releases the GIL for buffers over 2 KiB)."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    data = np.random.default_rng(0).integers(0, 256, piece_bytes, dtype=np.uint8).tobytes()
    started = time.perf_counter()
    if threads == 1:
        for _ in range(pieces):
            hashlib.sha256(data).digest()
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: hashlib.sha256(data).digest(), range(pieces)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin("qwen2.5").prepare()
    Index.from_schema({"type": "object", "properties": {"a": {"type": "string"}}}, vocab).get_mask(1)
    records = pick_schemas(vocab, args.batch)
    print(f"{len(records)} schemas: {', '.join(r.label for r, _ in records)}", flush=True)
    run_mode(records, vocab, args.steps, 1)  # the per-vocabulary caches the first run fills
    modes = sorted(set(args.threads) | {1})
    totals = {k: [] for k in modes}
    firsts = {k: [] for k in modes}
    cpus = {k: [] for k in modes}
    count_released()
    # the control's piece size: one thread hashes the batch about as long as the serial batch takes
    serial = sum(run_mode(records, vocab, args.steps, 1)[0])
    # the repeats' alone, the CPU time as the time without the GIL (neither the
    # run that fills the caches nor the one above)
    released, sections, CPU_SECONDS[0] = 0.0, 0, 0.0
    rate = (64 << 20) / control(1, 64 << 20, 1)
    piece_bytes = max(4096, int(serial * rate / len(records)))
    controls = {k: [] for k in modes}
    for repeat in range(args.repeats):
        for threads in modes:
            controls[threads].append(control(len(records), piece_bytes, threads))
        reference = None
        for threads in modes:
            before, sections_before = released_seconds(), released_sections()
            seconds, masks = run_mode(records, vocab, args.steps, threads)
            if threads == 1:
                released += released_seconds() - before
                sections += released_sections() - sections_before
            if reference is None:
                reference = masks
            elif not all(np.array_equal(a, b) for a, b in zip(reference, masks)):
                raise SystemExit(f"threads={threads}: masks differ from threads=1")
            totals[threads].append(sum(seconds))
            cpus[threads].append(PROCESS_SECONDS[0])
            firsts[threads].append(seconds[0])
            print(f"repeat {repeat} threads {threads}: {sum(seconds) * 1e3:8.1f} ms over {args.steps} steps"
                  f" (first step {seconds[0] * 1e3:.1f} ms)", flush=True)
    base = np.median(totals[1])
    print(f"\nbatch {len(records)}, {args.steps} steps, {args.repeats} repeats, {os.cpu_count()} CPUs")
    print("| threads | median total ms | ratio to 1 thread | median first step ms | CPU ms (all threads) "
          "| control ratio (no GIL) |")
    print("| --- | --- | --- | --- | --- | --- |")
    control_base = np.median(controls[1])
    for threads in modes:
        median = np.median(totals[threads])
        print(f"| {threads} | {median * 1e3:.1f} | {median / base:.2f} | {np.median(firsts[threads]) * 1e3:.1f}"
              f" | {np.median(cpus[threads]) * 1e3:.1f} | {np.median(controls[threads]) / control_base:.2f} |")
    if CPU_SECONDS[0]:
        print(f"\nthreads=1: {released / CPU_SECONDS[0]:.0%} of fill_masks' CPU time ran without the GIL "
              f"({released * 1e3 / args.repeats:.1f} of {CPU_SECONDS[0] * 1e3 / args.repeats:.1f} ms a repeat, "
              f"in {sections / args.repeats:.0f} sections)")


if __name__ == "__main__":
    main()
