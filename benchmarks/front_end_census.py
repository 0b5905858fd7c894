"""What a compiled (C) schema front end would save on MaskBench's sample: keywords covered, and the tree phase's floor.

Three modes, for sizing the idea before anyone builds it (issue #29):

* ``--mode keywords``: the JSON Schema keywords and value shapes of each
  schema of the sample (``--per-source``; every subschema reached through
  the applicator keywords, ``$defs``/``definitions`` included), the
  keywords ranked by how many schemas use them, and the share of the
  schemas whose keywords all lie in the N most common (``--top-n``): what
  a front end covering those N would compile with no Python fallback.
  Annotations and unknown keys (title, description, default, examples,
  ``x-*``...) cost a front end nothing and are not counted as keywords.
  ``format`` and ``pattern`` are listed with their values: a format is a
  regex of its own, and a pattern needs an ECMA-262 regex reader.
* ``--mode replay``: each schema in children of one warmed parent
  (``ttfm_fork.py``'s method: ``gc.collect()``/``gc.freeze()`` before each
  fork, the warm-up schema built untimed in the child), alternating: (A)
  ``Index.from_schema`` with the top-level ``Compiler.value`` call timed
  (wall, CPU, faults; no profile hook), which also writes the final tree
  (the value's tree and the compiler's definitions) as a post-order
  description; (B) a child that builds only the nodes of that tree made in
  A's region from the description (through the ``regex_tree`` node
  constructors, interning as the compiler does; the nodes that existed
  before, the warm parent's shared pieces, are fetched untimed first, as a
  C front end's table of them would be), timed the same way: the part a C
  front end that still hands the Thompson builder Python nodes could not
  remove; then the same replay again in B's child, every node interned:
  the loop's own cost. A third child (D) counts the Python calls and
  distinct functions of the real region with a profile hook (counts only;
  its time is not read). ``--region front`` times the whole
  ``regex_from_schema`` call instead (shape walk, meta-schema check,
  resolver, compiler, tree, result): what a front end replacing all of it
  would leave.
* ``--mode ttfm``: the whole first mask (``Index.from_schema`` and
  ``get_mask``) in paired children: as it is, and with ``regex_from_schema``
  answered by the replay of its final trees (a ``SchemaRegex`` with the
  real child's notes and widenings; deferred definitions, with
  ``--matches``, from a stand-in source that answers what the real child's
  first mask asked). The bound of a front end that costs nothing, with
  all after it as it is; the first masks' digests are compared.
  ``--prebuilt`` makes the replayed nodes before the timer as well.

The schemas are the band ``--between`` (percentiles of wall time) of a
``ttfm_phases.py --out`` or ``ttfm_fork.py --out`` file (``--rows``), or
the whole sample.

    .venv/bin/python benchmarks/ttfm_phases.py --per-source 4 --out /tmp/phases.json
    .venv/bin/python benchmarks/front_end_census.py --mode keywords --rows /tmp/phases.json
    .venv/bin/python benchmarks/front_end_census.py --mode replay --rows /tmp/phases.json --pairs 3
    .venv/bin/python benchmarks/front_end_census.py --mode replay --region front --rows /tmp/phases.json --pairs 3
    .venv/bin/python benchmarks/front_end_census.py --mode ttfm --matches --rows /tmp/phases.json --pairs 3
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import pickle
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.data import sample, source_names
from benchmarks.support.isolation import forked

# keywords whose value is one subschema, a list of them, or a map of them
ONE = ("items", "additionalProperties", "additionalItems", "not", "contains", "propertyNames",
       "if", "then", "else", "unevaluatedProperties", "unevaluatedItems", "contentSchema")
MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
# keywords that assert or apply (what a front end must compile); any other key is an annotation
VALIDATION = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
    "unevaluatedProperties", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf", "not", "if",
    "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions",
    "contentEncoding", "contentMediaType", "contentSchema", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$id", "id",
}


def _shape(key: str, value) -> str | None:
    """A finer name for some keywords' values (what the front end must handle)."""
    if key == "type":
        return f"type:{'list' if isinstance(value, list) else value}"
    if key in ("enum", "const"):
        values = value if key == "enum" and isinstance(value, list) else [value]
        kinds = sorted({type(v).__name__ for v in values})
        return f"{key}:{'/'.join(kinds)}"
    if key == "format":
        return f"format:{value}"
    if key in ("additionalProperties", "items", "additionalItems", "unevaluatedProperties"):
        return f"{key}:{'bool-' + str(value).lower() if isinstance(value, bool) else type(value).__name__}"
    if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        return f"{key}:{type(value).__name__}"
    return None


