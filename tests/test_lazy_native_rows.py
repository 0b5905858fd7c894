"""The compiled pieces of a cold lazy row are their numpy references.

A cold row with a covering vocabulary is made by a few C calls
(``tokendfa.lazy._cwalk``): the row's ASCII target (``ascii_target``), its
walk plan (``walk_plan``, over ``grouped``), the state each planned token
starts in (``start_states``), the walk, and the mask and successors from
what the walk found (``finish_row``). Each stands in for numpy code that
``TOKENDFA_NATIVE=0`` runs instead; so does a chain row's plan
(``chain_plan``), and a walk plan's packed bytes (``pack_plan``) stand for
packing them by token id at its first walk. Here each is compared with that code on
the Qwen 2.5 vocabulary and JSONSchemaBench schemas (every row their valid
instances reach: loop rows, chain rows, rows with no loop), and each
refuses arrays that would make it read outside a buffer.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import cached_vocabulary, json_string_chain
from tokendfa import Guide, Index
from tokendfa.lazy import index as lazy_index_module, kernels as lazy_kernels, plans as lazy_plans
from tokendfa.lazy import tables as lazy_tables
from tokendfa.lazy.index import LazyIndex

cwalk = pytest.importorskip("tokendfa.lazy._cwalk") if os.environ.get("TOKENDFA_NATIVE") != "0" else None
pytestmark = pytest.mark.skipif(cwalk is None, reason="TOKENDFA_NATIVE=0 turns the compiled code off")

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))
# A few sources whose schemas reach loop rows (strings, keys), chain rows
# (counted strings: maxLength, hashes, dates) and literal rows.
SOURCES = ["Github_easy", "Github_medium", "Snowplow", "Kubernetes", "WashingtonPost", "Glaiveai2K"]
PER_SOURCE = 2


def _numpy(monkeypatch) -> None:
    """The numpy code in every module of the lazy engine (the reference)."""
    for holder in (lazy_kernels, lazy_plans, lazy_tables, lazy_index_module):
        monkeypatch.setattr(holder, "_cwalk", None)


def _compiled(monkeypatch) -> None:
    for holder in (lazy_kernels, lazy_plans, lazy_tables, lazy_index_module):
        monkeypatch.setattr(holder, "_cwalk", cwalk)


@contextlib.contextmanager
def _fresh_plans(tables):
    """The vocabulary's plan caches empty for the block (and restored after):
    the plans made inside are made anew, not read from the caches."""
    caches = (tables.walk_plans, tables.chain_plans)
    saved = [(cache._plans, cache._sizes, cache._held) for cache in caches]
    for cache in caches:
        cache._plans, cache._sizes, cache._held = lazy_plans._SecondChance(), {}, 0
    try:
        yield
    finally:
        for cache, (plans, sizes, held) in zip(caches, saved):
            cache._plans, cache._sizes, cache._held = plans, sizes, held


def _schemas():
    if not BENCH.is_dir():
        pytest.skip(f"no JSONSchemaBench at {BENCH}")
    for source in SOURCES:
        path = BENCH / f"{source}.jsonl.gz"
        if not path.is_file():
            continue
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for taken, line in enumerate(handle):
                if taken == PER_SOURCE:
                    break
                yield json.loads(line)


def _states(index, vocab, record) -> list[int]:
    """The states the record's valid instances visit (as far as each goes)."""
    seen = []
    for case in record["tests"]:
        if not case["valid"]:
            continue
        guide = Guide(index)
        for token in vocab.encode(json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False)):
            if guide.state not in seen:
                seen.append(guide.state)
            if not index.is_allowed(guide.state, token):
                break
            guide.advance(token)
    return seen


@pytest.fixture(scope="module")
def indexes():
    """Lazy indexes of the schemas and the states their instances visit."""
    vocab = cached_vocabulary("qwen2.5")
    found = []
    for record in _schemas():
        try:
            index = Index.from_schema(record["schema"], vocab, lazy=True)
        except Exception:  # noqa: BLE001 - a schema the lazy engine refuses is passed over
            continue
        assert isinstance(index, LazyIndex)
        found.append((index, _states(index, vocab, record)))
    return vocab, found


def _assert_same_plan(compiled, numpy) -> None:
    """Two walk plans equal array for array, dtypes included, read-only,
    and narrow: 10 bytes a token in the plan caches and in a fork's first
    writes, not 25."""
    for field in ("tokens", "first_bytes", "positions", "skipped"):
        left, right = getattr(compiled, field), getattr(numpy, field)
        assert left.dtype == right.dtype and np.array_equal(left, right), field
        assert not left.flags.writeable
    assert (compiled.tokens.dtype, compiled.first_bytes.dtype, compiled.positions.dtype) == \
        (np.int32, np.uint8, np.int32)


def _recording(monkeypatch, name: str) -> list:
    """The arguments of every call the lazy index module makes to its
    function ``name`` from now on (the function still runs)."""
    asked = []
    function = getattr(lazy_index_module, name)

    def recording(*args):
        asked.append(args)
        return function(*args)

    monkeypatch.setattr(lazy_index_module, name, recording)
    return asked


def test_compiled_rows_are_the_numpy_rows_on_real_schemas(indexes, monkeypatch):
    """``_compiled_row`` (ascii_target, walk_plan, group_plan, start_states,
    the walk, finish_row; walk_span for rows with no loop and no plan kept)
    gives the mask bytes and successors of ``_numpy_row`` with no compiled
    code at all, row for row, and the mask the index serves."""
    vocab, found = indexes
    tables = lazy_tables.vocabulary_tables(vocab)
    compared = loops = 0
    calls = {"_chain_row": 0, "_span_row": 0}  # rows each kind of compiled row made
    for name in calls:
        def counting(self, *args, _name=name, _method=getattr(LazyIndex, name)):
            calls[_name] += 1
            return _method(self, *args)

        monkeypatch.setattr(LazyIndex, name, counting)
    for index, states in found:
        if not index._covered:
            continue
        for state in states:
            _compiled(monkeypatch)
            key, successors, fingerprint = index._compiled_row(state)
            assert key == index.get_mask(state).tobytes()
            _numpy(monkeypatch)
            # the reference makes its own plans (the caches hold the compiled ones)
            with _fresh_plans(tables):
                row = index._raw_row(state)
                numpy_key, numpy_successors, numpy_fingerprint = index._numpy_row(state)
            assert key == numpy_key and fingerprint == numpy_fingerprint, state
            assert successors.dtype == numpy_successors.dtype
            assert np.array_equal(successors, numpy_successors), state
            compared += 1
            loops += row.loop is not None
    _compiled(monkeypatch)
    chains, spans = calls["_chain_row"], calls["_span_row"]
    assert compared >= 300 and loops >= 50 and chains >= 5 and spans >= 20, (compared, loops, chains, spans)


