"""The build configuration: every choice a build makes besides its input.

A build takes a pattern (or its byte DFA), a vocabulary and one
:class:`BuildConfig`. The configuration is frozen and validated once, so the
functions of the build pass it down whole instead of threading each option
through every signature.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.limits import default_memory_budget, limits

METHODS = ("fast", "reference")
DEFAULT_MAX_STATES = 200_000
# States where at most this many bytes go on are walked byte by byte.
NARROW_MAX_BYTES = 8
# A fast build asked for n_jobs != 1 walks its signatures in parallel only
# when (wide states) x (signatures), the size of that walk, reaches this;
# below, it stays in process. Each worker gets the whole class table, and the
# parallel walk's own cost grew with it as fast as the walk: on qwen2.5
# (2-core machine shared with other work; whole build, n_jobs=1 / n_jobs=2,
# warm workers, median of 3), with the in-process walk in brackets:
#   a JSON string           17 states x 29k signatures    45 /  195 ms (15 ms)
#   four JSON strings       62 x 29k                      88 /  220 ms (15 ms)
#   a 4-property schema   2.7k x 61k                   2,346 / 4,117 ms (103 ms)
#   "[^"\\]{0,1000}"        8k x 5k                      567 /  735 ms (46 ms)
#   "[^"\\]{0,4000}"       32k x 5k                    1,985 / 2,414 ms (179 ms)
#   "[^"\\]{0,12000}"      96k x 5k (485M)             6,161 / 7,872 ms (426 ms)
# The parallel walk never paid there (its overhead was 2.4-4x the walk it
# split), and n workers save at most (1 - 1/n) of the walk: the walk goes
# parallel only from ~2 s of it in process (~1 ms per million at the top).
PARALLEL_MIN_WORK = 2_000_000_000


def memory_budget() -> int:
    """Bytes the build's largest tables may take by default: half of the
    memory available now, at most 1 GiB (see
    :func:`tokendfa.analysis.limits.default_memory_budget`), so a pathological
    pattern fails with a clear error instead of driving the machine into swap."""
    return default_memory_budget()


@dataclass(frozen=True)
class BuildConfig:
    """How to build an index (see :meth:`tokendfa.Index.from_regex`).

    ``method``: ``"fast"`` (signature walk) or ``"reference"`` (every token
    from every state; the definition). ``n_jobs`` and ``backend`` go to
    joblib for the fast build (``n_jobs=1`` and no backend: in process; a
    walk smaller than :data:`PARALLEL_MIN_WORK` stays in process anyway).
    ``max_states`` bounds the pattern's byte DFA (default
    :data:`DEFAULT_MAX_STATES`). ``progress`` shows a progress line on stderr
    for builds that take more than a second (``None``: when stderr is a
    terminal). ``memory_budget`` bounds the bytes of the build's largest
    tables, checked as they grow: the NFA, the subset construction, the
    minimisation, the token behaviour vectors (``None``: :func:`memory_budget`,
    at most 1 GiB). ``time_limit`` (seconds) stops the build with
    :class:`~tokendfa.analysis.errors.TimeLimitError` shortly after it
    runs out (``None``: no limit). ``narrow_max_bytes``: states where at most
    this many bytes go on are walked byte by byte. ``row_budget``: the bytes
    of token rows a lazy index keeps, past which the least recently used are
    dropped and computed again when asked (``None``:
    ``tokendfa.lazy.DEFAULT_ROW_BUDGET``, 32 MiB; no effect on an eager build).
    """

    method: str = "fast"
    n_jobs: int = 1
    backend: str | None = None
    max_states: int | None = None
    progress: bool | None = None
    memory_budget: int | None = None
    narrow_max_bytes: int = NARROW_MAX_BYTES
    time_limit: float | None = None
    row_budget: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown build method {self.method!r}: choose one of "
                             f"{', '.join(METHODS)}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError(f"time_limit must be a positive number of seconds, not {self.time_limit!r}")
        if self.memory_budget is not None and self.memory_budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, not {self.memory_budget!r}")
        if self.row_budget is not None and self.row_budget <= 0:
            raise ValueError(f"row_budget must be a positive number of bytes, not {self.row_budget!r}")
        if self.max_states is not None and self.max_states <= 0:
            raise ValueError(f"max_states must be a positive number, not {self.max_states!r}")

    def limits(self):
        """A context manager running a build under this configuration's time
        limit and memory budget (:mod:`tokendfa.analysis.limits`)."""
        return limits(self.time_limit, self.memory_budget)

    @property
    def state_limit(self) -> int:
        """The largest byte DFA (live states) this build accepts."""
        return DEFAULT_MAX_STATES if self.max_states is None else self.max_states

    @property
    def in_process(self) -> bool:
        """Whether the fast build walks in this process (no joblib) whatever its size."""
        return self.n_jobs == 1 and self.backend is None

    def walks_in_process(self, work: int) -> bool:
        """Whether a signature walk of ``work`` (wide states x signatures)
        stays in process: always with ``n_jobs=1`` and no backend, and below
        :data:`PARALLEL_MIN_WORK` whatever was asked (it would not pay)."""
        return self.in_process or work < PARALLEL_MIN_WORK
