"""The four engines of the serving benchmark, behind one small interface.

Every engine is given the very same regex string and the very same token ids
(our ``Vocabulary``'s), and is asked the same two things at every decoding
step: fill a token bitmask (or return the allowed tokens) for the current
state, and consume the sampled token.

* ours: :class:`tokendfa.Index` (``get_mask``, ``write_mask_into``, ``advance``)
  and :class:`tokendfa.Guide`;
* outlines-core 0.2.x: ``outlines_core.Index`` over an
  ``outlines_core.Vocabulary`` made from our token bytes, walked with
  ``outlines_core.Guide`` (``write_mask_into(data_ptr, numel, element_size)``,
  ``get_tokens()``, ``advance(token, return_tokens=False)``);
* xgrammar: ``TokenizerInfo`` over our token bytes (``VocabType.RAW``; ids
  without text are passed as ``b""``, which is how xgrammar marks a token
  special), ``GrammarCompiler.compile_regex``, ``GrammarMatcher``;
* llguidance 1.x: an ``LLTokenizer`` made from a ``TokenizerWrapper`` over our
  token bytes (ids without text get llguidance's special-token marker byte
  0xFF in front of a made-up name and are listed as special),
  ``LLMatcher(tokenizer, grammar_from("regex", regex))``,
  ``llguidance.numpy.fill_next_token_bitmask``.

The heavy imports (torch, xgrammar, llguidance) happen only in
:func:`make_engines`, after every build child has been forked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


def outlines_vocabulary(vocab):
    """outlines-core's vocabulary from our token bytes: every text token under
    its exact bytes (ids sharing bytes share an entry), ids without text left
    out, our preferred EOS id as outlines-core's only EOS."""
    import outlines_core

    by_bytes: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(vocab.tokens):
        if data is not None:
            by_bytes.setdefault(data, []).append(token_id)
    return outlines_core.Vocabulary(vocab.eos_token_id, by_bytes)