def test_compiled_rows_of_plans_not_packed_ahead(indexes, monkeypatch):
    """A loop's rest too long to keep packed (past _PLAN_MAX_TOKENS tokens;
    here every rest) leaves its walk plans to be packed by their first walk
    (walk_and_pack, then finish_row): the rows are still numpy's."""
    vocab, found = indexes
    tables = lazy_tables.vocabulary_tables(vocab)
    monkeypatch.setattr(lazy_tables, "_PLAN_MAX_TOKENS", 0)
    saved = dict(tables.loop_masks)
    tables.loop_masks.clear()
    # nor the loop's rest packed once for its plans (_tail_packed)
    tails = [tail for tail in tables.tail_sets.values() if tail is not None]
    packings = [tail.packing.packed for tail in tails]
    for tail in tails:
        tail.packing.packed = None
    for index, _ in found:  # nor what each index keeps of them per loop state (LazyIndex._loop_rest)
        index._loop_rests.clear()
    compared = unpacked = 0
    try:
        with _fresh_plans(tables):
            for index, states in found[:4]:
                for state in states[:30]:
                    _compiled(monkeypatch)
                    loop, plan, _ = index._loop_row(state, index._dfa.row(state))
                    unpacked += loop is not None and isinstance(plan, lazy_plans._WalkPlan) and \
                        plan.packing.packed is None
                    key, successors, fingerprint = index._compiled_row(state)
                    _numpy(monkeypatch)
                    with _fresh_plans(tables):
                        numpy_key, numpy_successors, numpy_fingerprint = index._numpy_row(state)
                    assert key == numpy_key and np.array_equal(successors, numpy_successors), state
                    assert fingerprint == numpy_fingerprint, state
                    compared += 1
    finally:
        _compiled(monkeypatch)
        tables.loop_masks.clear()
        tables.loop_masks.update(saved)
        for tail, packed in zip(tails, packings):
            tail.packing.packed = packed
        for index, _ in found:
            index._loop_rests.clear()
    assert compared >= 40 and unpacked >= 5, (compared, unpacked)


def test_compiled_walk_plans_and_start_states_are_the_numpy_ones(indexes, monkeypatch):
    """Every walk plan and chain plan the real schemas' rows ask for, made
    by ``_cwalk.walk_plan`` and ``_cwalk.chain_plan`` and made by numpy, are
    array for array (dtypes included) the same, a walk plan's bytes packed
    with it (``_cwalk.pack_plan``) are those packed by token id, and the
    states their entries start in (``_cwalk.start_states``) are numpy's."""
    vocab, found = indexes
    tables = lazy_tables.vocabulary_tables(vocab)
    asked = []
    walk_plan, start_states = lazy_index_module._walk_plan, lazy_index_module._start_states

    def recording_walk_plan(tables_, live, loop=None, first_key=None, outside=None):
        # (a loop row gives the live bytes outside its first ones only)
        asked.append((outside if live is None else live.copy(), loop, first_key, outside))
        return walk_plan(tables_, live, loop, first_key, outside)

    starts = []

    def recording_start_states(first_row, plan, picks, along):
        starts.append((first_row.copy(), plan, picks, along.copy()))
        return start_states(first_row, plan, picks, along)

    chain_plan = lazy_index_module._chain_plan
    chain_asked = _recording(monkeypatch, "_chain_plan")
    monkeypatch.setattr(lazy_index_module, "_walk_plan", recording_walk_plan)
    monkeypatch.setattr(lazy_index_module, "_start_states", recording_start_states)
    # loop rests made here, compiled (packed), not those the numpy rows of
    # the tests before left in the cache (the compiled rows read none)
    saved = dict(tables.loop_masks)
    tables.loop_masks.clear()
    try:
        for index, states in found:
            if index._covered:
                for state in states[:40]:
                    index._raw_row(state)
    finally:
        tables.loop_masks.clear()
        tables.loop_masks.update(saved)
    assert len(asked) >= 100 and any(loop is not None for _, loop, _, _ in asked)
    for live, loop, first_key, outside in asked:
        if loop is not None:
            # the keys _cwalk.row_first gave are the ones numpy makes
            assert first_key == np.packbits(loop[0]).tobytes()
            assert np.array_equal(outside, live[~loop[0][live]])
        with _fresh_plans(tables):
            compiled = walk_plan(tables, live, loop, first_key, outside)
        _numpy(monkeypatch)
        with _fresh_plans(tables):
            numpy = walk_plan(tables, live, loop)
        _compiled(monkeypatch)
        _assert_same_plan(compiled, numpy)
        # packed with the plan from the bytes grouped by first byte
        # (_cwalk.pack_plan), as packing by token id gives them
        packed, by_id = compiled.packing.packed, lazy_plans._packed(tables, compiled.tokens, compiled.positions)
        assert packed is not None and numpy.packing.packed is None
        assert np.array_equal(packed.offsets, by_id.offsets) and np.array_equal(packed.data, by_id.data)
    assert len(chain_asked) >= 5
    for args in chain_asked:
        with _fresh_plans(tables):
            compiled = chain_plan(*args)
        _numpy(monkeypatch)
        with _fresh_plans(tables):
            numpy = chain_plan(*args)
        _compiled(monkeypatch)
        for field in ("tokens", "links", "first_bytes", "positions"):
            left, right = getattr(compiled, field), getattr(numpy, field)
            assert left.dtype == right.dtype and np.array_equal(left, right), field
            assert not left.flags.writeable
        assert (compiled.tokens.dtype, compiled.links.dtype, compiled.first_bytes.dtype, compiled.positions.dtype) == \
            (np.int32, np.int32, np.uint8, np.int32)
    chains = 0
    for first_row, plan, picks, along in starts:
        compiled = start_states(first_row, plan, picks, along)
        _numpy(monkeypatch)
        numpy = start_states(first_row, plan, picks, along)
        _compiled(monkeypatch)
        assert np.array_equal(compiled, numpy)
        chains += picks.dtype != bool
    assert chains >= 5


def test_group_plans_are_the_numpy_walk_plans(indexes, monkeypatch):
    """Every loop row's plan ``_cwalk.group_plan`` reads from the groups and
    the loop's rest packed once (``plans._group_plan``) is, array for array
    (dtypes included) and byte for byte packed, the walk plan numpy makes
    from the loop's rest of the row's first bytes (``tables._loop_mask``,
    ``plans._walk_plan``) less the rest tokens that die at their first byte
    in the loop's state (a resume point, then an ASCII byte dead there), under
    the same cache key (with the dead bytes where there are any); and some
    rows leave such tokens out."""
    vocab, found = indexes
    tables = lazy_tables.vocabulary_tables(vocab)
    group_plan = lazy_index_module._group_plan
    asked = _recording(monkeypatch, "_group_plan")
    with _fresh_plans(tables):
        for index, states in found:
            if index._covered:
                for state in states[:40]:
                    index._raw_row(state)
    assert len(asked) >= 30, len(asked)
    kinds, left_out = set(), 0
    for tables_, first, tail_key, tail, packed, first_key, outside, dead in asked:
        assert first_key == np.packbits(first).tobytes()
        kinds.add(first_key)
        with _fresh_plans(tables):
            compiled = group_plan(tables, first, tail_key, tail, packed, first_key, outside, dead)
            key = (first_key, tail_key, outside.tobytes()) + ((dead,) if dead != lazy_plans._NO_DEAD else ())
            assert tables.walk_plans.get(key) is compiled
        _numpy(monkeypatch)
        saved = dict(tables.loop_masks)
        tables.loop_masks.clear()
        try:
            with _fresh_plans(tables):
                _, rest = lazy_tables._loop_mask(tables, first, tail_key, tail)
                live = np.union1d(np.flatnonzero(first), outside)
                numpy = lazy_plans._walk_plan(tables, live, (first, tail_key, rest))
        finally:
            tables.loop_masks.clear()
            tables.loop_masks.update(saved)
            _compiled(monkeypatch)
        # the rest tokens that start in the loop's state with a dead ASCII byte, found in numpy
        dead_bytes = np.unpackbits(np.frombuffer(dead, np.uint8), bitorder="little").astype(bool)
        positions, tokens = numpy.positions.astype(np.int64), numpy.tokens.astype(np.int64)
        resume = tables.columns[np.minimum(positions, len(tables.columns) - 1), tokens]
        dies = numpy.skipped & (positions < tables.lengths[tokens]) & (resume < 128) & dead_bytes[resume & 127]
        left_out += int(dies.sum())
        kept = ~dies
        numpy = lazy_plans._WalkPlan(*(np.array(getattr(numpy, field)[kept]) for field in
                                       ("tokens", "first_bytes", "positions", "skipped")))
        for field in ("tokens", "first_bytes", "positions", "skipped"):
            getattr(numpy, field).flags.writeable = False
        # no positions kept: each is its token's length less its packed bytes
        assert compiled.positions is None
        positions = lazy_plans._plan_positions(tables, compiled)
        positions.flags.writeable = False
        _assert_same_plan(lazy_plans._WalkPlan(compiled.tokens, compiled.first_bytes, positions, compiled.skipped),
                          numpy)
        by_id = lazy_plans._packed(tables, compiled.tokens, numpy.positions)
        assert np.array_equal(compiled.packing.packed.offsets, by_id.offsets)
        assert np.array_equal(compiled.packing.packed.data, by_id.data)
    assert len(kinds) >= 3, len(kinds)
    assert left_out > 1000, left_out


