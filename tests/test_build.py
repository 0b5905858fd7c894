"""Every build path against the plainest statement of the semantics.

The shared case table runs through: the byte DFA against Python's ``re``;
the pure-Python brute force against the reference build on the toy
vocabulary; and the fast build (one and two jobs) against the reference,
array for array, on the toy and on real vocabularies.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from tokendfa.analysis.construct import byte_dfa_from_regex
from tokendfa.analysis.byteclasses import byte_classes
from brute_force import assert_index_matches, brute_force_transitions
from cases import CASES
from conftest import TOY_EOS, TOY_TOKENS, cached_index, cached_vocabulary
from tokendfa import Index, VocabularyCoverageError

ids = [case.name for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_byte_dfa_matches_python_re(case):
    dfa = byte_dfa_from_regex(case.pattern)
    compiled = re.compile(case.pattern, re.ASCII)  # interegular's \w, \d, \s are ASCII
    for text in case.matches:
        assert dfa.accepts(text.encode()), f"{case.pattern!r} should match {text!r}"
        assert compiled.fullmatch(text)
    for text in case.rejects:
        assert not dfa.accepts(text.encode()), f"{case.pattern!r} should not match {text!r}"
        assert not compiled.fullmatch(text)
    # Random strings over the characters the case talks about, plus a few others.
    alphabet = sorted(set("".join(case.matches + case.rejects)) | set("a1.-\"x é日\n"))
    rng = random.Random(case.name)
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert dfa.accepts(text.encode()) == bool(compiled.fullmatch(text)), text
        # Every prefix of a match is live, byte by byte (tokens split characters).
    for text in case.matches:
        data = text.encode()
        assert all(dfa.is_live_prefix(data[:i]) for i in range(len(data) + 1))


def test_byte_dfa_rejects_invalid_utf8():
    dfa = byte_dfa_from_regex(r".+")
    for bad in (b"\xc0\x80", b"\xed\xa0\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xff"):
        assert not dfa.accepts(bad)
        assert not dfa.is_live_prefix(bad)
    assert dfa.is_live_prefix(b"\xe6\x97")  # the first two bytes of 日


def test_byte_dfa_is_deterministic_and_minimal():
    first = byte_dfa_from_regex(r"(a|b)*abb")
    second = byte_dfa_from_regex(r"(a|b)*abb")
    assert np.array_equal(first.transitions, second.transitions)
    assert first.num_states == 5  # the textbook minimal DFA has 4 states, plus dead
    assert byte_dfa_from_regex(r"a|a").num_states == byte_dfa_from_regex(r"a").num_states


def test_dead_bytes_and_classes():
    classes = byte_classes(byte_dfa_from_regex(r"[0-9]{3}-[0-9]{4}"))
    assert classes.num_classes == 3  # digits, '-', everything else (dead)
    dead = classes.dead_bytes()
    assert b"-" not in dead and b"5" not in dead and b"a" in dead and len(dead) == 256 - 11


@pytest.mark.parametrize("case", CASES, ids=ids)
@pytest.mark.parametrize("method", ["reference", "fast"])
def test_toy_index_equals_brute_force(case, method):
    dfa = byte_dfa_from_regex(case.pattern)
    expected = brute_force_transitions(dfa, TOY_TOKENS)
    if expected is None:
        with pytest.raises(VocabularyCoverageError):
            Index.from_regex(case.pattern, cached_vocabulary("toy"), method=method, lazy=False)
        return
    index = cached_index(case.pattern, "toy", method)
    assert_index_matches(index, dfa, expected, [TOY_EOS])


@pytest.mark.parametrize("case", CASES, ids=ids)
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_toy_fast_build_equals_reference(case, n_jobs, parallel_always):
    if brute_force_transitions(byte_dfa_from_regex(case.pattern), TOY_TOKENS) is None:
        pytest.skip(f"the toy vocabulary cannot spell {case.pattern!r}: no arrays to compare "
                    "(test_toy_index_equals_brute_force checks the coverage error)")
    reference = cached_index(case.pattern, "toy", "reference")
    fast = Index.from_regex(case.pattern, cached_vocabulary("toy"), n_jobs=n_jobs, lazy=False)
    assert fast.arrays.equals(reference.arrays)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=ids)
@pytest.mark.parametrize("vocab_name", ["qwen2.5", "mistral-sp32k"])
def test_real_fast_build_equals_reference(case, vocab_name):
    reference = cached_index(case.pattern, vocab_name, "reference")
    assert reference.arrays.equals(cached_index(case.pattern, vocab_name, "fast").arrays)
    assert reference.arrays.equals(cached_index(case.pattern, vocab_name, "fast", 2).arrays)
    vocab = cached_vocabulary(vocab_name)
    for text in case.matches:
        state = 0
        for token_id in vocab.encode(text):
            state = reference.advance(state, token_id)
        assert reference.is_final(state), f"{text!r} tokenized by {vocab_name} is not accepted"


@pytest.mark.slow
def test_real_vocabulary_brute_force_on_one_pattern(qwen_vocab):
    """The pure-Python brute force once on 151k tokens, for the reference itself."""
    pattern = r"-?[0-9]+(\.[0-9]+)?"
    dfa = byte_dfa_from_regex(pattern)
    expected = brute_force_transitions(dfa, qwen_vocab.tokens)
    assert_index_matches(cached_index(pattern, "qwen2.5", "reference"), dfa, expected,
                         qwen_vocab.eos_token_ids)


def test_tokens_into_unfinishable_states_are_dropped(toy_vocab):
    # The toy vocabulary spells 日 but not 本, so 日本 can never be finished:
    # the token 日 must not be offered, while é still is.
    index = cached_index(r"é|日本", "toy")
    allowed = {TOY_TOKENS[t] for t in index.get_tokens(0)}
    assert "日".encode() not in allowed
    assert "é".encode() in allowed and b"\xc3" in allowed


def test_small_parallel_build_stays_in_process(monkeypatch):
    """n_jobs=2 on a walk below PARALLEL_MIN_WORK does not start joblib
    workers (on qwen2.5 a JSON string took 195 ms so against 45 in process),
    and gives the same index; at the threshold it goes parallel."""
    import joblib

    from tokendfa.builder import config

    started = []

    class Recording(joblib.Parallel):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("n_jobs"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(joblib, "Parallel", Recording)
    vocab = cached_vocabulary("qwen2.5")
    pattern = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt])*"'  # a JSON string: 17 states x 29k signatures
    alone = Index.from_regex(pattern, vocab, lazy=False)
    assert Index.from_regex(pattern, vocab, n_jobs=2, lazy=False).arrays.equals(alone.arrays)
    assert started == []
    monkeypatch.setattr(config, "PARALLEL_MIN_WORK", 1)
    assert Index.from_regex(pattern, vocab, n_jobs=2, backend="threading", lazy=False).arrays.equals(alone.arrays)
    assert started == [2]


@pytest.mark.parametrize("lazy", [False, True])
def test_vocabulary_that_cannot_express_the_pattern(toy_vocab, lazy):
    with pytest.raises(VocabularyCoverageError) as caught:
        Index.from_regex(r"ab(z|y)", toy_vocab, lazy=lazy)
    message = str(caught.value)
    assert "cannot express" in message and "b'y'" in message and "b'z'" in message
    assert "after b'ab'" in message
    assert caught.value.needed_bytes == b"yz"


def test_state_bound_fails_early(toy_vocab):
    from tokendfa import BuildLimitError

    with pytest.raises(BuildLimitError, match="has 10 states, more than the limit of 5") as caught:
        Index.from_regex(r"[0-9]{9}", toy_vocab, max_states=5, lazy=False)
    assert caught.value.reached == 10
    assert Index.from_regex(r"[0-9]{9}", toy_vocab, max_states=10, lazy=False).num_states == 10


def test_progress_line_only_for_slow_builds():
    import io

    from tokendfa.builder.progress import Progress

    quick = io.StringIO()
    reporter = Progress(True, delay=60, stream=quick)
    reporter.update("walking", 1, 2)
    reporter.close()
    assert quick.getvalue() == ""
    slow = io.StringIO()
    reporter = Progress(True, delay=0, stream=slow)
    reporter.update("walking the prefix graph, level", 3, 10)
    reporter.close()
    assert slow.getvalue().startswith("\rtokendfa: walking the prefix graph, level 3/10 (")
    assert slow.getvalue().endswith("\n")


def test_memory_guard_names_the_budget():
    from tokendfa import BuildLimitError
    from tokendfa.builder.fast import signature_behaviours

    dfa = byte_dfa_from_regex(r"[a-c]{0,6}")
    from tokendfa.analysis.byteclasses import byte_classes, class_table
    from tokendfa.analysis.signatures import token_signatures

    vocab = cached_vocabulary("toy")
    classes = byte_classes(dfa)
    signatures = token_signatures(vocab.byte_columns(), classes.class_of, classes.dead_class)
    with pytest.raises(BuildLimitError, match="needs more than 0 MiB"):
        signature_behaviours(class_table(dfa, classes), signatures.classes, signatures.lengths,
                             np.arange(signatures.num_signatures), max_bytes=16)


def test_nfa_memory_guard_names_the_regex():
    """The NFA construction checks the memory budget before each fragment
    with a message made only when it raises: it still names the regex."""
    from tokendfa import BuildLimitError
    from tokendfa.analysis import limits
    from tokendfa.analysis.regex_compiler import byte_tables_from_regex

    with limits.limits(memory_budget=1 << 16):
        with pytest.raises(BuildLimitError, match=re.escape("the NFA of regex 'x[0-9]{5000}' would need 3 MiB")):
            byte_tables_from_regex("x[0-9]{5000}")


def test_build_config_is_frozen_and_checked(toy_vocab):
    import dataclasses

    from tokendfa.builder import BuildConfig, build_index

    config = BuildConfig(method="reference", max_states=50)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.method = "fast"
    with pytest.raises(ValueError, match="unknown build method 'quick': choose one of fast, reference"):
        BuildConfig(method="quick")
    with pytest.raises(ValueError, match="unknown build method"):
        Index.from_regex(r"(ab)+", toy_vocab, method="quick")
    with pytest.raises(TypeError):
        Index.from_schema({"type": "integer"}, toy_vocab, jobs=2)   # n_jobs, not jobs
    built = build_index(r"(ab)+", toy_vocab, config)
    assert built.metadata["build"]["method"] == "reference"
    assert built.arrays.equals(cached_index(r"(ab)+", "toy", "reference").arrays)


def test_the_builder_never_imports_the_index():
    """Builders pass arrays: nothing in tokendfa.builder may import
    tokendfa.runtime.index (Index.from_regex imports the builder, not the
    other way round)."""
    import ast
    from pathlib import Path

    import tokendfa.builder

    sources = sorted(Path(tokendfa.builder.__path__[0]).glob("*.py"))
    assert {p.name for p in sources} >= {"pipeline.py", "fast.py", "narrow.py", "assemble.py"}
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                names = {alias.name for alias in node.names}
                assert not module.endswith("runtime.index"), f"{source.name} imports {module}"
                assert not (module.endswith("runtime") and "index" in names), source.name
                assert not (module in ("..", "tokendfa") and "Index" in names), source.name
            elif isinstance(node, ast.Import):
                assert all(not a.name.endswith("runtime.index") for a in node.names), source.name


# --- the per-vocabulary tables and helpers that keep a small build small ----------

@pytest.mark.parametrize("vocab_name", ["toy", "mistral-sp32k"])
def test_tokens_without_banned_bytes_match_a_scan_of_every_token(vocab_name):
    """ByteOccurrences.positions_without, by whichever route it takes (byte
    range, banned lists, allowed lists), keeps exactly the tokens whose every
    byte is allowed."""
    vocab = cached_vocabulary(vocab_name)
    columns, occurrences = vocab.byte_columns(), vocab.byte_occurrences()
    rng = np.random.default_rng(7)
    bans = [np.zeros(256, dtype=bool), np.ones(256, dtype=bool)]
    for allowed in (b"abc", b"0123456789-", b"x", bytes(range(32, 127)), bytes(range(200))):
        ban = np.ones(256, dtype=bool)
        ban[list(allowed)] = False
        bans.append(ban)
    bans += [rng.random(256) < p for p in (0.05, 0.5, 0.95)]
    for ban in bans:
        kept = occurrences.positions_without(ban)
        spelled = [vocab.tokens[t] for t in columns.order[:occurrences.num_text]]
        expected = [p for p, text in enumerate(spelled) if not any(ban[b] for b in text)]
        assert kept.tolist() == expected


def test_signatures_of_few_tokens_equal_signatures_by_columns():
    """The padded-rows route (few tokens) and the hashed-columns route give
    the same signatures."""
    from tokendfa.analysis import signatures as module

    vocab = cached_vocabulary("mistral-sp32k")
    dfa = byte_dfa_from_regex(r"[0-9]{3}-[0-9]{4}|[a-c]+x")
    classes = byte_classes(dfa)
    padded = module.token_signatures(vocab.byte_columns(), classes.class_of, classes.dead_class,
                                     vocab.byte_occurrences())
    cells = module._PADDED_CELLS
    try:
        module._PADDED_CELLS = -1
        hashed = module.token_signatures(vocab.byte_columns(), classes.class_of, classes.dead_class,
                                         vocab.byte_occurrences())
    finally:
        module._PADDED_CELLS = cells
    assert padded.num_signatures > 10
    for name in ("tokens", "signature", "classes", "lengths"):
        assert np.array_equal(getattr(padded, name), getattr(hashed, name)), name


@pytest.mark.parametrize("pattern", [r"(1|2|3|4|5|6|7|8|9|10)", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
                                     r'\{"id": [0-9]+, "name": "[^"]*"\}', r"[^x]*"])
def test_sparse_and_dense_token_tables_give_the_same_index(monkeypatch, pattern):
    """Small patterns keep their per-token tables sparse (sorted ids) and set
    their masks word by word; forcing either route gives the same arrays,
    narrow states and escaped walks included."""
    from tokendfa.builder import assemble, fast

    vocab = cached_vocabulary("mistral-sp32k")
    monkeypatch.setattr(assemble, "_SMALL_EDGES", 0)  # the array assembly, whose routes these are
    built = {}
    for route, fraction in (("sparse", 0), ("dense", 10**9)):
        monkeypatch.setattr(fast, "_SPARSE_FRACTION", fraction)
        monkeypatch.setattr(assemble, "_SPARSE_MASK_FRACTION", fraction)
        built[route] = Index.from_regex(pattern, vocab, lazy=False).arrays
    reference = Index.from_regex(pattern, vocab, method="reference", lazy=False).arrays if len(pattern) < 30 else None
    assert built["sparse"].equals(built["dense"])
    if reference is not None:
        assert built["sparse"].equals(reference)


@pytest.mark.parametrize("vocab_name", ["mistral-sp32k", "qwen2.5"])
@pytest.mark.parametrize("pattern", [r"(1|2|3|4|5|6|7|8|9|10)", r"[0-9]{3}-[0-9]{4}", r'"(yes|no)"',
                                     r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", r"(ab)*c?"])
def test_patterns_with_few_tokens_walked_directly_give_the_signature_walk_index(monkeypatch, vocab_name,
                                                                                 pattern):
    """A pattern that leaves a few tokens is walked token by token from every
    state; the arrays are the signature walk's (forced below its threshold)."""
    from tokendfa.builder import fast

    vocab = cached_vocabulary(vocab_name)
    direct = Index.from_regex(pattern, vocab, lazy=False).arrays
    calls = []
    real = fast._direct_edges
    monkeypatch.setattr(fast, "_direct_edges", lambda *args: calls.append(real(*args)))
    walked = Index.from_regex(pattern, vocab, lazy=False).arrays
    assert calls and calls[0] is not None  # the pattern did qualify for the direct walk
    assert direct.equals(walked)