def walk(schema, keys: Counter, shapes: Counter, seen: set) -> None:
    if not isinstance(schema, dict) or id(schema) in seen:
        return
    seen.add(id(schema))
    for key, value in schema.items():
        if key not in VALIDATION:
            continue
        keys[key] += 1
        shape = _shape(key, value)
        if shape:
            shapes[shape] += 1
        if key in ONE and isinstance(value, dict):
            walk(value, keys, shapes, seen)
        if key in MANY and isinstance(value, list):
            for item in value:
                walk(item, keys, shapes, seen)
        if key in MAP and isinstance(value, dict):
            for item in value.values():
                walk(item, keys, shapes, seen)


def band(rows_file: str | None, between: str, per_source: int):
    records = [r for s in source_names() for r in sample(s, per_source or None)]
    if not rows_file:
        return records, records
    rows = [r for r in json.loads(Path(rows_file).read_text()) if "ms" in r]
    rows.sort(key=lambda r: r["ms"])
    lo, hi = (float(x) / 100 for x in between.split(","))
    keep = {r["label"] for r in rows[int(lo * len(rows)):int(hi * len(rows))]}
    return records, [r for r in records if r.label in keep]


def _keywords_by_label(per_source: int) -> dict:
    out = {}
    for r in (r for s in source_names() for r in sample(s, per_source or None)):
        keys: Counter = Counter()
        walk(r.schema, keys, Counter(), set())
        out[r.label] = set(keys)
    return out


def keywords_mode(args) -> None:
    records, chosen = band(args.rows, args.between, args.per_source)
    per: dict = {}
    for r in records:
        keys, shapes = Counter(), Counter()
        walk(r.schema, keys, shapes, set())
        per[r.label] = (keys, shapes)
    for title, group in (("whole sample", records), (f"band {args.between}", chosen)):
        labels = [r.label for r in group]
        n = len(labels)
        by_schema = Counter(k for lab in labels for k in per[lab][0])
        uses = Counter()
        for lab in labels:
            uses.update(per[lab][0])
        print(f"{title}: {n} schemas; keywords by schemas using them (uses):")
        print("  " + ", ".join(f"{k} {c} ({uses[k]})" for k, c in by_schema.most_common()))
        shapes_by = Counter(s for lab in labels for s in per[lab][1])
        print("  shapes by schemas using them: " + ", ".join(f"{k} {c}" for k, c in shapes_by.most_common(60)))
        formats = Counter(s for lab in labels for s in per[lab][1] if s.startswith("format:"))
        print(f"  schemas with a format {sum(1 for lab in labels if any(s.startswith('format:') for s in per[lab][1]))}, "
              f"distinct formats {len(formats)}")
    # the ranking is the whole sample's; coverage on both
    ranking = [k for k, _ in Counter(k for r in records for k in per[r.label][0]).most_common()]
    for top in args.top_n:
        covered = set(ranking[:top])
        for title, group in (("whole sample", records), ("band", chosen)):
            ok = [r.label for r in group if set(per[r.label][0]) <= covered]
            print(f"N={top:2d} {title}: {len(ok)}/{len(group)} schemas use only these keywords "
                  f"({100 * len(ok) / max(len(group), 1):.0f}%)")
        missing = Counter(k for r in chosen for k in set(per[r.label][0]) - covered)
        print(f"  N={top}: {ranking[:top]}; the band's schemas left out need: "
              + ", ".join(f"{k} {c}" for k, c in missing.most_common(12)))
    for extra in ("pattern", "format"):
        for top in args.top_n:
            covered = set(ranking[:top]) - {extra}
            ok = sum(1 for r in chosen if set(per[r.label][0]) <= covered)
            print(f"N={top} less {extra} (a front end without it): band {ok}/{len(chosen)}")


