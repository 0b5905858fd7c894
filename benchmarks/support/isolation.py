"""Run one measurement in a forked child: a clean slate, a hard timeout, a
memory limit, peak memory.

Every build in the benchmarks runs in a child forked from a process that has
already loaded the vocabulary (so loading is never timed), and nothing a
build leaves behind (caches, a warm joblib pool, a fragmented heap) can help
or hurt the next one. A child may be given an address-space limit
(``RLIMIT_AS``): an engine that runs out of memory then fails inside its own
child (an exception or an abort) instead of pushing the shared machine into
swap. (Checked: torch, xgrammar and llguidance import and work in a child
limited to 8 GiB whose parent holds them and a 151k vocabulary, about
0.9 GiB of address space.)

Peak memory is measured by the kernel, so it counts Rust and C allocations as
well as Python's: just before the build the child resets its own peak-RSS
mark (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0) and reads its current
RSS; after the build, peak memory is ``VmHWM - VmRSS_before``, i.e. the
highest resident set reached during the build above what the process already
held. Worker processes (joblib's loky pool) are measured the same way and
their peaks are added, which can only over-state the true simultaneous peak.

Linux only (fork, /proc). The child runs in its own process group, which the
parent kills after a timeout or once the child has answered, so a stuck
build or an orphaned worker pool never outlives its measurement.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import time
import traceback
from typing import Any, Callable

_KIB = 1024


def _status_kib(pid: int | str, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_bytes(pid: int | str = "self") -> int | None:
    kib = _status_kib(pid, "VmRSS")
    return None if kib is None else kib * _KIB


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    parent_of: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # Field 4 (ppid) comes after the command name, which is in parentheses
        # and may itself contain spaces or parentheses.
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) >= 2:
            parent_of[int(entry)] = int(rest[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        children = [c for c, pp in parent_of.items() if pp == p]
        found.extend(children)
        frontier.extend(children)
    return found


class PeakMeter:
    """Peak RSS increase of this process (and its worker processes) over an interval."""

    def __init__(self, with_children: bool = False) -> None:
        self.with_children = with_children
        self.method = "VmHWM-reset"
        self._base: dict[int | str, int] = {}

    def _pids(self) -> list[int | str]:
        pids: list[int | str] = ["self"]
        if self.with_children:
            pids.extend(descendants(os.getpid()))
        return pids

    def start(self) -> None:
        self._base = {}
        for pid in self._pids():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as fh:
                    fh.write("5")
            except OSError:
                # Without the reset the mark may predate the build: the number
                # is then an upper bound, and the report says so.
                self.method = "VmHWM (no reset: upper bound)"
            rss = _status_kib(pid, "VmRSS")
            if rss is not None:
                self._base[pid] = rss

    def stop(self) -> int:
        """Bytes: the sum over processes of (peak RSS - RSS at start)."""
        total = 0
        for pid, base in self._base.items():
            hwm = _status_kib(pid, "VmHWM")
            if hwm is not None:
                total += max(0, hwm - base)
        return total * _KIB


def forked(work: Callable[[], dict[str, Any]], describe: Callable[[Exception], str] = repr) -> dict[str, Any]:
    """``work()``'s JSON-able answer, run in a bare fork of this process:
    no process group, timer or memory reading around it (what
    :func:`run_in_child` adds), for measurements of the child's own first
    work (its page faults, its time to a first mask). An exception in the
    child answers ``{"error": describe(exc)}``; a child that dies answers
    ``{"error": "crashed"}``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            out = work()
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            out = {"error": describe(exc)}
        _write_all(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data or b'{"error": "crashed"}')


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` into a pipe (a write may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def limit_memory(gib: float) -> None:
    """Cap this process's address space at ``gib`` GiB (allocations past it fail)."""
    import resource

    limit = int(gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_in_child(fn: Callable[[], dict[str, Any]], timeout: float,
                 memory_gib: float | None = None) -> dict[str, Any]:
    """Run ``fn`` in a forked child and return its dict (JSON-serialisable).

    ``memory_gib``: the child's address-space limit (:func:`limit_memory`),
    set before ``fn`` runs; ``None`` leaves it unlimited.

    The answer always has ``pid`` (the child's) and ``status``: ``"ok"`` (with ``fn``'s keys),
    ``"error"`` (``fn`` raised: ``error`` holds the exception), ``"timeout"``
    (no answer within ``timeout`` seconds: the child's process group was
    killed) or ``"crashed"`` (the child died without answering, e.g. an abort
    on a failed allocation).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(read_end)
            os.setsid()  # its own process group, so the parent can kill its workers too
            try:
                if memory_gib is not None:
                    limit_memory(memory_gib)
                payload = {"status": "ok", **fn()}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:500],
                           "traceback": traceback.format_exc(limit=4)[-1500:]}
            _write_all(write_end, json.dumps(payload).encode())
            os.close(write_end)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)

    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], remaining)
            if not ready:
                continue
            data = os.read(read_end, 1 << 16)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(read_end)
        if timed_out:
            _kill_group(pid)
        # Wait for the child to end without reaping it, so its pid (and so its
        # process group id) cannot be reused before the group is killed.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        _kill_group(pid)  # whatever the child left behind (a joblib pool)
        _, wait_status = os.waitpid(pid, 0)
    if timed_out:
        return {"status": "timeout", "error": f"no result within {timeout:g} s", "pid": pid}
    if not chunks:
        how = (f"signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
               if os.WIFSIGNALED(wait_status) else f"exit code {os.WEXITSTATUS(wait_status)}")
        return {"status": "crashed", "error": f"child died without an answer ({how})", "pid": pid}
    try:
        return {**json.loads(b"".join(chunks)), "pid": pid}
    except ValueError:  # cut short: the child died while writing
        return {"status": "crashed", "error": "child's answer was cut short", "pid": pid}


class ChildFailed(Exception):
    """A child of :func:`answer_in_child` that gave no answer: it raised,
    died or ran past its time (the message says which)."""


def answer_in_child(work: Callable[[], Any], timeout: float) -> Any:
    """``work()``'s answer, computed in a child as :func:`run_in_child` runs
    one (bench_maskbench.py's children: its own process group, killed after
    ``timeout`` seconds or once it has answered), for the scripts that look
    into MaskBench's steps a schema at a time. The answer comes back as JSON
    carries it (a tuple as a list). Raises :class:`ChildFailed` where there
    is none.

    The parent runs ``gc.collect()`` and ``gc.freeze()`` first, as
    bench_maskbench.py's parent does before each fork (its default
    ``--fork-gc freeze``): without them a child's new tuples come from the
    parent's free lists, one to a page, and a definition's first call
    measured ~370 instead of ~270 us, with 38 faults instead of 22."""
    gc.collect()
    gc.freeze()
    result = run_in_child(lambda: {"answer": work()}, timeout)
    if result["status"] != "ok":
        raise ChildFailed(result["error"])
    return result["answer"]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