def _assembled_both_ways(monkeypatch, dfa, raw, vocab):
    """``assemble`` through the list path and through the array path: the
    arrays, or the error's type and message."""
    from tokendfa.analysis.errors import TokenDFAError
    from tokendfa.builder import assemble

    results = []
    for edges in (10**9, 0):
        monkeypatch.setattr(assemble, "_SMALL_EDGES", edges)
        monkeypatch.setattr(assemble, "_SMALL_GROUPED", edges)
        try:
            results.append(assemble.assemble(dfa, raw, vocab))
        except TokenDFAError as exc:
            results.append((type(exc), str(exc)))
    return results


@pytest.mark.parametrize("case", CASES, ids=ids)
@pytest.mark.parametrize("method", ["reference", "fast"])
def test_small_assembly_gives_the_array_assembly(monkeypatch, case, method):
    """The list-based assembly for few edges and the array one give identical
    arrays (dtypes included) from the same raw edges, or the same error."""
    from tokendfa.builder.fast import signature_edges
    from tokendfa.builder.reference import reference_edges

    vocab = cached_vocabulary("toy")
    dfa = byte_dfa_from_regex(case.pattern)
    raw = (signature_edges if method == "fast" else reference_edges)(dfa, vocab)
    small, arrays = _assembled_both_ways(monkeypatch, dfa, raw, vocab)
    if isinstance(small, tuple) or isinstance(arrays, tuple):
        assert small == arrays
    else:
        assert small.equals(arrays)