def describe(regex, definitions, new: set) -> bytes:
    """The trees as post-order constructor calls: (tag, payload, made) with node
    fields as indices; ``made`` is False for a node that existed before the
    region (``new`` holds the ids of those interned in it)."""
    from tokendfa.analysis import regex_tree as rt

    index: dict = {}
    ops: list = []

    def visit(node):
        if id(node) in index:
            return index[id(node)]
        t = type(node)
        if t is rt.Chars:
            op = ("C", node.ranges)
        elif t is rt.Text:
            op = ("T", node.text)
        elif t is rt.Concat:
            op = ("K", tuple(visit(i) for i in node.items))
        elif t is rt.Alt:
            op = ("A", tuple(visit(i) for i in node.items))
        elif t is rt.Repeat:
            op = ("R", (visit(node.body), node.lo, node.hi))
        elif t is rt.Call:
            op = ("L", node.key)
        elif t is rt.LiteralSet:
            op = ("S", node.members)
        elif t is rt.Excluding:
            op = ("X", (node.names, node.single, visit(node.multi), visit(node.rest)))
        else:
            raise TypeError(t)
        index[id(node)] = len(ops)
        ops.append(op + (id(node) in new,))
        return index[id(node)]

    roots = [visit(regex)] if regex is not None else []
    for key, tree in list(definitions.items()):
        if isinstance(tree, rt.Node):
            roots.append((key, visit(tree)))
    return pickle.dumps((ops, roots))


def replay(ops, made: bool, built: list):
    """Build the nodes of ``ops`` whose flag is ``made`` into ``built`` (by index)."""
    from tokendfa.analysis import regex_tree as rt

    Chars, Text, Concat, Alt, Repeat, Call, LiteralSet, Excluding = (
        rt.Chars, rt.Text, rt.Concat, rt.Alt, rt.Repeat, rt.Call, rt.LiteralSet, rt.Excluding)
    count = 0
    for at, (tag, p, new) in enumerate(ops):
        if new is not made:
            continue
        count += 1
        if tag == "T":
            node = Text(p)
        elif tag == "K":
            node = Concat(tuple([built[i] for i in p]))
        elif tag == "A":
            node = Alt(tuple([built[i] for i in p]))
        elif tag == "C":
            node = Chars(p)
        elif tag == "R":
            node = Repeat(built[p[0]], p[1], p[2])
        elif tag == "S":
            node = LiteralSet(p)
        elif tag == "L":
            node = Call(p)
        else:
            node = Excluding(p[0], p[1], built[p[2]], built[p[3]])
        built[at] = node
    return count


