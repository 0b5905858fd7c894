"""Hostile input and scale: fuzzed patterns and files, threads, a Dask cluster."""

from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import cached_index, toy_vocabulary
from tokendfa import (
    BuildLimitError,
    Guide,
    Index,
    IndexFileError,
    TokenDFAError,
    Vocabulary,
    VocabularyCoverageError,
)
from tokendfa.builder import config as build_config
from tokendfa.runtime.files import decode_index, encode_index

# --- random regexes from a small grammar, random toy vocabularies --------------------

ATOMS = ["a", "b", "c", "[ab]", "[^a]", ".", "é", "日", "[0-9]", "\\.", "x"]


@st.composite
def regexes(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["concat", "alt", "star", "plus", "opt", "bounded"]))
    inner = draw(regexes(depth=depth - 1))
    if kind == "concat":
        return inner + draw(regexes(depth=depth - 1))
    if kind == "alt":
        return f"({inner}|{draw(regexes(depth=depth - 1))})"
    if kind == "bounded":
        low = draw(st.integers(0, 2))
        return f"({inner}){{{low},{low + draw(st.integers(0, 2))}}}"
    return f"({inner}){ {'star': '*', 'plus': '+', 'opt': '?'}[kind] }"


PIECES = [b"a", b"b", b"c", b"x", b".", b"1", b"0", b"ab", b"ba", b"abc", b"a.", b".1",
          "é".encode(), "日".encode(), b"\xc3", b"\xa9", b"\xe6\x97", b"\xa5", b"\n", b"z"]


@st.composite
def vocabularies(draw):
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=3, max_size=14))
    eos = len(pieces)
    return Vocabulary(pieces + [None], eos_token_ids=eos, name="fuzz")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=regexes(), vocab=vocabularies(), n_jobs=st.sampled_from([1, 2]))
def test_fast_build_equals_reference_on_random_input(pattern, vocab, n_jobs):
    try:
        reference = Index.from_regex(pattern, vocab, method="reference", lazy=False)
    except VocabularyCoverageError:
        with pytest.raises(VocabularyCoverageError):
            Index.from_regex(pattern, vocab, n_jobs=n_jobs, lazy=False)
        return
    with mock.patch.object(build_config, "PARALLEL_MIN_WORK", 0):  # the parallel walk however small
        fast = Index.from_regex(pattern, vocab, n_jobs=n_jobs, backend="threading" if n_jobs > 1 else None,
                                lazy=False)
    assert fast.arrays.equals(reference.arrays), pattern


# --- random and mutated index files ------------------------------------------------

@pytest.fixture(scope="module")
def file_bytes():
    return encode_index(cached_index(r"-?[0-9]+(\.[0-9]+)?", "toy"))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_bytes_never_load(data):
    with pytest.raises(IndexFileError):
        decode_index(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_mutated_files_load_correctly_or_fail_cleanly(file_bytes, edits, cut):
    data = bytearray(file_bytes)
    for position, value in edits:
        data[position % len(data)] = value
    if cut is not None:
        data = data[:cut % (len(data) + 1)]
    try:
        index = decode_index(bytes(data))
    except IndexFileError:
        return
    # Only a mutation that changed nothing (or only padding) may load, and then it must serve.
    original = decode_index(file_bytes)
    assert index.arrays.equals(original.arrays)
    Guide(index).get_tokens()


# --- threads -----------------------------------------------------------------------

@pytest.mark.slow
def test_one_index_served_by_many_threads():
    index = cached_index(r'\{"id": [0-9]{1,5}, "name": "[a-zA-Z ]{0,10}"(, "ok": (true|false))?\}',
                         "qwen2.5")
    vocab = index.vocabulary
    rng = np.random.default_rng(3)
    walks = []
    for _ in range(16):  # the serial answers
        guide, walk = Guide(index), []
        while not guide.is_finished() and len(walk) < 40:
            token = int(rng.choice(guide.get_tokens()))
            walk.append((token, guide.get_mask().copy(), guide.forced_tokens().copy()))
            guide.advance(token)
        walks.append(walk)
    failures = []

    def replay(walk):
        for _ in range(20):
            guide = Guide(index)
            for token, mask, forced in walk:
                if not (np.array_equal(guide.get_mask(), mask)
                        and np.array_equal(guide.forced_tokens(), forced)):
                    failures.append(walk)
                    return
                guide.advance(token)

    threads = [threading.Thread(target=replay, args=(walk,)) for walk in walks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and vocab is not None


# --- a Dask cluster through joblib ---------------------------------------------------

@pytest.mark.slow
def test_build_on_a_local_dask_cluster():
    distributed = pytest.importorskip("distributed")
    pattern = r"(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?"
    expected = cached_index(pattern, "mistral-sp32k")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), mock.patch.object(build_config, "PARALLEL_MIN_WORK", 0):
        on_cluster = Index.from_regex(pattern, expected.vocabulary, n_jobs=2, backend="dask", lazy=False)
    assert on_cluster.arrays.equals(expected.arrays)


def test_every_error_is_a_tokendfa_error():
    with pytest.raises(TokenDFAError):
        Index.from_regex("(", toy_vocabulary())


# --- random JSON values as schemas ---------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(
        ["string", "integer", "object", "array", "number", "boolean", "null", "a", ""]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "properties", "items", "enum", "const", "minimum", "maximum",
                         "required", "anyOf", "not", "maxLength", "pattern", "$ref", "x"]),
        children, max_size=3),
    max_leaves=8)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=json_values)