def test_group_plan_refuses_bad_arrays():
    """``_cwalk.group_plan`` checks every group and offset it reads."""
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    grouped, grouped_offsets = lazy_plans._grouped_spellings(tables)
    rest = np.array([3, 4], np.int64)
    rest_offsets = np.zeros(257, np.int64)
    rest_offsets[ord("a") + 1:] = 2  # both start with "a"
    skips, data, data_offsets = np.array([0, 2], np.int16), np.frombuffer(b"xyz", np.uint8), np.array([0, 2, 3], np.int32)

    def plan(**changed):
        arrays = dict(by_first_byte=tables.by_first_byte, first_offsets=tables.first_offsets, grouped=grouped,
                      grouped_offsets=grouped_offsets, walked=np.array([ord('"')], np.int64), rest_tokens=rest,
                      rest_offsets=rest_offsets, rest_skips=skips, rest_data=data, rest_data_offsets=data_offsets,
                      rested=np.array([ord("a")], np.int64), dead=np.zeros(16, np.uint8),
                      grouped_shared=lazy_plans._grouped_prefixes(tables), rest_shared=np.zeros(2, np.uint8))
        arrays.update(changed)
        return cwalk.group_plan(*arrays.values())

    tokens, first_bytes, skipped, packed, offsets, shared = plan()
    assert len(shared) == len(skipped)  # one byte an entry
    quoted = np.diff(tables.first_offsets)[ord('"')]
    assert np.frombuffer(tokens, np.int32)[quoted:].tolist() == [3, 4]
    assert np.diff(np.frombuffer(offsets, np.int32))[quoted:].tolist() == [2, 1]  # "xy" and "z" from their resume points
    assert np.frombuffer(skipped, bool)[quoted:].tolist() == [False, True]
    assert set(np.frombuffer(first_bytes, np.uint8).tolist()) == {ord('"'), ord("a")}
    assert len(first_bytes) == len(skipped)  # one byte a first byte
    assert packed.endswith(b"xyz") and np.frombuffer(offsets, np.int32)[-1] == len(packed)
    assert len(offsets) == 4 * (len(skipped) + 1)  # packed offsets are int32
    # a rest token that starts in the loop's state (token 4, resume point 2)
    # with a dead byte is left out; one walked from its first byte's state
    # (token 3, no resume point) is not, whatever its next byte
    dead = np.zeros(16, np.uint8)
    dead[ord("z") >> 3] |= 1 << (ord("z") & 7)
    dead[ord("x") >> 3] |= 1 << (ord("x") & 7)
    tokens, _, skipped, packed, offsets, _ = plan(dead=dead)
    assert np.frombuffer(tokens, np.int32)[quoted:].tolist() == [3]
    assert packed.endswith(b"xy") and np.frombuffer(offsets, np.int32)[-1] == len(packed)
    with pytest.raises(ValueError, match="mismatched"):
        plan(dead=np.zeros(15, np.uint8))
    with pytest.raises(TypeError, match="rest_data_offsets: items of 4 bytes"):
        plan(rest_data_offsets=data_offsets.astype(np.int64))
    with pytest.raises(TypeError, match="14 arguments"):
        cwalk.group_plan(grouped)
    with pytest.raises(ValueError, match="mismatched"):
        plan(grouped_shared=lazy_plans._grouped_prefixes(tables)[:-1])
    with pytest.raises(ValueError, match="mismatched"):
        plan(rest_shared=np.zeros(3, np.uint8))
    with pytest.raises(IndexError, match="outside the row"):
        plan(walked=np.array([256], np.int64))
    with pytest.raises(IndexError, match="outside the row"):
        plan(rested=np.array([-1], np.int64))
    with pytest.raises(IndexError, match="outside the tokens"):
        plan(by_first_byte=tables.by_first_byte[:10], grouped_offsets=grouped_offsets[:11],
             grouped_shared=lazy_plans._grouped_prefixes(tables)[:10])
    with pytest.raises(IndexError, match="outside the grouped bytes"):
        plan(grouped=grouped[:100])
    with pytest.raises(IndexError, match="outside the rest"):
        plan(rest_offsets=rest_offsets + 1)
    with pytest.raises(IndexError, match="outside the rest's bytes"):
        plan(rest_data=data[:2])
    with pytest.raises(IndexError, match="outside the rest's bytes"):
        plan(rest_data_offsets=np.array([0, 3, 2], np.int32))
    with pytest.raises(ValueError, match="mismatched"):
        plan(first_offsets=tables.first_offsets[:256])
    with pytest.raises(ValueError, match="mismatched"):
        plan(rest_skips=skips[:1])
    with pytest.raises(ValueError, match="mismatched"):
        plan(rest_data_offsets=data_offsets[:2])
    with pytest.raises(TypeError, match="rest_skips"):
        plan(rest_skips=skips.astype(np.int64))


def test_grouped_is_the_numpy_gather(monkeypatch):
    """``_cwalk.grouped`` against numpy's ranges: the tokens of first-byte
    groups of the Qwen vocabulary, any groups in any order, repeated, none."""
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    rng = np.random.default_rng(7)
    for groups in [np.arange(256), np.array([], dtype=np.int64), np.array([34, 34, 0, 255, 97]),
                   rng.integers(0, 256, 40), np.flatnonzero(rng.random(256) < 0.5)]:
        groups = groups.astype(np.int64)
        compiled = lazy_kernels._grouped(tables.by_first_byte, tables.first_offsets, groups)
        _numpy(monkeypatch)
        numpy = lazy_kernels._grouped(tables.by_first_byte, tables.first_offsets, groups)
        _compiled(monkeypatch)
        assert compiled.dtype == numpy.dtype and np.array_equal(compiled, numpy)
        assert compiled.flags.writeable
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.grouped(tables.by_first_byte, tables.first_offsets, np.array([256]))
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.grouped(tables.by_first_byte, np.array([0, 5, 3], dtype=np.int64), np.array([1]))
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.grouped(tables.by_first_byte[:3], np.array([0, 9], dtype=np.int64), np.array([0]))
    with pytest.raises(TypeError, match="items of 8 bytes"):
        cwalk.grouped(tables.by_first_byte, tables.first_offsets, np.array([1], dtype=np.int32))


