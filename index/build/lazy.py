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

import bisect
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis.dfa import DEAD, INITIAL
from ..analysis.minimise import canonical_byte_dfa
from ..analysis.errors import (InvalidStateError, MaskBufferError, TokenNotAllowedError,
                               VocabularyCoverageError)
from ..analysis.lazydfa import DEFAULT_MAX_LAZY_STATES, LazyByteDFA
from ..runtime.arrays import MASK_WORD
from ..vocab.vocabulary import Vocabulary
from .config import BuildConfig
from .pipeline import BuiltIndex, build_index, readable_pattern

__all__ = ["LazyIndex", "LAZY_ANY_DEPTH"]

# Free values of a schema nest this many levels in lazy mode, with no
# any_depth="auto" measurement (which builds whole automata at several depths,
# most of an eager schema's time to first mask). Each level copies the Thompson
# NFA of the level below into every place a free value stands, so the NFA, and
# the time to build it, grows about 4x a level. Measured (NFA build, seconds, and
# NFA states) on a small object schema with one free property, then on
# JSONSchemaBench Github_hard line 10 (6 shared definitions):
#   depth 2: 0.047 (3.9k)  |  0.55 (55k)
#   depth 3: 0.112 (14.5k) |  2.4 (182k)
#   depth 4: 0.42 (57k)    |  8.4 (689k)
#   depth 5: 2.0 (226k)    |  -
# Depth 2 keeps the first mask in milliseconds; it is narrower than what "auto"
# often takes eagerly (up to 5), and regex_from_schema says so in the notes.
LAZY_ANY_DEPTH = 2


@dataclass(frozen=True, eq=False)
class _VocabularyTables:
    """What the lazy walk needs from a vocabulary, computed once per vocabulary."""

    columns: np.ndarray        # uint8[L, V]: byte d of every token in row d (Vocabulary.byte_matrix, transposed)
    lengths: np.ndarray        # int32[V]: 0 for tokens that are not text
    by_first_byte: np.ndarray  # int64[T]: the spelled tokens, by first byte then id
    first_offsets: np.ndarray  # int64[257]: tokens starting with byte b are by_first_byte[o[b]:o[b+1]]
    single_byte: np.ndarray    # bool[256]: some token is exactly this one byte
    num_words: int             # uint32 words of a mask


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
    return _VocabularyTables(np.ascontiguousarray(matrix.T), lengths, order.astype(np.int64), offsets.astype(np.int64),
                             single, (vocabulary.size + 31) // 32)


def vocabulary_tables(vocabulary: Vocabulary) -> _VocabularyTables:
    return vocabulary.derived("lazy-walk", _vocabulary_tables)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(lo - (ends - lengths), lengths) + np.arange(total)


class LazyIndex:
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
        self._eos = tuple(sorted(set(int(t) for t in vocabulary.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        # Byte-live is token-live when every byte a match can hold is a token of its own.
        alphabet = self._dfa.byte_alphabet()
        self._covered = bool(np.all(self._tables.single_byte[alphabet]))
        self._token_live: dict[int, bool] = {}
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

    def get_tokens(self, state: int) -> np.ndarray:
        """Allowed token ids, sorted, as ``int32`` (EOS included in final states)."""
        bits = np.unpackbits(self.get_mask(state).view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[:self._vocab_size]).astype(np.int32)

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
        mask = self.get_mask(state)
        words = self._tables.num_words
        if type(out) is not np.ndarray:
            if not out.is_cpu:  # torch on an accelerator
                import torch

                target = out if row is None else self._row_of(out, row)
                self._check_width(target.shape[-1])
                target[:words].copy_(torch.from_numpy(mask.view(np.int32)).to(out.device))
                target[words:].zero_()
                return
            out = out.numpy()
        target = out if row is None else self._row_of(out, row)
        if target.dtype not in (np.dtype(np.uint32), np.dtype(np.int32)) or target.ndim != 1:
            raise MaskBufferError(
                f"the mask buffer must be int32 or uint32 words, one row or a batch of rows; "
                f"got {target.dtype} with shape {out.shape}")
        self._check_width(len(target))
        target[:words] = mask.view(target.dtype)
        target[words:] = 0

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
                    live = np.array([self._is_token_live(int(e)) for e in np.unique(ends)])
                    keep = np.isin(ends, np.unique(ends)[live])
                    tokens, ends = tokens[keep], ends[keep]
                allowed = np.zeros(self._tables.num_words * 32, dtype=bool)
                allowed[tokens] = True
                if self._dfa.finals[state]:
                    allowed[list(self._eos)] = True
                mask = np.packbits(allowed, bitorder="little").view(MASK_WORD)
                mask = self._distinct_masks.setdefault(mask.tobytes(), mask)
                mask.flags.writeable = False
                self._successors[state] = np.unique(ends)
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
                for nxt in np.unique(self._raw_row(current)[1]).tolist():
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

    def _check_token(self, token_id: int) -> None:
        if not 0 <= token_id < self._vocab_size:
            raise InvalidStateError(
                f"token id {token_id} is out of range: the vocabulary has ids 0..{self._vocab_size - 1}")

    def _check_width(self, width: int) -> None:
        if width < self._tables.num_words:
            raise MaskBufferError(
                f"the buffer has {width} words, the vocabulary needs {self._tables.num_words}")

    @staticmethod
    def _row_of(out, row: int):
        try:
            return out[row]
        except IndexError:
            raise MaskBufferError(f"row {row} is outside a batch of shape {tuple(out.shape)}") from None

    def _refusal(self, state: int, token_id: int) -> str:
        if token_id in self._eos_set:
            return f"EOS token {token_id} is not allowed in state {state}: the match is not complete"
        text = self._tokens[token_id]
        spelled = f" ({text!r})" if text is not None else " (a special token)"
        return f"token {token_id}{spelled} is not allowed in state {state}"
