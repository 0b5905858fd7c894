"""The index: an immutable token-level automaton served in constant time.

An :class:`Index` answers two questions for every state of a generation:
which tokens may come next (:meth:`Index.get_mask`, a ready bitset, or
:meth:`Index.get_tokens`, sorted ids) and where a token leads
(:meth:`Index.advance`). States are numbered ``0 .. num_states - 1``
breadth-first, the initial state is 0, and every state can still reach the end
of a match. EOS is allowed exactly in final states, where it keeps the state.

Storage (see :class:`IndexArrays`) is a handful of flat numpy arrays:

* tokens that behave alike from every state form a *group*; ``token_group``
  maps each token to its group (-1: never allowed anywhere);
* each state's transitions are a slice of ``edge_group`` (sorted) and
  ``edge_next``, found through ``state_offsets``;
* each state's allowed set is a row of ``masks``, shared by all states with
  the same set through ``mask_id``.

Serving needs only numpy; this module never imports the compiler, so a
generator that loads an index file does not pay for interegular or joblib.
"""

from __future__ import annotations

import bisect
import functools
import json
import marshal
import re
import threading
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np

from ..analysis.closing import distances_to_final
from ..analysis.errors import (EmptyLanguageError, EmptyRegexError, InvalidStateError, MaskBufferError, check_id_type,
                               TokenNotAllowedError)
from .arrays import INITIAL_STATE, IndexArrays
from .serving import ClosingRow, MaskServing

if TYPE_CHECKING:  # pragma: no cover
    from ..vocab.vocabulary import Vocabulary
    from ..schema.api import SchemaRegex
    from ..lazy import LazyIndex


