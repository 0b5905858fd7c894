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
    args = parser.parse_args(argv)
    from tokendfa import Guide, Index

    vocab = vocabulary(args.vocab)
    vocab.prepare(eager=False)
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


if __name__ == "__main__":
    raise SystemExit(main())
