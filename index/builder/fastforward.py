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
import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..analysis.dfa import ByteDFA
from ..analysis import limits
from ..analysis.errors import VocabularyError
from ..analysis.literals import FORCED_RUN_LIMIT, NOT_FORCED, forced_bytes
from ..runtime.arrays import IndexArrays

# Text of forced runs tokenized and walked at a time (see forced_token_table).
_CHUNK_BYTES = 1 << 20


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
    """Forced tokens of every index state, as CSR arrays (offsets, tokens):
    :meth:`ForcedRuns.table` of ``ForcedRuns.of(dfa, dfa_state_of)``."""
    return ForcedRuns.of(dfa, dfa_state_of).table(arrays, vocabulary)


@dataclass(frozen=True, eq=False)
class ForcedRuns:
    """What the fast-forward table needs of the byte DFA, a few bytes a state.

    The byte DFA's table (256 cells a state: 100 MB for a 60,000-value
    enum's 97k states) is dropped when a build ends; these arrays are kept
    instead, so the table of forced tokens can be made later, when it is
    first asked for (:class:`PendingForcedTokens`).
    """

    forced: np.ndarray        # int16[byte states]: the one live byte of a forced state, else NOT_FORCED
    forced_next: np.ndarray   # int64[byte states]: the state after that byte (itself where not forced)
    dfa_state_of: np.ndarray  # int64[index states]: the byte state of each index state

    @classmethod
    def of(cls, dfa: ByteDFA, dfa_state_of: np.ndarray) -> "ForcedRuns":
        forced = forced_bytes(dfa)
        states = np.arange(dfa.num_states, dtype=np.int64)
        forced_next = np.where(forced != NOT_FORCED,
                               dfa.transitions[states, np.maximum(forced, 0)], states).astype(np.int64)
        return cls(forced, forced_next, np.asarray(dfa_state_of, dtype=np.int64))

    def table(self, arrays: IndexArrays, vocabulary) -> tuple[np.ndarray, np.ndarray]:
        """Forced tokens of every index state, as CSR arrays (offsets, tokens).

        ``arrays`` are the index's (their forced-token arrays are not read).
        The answer is :func:`forced_tokens_for_state`'s for every state, found
        for all states at once; only the tokenizer runs state by state:

        * the forced runs are made once for all states (a chain of forced
          states shares its run's suffixes), not byte by byte from each;
        * the healing question "does the state allow a token that starts with
          the rest of the run and is longer?" is "is its longest allowed token
          longer than the rest of the run?": every live byte string from a
          state inside a forced run starts with that run, so an allowed token
          longer than the rest begins with it;
        * the state after a run's first tokens is the index state of the byte
          state that many forced bytes on (found by doubling along the runs),
          and a token is taken while its group has an edge from there.

        A 60,000-value enum (80k forced states, ~5 tokens each) spent 2.4 s in
        the state-by-state walk; this is ~0.3 s, most of it the tokenizer.
        """
        forced, dfa_state_of = self.forced, self.dfa_state_of
        num_states = len(dfa_state_of)
        offsets = np.zeros(num_states + 1, dtype=np.int64)
        starting = np.flatnonzero(forced[dfa_state_of] != NOT_FORCED)
        if not len(starting):
            return offsets, np.zeros(0, dtype=np.int32)
        runs = _forced_runs(self, dfa_state_of[starting])
        texts = []
        for at, run in enumerate(runs):
            try:
                texts.append(run.decode("utf-8"))
            except UnicodeDecodeError:  # a run that stops inside a character: up to it
                runs[at] = _whole_characters(run)
                texts.append(runs[at].decode("utf-8"))
        run_length = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        longest = _longest_allowed(arrays, vocabulary)
        # healed at the first token whatever the encoding: not encoded at all
        encode = np.flatnonzero((run_length > 0) & (longest[starting] <= run_length))
        index_of_byte = np.full(len(forced), -1, dtype=np.int64)
        index_of_byte[dfa_state_of] = np.arange(num_states)
        edge_keys = _edge_keys(arrays)
        per_state = np.zeros(num_states, dtype=np.int64)
        kept_tokens = []
        # A slice of the runs at a time, about _CHUNK_BYTES of text: a 5,000-byte
        # literal's 5,000 forced states have runs of up to 4 kB each (17 MB, 2.4M
        # tokens), and the arrays over all their tokens at once peaked at 550 MB.
        ends = np.cumsum(run_length[encode])
        bounds = np.searchsorted(ends, np.arange(_CHUNK_BYTES, int(ends[-1]) if len(ends) else 0, _CHUNK_BYTES))
        for chunk in np.split(encode, np.unique(bounds + 1)):
            if not len(chunk):
                continue
            limits.check()
            tokens, counts = _healed_tokens(self, chunk, texts, run_length, starting,
                                            index_of_byte, edge_keys, arrays, vocabulary, longest)
            per_state[starting[chunk]] = counts
            kept_tokens.append(tokens)
        np.cumsum(per_state, out=offsets[1:])
        if not kept_tokens:
            return offsets, np.zeros(0, dtype=np.int32)
        return offsets, np.concatenate(kept_tokens).astype(np.int32)


