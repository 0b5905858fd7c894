"""The structured-generation engines the benchmarks compare, behind one small interface.

Every engine is built for the very same vocabulary (our ``Vocabulary``'s
token ids and bytes) from a JSON schema or a regex, and is then asked the
same things at every decoding step: compute the token mask for the current
state (:meth:`fill_mask`; :meth:`allowed` gives it as one bool per id, for
checks), and consume a token (:meth:`consume`, False when refused).

* tokendfa: :class:`tokendfa.Index` walked with a :class:`tokendfa.Guide`
  (``Guide.write_mask_into`` into an int32 numpy row, ``Guide.advance``);
* outlines-core 0.2.x: ``outlines_core.Index`` over an
  ``outlines_core.Vocabulary`` made from our token bytes, walked with
  ``outlines_core.Guide`` (``write_mask_into(data_ptr, numel, element_size)``,
  ``get_tokens()``, ``advance(token, return_tokens=False)``); from a schema,
  through its ``build_regex_from_schema``;
* xgrammar: ``TokenizerInfo`` over our token bytes (``VocabType.RAW``; ids
  without text are passed as ``b""``, which is how xgrammar marks a token
  special), ``GrammarCompiler.compile_regex`` / ``compile_json_schema``,
  ``GrammarMatcher``;
* llguidance 1.x: an ``LLTokenizer`` made from a ``TokenizerWrapper`` over our
  token bytes (ids without text get llguidance's special-token marker byte
  0xFF in front of a made-up name and are listed as special),
  ``LLMatcher(tokenizer, grammar_from("regex" | "json_schema", ...))``,
  ``llguidance.numpy.fill_next_token_bitmask``.

What each outside engine needs once per vocabulary (its tokenizer) is made by
:meth:`EngineSetup.prepare`, which imports torch, xgrammar and llguidance:
fork build children before calling it if they must not inherit those.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# Engine names, as the scripts' options and reports spell them.
TOKENDFA, TOKENDFA_LAZY = "tokendfa", "tokendfa-lazy"
OUTLINES, XGRAMMAR, LLGUIDANCE = "outlines-core", "xgrammar", "llguidance"
OUTSIDE_ENGINES = (OUTLINES, XGRAMMAR, LLGUIDANCE)


def outlines_token_map(vocab) -> dict[bytes, list[int]]:
    """Every text token under its exact bytes (ids sharing bytes share an entry);
    ids without text are left out."""
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(vocab.tokens):
        if data is not None:
            by_bytes.setdefault(data, []).append(token_id)
    return by_bytes


def outlines_vocabulary(vocab):
    """outlines-core's vocabulary from our token bytes (:func:`outlines_token_map`),
    with our preferred EOS id as its only EOS."""
    import outlines_core

    return outlines_core.Vocabulary(vocab.eos_token_id, outlines_token_map(vocab))


def allowed_from_words(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """A 32-bit-word bitset (bit i % 32 of word i // 32) as a bool array of
    ``vocab_size`` entries; padding bits past the vocabulary are dropped."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


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


def walk_index(index, tokens: list[int]) -> str | None:
    """None when ``tokens`` walk a tokendfa index from its initial state to a
    final one; else why not."""
    state = index.initial_state
    for position, token in enumerate(tokens):
        if not index.is_allowed(state, token):
            return f"refused at token {position} of {len(tokens)}"
        state = index.advance(state, token)
    if not index.is_final(state):
        return "incomplete: the text is not a complete match at the end"
    return None


# --- one engine on one grammar: a cursor that can start over ----------------------

class TokendfaEngine:
    """Our index walked by a :class:`tokendfa.Guide`. ``index``, ``np_buf`` and
    ``torch_buf`` are there for callers that time the index's own calls."""

    def __init__(self, index, torch_buffer: bool = False) -> None:
        from tokendfa import Guide, TokenNotAllowedError

        self.index = index
        self._guide_cls, self._refused = Guide, TokenNotAllowedError
        # the mask's width, from either an Index or a LazyIndex (which has no arrays)
        words = len(index.get_mask(index.initial_state))
        self.np_buf = np.zeros((1, words), dtype=np.int32)
        if torch_buffer:
            import torch

            self.torch_buf = torch.zeros((1, words), dtype=torch.int32)
        self.guide = Guide(index)

    def reset(self) -> None:
        self.guide = self._guide_cls(self.index)

    def fill_mask(self) -> None:
        self.guide.write_mask_into(self.np_buf, row=0)

    def allowed(self) -> np.ndarray:
        return allowed_from_words(self.guide.get_mask(), self.index.vocab_size)

    def consume(self, token: int) -> bool:
        try:
            self.guide.advance(token)
        except self._refused:
            return False
        return True


class OutlinesEngine:
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

    def fill_mask(self) -> None:
        self.guide.write_mask_into(self.buf.data_ptr(), self.buf.numel(), 4)

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
    def __init__(self, compiled, vocab_size: int) -> None:
        import xgrammar as xgr

        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.vocab_size = vocab_size

    def reset(self) -> None:
        self.matcher.reset()

    def fill_mask(self) -> None:
        self.matcher.fill_next_token_bitmask(self.bitmask)

    def allowed(self) -> np.ndarray:
        self.fill_mask()
        return allowed_from_words(self.bitmask.numpy()[0], self.vocab_size)

    def consume(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))


