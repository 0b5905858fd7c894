"""A batch's masks in one call (tokendfa.fill_masks), the cold rows of lazy
indexes computed on threads, and the compiled walk running without the GIL."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from conftest import cached_vocabulary
from tokendfa import Guide, Index, fill_masks
from tokendfa.lazy import NATIVE_WALK

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "age": {"type": "integer"}}, "required": ["name", "age"]},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-f0-9]{8}$"}},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}}}},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "string", "minLength": 3, "maxLength": 40},
]
INSTANCES = [{"name": "Ada Lovelace", "age": 36}, ["deadbeef", "0123abcd"],
             {"when": "2024-02-29", "tags": ["red", "blue"]}, {"x": 1.5, "y": -2, "zeta": 1e3},
             "hello, world: é日"]


def token_paths(vocab) -> list[list[int]]:
    return [vocab.encode(json.dumps(x, separators=(",", ":"), ensure_ascii=False)) for x in INSTANCES]


def batch_steps(guides, paths, vocab, threads: int, rows=None) -> list[np.ndarray]:
    """Decode every path in lockstep with fill_masks; the bitmask of each step."""
    words = (vocab.size + 31) // 32
    seen = []
    for step in range(max(len(p) for p in paths) + 1):
        live = [g if step <= len(p) else None for g, p in zip(guides, paths)]
        bitmask = np.full((len(guides) + 2, words), -7, dtype=np.int32)  # rows fill_masks must not touch keep -7
        fill_masks(live, bitmask, rows=rows, threads=threads)
        seen.append(bitmask)
        for guide, path in zip(guides, paths):
            if step < len(path):
                guide.advance(path[step])
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 4])
def test_fill_masks_gives_each_guides_own_mask(threads):
    """Lazy indexes (cold: rows computed on threads) and a whole one, side by
    side: every row of the bitmask is what the guide alone writes, computed
    on fresh indexes one guide at a time; rows of finished guides (None) and
    rows nobody names stay as they were."""
    vocab = cached_vocabulary("qwen2.5")
    paths = token_paths(vocab)
    lazy = lambda: [Index.from_schema(s, vocab, lazy=i != 1) for i, s in enumerate(SCHEMAS)]  # noqa: E731
    rows = [len(SCHEMAS) + 1 - i for i in range(len(SCHEMAS))]  # a permutation, rows 1.. of a wider buffer
    batched = batch_steps([Guide(i) for i in lazy()], paths, vocab, threads, rows)
    serial = [Guide(i) for i in lazy()]
    words = (vocab.size + 31) // 32
    for step, bitmask in enumerate(batched):
        assert (bitmask[0] == -7).all()
        for guide, path, row in zip(serial, paths, rows):
            if step > len(path):
                assert (bitmask[row] == -7).all()
                continue
            expected = np.zeros(words, dtype=np.int32)
            guide.write_mask_into(expected)
            assert np.array_equal(bitmask[row], expected), (step, row)
            if step < len(path):
                guide.advance(path[step])


@pytest.mark.slow
def test_many_threads_on_one_lazy_index_give_the_serial_answers():
    """Eight threads decode the same instances through one cold lazy index
    (each starting at another instance, so they race for different new
    states) and see, step by step, the masks a fresh index gives serially."""
    vocab = cached_vocabulary("qwen2.5")
    paths = token_paths(vocab)
    schema = {"anyOf": SCHEMAS}

    def masks(index, order):
        seen = []
        for i in order:
            guide = Guide(index)
            for token in paths[i]:
                seen.append(guide.get_mask().tobytes())
                guide.advance(token)
            seen.append(guide.get_mask().tobytes())
        return seen

    orders = [[(n + k) % len(paths) for k in range(len(paths))] for n in range(8)]
    expected = [masks(Index.from_schema(schema, vocab), order) for order in orders]
    shared = Index.from_schema(schema, vocab)
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(orders))

    def run(n: int) -> None:
        try:
            start.wait()
            results[n] = masks(shared, orders[n])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(orders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for n in range(len(orders)):
        assert results[n] == expected[n]


def test_fill_masks_into_a_cpu_tensor_is_the_numpy_fill():
    """A CPU tensor is written through one numpy view of it: every row as
    the numpy buffer has it, rows wider than the vocabulary cleared past
    it, rows not named untouched; a tensor numpy cannot view is refused
    by each row as before."""
    torch = pytest.importorskip("torch")
    vocab = cached_vocabulary("toy")
    guides = [Guide(Index.from_regex(p, vocab)) for p in ("[0-9]+", "ab?c", "[a-c]{2,4}x?")]
    guides[1].advance(vocab.encode("a")[0])
    words = (vocab.size + 31) // 32
    for width in (words, words + 3):
        expected = np.full((4, width), -7, dtype=np.int32)
        fill_masks([guides[0], None, guides[1], guides[2]], expected)
        tensor = torch.full((4, width), -7, dtype=torch.int32)
        fill_masks([guides[0], None, guides[1], guides[2]], tensor)
        assert np.array_equal(tensor.numpy(), expected) and (expected[1] == -7).all()
        assert expected[0, :words].any() and not expected[0, words:].any()
    with pytest.raises(Exception) as raised:
        fill_masks(guides, torch.zeros((3, words), dtype=torch.bfloat16))
    with pytest.raises(type(raised.value)):
        guides[0].write_mask_into(torch.zeros((3, words), dtype=torch.bfloat16), 0)


def test_fill_masks_checks_its_rows():
    index = Index.from_regex("[0-9]+", cached_vocabulary("toy"))
    with pytest.raises(ValueError):
        fill_masks([Guide(index)], np.zeros((1, 1), dtype=np.int32), rows=[0, 1])


def test_fill_masks_rows_on_the_pool_keep_the_callers_limits():
    """A cold row computed on the pool's thread runs under the limits of the
    call (a context variable, per thread: the pool gets a copy of the
    caller's): an expensive row of the second index, which has no time
    limit of its own, stops at the caller's deadline."""
    import itertools

    from tokendfa import TimeLimitError, Vocabulary
    from tokendfa.analysis import limits

    # 131k tokens: the expensive row after "y" takes 0.17-0.27 s (on 16k
    # tokens it took 12-17 ms by 8ba0ab1, near enough the 10 ms deadline
    # to finish first when another test had run before in the process)
    tokens = [bytes([b]) for b in range(256)] + [bytes(t) for t in itertools.product(b"ab", repeat=17)]
    vocab = Vocabulary(tokens + [None], eos_token_ids=[len(tokens)], name="ab17")
    cheap = Index.from_regex("[0-9]+", vocab)
    expensive = Index.from_regex("x|y(a|b)*a(a|b){22}", vocab)
    guides = [Guide(cheap), Guide(expensive, expensive.advance(expensive.initial_state, ord("y")))]
    bitmask = np.zeros((2, (vocab.size + 31) // 32), dtype=np.int32)  # (both rows cold)
    started = time.perf_counter()
    with limits.limits(time_limit=0.01), pytest.raises(TimeLimitError):
        fill_masks(guides, bitmask, threads=2)
    assert time.perf_counter() - started < 0.51
    fill_masks(guides, bitmask, threads=2)  # with no limit it finishes
    assert bitmask[1].any()


class _Rows:
    """A stand-in for a lazy index in a batch's groups: its row waits for
    ``release`` (when given) and then records itself, or raises."""

    def __init__(self, name: str, done: list, *, took=None, release=None, error=None) -> None:
        self.name, self.done, self.took, self.release, self.error = name, done, took, release, error

    def get_mask(self, state: int) -> None:
        if self.took is not None:
            self.took.set()
        if self.release is not None:
            assert self.release.wait(5)
        if self.error is not None:
            raise self.error
        self.done.append(self.name)


@pytest.mark.parametrize("fails", ["pool", "caller"])
def test_the_calling_thread_waits_for_the_groups_the_pool_took(fails):
    """The calling thread returns (or raises) only once the groups a pool
    thread took are computed, raising a row's error from either thread; a
    pool thread that finds no group left is not waited for."""
    from tokendfa.runtime.batch import _Groups

    done: list[str] = []
    took, release = threading.Event(), threading.Event()
    pooled = _Rows("pooled", done, took=took, release=release,
                   error=ValueError("pool") if fails == "pool" else None)
    calling = _Rows("calling", done, error=ValueError("caller") if fails == "caller" else None)
    groups = _Groups([(pooled, [1]), (calling, [1])])
    pool_thread = threading.Thread(target=groups.run_pooled)
    pool_thread.start()
    assert took.wait(5)  # the pool thread holds the first group
    threading.Timer(0.05, release.set).start()
    with pytest.raises(ValueError, match=fails):
        groups.run_calling()
    assert release.is_set()  # it waited for the pool's group
    assert done == (["calling"] if fails == "pool" else ["pooled"])
    pool_thread.join(5)
    late = _Groups([])
    late.run_calling()  # nothing taken: returns at once
    late.run_pooled()  # a pool thread that comes late takes nothing


class _LoopingAutomaton:
    """What the compiled walk reads: a complete table where state 1 loops
    on every byte (no cell to resolve, so the walk never needs Python)."""

    def __init__(self) -> None:
        self.table = np.ones((2, 256), dtype=np.int32)
        self.table[0] = 0
        self.num_states = 2

    def step_held(self, state: int, byte: int) -> int:  # pragma: no cover - every cell is known
        raise AssertionError("no cell is unknown")


def _longest_pause_of_python_during(call) -> tuple[float, float]:
    """``(seconds call took, longest pause of another thread's Python loop
    meanwhile)``: the pause is the whole call when it holds the GIL, a
    switch interval or a scheduling delay at most when it lets go."""
    stamps: list[float] = []
    running = threading.Event()
    stop = threading.Event()

    def spin() -> None:
        running.set()
        while not stop.is_set():
            stamps.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    running.wait()
    time.sleep(0.01)
    started = time.perf_counter()
    call()
    finished = time.perf_counter()
    stop.set()
    spinner.join()
    inside = np.array([t for t in stamps if started <= t <= finished] + [started, finished])
    inside.sort()
    return finished - started, float(np.diff(inside).max())


@pytest.mark.skipif(not NATIVE_WALK, reason="the compiled walk is not built (or TOKENDFA_NATIVE=0)")
def test_the_compiled_walk_runs_without_the_gil():
    from tokendfa.lazy import kernels

    cwalk = kernels._cwalk
    data = np.full(32 << 20, ord("a"), dtype=np.uint8)  # one entry of 32 MB: ~0.1-0.3 s of walking
    offsets = np.array([0, len(data)], dtype=np.int32)  # a plan's packed offsets
    states = np.ones(1, dtype=np.int64)
    ended = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    automaton = _LoopingAutomaton()
    result = []
    took, pause = _longest_pause_of_python_during(
        lambda: result.append(cwalk.walk_packed(automaton, data, offsets, states, *ended)))
    assert result == [1] and ended[1][0] == 1
    assert pause < took / 2, (took, pause)