@pytest.mark.parametrize("pattern", [r"(1|2|3|4|5|6|7|8|9|10)", r"[0-9]{3}-[0-9]{4}", r'"(yes|no)"',
                                     r"(ab)*c?", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
                                     r'\{"id": [0-9]+, "name": "[^"]*"\}', r"[^x]*"])
def test_small_assembly_on_a_real_vocabulary(monkeypatch, pattern):
    """The same on mistral-sp32k, with several final states, EOS bits and
    thousands of grouped tokens; the direct walk's and the signature walk's
    edges both. Held to the reference build where that is quick."""
    from tokendfa.builder import fast

    vocab = cached_vocabulary("mistral-sp32k")
    dfa = byte_dfa_from_regex(pattern)
    direct = fast._direct_edges(dfa, vocab)
    monkeypatch.setattr(fast, "_direct_edges", lambda *args: None)
    for raw in (direct, fast.signature_edges(dfa, vocab)):
        if raw is None:
            continue
        small, arrays = _assembled_both_ways(monkeypatch, dfa, raw, vocab)
        assert small.equals(arrays)
    if len(pattern) < 25:
        assert small.equals(Index.from_regex(pattern, vocab, method="reference", lazy=False).arrays)


def test_unique_rows_and_distinct_agree_with_numpy():
    from tokendfa.analysis.graph import distinct
    from tokendfa.builder.assemble import unique_rows

    rng = np.random.default_rng(3)
    for size in (0, 1, 2, 40, 3000):
        key = rng.integers(-4, 4, size=(size, 3)).astype(np.int64)
        key[::2, 0] = rng.integers(-2**62, 2**62, size=len(key[::2]))
        first, inverse = unique_rows(key)
        if size:
            _, np_first, np_inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
            assert np.array_equal(first, np_first) and np.array_equal(inverse, np_inverse.ravel())
        assert np.array_equal(distinct(key[:, 1]), np.unique(key[:, 1]))