@dataclass(frozen=True, eq=False)
class PendingForcedTokens:
    """An index's fast-forward table, made when first asked for.

    Called with the index's arrays (their forced-token arrays empty), it
    gives the arrays with the table filled in (read-only, as the rest).
    :class:`~tokendfa.runtime.index.Index` holds one until its forced
    tokens, its arrays or its file are first wanted: the table is the
    tokenizer run over every forced state (0.35 of the ~1 s an eager
    60,000-value enum took to build), and an index that is only asked for
    masks never needs it.
    """

    runs: ForcedRuns
    vocabulary: object

    def __call__(self, arrays: IndexArrays) -> IndexArrays:
        offsets, tokens = self.runs.table(arrays, self.vocabulary)
        offsets.flags.writeable = False
        tokens.flags.writeable = False
        return replace(arrays, forced_offsets=offsets, forced_tokens=tokens)


def _healed_tokens(runs: ForcedRuns, chunk, texts, run_length, starting, index_of_byte,
                   edge_keys, arrays, vocabulary, longest) -> tuple[np.ndarray, np.ndarray]:
    """The forced tokens of the runs ``chunk`` (indices into ``texts``), one
    after another, and how many each run keeps (see :func:`forced_token_table`)."""
    wanted = [texts[at] for at in chunk.tolist()]
    # Each distinct text is tokenized once: runs from different states often
    # end alike (a 60,000-value enum: 77k runs, 64k distinct texts; the
    # tokenizer is ~2 us a text, most of this function)
    distinct = list(dict.fromkeys(wanted))
    if len(distinct) < len(wanted):
        by_text = dict(zip(distinct, vocabulary.encode_many(distinct)))
        encoded = [by_text[text] or [] for text in wanted]
    else:
        encoded = [ids or [] for ids in vocabulary.encode_many(wanted)]
    counts = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    token = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(counts.sum()))
    if not len(token):
        return token, counts
    owner = np.repeat(np.arange(len(chunk)), counts)
    first = np.cumsum(counts) - counts             # each run's first token in ``token``
    token_length = vocabulary.byte_matrix()[1][token].astype(np.int64)
    consumed = np.cumsum(token_length) - token_length
    before = consumed - np.repeat(consumed[first], counts)   # bytes of the run before each token
    byte_state = _forced_steps(runs.forced_next, runs.dfa_state_of[starting[chunk]][owner], before)
    state = index_of_byte[byte_state]
    group = np.asarray(arrays.token_group)[token].astype(np.int64)
    healed = longest[np.maximum(state, 0)] > run_length[chunk][owner] - before
    stops = (state < 0) | (group < 0) | healed | ~_has_edge(edge_keys, np.maximum(state, 0), group)
    # each run keeps its tokens before the first that stops it
    position = np.arange(len(token)) - np.repeat(first, counts)
    stop_at = np.full(len(chunk), np.iinfo(np.int64).max)
    np.minimum.at(stop_at, owner[stops], position[stops])
    kept = position < stop_at[owner]
    return token[kept], np.bincount(owner[kept], minlength=len(chunk))


