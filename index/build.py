"""The fast build: walk each signature once, as a prefix graph, in parallel.

The reference build (:mod:`index.reference`) walks every token from every
state. This build gives the identical index with far less work:

1. *Static analysis* of the byte DFA (:mod:`analysis`): byte classes, dead
   bytes, and the table ``Tc[state, class]``.
2. *Signatures* (:mod:`analysis.signatures`): tokens with equal class
   sequences behave alike, so only distinct sequences are walked; tokens with
   a dead byte are dropped at once.
3. *Prefix graphs*: the signatures form a trie, split into disjoint subtries
   by their first class. A trie level is stored as arrays (each node's class
   and the range of its children), so a whole level advances in one
   vectorised step, and a prefix that dies takes its whole subtree with it.
4. *Walk*: from every live DFA state at once, a frontier of (start state,
   trie node, current state) triples moves down the trie; a triple at a node
   that ends a signature is an edge ``start --signature--> current``.
5. *Parallel*: the disjoint subtries are walked by joblib workers, with any
   joblib backend (``loky`` here, Dask or Ray on a cluster).

Edges then go through the same canonical assembly as the reference build
(:mod:`index.assemble`), which keeps only states reachable from the initial
one, so both builds give the same arrays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from analysis.bytedfa import DEAD, ByteDFA, byte_dfa_from_regex
from analysis.byteclasses import byte_classes, class_table
from analysis.errors import BuildLimitError
from analysis.signatures import Signatures, token_signatures
from index.assemble import RawEdges, assemble
from index.tokenindex import Index, IndexArrays
from index.vocabulary import Vocabulary

DEFAULT_MAX_STATES = 200_000
METHODS = ("fast", "reference")


def build_index(pattern: str, vocabulary: Vocabulary, *, method: str = "fast",
                n_jobs: int = 1, backend: str | None = None,
                max_states: int | None = None) -> Index:
    """Compile ``pattern`` for ``vocabulary`` into an :class:`Index`."""
    started = time.perf_counter()
    dfa = byte_dfa_from_regex(pattern)
    limit = DEFAULT_MAX_STATES if max_states is None else max_states
    if dfa.num_states - 1 > limit:
        raise BuildLimitError(
            f"the pattern's automaton has {dfa.num_states - 1} states, more than the limit "
            f"of {limit} (raise max_states to build it anyway)", reached=dfa.num_states - 1)
    arrays = build_arrays(dfa, vocabulary, method=method, n_jobs=n_jobs, backend=backend)
    metadata = {
        "kind": "regex",
        "pattern": pattern,
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
    return Index(arrays, metadata, vocabulary)


def build_arrays(dfa: ByteDFA, vocabulary: Vocabulary, *, method: str = "fast",
                 n_jobs: int = 1, backend: str | None = None) -> IndexArrays:
    if method == "reference":
        from index.reference import reference_edges

        raw = reference_edges(dfa, vocabulary)
    elif method == "fast":
        raw = signature_edges(dfa, vocabulary, n_jobs=n_jobs, backend=backend)
    else:
        raise ValueError(f"unknown build method {method!r}: choose one of {', '.join(METHODS)}")
    return assemble(dfa, raw, vocabulary.eos_token_ids, vocabulary.size)


# --- prefix graphs -------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PrefixGraph:
    """A trie of signatures stored level by level.

    Level ``d`` has ``len(node_class[d])`` nodes; node ``i`` of level ``d``
    spells class ``node_class[d][i]`` after its parent, and its children are
    nodes ``child_start[d][i] : child_start[d][i + 1]`` of level ``d + 1``.
    ``node_signature[d][i]`` is the signature that ends there, or -1.
    """

    node_class: list[np.ndarray]
    child_start: list[np.ndarray]
    node_signature: list[np.ndarray]

    @property
    def num_nodes(self) -> int:
        return sum(len(level) for level in self.node_class)


def prefix_graph(signatures: Signatures, members: np.ndarray) -> PrefixGraph:
    """The trie of the signatures ``members`` (ids into ``signatures``)."""
    classes, lengths = signatures.classes[members], signatures.lengths[members]
    num_classes = int(classes.max(initial=0)) + 1
    parent = np.zeros(len(members), dtype=np.int64)  # node at the previous level
    node_class, parents_of_level, node_signature = [], [], []
    depth = 0
    while True:
        going = np.flatnonzero(lengths > depth)
        if len(going) == 0:
            break
        key = parent[going] * num_classes + classes[going, depth]
        # np.unique sorts by parent first, so each node's children are contiguous.
        nodes, node_of = np.unique(key, return_inverse=True)
        parent[going] = node_of.ravel()
        node_class.append((nodes % num_classes).astype(np.int32))
        parents_of_level.append(nodes // num_classes)
        ends = np.full(len(nodes), -1, dtype=np.int32)
        finishing = going[lengths[going] == depth + 1]
        ends[parent[finishing]] = members[finishing]
        node_signature.append(ends)
        depth += 1
    child_start = []
    for level in range(len(node_class)):
        size = len(node_class[level])
        if level + 1 < len(node_class):
            child_start.append(np.searchsorted(parents_of_level[level + 1], np.arange(size + 1)))
        else:
            child_start.append(np.zeros(size + 1, dtype=np.int64))
    return PrefixGraph(node_class, child_start, node_signature)


def walk_prefix_graph(graph: PrefixGraph, table: np.ndarray, starts: np.ndarray):
    """All edges (start, signature, end) of ``graph`` from the ``starts`` states.

    ``table`` is the class table ``Tc[state, class]`` with dead state 0.
    """
    found_source, found_signature, found_target = [], [], []
    if not graph.node_class:
        return _edges([], [], [])
    # Level 0: every start state against every root child.
    roots = len(graph.node_class[0])
    origin = np.repeat(starts.astype(np.int32), roots)
    node = np.tile(np.arange(roots, dtype=np.int64), len(starts))
    for depth in range(len(graph.node_class)):
        if depth == 0:
            current = table[origin, graph.node_class[0][node]]
        else:
            current = table[current, graph.node_class[depth][node]]
        alive = current != DEAD
        origin, node, current = origin[alive], node[alive], current[alive]
        signature = graph.node_signature[depth][node]
        ending = signature >= 0
        found_source.append(origin[ending])
        found_signature.append(signature[ending])
        found_target.append(current[ending])
        if depth + 1 == len(graph.node_class) or len(node) == 0:
            break
        first, after = graph.child_start[depth][node], graph.child_start[depth][node + 1]
        fanout = after - first
        origin = np.repeat(origin, fanout)
        current = np.repeat(current, fanout)
        # Child indices: first[i], first[i] + 1, ..., after[i] - 1 for each triple.
        offsets = np.repeat(np.cumsum(fanout) - fanout, fanout)
        node = np.repeat(first, fanout) + (np.arange(len(origin)) - offsets)
    return _edges(found_source, found_signature, found_target)


def _edges(sources, signatures, targets):
    def join(parts):
        return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, dtype=np.int32)
    return join(sources), join(signatures), join(targets)


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


def _walk_part(signatures: Signatures, members: np.ndarray, table: np.ndarray, starts: np.ndarray):
    return walk_prefix_graph(prefix_graph(signatures, members), table, starts)


def signature_edges(dfa: ByteDFA, vocabulary: Vocabulary, *, n_jobs: int = 1,
                    backend: str | None = None) -> RawEdges:
    """Edges of every live state, one group per signature."""
    classes = byte_classes(dfa)
    matrix, lengths = vocabulary.byte_matrix()
    signatures = token_signatures(matrix, lengths, classes.class_of, classes.dead_class)
    table = class_table(dfa, classes)
    starts = np.arange(1, dfa.num_states, dtype=np.int32)
    if signatures.num_signatures == 0:
        parts = []
    elif n_jobs == 1 and backend is None:
        parts = [_walk_part(signatures, np.arange(signatures.num_signatures), table, starts)]
    else:
        from joblib import Parallel, delayed, parallel_config

        workers = n_jobs if n_jobs > 0 else max(1, _cpu_count() + 1 + n_jobs)
        pieces = split_signatures(signatures, workers * 2)
        with parallel_config(backend=backend) if backend else _null_context():
            parts = Parallel(n_jobs=n_jobs)(
                delayed(_walk_part)(signatures, piece, table, starts) for piece in pieces)
    source, signature, target = _edges([p[0] for p in parts], [p[1] for p in parts],
                                       [p[2] for p in parts]) if parts else _edges([], [], [])
    return RawEdges(source, signature, target, signatures.token_signature)


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 1


class _null_context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
