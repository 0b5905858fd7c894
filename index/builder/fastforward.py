"""Fast-forward tokens: what the grammar forces, in canonical tokenization.

Where the pattern allows exactly one continuation (a JSON key, punctuation),
a generator can append the forced text without asking the model. It must
append the tokens the model itself would have produced, or the model sees a
segmentation it was never trained on and its distribution bends. So the
forced bytes are tokenized with the tokenizer's own encoder, and then the
last tokens are given back while some allowed token could start where they
start and run past the end of the forced bytes (as token healing does): the
model may well prefer that longer token, and only the model can choose it.

Example (Qwen2.5): after ``{"`` with the keys ``orderId`` and ``orderName``
the forced bytes are ``order``, but tokens like ``orderId`` run past them, so
nothing is forced; with one key ``name_of_the_person`` the forced bytes are
``name_of_the_person":`` and the tokens stop before the quote, since ``":"``
could be the model's next token.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..analysis.dfa import ByteDFA
from ..analysis.errors import VocabularyError
from ..analysis.literals import forced_bytes, forced_run
from ..runtime.arrays import IndexArrays


def _running_past(spellings: list[bytes], tail: bytes) -> tuple[int, int]:
    """Where the tokens that start with ``tail`` and are longer than it lie in
    the vocabulary's sorted spellings: ``first:last``."""
    first = bisect.bisect_right(spellings, tail)  # skips a token equal to tail
    # Everything with the prefix sorts before ``tail`` with its last byte raised.
    stripped = tail.rstrip(b"\xff")
    if stripped:
        last = bisect.bisect_left(spellings, stripped[:-1] + bytes([stripped[-1] + 1]))
    else:
        last = len(spellings)
    return first, last


def _any_allowed(mask: np.ndarray, token_ids: np.ndarray) -> bool:
    if len(token_ids) == 0:
        return False
    return bool(np.any((mask[token_ids >> 5] >> (token_ids & 31).astype(np.uint32)) & 1))


def _whole_characters(data: bytes) -> bytes:
    """``data`` without a trailing incomplete UTF-8 character."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
            return data[:cut]
        except UnicodeDecodeError:
            continue
    return b""


class _Steps:
    """Where a token leads from a state (:meth:`tokendfa.Index.advance` on the
    bare arrays, which is all this walk needs: the builder makes arrays, never
    an ``Index``) and whether a state allows any of some tokens, over Python
    lists of the arrays made once for a whole table: numpy calls on single
    elements were ~10 us a forced state's token (a 60,000-value enum has 80k
    forced states: 3.4 of its 6 s of forced tokens)."""

    def __init__(self, arrays: IndexArrays, vocabulary) -> None:
        self.arrays = arrays
        self.spellings, self.ids = vocabulary.sorted_spellings()
        # (mask, range of tokens running past a tail) -> whether one is allowed: a
        # literal set's chains share their tails and their masks (60,000 values:
        # 418k checks, most of them repeats)
        self.allowed: dict[tuple[int, int, int], bool] = {}
        self.token_group = arrays.token_group.tolist()
        self.offsets = arrays.state_offsets.tolist()
        self.edge_group = arrays.edge_group.tolist()
        self.edge_next = arrays.edge_next.tolist()
        self.eos = set(np.asarray(arrays.eos_token_ids).tolist())
        self.finals = arrays.finals.tolist()
        self.mask_id = arrays.mask_id.tolist()

    def next_state(self, state: int, token_id: int) -> int | None:
        group = self.token_group[token_id]
        if group >= 0:
            low, high = self.offsets[state], self.offsets[state + 1]
            position = bisect.bisect_left(self.edge_group, group, low, high)
            if position < high and self.edge_group[position] == group:
                return self.edge_next[position]
        elif token_id in self.eos and self.finals[state]:
            return state
        return None

    def any_running_past(self, state: int, tail: bytes) -> bool:
        """Whether ``state`` allows a token that starts with ``tail`` and is longer."""
        first, last = _running_past(self.spellings, tail)
        if first >= last:
            return False
        key = (self.mask_id[state], first, last)
        found = self.allowed.get(key)
        if found is None:
            mask = self.arrays.masks[key[0]]
            token_ids = self.ids[first:last]
            if len(token_ids) > 16:
                found = _any_allowed(mask, token_ids)
            else:
                found = any(int(mask[t >> 5]) >> (t & 31) & 1 for t in token_ids.tolist())
            self.allowed[key] = found
        return found


def forced_tokens_for_state(arrays: IndexArrays, state: int, forced: bytes,
                            vocabulary, steps: "_Steps | None" = None) -> list[int]:
    """Canonical tokens for ``forced`` bytes from ``state``, healed at the end
    (``steps``: the arrays as :class:`_Steps`, when the caller made them)."""
    forced = _whole_characters(forced)
    if not forced:
        return []
    try:
        token_ids = vocabulary.encode(forced.decode("utf-8"))
    except (VocabularyError, UnicodeDecodeError):
        return []
    steps = _Steps(arrays, vocabulary) if steps is None else steps
    states, starts, offset = [state], [], 0
    for token_id in token_ids:
        following = steps.next_state(states[-1], token_id)
        if following is None:
            break
        starts.append(offset)
        offset += len(vocabulary.tokens[token_id])
        states.append(following)
    for position, start in enumerate(starts):
        if steps.any_running_past(states[position], forced[start:]):
            return token_ids[:position]
    return token_ids[:len(starts)]


def forced_token_table(dfa: ByteDFA, dfa_state_of: np.ndarray, arrays: IndexArrays,
                       vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Forced tokens of every index state, as CSR arrays (offsets, tokens).

    ``arrays`` are the index's (their forced-token arrays are not read);
    ``dfa_state_of[s]`` is the byte-DFA state of index state ``s``."""
    forced = forced_bytes(dfa)
    lists = []
    steps = None
    for state, dfa_state in enumerate(dfa_state_of.tolist()):
        if forced[dfa_state] < 0:
            lists.append([])
            continue
        run, _ = forced_run(dfa, dfa_state, forced)
        steps = _Steps(arrays, vocabulary) if steps is None else steps
        lists.append(forced_tokens_for_state(arrays, state, run, vocabulary, steps))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(tokens) for tokens in lists])
    flat = np.fromiter((t for tokens in lists for t in tokens), dtype=np.int32,
                       count=int(offsets[-1]))
    return offsets, flat