def _forced_steps(forced_next: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The byte state ``count[i]`` forced bytes after ``start[i]`` (each within
    its forced run), by doubling: a table of 2^k steps for each bit of the counts."""
    step = forced_next
    current = start.astype(np.int64).copy()
    remaining = count.astype(np.int64).copy()
    while True:
        odd = np.flatnonzero(remaining & 1)
        current[odd] = step[current[odd]]
        remaining >>= 1
        if not remaining.any():
            return current
        step = step[step]


def _edge_keys(arrays: IndexArrays) -> tuple[np.ndarray, int]:
    """Each edge as ``source * span + group``, increasing (edges are sorted by
    state, then group), and ``span``."""
    offsets = np.asarray(arrays.state_offsets)
    edge_group = np.asarray(arrays.edge_group).astype(np.int64)
    span = int(edge_group.max(initial=0)) + 2
    source = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return source * span + edge_group, span


def _has_edge(edge_keys: tuple[np.ndarray, int], state: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Whether each ``state[i]`` has an edge for ``group[i]`` (``group >= 0``)."""
    keys, span = edge_keys
    if not len(keys):
        return np.zeros(len(state), dtype=bool)
    wanted = state * span + np.maximum(group, 0)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return keys[at] == wanted


def _forced_runs(runs: ForcedRuns, states: np.ndarray, limit: int = FORCED_RUN_LIMIT) -> list[bytes]:
    """``forced_run(dfa, state, forced, limit)[0]`` of each of ``states``,
    all at once: every run takes one step a round while it lasts, once to
    measure the runs and once to write their bytes where they go (so the
    memory is the runs' bytes, not an index a byte)."""
    forced, forced_next = runs.forced, runs.forced_next
    start = np.asarray(states, dtype=np.int64)
    lengths = np.zeros(len(start), dtype=np.int64)
    for write in (False, True):
        if write:
            ends = np.cumsum(lengths)
            buffer = np.zeros(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
            position = ends - lengths
        current = start.copy()
        going = np.arange(len(current))
        for _ in range(limit):
            byte = forced[current[going]]
            on = byte != NOT_FORCED
            going = going[on]
            if not len(going):
                break
            byte = byte[on].astype(np.int64)
            if write:
                buffer[position[going]] = byte
                position[going] += 1
            else:
                lengths[going] += 1
            current[going] = forced_next[current[going]]
    data = buffer.tobytes()
    return [data[end - length:end] for end, length in zip(ends.tolist(), lengths.tolist())]


def _longest_allowed(arrays: IndexArrays, vocabulary) -> np.ndarray:
    """The byte length of the longest token each index state allows (0: none)."""
    lengths = vocabulary.byte_matrix()[1]
    token_group = np.asarray(arrays.token_group)
    grouped = np.flatnonzero(token_group >= 0)
    group_length = np.zeros(int(token_group.max(initial=-1)) + 1 if len(grouped) else 1, dtype=np.int64)
    # The lengths as int64, the table's own type: with the vocabulary's int32
    # lengths numpy's ``ufunc.at`` leaves its fast path and casts element by
    # element (3.3 ms against 0.05 ms for 30k grouped tokens, most of JME:0's forced-token
    # table on mistral-sp32k; 26 ms against 1.4 ms for 150k).
    np.maximum.at(group_length, token_group[grouped], lengths[grouped].astype(np.int64))
    offsets = np.asarray(arrays.state_offsets)
    per_edge = group_length[np.asarray(arrays.edge_group)]
    longest = np.zeros(len(offsets) - 1, dtype=np.int64)
    has_edges = np.flatnonzero(offsets[1:] > offsets[:-1])
    if len(has_edges):
        longest[has_edges] = np.maximum.reduceat(per_edge, offsets[has_edges])
    return longest
