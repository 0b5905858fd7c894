"""The build's progress line on stderr, shown only for builds that take a while."""

from __future__ import annotations

import sys
import time


class Progress:
    """A one-line progress report on stderr, shown only once a build has
    taken longer than a moment (so quick builds stay silent)."""

    def __init__(self, enabled: bool | None = None, *, delay: float = 1.0, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled = enabled
        self.started = time.perf_counter()
        self.delay = delay
        self.shown = False

    def update(self, stage: str, done: int | None = None, total: int | None = None) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        if elapsed < self.delay:
            return
        amount = f" {done}/{total}" if done is not None and total else ""
        self.stream.write(f"\rtokendfa: {stage}{amount} ({elapsed:.1f} s)\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
