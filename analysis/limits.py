"""The limits of one build, checked while the work runs: a deadline and a memory budget.

A hostile pattern or schema must end in a clear error within bounded time
and memory, whoever asked for the build: the library as well as the CLI.
Counting states *after* a step is too late (a subset construction can fill
the machine before it returns), so the long loops of the analysis and the
build check a :class:`Limits` object as they go:

* :func:`check` between chunks of work (a branch of a schema's combinator
  product, a subset-construction state, a refinement round, a level of the
  token walk, a chunk of a big numpy step)
  raises :class:`~tokendfa.analysis.errors.TimeLimitError` once the
  deadline has passed. It costs one ``time.monotonic()`` call (~50 ns), so
  the loops call it often enough that a limit fires within a small fraction
  of a second of its deadline;
* :func:`check_memory` before a large allocation raises
  :class:`~tokendfa.analysis.errors.BuildLimitError` (with the bytes it
  would have needed as ``reached``) when the allocation passes the budget.

The limits of the current build live in a context variable, installed for
the duration of a build by :func:`limits` (``Index.from_regex(...,
time_limit=...)``, ``tokendfa build --time-limit``), so the functions of the
analysis need no extra parameter and a caller with no limit pays nothing.
A context variable is per thread: a thread the build starts (the lazy
index's background completion) installs the limits it was given itself.
Nothing here uses signals, so a limit works in any thread and leaves no
half-done state behind: the error unwinds the build like any other. The
few calls that cannot check the deadline (Python's regex parser, jsonschema's
meta-schema check) run in a thread the caller stops waiting for at the
deadline, and that thread is stopped then (:func:`call_within_deadline`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import BuildLimitError, TimeLimitError

__all__ = ["Limits", "limits", "current", "check", "check_memory", "default_memory_budget", "excluded",
           "excluded_seconds",
           "MEMORY_BUDGET_CAP"]

# A build's largest tables may take at most this much by default: with the
# copies numpy makes around them, a build stays near 2 GB of memory, which a
# 24 GB machine shared by several processes can afford. Measured: the
# largest table of the eager subset construction at its bound (400k states x
# 256 bytes x 4) is 0.4 GB, the token walk of a 200k-state pattern keeps
# about 3,000 behaviours (2.4 GB would be needed past that).
MEMORY_BUDGET_CAP = 1 << 30
# ... and at least this much, however little memory is available.
_DEFAULT_BUDGET_FLOOR = 256 << 20


def default_memory_budget() -> int:
    """Bytes a build's largest tables may take unless told otherwise: half of
    the memory available now, at most :data:`MEMORY_BUDGET_CAP`, at least 256 MiB."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        available = 8 << 30
    return max(min(available // 2, MEMORY_BUDGET_CAP), _DEFAULT_BUDGET_FLOOR)


@dataclass(frozen=True)
class Limits:
    """The bounds a build runs under. ``deadline`` is a ``time.monotonic()``
    time (None: no time limit), ``time_limit`` the seconds it was given (for
    the message), ``memory_budget`` bytes (None: :func:`default_memory_budget`)."""

    deadline: float | None = None
    time_limit: float | None = None
    memory_budget: int | None = None

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeLimitError(
                f"the build took longer than the time limit of {self.time_limit:g} s",
                reached=int(self.time_limit * 1000))

    @property
    def memory(self) -> int:
        return default_memory_budget() if self.memory_budget is None else self.memory_budget


_NO_LIMITS = Limits()
_current: contextvars.ContextVar[Limits] = contextvars.ContextVar("tokendfa_limits",
                                                                  default=_NO_LIMITS)


def current() -> Limits:
    """The limits of the build running in this context (none: no deadline, default memory)."""
    return _current.get()


def check() -> None:
    """Raise :class:`TimeLimitError` if the current build is past its deadline."""
    limits_now = _current.get()
    if limits_now.deadline is not None and time.monotonic() > limits_now.deadline:
        limits_now.check()


def call_within_deadline(function, *args):
    """``function(*args)`` for a call that cannot check the limits itself
    (Python's own regex parser: about 3 us a pattern character, so 1.8 s on a
    600,000-character pattern). With no deadline it is a plain call. With
    one, the call runs in a daemon thread and this returns its result or
    raises its exception; if the deadline passes first, this raises
    :class:`TimeLimitError` at once and stops the thread (:class:`_DeadlineCall`):
    the calls given here are pure Python with no side effects, so nothing is
    left half-done.
    """
    limits_now = _current.get()
    if limits_now.deadline is None:
        return function(*args)
    limits_now.check()   # past it already: nothing to start
    worker = _DeadlineCall(function, args)
    worker.start()
    while True:
        worker.join(max(0.0, limits_now.deadline - time.monotonic()))
        if worker.outcome is not None:
            break
        # past the deadline: TimeLimitError; a wake-up a hair early waits out the
        # rest of the time, not the whole call (which may run for seconds more)
        try:
            limits_now.check()
        except TimeLimitError:
            worker.stop()
            raise
    succeeded, value = worker.outcome
    if succeeded:
        return value
    raise value


class _Stopped(BaseException):
    """Raised inside a :class:`_DeadlineCall`'s thread to end a call nobody waits for."""


def _checkpoint() -> None:
    """A Python call: entering it is where the interpreter raises a pending
    asynchronous exception (the RESUME of a Python function checks for one)."""


class _DeadlineCall:
    """One call of :func:`call_within_deadline`, run in a daemon thread that
    can be stopped once nobody waits for it.

    A call left running kept a core busy for seconds after its build had
    raised, and slowed the builds after it: with the interpreter lock and the
    collector shared, a 1.5-million-character ``pattern`` whose parse was
    abandoned at a 0.5 s limit made each next build of it overshoot more
    (0.11, 0.24 then 0.37 s; over 1 s on a loaded CI machine). :meth:`stop`
    raises :class:`_Stopped` in the thread (``PyThreadState_SetAsyncExc``,
    delivered at its next bytecode boundary), so a stopped parse ends within
    microseconds. It is raised only while the call runs, under the lock the
    thread takes when the call ends, and the thread passes a checkpoint
    inside its handler after that, so it can never escape into the thread's
    machinery.
    """

    def __init__(self, function, args) -> None:
        import threading

        self.function, self.args = function, args
        self.outcome: "tuple[bool, object] | None" = None
        self._lock = threading.Lock()
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="tokendfa-deadline-call")

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            try:
                result = (True, self.function(*self.args))
            except _Stopped:
                raise
            except BaseException as exc:  # handed to the caller's thread
                result = (False, exc)
            with self._lock:
                self._running = False
                self.outcome = result
            _checkpoint()   # a stop sent as the call ended is raised here, not later
        except _Stopped:
            pass

    def stop(self) -> None:
        """End the call in its thread, if it still runs (without ctypes, it runs out)."""
        try:
            import ctypes
        except ImportError:   # an interpreter built without it
            return
        with self._lock:
            if not self._running or self._thread.ident is None:
                return
            self._running = False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._thread.ident), ctypes.py_object(_Stopped))


