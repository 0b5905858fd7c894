"""The lazy index: the first mask in milliseconds, every later one as fast as a built index's.

The eager build (:mod:`tokendfa.build.fast`) determinises and minimises the
whole automaton and walks the vocabulary from every state before it can
serve anything: about two seconds for a typical schema. :class:`LazyIndex`
serves the same answers from the moment the NFA exists:

* the byte automaton is a :class:`~tokendfa.analysis.lazydfa.LazyByteDFA`,
  whose rows are computed on demand;
* a state's *token row* (its allowed-token bitset) is computed the first time
  the state is served, by walking the vocabulary through the byte automaton
  level by level in numpy (the tokens whose first byte is live, then a gather
  of ``row[state, next byte]`` for the tokens still alive at each level,
  materialising the byte rows they reach first), and kept: a revisited state
  costs a dict lookup (:meth:`LazyIndex.get_mask` returns the stored array);
* :meth:`LazyIndex.advance` checks the token's bit and walks its bytes
  through the byte rows, which the token row's walk has materialised, so the
  token rows need no per-token successor table (a state inside a JSON string
  allows ~140k Qwen tokens: 560 kB of successors a state).

States are the lazy automaton's ids (the initial state is 1, not 0), and they
are not minimal; the answers are the eager index's, state for state along any
token sequence (the tests walk both in lockstep).

**Exactness.** The eager index allows a token when its bytes keep the
automaton alive *and* some sequence of tokens can finish the match from
where it ends. The lazy automaton's non-dead states are exactly the
byte-live ones. When every byte the pattern can use is spelled by a
single-byte token (byte-level BPE: Qwen, cl100k, Tekken; SentencePiece with
byte fallback), byte-live is token-live and nothing more is needed. For
other vocabularies (the toy one of the tests, a Unigram model without byte
fallback) token-liveness is decided exactly by a search over token rows from
the state in question, memoised; it costs more on first use, never gives a
different answer.

**Not served lazily:** fast-forward tokens (:meth:`LazyIndex.forced_tokens`
is always empty; :meth:`LazyIndex.complete` has them), and the vocabulary
must be known (an index file is always eager: :meth:`LazyIndex.save` writes
the completed index).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis.dfa import DEAD, INITIAL
from ..analysis.minimise import canonical_byte_dfa
from ..analysis.errors import (InvalidStateError, TokenNotAllowedError,
                               VocabularyCoverageError)
from ..analysis.lazydfa import DEFAULT_MAX_LAZY_STATES, LazyByteDFA
from ..analysis.utf8 import MAX_CODEPOINT, utf8_range_sequences
from ..runtime.arrays import MASK_WORD
from ..runtime.serving import MaskServing
from ..vocab.vocabulary import Vocabulary
from .config import BuildConfig
from .pipeline import BuiltIndex, build_index, readable_pattern

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH"]

# Every UTF-8 sequence of a character of two or more bytes, as byte ranges.
_WIDE_SEQUENCES = tuple(tuple(sequence) for sequence in utf8_range_sequences(0x80, MAX_CODEPOINT))

# Free values of a schema nest this many levels in lazy mode, with no
# any_depth="auto" measurement (which builds whole automata at several depths,
# most of an eager schema's time to first mask). Each level is one shared
# definition, which the lazy automaton calls rather than copies and compiles
# only when a generation first enters it (tokendfa.analysis.lazydfa), so the
# depth costs nothing until a value goes that deep. Measured on 42
# JSONSchemaBench schemas (benchmarks/profile_lazy.py, qwen2.5, loaded machine):
# the NFA built before the first mask is the same at depth 8, 32 and 64 (p50
# 2.8k states; 1.8k at depth 2, where the lowest levels are written inline);
# the schema's regex grows by about 0.15 ms a level. When the NFA copied every
# level (the first version), depth 2 took 0.05 s and depth 5 2.0 s on a small
# object schema, which is why this was 2.
LAZY_ANY_DEPTH = 32


@dataclass(frozen=True, eq=False)
class _VocabularyTables:
    """What the lazy walk needs from a vocabulary, computed once per vocabulary."""

    columns: np.ndarray        # uint8[L, V]: byte d of every token in row d (Vocabulary.byte_matrix, transposed)
    lengths: np.ndarray        # int32[V]: 0 for tokens that are not text
    by_first_byte: np.ndarray  # int64[T]: the spelled tokens, by first byte then id
    first_offsets: np.ndarray  # int64[257]: tokens starting with byte b are by_first_byte[o[b]:o[b+1]]
    single_byte: np.ndarray    # bool[256]: some token is exactly this one byte
    num_words: int             # uint32 words of a mask
    # The loop shortcut (see LazyIndex._raw_row): a token's tail is what follows its first character.
    first_char: np.ndarray     # int8[V]: bytes of the first character; 0 when the token is not text
                               # that starts with a whole character and goes on with whole characters
    tail_low: np.ndarray       # uint64[V]: bytes 0-63 of the tail, as a bit set
    tail_high: np.ndarray      # uint64[V]: bytes 64-127 of the tail
    tail_wide: np.ndarray      # bool[V]: the tail holds a character of two or more bytes


def _vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    matrix, lengths = vocabulary.byte_matrix()
    spelled = np.flatnonzero(lengths > 0)
    first = matrix[spelled, 0]
    order = spelled[np.argsort(first, kind="stable")]
    offsets = np.searchsorted(first[np.argsort(first, kind="stable")], np.arange(257))
    single = np.zeros(256, dtype=bool)
    single[matrix[lengths == 1, 0]] = True
    # One contiguous row per byte position: a level of the walk reads one row
    # (a gather from the [V, L] matrix strides over L bytes per token).
    first_char = np.zeros(vocabulary.size, dtype=np.int8)
    tail_wide = np.zeros(vocabulary.size, dtype=bool)
    for token, data in enumerate(vocabulary.tokens):
        if data:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a piece of a character: the ordinary walk
            first = len(text[0].encode("utf-8"))
            first_char[token] = first
            tail_wide[token] = len(text) - 1 != len(data) - first
    # bit b of the 128-bit set: byte b < 128 occurs after the first character;
    # read column by column (vocabulary.byte_columns), so the work is the total bytes.
    bits = np.zeros((vocabulary.size, 2), dtype=np.uint64)
    columns = vocabulary.byte_columns()
    for position, count in enumerate(columns.counts.tolist()):
        tokens = columns.order[:count]
        data = columns.data[columns.starts[position]:columns.starts[position] + count]
        keep = (data < 128) & (first_char[tokens] <= position)
        tokens, data = tokens[keep], data[keep].astype(np.uint64)
        high = data >= 64
        # a column holds each token once: a plain fancy |= is exact
        bits[tokens[high], 1] |= np.left_shift(np.uint64(1), data[high] - np.uint64(64))
        bits[tokens[~high], 0] |= np.left_shift(np.uint64(1), data[~high])
    return _VocabularyTables(np.ascontiguousarray(matrix.T), lengths, order.astype(np.int64), offsets.astype(np.int64),
                             single, (vocabulary.size + 31) // 32, first_char,
                             np.ascontiguousarray(bits[:, 0]), np.ascontiguousarray(bits[:, 1]), tail_wide)


def vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    return vocabulary.derived("lazy-walk", _vocabulary_tables)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for a 1-d integer array, without its first call's
    import of numpy.ma (10 ms, inside some schema's first mask)."""
    if len(values) < 2:
        return values.copy()
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(lo - (ends - lengths), lengths) + np.arange(total)


