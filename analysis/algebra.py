"""Intersection and difference of two regexes, written back as a regex.

A regex cannot say "matches ``a`` and ``b``" or "matches ``a`` but not
``b``", yet the language it is asked for is regular, so a regex for it
exists. The schema compiler needs that in a few places where JSON Schema
combines string constraints: two ``pattern`` on one string, ``pattern``
with ``format`` or with lengths, ``not {pattern}``, and member keys
(``patternProperties`` keys minus the declared names, keys that match none
of the patterns, the keys a negated ``patternProperties`` leaves).

How: both regexes (our dialect, over the JSON text) become byte DFAs with
the project's own compiler (:func:`tokendfa.analysis.regex_compiler.byte_tables_from_regex`);
their product is walked from the initial pair, keeping the pairs from which
an accepting pair can still be reached. UTF-8 sequences are folded back to
code points (a lead byte, then continuation bytes grouped by the state they
lead to), which gives a small automaton over code-point ranges, and
*state elimination* turns it into a regex (states with the fewest in x out
edges go first, which keeps the regex short).

The result can be much longer than its inputs (a counter of lengths times
the states of a pattern, say); past ``max_states`` product states or
``max_length`` characters :class:`NoExactRegex` is raised and the caller
reports the keyword, as for anything else it cannot write.
"""

from __future__ import annotations

import heapq
from functools import lru_cache

import numpy as np

from . import limits
from .graph import live_states
from .regex_syntax import regex_char
from .utf8 import merge_ranges

__all__ = ["intersect", "difference", "NoExactRegex"]

MAX_STATES = 2_000
MAX_LENGTH = 200_000


class NoExactRegex(ValueError):
    """The product is too large to write back as a regex within the limits."""


def intersect(a: str, b: str, *, max_states: int = MAX_STATES,
              max_length: int = MAX_LENGTH) -> str | None:
    """A regex for the texts both ``a`` and ``b`` match (None: there are none)."""
    return _combine(a, b, True, max_states, max_length)


def difference(a: str, b: str, *, max_states: int = MAX_STATES,
               max_length: int = MAX_LENGTH) -> str | None:
    """A regex for the texts ``a`` matches and ``b`` does not (None: there are none)."""
    return _combine(a, b, False, max_states, max_length)


def _tables(regex: str, max_states: int):
    from .errors import TimeLimitError, TokenDFAError
    from .regex_compiler import byte_tables_from_regex

    try:
        return byte_tables_from_regex(regex, max_dfa_states=max_states)
    except TimeLimitError:
        raise  # the build's deadline, not a side too large: swallowing it would lift the limit
    except TokenDFAError as exc:
        raise NoExactRegex(f"cannot compile a side of the product: {exc}") from None


@lru_cache(maxsize=512)  # a schema asks for the same product at every place a definition is used
def _combine(a: str, b: str, both: bool, max_states: int, max_length: int) -> str | None:
    ta, fa = _tables(a, max_states)
    tb, fb = _tables(b, max_states)
    # the product, from the initial pair (1, 1); pair (x, 0) is alive for a difference
    ids = {(1, 1): 1}
    pairs = [(0, 0), (1, 1)]
    rows: list[np.ndarray] = [np.zeros(256, dtype=np.int64)]
    nb = tb.shape[0]
    cursor = 1
    while cursor < len(pairs):
        limits.check()
        x, y = pairs[cursor]
        keys = ta[x].astype(np.int64) * nb + tb[y]
        row = np.zeros(256, dtype=np.int64)
        for key in np.unique(keys):
            nx, ny = divmod(int(key), nb)
            if nx == 0 or (both and ny == 0):
                continue
            target = ids.get((nx, ny))
            if target is None:
                target = ids[(nx, ny)] = len(pairs)
                pairs.append((nx, ny))
                if len(pairs) > max_states:
                    raise NoExactRegex(f"the product has more than {max_states:,} states")
            row[keys == key] = target
        rows.append(row)
        cursor += 1
    table = np.stack(rows)
    finals = np.array([x != 0 and fa[x] and (fb[y] if both else not fb[y]) for x, y in pairs])
    return regex_of_table(table, finals, max_length)