def allowed_from_words(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """A 32-bit-word bitset (bit i % 32 of word i // 32) as a bool array of
    ``vocab_size`` entries; padding bits past the vocabulary are dropped."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


@dataclass
class Tokenizers:
    """What each outside engine needs once per vocabulary (built once, shared)."""

    vocab: Any
    outlines_vocab: Any = None
    xgr_compiler: Any = None
    llg_tokenizer: Any = None
    setup_seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class _LLGuidanceTokenizerSource:
    """The duck-typed tokenizer ``llguidance.TokenizerWrapper`` wraps: token
    bytes, EOS/BOS, special ids, and an encoder (only used by llguidance for
    its own tokenization helpers, never in mask computation)."""

    def __init__(self, vocab) -> None:
        self._vocab = vocab
        self.eos_token_id = vocab.eos_token_id
        self.bos_token_id = None
        # 0xFF never occurs in UTF-8 text; llguidance reads a token starting
        # with it as a special token, never as bytes.
        self.tokens = [t if t is not None else b"\xff<|tokendfa_special_%d|>" % i
                       for i, t in enumerate(vocab.tokens)]
        self.special_token_ids = [i for i, t in enumerate(vocab.tokens) if t is None]

    def __call__(self, text: bytes) -> list[int]:
        return self._vocab.encode(text.decode("utf-8", errors="replace"))


def make_tokenizers(vocab, outlines_vocab, log: Callable[..., None]) -> Tokenizers:
    tk = Tokenizers(vocab=vocab, outlines_vocab=outlines_vocab)
    try:
        import xgrammar as xgr

        t0 = time.perf_counter()
        info = xgr.TokenizerInfo([b"" if t is None else t for t in vocab.tokens],
                                 xgr.VocabType.RAW, vocab_size=vocab.size,
                                 stop_token_ids=list(vocab.eos_token_ids), add_prefix_space=False)
        tk.xgr_compiler = xgr.GrammarCompiler(info)
        tk.setup_seconds["xgrammar"] = time.perf_counter() - t0
    except Exception as exc:  # an engine that cannot start is reported, not fatal
        tk.errors["xgrammar"] = f"{type(exc).__name__}: {exc}"
        log(f"  xgrammar unavailable: {tk.errors['xgrammar']}")
    try:
        import llguidance

        t0 = time.perf_counter()
        wrapper = llguidance.TokenizerWrapper(_LLGuidanceTokenizerSource(vocab))
        tk.llg_tokenizer = llguidance.LLTokenizer(wrapper, n_vocab=vocab.size,
                                                  eos_token=list(vocab.eos_token_ids))
        tk.setup_seconds["llguidance"] = time.perf_counter() - t0
    except Exception as exc:
        tk.errors["llguidance"] = f"{type(exc).__name__}: {exc}"
        log(f"  llguidance unavailable: {tk.errors['llguidance']}")
    return tk


# --- one engine on one regex: a fresh cursor per walk ------------------------------

class OursEngine:
    """Our index, served without a Guide (states are plain ints)."""

    name = "ours"

    def __init__(self, index) -> None:
        import torch

        self.index = index
        words = index.arrays.masks.shape[1]
        self.np_buf = np.zeros((1, words), dtype=np.int32)
        self.torch_buf = torch.zeros((1, words), dtype=torch.int32)
        self.state = index.initial_state

    def reset(self) -> None:
        self.state = self.index.initial_state

    def allowed(self) -> np.ndarray:
        return allowed_from_words(self.index.get_mask(self.state), self.index.vocab_size)

    def consume(self, token: int) -> bool:
        self.state = self.index.advance(self.state, token)
        return True


class OutlinesEngine:
    name = "outlines-core"

    def __init__(self, outlines_index, vocab_size: int) -> None:
        import outlines_core
        import torch

        self._cls = outlines_core.Guide
        self.index = outlines_index
        self.vocab_size = vocab_size
        self.words = (vocab_size + 31) // 32
        self.buf = torch.zeros((1, self.words), dtype=torch.int32)
        self.guide = self._cls(outlines_index)

    def reset(self) -> None:
        self.guide = self._cls(self.index)

    def allowed(self) -> np.ndarray:
        out = np.zeros(self.vocab_size, dtype=bool)
        out[np.asarray(self.guide.get_tokens(), dtype=np.int64)] = True
        return out

    def consume(self, token: int) -> bool:
        try:
            self.guide.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, compiled, vocab_size: int) -> None:
        import xgrammar as xgr

        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.vocab_size = vocab_size

    def reset(self) -> None:
        self.matcher.reset()

    def allowed(self) -> np.ndarray:
        self.matcher.fill_next_token_bitmask(self.bitmask)
        return allowed_from_words(self.bitmask.numpy()[0], self.vocab_size)

    def consume(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))


class LLGuidanceEngine:
    name = "llguidance"

    def __init__(self, tokenizer, grammar: str, vocab_size: int) -> None:
        import llguidance
        import llguidance.numpy as llnp

        self._make = lambda: llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        self.matcher = self._make()
        if self.matcher.is_error():
            raise RuntimeError(self.matcher.get_error())
        self.bitmask = llnp.allocate_token_bitmask(1, vocab_size)
        self.fill = llnp.fill_next_token_bitmask
        self.vocab_size = vocab_size

    def reset(self) -> None:
        # A fresh matcher per generation, as a server makes one per request
        # (the grammar string is reused; LLMatcher re-reads it, untimed).
        self.matcher = self._make()

    def allowed(self) -> np.ndarray:
        self.fill(self.matcher, self.bitmask)
        return allowed_from_words(self.bitmask[0], self.vocab_size)

    def consume(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))


def make_engines(regex: str, index, outlines_index, tk: Tokenizers,
                 log: Callable[..., None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """All engines for one regex; returns (engines, per-engine setup info)."""
    vocab_size = tk.vocab.size
    engines: dict[str, Any] = {"ours": OursEngine(index)}
    info: dict[str, Any] = {}
    if outlines_index is not None:
        engines["outlines-core"] = OutlinesEngine(outlines_index, vocab_size)
    if tk.xgr_compiler is not None:
        try:
            t0 = time.perf_counter()
            compiled = tk.xgr_compiler.compile_regex(regex)
            info["xgrammar_compile_s"] = time.perf_counter() - t0
            engines["xgrammar"] = XGrammarEngine(compiled, vocab_size)
        except Exception as exc:
            info["xgrammar_error"] = f"{type(exc).__name__}: {exc}"
            log(f"    xgrammar refused the regex: {info['xgrammar_error']}")
    if tk.llg_tokenizer is not None:
        try:
            import llguidance

            t0 = time.perf_counter()
            grammar = llguidance.grammar_from("regex", regex)
            engines["llguidance"] = LLGuidanceEngine(tk.llg_tokenizer, grammar, vocab_size)
            info["llguidance_compile_s"] = time.perf_counter() - t0
        except Exception as exc:
            info["llguidance_error"] = f"{type(exc).__name__}: {exc}"
            log(f"    llguidance refused the regex: {info['llguidance_error']}")
    return engines, info