def test_ascii_target_is_the_counter():
    """``_cwalk.ascii_target``: the state most ASCII cells lead to (not
    dead, the smallest of a tie) and their count, as _loop_row's Counter."""
    rng = np.random.default_rng(3)
    rows = [np.zeros(256, np.int32), np.full(256, 5, np.int32)]
    for states in (2, 3, 8, 40, 128):
        for _ in range(30):
            rows.append(rng.integers(0, states, 256).astype(np.int32))
    for row in rows:
        counts: dict[int, int] = {}
        for cell in row[:128].tolist():
            if cell:
                counts[cell] = counts.get(cell, 0) + 1
        most = max(counts.values(), default=0)
        target = min((s for s, c in counts.items() if c == most), default=0)
        assert cwalk.ascii_target(row) == (target, most)
    with pytest.raises(ValueError, match="256 cells"):
        cwalk.ascii_target(np.zeros(100, np.int32))
    with pytest.raises(TypeError, match="items of 4 bytes"):
        cwalk.ascii_target(np.zeros(256, np.int64))


def test_row_first_is_numpys():
    """``_cwalk.row_first``: the bytes leading to a target (ASCII, and the
    lead bytes when asked), packbits of them, the live bytes outside them,
    and their ASCII bits, as _loop_row's numpy code makes them."""
    rng = np.random.default_rng(5)
    for trial in range(200):
        row = rng.integers(0, int(rng.integers(2, 6)), 256).astype(np.int32)
        if trial % 7 == 0:
            row[rng.random(256) < 0.3] = -1  # cells not resolved are live
        target, lead = int(rng.integers(1, 5)), bool(trial % 2)
        first = np.zeros(256, dtype=bool)
        first[:128] = row[:128] == target
        first[lazy_tables._LEAD_BYTES] = lead
        live = np.flatnonzero(row)
        data, key, outside, low, high = cwalk.row_first(row, target, lead)
        assert np.array_equal(np.frombuffer(data, bool), first)
        assert key == np.packbits(first).tobytes()
        assert np.array_equal(np.frombuffer(outside, np.int64), live[~first[live]])
        assert (low, high) == lazy_tables._class_key(first[:128], False)[:2]
    with pytest.raises(ValueError, match="256 cells"):
        cwalk.row_first(np.zeros(128, np.int32), 1, False)
    with pytest.raises(TypeError, match="items of 4 bytes"):
        cwalk.row_first(np.zeros(256, np.int64), 1, False)