def _code_point_edges(table: np.ndarray, live: np.ndarray) -> dict:
    """``{(source, target): [(lo, hi) code point ranges]}`` for live states."""
    memo: dict = {}

    def tails(state: int, k: int) -> dict:
        """Targets after ``k`` continuation bytes from ``state``, as ranges of their payload."""
        key = (state, k)
        if key in memo:
            return memo[key]
        if k == 0:
            result = {state: [(0, 0)]} if live[state] else {}
        else:
            result: dict = {}
            span = 64 ** (k - 1)
            for c in range(64):
                nxt = int(table[state, 0x80 + c])
                if nxt == 0:
                    continue
                for target, ranges in tails(nxt, k - 1).items():
                    result.setdefault(target, []).extend(
                        (c * span + lo, c * span + hi) for lo, hi in ranges)
            result = {target: merge_ranges(ranges) for target, ranges in result.items()}
        memo[key] = result
        return result

    edges: dict = {}
    for state in np.flatnonzero(live):
        limits.check()
        state = int(state)
        for byte in range(0xF5):
            nxt = int(table[state, byte])
            if nxt == 0:
                continue
            if byte < 0x80:
                found = {nxt: [(0, 0)]} if live[nxt] else {}
                base, k = byte, 0
            elif 0xC2 <= byte < 0xE0:
                found, base, k = tails(nxt, 1), (byte & 0x1F) << 6, 1
            elif 0xE0 <= byte < 0xF0:
                found, base, k = tails(nxt, 2), (byte & 0x0F) << 12, 2
            elif 0xF0 <= byte:
                found, base, k = tails(nxt, 3), (byte & 0x07) << 18, 3
            else:
                continue
            for target, ranges in found.items():
                edges.setdefault((state, target), []).extend((base + lo, base + hi) for lo, hi in ranges)
    return {key: merge_ranges(ranges) for key, ranges in edges.items()}


def _class(ranges: list) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return regex_char(ranges[0][0], False)
    body = "".join(regex_char(lo, True) if lo == hi else
                   regex_char(lo, True) + ("" if hi == lo + 1 else "-") + regex_char(hi, True)
                   for lo, hi in ranges)
    return f"[{body}]"


# Regexes under construction: (text, kind), kind "eps" (the empty text), "atom"
# (safe to repeat or concatenate as is), "cat" (safe to concatenate), "alt".

def _group(r):
    return r[0] if r[1] == "atom" else f"(?:{r[0]})"


def _cat(*parts):
    parts = [p for p in parts if p[1] != "eps"]
    if not parts:
        return ("", "eps")
    if len(parts) == 1:
        return parts[0]
    return ("".join(p[0] if p[1] != "alt" else f"(?:{p[0]})" for p in parts), "cat")


def _union(a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    if a[1] == "eps":
        a, b = b, a
    if b[1] == "eps":
        return (_group(a) + "?", "atom") if a[1] != "eps" else a
    return (f"{a[0]}|{b[0]}", "alt")


def _star(r):
    if r is None or r[1] == "eps":
        return ("", "eps")
    return (_group(r) + "*", "atom")


def regex_of_table(table: np.ndarray, finals: np.ndarray, max_length: int) -> str | None:
    seeds = finals.copy()
    seeds[0] = False  # state 0 is dead (its row is all 0), whatever the caller's finals say
    live = live_states(table, seeds)
    if not live[1]:
        return None
    edges = {k: (_class(v), "atom") for k, v in _code_point_edges(table, live).items()}
    start, end = -1, -2
    edges[(start, 1)] = ("", "eps")
    for state in np.flatnonzero(live & finals):
        edges[(int(state), end)] = ("", "eps")
    outgoing: dict = {}
    incoming: dict = {}
    for (i, j) in edges:
        outgoing.setdefault(i, set()).add(j)
        incoming.setdefault(j, set()).add(i)
    def cost(s: int) -> int:
        return len(incoming.get(s, ())) * len(outgoing.get(s, ()))

    # a heap with an entry for every state's current cost (older entries are skipped):
    # the same order as taking the minimum each time, without a pass over all states
    remaining = {int(s) for s in np.flatnonzero(live)}
    queue = [(cost(s), s) for s in remaining]
    heapq.heapify(queue)
    while queue:
        limits.check()  # an elimination step joins up to in x out paths: checked each time
        score, state = heapq.heappop(queue)
        if state not in remaining or score != cost(state):
            continue
        remaining.discard(state)
        loop = edges.pop((state, state), None)
        ins = [i for i in incoming.pop(state, set()) if i != state]
        outs = [j for j in outgoing.pop(state, set()) if j != state]
        middle = _star(loop)
        for i in ins:
            outgoing[i].discard(state)
        for j in outs:
            incoming[j].discard(state)
        for i in ins:
            head = edges.pop((i, state))
            for j in outs:
                path = _cat(head, middle, edges[(state, j)])
                merged = _union(edges.get((i, j)), path)
                if len(merged[0]) > max_length:
                    raise NoExactRegex(f"the regex would exceed {max_length:,} characters")
                edges[(i, j)] = merged
                outgoing[i].add(j)
                incoming.setdefault(j, set()).add(i)
        for j in outs:
            edges.pop((state, j), None)
        for neighbour in {*ins, *outs} & remaining:
            heapq.heappush(queue, (cost(neighbour), neighbour))
    result = edges.get((start, end))
    if result is None:
        return None
    return result[0] if result[1] != "alt" else f"(?:{result[0]})"
