"""Write the index files of one old commit (run with THAT commit's code).

The import package was called ``index`` before the rename to ``tokendfa``,
so this script imports ``index``; it is kept as the record of how the
committed files were made, not run by the tests. Usage (see README.md)::

    python write_old_files.py OUT_DIR LABEL

writes ``OUT_DIR/LABEL-*.tdfa`` and adds them to ``OUT_DIR/manifest.json``.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from index import Index, Vocabulary

# The toy vocabulary of tests/conftest.py, spelled out again: the old
# commits' conftest may differ, and the files must not depend on it.
TOY_TOKENS = [
    b"a", b"b", b"c", b"x", b"-", b" ", b"1", b"2", b"5", b"0",
    b".", None, b'"', b"{", b"}", b":", b",", None, b"abc", b"1.",
    b".5", b"12", b"ab", b'"a', b"\xc3", b"\xa9", "é".encode(), "日".encode(), b"ab", b"a.",
]

# (name, pattern): small enough to store raw with the toy vocabulary.
TOY_PATTERNS = [
    ("number", r"-?[0-9]+(\.[0-9]+)?"),
    ("repeated_group", r"(ab)+"),
    ("unicode_literals", r"é|日本"),      # 日本 cannot be finished: a dropped branch
    ("object", r'\{"a":(12|5|0)\}( ,)?'),
]
REAL = [  # compressed only; at eed9023 the first stores its masks as runs, the second as row deltas
    ("qwen_object", r'\{"id":(0|[1-9][0-9]?),"ok":(true|false)\}', "qwen2.5"),
    ("qwen_letters", r'\{"a":"[a-z]{0,2}","b":[0-9]\}', "qwen2.5"),
]


def main() -> None:
    out, label = Path(sys.argv[1]), sys.argv[2]
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
    can_choose = "compress" in inspect.signature(Index.save).parameters
    toy = Vocabulary(TOY_TOKENS, eos_token_ids=11, name="toy")
    jobs = [(name, pattern, toy, "toy") for name, pattern in TOY_PATTERNS]
    if can_choose:  # a raw file holds the whole per-token table: 600 kB and more for Qwen
        jobs += [(name, pattern, Vocabulary.builtin(vocab), vocab) for name, pattern, vocab in REAL]
    for name, pattern, vocabulary, vocab_name in jobs:
        index = Index.from_regex(pattern, vocabulary, lazy=False)
        forms = ["default"]
        if can_choose:
            forms = ["compressed"] + (["raw"] if vocab_name == "toy" else [])
        for form in forms:
            path = out / f"{label}-{name}-{form}.tdfa"
            if form == "default":
                index.save(path)
            else:
                index.save(path, compress=form == "compressed")
            manifest = [m for m in manifest if m["file"] != path.name]
            manifest.append({"file": path.name, "commit": commit, "pattern": pattern,
                             "vocabulary": vocab_name, "form": form})
    manifest.sort(key=lambda m: m["file"])
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