def replay_mode(args) -> None:
    from tokendfa.analysis import regex_tree
    from tokendfa.schema import compiler

    from benchmarks.ttfm_fork import WARM_UP, warm_parent

    _, chosen = band(args.rows, args.between, args.per_source)
    from tokendfa.schema import api

    state = {"depth": 0, "active": None}
    if args.region == "tree":
        original = compiler.Compiler.value

        def wrapped(self, subs, depth):
            run = state["active"]
            if run is None or state["depth"]:
                return original(self, subs, depth)
            state["depth"] += 1
            try:
                return run(lambda: original(self, subs, depth), lambda regex: (regex, self.definitions))
            finally:
                state["depth"] -= 1

        compiler.Compiler.value = wrapped   # before the warm-up (see tree_fork_census.py)
    else:
        original = api.regex_from_schema

        def wrapped(*a, **k):
            run = state["active"]
            if run is None or state["depth"]:
                return original(*a, **k)
            state["depth"] += 1
            try:
                return run(lambda: original(*a, **k), lambda result: (result.tree, result.tree_definitions))
            finally:
                state["depth"] -= 1

        api.regex_from_schema = wrapped   # before the warm-up: the schema path keeps the name it finds
    vocab = warm_parent(args.vocab)
    from tokendfa import Guide, Index

    rusage, who, perf, cpu = resource.getrusage, resource.RUSAGE_SELF, time.perf_counter, time.process_time

    def real(record, hooked=False):
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        out = {}
        calls: Counter = Counter()

        def hook(frame, event, arg):
            if event == "call":
                calls[(frame.f_code.co_filename, frame.f_code.co_firstlineno)] += 1
            elif event == "c_call":
                calls[("C", getattr(arg, "__qualname__", "?"))] += 1

        def region(call, trees):
            mark = len(regex_tree._INTERNED)
            if hooked:
                sys.setprofile(hook)
            b0 = sys.getallocatedblocks()
            f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
            try:
                regex = call()
            finally:
                t1, c1, f1 = perf(), cpu(), rusage(who).ru_minflt
                sys.setprofile(None)
            out.update(ms=(t1 - t0) * 1e3, cpu=(c1 - c0) * 1e3, faults=f1 - f0,
                       interned=len(regex_tree._INTERNED) - mark, blocks=sys.getallocatedblocks() - b0)
            if hooked:
                py = {k: v for k, v in calls.items() if k[0] != "C"}
                out.update(py_calls=sum(py.values()), py_distinct=len(py),
                           c_calls=sum(calls.values()) - sum(py.values()),
                           c_distinct=len(calls) - len(py))
            else:
                new = {id(n) for n in list(regex_tree._INTERNED.values())[mark:]}
                blob = describe(*trees(regex), new)
                out["desc"] = base64.b64encode(blob).decode()
            return regex

        state["active"] = region
        Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
        return out

    def rebuilt(blob):
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        ops, _roots = pickle.loads(base64.b64decode(blob))   # the child's own objects, made before the region
        built = [None] * len(ops)
        replay(ops, False, built)   # the nodes that existed before the region (a C front end's table)
        replay([], True, [])        # the loop's code run once
        gc.disable()   # as regex_from_schema does around the compiler
        f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
        f1 = rusage(who).ru_minflt
        empty = f1 - f0
        f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
        made = replay(ops, True, built)
        t1, c1, f1 = perf(), cpu(), rusage(who).ru_minflt
        again0 = perf()
        replay(ops, True, built)
        again = (perf() - again0) * 1e3
        return {"ms": (t1 - t0) * 1e3, "cpu": (c1 - c0) * 1e3, "faults": f1 - f0, "nodes": made,
                "reachable": len(ops), "again_ms": again, "empty_faults": empty}

    if args.mode == "ttfm":
        return ttfm_pairs(args, chosen, vocab, state, Guide, Index, WARM_UP)
    rows = []
    for record in chosen:
        a_runs, b_runs = _paired_children(args.pairs, record, real, lambda blob, record: rebuilt(blob))
        if not a_runs:
            continue
        gc.collect()
        gc.freeze()
        d = forked(lambda record=record: real(record, hooked=True), describe=lambda exc: repr(exc))
        rows.append((record.label, a_runs, b_runs, d))

    def med(xs):
        return statistics.median(xs)

    def per_schema(runs, key):
        return [min(r[key] for r in rs) if key in ("ms", "cpu") else statistics.mean(r[key] for r in rs)
                for rs in runs]

    A = [r[1] for r in rows]
    B = [r[2] for r in rows]
    D = [r[3] for r in rows if "error" not in r[3]]
    print(f"{len(rows)} schemas, {args.pairs} pair(s) each; per schema the fastest of its children, "
          f"faults the mean; then mean (median) over the schemas")
    real_name = "real: Compiler.value" if args.region == "tree" else "real: regex_from_schema"
    for name, runs in ((real_name, A), ("replay: final tree only", B)):
        for key in ("ms", "cpu", "faults"):
            xs = per_schema(runs, key)
            print(f"  {name:34s} {key:6s} mean {statistics.mean(xs):7.3f}  median {med(xs):7.3f}")
    print(f"  nodes interned in the real region mean {statistics.mean(statistics.mean(x['interned'] for x in rs) for rs in A):.1f}; "
          f"new nodes reachable from the final trees (replayed) mean {statistics.mean(rs[0]['nodes'] for rs in B):.1f}, "
          f"all nodes reachable mean {statistics.mean(rs[0]['reachable'] for rs in B):.1f}; an empty region's faults "
          f"mean {statistics.mean(r['empty_faults'] for rs in B for r in rs):.2f}")
    print(f"  pymalloc blocks alive after the real region, net, mean "
          f"{statistics.mean(statistics.mean(x['blocks'] for x in rs) for rs in A):.0f}")
    print(f"  replay again in the same child (all nodes interned: the loop itself) mean "
          f"{statistics.mean(min(r['again_ms'] for r in rs) for rs in B):.4f} ms")
    ratio = [b / a for a, b in zip(per_schema(A, "ms"), per_schema(B, "ms"))]
    print(f"  paired ratio replay/real wall: median {med(ratio):.3f}")
    if D:
        for key in ("py_calls", "py_distinct", "c_calls", "c_distinct"):
            print(f"  hooked region {key:12s} mean {statistics.mean(d[key] for d in D):8.1f}  "
                  f"median {med([d[key] for d in D]):8.1f}")
    records = [r for s in source_names() for r in sample(s, args.per_source or None)]
    uses = {r.label: set() for r in records}
    for r in records:
        keys: Counter = Counter()
        walk(r.schema, keys, Counter(), set())
        uses[r.label] = set(keys)
    ranking = [k for k, _ in Counter(k for r in records for k in uses[r.label]).most_common()]
    for top in args.top_n:
        inside = [i for i, row in enumerate(rows) if uses[row[0]] <= set(ranking[:top])]
        if not inside:
            continue
        ra = [per_schema(A, "ms")[i] for i in inside]
        rb = [per_schema(B, "ms")[i] for i in inside]
        fa = [per_schema(A, "faults")[i] for i in inside]
        fb = [per_schema(B, "faults")[i] for i in inside]
        print(f"  schemas within the top {top} keywords: {len(inside)}/{len(rows)}; real mean {statistics.mean(ra):.3f} ms "
              f"{statistics.mean(fa):.1f} faults, replay mean {statistics.mean(rb):.3f} ms {statistics.mean(fb):.1f} faults; "
              f"saved summed over the band / the band's real sum: {(sum(ra) - sum(rb)) / sum(per_schema(A, 'ms')):.2f}")
    for label, a, b, d in rows:
        print(f"    {label:26s} real {min(x['ms'] for x in a):6.3f} ms {statistics.mean(x['faults'] for x in a):5.1f} f "
              f"| replay {min(x['ms'] for x in b):6.3f} ms {statistics.mean(x['faults'] for x in b):5.1f} f "
              f"{b[0]['nodes']:4d} nodes | py fns {d.get('py_distinct', '-')} calls {d.get('py_calls', '-')}")