def test_wide_byte_classes_found_within_the_full_classes():
    from tokendfa.analysis.literals import narrow_states

    for pattern in (r'\{"key": "[^"]{0,12}"\}', r"(1|2|3|4|5|6|7|8|9|10)", r"[a-z]+@[a-z]+\.(com|org)"):
        dfa = byte_dfa_from_regex(pattern)
        wide = ~narrow_states(dfa, 8)
        direct, within = byte_classes(dfa, wide), byte_classes(dfa, wide, within=byte_classes(dfa))
        assert np.array_equal(direct.class_of, within.class_of)
        assert np.array_equal(direct.representatives, within.representatives)
        assert direct.dead_class == within.dead_class


def test_breadth_first_small_graphs_walk_as_the_vectorised_walk(monkeypatch):
    """Small graphs are walked with a plain queue; on random graphs (repeated
    and self edges, closed nodes, several roots) it gives the vectorised
    walk's order exactly, and both give the textbook first-in first-out order."""
    from collections import deque

    from tokendfa.analysis import graph

    rng = np.random.default_rng(11)
    for _ in range(200):
        nodes = int(rng.integers(1, 40))
        edges = int(rng.integers(0, 120))
        origin = np.sort(rng.integers(0, nodes, size=edges))
        successors = rng.integers(0, nodes, size=edges)
        starts = np.searchsorted(origin, np.arange(nodes + 1))
        roots = rng.choice(nodes, size=int(rng.integers(1, min(nodes, 3) + 1)), replace=False)
        closed = rng.random(nodes) < 0.2 if rng.random() < 0.5 else None
        walks = []
        for small_up_to in (-1, 10**9):
            monkeypatch.setattr(graph, "_SMALL_GRAPH_EDGES", small_up_to)
            walks.append(graph.breadth_first(starts, successors, roots, closed=closed).tolist())
        seen = set(roots.tolist()) | (set(np.flatnonzero(closed).tolist()) if closed is not None else set())
        queue, expected = deque(roots.tolist()), list(roots.tolist())
        while queue:
            node = queue.popleft()
            for nxt in successors[starts[node]:starts[node + 1]].tolist():
                if nxt not in seen:
                    seen.add(nxt)
                    expected.append(nxt)
                    queue.append(nxt)
        assert walks[0] == walks[1] == expected


