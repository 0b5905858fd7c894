"""Masks for a whole batch of generations at once: one call per decoding step.

A server decoding a batch asks every generation's mask at each step. On a
lazy index (:class:`~tokendfa.lazy.LazyIndex`) a state seen for the first
time has a token row to compute first (a *cold* row: a fraction of a
millisecond to a few), and a batch of new schemas has one per generation.
:func:`fill_masks` computes the cold rows of different indexes on a small
pool of threads, then writes every mask into one buffer of int32/uint32 rows
(the layout of ``Guide.write_mask_into`` and of xgrammar's token bitmask).

Threads pay only where rows run in parallel: the compiled walk of a row,
the states it discovers in the lazy core's native state store, the mask
it makes of them, and numpy's larger passes release the GIL (see ``tokendfa/lazy/_cwalk.c`` and
``tokendfa/analysis/_lazycore.c``); building a row's loop set and walk plan,
first calls of definitions and closures through calls do not, and they are
most of a cold row today, so the default is the calling thread alone
(:data:`DEFAULT_MASK_THREADS`). Rows of one lazy index are computed one
after another (its lock), so the work is split by index: the calling thread
and the pool's take the indexes one at a time from a shared iterator. A
batch whose cold rows all belong to one index, or that has fewer than two,
is computed on the calling thread. An index read from arrays has no cold
rows.

May import: the standard library and numpy (a runtime module: see
:mod:`tokendfa.runtime`).
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from .guide import Guide

__all__ = ["fill_masks", "DEFAULT_MASK_THREADS"]

# Threads for a batch's cold rows when the caller names none. One (the
# calling thread alone) while a cold row holds the GIL for most of its time:
# on 16 new JSONSchemaBench schemas decoded in lockstep (qwen2.5,
# benchmarks/bench_batch.py) the rows ran without it for 33% of their CPU
# time (the walk, its packing, the states it discovers and the mask it
# makes; _cwalk and _lazycore's released_ns()), in ~950 sections of ~12 us
# a run of 64 steps: too short for a thread woken when the GIL is let go to
# take it before it is taken back, so two threads spent ~1.15x the serial
# CPU time and took ~1.15x as long on the shared 2-core machine.
# Raise it (or pass ``threads``) where rows run mostly without the GIL.
DEFAULT_MASK_THREADS = 1

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _shared_pool(threads: int) -> ThreadPoolExecutor:
    """One pool for the process, grown when a call asks for more threads
    (starting a thread costs ~50-100 us, more than a warm batch)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tokendfa-masks")
            _pool_size = threads
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _compute_rows(index, states: list[int]) -> None:
    for state in states:
        index.get_mask(state)


class _Groups:
    """The groups ``(index, states)`` of a batch's cold rows, taken one at a
    time by the calling thread and the pool's. Only the groups a pool thread
    has *taken* are waited for: a pool thread that starts after the calling
    thread has taken the last group (it waits for the GIL first, up to the
    switch interval while the caller runs Python) finds nothing and ends on
    its own. Waiting for every job instead made each step of a batch whose
    rows mostly hold the GIL wait for a wake-up and a hand-off of the GIL to
    a job that computed nothing, which a loaded machine makes long: on 16
    new JSONSchemaBench schemas (benchmarks/bench_batch.py, qwen2.5, paired
    runs under load) two threads spent 1.7-2.1x the serial CPU time in
    fill_masks (270-830 context switches a run of 64 steps) and took
    1.75-3.4x as long; waiting only for taken groups, 1.13-1.15x the CPU
    (150 switches) and 1.14-1.17x the time. On a quieter machine both were
    at ~1.15x."""

    __slots__ = ("_groups", "_lock", "_done", "_taken", "_finished", "_errors")

    def __init__(self, groups) -> None:
        self._groups = iter(groups)
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._taken = 0  # by pool threads
        self._finished = 0  # of those taken
        self._errors: list[BaseException] = []

    def _take(self, pooled: bool):
        with self._lock:
            group = next(self._groups, None)
            if group is not None and pooled:
                self._taken += 1
            return group

    def run_pooled(self) -> None:
        """A pool thread's job: groups until none is left; an error is kept
        for the calling thread to raise."""
        while True:
            group = self._take(True)
            if group is None:
                return
            try:
                _compute_rows(*group)
            except BaseException as error:  # noqa: BLE001 - raised by the calling thread
                with self._lock:
                    self._errors.append(error)
            finally:
                with self._lock:
                    self._finished += 1
                    self._done.notify_all()

    def run_calling(self) -> None:
        """The calling thread's part: groups until none is left, then wait for
        those the pool's threads took; raises the first error of any."""
        try:
            while True:
                group = self._take(False)
                if group is None:
                    break
                _compute_rows(*group)
        finally:
            with self._lock:
                for _ in self._groups:  # after an error here: nothing more is started
                    pass
                while self._finished < self._taken:
                    self._done.wait()
        if self._errors:
            raise self._errors[0]