class Index(MaskServing):
    """An immutable, precompiled token-level DFA for one pattern and vocabulary.

    Build one with ``from_regex(..., lazy=False)`` (or complete a lazy index:
    :meth:`from_regex` and :meth:`from_schema` serve lazily by default), store
    it with :meth:`save`, and get it back with :meth:`load`. A generation
    walks it through a :class:`Guide`.
    """

    def __init__(self, arrays: IndexArrays, metadata: dict[str, Any],
                 vocabulary: "Vocabulary | None" = None, *,
                 forced_later: Callable[[IndexArrays], IndexArrays] | None = None) -> None:
        """``forced_later``, from a build: called with ``arrays`` (whose
        fast-forward table is empty), it gives them with the table; it is
        called when the table, the arrays or a file are first wanted
        (:class:`tokendfa.builder.fastforward.PendingForcedTokens`)."""
        self._arrays = arrays
        self._forced_later = forced_later
        self._forced_lock = threading.Lock()
        self._metadata = metadata
        self._vocabulary = vocabulary
        self._token_group = arrays.token_group
        self._offsets = arrays.state_offsets
        self._edge_group = arrays.edge_group
        self._edge_next = arrays.edge_next
        self._finals = arrays.finals
        self._mask_id = arrays.mask_id
        self._masks = arrays.masks
        self._eos = frozenset(int(t) for t in arrays.eos_token_ids)
        # asked at every step (Guide.advance, the vLLM processor): made once, not per call
        self._eos_ids = tuple(int(t) for t in arrays.eos_token_ids)
        self._num_states = len(arrays.finals)
        self._vocab_size = len(arrays.token_group)
        self._words = arrays.masks.shape[1]
        # The masks reinterpreted for each buffer dtype a caller may pass, so
        # writing a mask is one copy with no per-call view.
        self._masks_as = {np.dtype(np.uint32): arrays.masks,
                          np.dtype(np.int32): arrays.masks.view(np.int32)}
        self._torch_mask_tables: dict[str, object] = {}
        # advance() reads the edges through memoryviews: indexing one and
        # bisecting it cost what a Python list does, with no copy and no
        # first-use conversion (a list of ten million edges would take a
        # second and hundreds of megabytes).
        self._edge_views = (memoryview(np.ascontiguousarray(arrays.state_offsets)),
                            memoryview(np.ascontiguousarray(arrays.edge_group)),
                            memoryview(np.ascontiguousarray(arrays.edge_next)))

    # --- building and files ----------------------------------------------

    @classmethod
    def from_regex(cls, pattern: "str | SchemaRegex", vocabulary: "Vocabulary", *, method: str = "fast",
                   n_jobs: int = 1, backend: str | None = None,
                   max_states: int | None = None, progress: bool | None = None,
                   lazy: bool = True, time_limit: float | None = None,
                   memory_budget: int | None = None, row_budget: int | None = None) -> "Index | LazyIndex":
        """Compile ``pattern`` (Python ``re`` syntax, matched against the
        whole text) for ``vocabulary``.

        By default (``lazy=True``) this returns a
        :class:`~tokendfa.lazy.LazyIndex` that serves at once: each
        state's mask is computed the first time it is asked for (the first
        mask in milliseconds), and ``complete()`` / ``save()`` explore it to
        the end and give this eager :class:`Index`. ``lazy=False`` builds the
        eager index whole before returning it (what an index built ahead of
        time and shared through a file wants; ``tokendfa build`` does this).

        ``method="reference"`` runs the brute-force build that defines the
        result; ``"fast"`` (default) gives the same index, faster. ``n_jobs``
        and ``backend`` go to joblib (e.g. ``backend="dask"`` on a cluster);
        ``max_states`` bounds the pattern's automaton
        (:class:`~tokendfa.analysis.errors.BuildLimitError` past it); ``progress``
        shows a progress line on stderr for long builds (default: on a
        terminal). These options shape the eager build, and a lazy index's
        completion. ``pattern`` may also be the result of
        :func:`tokendfa.schema.api.regex_from_schema`, whose shared pieces are then
        compiled once each.

        ``time_limit`` (seconds) stops the build with
        :class:`~tokendfa.analysis.errors.TimeLimitError` shortly after it
        runs out, and ``memory_budget`` (bytes; default: half the available
        memory, at most 1 GiB) bounds its largest tables
        (:class:`~tokendfa.analysis.errors.BuildLimitError`); both are
        checked while the work runs, and a build stopped by either returns
        nothing. For a lazy index they bound its construction, ``complete()``
        and the background completion, each from its start, and each row it
        computes later, from the start of that row's computation. ``row_budget``
        (bytes; default ``tokendfa.lazy.DEFAULT_ROW_BUDGET``, 32 MiB) bounds
        the token rows a lazy index keeps: the least recently used are
        dropped past it and computed again when asked.

        The builder (:mod:`tokendfa.builder`) is imported here, inside the call,
        so that loading and serving an index never pays for it; it returns
        arrays and metadata, which this wraps.
        """
        from ..builder import BuildConfig, build_index

        config = BuildConfig(method=method, n_jobs=n_jobs, backend=backend,
                             max_states=max_states, progress=progress, time_limit=time_limit,
                             memory_budget=memory_budget, row_budget=row_budget)
        definitions = dfa = deferred = None
        if not isinstance(pattern, str) and hasattr(pattern, "tree_definitions"):
            deferred = getattr(pattern, "deferred", None)  # recursion left to a lazy automaton
            if deferred is not None and not lazy:
                definitions = deferred.everything()  # the eager build needs every definition
            else:
                definitions = pattern.tree_definitions
            pattern, dfa = pattern.tree, pattern.automaton
        if lazy:
            from ..lazy import LazyIndex
            from ..builder.pipeline import bounded_resources

            with config.limits(), bounded_resources():  # the pattern's parse and first row too
                return LazyIndex(pattern, vocabulary, config, definitions=definitions, index_type=cls,
                                 deferred=deferred)
        built = build_index(pattern, vocabulary, config, definitions=definitions, dfa=dfa,
                            forced_later=True)
        return cls(built.arrays, built.metadata, vocabulary, forced_later=built.forced_later)

    @classmethod
    def from_schema(cls, schema, vocabulary: "Vocabulary", *, whitespace: str = "compact",
                    lenient: bool = False, max_recursion_depth: int = 3,
                    any_depth: int | str = "auto", lazy: bool = True,
                    **build_options) -> "Index | LazyIndex":
        """Compile a JSON Schema (a dict, a bool, or JSON text) for ``vocabulary``.

        The schema becomes a regex (:mod:`tokendfa.schema.api`) that goes through the
        normal build. Keywords that cannot be compiled exactly raise
        :class:`~tokendfa.analysis.errors.UnsupportedSchemaError` naming the keyword and
        its JSON pointer, unless ``lenient=True``, which widens instead and
        lists every widening in ``metadata["widenings"]``. ``whitespace`` is
        ``"compact"`` (no whitespace between tokens) or ``"flexible"``
        (bounded JSON whitespace). ``max_recursion_depth`` and ``any_depth``
        bound recursion and free values (see :func:`tokendfa.schema.api.regex_from_schema`);
        ``metadata["notes"]`` lists the narrowings that applied. Other options
        (``method``, ``n_jobs``, ``backend``, ``max_states``, ``progress``,
        ``time_limit``, ``memory_budget``, ``row_budget``) are :meth:`from_regex`'s; the time
        limit and the memory budget cover the schema's compilation too. The
        schema compiler and the builder are imported inside the call.

        By default (``lazy=True``) this returns a
        :class:`~tokendfa.lazy.LazyIndex` that serves at once (see
        :meth:`from_regex`); free values then nest a fixed ``LAZY_ANY_DEPTH``
        levels unless ``any_depth`` is a number, and the automaton's size is
        not measured first (both would build it whole). ``lazy=False`` builds
        the eager index, with ``any_depth="auto"`` as deep as keeps the
        automaton small: what ``tokendfa build`` and the index cache store. A value that enters a recursive ``$ref`` is
        then written when a match first reaches it (``defer_recursion``), so
        mutually recursive definitions cost the levels a generation reaches,
        not every unrolling up front.
        """
        path = _schema_path()
        config = path.BuildConfig(**build_options)  # an unknown option is a TypeError before any work
        with config.limits(), path.bounded_resources():
            try:
                return cls._from_schema(schema, vocabulary, config, whitespace, lenient,
                                        max_recursion_depth, any_depth, lazy)
            except EmptyRegexError:
                # found empty only by the automaton (constraints that exclude each other
                # through recursion): the compiled pattern means nothing to the user; the
                # schema compiler's own EmptyLanguageErrors say where, and pass through
                raise EmptyLanguageError(
                    "no JSON value satisfies this schema as compiled: its constraints exclude each "
                    "other, or every value needs its recursive definitions nested deeper than they "
                    "are unrolled (max_recursion_depth)") from None

    @classmethod
    def _from_schema(cls, schema, vocabulary, config, whitespace, lenient, max_recursion_depth,
                     any_depth, lazy) -> "Index":
        if lazy:
            return cls._lazy_from_schema(schema, vocabulary, config, whitespace, lenient,
                                         max_recursion_depth, any_depth)
        from ..builder import build_index
        from ..schema.api import regex_from_schema

        compiled = regex_from_schema(schema, whitespace=whitespace, lenient=lenient,
                                     max_recursion_depth=max_recursion_depth, any_depth=any_depth)
        built = build_index(compiled.tree, vocabulary, config,
                            definitions=compiled.tree_definitions, dfa=compiled.automaton, forced_later=True)
        metadata = dict(built.metadata)
        metadata.update(_schema_metadata(schema, whitespace, compiled))
        return cls(built.arrays, metadata, vocabulary, forced_later=built.forced_later)

    @classmethod
    def _lazy_from_schema(cls, schema, vocabulary, config, whitespace, lenient, max_recursion_depth,
                          any_depth) -> "Index":
        """The lazy index; recursion is deferred (see :func:`regex_from_schema`'s
        ``defer_recursion``), so a schema left with no value only because its
        recursion was cut is found empty by the lazy automaton, and unrolled
        deeper here, as the eager compilation does."""
        path = _schema_path()
        LAZY_ANY_DEPTH, LazyIndex = path.LAZY_ANY_DEPTH, path.LazyIndex
        regex_from_schema, AUTO_RECURSION_DEPTH = path.regex_from_schema, path.AUTO_RECURSION_DEPTH
        advice = None
        if any_depth == "auto":
            advice = (f"free values (an empty schema, additional properties) nest {LAZY_ANY_DEPTH} "
                      "levels in a lazy schema index; for the whole index or a file, build it with "
                      "Index.from_schema(..., lazy=False) or `tokendfa build` (free values as deep as "
                      "keeps the automaton small), or pass a small any_depth")

        depth = max_recursion_depth
        while True:
            compiled = regex_from_schema(
                schema, whitespace=whitespace, lenient=lenient, max_recursion_depth=depth,
                any_depth=LAZY_ANY_DEPTH if any_depth == "auto" else any_depth, state_budget=None,
                share_free_levels=True, share_counts=True, share_values=True, defer_recursion=True)
            if depth != max_recursion_depth:
                compiled.notes.append(f"no value within {max_recursion_depth} recursion unrolling(s): "
                                      f"unrolled {depth} times instead")
            deferred = compiled.deferred
            try:
                # the schema is copied now (the caller may change its dict
                # afterwards, and the metadata and a saved file must say what was
                # compiled) but written as JSON text only when the metadata is read
                return LazyIndex(compiled.tree, vocabulary, config, definitions=compiled.tree_definitions,
                                 index_type=cls, metadata=_schema_metadata(schema, whitespace, compiled,
                                                                           deferred_text=True),
                                 completion_advice=advice, deferred=deferred)
            except EmptyLanguageError:
                if (deferred is None or not deferred.compiler.recursion_cut
                        or depth >= max(max_recursion_depth, AUTO_RECURSION_DEPTH)):
                    raise
            depth += 1

    def save(self, path: str | PathLike, *, compress: bool = True) -> None:
        """Write the index to ``path`` atomically (see :mod:`tokendfa.runtime.files`).

        Compressed (the default) files are small and inflate in about a
        millisecond per megabyte at load; ``compress=False`` files are larger
        but mapped without copying, which suits very large indexes that many
        processes load at once."""
        from .files import save_index

        save_index(self, path, compress=compress)

    @classmethod
    def load(cls, path: str | PathLike, vocabulary: "Vocabulary | None" = None, *,
             verify: bool = True, mmap: bool = False) -> "Index":
        """Read an index file, checking every field serving relies on
        (:class:`~tokendfa.analysis.errors.IndexFileError` otherwise); with
        ``vocabulary``, check it is the one the index was built for
        (:class:`~tokendfa.analysis.errors.VocabularyMismatchError`).
        ``verify=False`` skips the checksum and the mask-against-transitions
        check; ``mmap=True`` maps the file instead of copying it (see
        :func:`tokendfa.runtime.files.load_index` for when that is safe)."""
        from .files import load_index

        return load_index(path, vocabulary, verify=verify, mmap=mmap)

    # --- description -------------------------------------------------------

    @property
    def arrays(self) -> IndexArrays:
        return self._arrays if self._forced_later is None else self._with_forced()

    def _with_forced(self) -> IndexArrays:
        """The arrays with the fast-forward table, made now if it was left
        for later (once, whichever thread asks first)."""
        with self._forced_lock:
            if self._forced_later is not None:
                self._arrays = self._forced_later(self._arrays)
                self._forced_later = None
        return self._arrays

    @property
    def metadata(self) -> dict[str, Any]:
        return self._metadata

    @property
    def vocabulary(self) -> "Vocabulary | None":
        return self._vocabulary

    @property
    def pattern(self) -> str:
        return self._metadata.get("pattern", "")

    @property
    def initial_state(self) -> int:
        return INITIAL_STATE

    @property
    def num_states(self) -> int:
        return self._num_states

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._eos_ids

    @property
    def final_states(self) -> np.ndarray:
        return np.flatnonzero(self._finals)

    @property
    def num_transitions(self) -> int:
        """Token transitions in all (EOS not counted), as if stored one by one."""
        counts = np.array([int(np.unpackbits(row.view(np.uint8)).sum()) for row in self._masks])
        eos_in = np.array([sum(self._mask_has(row, t) for t in self._eos) for row in self._masks])
        return int(((counts - eos_in)[self._mask_id]).sum())

    @property
    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        return sum(a.nbytes for a in self.arrays.as_dict().values())

    def __repr__(self) -> str:
        vocab = self._metadata.get("vocabulary", {}).get("name", "?")
        return (f"Index(pattern={self.pattern!r}, vocabulary={vocab!r}, "
                f"states={self.num_states}, masks={len(self._masks)})")

    # --- serving -------------------------------------------------------------

    def is_final(self, state: int) -> bool:
        """Whether the text so far is a complete match (EOS allowed)."""
        state = self._check_state(state)
        return bool(self._finals[state])

    def get_mask(self, state: int) -> np.ndarray:
        """Allowed tokens as a read-only ``uint32`` bitset view (no copy):
        bit ``i % 32`` of word ``i // 32`` is set when token ``i`` is allowed."""
        state = self._check_state(state)
        return self._masks[self._mask_id[state]]

    def write_mask_into(self, state: int, out, row: int | None = None) -> None:
        """Copy the allowed-token bitset of ``state`` into a caller's buffer.

        ``out`` is a numpy array or torch tensor of 32-bit words (int32 or
        uint32), one row (``out[w]``) or a batch (``out[row, w]``). It may be
        wider than the vocabulary's ``ceil(vocab_size / 32)`` words, as a
        model's logits often are: the extra words are cleared, so ids past the
        vocabulary are never allowed.
        """
        if type(state) is not int or not 0 <= state < self._num_states:  # numpy ints: checked there
            state = self._check_state(state)
        if type(out) is not np.ndarray:
            if not out.is_cpu:  # torch on an accelerator: copy on the device
                self._write_on_device(state, out, row)
                return
            out = self._numpy_view_of(out)  # a CPU tensor: its memory, no copy
        target = out if row is None else self._row_of(out, row)
        masks = self._masks_as.get(target.dtype)
        if masks is None or target.ndim != 1:
            raise MaskBufferError(
                f"the mask buffer must be int32 or uint32 words, one row or a batch of rows; "
                f"got {target.dtype} with shape {out.shape}")
        words = self._words
        if len(target) == words:  # the common case: a buffer exactly as wide as the vocabulary
            target[...] = masks[self._mask_id[state]]
            return
        self._check_width(len(target))
        target[:words] = masks[self._mask_id[state]]
        target[words:] = 0

    def _write_on_device(self, state: int, out, row: int | None) -> None:
        target = out if row is None else self._row_of(out, row)
        self._check_width(target.shape[-1])
        words = self._words
        target[:words].copy_(self._torch_masks(out.device)[self._mask_id[state]])
        target[words:].zero_()

    def _torch_masks(self, device):
        """The masks as a torch tensor on ``device``, made on first use there."""
        table = self._torch_mask_tables.get(str(device))
        if table is None:
            import torch  # only when the caller already uses torch

            table = torch.tensor(self._masks.view(np.int32), device=device)
            self._torch_mask_tables[str(device)] = table
        return table

    def forced_tokens(self, state: int) -> np.ndarray:
        """Tokens the pattern forces from ``state``, in the tokenizer's own
        segmentation, stopping early where the model could choose a longer
        token (see :mod:`tokendfa.builder.fastforward`). Empty when nothing is forced.

        A freshly built index makes its whole table of forced tokens at the
        first call (the tokenizer over every forced state: ~0.3 s for a
        60,000-value enum on qwen2.5), not at build: a caller that only asks
        for masks never pays for it. A loaded index has it from its file."""
        state = self._check_state(state)
        arrays = self.arrays
        return arrays.forced_tokens[arrays.forced_offsets[state]:arrays.forced_offsets[state + 1]]

    def is_allowed(self, state: int, token_id: int) -> bool:
        state = self._check_state(state)
        token_id = self._check_token(token_id)
        return self._mask_has(self._masks[self._mask_id[state]], token_id)

    def advance(self, state: int, token_id: int) -> int:
        """The state after ``token_id``; EOS keeps a final state.

        Raises :class:`~tokendfa.analysis.errors.TokenNotAllowedError` for a token the
        state does not allow.
        """
        offsets, edge_group, edge_next = self._edge_views
        if type(state) is not int or not 0 <= state < self._num_states:  # numpy ints: checked there
            state = self._check_state(state)
        if type(token_id) is not int or not 0 <= token_id < self._vocab_size:
            token_id = self._check_token(token_id)
        group = self._token_group.item(token_id)
        if group >= 0:
            hi = offsets[state + 1]
            position = bisect.bisect_left(edge_group, group, offsets[state], hi)
            if position < hi and edge_group[position] == group:
                return edge_next[position]
        elif token_id in self._eos and self._finals[state]:
            return state
        raise TokenNotAllowedError(self._refusal(state, token_id), state=state, token_id=token_id)

    # --- closing within a budget (see tokendfa.runtime.serving) -------------------

    def _finish_distance(self, state: int, limit: int) -> int:
        # The fewest tokens of this graph to a final state: exact, every
        # state at once on first use (one backwards search over the edges).
        distances = self.__dict__.get("_token_distances")
        if distances is None:
            distances = distances_to_final(self._offsets, self._edge_next, self._finals)
            self._token_distances = distances
        return int(distances[state])

    def _closing_successors(self, state: int) -> np.ndarray:
        return np.unique(self._edge_next[self._offsets[state]:self._offsets[state + 1]])

    def _closing_row(self, state: int) -> ClosingRow:
        lo, hi = int(self._offsets[state]), int(self._offsets[state + 1])
        groups, following = self._edge_group[lo:hi], self._edge_next[lo:hi]
        if not len(groups):
            empty = np.zeros(0, dtype=np.int32)
            return ClosingRow(empty, empty, None, -1)
        token_group = self._token_group.astype(np.int64)
        at = np.minimum(np.searchsorted(groups, token_group), len(groups) - 1)
        tokens = np.flatnonzero((token_group >= 0) & (groups[at] == token_group))
        return ClosingRow(tokens.astype(np.int32), following[at[tokens]].astype(np.int32), None, -1)

    # --- helpers ----------------------------------------------------------------

    @staticmethod
    def _mask_has(row: np.ndarray, token_id: int) -> bool:
        return bool((int(row[token_id >> 5]) >> (token_id & 31)) & 1)

    def _check_state(self, state: int) -> int:
        """``state`` as a Python int (numpy's would make later arithmetic
        numpy's), or the precise error."""
        check_id_type(state, "state")
        if not 0 <= state < self._num_states:
            raise InvalidStateError(
                f"state {state} is out of range: this index has states 0..{self._num_states - 1}")
        return int(state)

    def _refusal(self, state: int, token_id: int) -> str:
        spelled = ""
        if self._vocabulary is not None:
            text = self._vocabulary.tokens[token_id]
            spelled = f" ({text!r})" if text is not None else " (a special token)"
        if token_id in self._eos:
            return f"EOS token {token_id} is not allowed in state {state}: the match is not complete"
        return f"token {token_id}{spelled} is not allowed in state {state}"


