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


def _tokens_running_past(vocabulary, tail: bytes) -> np.ndarray:
    """Ids of the tokens that start with ``tail`` and are longer than it."""
    spellings, ids = vocabulary.sorted_spellings()
    first = bisect.bisect_right(spellings, tail)  # skips a token equal to tail
    last = first
    # Everything with the prefix sorts before ``tail`` with its last byte raised.
    stripped = tail.rstrip(b"\xff")
    if stripped:
        last = bisect.bisect_left(spellings, stripped[:-1] + bytes([stripped[-1] + 1]))
    else:
        last = len(spellings)
    return ids[first:last]


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


def _next_state(arrays: IndexArrays, state: int, token_id: int) -> int | None:
    """Where ``token_id`` leads from ``state`` in ``arrays``, None where it is
    not allowed: :meth:`tokendfa.Index.advance` on the bare arrays, which is
    all this walk needs (the builder makes arrays, never an ``Index``)."""
    group = int(arrays.token_group[token_id])
    if group >= 0:
        low, high = int(arrays.state_offsets[state]), int(arrays.state_offsets[state + 1])
        position = low + int(np.searchsorted(arrays.edge_group[low:high], group))
        if position < high and arrays.edge_group[position] == group:
            return int(arrays.edge_next[position])
    elif token_id in arrays.eos_token_ids and arrays.finals[state]:
        return state
    return None


def forced_tokens_for_state(arrays: IndexArrays, state: int, forced: bytes,
                            vocabulary) -> list[int]:
    """Canonical tokens for ``forced`` bytes from ``state``, healed at the end."""
    forced = _whole_characters(forced)
    if not forced:
        return []
    try:
        token_ids = vocabulary.encode(forced.decode("utf-8"))
    except (VocabularyError, UnicodeDecodeError):
        return []
    states, starts, offset = [state], [], 0
    for token_id in token_ids:
        following = _next_state(arrays, states[-1], token_id)
        if following is None:
            break
        starts.append(offset)
        offset += len(vocabulary.tokens[token_id])
        states.append(following)
    for position, start in enumerate(starts):
        if _any_allowed(arrays.masks[arrays.mask_id[states[position]]],
                        _tokens_running_past(vocabulary, forced[start:])):
            return token_ids[:position]
    return token_ids[:len(starts)]


def forced_token_table(dfa: ByteDFA, dfa_state_of: np.ndarray, arrays: IndexArrays,
                       vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Forced tokens of every index state, as CSR arrays (offsets, tokens).

    ``arrays`` are the index's (their forced-token arrays are not read);
    ``dfa_state_of[s]`` is the byte-DFA state of index state ``s``."""
    forced = forced_bytes(dfa)
    lists = []
    for state, dfa_state in enumerate(dfa_state_of.tolist()):
        if forced[dfa_state] < 0:
            lists.append([])
            continue
        run, _ = forced_run(dfa, dfa_state, forced)
        lists.append(forced_tokens_for_state(arrays, state, run, vocabulary))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(tokens) for tokens in lists])
    flat = np.fromiter((t for tokens in lists for t in tokens), dtype=np.int32,
                       count=int(offsets[-1]))
    return offsets, flat
