"""Constrained generation with Hugging Face transformers.

:class:`TokenDFALogitsProcessor` is a ``transformers.LogitsProcessor``: pass it
to ``model.generate(..., logits_processor=[processor])`` and every sampled or
greedy token keeps the text inside the index's pattern, and the generation
ends (EOS) only on a complete match. :func:`generate_constrained` does the
encoding, the ``generate`` call and the decoding in one go.

# How a step works

``generate`` calls the processor once per step with the whole sequence so
far (``input_ids``, prompt included) and the next-token logits (``scores``,
``[batch, width]``). The first call sees only the prompts; the processor
remembers each row's prompt length. Each later call:

1. advances each row's :class:`~tokendfa.Guide` with the tokens ``generate``
   appended since the last call (normally one: the last of the row);
2. fills an ``int32 [batch, ceil(width / 32)]`` bitmask with
   :func:`tokendfa.fill_masks` (a copy of a precomputed row per guide, no
   per-token work; the rows a lazy index has not computed yet are computed
   first, on threads where they belong to several indexes); words past the vocabulary are cleared, so ids the model
   has but the tokenizer does not (Qwen2.5: 151,936 logits for 151,665
   tokens) are never allowed;
3. unpacks the bitmask on the logits' device, a byte at a time through a
   ``[256, 8]`` table of ``0`` / ``-inf``, and adds the result to the logits
   in place: every disallowed logit becomes ``-inf``, the others are unchanged.

A row whose generation has ended (EOS accepted) gets only EOS allowed, so
``generate`` keeps padding it while other rows go on; the pad tokens it
appends after EOS are not text and are not fed to the guide. Rows are
independent: each has its own guide over the one shared, immutable index.

``generate`` runs the caller's processors after its own (repetition
penalty, ``min_new_tokens``, ...) and before the sampling warpers
(temperature, ``top_k``, which is 50 unless set, ``top_p``), which keep
``-inf`` as it is. A processor that refuses EOS (``min_new_tokens``) where the
pattern allows nothing else leaves no token at all: do not combine them.

# Closing within max_new_tokens

``generate`` does not tell a processor its budget: pass it as
``TokenDFALogitsProcessor(index, max_new_tokens=n)`` (the same ``n`` as
``generate``'s), and each row closes within it: when few tokens are left,
the mask allows only the tokens after which the text can still reach a
complete match and EOS in the tokens that remain
(:class:`~tokendfa.Guide` with ``max_tokens``), so a row ends with a
complete match instead of being cut off inside a value. Far from the budget
the masks are the index's own (a dict lookup a step). When the pattern
cannot close within ``n`` tokens at all, a warning says so and the rows are
masked as without it. :func:`generate_constrained` passes its
``max_new_tokens`` on.

# Beams, reordering and rollback

Beam search reorders rows between steps and assisted decoding shortens the
sequence again when candidates are rejected. The common step (every row is
the previous row plus one token) is checked with one tensor comparison; any
other call is matched row by row to the previous row it extends (longest
common prefix), whose guide is copied and rolled back as needed. So the
processor follows ``num_beams > 1`` (with ``refused="end"``, see the class)
and assistant models too, at some extra cost per step for those.

# Errors

A token the index refuses (which ``generate`` only produces when something
else changed the logits after this processor, or when it was fed another
generation's ids) raises :class:`~tokendfa.analysis.errors.TokenNotAllowedError`
whose message starts with the row number.

# Example

::

    from transformers import AutoModelForCausalLM
    from tokendfa import Index, Vocabulary
    from tokendfa.integrations.transformers import TokenDFALogitsProcessor, generate_constrained

    vocab = Vocabulary.from_pretrained("/models/Qwen2.5-0.5B")
    model = AutoModelForCausalLM.from_pretrained("/models/Qwen2.5-0.5B", local_files_only=True)
    index = Index.from_regex(r"[0-9]{3}-[0-9]{4}", vocab)
    generate_constrained(model, vocab, index, "Call me at ", do_sample=True)   # '555-0142'

    # or by hand, on a batch you encoded yourself:
    out = model.generate(input_ids, attention_mask=attention_mask, do_sample=True,
                         logits_processor=[TokenDFALogitsProcessor(index)],
                         eos_token_id=list(index.eos_token_ids), max_new_tokens=16)
"""

from __future__ import annotations

import contextlib
import sys
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analysis.errors import TokenNotAllowedError, import_optional
from ..runtime.batch import fill_masks
from ..runtime.guide import Guide
from ..runtime.index import Index
from ..runtime.serving import MaskServing
from ..vocab.vocabulary import Vocabulary