class _SchemaPath(NamedTuple):
    """What ``Index.from_schema`` uses of the builder, the schema compiler and
    the lazy engine (see :func:`_schema_path`)."""

    BuildConfig: Any
    bounded_resources: Any
    LazyIndex: Any
    LAZY_ANY_DEPTH: int
    regex_from_schema: Any
    AUTO_RECURSION_DEPTH: int


@functools.cache
def _schema_path() -> _SchemaPath:
    """The schema path's names, imported on the first call (this module never
    imports the compiler itself, so that serving never pays for it) and kept:
    imported in each call, every relative import asked the module spec's
    parent (a Python property) and importlib's _handle_fromlist again, ~2%
    of a schema's first mask in a fresh fork of a warm process."""
    from ..builder import BuildConfig
    from ..builder.pipeline import bounded_resources
    from ..lazy import LAZY_ANY_DEPTH, LazyIndex
    from ..schema.api import regex_from_schema
    from ..schema.depth import AUTO_RECURSION_DEPTH

    return _SchemaPath(BuildConfig, bounded_resources, LazyIndex, LAZY_ANY_DEPTH, regex_from_schema,
                       AUTO_RECURSION_DEPTH)


# A small schema of the common kinds (free and bounded strings, integers,
# numbers, booleans, an array, an enum): compiling it and serving its first
# rows at start-up loads the schema compiler and jsonschema and fills the
# per-process caches a first schema would otherwise fill.
_WARM_UP_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "code": {"type": "string", "maxLength": 8},
                   "count": {"type": "integer", "minimum": 0}, "ratio": {"type": "number"},
                   "flag": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
                   "kind": {"enum": ["a", "b"]}},
    "required": ["name"],
}
# The pieces JSONSchemaBench's 7,952 schemas use most, beyond those above
# (counts over every schema of its 21 sources): minLength 1 (3,945 times),
# maxLength 255 (1,782) and 1024 (1,181), nullable types ("string"/"null"
# 4,442, then array, integer, boolean, object, number), minimum 0 (2,359)
# and 1 (724), minItems 1 (1,299), the formats date-time (946), uri (737),
# date (323), email (127) and uuid (87), closed objects (additionalProperties
# false, 17,107), open ones (true, 1,203: free values) and a $ref. Both
# schemas are compiled once at start-up, their pieces kept for the process
# the first time they are built (tokendfa.analysis.regex_compiler's
# keeping_repeats; elsewhere a piece is kept the second time), so that a
# server's first schemas, and the children a prepared process forks, copy
# these fragments instead of building them.
_WARM_UP_COMMON = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1}, "title": {"type": "string", "maxLength": 255},
        "body": {"type": "string", "maxLength": 1024}, "note": {"type": ["string", "null"]},
        "items": {"type": ["array", "null"], "items": {"$ref": "#/definitions/item"}, "minItems": 1},
        "size": {"type": ["integer", "null"], "minimum": 0}, "rank": {"type": "integer", "minimum": 1},
        "on": {"type": ["boolean", "null"]}, "score": {"type": ["number", "null"]},
        "extra": {"type": ["object", "null"]}, "created": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"}, "link": {"type": "string", "format": "uri"},
        "mail": {"type": "string", "format": "email"}, "uid": {"type": "string", "format": "uuid"},
        "any": {}},
    "required": ["id"],
    "additionalProperties": False,
    "definitions": {"item": {"type": "object", "properties": {"key": {"type": "string"},
                                                              "value": {"type": "number"}},
                             "additionalProperties": True}},
}