def fill_masks(guides: Sequence[Guide | None], bitmask, rows: Sequence[int] | None = None, *,
               threads: int | None = None) -> None:
    """Write each guide's mask into ``bitmask`` (a numpy array or torch
    tensor of int32/uint32 words, ``[batch, words]``): guide ``i``'s into
    row ``rows[i]`` (default: row ``i``); a ``None`` guide leaves its row
    untouched. Works for guides over whole and lazy indexes alike, with the
    answers of :meth:`Guide.write_mask_into` one guide at a time.

    The cold rows of lazy indexes (states whose row is not computed yet)
    are computed first, on up to ``threads`` threads (default
    :data:`DEFAULT_MASK_THREADS`, 1: all on the calling thread) when they
    belong to two or more indexes, the calling thread one of them. An error computing a row (a
    :class:`~tokendfa.analysis.errors.BuildLimitError`, say) is raised here,
    as ``get_mask`` raises it. A row is bounded by its index's own
    ``time_limit`` and by the limits the caller runs under
    (``with tokendfa.analysis.limits.limits(...)``), on whichever thread it
    is computed."""
    if rows is None:
        rows = range(len(guides))
    elif len(rows) != len(guides):
        raise ValueError(f"fill_masks: {len(guides)} guides but {len(rows)} rows")
    threads = DEFAULT_MASK_THREADS if threads is None else max(1, int(threads))
    # The cold rows, by index (an index's rows are computed one after another).
    cold: dict[int, tuple[object, list[int]]] = {}
    for guide in guides:
        if guide is None or guide.ended:
            continue
        index, state = guide.index, guide.state
        if not index.row_ready(state):
            entry = cold.get(id(index))
            if entry is None:
                cold[id(index)] = (index, [state])
            elif state not in entry[1]:
                entry[1].append(state)
    if len(cold) >= 2 and threads >= 2:
        # The calling thread and threads - 1 of the pool's take the indexes'
        # groups one at a time from one iterator: one job a thread, not one
        # an index (a job's hand-off costs tens of microseconds, and a
        # batch of 16 new schemas has ~6 cold rows a step of ~0.15 ms each:
        # a job an index made two threads take 1.33x the serial time).
        groups = _Groups(list(cold.values()))
        pool = _shared_pool(threads - 1)
        # each job in a copy of the caller's context: the limits it runs under
        # (tokendfa.analysis.limits, a context variable) bound the pool's rows too
        for _ in range(min(threads, len(cold)) - 1):
            pool.submit(contextvars.copy_context().run, groups.run_pooled)
        groups.run_calling()  # waits for the groups the pool took; re-raises a row's error
    target = bitmask
    if type(bitmask) is not np.ndarray and getattr(bitmask, "is_cpu", False):
        # A CPU tensor's rows written through one numpy view of it, made
        # here once, where each row's write_mask_into given the tensor
        # checks it and looks its view up again: 4 warm rows of a lazy
        # index took 14.5 us into a tensor, 7.0 into a numpy array, and
        # 5.4 through the view (with the compiled copy; timeit, Qwen; the
        # transformers processor passes a tensor). Where the tensor has no
        # numpy view, each row says why as before.
        try:
            target = bitmask.numpy()
        except Exception:  # noqa: BLE001 - a dtype numpy lacks, a tensor needing grad
            target = bitmask
    for guide, row in zip(guides, rows):
        if guide is not None:
            guide.write_mask_into(target, row)
