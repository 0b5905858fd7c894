"""Writing the reports: number formats, quantiles of call times, markdown tables."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import Iterable, Sequence

import numpy as np


def fmt_us(x: float | None) -> str:
    if x is None:
        return "–"
    if x < 10:
        return f"{x:.2f}"
    if x < 1000:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def fmt_seconds(s: float) -> str:
    if s < 0.01:
        return f"{s * 1000:.1f} ms"
    if s < 1:
        return f"{s:.3f} s"
    if s < 100:
        return f"{s:.2f} s"
    return f"{s:.0f} s"


def fmt_ms(seconds: list[float] | None) -> str:
    """The median of ``seconds``, in ms."""
    if not seconds:
        return "–"
    ms = statistics.median(seconds) * 1000
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:,.0f}"


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def pct(part: int, whole: int) -> str:
    return "–" if whole == 0 else f"{100.0 * part / whole:.1f}%"


def stats_us(ns, weights=None) -> dict[str, float] | None:
    """Median, p90, p99, max and mean (µs) of call times in ns; None when empty.
    With ``weights``, the quantiles are weighted (inverse of the weighted
    distribution function)."""
    a = np.asarray(ns, dtype=np.float64) / 1000.0
    if a.size == 0:
        return None
    w = np.ones_like(a) if weights is None else np.asarray(weights, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    a, w = a[order], w[order]
    cum = np.cumsum(w)
    total = cum[-1]

    def q(p: float) -> float:
        return float(a[min(int(np.searchsorted(cum, p * total, side="left")), a.size - 1)])

    return {"n": int(a.size), "median": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": float(a[-1]),
            "mean": float((a * w).sum() / total)}


def table(head: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """A markdown table; ``align`` has one letter a column, ``l`` or ``r``
    (missing letters: the first column left, the others right)."""
    letters = align.ljust(len(head), "r") if align else "l" + "r" * (len(head) - 1)
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join(" --- " if a == "l" else " ---: " for a in letters) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(cell).replace("|", "&#124;") for cell in row) + " |")
    return out


def top_reasons(messages: Iterable[str], top: int = 15) -> list[str]:
    """Failure messages counted, most frequent first, as markdown list lines;
    paths and long quoted names are folded so that like failures count together."""
    counts: Counter = Counter()
    for message in messages:
        message = " ".join(message.split())   # one line: a list item must not break
        message = re.sub(r" at /\S*", " at …", message)
        message = re.sub(r"'[^']{30,}'", "'…'", message)
        counts[message[:150]] += 1
    return [f"- {count} × {reason}" for reason, count in counts.most_common(top)]


def targets_section(verdicts: Iterable[tuple[str, str, str]]) -> list[str]:
    """The "Targets" section: one row per (target, verdict, how it was judged)."""
    rows = [(target, f"**{verdict}**", how) for target, verdict, how in verdicts]
    return ["## Targets", "", *table(("target", "result", "how it was judged"), rows, align="lll"), ""]
