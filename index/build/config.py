"""The build configuration: every choice a build makes besides its input.

A build takes a pattern (or its byte DFA), a vocabulary and one
:class:`BuildConfig`. The configuration is frozen and validated once, so the
functions of the build pass it down whole instead of threading each option
through every signature.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

METHODS = ("fast", "reference")
DEFAULT_MAX_STATES = 200_000
# States where at most this many bytes go on are walked byte by byte.
NARROW_MAX_BYTES = 8


def memory_budget() -> int:
    """Bytes the build's largest tables may take: half of the memory
    available now (so a pathological pattern fails with a clear error
    instead of driving the machine into swap or the OOM killer)."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        available = 8 << 30
    return max(available // 2, 256 << 20)


@dataclass(frozen=True)
class BuildConfig:
    """How to build an index (see :meth:`tokendfa.Index.from_regex`).

    ``method``: ``"fast"`` (signature walk) or ``"reference"`` (every token
    from every state; the definition). ``n_jobs`` and ``backend`` go to
    joblib for the fast build (``n_jobs=1`` and no backend: in process).
    ``max_states`` bounds the pattern's byte DFA (default
    :data:`DEFAULT_MAX_STATES`). ``progress`` shows a progress line on stderr
    for builds that take more than a second (``None``: when stderr is a
    terminal). ``memory_budget`` bounds the bytes of token behaviour vectors
    (``None``: :func:`memory_budget` at the time of the walk).
    ``narrow_max_bytes``: states where at most this many bytes go on are
    walked byte by byte.
    """

    method: str = "fast"
    n_jobs: int = 1
    backend: str | None = None
    max_states: int | None = None
    progress: bool | None = None
    memory_budget: int | None = None
    narrow_max_bytes: int = NARROW_MAX_BYTES

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown build method {self.method!r}: choose one of "
                             f"{', '.join(METHODS)}")

    @property
    def state_limit(self) -> int:
        """The largest byte DFA (live states) this build accepts."""
        return DEFAULT_MAX_STATES if self.max_states is None else self.max_states

    @property
    def in_process(self) -> bool:
        """Whether the fast build walks in this process (no joblib)."""
        return self.n_jobs == 1 and self.backend is None