def test_equal_bits_is_the_class_key():
    """``_cwalk.equal_bits``: the first 128 cells equal to a value as a loop
    set's two halves, as ``tables._class_key`` packs them (LazyIndex._loop)."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        cells = rng.integers(-1, int(rng.integers(2, 6)), 128 + 128 * (trial % 2)).astype(np.int32)
        value = int(rng.integers(0, 5))
        assert cwalk.equal_bits(cells, value) == lazy_tables._class_key(cells[:128] == value, False)[:2]
    with pytest.raises(ValueError, match="128 cells"):
        cwalk.equal_bits(np.zeros(127, np.int32), 1)
    with pytest.raises(TypeError, match="items of 4 bytes"):
        cwalk.equal_bits(np.zeros(128, np.int64), 1)
    with pytest.raises(TypeError, match="2 arguments"):
        cwalk.equal_bits(np.zeros(128, np.int32))


def test_row_runs_are_numpys():
    """``_cwalk.row_runs``: a row's live first bytes (the walk plan's key)
    and the ranges of by_first_byte of their runs of consecutive bytes, as
    numpy finds them."""
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    rng = np.random.default_rng(11)
    for trial in range(300):
        row = (rng.random(256) < [0.0, 0.02, 0.3, 0.9, 1.0][trial % 5]).astype(np.int32) * 7
        if trial % 3 == 0:
            row[rng.random(256) < 0.2] = -1  # cells not resolved are live
        live = np.flatnonzero(row)
        key, ranges = cwalk.row_runs(row, tables.first_offsets)
        assert key == live.astype(np.int64).tobytes()
        runs = np.split(live, np.flatnonzero(np.diff(live) != 1) + 1) if len(live) else []
        expected = [(tables.first_offsets[run[0]], tables.first_offsets[run[-1] + 1]) for run in runs]
        assert np.frombuffer(ranges, np.int64).reshape(-1, 2).tolist() == [list(map(int, e)) for e in expected]
    with pytest.raises(ValueError, match="256 cells"):
        cwalk.row_runs(np.zeros(255, np.int32), tables.first_offsets)
    with pytest.raises(ValueError, match="257 offsets"):
        cwalk.row_runs(np.zeros(256, np.int32), tables.first_offsets[:256])
    with pytest.raises(TypeError, match="items of 8 bytes"):
        cwalk.row_runs(np.zeros(256, np.int32), tables.first_offsets.astype(np.int32))


def test_start_states_refuses_bad_arrays():
    row = np.arange(256, dtype=np.int32)
    first_bytes, out = np.array([1, 2], dtype=np.uint8), np.zeros(2, np.int64)
    cwalk.start_states(row, first_bytes, np.array([True, False]), np.array([9], np.int64), out)
    assert out.tolist() == [9, 2]
    cwalk.start_states(row, first_bytes, np.array([-1, 1], np.int32), np.array([7, 8], np.int64), out)
    assert out.tolist() == [1, 8]
    with pytest.raises(IndexError, match="outside the chain"):
        cwalk.start_states(row, first_bytes, np.array([2, 0], np.int32), np.array([7, 8], np.int64), out)
    with pytest.raises(IndexError, match="outside the chain"):
        cwalk.start_states(row, first_bytes, np.array([True, True]), np.zeros(0, np.int64), out)
    with pytest.raises(TypeError, match="first_bytes: items of 1 bytes"):   # a plan's first bytes are uint8
        cwalk.start_states(row, np.array([1, 2], np.int64), np.array([False, False]), np.zeros(1, np.int64), out)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.start_states(row[:128], first_bytes, np.array([False, False]), np.zeros(1, np.int64), out)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.start_states(row, first_bytes, np.array([False]), np.zeros(1, np.int64), out)
    with pytest.raises(TypeError, match="picks"):
        cwalk.start_states(row, first_bytes, np.zeros(2, np.int64), np.zeros(1, np.int64), out)


def test_finish_row_is_the_numpy_row():
    """``_cwalk.finish_row`` against the numpy mask and successors on
    random walks over the Qwen vocabulary's size (a loop mask or none, EOS
    in a final row or not), the mask's fingerprint against its twin
    (``_mask_fingerprint``), and its refusals."""
    vocab = cached_vocabulary("qwen2.5")
    words = (vocab.size + 31) // 32
    eos = np.array(sorted(vocab.eos_token_ids), dtype=np.int64)
    rng = np.random.default_rng(11)
    for trial in range(24):
        tokens = rng.choice(vocab.size, size=int(rng.integers(0, 6000)), replace=False).astype(np.int32)
        ended = int(rng.integers(0, len(tokens) + 1))
        entries = np.sort(rng.choice(len(tokens), size=ended, replace=False)).astype(np.int64) if ended else \
            np.zeros(0, np.int64)
        ends = rng.integers(1, 1 + int(rng.integers(1, 500)), len(entries)).astype(np.int64)
        # the walk's outputs are as long as the plan, ended entries first
        entries_out = np.concatenate((entries, np.full(len(tokens) - ended, -5, np.int64)))
        ends_out = np.concatenate((ends, np.full(len(tokens) - ended, -5, np.int64)))
        loop = trial % 3 != 0
        loop_mask = rng.integers(0, 1 << 32, words, dtype=np.uint64).astype(np.uint32) if loop else None
        loop_ends = rng.integers(1, 600, int(rng.integers(1, 4))).astype(np.int64) if loop else np.zeros(0, np.int64)
        final = trial % 2 == 0
        key, successors, fingerprint = cwalk.finish_row(loop_mask, words, tokens, entries_out, ends_out, ended,
                                                        loop_ends, eos, final)
        mask = np.zeros(words, np.uint32) if loop_mask is None else loop_mask.copy()
        lazy_kernels._set_bits(mask, tokens[entries])
        if final:
            lazy_kernels._set_bits(mask, eos)
        assert key == mask.tobytes()
        assert fingerprint == lazy_kernels._mask_fingerprint(mask)
        expected = np.unique(np.concatenate((ends, loop_ends))).astype(np.int32)
        assert np.array_equal(np.frombuffer(successors, np.int32), expected)
    one, none, token = np.array([0], np.int64), np.zeros(0, np.int64), np.array([0], np.int32)
    with pytest.raises(IndexError, match="outside the tokens"):
        cwalk.finish_row(None, words, token, np.array([1], np.int64), one, 1, none, eos, False)
    with pytest.raises(IndexError, match="outside the mask"):
        cwalk.finish_row(None, 1, np.array([32], np.int32), np.array([0], np.int64), one, 1, none, none, False)
    with pytest.raises(TypeError, match="tokens: items of 4 bytes"):   # a plan's tokens are int32
        cwalk.finish_row(None, 1, one, one, one, 1, none, none, False)
    with pytest.raises(IndexError, match="outside the mask"):
        cwalk.finish_row(None, 1, token, one, one, 1, none, np.array([40], np.int64), True)
    with pytest.raises(IndexError, match="outside int32"):
        cwalk.finish_row(None, 1, token, one, np.array([1 << 40], np.int64), 1, none, none, False)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.finish_row(None, 1, token, one, one, 2, none, none, False)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.finish_row(None, 1 << 62, token, one, one, 1, none, none, False)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.finish_row(np.zeros(2, np.uint32), 1, token, one, one, 1, none, none, False)
    # an EOS outside the mask is not read unless the row is final
    assert cwalk.finish_row(None, 1, token, one, one, 1, none, np.array([40], np.int64), False)[1] == \
        np.array([0], np.int32).tobytes()


def test_walk_plan_refuses_bad_arrays():
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    rest = lazy_plans._NO_REST
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.array([256]), *rest)
    with pytest.raises(IndexError, match="outside the offsets"):
        cwalk.walk_plan(tables.by_first_byte[:10], tables.first_offsets, np.array([97]), *rest)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets[:200], np.array([1]), *rest)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.array([1]),
                        np.array([3], np.int64), rest[1], rest[2], rest[3])
    with pytest.raises(TypeError, match="items of 1 bytes"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.array([1]), *rest[:3], rest[2])
    # a plan's tokens and positions are int32: wider ones are refused, not cut
    one_rest = (np.array([1 << 40]), np.array([97], np.uint8), np.array([1]), np.zeros(1, bool))
    with pytest.raises(ValueError, match="outside int32"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.array([1]), *one_rest)
    with pytest.raises(ValueError, match="outside int32"):
        cwalk.walk_plan(tables.by_first_byte, tables.first_offsets, np.array([1]), np.array([3]), one_rest[1],
                        np.array([1 << 33]), one_rest[3])
    with pytest.raises(ValueError, match="outside int32"):
        cwalk.walk_plan(tables.by_first_byte + (1 << 32), tables.first_offsets, np.array([97]), *rest)


def test_chain_plan_refuses_bad_arrays():
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    digits = np.zeros(128, dtype=bool)
    digits[ord("0"):ord("9") + 1] = True
    key = lazy_tables._class_key(digits, False)
    runs = lazy_tables._class_runs(tables, key)
    first = np.ascontiguousarray(tables.columns[0])

    def plan(length=4, dies=False, **changed):
        arrays = dict(by_first_byte=tables.by_first_byte, first_offsets=tables.first_offsets, first_column=first,
                      others=np.array([97], np.int64), irregular=runs.irregular,
                      irregular_offsets=runs.irregular_offsets, starting=np.arange(48, 58, dtype=np.int64),
                      partial=runs.partial, partial_offsets=runs.partial_offsets, chars=runs.chars,
                      full_by_chars=runs.full_by_chars, full_offsets=runs.full_offsets, ascii=runs.ascii)
        arrays.update(changed)
        return cwalk.chain_plan(*arrays.values(), length, dies)

    tokens = np.frombuffer(plan()[0], np.int32)
    assert len(tokens) and tokens.max() < len(first)
    with pytest.raises(IndexError, match="outside the offsets"):
        plan(others=np.array([256], np.int64))
    with pytest.raises(IndexError, match="outside the offsets"):
        plan(partial_offsets=runs.partial_offsets + len(runs.partial) + 1)
    with pytest.raises(IndexError, match="outside the tables"):
        plan(length=0, full_by_chars=runs.full_by_chars + len(first))
    with pytest.raises(ValueError, match="mismatched"):
        plan(length=-1)
    with pytest.raises(ValueError, match="mismatched"):
        plan(length=1 << 62)
    with pytest.raises(ValueError, match="mismatched"):
        plan(chars=runs.chars[:10])
    for dies in (-1, 3, 1 << 40):
        with pytest.raises((ValueError, OverflowError)):
            plan(dies=dies)
    with pytest.raises(ValueError, match="mismatched"):
        plan(irregular_offsets=runs.irregular_offsets[:100])
    with pytest.raises(TypeError, match="ascii: items of 2 bytes expected, got 8"):
        plan(ascii=runs.ascii.astype(np.int64))
    with pytest.raises(TypeError, match="ascii: items of 4 bytes expected, got 2"):
        plan(chars=runs.chars.astype(np.int32))
    # the compiled class runs make int16 runs, numpy's int32 ones: the same plan
    assert runs.chars.dtype == np.int16
    wide = plan(chars=runs.chars.astype(np.int32), ascii=runs.ascii.astype(np.int32))
    assert wide == plan()


def test_pack_plan_refuses_bad_arrays():
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    grouped, offsets = lazy_plans._grouped_spellings(tables)
    rest = lazy_plans._packed(tables, np.array([9707, 1879], np.int64), np.array([1, 0], np.int64))

    def pack(grouped=grouped, offsets=offsets, groups=np.array([97], np.int64), data=rest.data,
             rest_offsets=rest.offsets):
        return cwalk.pack_plan(grouped, offsets, tables.first_offsets, groups, data, rest_offsets)

    data, packed_offsets = pack()
    head = tables.first_offsets[98] - tables.first_offsets[97]
    packed_offsets = np.frombuffer(packed_offsets, np.int32)
    assert len(packed_offsets) == head + 3 and data[packed_offsets[head]:] == rest.data.tobytes()
    with pytest.raises(IndexError, match="outside the offsets"):
        pack(groups=np.array([256], np.int64))
    with pytest.raises(IndexError, match="outside the grouped bytes"):
        pack(grouped=grouped[:100])
    with pytest.raises(IndexError, match="outside the offsets"):
        pack(offsets=offsets[:50])
    with pytest.raises(IndexError, match="outside the rest"):
        pack(data=rest.data[:0])
    with pytest.raises(IndexError, match="outside the rest"):
        pack(rest_offsets=np.array([0, 5, 2], np.int32))
    with pytest.raises(IndexError, match="outside the rest"):
        pack(rest_offsets=rest.offsets + 1)
    with pytest.raises(ValueError, match="mismatched"):
        pack(rest_offsets=np.zeros(0, np.int32))
    with pytest.raises(TypeError, match="rest_offsets: items of 4 bytes"):   # packed offsets are int32
        pack(rest_offsets=rest.offsets.astype(np.int64))


def test_walk_span_refuses_bad_arrays():
    """``_cwalk.walk_span`` (a row with no loop over ranges of the groups,
    each token from its first byte; one range read in place, several
    gathered) checks each array before it reads it."""
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.analysis.dfa import INITIAL

    dfa = LazyByteDFA("ab")
    dfa.row(INITIAL)
    # "ab", "b", "ab", "ba": tokens 5-8
    data, offsets = np.frombuffer(b"abbabba", np.uint8), np.array([0, 2, 3, 5, 7], np.int64)
    tokens, none = np.array([5, 6, 7, 8], np.int64), np.zeros(0, np.int64)

    def walk(**changed):
        arrays = dict(data=data, offsets=offsets, ranges=np.array([[0, 4]], np.int64), state=INITIAL,
                      tokens=tokens, loop_mask=None, num_words=1, loop_ends=none, eos=none, final=False, shared=None)
        arrays.update(changed)
        with dfa.resolving():
            return cwalk.walk_span(dfa, *arrays.values())

    for ranges in ([[0, 4]], [[0, 1], [2, 4]], [[0, 0], [0, 1], [1, 3], [3, 4]]):
        mask, successors, fingerprint = walk(ranges=np.array(ranges, np.int64))
        assert np.frombuffer(mask, np.uint32).tolist() == [1 << 5 | 1 << 7], ranges
        assert fingerprint == lazy_kernels._mask_fingerprint(np.array([1 << 5 | 1 << 7], np.uint32))
        assert [dfa.is_final(int(s)) for s in np.frombuffer(successors, np.int32)] == [True]
    shared = np.empty(4, np.uint8)
    cwalk.common_prefixes(data, offsets, shared)
    assert shared.tolist() == [0, 0, 0, 0]
    long = np.frombuffer(b"x" * 300 + b"x" * 299 + b"y" + b"x" * 12 + b"xxxxxxxxxyz", np.uint8)
    prefixes = np.empty(4, np.uint8)
    cwalk.common_prefixes(long, np.array([0, 300, 600, 612, 623], np.int32), prefixes)
    assert prefixes.tolist() == [0, 255, 12, 9]  # at most 255
    with pytest.raises(IndexError, match="outside the data"):
        cwalk.common_prefixes(data, np.array([0, 2, 3, 5, 8], np.int64), shared)
    with pytest.raises(IndexError, match="outside the data"):
        cwalk.common_prefixes(data, np.array([0, 2, 1, 5, 7], np.int32), shared)
    with pytest.raises(ValueError, match="mismatched"):
        cwalk.common_prefixes(data, offsets[:4], shared)
    with pytest.raises(TypeError, match="int32 or int64"):
        cwalk.common_prefixes(data, offsets.astype(np.int16), shared)
    for ranges in ([[0, 4]], [[0, 1], [2, 4]]):  # with the shared prefixes: the same row
        mask, successors, _ = walk(ranges=np.array(ranges, np.int64), shared=shared)
        assert np.frombuffer(mask, np.uint32).tolist() == [1 << 5 | 1 << 7], ranges
    mask, successors, _ = walk(ranges=np.array([[1, 2], [3, 4]], np.int64))
    assert np.frombuffer(mask, np.uint32).tolist() == [0] and successors == b""
    mask, _, _ = walk(ranges=np.zeros((0, 2), np.int64))
    assert np.frombuffer(mask, np.uint32).tolist() == [0]
    with pytest.raises(TypeError, match="12 arguments"):
        cwalk.walk_span(dfa, data)
    with pytest.raises(ValueError, match="mismatched"):
        walk(shared=np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="shared: items of 1 byte"):
        walk(shared=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="mismatched"):
        walk(offsets=offsets[:4])
    with pytest.raises(ValueError, match="mismatched"):
        walk(ranges=np.array([0, 4, 1], np.int64))
    with pytest.raises(ValueError, match="mismatched"):
        walk(loop_mask=np.zeros(2, np.uint32))
    with pytest.raises(IndexError, match="range outside"):
        walk(ranges=np.array([[0, 5]], np.int64))
    with pytest.raises(IndexError, match="range outside"):
        walk(ranges=np.array([[2, 1]], np.int64))
    with pytest.raises(IndexError, match="range outside"):
        walk(ranges=np.array([[2, 4], [0, 1]], np.int64))
    with pytest.raises(IndexError, match="outside the data"):
        walk(offsets=np.array([0, 2, 3, 5, 8], np.int64))
    with pytest.raises(IndexError, match="outside the data"):
        walk(offsets=np.array([0, 3, 2, 5, 7], np.int64))
    with pytest.raises(IndexError, match="outside the mask"):
        walk(tokens=np.array([5, 6, 40, 8], np.int64))
    with pytest.raises(IndexError, match="outside the automaton"):
        walk(state=1000)
    with pytest.raises(TypeError, match="tokens"):
        walk(tokens=tokens.astype(np.int32))


def test_walk_row_refuses_bad_arrays():
    """``_cwalk.walk_row`` (start states, walk and finish of a packed plan)
    checks each array before it reads it."""
    from tokendfa.analysis.lazydfa import LazyByteDFA
    from tokendfa.analysis.dfa import INITIAL

    dfa = LazyByteDFA("ab")
    first_row = np.ascontiguousarray(dfa.row(INITIAL))
    data, offsets = np.frombuffer(b"b", np.uint8), np.array([0, 1], np.int32)  # one entry: "b" after "a"
    first_bytes, picks, along = np.array([ord("a")], np.uint8), np.zeros(1, bool), np.zeros(1, np.int64)
    tokens, none = np.array([5], np.int32), np.zeros(0, np.int64)

    def walk(**changed):
        arrays = dict(data=data, offsets=offsets, first_row=first_row, first_bytes=first_bytes, picks=picks,
                      along=along, tokens=tokens, loop_mask=None, num_words=1, loop_ends=none, eos=none, final=False,
                      shared=None)
        arrays.update(changed)
        with dfa.resolving():
            return cwalk.walk_row(dfa, *arrays.values())

    mask, successors, fingerprint = walk()
    assert np.frombuffer(mask, np.uint32).tolist() == [1 << 5]
    assert fingerprint == lazy_kernels._mask_fingerprint(np.array([1 << 5], np.uint32))
    assert dfa.is_final(int(np.frombuffer(successors, np.int32)[0]))
    assert walk(shared=np.zeros(1, np.uint8))[0] == mask
    with pytest.raises(TypeError, match="14 arguments"):
        cwalk.walk_row(dfa, data)
    with pytest.raises(ValueError, match="mismatched"):
        walk(shared=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="mismatched"):
        walk(offsets=np.array([0, 1, 1], np.int32))
    with pytest.raises(TypeError, match="offsets: items of 4 bytes"):   # a plan's packed offsets are int32
        walk(offsets=np.array([0, 1], np.int64))
    with pytest.raises(ValueError, match="mismatched"):
        walk(first_row=first_row[:100])
    with pytest.raises(ValueError, match="mismatched"):
        walk(tokens=np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="tokens: items of 4 bytes"):
        walk(tokens=np.array([5], np.int64))
    with pytest.raises(ValueError, match="mismatched"):
        walk(loop_mask=np.zeros(2, np.uint32))
    with pytest.raises(IndexError, match="outside the data"):
        walk(offsets=np.array([0, 2], np.int32))
    with pytest.raises(TypeError, match="first_bytes: items of 1 bytes"):
        walk(first_bytes=np.array([ord("a")], np.int64))
    with pytest.raises(ValueError, match="mismatched"):
        walk(first_bytes=np.array([ord("a"), ord("a")], np.uint8))
    with pytest.raises(IndexError, match="outside the chain"):
        walk(picks=np.ones(1, bool), along=none)
    with pytest.raises(IndexError, match="outside the mask"):
        walk(tokens=np.array([40], np.int32))
    with pytest.raises(IndexError, match="outside the automaton"):
        walk(picks=np.ones(1, bool), along=np.array([1000], np.int64))
    with pytest.raises(TypeError, match="picks"):
        walk(picks=np.zeros(1, np.int64))


@pytest.mark.parametrize("dies", [0, 1, 2])
def test_chain_plans_of_every_end_are_the_numpy_plans(dies, monkeypatch):
    """``_cwalk.chain_plan`` for a JSON string's class (wide characters in
    it) is the numpy plan, array for array, whether nothing, the ASCII bytes
    (1) or every character (2) of the class dies after the chain, at every
    length from 1 to past the longest run; with 2 no token longer than the
    chain is walked, and the plan is a subset of the plan with 1."""
    tables = lazy_tables.vocabulary_tables(cached_vocabulary("qwen2.5"))
    key, runs, first, others = json_string_chain(tables)
    for length in (1, 2, 3, 5, 40, len(runs.full_offsets)):
        with _fresh_plans(tables):
            compiled = lazy_plans._chain_plan(tables, key, runs, length, dies, first, others)
        _numpy(monkeypatch)
        with _fresh_plans(tables):
            numpy = lazy_plans._chain_plan(tables, key, runs, length, dies, first, others)
            one = lazy_plans._chain_plan(tables, key, runs, length, 1, first, others)
        _compiled(monkeypatch)
        for field in ("tokens", "links", "first_bytes", "positions"):
            left, right = getattr(compiled, field), getattr(numpy, field)
            assert left.dtype == right.dtype and np.array_equal(left, right), (length, field)
        if dies == 2:
            longer = set(runs.full_by_chars[runs.full_offsets[min(length + 1, len(runs.full_offsets) - 1)]:].tolist())
            assert not longer & set(compiled.tokens.tolist()) and set(compiled.tokens.tolist()) <= set(one.tokens.tolist())
            assert length > 3 or len(compiled.tokens) < len(one.tokens) // 2  # the wide tokens were most of them


# --- a warm step: the mask copied, the token committed (copy_mask, advance_token) ---

def _outcome(call):
    """What a call gives: ("ok", its answer) or ("raised", the exception's type)."""
    try:
        return "ok", call()
    except Exception as exc:  # noqa: BLE001 - the two paths must raise the same errors
        return "raised", type(exc)


def test_warm_steps_are_the_python_steps(indexes, monkeypatch):
    """``advance`` and ``write_mask_into`` of a lazy index, with the
    compiled warm step and with the Python code it stands in for, give the
    same states, refusals, errors and buffers, from every state the
    instances visit: allowed tokens (EOS included), refused ones, ids out of
    range or of the wrong type, and buffers the compiled copy leaves to the
    general one."""
    vocab, found = indexes
    rng = np.random.default_rng(7)
    buffers = [lambda: np.zeros(vocab_words, np.int32), lambda: np.zeros((3, vocab_words), np.uint32),
               lambda: np.zeros((2, vocab_words + 2), np.int32), lambda: np.zeros(vocab_words, np.float32)]
    vocab_words = (vocab.size + 31) // 32
    steps = refusals = 0
    for index, states in found[:6]:
        for state in states:
            allowed = index.get_tokens(state)
            tokens = [int(t) for t in allowed[rng.integers(0, len(allowed), 40)]] + [
                int(t) for t in rng.integers(0, vocab.size, 20)] + list(vocab.eos_token_ids) + [
                -1, vocab.size, 1 << 70, np.int64(allowed[0]), True]
            for token in tokens:
                answers = []
                for module in (cwalk, None):
                    monkeypatch.setattr(lazy_index_module, "_cwalk", module)
                    answers.append(_outcome(lambda: index.advance(state, token)))
                assert answers[0] == answers[1], (state, token)
                steps += answers[0][0] == "ok"
                refusals += answers[0][0] == "raised"
            for make in buffers:
                for row in (None, 0, 1, -1, 5, np.int64(1)):
                    written = []
                    for module in (cwalk, None):
                        monkeypatch.setattr(lazy_index_module, "_cwalk", module)
                        out = make()
                        out[...] = 7
                        written.append((_outcome(lambda: index.write_mask_into(state, out, row)), out))
                    assert written[0][0] == written[1][0], (state, row)
                    assert np.array_equal(written[0][1], written[1][1]), (state, row)
    assert steps >= 2_000 and refusals >= 500, (steps, refusals)


def test_a_table_taken_before_it_grew_is_right_or_passed_over(indexes):
    """The compiled advance reads the table as last taken; one that lacks a
    state or a cell sends the step to the Python walk, which gives the same
    answer and takes the current table for the next."""
    vocab, found = indexes
    index, states = found[0]
    state = states[-1]
    tokens = index.get_tokens(state)[:50].tolist()
    expected = [index.advance(state, token) for token in tokens]
    index._warm_table = np.full((2, 256), -1, dtype=np.int32)  # not one cell known
    assert [index.advance(state, token) for token in tokens] == expected
    assert index._warm_table is index.byte_dfa.table


def test_copy_mask_writes_only_what_it_can_and_says_so():
    mask = np.arange(5, dtype=np.uint32) | np.uint32(1 << 31)
    one = np.zeros(5, np.int32)
    assert cwalk.copy_mask(mask, one, None) is True and np.array_equal(one.view(np.uint32), mask)
    batch = np.zeros((3, 5), np.uint32)
    assert cwalk.copy_mask(mask, batch, 2) is True
    assert np.array_equal(batch[2], mask) and not batch[:2].any()
    wide = np.full((2, 8), 7, np.int32)  # a model's vocabulary wider than the tokenizer's
    assert cwalk.copy_mask(mask, wide, 1) is True
    assert np.array_equal(wide[1].view(np.uint32), np.append(mask, np.zeros(3, np.uint32)))
    assert (wide[0] == 7).all()
    strided = np.zeros((3, 10), np.int32)[:, ::2]
    refused = [(np.zeros(5, np.float32), None), (np.zeros(5, np.int64), None), (np.zeros(4, np.int32), None),
               (np.zeros((2, 4), np.int32), 0), (np.zeros((), np.int32), None), (np.zeros((), np.int32), 0),
               (batch, None), (one, 0), (batch, 3), (batch, -1), (batch, np.int64(0)), (batch, True),
               (batch, 1 << 70), (strided, 0), ([0] * 5, None), (bytearray(20), None), (b"\0" * 20, None),
               (np.zeros((1, 1, 5), np.int32), 0)]
    readonly = np.zeros(5, np.int32)
    readonly.flags.writeable = False
    refused.append((readonly, None))
    for out, row in refused:
        before = np.array(out, copy=True) if isinstance(out, np.ndarray) else None
        assert cwalk.copy_mask(mask, out, row) is False, (out, row)
        if before is not None:
            assert np.array_equal(out, before)
    with pytest.raises(TypeError, match="4-byte words"):
        cwalk.copy_mask(np.zeros(5, np.int64), one, None)
    with pytest.raises(TypeError, match="copy_mask takes 3"):
        cwalk.copy_mask(mask, one)


def test_advance_token_reads_inside_its_buffers():
    """The walk reads the table only at rows it has and the mask and tokens
    at ids they have; anything else answers -1 (the Python walk's turn)."""
    table = np.zeros((3, 256), np.int32)
    table[1, ord("a")] = 2
    table[2, ord("b")] = 1
    table[2, ord("c")] = -1          # UNKNOWN
    table[2, ord("d")] = 3           # a state past the table's rows
    table[1, ord("e")] = 1 << 30
    tokens = (b"ab", b"a", None, b"ac", b"ad", b"e", b"", b"aba", b"eb")
    mask = np.array([0b101111011], np.uint32)  # every token but 2 (EOS: allowed in a final state) and 7
    assert cwalk.advance_token(mask, table, tokens, 1, 0) == 1
    assert cwalk.advance_token(mask, table, tokens, 1, 1) == 2
    assert cwalk.advance_token(mask, table, tokens, 1, 6) == 1       # no bytes: the same state
    for token in (2, 7):                                               # bits clear
        assert cwalk.advance_token(mask, table, tokens, 1, token) == -1
    mask[0] |= 0b10000100
    assert cwalk.advance_token(mask, table, tokens, 1, 2) == 1       # EOS keeps the state
    assert cwalk.advance_token(mask, table, tokens, 1, 7) == 2
    for token in (3, 4, 5, 8):                                         # UNKNOWN, past the rows, far past
        assert cwalk.advance_token(mask, table, tokens, 1, token) == -1
    for state in (3, 1 << 40, -1, -(1 << 40)):
        assert cwalk.advance_token(mask, table, tokens, state, 0) == -1
    for token in (9, 31, 32, 1 << 40, -1, 1 << 70, 1.0, "0"):          # outside tokens or mask, or no int
        assert cwalk.advance_token(mask, table, tokens, 1, token) == -1
    assert cwalk.advance_token(mask, table, list(tokens), 1, 0) == -1  # tokens not a tuple
    assert cwalk.advance_token(mask, table, ("ab",), 1, 0) == -1       # an item not bytes
    assert cwalk.advance_token(mask, table, tokens, 1 << 70, 0) == -1
    with pytest.raises(TypeError, match="4-byte words"):
        cwalk.advance_token(mask, table.astype(np.int64), tokens, 1, 0)
    with pytest.raises(TypeError, match="advance_token takes 5"):
        cwalk.advance_token(mask, table, tokens, 1)


def test_loop_from_is_the_closing_run_of_the_loop_set():
    """``_cwalk.loop_from`` gives, for each packed entry, where the run of
    the loop set's ASCII bytes that ends it begins (a byte of 128 or more is
    never one; 255 for 255 or more), and refuses offsets outside the data."""
    entries = [b"", b"abc", b'a"bc', b'ab"', b"\xc3\xa9ab", b"x" * 300 + b'"', b'"' + b"y" * 300]
    data = np.frombuffer(b"".join(entries), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(entry) for entry in entries])]).astype(np.int32)
    inside = [b for b in range(128) if b != ord('"')]  # a JSON string's loop set, less its escapes
    low = sum(1 << b for b in inside if b < 64)
    high = sum(1 << (b - 64) for b in inside if b >= 64)
    found = np.frombuffer(cwalk.loop_from(data, offsets, low, high), np.uint8)
    assert found.tolist() == [0, 0, 2, 3, 2, 255, 1]
    with pytest.raises(IndexError, match="outside the data"):
        cwalk.loop_from(data, np.array([0, len(data) + 1], np.int32), low, high)
    with pytest.raises(TypeError, match="offsets: items of 4 bytes"):
        cwalk.loop_from(data, offsets.astype(np.int64), low, high)