def prepare_builds(vocabulary: "Vocabulary", *, eager: bool = True) -> None:
    """What a first build for ``vocabulary`` would otherwise pay, done now:
    the lazy engine's per-vocabulary tables, the eager build's trie of the
    spellings (``eager`` only), and one small schema compiled and served
    (imports, per-process caches). Called by :meth:`Vocabulary.prepare`
    (the package registers it); without the builder's dependencies (a
    serving-only install) it does nothing."""
    from ..analysis.errors import TokenDFAError
    from ..analysis.regex_compiler import keeping_repeats
    from ..lazy import prepare_vocabulary

    prepare_vocabulary(vocabulary)
    if eager:
        from ..builder.narrow import token_trie

        token_trie(vocabulary)  # the eager build's byte-by-byte walk (literal sets)
    try:
        with keeping_repeats():   # each piece kept the first time it is built: one compile each
            for schema in (_WARM_UP_COMMON, _WARM_UP_SCHEMA):
                index = Index.from_schema(schema, vocabulary)
                index.get_mask(index.initial_state)
                # every fragment built, not only the first mask's: a lazy
                # automaton compiles the rest of a pattern when a match reaches it
                index.byte_dfa.compile_everything()
        # A few steps through allowed tokens (the first allowed one that is
        # not EOS at each), not the tokenizer's encoding: a lazy server
        # never loads the encoder, and any walk touches the same code.
        state = index.initial_state
        eos = set(vocabulary.eos_token_ids)
        for _ in range(12):
            allowed = [int(t) for t in index.get_tokens(state)[:8] if int(t) not in eos]
            if not allowed:
                break
            state = index.advance(state, allowed[0])
        # The per-vocabulary walk plans and loop masks of the contexts common
        # to JSON (tokendfa.lazy.warmup), made now rather than in the cold
        # steps of a process's first schemas.
        from ..lazy import WARM_UP, walk_texts

        with keeping_repeats():
            for warm in WARM_UP:
                walk_texts(Index.from_schema(warm.schema, vocabulary), vocabulary, warm.instances)
    except TokenDFAError:
        # no jsonschema (MissingDependencyError), or a vocabulary that cannot
        # spell JSON (the toy ones of the tests): nothing more to warm
        pass


