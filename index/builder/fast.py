"""The fast build: walk each signature once, as a prefix graph, in parallel.

The reference build (:mod:`tokendfa.builder.reference`) walks every token from every
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
   *Narrow states* (literals, choices among a few keys) are left out of the
   coarse walk, which would split the byte classes for them, and walked byte
   by byte instead (:mod:`tokendfa.builder.narrow`); the tokens they touch get
   groups of their own.
5. *Parallel*: the trie splits into disjoint subtrees by first class; joblib
   workers walk them (any joblib backend: ``loky`` here, Dask or Ray on a
   cluster) and their behaviour tables are merged, when the walk is large
   enough to pay for it (:data:`tokendfa.builder.config.PARALLEL_MIN_WORK`).

Edges then go through the same canonical assembly as the reference build
(:mod:`tokendfa.builder.assemble`), which keeps only states reachable from the initial
one, so both builds give the same arrays.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np

from ..analysis import limits
from ..analysis.dfa import DEAD, ByteDFA
from ..analysis.byteclasses import byte_classes, class_table
from ..analysis.literals import narrow_states
from ..analysis.errors import BuildLimitError
from ..analysis.graph import distinct
from ..analysis.signatures import Signatures, token_signatures
from ..vocab.vocabulary import Vocabulary
from .assemble import RawEdges
from .config import BuildConfig
from .narrow import WalkTooLong, escaped_edges, exact_walk, narrow_edges
from .progress import Progress

# An automaton of at least EXACT_MIN_STATES states, at least EXACT_MIN_NARROW of
# them narrow (a literal set: an enum of many strings), is first walked byte by
# byte from every state, within EXACT_STEPS_PER_STATE steps a state; the coarse
# walk runs only if that gives up. Measured on qwen2.5, a 60,000-value enum
# (97k states, 97% narrow): 1.4 s byte by byte one walk at a time (0.1-0.3 s in
# rounds, narrow.py), 8 s with the coarse walk from its 3k wide states (one
# behaviour vector per distinct token prefix); 5,000 values (19k states)
# 0.34 s and 1.0 s. A JSON string's state alone passes 10^7 steps.
EXACT_MIN_STATES = 5_000
EXACT_MIN_NARROW = 0.9
EXACT_STEPS_PER_STATE = 16

# --- the prefix graph -------------------------------------------------------------

# The (behaviour, class) -> behaviour table of signature_behaviours is kept up
# to this many cells (16 MiB of int32).
_LEADS_MAX_CELLS = 1 << 22


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
                         starts: np.ndarray | None = None,
                         under: "limits.Limits | None" = None) -> Behaviours:
    """Behaviours of the signatures ``members``, walked as one prefix graph.

    The graph is the trie of the signatures with every node keyed by its
    behaviour rather than its spelling: two prefixes that take every state to
    the same place have the same future, so they are one node. A level of the
    graph advances in one vectorised step over all signatures still going; a
    prefix that dies from every state drops its signatures at once. The number
    of nodes is the number of distinct behaviours, typically a few hundred,
    however many signatures there are; past ``max_bytes`` of behaviour vectors
    (default: the build's memory budget, :mod:`tokendfa.analysis.limits`) the build stops with
    :class:`BuildLimitError`.
    """
    if under is not None:  # a joblib worker: the limits of the build that sent the work
        with limits.run_under(under):
            return signature_behaviours(table, classes, lengths, members, progress, max_bytes, starts)
    budget = limits.current().memory if max_bytes is None else max_bytes
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
    # Where each (behaviour, class) pair leads, once found (-2: not yet; -1:
    # dies everywhere): a pair recurs at level after level (JME:0 on
    # mistral-sp32k: 431 signatures, 25 levels, 16 behaviours), and a level
    # whose pairs are all known is one lookup instead of ~25 numpy calls.
    # Dropped (None) past _LEADS_MAX_CELLS, so it never outgrows the vectors.
    leads: np.ndarray | None = np.full((64, num_classes), -2, dtype=np.int32)
    current = np.zeros(len(order), dtype=np.int64)
    alive = np.ones(len(order), dtype=bool)
    max_length = int(sorted_lengths[0]) if len(order) else 0
    level_count = np.searchsorted(-sorted_lengths, -np.arange(max_length), side="left")
    for depth in range(max_length):
        if progress is not None:
            progress.update("walking the prefix graph, level", depth + 1, max_length)
        count = int(level_count[depth])
        going = np.flatnonzero(alive[:count])
        if len(going) == 0:
            break
        node, klass_of = current[going], classes[order[going], depth]
        if leads is not None:
            step = leads[node, klass_of].astype(np.int64)
            unknown = np.flatnonzero(step == -2)
        else:
            step = np.empty(len(going), dtype=np.int64)
            unknown = np.arange(len(going))
        if len(unknown):
            pairs, which = np.unique(node[unknown] * num_classes + klass_of[unknown], return_inverse=True)
            ids = np.full(len(pairs), -1, dtype=np.int64)
            # The level's new vectors in chunks of about 32 MiB: a level can step
            # thousands of prefixes over 200k states (gigabytes at once), and the
            # deadline and the budget are checked between chunks.
            chunk = max(1, (32 << 20) // (4 * num_states))
            for begin in range(0, len(pairs), chunk):
                limits.check()
                part = pairs[begin:begin + chunk]
                stepped = np.empty((len(part), num_states), dtype=np.int32)
                pair_class = part % num_classes
                for klass in distinct(pair_class).tolist():
                    # One column of the table at a time: a plain take from a
                    # contiguous column is several times faster than a 2-D fancy index.
                    rows = np.flatnonzero(pair_class == klass)
                    stepped[rows] = np.take(by_class[klass], store[part[rows] // num_classes])
                lives = stepped.any(axis=1)
                for i in np.flatnonzero(lives).tolist():
                    row = stepped[i]
                    raw = row.tobytes()
                    found = known.get(raw)
                    if found is None:
                        if num_vectors * num_states * 4 > budget:
                            raise BuildLimitError(
                                f"the build needs more than {budget >> 20} MiB for {num_vectors} token "
                                f"behaviours over {num_states} states; the pattern is too large for "
                                "this vocabulary and memory budget", reached=num_vectors)
                        if num_vectors == len(store):
                            store = np.concatenate([store, np.empty_like(store)])
                        found = known[raw] = num_vectors
                        store[num_vectors] = row
                        num_vectors += 1
                    ids[begin + i] = found
            step[unknown] = ids[which.ravel()]
            if leads is not None and num_vectors > len(leads):
                grown = len(store) * num_classes <= _LEADS_MAX_CELLS
                leads = np.concatenate([leads, np.full((len(store) - len(leads), num_classes), -2,
                                                       dtype=np.int32)]) if grown else None
            if leads is not None:
                leads[pairs // num_classes, pairs % num_classes] = ids
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


def signature_edges(dfa: ByteDFA, vocabulary: Vocabulary, config: BuildConfig = BuildConfig(),
                    progress: Progress | None = None) -> RawEdges:
    """Edges of every live state.

    Wide states go through the coarse signature walk (one group per
    behaviour); narrow states (literals, key choices) and the walks that run
    into them are done byte by byte, so they never split the byte classes.
    """
    if not config.in_process:  # asked for even when the pattern turns out too small to need it
        from ..analysis.errors import import_optional

        joblib = import_optional("joblib", extra="build", needed_for="a parallel build (n_jobs != 1)")
    # The tokens with no byte dead in every state: the direct walk's and, most
    # often, the signatures' (found once: ~0.2 ms of a 42-state schema's build
    # on mistral-sp32k, BFCL_simple:0, when both read them).
    dead_everywhere = ~dfa.transitions.any(axis=0)
    live_positions = vocabulary.byte_occurrences().positions_without(dead_everywhere)
    direct = _direct_edges(dfa, vocabulary, live_positions)
    if direct is not None:
        return direct
    if progress is not None:
        progress.update("grouping tokens by signature")
    narrow = narrow_states(dfa, config.narrow_max_bytes)
    if dfa.num_states >= EXACT_MIN_STATES and narrow[1:].mean() >= EXACT_MIN_NARROW:
        everywhere = np.ones(dfa.num_states, dtype=bool)
        everywhere[DEAD] = False
        try:
            exact = narrow_edges(dfa, everywhere, vocabulary,
                                 max_steps=EXACT_STEPS_PER_STATE * dfa.num_states)
        except WalkTooLong:
            pass
        else:
            # Every state walked byte by byte: no coarse walk is left to do, and
            # each token the walk found is a group of its own (assembly merges the
            # groups that turn out alike). The byte classes and signatures were
            # ~0.4 s of a 60,000-value enum's build for nothing.
            source, token, target = exact
            tokens = distinct(token)
            return RawEdges(source.astype(np.int32), np.searchsorted(tokens, token).astype(np.int32),
                            target.astype(np.int32), tokens.astype(np.int64),
                            np.arange(len(tokens), dtype=np.int32))
    classes = every_class = byte_classes(dfa)
    if narrow.any():
        classes = byte_classes(dfa, ~narrow, within=every_class)
        if classes.num_classes * 4 > every_class.num_classes * 3:
            # The narrow states hardly coarsen the classes here, and walking them
            # byte by byte would cost more than it saves: walk everything coarsely.
            narrow = np.zeros_like(narrow)
            classes = every_class
    wide = ~narrow
    # A byte dead in every wide state may still be live in a narrow one, so
    # tokens holding it are only dropped when there is no narrow state; a byte
    # dead in every state is dropped always (its tokens have no edge anywhere),
    # so a small pattern's signatures cover only its few live tokens.
    dead_class = classes.dead_class if not narrow.any() else -1
    signatures = token_signatures(vocabulary.byte_columns(), classes.class_of, dead_class,
                                  vocabulary.byte_occurrences(), banned=dead_everywhere,
                                  known=(dead_everywhere, live_positions))
    escape = dfa.num_states  # a sink meaning "entered a narrow state: walk exactly"
    table = class_table(dfa, classes)
    table[narrow] = escape
    table = np.vstack([table, np.full((1, table.shape[1]), escape, dtype=table.dtype)])
    starts = np.append(wide, False)
    starts[DEAD] = False
    everything = np.arange(signatures.num_signatures)
    if config.walks_in_process(int(starts.sum()) * signatures.num_signatures):
        behaviours = signature_behaviours(table, signatures.classes, signatures.lengths, everything,
                                          progress, max_bytes=config.memory_budget, starts=starts)
    else:
        Parallel, delayed, parallel_config = joblib.Parallel, joblib.delayed, joblib.parallel_config

        n_jobs, backend = config.n_jobs, config.backend
        workers = n_jobs if n_jobs > 0 else max(1, _cpu_count() + 1 + n_jobs)
        pieces = split_signatures(signatures, workers)
        if progress is not None:
            progress.update(f"walking {len(pieces)} prefix graphs in parallel")
        with parallel_config(backend=backend) if backend else contextlib.nullcontext():
            parts = Parallel(n_jobs=n_jobs)(
                delayed(signature_behaviours)(table, signatures.classes, signatures.lengths, piece,
                                              max_bytes=config.memory_budget, starts=starts,
                                              under=limits.current())
                for piece in pieces)
        behaviours = _merge_behaviours(parts, signatures.num_signatures)
    # The behaviour of each token with a signature, kept sparse: a small
    # pattern has a few hundred such tokens, and arrays as long as the
    # vocabulary cost ~50 us each on Qwen2.5.
    signature_behaviour = behaviours.signature_behaviour
    token_behaviour = signature_behaviour[signatures.signature]  # of each of signatures.tokens
    behaves = token_behaviour >= 0
    behaving, behaviour_of = signatures.tokens[behaves], token_behaviour[behaves]
    vectors = behaviours.vectors

    # Exact edges: from narrow states, and from wide states whose walk escaped.
    if progress is not None:
        progress.update("walking narrow states byte by byte")
    exact_source, exact_token, exact_target = narrow_edges(dfa, narrow, vocabulary)
    escaped_behaviour, escaped_start = np.nonzero(vectors == escape)
    if len(escaped_behaviour):
        found = escaped_edges(dfa, vocabulary, behaving, behaviour_of, escaped_behaviour,
                              escaped_start)
        exact_source = np.concatenate([exact_source, found[0]])
        exact_token = np.concatenate([exact_token, found[1]])
        exact_target = np.concatenate([exact_target, found[2]])

    # Tokens with exact edges get a group of their own, carrying their coarse
    # edges too; assembly merges the groups that turn out alike.
    num_behaviours = len(vectors)
    exact_tokens = distinct(exact_token)
    grouped, grouped_group = _token_groups(behaving, behaviour_of, exact_tokens, num_behaviours,
                                           vocabulary.size)
    coarse = np.where(vectors == escape, DEAD, vectors)
    # Every signature has a token, so these are the behaviours tokens have.
    used = distinct(signature_behaviour[signature_behaviour >= 0])
    group_of_edge, source = np.nonzero(coarse[used])
    group = used[group_of_edge]
    target = coarse[group, source]
    # The coarse edges of the exact tokens, under their own groups.
    behaviour_of_exact = np.append(signature_behaviour, -1)[
        _signatures_of(signatures, exact_tokens, vocabulary.size)]
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
        grouped, grouped_group)


# Below one token in this many of the vocabulary, the per-token tables are
# kept sparse (sorted ids) rather than as long as the vocabulary: filling a
# 32k-entry table cost more than a small pattern's whole walk in a freshly
# forked process, which faults in every page it touches.
_SPARSE_FRACTION = 8


def _signatures_of(signatures: Signatures, token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """The signature of each of ``token_ids`` (-1: none)."""
    tokens = signatures.tokens
    if len(token_ids) == 0 or len(tokens) == 0:
        return np.full(len(token_ids), -1, dtype=np.int32)
    if len(tokens) * _SPARSE_FRACTION < vocab_size:
        order = np.argsort(tokens, kind="stable")
        at = np.minimum(np.searchsorted(tokens[order], token_ids), len(tokens) - 1)
        return np.where(tokens[order[at]] == token_ids, signatures.signature[order[at]], -1)
    table = np.full(vocab_size, -1, dtype=np.int32)
    table[tokens] = signatures.signature
    return table[token_ids]


def _token_groups(behaving: np.ndarray, behaviour_of: np.ndarray, exact_tokens: np.ndarray,
                  num_behaviours: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The tokens with a group, increasing, and their groups: the behaviour
    of each of ``behaving``, except that each of ``exact_tokens`` (sorted)
    has a group of its own, ``num_behaviours`` on."""
    exact_group = num_behaviours + np.arange(len(exact_tokens), dtype=np.int64)
    if (len(behaving) + len(exact_tokens)) * _SPARSE_FRACTION < vocab_size:
        if len(exact_tokens):
            at = np.minimum(np.searchsorted(exact_tokens, behaving), len(exact_tokens) - 1)
            coarse_only = exact_tokens[at] != behaving
            behaving, behaviour_of = behaving[coarse_only], behaviour_of[coarse_only]
        ids = np.concatenate([behaving, exact_tokens]).astype(np.int64)
        order = np.argsort(ids, kind="stable")
        return ids[order], np.concatenate([behaviour_of, exact_group]).astype(np.int32)[order]
    token_group = np.full(vocab_size, -1, dtype=np.int32)
    token_group[behaving] = behaviour_of
    token_group[exact_tokens] = exact_group
    grouped = np.flatnonzero(token_group >= 0)
    return grouped, token_group[grouped]


# A pattern leaving at most this many tokens (with no byte dead in every state)
# and this many (state, token) pairs is walked token by token from every
# state, as the reference build does, but only for those tokens: Handwritten:28
# of JSONSchemaBench, (1|2|...|10), keeps 20 tokens of a 32k vocabulary, and
# classes, signatures, the prefix graph and the narrow walk were three
# quarters of its build in a freshly forked process (each module's first use
# there copies the pages it touches).
_DIRECT_TOKENS = 256
_DIRECT_PAIRS = 8192


def _direct_edges(dfa: ByteDFA, vocabulary: Vocabulary,
                  positions: np.ndarray | None = None) -> RawEdges | None:
    """Every (state, token, end) of the few tokens a small pattern can use
    (``positions``, found here when not given: those with no byte dead in
    every state, in the byte columns' order), one group per token, or None
    when there are more than a few. Assembly merges and numbers the groups
    canonically, so the arrays are the ones the signature walk gives."""
    if positions is None:
        positions = vocabulary.byte_occurrences().positions_without(~dfa.transitions.any(axis=0))
    starts = np.flatnonzero(dfa.transitions.any(axis=1))  # never the dead state
    if len(positions) > _DIRECT_TOKENS or len(positions) * len(starts) > _DIRECT_PAIRS:
        return None
    tokens = np.sort(vocabulary.byte_columns().order[positions]).astype(np.int64)
    source = np.repeat(starts, len(tokens))
    group = np.tile(np.arange(len(tokens)), len(starts))
    target = exact_walk(dfa.transitions, vocabulary, source, tokens[group], np.zeros(len(group), dtype=np.int64))
    alive = target != DEAD
    return RawEdges(source[alive].astype(np.int32), group[alive].astype(np.int32),
                    target[alive].astype(np.int32), tokens, np.arange(len(tokens), dtype=np.int32))


def _cpu_count() -> int:
    return os.cpu_count() or 1