def ttfm_pairs(args, chosen, vocab, state, Guide, Index, WARM_UP) -> None:
    """The whole first mask (Index.from_schema and get_mask) in a fresh fork:
    (A) as it is; (B) with regex_from_schema answered by the replay of its
    final trees (a SchemaRegex made from them, the notes and widenings
    copied). Schemas whose result defers recursion (it holds the compiler)
    are left out."""
    from tokendfa.schema.api import SchemaRegex

    rusage, who, perf, cpu = resource.getrusage, resource.RUSAGE_SELF, time.perf_counter, time.process_time

    def real(record):
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        got = {}

        def region(call, trees):
            result = call()
            got["result"] = result
            return result

        state["active"] = region
        mark = len(regex_tree_nodes())
        f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
        mask = Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
        t1, c1, f1 = perf(), cpu(), rusage(who).ru_minflt
        state["active"] = None
        result = got["result"]
        out = {"ms": (t1 - t0) * 1e3, "cpu": (c1 - c0) * 1e3, "faults": f1 - f0, "mask": _digest(mask)}
        deferred = None
        if result.deferred is not None:
            # what the lazy automaton asked of it by the first mask, answered again from the record
            comp = result.deferred.compiler
            keys = set(comp.definitions) | set(comp.pending) | set(comp.pieces)
            deferred = {key: (comp.matches_something(key) if args.matches else None) for key in keys}
        blob = describe(result.tree, result.tree_definitions, {id(n) for n in regex_tree_nodes()[mark:]})
        out["desc"] = base64.b64encode(pickle.dumps((blob, result.widenings, result.notes, result.draft,
                                                     deferred))).decode()
        out["deferred"] = deferred is not None
        return out

    def rebuilt(blob, record):
        Guide(Index.from_schema(WARM_UP, vocab, lazy=True)).get_mask()
        desc, widenings, notes, draft, deferred = pickle.loads(base64.b64decode(blob))
        ops, roots = pickle.loads(desc)
        built = [None] * len(ops)
        replay(ops, False, built)
        replay([], True, [])
        keys = [root for root in roots if isinstance(root, tuple)]

        if args.prebuilt:
            replay(ops, True, built)   # before the timed region: the nodes cost nothing there

        def region(call, trees):
            if not args.prebuilt:
                replay(ops, True, built)
            definitions = {key: built[at] for key, at in keys}
            return SchemaRegex(built[roots[0]], list(widenings), list(notes), draft, definitions,
                               None, None if deferred is None else _Recorded(definitions, deferred))

        state["active"] = region
        f0, c0, t0 = rusage(who).ru_minflt, cpu(), perf()
        mask = Guide(Index.from_schema(record.schema, vocab, lazy=True, time_limit=None)).get_mask()
        t1, c1, f1 = perf(), cpu(), rusage(who).ru_minflt
        state["active"] = None
        return {"ms": (t1 - t0) * 1e3, "cpu": (c1 - c0) * 1e3, "faults": f1 - f0, "mask": _digest(mask)}

    rows = []
    for record in chosen:
        a_runs, b_runs = _paired_children(args.pairs, record, real, rebuilt)
        if a_runs:
            rows.append((record.label, a_runs, b_runs))
    print(f"{len(rows)} of {len(chosen)} schemas ({sum(row[1][0]['deferred'] for row in rows)} with deferred "
          f"definitions, answered from a record), {args.pairs} pair(s) each; "
          f"per schema the fastest child, faults the mean; then mean and median over the schemas")
    for name, at in (("first mask as it is", 1), ("front end replayed", 2)):
        for key in ("ms", "cpu", "faults"):
            xs = [min(r[key] for r in row[at]) if key != "faults" else statistics.mean(r[key] for r in row[at])
                  for row in rows]
            print(f"  {name:22s} {key:6s} mean {statistics.mean(xs):7.3f}  median {statistics.median(xs):7.3f}")
    same = sum(all(r["mask"] == row[1][0]["mask"] for r in row[1] + row[2]) for row in rows)
    print(f"  first masks equal (real and replayed children) in {same} of {len(rows)} schemas")
    ratio = [min(r["ms"] for r in row[2]) / min(r["ms"] for r in row[1]) for row in rows]
    print(f"  paired ratio replayed/as is, wall: median {statistics.median(ratio):.3f}")
    uses = _keywords_by_label(args.per_source)
    ranking = [k for k, _ in Counter(k for ks in uses.values() for k in ks).most_common()]
    real_ms = [min(r["ms"] for r in row[1]) for row in rows]
    fake_ms = [min(r["ms"] for r in row[2]) for row in rows]
    for top in args.top_n:
        covered = set(ranking[:top])
        # a schema outside the N keywords falls back to the Python compiler: its time as it is
        mixed = [b if uses[row[0]] <= covered else a for row, a, b in zip(rows, real_ms, fake_ms)]
        print(f"  front end of the top {top} keywords ({sum(uses[row[0]] <= covered for row in rows)}/{len(rows)} "
              f"schemas, the others as they are): first mask median {statistics.median(mixed):.3f} ms, "
              f"mean {statistics.mean(mixed):.3f} (as is {statistics.median(real_ms):.3f}, {statistics.mean(real_ms):.3f})")