def test_random_json_values_as_schemas(schema):
    from tokendfa import EmptyLanguageError, SchemaError

    try:
        index = Index.from_schema(schema, cached_vocabulary_sp32k(), max_states=5000)
    except (SchemaError, EmptyLanguageError, BuildLimitError) as error:
        assert str(error)
        return
    assert len(index.get_tokens(index.initial_state)) >= 1  # lazy (the default): it serves


def cached_vocabulary_sp32k():
    from conftest import cached_vocabulary

    return cached_vocabulary("mistral-sp32k")


# --- schemas from the JSON Schema keyword vocabulary ----------------------------------

_leaf_schemas = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(
        ["string", "integer", "number", "boolean", "null", "object", "array"])}),
    st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(0, 6), "maxLength": st.integers(0, 12),
        "pattern": st.sampled_from(["^a+$", "b", "^[0-9]{2,4}$", "(x|y)*z", "^.{3}$"]),
        "format": st.sampled_from(["date", "email", "uuid"])}),
    st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])}, optional={
        "minimum": st.integers(-1000, 1000), "maximum": st.integers(-1000, 1000),
        "exclusiveMinimum": st.integers(-50, 50), "multipleOf": st.sampled_from([1, 2, 3, 7, 0.5])}),
    st.fixed_dictionaries({"enum": st.lists(st.none() | st.booleans() | st.integers(-9, 99)
                                            | st.text("abc", max_size=3), min_size=1, max_size=4)}),
    st.fixed_dictionaries({"const": st.integers(0, 9) | st.text("xy", max_size=3)}),
    st.just({"$ref": "#/$defs/d"}),
    st.booleans(),
)


def _composite(children):
    names = st.sampled_from(["a", "b", "c", "id"])
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(
            names, children, max_size=3)}, optional={
                "required": st.lists(names, max_size=2, unique=True),
                "additionalProperties": st.booleans() | children,
                "minProperties": st.integers(0, 2), "maxProperties": st.integers(0, 3)}),
        st.fixed_dictionaries({"type": st.just("array"), "items": children}, optional={
            "minItems": st.integers(0, 2), "maxItems": st.integers(0, 4)}),
        st.fixed_dictionaries({"anyOf": st.lists(children, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(children, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(children, min_size=1, max_size=2)}),
        st.fixed_dictionaries({"not": children}),
    )


keyword_schemas = st.builds(
    lambda body, definition: {**body, "$defs": {"d": definition}} if isinstance(body, dict)
    else body,
    st.recursive(_leaf_schemas, _composite, max_leaves=6), _leaf_schemas)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=keyword_schemas)
def test_keyword_schemas_compile_or_raise_a_tokendfa_error(schema):
    """Any schema built from the keyword vocabulary compiles, or raises a
    TokenDFAError subclass (nothing else), within the time limit."""
    import time

    started = time.perf_counter()
    try:
        index = Index.from_schema(schema, cached_vocabulary_sp32k(), max_states=5000,
                                  time_limit=5.0)
    except TokenDFAError as error:
        assert str(error)
    else:  # lazy (the default): it serves its first mask
        assert len(index.get_tokens(index.initial_state)) >= 1
    assert time.perf_counter() - started < 7.0
