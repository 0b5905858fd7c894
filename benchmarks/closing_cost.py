"""What closing within a token budget costs a step: a warm step far from the
budget (the check only) and near it (restricted masks), against the same
step with no budget.

``python benchmarks/closing_cost.py [VOCAB] [--steps N]``: one schema, one
generation (the tokenizer's encoding of a fixed document) walked once to
warm the lazy index's rows, then every step's ``write_mask_into`` + ``advance``
timed over N passes: with no budget, with a budget far away (``max_tokens``
10,000: the check alone), and with the least budget closing can keep (the
document's length or the schema's bound from the start, whichever is
larger: every step near it, restricted masks, first pass cold, later ones
from the index's kept rows). VOCAB: a built-in vocabulary name or a tokenizer folder
(default ``gemma``: Gemma 3 270M's, from ``examples/gemma_model.py``).

``--batch N``: ``benchmarks/bench_vllm.py``'s batch replayed without vLLM,
N times: its 4 schemas, the 16 documents Gemma 3 270M wrote for its prompts
(its cold batch, closing on), re-encoded, 16 guides stepped together as the
logits processor steps them (``write_mask_into`` a row each, then
``advance``; a row that took EOS serves the EOS row), ``max_tokens`` 128.
Cold: fresh lazy indexes each time (their construction timed apart), warm:
the same again; with closing on and off, alternating so that a slow spell of
the shared machine falls on both (CPU seconds of this process, here and in
``--schemas``: other jobs on a shared machine move them less than wall
time). ``--profile``: cProfile of one cold
replay with closing on, the top functions by own time.

``--schemas N``: the first N JSONSchemaBench object schemas of a fixed
shuffle (seed 0) that build as lazy indexes within 3 s, a random generation
each (long tokens preferred, EOS taken half the time it is allowed, made once
with closing on, ``max_tokens`` 512), replayed token by token on fresh
indexes with closing on and off: what closing costs cold on real schemas
(with ``--profile``: where, closing on).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city", "zip"]},
    "score": {"type": "number"}}, "required": ["name", "age", "address"]}
DOCUMENT = {"name": "Ada Lovelace", "age": 36, "tags": ["maths", "engines", "poetry"],
            "address": {"city": "London", "zip": "W1"}, "score": 9.5}


# bench_vllm.py's cold batch: Gemma 3 270M's texts, greedy, closing within
# max_tokens 128 (benchmarks/RESULTS.vllm.md, 2026-11-27).
BATCH_DOCUMENTS = [
    ('person', '{"name":"John","age":18,"email":"john@gmail.com","tags":[".","","",""]}'),
    ('person', '{"name":": ","age":18,"email":"admin@gmail.com","tags":[]}'),
    ('person', '{"name":": ","age":10,"email":"email@email.com","tags":["","email@email.com","email@email.com",'
               '"email@email.com"]}'),
    ('person', '{"name":"test_1","age":1,"email":"test_1@gmail.com","tags":[">test_1",">test_1",">test_1",'
               '">test_1"]}'),
    ('weather', '{"city":"","condition":"sunny","celsius":10.8,"humidity":0}'),
    ('weather', '{"city":"","condition":"fog","celsius":10.0,"humidity":0}'),
    ('weather', '{"city":"Tokyo","condition":"sunny","celsius":10.8,"humidity":0}'),
    ('weather', '{"city":"","condition":"fog","celsius":0,"humidity":0}'),
    ('order', '{"id":1234,"customer":"1234,1234,1234,1234,1234,1234,12","lines":[{"sku":"1234","quantity":12,'
              '"price":120000000000000000000000000000000000000000000}],"paid":false}'),
    ('order', '{"id":10000000000000000000000000000000000000000000000000000,"customer":"10000000","lines":'
              '[{"sku":"100000000","quantity":10,"price":100000000000000}],"paid":false}'),
    ('order', '{"id":10000000000000000000000000000000000000000000000000000,"customer":"1000000000","lines":'
              '[{"sku":"1000000000","quantity":1,"price":1000000000000000000}],"paid":false}'),
    ('order', '{"id":1,"customer":"1","lines":[{"sku":"100000000000","quantity":1,"price":'
              '1000000000000000000000000000000000000000000000000000000000000000000000000}],"paid":false}'),
    ('event', '{"title":"The 2019-2020 school year is here, and I","date":"2020-20-20","attendees":["2020-20-20",'
              '"2020-20-20","2020-20-20","2020-20-20","2020-20-20","20"],"online":false,"room":null}'),
    ('event', '{"title":"The 2022-2023 School Year","date":"2022-01-20","attendees":["]","date_joined"],'
              '"online":false,"room":"1000000000"}'),
    ('event', '{"title":"><a href=\\"https://www.eventbrite.com/ --","date":"2021-01-28","attendees":["1","2",'
              '"3","4","5","6"],"online":false,"room":null}'),
    ('event', '{"title":"The 2019 World Cup of Soccer: The 2019 U","date":"2019-09-20","attendees":["1","2","3",'
              '"4","5","6"],"online":false,"room":null}'),
]
BATCH_MAX_TOKENS = 128


def vocabulary(name: str):
    from tokendfa import Vocabulary

    if name == "gemma":
        sys.path.insert(0, str(ROOT / "examples"))
        from gemma_model import gemma3_270m

        return Vocabulary.from_pretrained(gemma3_270m())
    if Path(name).is_dir():
        return Vocabulary.from_pretrained(name)
    return Vocabulary.builtin(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vocab", nargs="?", default="gemma")
    parser.add_argument("--steps", type=int, default=20, help="passes over the document (default 20)")
    parser.add_argument("--batch", type=int, default=0, metavar="N",
                        help="replay bench_vllm.py's batch N times, cold and warm, closing on and off")
    parser.add_argument("--profile", action="store_true", help="profile one cold replay, closing on")
    parser.add_argument("--schemas", type=int, default=0, metavar="N",
                        help="cold random generations over N JSONSchemaBench schemas, closing on and off")
    parser.add_argument("--walks", type=Path, help="--schemas: keep the generations in this file (made "
                        "once, read back by later runs)")
    args = parser.parse_args(argv)
    from tokendfa import Guide, Index

    vocab = vocabulary(args.vocab)
    vocab.prepare(eager=False)
    if args.schemas:
        return schemas(vocab, args.schemas, args.profile, args.walks)
    if args.batch or args.profile:
        return batch(vocab, args.batch, args.profile)
    index = Index.from_schema(SCHEMA, vocab)
    tokens = vocab.encode(json.dumps(DOCUMENT, separators=(",", ":"))) + [vocab.eos_token_ids[0]]
    words = (vocab.size + 31) // 32
    out = np.zeros((1, words), dtype=np.int32)

    def walk(max_tokens):
        guide = Guide(index, max_tokens=max_tokens)
        times = []
        for token in tokens:
            t = time.perf_counter()
            guide.write_mask_into(out, 0)
            times.append(time.perf_counter() - t)
            guide.advance(token)
        return times

    walk(None)   # the rows, warm
    exact = max(len(tokens), index.finish_bound(index.initial_state))   # the budget closing can keep
    print(f"{vocab.name}: {vocab.size:,} tokens; a document of {len(tokens)} tokens (EOS included); "
          f"the schema's bound from the start: {index.finish_bound(index.initial_state)} tokens")
    first_near = walk(exact)
    for label, budget in (("no budget", None), ("far (10,000)", 10_000), (f"near ({exact})", exact)):
        runs = [walk(budget) for _ in range(args.steps)]
        steps = [t for run in runs for t in run]
        print(f"  {label:>14}: write_mask_into p50 {statistics.median(steps) * 1e6:7.1f} us, "
              f"mean {statistics.fmean(steps) * 1e6:7.1f} us a step")
    print(f"  near, first pass (rows of the budget computed): mean "
          f"{statistics.fmean(first_near) * 1e6:.1f} us a step, worst {max(first_near) * 1e3:.2f} ms")
    return 0


def batch(vocab, rounds: int, profile: bool) -> int:
    from tokendfa import Guide, Index

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_vllm import SCHEMAS

    eos = vocab.eos_token_ids[0]
    documents = [(name, vocab.encode(text) + [eos]) for name, text in BATCH_DOCUMENTS]
    words = (vocab.size + 31) // 32
    bitmask = np.zeros((len(documents), words), dtype=np.int32)
    eos_row = np.zeros(words, dtype=np.int32)
    eos_row[eos >> 5] = np.int32(np.uint32(1 << (eos & 31)).view(np.int32))

    def build():
        return {name: Index.from_schema(schema, vocab, lazy=True) for name, schema in SCHEMAS.items()}

    def replay(indexes, close: bool) -> float:
        start = time.process_time()   # CPU time: the machine is shared
        guides = []
        for name, _ in documents:
            index = indexes[name]
            # as the processor's _budgeted: the bound from the start, then the guide
            fits = close and index.finish_bound(index.initial_state, BATCH_MAX_TOKENS) <= BATCH_MAX_TOKENS
            guides.append(Guide(index, max_tokens=BATCH_MAX_TOKENS if fits else None))
        open_ = [True] * len(guides)
        for step in range(BATCH_MAX_TOKENS):
            for k, guide in enumerate(guides):
                if open_[k]:
                    guide.write_mask_into(bitmask, row=k)
                else:
                    bitmask[k] = eos_row
            for k, (guide, (_, tokens)) in enumerate(zip(guides, documents)):
                if open_[k]:
                    guide.advance(tokens[step])
                    open_[k] = tokens[step] != eos
        return time.process_time() - start

    print(f"{vocab.name}: bench_vllm.py's batch, {len(documents)} documents of "
          f"{min(len(t) for _, t in documents)}-{max(len(t) for _, t in documents)} tokens over "
          f"{len(SCHEMAS)} schemas, max_tokens {BATCH_MAX_TOKENS}")
    if profile:
        import cProfile
        import pstats

        indexes = build()
        profiler = cProfile.Profile()
        profiler.enable()
        replay(indexes, True)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return 0
    figures: dict[tuple[str, bool], list[float]] = {}
    builds = []
    for _ in range(rounds):
        for close in (False, True):
            t = time.perf_counter()
            indexes = build()
            builds.append(time.perf_counter() - t)
            figures.setdefault(("cold", close), []).append(replay(indexes, close))
            figures.setdefault(("warm", close), []).append(replay(indexes, close))
    print(f"  lazy indexes built in {statistics.median(builds) * 1e3:.0f} ms (median; not in the figures)")
    for kind in ("cold", "warm"):
        off, on = statistics.median(figures[kind, False]), statistics.median(figures[kind, True])
        print(f"  {kind}: closing off {off * 1e3:7.1f} ms, on {on * 1e3:7.1f} ms (median of {rounds}; "
              f"closing costs {(on - off) * 1e3:+.1f} ms, {on / off:.2f}x)")
    return 0


def schemas(vocab, count: int, profile: bool, kept: Path | None = None) -> int:
    import random

    from tokendfa import Guide, Index
    from tokendfa.analysis.limits import limits

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from support.data import records, source_names

    budget = 512
    chosen = [r for source in source_names() for r in records(source)]
    random.Random(0).shuffle(chosen)
    rng = np.random.default_rng(0)
    lengths = np.array([len(t) if t is not None else 1 for t in vocab.tokens], dtype=float)
    eos = set(vocab.eos_token_ids)
    walks = []
    if kept is not None and kept.exists():
        walks = [tuple(walk) for walk in json.loads(kept.read_text())][:count]
    for record in chosen if len(walks) < count else ():
        if len(walks) == count:
            break
        if not isinstance(record.schema, dict):
            continue
        try:
            with limits(time_limit=3):
                index = Index.from_schema(record.schema, vocab, lazy=True)
        except Exception:  # noqa: BLE001 - not every record builds: the next one
            continue
        guide = Guide(index, max_tokens=budget)
        tokens = []
        while not guide.ended and guide.remaining > 0:
            allowed = guide.get_tokens()
            text = np.array([t for t in allowed.tolist() if t not in eos], dtype=np.int64)
            if not len(text) or (len(text) < len(allowed) and rng.random() < 0.5):
                token = int(next(t for t in allowed.tolist() if t in eos))
            else:
                token = int(rng.choice(text, p=lengths[text] / lengths[text].sum()))
            tokens.append(token)
            guide.advance(token)
        walks.append((record.label, record.schema, tokens))
    if kept is not None:
        kept.write_text(json.dumps(walks))
    words = (vocab.size + 31) // 32
    out = np.zeros((1, words), dtype=np.int32)

    def replay(schema, tokens, close: bool) -> float:
        index = Index.from_schema(schema, vocab, lazy=True)
        start = time.process_time()   # CPU time: the machine is shared
        fits = close and index.finish_bound(index.initial_state, budget) <= budget
        guide = Guide(index, max_tokens=budget if fits else None)
        for token in tokens:
            guide.write_mask_into(out, 0)
            guide.advance(token)
        return time.process_time() - start

    print(f"{vocab.name}: {len(walks)} JSONSchemaBench schemas, random generations of "
          f"{sum(len(t) for *_, t in walks)} tokens in all, max_tokens {budget}")
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _, schema, tokens in walks:
            replay(schema, tokens, True)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return 0
    total = {False: 0.0, True: 0.0}
    for label, schema, tokens in walks:
        off, on = replay(schema, tokens, False), replay(schema, tokens, True)
        total[False] += off
        total[True] += on
        print(f"  {label:>22}: {len(tokens):4d} tokens, closing off {off * 1e3:8.1f} ms, on {on * 1e3:8.1f} ms")
    print(f"  all: closing off {total[False]:.2f} s, on {total[True]:.2f} s "
          f"(closing costs {total[True] - total[False]:+.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