@pytest.mark.parametrize("vocab_name", ["qwen2.5", "mistral-sp32k"])
def test_compiled_exact_walk_is_the_numpy_walk(monkeypatch, vocab_name):
    """The eager build's exact walk, compiled (_cwalk.walk_table, token by
    token over the complete table) and in numpy (a byte a level), gives the
    same end state for every (state, token, position) and the same index for
    schema-like patterns, whose narrow states the build walks exactly."""
    cwalk = pytest.importorskip("tokendfa.lazy._cwalk")
    from tokendfa.builder import narrow

    vocab = cached_vocabulary(vocab_name)
    pattern = r'\{[ ]?"key"[ ]?:[ ]?"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){0,12}"[ ]?\}'
    dfa = byte_dfa_from_regex(pattern)
    rng = np.random.default_rng(7)
    count = 20_000
    states = rng.integers(0, dfa.num_states, count)
    tokens = rng.integers(0, vocab.size, count)
    lengths = vocab.byte_matrix()[1]
    positions = np.minimum(rng.integers(0, 3, count), lengths[tokens]).astype(np.int64)
    compiled = narrow.exact_walk(dfa.transitions, vocab, states, tokens, positions)
    monkeypatch.setattr(narrow, "_cwalk", None)
    assert np.array_equal(compiled, narrow.exact_walk(dfa.transitions, vocab, states, tokens, positions))
    assert (compiled != 0).sum() > 100  # some walks live: the comparison is not all zeros
    for regex in (pattern, r'\{"id":[0-9]{1,5},"tags":\[("[a-z]{1,8}"(,"[a-z]{1,8}"){0,3})?\]\}'):
        numpy_built = Index.from_regex(regex, vocab, n_jobs=1, lazy=False)
        monkeypatch.setattr(narrow, "_cwalk", cwalk)
        assert Index.from_regex(regex, vocab, n_jobs=1, lazy=False).arrays.equals(numpy_built.arrays)
        monkeypatch.setattr(narrow, "_cwalk", None)
    table = np.ascontiguousarray(dfa.transitions, dtype=np.int32)
    spellings, offsets = narrow._spellings(vocab)
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="outside the tables"):
        cwalk.walk_table(table, spellings, offsets, one + vocab.size, one, one, np.zeros(1, dtype=np.int32))
    with pytest.raises(ValueError, match="outside the tables"):
        cwalk.walk_table(table, spellings, offsets, one, one + dfa.num_states, one, np.zeros(1, dtype=np.int32))