def _paired_children(pairs: int, record, real, rebuilt) -> tuple[list, list]:
    """Up to ``pairs`` pairs of fresh children of this (collected and frozen)
    parent: ``real(record)``, then ``rebuilt(its "desc", record)``; stops at
    the first child that fails or describes nothing."""
    a_runs, b_runs = [], []
    for _ in range(pairs):
        gc.collect()
        gc.freeze()
        a = forked(lambda: real(record), describe=repr)
        if "error" in a or "desc" not in a:
            break
        gc.collect()
        gc.freeze()
        b = forked(lambda desc=a["desc"]: rebuilt(desc, record), describe=repr)
        if "error" in b:
            print(record.label, b["error"])
            break
        a_runs.append(a)
        b_runs.append(b)
    return a_runs, b_runs


def _digest(mask) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha1(np.asarray(mask).tobytes()).hexdigest()


class _Recorded:
    """A DeferredDefinitions answered from the replayed definitions (those the
    first mask computed in the real child, all made in the region here)."""

    def __init__(self, definitions: dict, known: dict) -> None:
        self.definitions = definitions
        self.known = known
        self.computed = len(definitions)
        self.waiting = 0

    def defines(self, key) -> bool:
        return key in self.known

    def tree(self, key):
        return self.definitions[key]

    def matches_something(self, key) -> bool:
        said = self.known.get(key)
        if said is None:
            raise KeyError(key)
        return said