def check_memory(nbytes: int, what: "str | Callable[[], str]") -> None:
    """Raise :class:`BuildLimitError` if ``nbytes`` for ``what`` pass the memory
    budget; ``what`` may be a function that says it, called only then (the
    NFA construction checks before every fragment: formatting its message
    each time was ~1.5% of a lazy step that compiles a definition)."""
    budget = _current.get().memory_budget
    if budget is None:
        # The default budget is never below 256 MiB, and reading it asks the
        # system twice (os.sysconf): the NFA construction checks before every
        # fragment, 7,000 times on a typical schema (1.5 ms of a 20 ms first mask).
        if nbytes <= _DEFAULT_BUDGET_FLOOR:
            return
        budget = default_memory_budget()
    if nbytes > budget:
        if callable(what):
            what = what()
        raise BuildLimitError(
            f"{what} would need {nbytes / (1 << 20):,.0f} MiB, more than the memory budget of "
            f"{budget / (1 << 20):,.0f} MiB (raise memory_budget to build it anyway)",
            reached=int(nbytes))


def unchecked_bytes() -> int:
    """Bytes that :func:`check_memory` lets pass under the current limits
    whatever ``what`` is: a caller that checks before every small step (the
    NFA construction) skips the call below them."""
    budget = _current.get().memory_budget
    return _DEFAULT_BUDGET_FLOOR if budget is None else budget


@contextlib.contextmanager
def limits(time_limit: float | None = None, memory_budget: int | None = None):
    """Run the block under these limits (nested: the earlier deadline and the
    inner memory budget, when given, win). ``time_limit`` is in seconds."""
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be a positive number of seconds, not {time_limit!r}")
    outer = _current.get()
    deadline, shown = outer.deadline, outer.time_limit
    if time_limit is not None:
        mine = time.monotonic() + time_limit
        if deadline is None or mine < deadline:
            deadline, shown = mine, time_limit
    budget = outer.memory_budget if memory_budget is None else memory_budget
    token = _current.set(Limits(deadline, shown, budget))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


_excluded_total = [0.0]
_excluding: contextvars.ContextVar[bool] = contextvars.ContextVar("tokendfa_excluding", default=False)


@contextlib.contextmanager
def excluded():
    """Run the block outside the time limit: the deadline of this context moves
    later by the seconds the block took (nested blocks count once).

    For per-process work a build may happen to be the first to need, not the
    request's own: a vocabulary's tables and its encoder (~0.35 s for
    Qwen2.5's 151,665 tokens, made once and shared by every later build), what
    ``Vocabulary.prepare()`` does at a server's start-up. Counted, it made a
    short limit fire on whichever request came first, again on every retry
    while the tables were never finished, and moved every limit's overshoot
    by that much on a cold process."""
    if _excluding.get() or _current.get().deadline is None:
        yield
        return
    mark = _excluding.set(True)
    started = time.monotonic()
    try:
        yield
    finally:
        _excluding.reset(mark)
        spent = time.monotonic() - started
        _excluded_total[0] += spent
        now = _current.get()
        if now.deadline is not None:
            _current.set(Limits(now.deadline + spent, now.time_limit, now.memory_budget))


def excluded_seconds() -> float:
    """Seconds this process has spent in :func:`excluded` blocks under a deadline
    (a measurement's correction: the hostile corpus's runner subtracts it)."""
    return _excluded_total[0]


def run_under(limits_given: Limits):
    """A context manager installing ``limits_given`` as they are (for a thread the build starts)."""
    @contextlib.contextmanager
    def installed():
        token = _current.set(limits_given)
        try:
            yield limits_given
        finally:
            _current.reset(token)
    return installed()