@pytest.mark.parametrize("pattern", [r'\{"a": ?"([^"\\\x00-\x1F]|\\["\\/bfnrt])*", ?"b": ?(true|false|null)\}',
                                     r'"([^"\\]|\\.){0,20}"', r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
                                     r'\{"id": [0-9]+, "name": "[^"]*"\}'])
@pytest.mark.parametrize("batch_words", [1, 1 << 16])
def test_masks_from_group_bitsets_are_the_rows_of_booleans(monkeypatch, pattern, batch_words):
    """The two ways of making the mask rows (each row the OR of its groups'
    bitsets; rows of booleans packed) give identical indexes on a real
    vocabulary, in batches of one row or of many."""
    from tokendfa.builder import assemble

    vocab = cached_vocabulary("mistral-sp32k")
    calls = []
    real = assemble._masks_from_group_bits
    monkeypatch.setattr(assemble, "_masks_from_group_bits", lambda *args: calls.append(1) or real(*args))
    monkeypatch.setattr(assemble, "_GROUP_BITS_BATCH_WORDS", batch_words)
    bitsets = Index.from_regex(pattern, vocab, lazy=False).arrays
    assert calls  # the pattern took the bitset way
    monkeypatch.setattr(assemble, "_GROUP_BITS_MAX_WORDS", 0)
    booleans = Index.from_regex(pattern, vocab, lazy=False).arrays
    assert len(calls) == 1
    assert bitsets.equals(booleans)