class LazyIndex(MaskServing):
    """The serving API of :class:`~tokendfa.runtime.index.Index`, computed on demand.

    Build one with ``Index.from_regex(pattern, vocabulary, lazy=True)`` or
    ``Index.from_schema(schema, vocabulary, lazy=True)``; a
    :class:`~tokendfa.runtime.guide.Guide` walks it like an index. Thread-safe:
    any number of guides on any number of threads share one lazy index.

    ``config.max_states`` bounds the states of the lazy byte automaton
    (:class:`~tokendfa.analysis.errors.BuildLimitError` when a request needs
    more). :meth:`start_completion` fills the remaining token rows in a
    background thread; :meth:`complete` returns the eager :class:`Index`.
    """

    def __init__(self, pattern: str, vocabulary: Vocabulary, config: BuildConfig | None = None, *,
                 definitions: dict[str, str] | None = None,
                 metadata: dict[str, Any] | None = None, index_type: Any = None) -> None:
        started = time.perf_counter()
        self._pattern = pattern
        self._definitions = dict(definitions or {})
        self._vocabulary = vocabulary
        self._config = config or BuildConfig()
        # The runtime passes its Index class down (the builder never imports it);
        # without one, complete() gives the built arrays and metadata.
        self._index_type = index_type
        max_states = self._config.max_states
        self._dfa = LazyByteDFA(pattern, definitions=self._definitions or None,
                                max_states=DEFAULT_MAX_LAZY_STATES if max_states is None else max_states)
        self._tables = vocabulary_tables(vocabulary)
        self._tokens = vocabulary.tokens
        self._vocab_size = vocabulary.size
        self._words = self._tables.num_words
        self._eos = tuple(sorted(set(int(t) for t in vocabulary.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        # Byte-live is token-live when every byte a match can hold is a token
        # of its own. With all 256 bytes tokens (byte-level BPE) the pattern's
        # alphabet is not needed, which would compile every definition.
        single = self._tables.single_byte
        self._covered = bool(single.all()) or bool(np.all(single[self._dfa.byte_alphabet()]))
        self._token_live: dict[int, bool] = {}
        self._loops: dict[int, tuple[int, int, bool]] = {}
        self._raw_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.RLock()
        self._masks: dict[int, np.ndarray] = {}        # state -> its allowed-token bitset
        self._successors: dict[int, np.ndarray] = {}   # state -> distinct states its tokens reach
        self._distinct_masks: dict[bytes, np.ndarray] = {}
        self._table_view: tuple[np.ndarray | None, memoryview | None] = (None, None)
        self._completed = None
        self._complete_lock = threading.Lock()
        self._completion: threading.Thread | None = None
        self._completion_error: BaseException | None = None
        self._stop = threading.Event()
        if not self._is_token_live(INITIAL):
            raise VocabularyCoverageError(
                f"the vocabulary cannot express the pattern {pattern[:200]!r}: no sequence of "
                "its tokens spells a match", state=INITIAL)
        self._seconds = round(time.perf_counter() - started, 4)
        self._extra_metadata = dict(metadata or {})
        self._metadata: dict[str, Any] | None = None

    # --- description ---------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        """As an eager index's, with ``build.method`` ``"lazy"``; made on first
        use (the vocabulary's fingerprint hashes every token: 0.25 s on Qwen)."""
        if self._metadata is None:
            readable = readable_pattern(self._pattern, self._definitions)
            vocabulary = self._vocabulary
            metadata = {
                "kind": "regex",
                "pattern": readable,
                "vocabulary": {"name": vocabulary.name, "source": vocabulary.source,
                               "fingerprint": vocabulary.fingerprint, "size": vocabulary.size},
                "build": {"method": "lazy", "seconds": self._seconds},
            }
            metadata.update(self._extra_metadata)
            self._metadata = metadata
        return self._metadata

    @property
    def vocabulary(self) -> Vocabulary:
        return self._vocabulary

    @property
    def pattern(self) -> str:
        return self.metadata.get("pattern", "")

    @property
    def initial_state(self) -> int:
        return INITIAL

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._eos

    @property
    def byte_dfa(self) -> LazyByteDFA:
        return self._dfa

    @property
    def num_served_states(self) -> int:
        """States whose token row has been computed so far."""
        return len(self._masks)

    def __repr__(self) -> str:
        return (f"LazyIndex(pattern={self.pattern[:80]!r}, vocabulary={self._vocabulary.name!r}, "
                f"served={len(self._masks)}, byte_states={self._dfa.num_states})")

    # --- serving ---------------------------------------------------------------

    def get_mask(self, state: int) -> np.ndarray:
        """Allowed tokens as a read-only ``uint32`` bitset (EOS bits in final states)."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._serve(state)
        return mask

    def is_final(self, state: int) -> bool:
        if state not in self._masks:
            self._serve(state)
        return bool(self._dfa.finals[state])

    def is_allowed(self, state: int, token_id: int) -> bool:
        mask = self.get_mask(state)
        self._check_token(token_id)
        return bool((mask.item(token_id >> 5) >> (token_id & 31)) & 1)

    def forced_tokens(self, state: int) -> np.ndarray:
        """Always empty in lazy mode (the fast-forward table needs the whole
        index: :meth:`complete` has it). Empty is a valid answer: a generator
        then samples every token, as it would where nothing is forced."""
        self.get_mask(state)
        return np.zeros(0, dtype=np.int32)

    def advance(self, state: int, token_id: int) -> int:
        """The state after ``token_id``; EOS keeps a final state. Raises
        :class:`~tokendfa.analysis.errors.TokenNotAllowedError` for a token
        the state does not allow."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._serve(state)
        if not 0 <= token_id < self._vocab_size:
            self._check_token(token_id)
        if (mask.item(token_id >> 5) >> (token_id & 31)) & 1:
            data = self._tokens[token_id]
            if data is None:
                return state  # EOS in a final state
            # The token row's walk materialised every byte row on the way,
            # and the mask was published after it: the current table has them.
            table = self._dfa.table
            held, view = self._table_view
            if held is not table:
                view = memoryview(table)
                self._table_view = (table, view)
            for byte in data:
                state = view[state, byte]
            return state
        raise TokenNotAllowedError(self._refusal(state, token_id), state=state, token_id=token_id)

    def write_mask_into(self, state: int, out, row: int | None = None) -> None:
        """Copy the bitset of ``state`` into a caller's int32/uint32 buffer
        (numpy or torch, one row or a batch; see :meth:`Index.write_mask_into`)."""
        self._copy_mask(self.get_mask(state), out, row)

    # --- completion -------------------------------------------------------------

    def start_completion(self) -> None:
        """Compute every reachable state's token row in a daemon thread,
        breadth-first from the initial state, so later requests find them
        ready. Serving goes on meanwhile; a request for a row the thread is
        computing waits for that one row. Past ``max_states`` the thread
        stops and :meth:`wait_completion` re-raises the error."""
        with self._lock:
            if self._completion is None:
                self._completion = threading.Thread(target=self._complete_rows, daemon=True,
                                                    name="tokendfa-lazy-completion")
                self._completion.start()

    def wait_completion(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`start_completion`'s thread; True when every row is done."""
        thread = self._completion
        if thread is None:
            return False
        thread.join(timeout)
        if self._completion_error is not None:
            raise self._completion_error
        return not thread.is_alive()

    def _complete_rows(self) -> None:
        try:
            with self._config.limits():  # a thread of its own: the limits are installed here
                self._complete_rows_under_limits()
        except BaseException as exc:  # reported by wait_completion
            self._completion_error = exc

    def _complete_rows_under_limits(self) -> None:
        seen = {INITIAL}
        frontier = [INITIAL]
        while frontier and not self._stop.is_set():
            following = []
            for state in frontier:
                if self._stop.is_set():
                    return
                self.get_mask(state)
                for nxt in self._successors[state].tolist():
                    if nxt not in seen:
                        seen.add(nxt)
                        following.append(nxt)
            frontier = following

    def complete(self):
        """The eager :class:`~tokendfa.runtime.index.Index` of the same
        pattern: the lazy automaton explored to the end, minimised, and
        built as ``Index.from_regex`` builds it (array for array the same).
        Computed once; raises the eager build's errors."""
        with self._complete_lock, self._config.limits():  # the time limit from here on
            if self._completed is None:
                transitions, finals = self._dfa.explore()
                dfa = canonical_byte_dfa(transitions, finals, pattern=self._pattern)
                built = build_index(self._pattern, self._vocabulary, self._config,
                                    definitions=self._definitions or None, dfa=dfa)
                metadata = dict(built.metadata)
                metadata.update(self._extra_metadata)
                built = BuiltIndex(built.arrays, metadata)
                self._completed = (built if self._index_type is None else
                                   self._index_type(built.arrays, metadata, self._vocabulary))
            return self._completed

    def save(self, path, *, compress: bool = True) -> None:
        """Write the completed index (:meth:`complete`) to ``path``."""
        self.complete().save(path, compress=compress)

    def close(self) -> None:
        """Stop the completion thread (if any) after the row it is on."""
        self._stop.set()

    # --- computing a token row -----------------------------------------------------

    def _serve(self, state: int) -> np.ndarray:
        if not isinstance(state, (int, np.integer)) or not INITIAL <= state < self._dfa.num_states:
            raise InvalidStateError(
                f"state {state} is not a state of this lazy index (states are 1.."
                f"{self._dfa.num_states - 1} so far, 1 initial)")
        with self._lock:
            mask = self._masks.get(state)
            if mask is None:
                tokens, ends = self._raw_row(state)
                if not self._covered and len(ends):
                    distinct = _distinct(ends)
                    live = np.array([self._is_token_live(int(e)) for e in distinct.tolist()])
                    keep = np.isin(ends, distinct[live])
                    tokens, ends = tokens[keep], ends[keep]
                allowed = np.zeros(self._tables.num_words * 32, dtype=bool)
                allowed[tokens] = True
                if self._dfa.finals[state]:
                    allowed[list(self._eos)] = True
                mask = np.packbits(allowed, bitorder="little").view(MASK_WORD)
                mask = self._distinct_masks.setdefault(mask.tobytes(), mask)
                mask.flags.writeable = False
                self._successors[state] = _distinct(ends)
                self._raw_rows.pop(state, None)
                self._masks[state] = mask  # published last: readers take no lock
            return mask

    def _raw_row(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, ends)``: every token whose bytes keep the automaton
        alive from ``state``, and the state each leads to."""
        found = self._raw_rows.get(state)
        if found is not None:
            return found
        dfa, tables = self._dfa, self._tables
        columns, lengths = tables.columns, tables.lengths
        first_row = dfa.row(state)
        live = np.flatnonzero(first_row)
        tokens = tables.by_first_byte[_ranges(tables.first_offsets[live],
                                              tables.first_offsets[live + 1])]
        states = first_row[columns[0][tokens]]
        found_tokens, found_ends = [], []
        depth = 1
        while len(tokens):
            ended = lengths[tokens] == depth
            if ended.any():
                found_tokens.append(tokens[ended])
                found_ends.append(states[ended])
                tokens, states = tokens[~ended], states[~ended]
                if not len(tokens):
                    break
            if depth <= 4:
                # The loop shortcut: a token whose first character has just been
                # read, and whose every later character loops on the state it
                # reached, ends in that state. Inside a JSON string that is most
                # of the vocabulary (a cold string state: 40 ms -> a few).
                starting = np.flatnonzero(tables.first_char[tokens] == depth)
                if len(starting):
                    looped = self._loop_tokens(tokens[starting], states[starting])
                    if len(looped):
                        done = starting[looped]
                        found_tokens.append(tokens[done])
                        found_ends.append(states[done])
                        keep = np.ones(len(tokens), dtype=bool)
                        keep[done] = False
                        tokens, states = tokens[keep], states[keep]
                        if not len(tokens):
                            break
            if len(tokens) <= 48:
                # A few long tokens (runs of spaces, dashes) would take a
                # numpy level per byte, ~50 us each: walk them in Python.
                ends = self._walk_rest(tokens, states, depth)
                alive = ends != DEAD
                found_tokens.append(tokens[alive])
                found_ends.append(ends[alive])
                break
            dfa.materialise_reached(states)
            flat = dfa.table.reshape(-1)  # read after the rows are there
            states = flat[states.astype(np.int64) * 256 + columns[depth][tokens]]
            alive = states != DEAD
            tokens, states = tokens[alive], states[alive]
            depth += 1
        tokens = np.concatenate(found_tokens) if found_tokens else np.zeros(0, dtype=np.int64)
        ends = np.concatenate(found_ends) if found_ends else np.zeros(0, dtype=np.int32)
        if not self._covered:
            self._raw_rows[state] = (tokens, ends)
        return tokens, ends

    def _walk_rest(self, tokens: np.ndarray, states: np.ndarray, depth: int) -> np.ndarray:
        """The states ``tokens`` end in, from ``states`` after their first ``depth`` bytes."""
        row, spellings = self._dfa.row, self._tokens
        ends = np.empty(len(tokens), dtype=states.dtype)
        for i, (token, state) in enumerate(zip(tokens.tolist(), states.tolist())):
            for byte in spellings[token][depth:]:
                state = int(row(state)[byte])
                if state == DEAD:
                    break
            ends[i] = state
        return ends

    def _loop_tokens(self, tokens: np.ndarray, states: np.ndarray) -> np.ndarray:
        """Positions of the ``tokens`` (each in the state of the same position,
        its first character read) whose tails keep that state: every ASCII
        byte of the tail loops on it, and so does every whole character of
        two or more bytes when the tail has one."""
        tables = self._tables
        distinct = _distinct(states)
        loops = [self._loop(s) for s in distinct.tolist()]
        if not any(lo or hi for lo, hi, _ in loops):
            return np.zeros(0, dtype=np.int64)
        if len(loops) == 1:  # the common case: scalars, no gathers of the loop sets
            lo, hi, wide = loops[0]
            inside = (tables.tail_low[tokens] & np.uint64(~lo & 0xFFFFFFFFFFFFFFFF)) == 0
            inside &= (tables.tail_high[tokens] & np.uint64(~hi & 0xFFFFFFFFFFFFFFFF)) == 0
            if not wide:
                inside &= ~tables.tail_wide[tokens]
            return np.flatnonzero(inside)
        where = np.searchsorted(distinct, states)
        lows = np.array([lo for lo, _, _ in loops], dtype=np.uint64)[where]
        highs = np.array([hi for _, hi, _ in loops], dtype=np.uint64)[where]
        wides = np.array([wide for _, _, wide in loops], dtype=bool)[where]
        inside = ((tables.tail_low[tokens] & ~lows) == 0) & ((tables.tail_high[tokens] & ~highs) == 0)
        inside &= wides | ~tables.tail_wide[tokens]
        return np.flatnonzero(inside)

    def _loop(self, state: int) -> tuple[int, int, bool]:
        """``(low, high, wide)``: the ASCII bytes that lead from ``state`` back
        to it (bits 0-63 and 64-127), and whether every character of two or
        more bytes does too (checked on each range of UTF-8 sequences)."""
        found = self._loops.get(state)
        if found is None:
            row = self._dfa.row(state)
            same = np.packbits(row[:128] == state, bitorder="little").view(np.uint64)
            wide = True
            for sequence in _WIDE_SEQUENCES:
                current = {state}
                for lo, hi in sequence:
                    following = set()
                    for at in current:
                        following.update(self._dfa.row(at)[lo:hi + 1].tolist())
                    current = following
                    if DEAD in current:
                        break
                if current != {state}:
                    wide = False
                    break
            found = self._loops[state] = (int(same[0]), int(same[1]), wide)
        return found

    def _is_token_live(self, state: int) -> bool:
        """Whether some sequence of tokens leads from ``state`` to a match.

        With a covering vocabulary every non-dead state is. Otherwise a
        breadth-first search over token rows from ``state`` looks for a
        final state or a state known live; if it finds none, every state it
        reached is known dead (their futures were all explored)."""
        if self._covered:
            return state != DEAD
        with self._lock:
            known = self._token_live.get(state)
            if known is not None:
                return known
            parent = {state: -1}
            queue = [state]
            found = -1
            for current in queue:  # grows while we go
                status = self._token_live.get(current)
                if status is None and self._dfa.finals[current]:
                    status = True
                if status:
                    found = current
                    break
                if status is False:
                    continue
                for nxt in _distinct(self._raw_row(current)[1]).tolist():
                    if nxt not in parent:
                        parent[nxt] = current
                        queue.append(nxt)
            if found < 0:
                for visited in parent:
                    self._token_live[visited] = False
                return False
            while found >= 0:
                self._token_live[found] = True
                found = parent[found]
            return True

    # --- helpers ------------------------------------------------------------------------

    def _refusal(self, state: int, token_id: int) -> str:
        if token_id in self._eos_set:
            return f"EOS token {token_id} is not allowed in state {state}: the match is not complete"
        text = self._tokens[token_id]
        spelled = f" ({text!r})" if text is not None else " (a special token)"
        return f"token {token_id}{spelled} is not allowed in state {state}"
