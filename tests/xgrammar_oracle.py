"""Reference allowed-token sets from xgrammar's regex matcher.

This module holds ``XGrammarRegexOracle`` (one xgrammar ``TokenizerInfo`` +
``GrammarCompiler`` per vocabulary) and ``OracleMatcher`` (a stepping wrapper
around one ``GrammarMatcher``).  Tests use it as an outside opinion on which
tokens a tokendfa index should allow in each state.

xgrammar 0.2.8 behaviour this wrapper relies on (checked by
tests/test_xgrammar_oracle.py):

* The only way to mark a token "special" (never allowed, never accepted) in the
  ``TokenizerInfo`` constructor is to give it the empty string: xgrammar's
  special-token detection is exactly ``token == ""``.  So ``None`` tokens are
  passed as ``b""``; real empty tokens are treated the same way.
* Stop tokens are taken from ``stop_token_ids`` and their text is ignored; they
  come out allowed exactly when the bytes so far fully match the regex.
* Tokens are matched byte by byte, so partial UTF-8 tokens such as b"\\xe6\\x97"
  work, and duplicate byte strings are all allowed.  One deviation from strict
  UTF-8: ``.`` and negated classes also accept encoded surrogates (ED A0..BF xx).
* The regex dialect is not Python's (``.`` matches newline, ``\\w``/``\\d`` are
  ASCII, ``\\s`` adds U+00A0, ``[\\^a]`` means ``[^a]``, ...); see the dialect
  table in the test module before feeding it a regex.
* The bitmask has ``ceil(vocab_size / 32)`` int32 words and the padding bits
  past ``vocab_size`` come back set, so they must be cut off.
* ``fill_next_token_bitmask`` raises once the stop token has been accepted, so
  a terminated matcher reports an empty allowed set here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import xgrammar as xgr


class OracleMatcher:
    """One xgrammar matcher for one regex, with set-valued allowed tokens."""

    def __init__(self, oracle: "XGrammarRegexOracle", regex: str, compiled: xgr.CompiledGrammar) -> None:
        self._oracle = oracle
        self.regex = regex
        self._matcher = xgr.GrammarMatcher(compiled)
        # One bitmask buffer per matcher; fill_next_token_bitmask overwrites it fully.
        self._bitmask: torch.Tensor = xgr.allocate_token_bitmask(1, oracle.vocab_size)
        self._history: list[int] = []

    def allowed_mask(self) -> np.ndarray:
        """Boolean array of length vocab_size: which tokens are allowed now."""
        if self._matcher.is_terminated():
            # xgrammar refuses to fill a mask after the stop token was accepted.
            return np.zeros(self._oracle.vocab_size, dtype=bool)
        self._matcher.fill_next_token_bitmask(self._bitmask)
        # Bit i of the mask is token i: little-endian int32 words viewed as bytes,
        # bits unpacked least significant first.
        words = self._bitmask.numpy()[0]
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        # The padding bits past vocab_size are set by xgrammar; drop them.
        return bits[: self._oracle.vocab_size].astype(bool)

    def allowed(self) -> set[int]:
        """Token ids allowed now; EOS ids included exactly when the regex is fully matched."""
        return set(np.flatnonzero(self.allowed_mask()).tolist())

    def advance(self, token_id: int) -> None:
        """Feed one token; AssertionError if xgrammar refuses it."""
        if not self._matcher.accept_token(token_id):
            raise AssertionError(
                f"xgrammar refused token {token_id} ({self._oracle.describe(token_id)}) "
                f"for regex {self.regex!r} after bytes {self.consumed_bytes()!r}"
                + (" (matcher already terminated)" if self._matcher.is_terminated() else "")
            )
        self._history.append(token_id)

    def is_terminated(self) -> bool:
        """True once an EOS token has been accepted."""
        return bool(self._matcher.is_terminated())

    def reset(self) -> None:
        """Back to the start state of the regex."""
        self._matcher.reset()
        self._history.clear()

    def consumed_bytes(self) -> bytes:
        """Concatenated bytes of the text tokens accepted so far (EOS contributes nothing)."""
        tokens = self._oracle.tokens
        return b"".join(tokens[t] or b"" for t in self._history if t not in self._oracle.eos_token_ids)


class XGrammarRegexOracle:
    """Allowed token sets from xgrammar's regex matcher, for one vocabulary."""

    def __init__(self, tokens: Sequence[bytes | None], eos_token_ids: Sequence[int]) -> None:
        self.tokens: list[bytes | None] = list(tokens)
        self.vocab_size = len(self.tokens)
        self.eos_token_ids: frozenset[int] = frozenset(int(t) for t in eos_token_ids)
        for eos in self.eos_token_ids:
            if not 0 <= eos < self.vocab_size:
                raise ValueError(f"EOS id {eos} outside the vocabulary of {self.vocab_size} tokens")
        # xgrammar marks a token special (never allowed) iff its text is empty,
        # so None becomes b"".  EOS ids are listed as stop tokens, which wins over
        # the special detection, so an EOS without text is still usable.
        encoded: list[bytes] = [b"" if t is None else bytes(t) for t in self.tokens]
        self.tokenizer_info = xgr.TokenizerInfo(
            encoded,
            xgr.VocabType.RAW,
            vocab_size=self.vocab_size,
            stop_token_ids=sorted(self.eos_token_ids),
            add_prefix_space=False,
        )
        self._compiler = xgr.GrammarCompiler(self.tokenizer_info)
        self._compiled: dict[str, xgr.CompiledGrammar] = {}

    def compile(self, regex: str) -> OracleMatcher:
        """A fresh matcher for `regex`; the compiled grammar is cached per regex."""
        compiled = self._compiled.get(regex)
        if compiled is None:
            compiled = self._compiler.compile_regex(regex)
            self._compiled[regex] = compiled
        return OracleMatcher(self, regex, compiled)

    def describe(self, token_id: int) -> str:
        """Human-readable token description for error messages."""
        if not 0 <= token_id < self.vocab_size:
            return "out of vocabulary"
        kind = "EOS" if token_id in self.eos_token_ids else "text"
        return f"{kind} {self.tokens[token_id]!r}"
