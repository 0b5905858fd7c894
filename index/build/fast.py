"""The fast build: walk each signature once, as a prefix graph, in parallel.

The reference build (:mod:`tokendfa.build.reference`) walks every token from every
state. This build gives the identical index with far less work:

1. *Static analysis* of the byte DFA (:mod:`tokendfa.analysis`): byte classes, dead
   bytes, and the table ``Tc[state, class]``.
2. *Signatures* (:mod:`tokendfa.analysis.signatures`): tokens with equal class
   sequences behave alike, so only distinct sequences are walked; tokens with
   a dead byte are dropped at once.
3. *Prefix graph*: the signatures' trie, walked from every live state at
   once. Each node is identified by its *behaviour*, the vector of states it
   leads to from every state; prefixes with equal behaviour have the same
   future and merge into one node, so the graph stays at a few hundred nodes
   where the trie would have hundreds of thousands. A whole level advances in
   one vectorised step, and a prefix that dies from every state drops its
   whole subtree at once.
4. *Groups*: the tokens of one final behaviour form a group; its edges are
   the behaviour vector's non-dead entries.
5. *Parallel*: the trie splits into disjoint subtrees by first class; joblib
   workers walk them (any joblib backend: ``loky`` here, Dask or Ray on a
   cluster) and their behaviour tables are merged.

Edges then go through the same canonical assembly as the reference build
(:mod:`tokendfa.build.assemble`), which keeps only states reachable from the initial
one, so both builds give the same arrays.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..analysis.construct import byte_dfa_from_regex
from ..analysis.dfa import DEAD, ByteDFA
from ..analysis.byteclasses import byte_classes, class_table
from ..analysis.literals import narrow_states
from ..analysis.errors import BuildLimitError
from ..analysis.signatures import Signatures, token_signatures
from .assemble import RawEdges, assemble
from ..runtime.arrays import IndexArrays
from ..runtime.index import Index
from ..vocab.vocabulary import Vocabulary

DEFAULT_MAX_STATES = 200_000
# States where at most this many bytes go on are walked byte by byte.
NARROW_MAX_BYTES = 8


def memory_budget() -> int:
    """Bytes the build's largest tables may take: half of the memory
    available now (so a pathological pattern fails with a clear error
    instead of driving the machine into swap or the OOM killer)."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        available = 8 << 30
    return max(available // 2, 256 << 20)
METHODS = ("fast", "reference")


class Progress:
    """A one-line progress report on stderr, shown only once a build has
    taken longer than a moment (so quick builds stay silent)."""

    def __init__(self, enabled: bool | None = None, *, delay: float = 1.0, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled = enabled
        self.started = time.perf_counter()
        self.delay = delay
        self.shown = False

    def update(self, stage: str, done: int | None = None, total: int | None = None) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        if elapsed < self.delay:
            return
        amount = f" {done}/{total}" if done is not None and total else ""
        self.stream.write(f"\rtokendfa: {stage}{amount} ({elapsed:.1f} s)\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def build_index(pattern: str, vocabulary: Vocabulary, *, method: str = "fast",
                n_jobs: int = 1, backend: str | None = None,
                max_states: int | None = None, progress: bool | None = None,
                definitions: dict[str, str] | None = None, dfa: ByteDFA | None = None) -> Index:
    """Compile ``pattern`` for ``vocabulary`` into an :class:`Index`.

    ``progress`` shows a progress line on stderr for builds that take more
    than a second (default: when stderr is a terminal). ``definitions`` are
    the shared pieces a schema's pattern refers to (:class:`tokendfa.schema.api.SchemaRegex`);
    ``dfa``, the pattern's byte DFA when the caller has already built it.
    """
    started = time.perf_counter()
    reporter = Progress(progress)
    try:
        return _build_index(pattern, vocabulary, method, n_jobs, backend, max_states, reporter,
                            started, definitions or {}, dfa)
    finally:
        reporter.close()


def _readable(text: str, definitions: dict[str, str]) -> str:
    """A pattern for the metadata: placeholders (lone surrogates, not UTF-8) as ``<shared N>``."""
    for number, placeholder in enumerate(definitions):
        text = text.replace(placeholder, f"<shared {number}>")
    return text


def _build_index(pattern, vocabulary, method, n_jobs, backend, max_states, reporter, started,
                 definitions, dfa):
    reporter.update("compiling the pattern")
    if dfa is None:
        dfa = byte_dfa_from_regex(pattern, definitions=definitions)
    limit = DEFAULT_MAX_STATES if max_states is None else max_states
    if dfa.num_states - 1 > limit:
        raise BuildLimitError(
            f"the pattern's automaton has {dfa.num_states - 1} states, more than the limit "
            f"of {limit} (raise max_states to build it anyway)", reached=dfa.num_states - 1)
    arrays = build_arrays(dfa, vocabulary, method=method, n_jobs=n_jobs, backend=backend,
                          progress=reporter)
    metadata = {
        "kind": "regex",
        "pattern": _readable(pattern, definitions),
        "vocabulary": {
            "name": vocabulary.name,
            "source": vocabulary.source,
            "fingerprint": vocabulary.fingerprint,
            "size": vocabulary.size,
        },
        "build": {
            "method": method,
            "byte_dfa_states": dfa.num_states,
            "seconds": round(time.perf_counter() - started, 4),
        },
    }
    if definitions:
        metadata["shared"] = [_readable(text, definitions) for text in definitions.values()]
    return Index(arrays, metadata, vocabulary)


def build_arrays(dfa: ByteDFA, vocabulary: Vocabulary, *, method: str = "fast",
                 n_jobs: int = 1, backend: str | None = None,
                 progress: Progress | None = None) -> IndexArrays:
    progress = progress or Progress(False)
    if method == "reference":
        from .reference import reference_edges

        progress.update("walking every token from every state")
        raw = reference_edges(dfa, vocabulary)
    elif method == "fast":
        raw = signature_edges(dfa, vocabulary, n_jobs=n_jobs, backend=backend, progress=progress)
    else:
        raise ValueError(f"unknown build method {method!r}: choose one of {', '.join(METHODS)}")
    progress.update("assembling the index")
    return assemble(dfa, raw, vocabulary)


# --- the prefix graph -------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Behaviours:
    """What a set of signatures does to the automaton.

    A *behaviour* is a function from states to states, stored as a vector
    ``vectors[b, state]`` (0 = dies there). ``signature_behaviour[k]`` is the
    behaviour of signature ``k`` (-1: dies from every state).
    """

    vectors: np.ndarray              # int32[B, num_states]
    signature_behaviour: np.ndarray  # int64[K]


def signature_behaviours(table: np.ndarray, classes: np.ndarray, lengths: np.ndarray,
                         members: np.ndarray, progress: Progress | None = None,
                         max_bytes: int | None = None,
                         starts: np.ndarray | None = None) -> Behaviours:
    """Behaviours of the signatures ``members``, walked as one prefix graph.

    The graph is the trie of the signatures with every node keyed by its
    behaviour rather than its spelling: two prefixes that take every state to
    the same place have the same future, so they are one node. A level of the
    graph advances in one vectorised step over all signatures still going; a
    prefix that dies from every state drops its signatures at once. The number
    of nodes is the number of distinct behaviours, typically a few hundred,
    however many signatures there are; past ``max_bytes`` of behaviour vectors
    (default: :func:`memory_budget`) the build stops with
    :class:`BuildLimitError`.
    """
    budget = memory_budget() if max_bytes is None else max_bytes
    num_states, num_classes = table.shape
    order = members[np.argsort(-lengths[members], kind="stable")]
    sorted_lengths = lengths[order]
    identity = np.arange(num_states, dtype=np.int32)
    if starts is not None:  # walk only from these states
        identity = np.where(starts, identity, DEAD).astype(np.int32)
    # The behaviour vectors live in one growing matrix (capacity doubled when
    # full) so that a level reads them without copying: stacking the list of
    # vectors anew at every level cost more than the walk itself on 40k states.
    store = np.empty((64, num_states), dtype=np.int32)
    store[0] = identity
    by_class = np.ascontiguousarray(table.T)
    num_vectors = 1
    known = {identity.tobytes(): 0}
    current = np.zeros(len(order), dtype=np.int64)
    alive = np.ones(len(order), dtype=bool)
    max_length = int(sorted_lengths[0]) if len(order) else 0
    for depth in range(max_length):
        if progress is not None:
            progress.update("walking the prefix graph, level", depth + 1, max_length)
        count = int(np.count_nonzero(sorted_lengths > depth))
        going = np.flatnonzero(alive[:count])
        if len(going) == 0:
            break
        key = current[going] * num_classes + classes[order[going], depth]
        pairs, which = np.unique(key, return_inverse=True)
        stepped = np.empty((len(pairs), num_states), dtype=np.int32)
        pair_class = pairs % num_classes
        for klass in np.unique(pair_class).tolist():
            # One column of the table at a time: a plain take from a
            # contiguous column is several times faster than a 2-D fancy index.
            rows = np.flatnonzero(pair_class == klass)
            stepped[rows] = np.take(by_class[klass], store[pairs[rows] // num_classes])
        lives = stepped.any(axis=1)
        ids = np.full(len(pairs), -1, dtype=np.int64)
        for i in np.flatnonzero(lives).tolist():
            row = stepped[i]
            raw = row.tobytes()
            found = known.get(raw)
            if found is None:
                if num_vectors == len(store):
                    store = np.concatenate([store, np.empty_like(store)])
                found = known[raw] = num_vectors
                store[num_vectors] = row
                num_vectors += 1
            ids[i] = found
        if num_vectors * num_states * 4 > budget:
            raise BuildLimitError(
                f"the build needs more than {budget >> 20} MiB for {num_vectors} token "
                f"behaviours over {num_states} states; the pattern is too large for this "
                "vocabulary and machine", reached=num_vectors)
        step = ids[which.ravel()]
        current[going] = step
        alive[going[step < 0]] = False
    behaviour = np.where(alive, current, -1)
    signature_behaviour = np.full(len(lengths), -1, dtype=np.int64)
    signature_behaviour[order] = behaviour
    return Behaviours(store[:num_vectors].copy(), signature_behaviour)


def split_signatures(signatures: Signatures, parts: int) -> list[np.ndarray]:
    """Disjoint sets of signatures, whole subtrees by first class, balanced by
    total length so joblib workers get similar work."""
    first_class = signatures.classes[:, 0]
    weight = np.bincount(first_class, weights=signatures.lengths.astype(np.float64))
    bins: list[list[int]] = [[] for _ in range(max(1, parts))]
    load = np.zeros(len(bins))
    for klass in np.argsort(-weight, kind="stable"):
        if weight[klass] == 0:
            continue
        target = int(np.argmin(load))
        bins[target].append(int(klass))
        load[target] += weight[klass]
    members = [np.flatnonzero(np.isin(first_class, b)) for b in bins if b]
    return members or [np.arange(0)]


def _merge_behaviours(parts: list[Behaviours], num_signatures: int) -> Behaviours:
    """One behaviour table from the parts' tables (equal vectors become one)."""
    known: dict[bytes, int] = {}
    vectors: list[np.ndarray] = []
    signature_behaviour = np.full(num_signatures, -1, dtype=np.int64)
    for part in parts:
        remap = np.empty(len(part.vectors), dtype=np.int64)
        for i, row in enumerate(part.vectors):
            raw = row.tobytes()
            if raw not in known:
                known[raw] = len(vectors)
                vectors.append(row)
            remap[i] = known[raw]
        mine = part.signature_behaviour >= 0
        signature_behaviour[mine] = remap[part.signature_behaviour[mine]]
    width = parts[0].vectors.shape[1] if parts else 0
    matrix = np.asarray(vectors, dtype=np.int32) if vectors else np.zeros((0, width), np.int32)
    return Behaviours(matrix, signature_behaviour)


def exact_walk(transitions: np.ndarray, matrix: np.ndarray, lengths: np.ndarray,
               states: np.ndarray, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Walk the bytes of ``tokens[i]`` from position ``offsets[i]`` on, from
    ``states[i]``, through the full byte table; returns each end state (0 if
    the walk dies). Vectorised over the pairs; dead pairs drop out at once."""
    current = states.astype(np.int32)
    position = offsets.astype(np.int64)
    ends = np.zeros(len(current), dtype=np.int32)
    active = np.arange(len(current))
    while len(active):
        finished = position[active] >= lengths[tokens[active]]
        done = active[finished]
        ends[done] = current[done]
        active = active[~finished]
        if not len(active):
            break
        current[active] = transitions[current[active], matrix[tokens[active], position[active]]]
        position[active] += 1
        active = active[current[active] != DEAD]
    return ends


def narrow_edges(dfa: ByteDFA, narrow: np.ndarray, vocabulary: Vocabulary):
    """Every (state, token, end) from the narrow states, found byte by byte.

    From a narrow state only a few bytes go on, so the vocabulary's sorted
    spellings are split by those bytes with two bisections each: a token
    range whose prefix dies is never looked at again. Where the walk reaches
    a wide state, the rest of the range is walked with :func:`exact_walk`.
    """
    spellings, ids = vocabulary.sorted_spellings()
    table = dfa.transitions
    matrix, lengths = vocabulary.byte_matrix()
    found_source, found_token, found_target = [], [], []
    pending = []  # (origin, state, lo, hi, depth): ranges to walk in bulk
    live_bytes = {int(s): np.flatnonzero(table[s]).tolist() for s in np.flatnonzero(narrow)}
    for origin in np.flatnonzero(narrow).tolist():
        stack = [(0, len(spellings), 0, origin)]
        while stack:
            lo, hi, depth, state = stack.pop()
            if depth:
                # Tokens that are exactly the prefix sort first in the range.
                while lo < hi and len(spellings[lo]) == depth:
                    found_source.append(origin)
                    found_token.append(int(ids[lo]))
                    found_target.append(state)
                    lo += 1
                if lo >= hi:
                    continue
                if not narrow[state]:
                    pending.append((origin, state, lo, hi, depth))
                    continue
            prefix = spellings[lo][:depth]
            for byte in live_bytes[state]:
                sub_lo = bisect.bisect_left(spellings, prefix + bytes([byte]), lo, hi)
                sub_hi = (bisect.bisect_left(spellings, prefix + bytes([byte + 1]), sub_lo, hi)
                          if byte < 255 else hi)
                if sub_lo < sub_hi:
                    stack.append((sub_lo, sub_hi, depth + 1, int(table[state, byte])))
    sources = [np.asarray(found_source, dtype=np.int32)]
    tokens = [np.asarray(found_token, dtype=np.int64)]
    targets = [np.asarray(found_target, dtype=np.int32)]
    if pending:
        sizes = np.array([hi - lo for _, _, lo, hi, _ in pending])
        origin = np.repeat([p[0] for p in pending], sizes)
        state = np.repeat([p[1] for p in pending], sizes)
        depth = np.repeat([p[4] for p in pending], sizes)
        token = np.concatenate([ids[lo:hi] for _, _, lo, hi, _ in pending])
        ends = exact_walk(table, matrix, lengths, state, token, depth)
        alive = ends != DEAD
        sources.append(origin[alive].astype(np.int32))
        tokens.append(token[alive])
        targets.append(ends[alive])
    return np.concatenate(sources), np.concatenate(tokens), np.concatenate(targets)


def signature_edges(dfa: ByteDFA, vocabulary: Vocabulary, *, n_jobs: int = 1,
                    backend: str | None = None, progress: Progress | None = None,
                    narrow_max_bytes: int = NARROW_MAX_BYTES) -> RawEdges:
    """Edges of every live state.

    Wide states go through the coarse signature walk (one group per
    behaviour); narrow states (literals, key choices) and the walks that run
    into them are done byte by byte, so they never split the byte classes.
    """
    if progress is not None:
        progress.update("grouping tokens by signature")
    narrow = narrow_states(dfa, narrow_max_bytes)
    classes = byte_classes(dfa, ~narrow)
    if narrow.any() and classes.num_classes * 4 > byte_classes(dfa).num_classes * 3:
        # The narrow states hardly coarsen the classes here, and walking them
        # byte by byte would cost more than it saves: walk everything coarsely.
        narrow = np.zeros_like(narrow)
        classes = byte_classes(dfa)
    wide = ~narrow
    # A byte dead in every wide state may still be live in a narrow one, so
    # tokens holding it are only dropped when there is no narrow state.
    dead_class = classes.dead_class if not narrow.any() else -1
    signatures = token_signatures(vocabulary.byte_columns(), classes.class_of, dead_class)
    escape = dfa.num_states  # a sink meaning "entered a narrow state: walk exactly"
    table = class_table(dfa, classes)
    table[narrow] = escape
    table = np.vstack([table, np.full((1, table.shape[1]), escape, dtype=table.dtype)])
    starts = np.append(wide, False)
    starts[DEAD] = False
    everything = np.arange(signatures.num_signatures)
    if n_jobs == 1 and backend is None:
        behaviours = signature_behaviours(table, signatures.classes, signatures.lengths, everything,
                                          progress, starts=starts)
    else:
        from joblib import Parallel, delayed, parallel_config

        workers = n_jobs if n_jobs > 0 else max(1, _cpu_count() + 1 + n_jobs)
        pieces = split_signatures(signatures, workers)
        if progress is not None:
            progress.update(f"walking {len(pieces)} prefix graphs in parallel")
        with parallel_config(backend=backend) if backend else contextlib.nullcontext():
            parts = Parallel(n_jobs=n_jobs)(
                delayed(signature_behaviours)(table, signatures.classes, signatures.lengths, piece,
                                              starts=starts)
                for piece in pieces)
        behaviours = _merge_behaviours(parts, signatures.num_signatures)
    token_behaviour = np.where(signatures.token_signature >= 0,
                               np.append(behaviours.signature_behaviour, -1)[signatures.token_signature],
                               -1)
    vectors = behaviours.vectors

    # Exact edges: from narrow states, and from wide states whose walk escaped.
    if progress is not None:
        progress.update("walking narrow states byte by byte")
    exact_source, exact_token, exact_target = narrow_edges(dfa, narrow, vocabulary)
    escaped_behaviour, escaped_start = np.nonzero(vectors == escape)
    if len(escaped_behaviour):
        matrix, lengths = vocabulary.byte_matrix()
        order = np.argsort(token_behaviour, kind="stable")
        sorted_behaviour = token_behaviour[order]
        lo = np.searchsorted(sorted_behaviour, escaped_behaviour, side="left")
        hi = np.searchsorted(sorted_behaviour, escaped_behaviour, side="right")
        sizes = hi - lo
        start = np.repeat(escaped_start, sizes).astype(np.int32)
        token = order[np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])] if sizes.sum() \
            else np.zeros(0, dtype=np.int64)
        ends = exact_walk(dfa.transitions, matrix, lengths, start, token, np.zeros(len(token)))
        alive = ends != DEAD
        exact_source = np.concatenate([exact_source, start[alive]])
        exact_token = np.concatenate([exact_token, token[alive]])
        exact_target = np.concatenate([exact_target, ends[alive]])

    # Tokens with exact edges get a group of their own, carrying their coarse
    # edges too; assembly merges the groups that turn out alike.
    num_behaviours = len(vectors)
    exact_tokens = np.unique(exact_token)
    token_group = token_behaviour.astype(np.int64)
    token_group[exact_tokens] = num_behaviours + np.arange(len(exact_tokens))
    coarse = np.where(vectors == escape, DEAD, vectors)
    used = np.unique(token_behaviour[token_behaviour >= 0])
    group_of_edge, source = np.nonzero(coarse[used])
    group = used[group_of_edge]
    target = coarse[group, source]
    # The coarse edges of the exact tokens, under their own groups.
    behaviour_of_exact = token_behaviour[exact_tokens]
    has_coarse = behaviour_of_exact >= 0
    rows = coarse[behaviour_of_exact[has_coarse]]
    exact_of_row, row_source = np.nonzero(rows)
    carried_group = num_behaviours + np.flatnonzero(has_coarse)[exact_of_row]
    carried_target = rows[exact_of_row, row_source]
    exact_group = num_behaviours + np.searchsorted(exact_tokens, exact_token)
    return RawEdges(
        np.concatenate([source, row_source, exact_source]).astype(np.int32),
        np.concatenate([group, carried_group, exact_group]).astype(np.int32),
        np.concatenate([target, carried_target, exact_target]).astype(np.int32),
        np.where(token_group >= 0, token_group, -1).astype(np.int32))


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 1
