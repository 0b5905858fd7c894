#!/usr/bin/env python
"""How many slow cold steps are a loop state's row with a few exceptions:
counts, not time.

Issue #30's design (HISTORY, "key rows walked by the automaton's side",
section 3): a row whose walk plan has a loop state ``L`` (``along[0]``)
could be made as L's row plus the tokens whose walk from the row's state
does not fall in step with their walk from ``L``. This tool sizes that over
the whole sample.

Input: the slow steps, from ``lazy_slow_steps.py --out FILE`` (each step's
best of its rounds; a step over ``--threshold-us`` is slow) and, optionally,
``lazy_step_census.py --json FILE`` (each step's parts, for the kind of the
slow steps that make no ``walk_row``). Each schema with a slow step is run
again in a fresh child as those tools do (the same steps in the same order:
the lazy walks are deterministic), and every compiled ``walk_row`` made in
a slow step is kept with the row's state and whether L's row is served at
that moment (``LazyIndex._masks``). After the schema's last step each kept
walk is replayed in Python over the final table. For each entry not in the
loop's rest (``picks`` < 0: its first byte's cell in the row's state), its
whole token (first byte included) is walked in lockstep from the row's state
and from L:

* ``merged``: the two walks are in one state at some offset d (the rest of
  the walk, its end and fate are then the same as from L: L's row has it);
  ``prefixes``: the distinct token prefixes up to that first meeting (what
  the design walks to find that the token is L's);
* ``apart``: never in one state (both die, or the ends differ, or one dies):
  the exceptions, walked in full; ``ends_differ`` / ``fate_differs`` of those
  (end state different, alive from one and dead from the other);
* ``rest``: entries of the loop's rest (they start in a loop state; L's own
  row walks them).

Each kept walk also says whether an earlier ``walk_row`` of the schema
had the same plan and L (``plan_walked_before``; the plan keyed by its
packed bytes' address, good for counting only): the design makes L's walk
of a plan once, so only the later rows of a (plan, L) gain.

The design's walk is ``prefixes + apart`` (a trie walk of the prefixes to
the meeting point, one a distinct prefix, plus the exceptions), against the
plan's entries today. A row is *near* L's when that is at most a tenth of
its entries (``--near``).

    python benchmarks/lazy_slow_steps.py --rounds 3 --threshold-ms 0.25 --out /tmp/steps.json
    python benchmarks/lazy_step_census.py --json /tmp/census.json
    python benchmarks/near_loop_census.py --steps /tmp/steps.json --census /tmp/census.json

Measured on e99a5ad (qwen2.5): see HISTORY.md, "Issue #30: rows near a loop
state's row, over the sample (measured on e99a5ad)".
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample
from support.isolation import ChildFailed, answer_in_child
from support.walks import measured_steps


def _replay(dfa, kept, lists: dict) -> dict:
    data, offsets, first_bytes, picks, along, state, served, step = kept
    if id(dfa) not in lists:  # the final table as lists, once a schema (the cells never change once resolved)
        lists[id(dfa)] = np.asarray(dfa.table).tolist()
    table = lists[id(dfa)]
    loop = int(along[0])

    def cell(s, c):
        nxt = table[s][c]
        if nxt < 0:  # not resolved by the run: resolve it now (the row's cell is then final)
            nxt = int(dfa.step(s, c))
        return nxt

    picks = np.asarray(picks)
    if picks.dtype == np.bool_ or picks.dtype == np.uint8:
        pick = np.where(picks.astype(bool), 0, -1)
    else:
        pick = picks.astype(np.int64)
    count = len(first_bytes)
    rest = rest_in_loop = merged = apart = ends_differ = fate_differs = 0
    merge_depth = Counter()
    prefixes = set()
    data = bytes(data)
    for i in range(count):
        if pick[i] >= 0:
            rest += 1
            rest_in_loop += int(along[pick[i]]) == loop
            continue
        token = bytes([int(first_bytes[i])]) + data[offsets[i]:offsets[i + 1]]
        a, b = state, loop
        met = None
        for d, c in enumerate(token):
            if a:
                a = cell(a, c)
            if b:
                b = cell(b, c)
            if a == b:
                met = d + 1
                break
            if not a and not b:
                break
        if met is not None:  # one state from there on (both dead at the same byte included): L's fate
            merged += 1
            merge_depth[met] += 1
            prefixes.add(token[:met])
        else:
            apart += 1
            ends_differ += a != b
            fate_differs += bool(a) != bool(b)
    return {"step": step, "entries": count, "rest": rest, "rest_in_loop": rest_in_loop, "merged": merged,
            "prefixes": len(prefixes), "apart": apart, "ends_differ": ends_differ, "fate_differs": fate_differs,
            "served": served, "self": state == loop, "loop": loop, "state": state,
            "merge_depth": dict(merge_depth.most_common(4))}


def _census(record, vocab, slow: set) -> list:
    from tokendfa.lazy import index as lazy_index

    native = lazy_index._cwalk
    kept: list = []
    dfas: list = []
    before: list = []  # each kept walk: the walk_rows of its plan and L before it (the design's L walk made)
    current = {"index": None, "state": None, "step": -1}
    proxy = types.SimpleNamespace(**{k: getattr(native, k) for k in dir(native) if not k.startswith("__")})
    original = native.walk_row
    compiled_row = lazy_index.LazyIndex._compiled_row

    def row(self, state):
        current["index"], current["state"] = self, state
        return compiled_row(self, state)

    plans: Counter = Counter()  # (the plan's packed bytes, L) -> walk_row calls so far, slow or not

    def walk_row(*args):
        (dfa, data, offsets, _first_row, first_bytes, picks, along, *_rest) = args
        loop = int(np.asarray(along)[0])
        plan = (np.asarray(data).__array_interface__["data"][0], len(first_bytes), loop)
        plans[plan] += 1
        if current["step"] in slow:
            index = current["index"]
            kept.append((np.array(data, copy=True), np.array(offsets, copy=True), np.array(first_bytes, copy=True),
                         np.array(picks, copy=True), np.array(along, copy=True), int(current["state"]),
                         loop in index._masks, current["step"]))
            dfas.append(dfa)
            before.append(plans[plan] - 1)
        return original(*args)

    proxy.walk_row = walk_row
    lazy_index._cwalk = proxy
    lazy_index.LazyIndex._compiled_row = row

    def start():
        current["step"] += 1

    measured_steps(record, vocab, start, lambda mark, step: None)
    served_at_end = set(current["index"]._masks) if current["index"] is not None else set()
    out = []
    lists: dict = {}
    for dfa, k, earlier in zip(dfas, kept, before):
        found = _replay(dfa, k, lists)
        found["plan_walked_before"] = earlier
        found["served_later"] = found["loop"] in served_at_end
        out.append(found)
    return out


def _kind(parts: dict | None) -> str:
    if not parts:
        return "?"
    return max(parts, key=parts.get)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", required=True, help="lazy_slow_steps.py --out FILE")
    parser.add_argument("--census", help="lazy_step_census.py --json FILE (the kinds of the other slow steps)")
    parser.add_argument("--threshold-us", type=float, default=250)
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--names", default="")
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--near", type=float, default=0.1, help="near: the design walks at most this share")
    parser.add_argument("--json", help="write every kept walk's record here")
    args = parser.parse_args(argv)
    steps = json.loads(Path(args.steps).read_text())
    census = json.loads(Path(args.census).read_text()) if args.census else {}
    threshold = args.threshold_us * 1e3
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    found: dict = {}
    slow_total = 0
    for record in named_sample(args.per_source, args.names):
        times = steps.get(record.name) or []
        slow = {i for i, ns in enumerate(times) if ns > threshold}
        slow_total += len(slow)
        if not slow:
            continue
        try:
            walks = answer_in_child(lambda record=record, slow=slow: _census(record, vocab, slow), 1200)
        except ChildFailed:
            print(record.name, "failed")
            walks = []
        found[record.name] = {"slow": sorted(slow), "walks": walks, "ns": {i: times[i] for i in slow}}
        print(f"{record.name}: {len(slow)} slow steps, {len(walks)} walk_row calls in them", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(found))
    # each slow step: near (its largest walk_row near L's row), far (a walk_row, not near), or its kind
    kinds: Counter = Counter()
    kinds_ns: Counter = Counter()
    totals: Counter = Counter()
    near_walks = []
    for name, f in found.items():
        by_step = defaultdict(list)
        for w in f["walks"]:
            by_step[w["step"]].append(w)
        parts = census.get(name) or []
        for step in f["slow"]:
            ns = f["ns"][step]
            ws = by_step.get(step)
            if ws:
                w = max(ws, key=lambda w: w["entries"])
                design = w["prefixes"] + w["apart"]
                share = design / max(w["entries"], 1)
                if w["self"]:
                    kind = "walk_row, the loop state's own row"
                else:
                    bucket = next(b for b in (args.near, 0.25, 0.5, 1e9) if share <= b)
                    kind = (f"walk_row, design/entries <= {bucket:g}" if bucket < 1e9 else "walk_row, design/entries > 0.5")
                    kind += " (L served)" if w["served"] else " (L not served)"
                    kind += ", plan+L walked before" if w["plan_walked_before"] else ", first of its plan+L"
                    if share <= args.near:
                        near_walks.append((name, w))
                for k in ("entries", "rest", "merged", "prefixes", "apart", "ends_differ", "fate_differs"):
                    totals[(kind, k)] += w[k]
            else:
                p = parts[step] if step < len(parts) else None
                kind = "no walk_row: " + _kind(p and p["parts"])
                if p and p["ns"] <= threshold:
                    kind += ", census step under threshold"
                if p and p["walks"]:
                    kind += " (" + "+".join(sorted({x[0] for x in p["walks"]})) + ")"
            kinds[kind] += 1
            kinds_ns[kind] += ns
    print(f"\n{slow_total} steps over {args.threshold_us:g} us (best of the --steps rounds)")
    for kind, n in kinds.most_common():
        line = f"  {n:4d}  {kinds_ns[kind] / 1e6:7.1f} ms  {kind}"
        if kind.startswith("walk_row"):
            line += "  | a step: " + ", ".join(f"{k} {totals[(kind, k)] / n:,.0f}" for k in
                                              ("entries", "rest", "merged", "prefixes", "apart", "ends_differ",
                                               "fate_differs"))
        print(line)
    by_schema = Counter(name for name, _ in near_walks)
    print("near rows by schema: " + ", ".join(f"{k} {v}" for k, v in by_schema.most_common()))
    loops = Counter((name, w["loop"]) for name, w in near_walks)
    print(f"distinct (schema, L) among near rows: {len(loops)}; served later: "
          f"{sum(1 for _, w in near_walks if w['served_later'])} of {len(near_walks)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