def test_masks_in_small_pages_are_the_same_arrays(monkeypatch, tmp_path):
    """Past a size, the mask table is an anonymous mapping of 4 kB pages
    (builder.assemble._zeroed_masks): the same arrays, read-only, kept
    alive by the index, and written to a file and read back unchanged."""
    import mmap

    from tokendfa.builder import assemble

    vocab = cached_vocabulary("qwen2.5")
    pattern = r'\{"code":"(?:AB[0-9]{2}|CD[a-f]{3}|x+)","n":[0-9]{1,3}\}'
    usual = Index.from_regex(pattern, vocab, lazy=False)
    monkeypatch.setattr(assemble, "_SMALL_PAGES_FROM", 0)
    # the batched path, where the table is made (not the small build's lists or group bitsets)
    monkeypatch.setattr(assemble, "_SMALL_EDGES", 0)
    monkeypatch.setattr(assemble, "_SMALL_GROUPED", 0)
    monkeypatch.setattr(assemble, "_GROUP_BITS_MAX_WORDS", 0)
    mapped = Index.from_regex(pattern, vocab, lazy=False)
    masks = mapped.arrays.masks
    assert not masks.flags.writeable
    owner = masks
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert isinstance(owner, memoryview) and isinstance(owner.obj, mmap.mmap)
    for name, array in usual.arrays.as_dict().items():
        assert np.array_equal(getattr(mapped.arrays, name), array), name
    mapped.save(tmp_path / "mapped.tdfa")
    loaded = Index.load(tmp_path / "mapped.tdfa", vocab)
    for name, array in usual.arrays.as_dict().items():
        assert np.array_equal(getattr(loaded.arrays, name), array), name