def test_free_key_rows_end_entries_in_the_loop_unwalked(monkeypatch):
    """A key's row in an object with declared properties and free keys is a
    loop row (the free key's string) whose entries mostly end in the loop's
    state after a declared name's prefix: ``walk_row`` given the plan's
    ``loop_from`` ends those with no byte read. The row is the walk's without
    it, and the numpy row, state for state."""
    vocab = cached_vocabulary("qwen2.5")
    tables = lazy_tables.vocabulary_tables(vocab)
    names = ("adjust_tracker_name", "app_id", "attribution_type", "campaign_name", "city", "click_time", "country")
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in names},
              "additionalProperties": {"type": "string"}}
    index = Index.from_schema(schema, vocab, lazy=True)
    assert isinstance(index, LazyIndex) and index._covered
    calls = []

    class Recording:
        def __getattr__(self, name):
            return getattr(cwalk, name)

        @staticmethod
        def walk_row(*args):
            found = cwalk.walk_row(*args)
            if len(args) == 15 and args[14] is not None:
                calls.append((args, found))
            return found

    monkeypatch.setattr(lazy_index_module, "_cwalk", Recording())
    # declared keys come in their order, free ones after them
    instance = {"app_id": "1", "campaign_name": "Christmas", "city": "Berlin", "country": "us", "cityscape": "x",
                "zone": "y"}
    guide, seen = Guide(index), []
    for token in vocab.encode(json.dumps(instance, separators=(",", ":"))):
        seen.append(guide.state)
        guide.write_mask_into(np.zeros((vocab.size + 31) // 32, np.int32))
        guide.advance(token)
    assert calls, "no free key's row was walked with loop_from"
    for args, found in calls:
        with args[0].resolving():
            assert cwalk.walk_row(*args[:14]) == found  # its cells resolved by then: the same walk, every byte read
    monkeypatch.undo()
    for state in dict.fromkeys(seen):
        _compiled(monkeypatch)
        key, successors, fingerprint = index._compiled_row(state)
        _numpy(monkeypatch)
        with _fresh_plans(tables):
            numpy_key, numpy_successors, numpy_fingerprint = index._numpy_row(state)
        assert key == numpy_key and fingerprint == numpy_fingerprint, state
        assert np.array_equal(successors, numpy_successors), state
