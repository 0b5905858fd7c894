#!/usr/bin/env python
"""What a cold row's trie walk visits, against an enumeration from the
automaton's side: counts, not time.

Runs the lazy walks of the named schemas as MaskBench does (a fresh child
each, after the warm-up schema) and keeps the arguments of every compiled
``walk_row`` of at least ``--min-entries`` entries. After the schema's last
step (so that the run itself is not disturbed), each kept walk is replayed
in Python over the automaton's table:

* the trie walk as ``_cwalk.first_pass`` does it (entries in spelling
  order, a shared prefix resumed, a run of entries sharing the byte the
  previous one died at passed over with no byte read): entries walked,
  entries passed over, table cells read, and the depth at which each entry
  dies (its first byte is the row's own cell, depth 1);
* an enumeration from the automaton's side: from each live trie node
  (a prefix of some entries, its state) only the state's live bytes are
  looked up among the node's children (a binary search of the sorted
  spellings each): live nodes, live bytes probed, children found, and the
  spellings' comparisons of the searches; and the hybrid that at each node
  takes the cheaper of scanning its children and probing its live bytes;
* what a cache could reuse across rows: the walked entries whose path
  passes through the plan's loop state (``along[0]``; ``at_loop_start``
  those that start there), the distinct (start state, prefix) trie nodes
  where they first reach it (``subtrees``: what a cache's lookups would
  be), and ``again``: those whose (entry, offset, loop state) an earlier
  row of the same plan already met (their walk from there is the same:
  cells never change once resolved);
* the row against its loop state's row: ``differs``, the entries (the
  loop's rest left out) whose whole token walked from the loop state ends
  in another state than from the row's own start, ``fate_differs`` those
  alive from one and dead from the other (a few examples are printed), and
  ``ends_elsewhere``, the alive entries that do not end in the loop state.

A state's live bytes are read from its full row (``dfa.row``), materialised
after the run. The walk's own cells are those the run resolved. Checked
against the compiled walk: each row's mask bits are its loop mask's plus
the replay's alive entries (o73917's 13,029-entry plan: 135,343 + 11,658 =
147,001; o65424's 7,547: 140,825 + 6,176).

    python benchmarks/key_row_census.py --names o73917,o65424
    python benchmarks/key_row_census.py --names o73917 --min-entries 1   # every walk_row, and totals

Measured on 7075d53 (qwen2.5): see HISTORY.md, "Issue #30: key rows
walked by the automaton's side (measured, not merged)".
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.data import named_sample
from support.isolation import ChildFailed, answer_in_child
from support.walks import measured_steps

TRIE_DEPTH = 64


def _starts(first_row, first_bytes, picks, along):
    picks = np.asarray(picks)
    if picks.dtype == np.bool_ or picks.dtype == np.uint8:
        pick = np.where(picks.astype(bool), 0, -1)
    else:
        pick = picks.astype(np.int64)
    out = np.asarray(first_row, dtype=np.int64)[np.asarray(first_bytes)]
    return np.where(pick >= 0, np.asarray(along, dtype=np.int64)[np.maximum(pick, 0)], out)


def _replay(dfa, walk) -> dict:
    data, offsets, starts, shared, loop_state, first_bytes = walk
    table = dfa.table
    rows: dict = {}

    def row(state):
        if state not in rows:
            rows[state] = np.asarray(dfa.row(state))
        return rows[state]

    count = len(starts)
    entries = [bytes(data[offsets[i]:offsets[i + 1]]) for i in range(count)]
    # the trie walk (first_pass, trie on): cells read, entries passed over
    read = passed = walked = alive = loop_reads = ends_elsewhere = 0
    collapse = {}  # walked entry -> the offset in its packed bytes where it is first in the loop state
    die_depth: Counter = Counter()
    previous, path, known, dead_from = -1, [0] * (TRIE_DEPTH + 1), 0, None
    i = 0
    while i < count:
        s = int(starts[i])
        share = int(shared[i]) if (shared is not None and s == previous) else 0
        previous = s
        if dead_from is not None and share > dead_from:
            passed += 1
            die_depth[dead_from + 2] += 1
            i += 1
            continue
        b = entries[i]
        share = min(share, len(b))
        path[0] = s
        resume = min(share, known)
        current = path[resume]
        at, fate = resume, 1
        hit = 0 if s == loop_state else None
        for d in range(1, resume + 1):
            if hit is None and path[d] == loop_state:
                hit = d
        while at < len(b):
            read += 1
            loop_reads += current == loop_state
            nxt = int(table[current, b[at]])
            if nxt < 0:  # not resolved by the run (never expected): resolve it now
                nxt = int(dfa.step(current, b[at]))
                table = dfa.table
            if nxt == 0:
                fate = 0
                break
            current = nxt
            at += 1
            if hit is None and current == loop_state:
                hit = at
            if at <= TRIE_DEPTH:
                path[at] = current
        known = min(at, TRIE_DEPTH)
        walked += 1
        if hit is not None:
            collapse[i] = hit
        if fate:
            alive += 1
            ends_elsewhere += current != loop_state
            dead_from = None
        else:
            dead_from = at
            die_depth[at + 2] += 1
        i += 1
    # the row against its loop state's: entries whose whole token (first
    # byte included) walked from the loop state ends elsewhere (or dies
    # where the other lives) than from the row's own start
    differs = fate_differs = 0
    examples = []
    ends = {}
    for i in range(count):
        if int(starts[i]) == loop_state:  # the loop's rest, packed from its resume point: the same walk
            continue
        for origin in ("row", "loop"):
            if origin == "row":
                current, b = int(starts[i]), entries[i]
            else:
                current, b = loop_state, bytes([int(first_bytes[i])]) + entries[i]
            for c in b:
                nxt = int(dfa.table[current, c])
                if nxt < 0:
                    nxt = int(dfa.step(current, c))
                current = nxt
                if not current:
                    break
            ends[origin] = current
        differs += ends["row"] != ends["loop"]
        fate_differs += (ends["row"] > 0) != (ends["loop"] > 0)
        if ends["row"] != ends["loop"] and len(examples) < 12:
            examples.append((bytes([int(first_bytes[i])]) + entries[i], int(starts[i]), ends["row"], ends["loop"]))
    # the enumeration: per start state, a trie node (depth, state, lo, hi)
    nodes = probes = found = comparisons = hybrid = children_total = 0
    wide = 0
    by_state = defaultdict(list)
    for i in range(count):
        by_state[int(starts[i])].append(entries[i])
    for s, group in by_state.items():
        group.sort()
        stack = [(0, s, 0, len(group))]
        while stack:
            depth, state, lo, hi = stack.pop()
            nodes += 1
            # entries ending here are alive; the rest have a byte at depth
            while lo < hi and len(group[lo]) == depth:
                lo += 1
            if lo >= hi:
                continue
            live = np.flatnonzero(row(state))
            probes += len(live)
            # children present (what a scan of the node's entries meets)
            kids = []
            k = lo
            while k < hi:
                c = group[k][depth]
                j = k
                while j < hi and group[j][depth] == c:
                    j += 1
                kids.append((c, k, j))
                k = j
            children_total += len(kids)
            hybrid += min(len(kids), len(live))
            if len(live) > len(kids):
                wide += 1
            comparisons += len(live) * 2 * max(1, math.ceil(math.log2(hi - lo + 1)))
            cells = row(state)
            for c, k, j in kids:
                nxt = int(cells[c])
                if nxt:
                    found += 1
                    stack.append((depth + 1, nxt, k, j))
    return {"entries": count, "differs": differs, "fate_differs": fate_differs, "examples": repr(examples), "collapse": collapse, "plan": hash((bytes(data), bytes(np.asarray(offsets)))),
            "at_loop_start": sum(1 for d in collapse.values() if d == 0),
            "collapsed": len(collapse), "loop_state": loop_state, "ends_elsewhere": ends_elsewhere,
            "subtrees": len({(int(starts[i]), entries[i][:d]) for i, d in collapse.items()}), "loop_reads": loop_reads, "walked": walked, "passed": passed, "alive": alive, "read": read,
            "die_depth": dict(sorted(die_depth.items())), "start_states": len(by_state), "nodes": nodes,
            "probes": probes, "found": found, "children": children_total, "hybrid": hybrid,
            "wide_nodes": wide, "comparisons": comparisons}


def _census(record, vocab, least) -> list:
    import types

    from tokendfa.lazy import index as lazy_index

    native = lazy_index._cwalk
    kept: list = []
    dfas: list = []
    info: list = []
    proxy = types.SimpleNamespace(**{k: getattr(native, k) for k in dir(native) if not k.startswith("__")})
    original = native.walk_row

    def walk_row(*args):
        (dfa, data, offsets, first_row, first_bytes, picks, along, *_rest) = args
        shared = args[13]
        if len(first_bytes) >= least:
            starts = _starts(first_row, first_bytes, picks, along)
            kept.append((np.array(data, copy=True), np.array(offsets, copy=True), starts,
                         None if shared is None else np.array(shared, copy=True), int(np.asarray(along)[0]),
                         np.array(first_bytes, copy=True)))
            dfas.append(dfa)
        result = original(*args)
        if len(first_bytes) >= least:
            mask = np.frombuffer(result[0], dtype=np.uint32)
            loop_mask = args[8]
            info.append((int(np.unpackbits(mask.view(np.uint8)).sum()),
                         None if loop_mask is None else int(np.unpackbits(np.asarray(loop_mask).view(np.uint8)).sum()),
                         len(result[1]), int(np.asarray(along)[0])))
        return result

    proxy.walk_row = walk_row
    lazy_index._cwalk = proxy
    measured_steps(record, vocab, lambda: None, lambda mark, step: None)
    return [dict(_replay(dfa, walk), info=i) for dfa, walk, i in zip(dfas, kept, info)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default="o73917,o65424")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--min-entries", type=int, default=3000)
    args = parser.parse_args(argv)
    from tokendfa import Index, Vocabulary

    vocab = Vocabulary.builtin(args.vocab).prepare()
    Index.from_schema({"type": "boolean"}, vocab, lazy=True)
    for record in named_sample(args.per_source, args.names):
        try:
            walks = answer_in_child(lambda record=record: _census(record, vocab, args.min_entries), 1200)
        except ChildFailed:
            print(record.name, "failed")
            continue
        print(f"{record.name}: {len(walks)} walk_row calls of >= {args.min_entries} entries")
        by_size = defaultdict(list)
        seen = defaultdict(set)  # plan -> (entry, offset) pairs in the loop state met by an earlier row
        for w in walks:
            pairs = {(i, d, w["loop_state"]) for i, d in w["collapse"].items()}
            w["again"] = len(pairs & seen[w["plan"]])
            seen[w["plan"]] |= pairs
        for w in walks:
            by_size[w["entries"]].append(w)
        keys = ("differs", "fate_differs", "ends_elsewhere", "at_loop_start", "collapsed", "subtrees", "again", "loop_reads", "walked", "passed", "alive", "read", "start_states", "nodes", "probes", "found", "children",
                "hybrid", "wide_nodes", "comparisons")
        print("  entries calls " + " ".join(f"{k:>8s}" for k in keys))
        print("  all     " + f"{len(walks):5d} " + " ".join(f"{sum(w[k] for w in walks):8.0f}" for k in keys)
              + f"  entries {sum(w['entries'] for w in walks)}")
        for size, group in sorted(by_size.items(), key=lambda kv: -len(kv[1]) * kv[0]):
            means = [sum(w[k] for w in group) / len(group) for k in keys]
            print(f"  {size:7d} {len(group):5d} " + " ".join(f"{m:8.0f}" for m in means))
        for size, group in sorted(by_size.items(), key=lambda kv: -len(kv[1]) * kv[0])[:4]:
            print("  ", size, group[1]["examples"] if len(group) > 1 else "")
            print("  ", size, "mask bits, loop bits, successors, loop state:", group[0]["info"],
                  "alive", group[0]["alive"])
            depths: Counter = Counter()
            for w in group:
                depths.update(w["die_depth"])
            print(f"  {size} dies at depth (mean a call): "
                  + ", ".join(f"{d}:{n / len(group):.0f}" for d, n in sorted(depths.items(), key=lambda x: int(x[0]))[:8]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