def regex_tree_nodes():
    """The nodes interned in this process, in the order they were made."""
    from tokendfa.analysis import regex_tree

    return list(regex_tree._INTERNED.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("keywords", "replay", "ttfm"), default="keywords")
    parser.add_argument("--per-source", type=int, default=4)
    parser.add_argument("--vocab", default="qwen2.5")
    parser.add_argument("--rows", default=None, help="ttfm_phases.py / ttfm_fork.py --out file")
    parser.add_argument("--between", default="25,75")
    parser.add_argument("--top-n", type=lambda s: [int(x) for x in s.split(",")], default=[10, 15, 20])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--prebuilt", action="store_true",
                        help="ttfm: the replay's nodes made before the timed region (no node made in it)")
    parser.add_argument("--matches", action="store_true",
                        help="ttfm: record matches_something of each deferred key (else the replay does not offer it)")
    parser.add_argument("--region", choices=("tree", "front"), default="tree",
                        help="replay: the region timed, the top-level Compiler.value call (tree) or the whole "
                             "regex_from_schema call (front: shape, meta check, resolver, tree, result)")
    args = parser.parse_args()
    if args.mode == "keywords":
        keywords_mode(args)
    else:
        if args.mode == "ttfm":
            args.region = "front"
        replay_mode(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