class LLGuidanceEngine:
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
        # (the grammar string is reused; LLMatcher re-reads it).
        self.matcher = self._make()

    def fill_mask(self) -> None:
        self.fill(self.matcher, self.bitmask)

    def allowed(self) -> np.ndarray:
        self.fill_mask()
        return allowed_from_words(self.bitmask[0], self.vocab_size)

    def consume(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))


# --- once per vocabulary ---------------------------------------------------------------

@dataclass
class EngineSetup:
    """Each outside engine's per-vocabulary state (made once, shared by every
    grammar), and the errors of those that could not start."""

    vocab: Any
    outlines_vocab: Any = None
    xgr_compiler: Any = None
    llg_tokenizer: Any = None
    setup_seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def prepare(cls, vocab, engines=OUTSIDE_ENGINES, *, outlines_vocab=None,
                xgrammar_threads: int | None = None,
                log: Callable[..., None] = lambda *a: None) -> "EngineSetup":
        """``xgrammar_threads``: the compiler's thread count (xgrammar's default
        when None). An engine that cannot start is noted in ``errors``."""
        setup = cls(vocab=vocab, outlines_vocab=outlines_vocab)

        def start(name: str, make: Callable[[], None]) -> None:
            if name not in engines:
                return
            t0 = time.perf_counter()
            try:
                make()
                setup.setup_seconds[name] = time.perf_counter() - t0
            except Exception as exc:  # an engine that cannot start is reported, not fatal
                setup.errors[name] = f"{type(exc).__name__}: {exc}"
                log(f"  {name} unavailable: {setup.errors[name]}")

        def outlines() -> None:
            if setup.outlines_vocab is None:
                setup.outlines_vocab = outlines_vocabulary(vocab)

        def xgrammar() -> None:
            import xgrammar as xgr

            info = xgr.TokenizerInfo([b"" if t is None else t for t in vocab.tokens],
                                     xgr.VocabType.RAW, vocab_size=vocab.size,
                                     stop_token_ids=list(vocab.eos_token_ids), add_prefix_space=False)
            options = {} if xgrammar_threads is None else {"max_threads": xgrammar_threads}
            setup.xgr_compiler = xgr.GrammarCompiler(info, **options)

        def llg() -> None:
            import llguidance

            wrapper = llguidance.TokenizerWrapper(_LLGuidanceTokenizerSource(vocab))
            setup.llg_tokenizer = llguidance.LLTokenizer(wrapper, n_vocab=vocab.size,
                                                         eos_token=list(vocab.eos_token_ids))

        start(OUTLINES, outlines)
        start(XGRAMMAR, xgrammar)
        start(LLGUIDANCE, llg)
        return setup

    def ready(self, engine: str) -> bool:
        return {OUTLINES: self.outlines_vocab, XGRAMMAR: self.xgr_compiler,
                LLGUIDANCE: self.llg_tokenizer}.get(engine, True) is not None

    # --- one grammar ---------------------------------------------------------

    def from_schema(self, engine: str, schema: Any):
        """``engine`` built for ``schema`` (a JSON value), ready at its first mask.
        Raises whatever the engine raises on a schema it cannot handle."""
        size = self.vocab.size
        if engine in (TOKENDFA, TOKENDFA_LAZY):
            from tokendfa import Index

            options = {"lazy": engine == TOKENDFA_LAZY}  # "tokendfa": the eager build
            return TokendfaEngine(Index.from_schema(schema, self.vocab, **options))
        text = json.dumps(schema)
        if engine == OUTLINES:
            import outlines_core
            from outlines_core.json_schema import build_regex_from_schema

            return OutlinesEngine(outlines_core.Index(build_regex_from_schema(text), self.outlines_vocab), size)
        if engine == XGRAMMAR:
            return XGrammarEngine(self.xgr_compiler.compile_json_schema(text), size)
        if engine == LLGUIDANCE:
            import llguidance

            return LLGuidanceEngine(self.llg_tokenizer, llguidance.grammar_from("json_schema", text), size)
        raise ValueError(f"unknown engine {engine!r}")

    def from_regex(self, engine: str, regex: str):
        """An outside engine built for ``regex`` (tokendfa's and outlines-core's
        indexes are built by the caller, who times or loads them)."""
        size = self.vocab.size
        if engine == XGRAMMAR:
            return XGrammarEngine(self.xgr_compiler.compile_regex(regex), size)
        if engine == LLGUIDANCE:
            import llguidance

            return LLGuidanceEngine(self.llg_tokenizer, llguidance.grammar_from("regex", regex), size)
        raise ValueError(f"no regex builder for {engine!r} here")