_SURROGATE = re.compile("[\ud800-\udfff]")


def _schema_metadata(schema, whitespace: str, compiled, *,
                     deferred_text: bool = False) -> "dict[str, Any] | Callable[[], dict[str, Any]]":
    """What an index built from a schema says of it, besides the build's own metadata.

    A lone surrogate (a Python string may hold one raw, in the schema's text or
    in a pointer a note names) is written as its escape: the file's metadata is
    UTF-8, which has no bytes for it.

    With ``deferred_text``, a function that makes that dict when the metadata
    is first read (what :class:`~tokendfa.lazy.LazyIndex` takes): the schema's
    JSON types are copied now with :func:`marshal.dumps`, one buffer with no
    object per key or value, and written as JSON text then. In children of one
    warmed parent (each schema of JSONSchemaBench's first five a source in a
    fresh fork), ``json.dumps`` took ~230 us and ~70 page faults more than
    nothing, ``marshal.dumps`` ~65 us and ~15; on MaskBench's sample, each
    schema's first mask in children of one parent with one or the other
    (three rounds), CPU 0.976x at the median schema and 7 faults fewer. The
    text is read only when the index is saved or its metadata asked for,
    never on the way to a first mask. A schema marshal does not take (a
    subclass of dict, an object) is written at once, as without
    ``deferred_text``."""
    widenings = [_utf8(w) for w in compiled.widenings]
    notes = [_utf8(n) for n in compiled.notes]
    if isinstance(schema, str):
        return _schema_fields(_utf8(schema), whitespace, widenings, notes, deferred_text)
    if deferred_text:
        try:
            copied = marshal.dumps(schema, 2)  # version 2: no table of shared references to fill
        except ValueError:
            pass
        else:
            return lambda: dict(kind="schema", schema=json.dumps(marshal.loads(copied)),
                                whitespace=whitespace, widenings=widenings, notes=notes)
    return _schema_fields(json.dumps(schema), whitespace, widenings, notes, deferred_text)


def _schema_fields(text: str, whitespace: str, widenings: list[str], notes: list[str], deferred: bool):
    fields = dict(kind="schema", schema=text, whitespace=whitespace, widenings=widenings, notes=notes)
    return (lambda: fields) if deferred else fields


def _utf8(text: str) -> str:
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