__all__ = ["TokenDFALogitsProcessor", "generate_constrained", "index_for", "max_generation_length"]

# Importing this module is opting in to torch and transformers (neither is a
# dependency of tokendfa; the hf extra installs transformers).
torch = import_optional("torch", extra=None, needed_for="tokendfa.integrations.transformers")
_transformers = import_optional("transformers", extra="hf",
                                needed_for="tokendfa.integrations.transformers")
LogitsProcessor = _transformers.LogitsProcessor
LogitsProcessorList = _transformers.LogitsProcessorList

if sys.byteorder != "little":  # pragma: no cover
    # The masks are little-endian words read a byte at a time below.
    raise ImportError("index.integrations.transformers needs a little-endian machine")


class TokenDFALogitsProcessor(LogitsProcessor):
    """Masks a batch's logits so that every row follows ``index``.

    One processor serves one ``generate`` call: the batch size and the
    prompts are taken from its first call (``reset()`` starts over). The
    index is shared and never modified, so any number of processors, in any
    number of threads, can serve the same index.

    ``refused`` says what a token the index does not allow does to its row:
    ``"raise"`` (default) raises :class:`~tokendfa.analysis.errors.TokenNotAllowedError`
    naming the row; ``"end"`` closes the row (only EOS allowed from then on).
    Beam search needs ``"end"``: when fewer tokens are allowed than it wants
    candidates, it keeps some disallowed ones as beams with a ``-inf`` score,
    which can never outrank a real beam, and feeds them back to the processor.

    ``guides`` are the rows' cursors, in the current row order, for a caller
    that wants to look (``is_finished``, ``state``) after ``generate``
    returns; the processor alone moves them.

    ``max_new_tokens`` (``generate``'s, which it does not pass to
    processors): each row closes within it (see the module docstring);
    None: no budget.
    """

    # Its state is per batch row, which continuous batching reshuffles.
    supports_continuous_batching = False

    def __init__(self, index: Index, *, refused: str = "raise", max_new_tokens: int | None = None) -> None:
        if refused not in ("raise", "end"):
            raise ValueError(f'refused must be "raise" or "end", not {refused!r}')
        if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                           or max_new_tokens < 1):
            raise ValueError(f"max_new_tokens must be a positive integer or None, not {max_new_tokens!r}")
        self.index = index
        self.refused = refused
        self.max_new_tokens = max_new_tokens
        self._budget = max_new_tokens
        if max_new_tokens is not None and index.finish_bound(index.initial_state, max_new_tokens) > max_new_tokens:
            warnings.warn(f"closing a text of this pattern may take more than max_new_tokens={max_new_tokens} "
                          "tokens: the rows are masked without closing in time", stacklevel=2)
            self._budget = None
        self._eos = frozenset(index.eos_token_ids)
        self._vocab_size = index.vocab_size
        self._index_words = (index.vocab_size + 31) // 32
        self._bitmask: torch.Tensor | None = None   # int32 [batch, words], on the CPU
        self._eos_row: torch.Tensor | None = None   # int32 [words]: only EOS allowed
        self._tables: dict[tuple, torch.Tensor] = {}  # (device, dtype) -> [256, 8] penalties
        self._penalty: torch.Tensor | None = None      # [batch * words * 4, 8], reused
        self._penalty_key: tuple | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the batch: the next call starts new generations."""
        self._guides: list[Guide] = []
        self._prompt_lengths: list[int] = []
        # Per row: None while it follows the index, else how many generated
        # tokens it had when it closed (EOS accepted, or a token refused with
        # refused="end"); the tokens after that are padding and are ignored.
        self._closed: list[int | None] = []
        self._previous: torch.Tensor | None = None  # the input_ids of the last call (CPU)

    @property
    def guides(self) -> tuple[Guide, ...]:
        return tuple(self._guides)

    # --- the LogitsProcessor protocol ---------------------------------------

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        ids = input_ids.detach().to("cpu")
        if ids.shape[0] != scores.shape[0]:
            raise ValueError(f"input_ids has {ids.shape[0]} rows but scores has {scores.shape[0]}")
        if self._previous is None:
            self._start(ids)
        else:
            self._follow(ids)
        self._previous = ids.clone()
        self._mask(scores)
        return scores

    # --- following the rows -------------------------------------------------

    def _start(self, ids: torch.Tensor) -> None:
        batch, length = ids.shape
        self._guides = [Guide(self.index, max_tokens=self._budget) for _ in range(batch)]
        self._prompt_lengths = [length] * batch
        self._closed = [None] * batch

    def _follow(self, ids: torch.Tensor) -> None:
        previous = self._previous
        batch, length = ids.shape
        if (batch == previous.shape[0] and length == previous.shape[1] + 1
                and torch.equal(ids[:, :-1], previous)):
            for row, token in enumerate(ids[:, -1].tolist()):
                self._consume(row, token, length - 1)
        else:
            self._realign(ids)

    def _realign(self, ids: torch.Tensor) -> None:
        """Give each row the guide of the previous row it extends (beam
        reordering, rollback after rejected candidates, several new tokens)."""
        previous = self._previous
        width = min(ids.shape[1], previous.shape[1])
        # common[r][j]: length of the common prefix of new row r and old row j.
        differs = ids[:, None, :width] != previous[None, :, :width]
        common = torch.where(differs.any(-1), differs.to(torch.int8).argmax(-1),
                             torch.tensor(width)).tolist()
        guides, prompts, closed = [], [], []
        for row, shared in enumerate(common):
            best = max(range(len(shared)), key=lambda j: (shared[j], j == row))
            prompt = self._prompt_lengths[best]
            if shared[best] < prompt:
                raise ValueError(
                    f"row {row} does not continue any sequence this processor has seen "
                    "(one processor serves one generate call; call reset() to start over)")
            kept = shared[best] - prompt        # generated tokens still the same
            guide = self._guides[best].copy()
            closed_at = self._closed[best]
            if closed_at is not None and kept < closed_at:
                closed_at = None                # the closing token was taken back
            if closed_at is None and kept < guide.num_tokens:
                guide.rollback(guide.num_tokens - kept)
            guides.append(guide)
            prompts.append(prompt)
            closed.append(closed_at)
        self._guides, self._prompt_lengths, self._closed = guides, prompts, closed
        for row in range(ids.shape[0]):
            start = self._prompt_lengths[row] + self._guides[row].num_tokens
            for position, token in enumerate(ids[row, start:].tolist(), start):
                self._consume(row, token, position)

    def _consume(self, row: int, token: int, position: int) -> None:
        """Feed the token at ``position`` of ``row`` to the row's guide."""
        if self._closed[row] is not None:
            return  # padding after the row ended
        guide = self._guides[row]
        if token in self._eos and guide.can_end():
            guide.advance(token)
            self._closed[row] = guide.num_tokens
            return
        try:
            if not 0 <= token < self._vocab_size:
                raise TokenNotAllowedError(
                    f"token {token} is outside the vocabulary (ids 0..{self._vocab_size - 1}), "
                    "so it is never allowed", state=guide.state, token_id=token)
            guide.advance(token)
        except TokenNotAllowedError as error:
            if self.refused == "end":
                self._closed[row] = guide.num_tokens + 1
                return
            raise TokenNotAllowedError(
                f"row {row}, position {position}: {error}", state=error.state,
                token_id=error.token_id) from None

    # --- masking --------------------------------------------------------------

    def _mask(self, scores: torch.Tensor) -> None:
        batch, width = scores.shape
        words = max((width + 31) // 32, self._index_words)
        bitmask = self._bitmask_for(batch, words)
        fill_masks([None if self._closed[row] is not None else guide
                    for row, guide in enumerate(self._guides)], bitmask)
        for row, closed in enumerate(self._closed):
            if closed is not None:
                bitmask[row].copy_(self._eos_row)
        # Unpack a byte at a time through a 256 x 8 table of 0 / -inf: one
        # gather gives each logit its penalty, one add applies it. Measured
        # 5-10 times faster on a CPU than shifting each word by 0..31 into a
        # bool mask and masked_fill_ (the bool pass and the fill each read
        # and write every logit).
        table = self._penalty_table(scores.device, scores.dtype)
        data = bitmask.to(scores.device, non_blocking=True).view(torch.uint8).view(-1)
        penalty = self._penalty_for(batch, words, scores.device, scores.dtype)
        torch.index_select(table, 0, data.to(torch.int64), out=penalty)
        scores.add_(penalty.view(batch, -1)[:, :width])

    def _penalty_table(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        key = (device, dtype)
        table = self._tables.get(key)
        if table is None:
            bits = (np.arange(256)[:, None] >> np.arange(8)) & 1   # little-endian bit order
            values = np.where(bits == 1, 0.0, -np.inf).astype(np.float32)
            table = self._tables[key] = torch.from_numpy(values).to(device=device, dtype=dtype)
        return table

    def _penalty_for(self, batch: int, words: int, device: torch.device,
                     dtype: torch.dtype) -> torch.Tensor:
        key = (batch, words, device, dtype)
        if self._penalty_key != key:
            self._penalty = torch.empty((batch * words * 4, 8), device=device, dtype=dtype)
            self._penalty_key = key
        return self._penalty

    def _bitmask_for(self, batch: int, words: int) -> torch.Tensor:
        if self._bitmask is None or self._bitmask.shape != (batch, words):
            pin = torch.cuda.is_available()
            self._bitmask = torch.zeros((batch, words), dtype=torch.int32, pin_memory=pin)
            eos_row = np.zeros(words, dtype=np.uint32)
            for token in self._eos:
                eos_row[token >> 5] |= np.uint32(1 << (token & 31))
            self._eos_row = torch.from_numpy(eos_row.view(np.int32))
        return self._bitmask


def max_generation_length(index: Index) -> int | None:
    """The most tokens a generation under ``index`` can take, the closing
    EOS included, or ``None`` when the pattern allows arbitrarily long texts
    (the index's transition graph has a cycle).

    A bound pattern's index is a DAG: the answer is its longest path from the
    initial state, plus one for EOS. Use it as ``max_new_tokens``, so that
    every generation ends on its own. A lazy index is completed first (its
    whole graph is the question).
    """
    if not isinstance(index, Index):
        index = index.complete()
    arrays = index.arrays
    offsets, targets = arrays.state_offsets, arrays.edge_next
    successors = [np.unique(targets[offsets[s]:offsets[s + 1]]).tolist()
                  for s in range(index.num_states)]
    # Longest path by depth-first post-order; a state on the stack twice is a cycle.
    longest = [-1] * index.num_states
    on_stack = [False] * index.num_states
    stack = [(index.initial_state, 0)]
    on_stack[index.initial_state] = True
    while stack:
        state, position = stack[-1]
        children = successors[state]
        if position < len(children):
            stack[-1] = (state, position + 1)
            child = children[position]
            if on_stack[child]:
                return None
            if longest[child] < 0:
                on_stack[child] = True
                stack.append((child, 0))
            continue
        stack.pop()
        on_stack[state] = False
        longest[state] = 1 + max((longest[c] for c in children), default=-1)
    return longest[index.initial_state] + 1


def index_for(constraint: Index | str | dict | bool, tokenizer_or_vocab: Any, *,
              cache: Any = None, **options: Any) -> Index:
    """``constraint`` itself if it is an :class:`Index`; else the index of a
    regex (a ``str``) or a JSON Schema (a ``dict`` or ``bool``; parse JSON
    text first) for the tokenizer's vocabulary, from the shared index cache
    (:class:`tokendfa.cache.IndexCache`) so that each distinct constraint is
    built once per machine.

    ``cache``: ``None`` for the default folder (``$TOKENDFA_CACHE_DIR`` or
    ``~/.cache/tokendfa``), a folder path, an ``IndexCache``, or ``False`` to
    build in memory every time. ``options`` go to the build
    (:meth:`Index.from_regex` / :meth:`Index.from_schema`).
    """
    if isinstance(constraint, MaskServing):  # an Index, or a LazyIndex
        if options:
            raise TypeError(f"build options {sorted(options)} do not apply to a built Index")
        return constraint
    if isinstance(constraint, str):
        kind = "regex"
    elif isinstance(constraint, (dict, bool)):
        kind = "schema"
    else:
        raise TypeError(f"a constraint is an Index, a regex (str) or a JSON Schema (dict or bool), "
                        f"not {type(constraint).__name__}")
    vocab = _vocabulary_of(tokenizer_or_vocab)
    if cache is False:
        build = Index.from_regex if kind == "regex" else Index.from_schema
        return build(constraint, vocab, **options)
    from ..cache import IndexCache

    if not isinstance(cache, IndexCache):
        cache = IndexCache(cache)
    return cache.get_or_build(kind, constraint, vocab, **options)


# A transformers tokenizer's vocabulary takes seconds to read; read it once.
_VOCABULARIES: "weakref.WeakKeyDictionary[Any, Vocabulary]" = weakref.WeakKeyDictionary()


def _vocabulary_of(tokenizer_or_vocab: Any) -> Vocabulary:
    if isinstance(tokenizer_or_vocab, Vocabulary):
        return tokenizer_or_vocab
    try:
        return _VOCABULARIES[tokenizer_or_vocab]
    except (KeyError, TypeError):
        pass
    vocab = Vocabulary.from_pretrained(tokenizer_or_vocab)
    with contextlib.suppress(TypeError):
        _VOCABULARIES[tokenizer_or_vocab] = vocab
    return vocab


def generate_constrained(model: Any, tokenizer_or_vocab: Any, index: Index | str | dict | bool,
                         prompts: str | Sequence[str], *, cache: Any = None,
                         **generate_kwargs: Any) -> str | list[str]:
    """Generate from ``model`` under ``index``; returns the generated text
    (one string per prompt, or one string for a single prompt).

    ``index`` may also be a regex (``str``) or a JSON Schema (``dict`` or
    ``bool``): its index then comes from the shared index cache, built once
    per machine (see :func:`index_for`; ``cache=False`` builds in memory).

    ``tokenizer_or_vocab`` encodes the prompts: a transformers tokenizer (its
    own special tokens, e.g. BOS, are added) or a :class:`~tokendfa.Vocabulary`
    (``vocab.encode``). Prompts are left-padded into one batch.
    ``generate_kwargs`` go to ``model.generate`` (``do_sample``,
    ``num_return_sequences``, ...), with these defaults: ``eos_token_id`` the
    index's EOS ids, ``pad_token_id`` the first of them, and
    ``max_new_tokens`` :func:`max_generation_length` (a pattern with no
    bound needs an explicit ``max_new_tokens``). Each row closes within
    ``max_new_tokens`` (see :class:`TokenDFALogitsProcessor`); a pattern
    that cannot close in that many tokens is warned about, and a text cut
    short then is a prefix of a match, not a match. With
    ``num_beams > 1`` the processor closes the ``-inf`` beams that beam search
    carries through refused tokens (``refused="end"``).

    The text is decoded from the exact token bytes when the index knows its
    vocabulary (or a vocabulary was given), else by the tokenizer.
    """
    index = index_for(index, tokenizer_or_vocab, cache=cache)
    single = isinstance(prompts, str)
    texts = [prompts] if single else list(prompts)
    eos = list(index.eos_token_ids)
    kwargs = dict(generate_kwargs)
    kwargs.setdefault("eos_token_id", eos)
    kwargs.setdefault("pad_token_id", eos[0])
    if "max_new_tokens" not in kwargs and "max_length" not in kwargs:
        bound = max_generation_length(index)
        if bound is None:
            raise ValueError(f"the pattern {index.pattern!r} has no length bound: "
                             "pass max_new_tokens")
        kwargs["max_new_tokens"] = bound
    beams = kwargs.get("num_beams") or getattr(model.generation_config, "num_beams", 1) or 1
    budget = kwargs.get("max_new_tokens")
    processor = TokenDFALogitsProcessor(index, refused="end" if beams > 1 else "raise",
                                        max_new_tokens=budget if isinstance(budget, int) and budget > 0 else None)
    kwargs["logits_processor"] = LogitsProcessorList(
        [*(kwargs.get("logits_processor") or []), processor])

    if isinstance(tokenizer_or_vocab, Vocabulary):
        encoded = [tokenizer_or_vocab.encode(t) for t in texts]
    else:
        encoded = [list(tokenizer_or_vocab(t)["input_ids"]) for t in texts]
    input_ids, attention_mask = _left_pad(encoded, int(kwargs["pad_token_id"]))
    device = getattr(model, "device", None)
    if device is not None:
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    output = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    sequences = output if isinstance(output, torch.Tensor) else output.sequences
    new_tokens = sequences[:, input_ids.shape[1]:].tolist()

    vocab = tokenizer_or_vocab if isinstance(tokenizer_or_vocab, Vocabulary) else index.vocabulary
    results = []
    for row in new_tokens:
        ids = row[:next((i for i, t in enumerate(row) if t in processor._eos), len(row))]
        if vocab is not None:
            results.append(vocab.decode(ids).decode("utf-8", errors="replace"))
        else:
            results.append(tokenizer_or_vocab.decode(ids, skip_special_tokens=True,
                                                     clean_up_tokenization_spaces=False))
    return results[0] if single and len(results) == 1 else results


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    if width == 0:
        raise ValueError("every prompt is empty: give the model at least one token")
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            input_ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
            attention_mask[i, width - len(r):] = 1
    return input_ids, attention_mask
