"""The compiled row helpers (index/lazy/_cwalk.c) on malformed and random input.

Each entry point the lazy index calls for a cold row (``walk_span``,
``group_plan``, ``tail_pack``, ``row_runs``, ``loop_bits``, ``equal_bits``, ``chain_links``) and the compiled
Thompson construction's ASCII sets (analysis/_thompson.c) must refuse
malformed arrays with a Python exception (wrong item sizes or kinds, non-contiguous
views, arrays too short for the counts or offsets they claim, values out of
range) and never read or write out of bounds; on valid random input each
must give what its numpy twin (written here from the module's contract)
gives. The walks also keep a scratch per thread: several threads walking at
once, and a walk re-entered from its own ``step_held``, must give the
serial results.
"""

from __future__ import annotations

import os
import random
import threading

import numpy as np
import pytest

cwalk = pytest.importorskip("tokendfa.lazy._cwalk") if os.environ.get("TOKENDFA_NATIVE") != "0" else None
pytestmark = pytest.mark.skipif(cwalk is None, reason="TOKENDFA_NATIVE=0 turns the compiled code off")

from tokendfa.analysis.dfa import INITIAL  # noqa: E402
from tokendfa.analysis.lazydfa import LazyByteDFA  # noqa: E402
from tokendfa.lazy import index as lazy_index  # noqa: E402
from tokendfa.lazy import kernels as lazy_kernels  # noqa: E402
from tokendfa.lazy import plans as lazy_plans  # noqa: E402

CASES = 300
PATTERNS = ["ab", "(ab|b)*a", "[a-c]+", "a*b?c", "(abc)*d?", "[^a]*", "(a|bc|cd)+"]
TEXT_FIRST = np.array([b < 0x80 or 0xC2 <= b <= 0xF4 for b in range(256)])


# --- numpy twins -------------------------------------------------------------

def _walk_span_twin(dfa, data, offsets, ranges, state, tokens, loop_mask, num_words, loop_ends, eos, final):
    mask = np.zeros(num_words, np.uint32) if loop_mask is None else loop_mask.copy()
    ends = set(int(s) for s in loop_ends)
    for lo, hi in ranges:
        for j in range(lo, hi):
            at = state
            for byte in data[offsets[j]:offsets[j + 1]]:
                at = dfa.step(at, int(byte))
                if at == 0:
                    break
            if at != 0:
                mask[tokens[j] >> 5] |= np.uint32(1 << (tokens[j] & 31))
                ends.add(at)
    if final:
        for token in eos:
            mask[token >> 5] |= np.uint32(1 << (token & 31))
    return mask.tolist(), sorted(ends), lazy_kernels._mask_fingerprint(mask)


def _span_result(result):
    """A walk_span result (mask bytes, successors bytes, fingerprint) as
    its twin gives it."""
    mask, successors, fingerprint = result
    return np.frombuffer(mask, np.uint32).tolist(), np.frombuffer(successors, np.int32).tolist(), fingerprint


def _shared_twin(data, offsets):
    """common_prefixes: what each entry shares with the one before it, at most 255."""
    entries = [bytes(data[offsets[i]:offsets[i + 1]]) for i in range(len(offsets) - 1)]
    return [min(255, len(os.path.commonprefix(entries[i - 1:i + 1]))) if i else 0 for i in range(len(entries))]


def _group_plan_twin(by_first, first_offsets, grouped, grouped_offsets, walked, rest_tokens, rest_offsets,
                     rest_skips, rest_data, rest_data_offsets, rested, dead, grouped_shared, rest_shared):
    tokens, firsts, skipped, data, offsets, shared = [], [], [], b"", [0], []
    for b in walked:
        for j in range(first_offsets[b], first_offsets[b + 1]):
            shared.append(0 if j == first_offsets[b] else max(int(grouped_shared[j]) - 1, 0))
            data += bytes(grouped[grouped_offsets[j] + 1:grouped_offsets[j + 1]])
            tokens.append(int(by_first[j]))
            firsts.append(int(b))
            skipped.append(False)
            offsets.append(len(data))
    for b in rested:
        kept = None  # the last rest entry of the group kept: what one shares with it is the least since
        for j in range(rest_offsets[b], rest_offsets[b + 1]):
            spelled = bytes(rest_data[rest_data_offsets[j]:rest_data_offsets[j + 1]])
            if rest_skips[j] > 0 and spelled and spelled[0] < 128 and dead[spelled[0] >> 3] >> (spelled[0] & 7) & 1:
                continue  # dies at its first byte in the loop's state
            shared.append(0 if kept is None else min(int(v) for v in rest_shared[kept + 1:j + 1]))
            kept = j
            data += spelled
            tokens.append(int(rest_tokens[j]))
            firsts.append(int(b))
            skipped.append(bool(rest_skips[j] > 0))
            offsets.append(len(data))
    # each entry's shared prefix is one it shares with the one before it
    entries = [data[offsets[i]:offsets[i + 1]] for i in range(len(tokens))]
    assert all(entries[i][:n] == entries[i - 1][:n] for i, n in enumerate(shared) if n)
    return tokens, firsts, skipped, data, offsets, shared


def _loop_bits_twin(tail_mask, by_first, first_offsets, first):
    sizes = np.diff(first_offsets)
    text = np.flatnonzero(TEXT_FIRST)
    starting, others = text[first[text] != 0], text[first[text] == 0]
    keep = sizes[starting].sum() <= sizes[others].sum()
    side = np.zeros_like(tail_mask)
    for b in starting if keep else others:
        for token in by_first[first_offsets[b]:first_offsets[b + 1]]:
            side[token >> 5] |= np.uint32(1 << (int(token) & 31))
    return (side & tail_mask if keep else tail_mask & ~side).tobytes()


def _tail_rest(mask, by_first, first_offsets):
    """tail_split's rest and rest_offsets: by_first's tokens outside ``mask``, in its order."""
    inside = np.unpackbits(mask.view(np.uint8), bitorder="little")
    rest, rest_offsets = [], [0]
    for b in range(256):
        rest += [int(t) for t in by_first[first_offsets[b]:first_offsets[b + 1]] if not inside[t]]
        rest_offsets.append(len(rest))
    return np.array(rest, np.int64), np.array(rest_offsets, np.int64)


def _tail_pack_twin(by_first, grouped, grouped_offsets, rest, rest_skips):
    """tail_pack: each rest token's grouped bytes from max(skip, 1), their int32 offsets and shared prefixes."""
    place = {int(t): i for i, t in enumerate(by_first)}
    entries = [bytes(grouped[grouped_offsets[place[int(t)]] + max(int(skip), 1):grouped_offsets[place[int(t)] + 1]])
               for t, skip in zip(rest, rest_skips)]
    offsets = np.concatenate(([0], np.cumsum([len(e) for e in entries]))).astype(np.int32)
    data = np.frombuffer(b"".join(entries), np.uint8)
    return b"".join(entries), offsets.tolist(), _shared_twin(data, offsets)


def _row_runs_twin(row, first_offsets):
    live = np.flatnonzero(row != 0)
    ranges = []
    for b in live:
        if ranges and b - 1 in live:
            ranges[-1][1] = first_offsets[b + 1]
        else:
            ranges.append([first_offsets[b], first_offsets[b + 1]])
    return live.astype(np.int64).tobytes(), np.array(ranges, np.int64).reshape(-1, 2).tobytes()


def _equal_bits_twin(cells, value):
    bits = np.packbits(cells[:128] == value, bitorder="little").view(np.uint64)
    return int(bits[0]), int(bits[1])


# --- random valid input -------------------------------------------------------

def _random_groups(rng: random.Random):
    """by_first_byte, first_offsets and the grouped spellings (each token's
    bytes with its first byte, grouped by it) of a random vocabulary."""
    num_tokens = rng.randrange(0, 60)
    spellings = [bytes(rng.choice(b"abcd\x00\xc3\xff") for _ in range(rng.randrange(1, 5)))
                 for _ in range(num_tokens)]
    order = sorted(range(num_tokens), key=lambda t: spellings[t][0])
    by_first = np.array(order, np.int64)
    counts = np.bincount([spellings[t][0] for t in order], minlength=256) if order else np.zeros(256, np.int64)
    first_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    grouped = np.frombuffer(b"".join(spellings[t] for t in order), np.uint8)
    grouped_offsets = np.concatenate(([0], np.cumsum([len(spellings[t]) for t in order]))).astype(np.int64)
    return spellings, by_first, first_offsets, grouped, grouped_offsets


def test_walk_span_is_its_twin_on_random_input():
    rng = random.Random(2025)
    dfas = {pattern: LazyByteDFA(pattern) for pattern in PATTERNS}
    for case in range(CASES):
        dfa = dfas[rng.choice(PATTERNS)]
        spellings = [bytes(rng.choice(b"abcd") for _ in range(rng.randrange(0, 5)))
                     for _ in range(rng.randrange(0, 40))]
        if rng.random() < .7:
            spellings.sort()  # as the vocabulary's grouped spellings: shared prefixes walked once
        data = np.frombuffer(b"".join(spellings), np.uint8)
        offsets = np.concatenate(([0], np.cumsum([len(s) for s in spellings]))).astype(np.int64)
        shared = np.empty(len(spellings), np.uint8)
        cwalk.common_prefixes(data, offsets, shared)
        assert shared.tolist() == [len(os.path.commonprefix(spellings[max(j - 1, 0):j + 1])) if j else 0
                                   for j in range(len(spellings))]
        narrow = np.empty(len(spellings), np.uint8)  # a packed plan's int32 offsets
        cwalk.common_prefixes(data, offsets.astype(np.int32), narrow)
        assert np.array_equal(narrow, shared)
        num_words = rng.randrange(1, 4)
        tokens = np.array([rng.randrange(num_words * 32) for _ in spellings], np.int64)
        cuts = sorted(rng.randrange(len(spellings) + 1) for _ in range(2 * rng.randrange(0, 4)))
        ranges = np.array(cuts, np.int64).reshape(-1, 2)
        state = INITIAL
        for byte in rng.choice([b"", b"a", b"ab", b"b", b"abc"]):
            following = dfa.step(state, byte)
            state = following if following else state
        loop_mask = np.array([rng.getrandbits(32) for _ in range(num_words)], np.uint32) if rng.random() < .3 else None
        loop_ends = np.array([rng.randrange(1, 4) for _ in range(rng.randrange(0, 3))], np.int64)
        eos = np.array([rng.randrange(num_words * 32) for _ in range(rng.randrange(0, 2))], np.int64)
        final = rng.random() < .5
        args = (data, offsets, ranges, state, tokens, loop_mask, num_words, loop_ends, eos, final)
        expected = _walk_span_twin(dfa, *args)
        with dfa.resolving():
            result = _span_result(cwalk.walk_span(dfa, *args, shared if rng.random() < .8 else None))
        assert result == expected, case


def test_group_plan_is_its_twin_on_random_input():
    rng = random.Random(29)
    for case in range(CASES):
        spellings, by_first, first_offsets, grouped, grouped_offsets = _random_groups(rng)
        bytes_used = sorted({s[0] for s in spellings}) or [0]
        walked = np.array(sorted(rng.sample(range(256), rng.randrange(0, 4)) + bytes_used[:rng.randrange(3)]),
                          np.int64)
        num_rest = rng.randrange(0, 20)
        rest_firsts = sorted(rng.choice(b"ab\xc3") for _ in range(num_rest))
        rest_tokens = np.array([rng.randrange(100) for _ in range(num_rest)], np.int64)
        rest_offsets = np.concatenate(([0], np.cumsum(np.bincount(rest_firsts, minlength=256)))).astype(np.int64) \
            if num_rest else np.zeros(257, np.int64)
        rest_skips = np.array([rng.randrange(-1, 4) for _ in range(num_rest)], np.int16)
        rest_spellings = [bytes(rng.choice(b"xyz") for _ in range(rng.randrange(0, 3))) for _ in range(num_rest)]
        rest_data = np.frombuffer(b"".join(rest_spellings), np.uint8)
        rest_data_offsets = np.concatenate(([0], np.cumsum([len(s) for s in rest_spellings]))).astype(np.int32)
        rested = np.array(sorted(rng.sample(b"abc\xc3", rng.randrange(0, 4))), np.int64)
        dead = np.zeros(16, np.uint8)
        for byte in rng.sample(b"xyz", rng.randrange(0, 4)):
            dead[byte >> 3] |= 1 << (byte & 7)
        args = (by_first, first_offsets, grouped, grouped_offsets, walked, rest_tokens, rest_offsets, rest_skips,
                rest_data, rest_data_offsets, rested, dead, np.array(_shared_twin(grouped, grouped_offsets), np.uint8),
                np.array(_shared_twin(rest_data, rest_data_offsets), np.uint8))
        parts = cwalk.group_plan(*args)
        got = tuple(np.frombuffer(part, dtype).tolist() for part, dtype in zip(parts, (np.int32, np.uint8, bool)))
        got += (parts[3], np.frombuffer(parts[4], np.int32).tolist(), list(parts[5]))
        assert got == _group_plan_twin(*args), case


def test_tail_pack_is_its_twin_on_random_input():
    rng = random.Random(37)
    for case in range(CASES):
        spellings, by_first, first_offsets, grouped, grouped_offsets = _random_groups(rng)
        if rng.random() < .5:  # as the vocabulary's: by spelling, so neighbours share prefixes
            order = sorted(range(len(by_first)), key=lambda i: spellings[by_first[i]])
            by_first = by_first[order] if len(order) else by_first
            grouped = np.frombuffer(b"".join(spellings[t] for t in by_first), np.uint8)
            grouped_offsets = np.concatenate(([0], np.cumsum([len(spellings[t]) for t in by_first]))).astype(np.int64)
        num_words = max(1, (len(spellings) + 31) // 32) + rng.randrange(2)
        mask = np.array([rng.getrandbits(32) & rng.getrandbits(32) for _ in range(num_words)], np.uint32)
        rest, rest_offsets = _tail_rest(mask, by_first, first_offsets)
        rest_skips = np.array([rng.randrange(-1, len(spellings[t]) + 1) for t in rest], np.int16)
        data = np.empty(len(grouped) + rng.randrange(20), np.uint8)
        data_offsets, shared = np.empty(len(rest) + 1, np.int32), np.empty(len(rest), np.uint8)
        used = cwalk.tail_pack(mask, by_first, first_offsets, grouped, grouped_offsets, rest, rest_offsets,
                               rest_skips, data, data_offsets, shared)
        assert (bytes(data[:used]), data_offsets.tolist(), shared.tolist()) == \
            _tail_pack_twin(by_first, grouped, grouped_offsets, rest, rest_skips), case


def test_loop_bits_row_runs_and_equal_bits_are_their_twins_on_random_input():
    rng = random.Random(31)
    for case in range(CASES):
        _, by_first, first_offsets, _, _ = _random_groups(rng)
        num_words = max(2, (len(by_first) + 31) // 32)
        tail_mask = np.array([rng.getrandbits(32) for _ in range(num_words)], np.uint32)
        first = np.array([rng.random() < rng.choice([.05, .5, .95]) for _ in range(256)]).view(np.uint8)
        assert cwalk.loop_bits(tail_mask, by_first, first_offsets, first) == \
            _loop_bits_twin(tail_mask, by_first, first_offsets, first), case
        row = np.array([rng.choice([0, 0, 1, 2, 7]) for _ in range(256)], np.int32)
        assert cwalk.row_runs(row, first_offsets) == _row_runs_twin(row, first_offsets), case
        cells = np.array([rng.choice([-1, 0, 3, 2**31 - 1]) for _ in range(rng.choice([128, 256]))], np.int32)
        value = rng.choice([-1, 0, 3, 2**31 - 1, 2**40])
        assert cwalk.equal_bits(cells, value) == _equal_bits_twin(cells, value), case


def _links(values) -> np.ndarray:
    return np.array(values, np.int64)


def _chain(chain: bytes, end: int, ends: bytes) -> tuple[list[int], int, list[int]]:
    return np.frombuffer(chain, np.int64).tolist(), end, np.frombuffer(ends, np.int64).tolist()


def test_chain_links_reads_chains_as_its_contract_says():
    # links: 1 -> 2 -> 3 -> 3 (loops), 4 -> DEAD, 5 -> _NO_LINK, 6 unset, 7 -> 4, 8 -> 9 -> 8 (a cycle)
    links = _links([-3, 2, 3, 3, 0, -2, -3, 4, 9, 8])
    full, dies, stops, missing = (lazy_index._CHAIN_FULL, lazy_index._CHAIN_DIES, lazy_index._CHAIN_STOPS,
                                  lazy_index._CHAIN_MISSING)
    for reader in (cwalk.chain_links, lazy_index._read_chain):
        assert _chain(*reader(links, 0, 1, 6)) == ([0, 1, 2, 3, 3, 3, 3], full, [1, 2, 3])
        assert _chain(*reader(links, 0, 1, 2)) == ([0, 1, 2], full, [1, 2])
        assert _chain(*reader(links, 0, 1, 1)) == ([0, 1], full, [1])
        assert _chain(*reader(links, 3, 7, 5)) == ([3, 7, 4], dies, [4, 7])
        assert _chain(*reader(links, 3, 5, 5)) == ([3, 5], stops, [5])
        assert _chain(*reader(links, 1, 6, 5)) == ([1, 6], missing, [])
        assert _chain(*reader(links, 1, 40, 5)) == ([1, 40], missing, [])  # past the array: not followed yet
        assert _chain(*reader(links, 0, 8, 4)) == ([0, 8, 9, 8, 9], full, [8, 9])


def test_chain_links_is_its_twin_on_random_input():
    rng = random.Random(30)
    for case in range(CASES * 3):
        size = rng.randrange(1, 40)
        values = [rng.choice([0, -2, -3, rng.randrange(1, size + 4), rng.randrange(1, size + 4)])
                  for _ in range(size)]
        if rng.random() < .3:
            at = rng.randrange(size)
            values[at] = at  # a loop
        links = _links(values)
        args = (links, rng.randrange(0, size + 2), rng.randrange(0, size + 4), rng.choice([1, 2, 5, 40, 128]))
        assert cwalk.chain_links(*args) == lazy_index._read_chain(*args), case


def test_chain_links_refuses_malformed_input():
    links = _links([-3, 2, 3, 0])
    assert _chain(*cwalk.chain_links(links, 0, 1, 8))[1] == lazy_index._CHAIN_DIES
    for args, error in [((_strided(links), 0, 1, 8), ValueError), ((links.astype(np.int32), 0, 1, 8), TypeError),
                        ((links.tolist(), 0, 1, 8), TypeError), ((links, 0, 1), TypeError),
                        ((links, -1, 1, 8), ValueError), ((links, 0, -1, 8), ValueError),
                        ((links, 0, 1, 0), ValueError), ((links, 0, 1, 1 << 21), ValueError),
                        ((links, 0, 1, 2**70), OverflowError), ((links, 0, "1", 8), TypeError),
                        ((_links([-3, -1]), 0, 1, 8), ValueError), ((_links([-3, -7]), 0, 1, 8), ValueError),
                        ((_links([-3, 2, -(2**62)]), 0, 1, 8), ValueError)]:
        with pytest.raises(error):
            cwalk.chain_links(*args)
        if error is ValueError and args[0].flags.c_contiguous:  # the values the reference refuses too
            with pytest.raises(ValueError):
                lazy_index._read_chain(*args)
    # an empty array: every state not followed yet
    assert _chain(*cwalk.chain_links(np.zeros(0, np.int64), 3, 5, 8)) == ([3, 5], lazy_index._CHAIN_MISSING, [])


# --- malformed input ------------------------------------------------------------

def _span_args(dfa):
    # "ab", "b", "ab", "ba": tokens 5-8
    return dict(data=np.frombuffer(b"abbabba", np.uint8), offsets=np.array([0, 2, 3, 5, 7], np.int64),
                ranges=np.array([[0, 4]], np.int64), state=INITIAL, tokens=np.array([5, 6, 7, 8], np.int64),
                loop_mask=None, num_words=1, loop_ends=np.zeros(0, np.int64), eos=np.zeros(0, np.int64), final=False,
                shared=None)


def _strided(array):
    """The same items, not contiguous."""
    doubled = np.repeat(array.reshape(-1), 2).reshape(-1)
    return doubled[::2].reshape(array.shape) if array.size else np.zeros(4, array.dtype)[::2]


@pytest.mark.parametrize("name", ["data", "offsets", "ranges", "tokens", "loop_mask", "loop_ends", "eos"])
def test_walk_span_refuses_views_and_item_sizes(name):
    dfa = LazyByteDFA("ab")
    args = _span_args(dfa)
    if name == "loop_mask":
        args[name], args["num_words"] = np.zeros(2, np.uint32), 2  # one item is contiguous however strided
    for bad, error in ((_strided(args[name]), ValueError), (args[name].astype(np.int16), TypeError),
                       ("not an array", TypeError), (None, TypeError)):
        if name == "loop_mask" and bad is None:
            continue  # None is no loop mask
        with dfa.resolving(), pytest.raises(error):
            cwalk.walk_span(dfa, *{**args, name: bad}.values())


@pytest.mark.parametrize("changed, error", [
    (dict(state=-1), IndexError), (dict(state=2**31), IndexError), (dict(state=2**40), IndexError),
    (dict(state=2**70), OverflowError), (dict(state="a"), TypeError),
    (dict(num_words=-1), ValueError), (dict(num_words=2**62), ValueError), (dict(num_words=2**70), OverflowError),
    (dict(num_words=0), IndexError),  # every walked token outside an empty mask
    (dict(ranges=np.array([[-1, 2]], np.int64)), IndexError),
    (dict(ranges=np.array([[0, 2**62]], np.int64)), IndexError),
    (dict(ranges=np.array([[0, 2], [1, 3]], np.int64)), IndexError),  # overlapping
    (dict(offsets=np.array([0, 2, 3, 5, 2**62], np.int64)), IndexError),
    (dict(offsets=np.array([-8, 2, 3, 5, 7], np.int64)), IndexError),
    (dict(offsets=np.zeros(0, np.int64)), ValueError),
    (dict(data=np.zeros(0, np.uint8)), IndexError),
    (dict(tokens=np.array([5, 6, -1, 8], np.int64)), IndexError),
    (dict(tokens=np.array([5, 6, 2**62, 8], np.int64)), IndexError),
    (dict(loop_ends=np.array([-1], np.int64)), IndexError),
    (dict(loop_ends=np.array([2**31], np.int64)), IndexError),
    (dict(eos=np.array([32], np.int64), final=True), IndexError),
    (dict(eos=np.array([-1], np.int64), final=True), IndexError),
])
def test_walk_span_refuses_values_out_of_range(changed, error):
    dfa = LazyByteDFA("ab")
    with dfa.resolving(), pytest.raises(error):
        cwalk.walk_span(dfa, *{**_span_args(dfa), **changed}.values())


def test_walk_span_of_nothing():
    dfa = LazyByteDFA("ab")
    args = {**_span_args(dfa), "data": np.zeros(0, np.uint8), "offsets": np.zeros(1, np.int64),
            "tokens": np.zeros(0, np.int64), "ranges": np.zeros((0, 2), np.int64), "state": 2**40}
    with dfa.resolving():
        nothing = (b"\0" * 4, b"", lazy_kernels._mask_fingerprint(np.zeros(1, np.uint32)))
        assert cwalk.walk_span(dfa, *args.values()) == nothing
        # an empty range of a long one is nothing either (no state is read)
        args["ranges"] = np.array([[0, 0]], np.int64)
        assert cwalk.walk_span(dfa, *args.values()) == nothing


def _plan_args():
    by_first = np.array([0, 1], np.int64)
    first_offsets = np.zeros(257, np.int64)
    first_offsets[ord("a") + 1:] = 2
    rest_offsets = np.zeros(257, np.int64)
    rest_offsets[ord("b") + 1:] = 1
    return dict(by_first_byte=by_first, first_offsets=first_offsets, grouped=np.frombuffer(b"abac", np.uint8),
                grouped_offsets=np.array([0, 2, 4], np.int64), walked=np.array([ord("a")], np.int64),
                rest_tokens=np.array([7], np.int64), rest_offsets=rest_offsets, rest_skips=np.array([2], np.int16),
                rest_data=np.frombuffer(b"z", np.uint8), rest_data_offsets=np.array([0, 1], np.int32),
                rested=np.array([ord("b")], np.int64), dead=np.zeros(16, np.uint8),
                grouped_shared=np.array([0, 1], np.uint8), rest_shared=np.zeros(1, np.uint8))


@pytest.mark.parametrize("name", list(_plan_args()))
def test_group_plan_refuses_views_and_item_sizes(name):
    args = _plan_args()
    assert cwalk.group_plan(*args.values())[3] == b"bcz"
    wrong_width = np.int64 if args[name].dtype == np.int32 else np.int32
    for bad, error in ((_strided(args[name]), ValueError), (args[name].astype(wrong_width), TypeError),
                       (None, TypeError), (3, TypeError)):
        if error is ValueError and args[name].size < 2:
            continue  # one item is contiguous however strided
        with pytest.raises(error):
            cwalk.group_plan(*{**args, name: bad}.values())


@pytest.mark.parametrize("changed, error", [
    (dict(walked=np.array([2**62], np.int64)), IndexError),
    (dict(rested=np.array([-2**62], np.int64)), IndexError),
    (dict(grouped_offsets=np.array([0, 2, 2**62], np.int64)), IndexError),
    (dict(grouped_offsets=np.array([-1, 2, 4], np.int64)), IndexError),
    (dict(grouped_offsets=np.array([0, 0, 4], np.int64)), IndexError),  # a spelled token has a first byte
    (dict(grouped=np.zeros(0, np.uint8)), IndexError),
    (dict(by_first_byte=np.zeros(0, np.int64)), ValueError),
    (dict(rest_data_offsets=np.array([0, 2**31 - 1], np.int32)), IndexError),
    (dict(rest_data_offsets=np.array([-1, 0], np.int32)), IndexError),
    (dict(rest_tokens=np.zeros(0, np.int64)), ValueError),
    (dict(rest_skips=np.zeros(0, np.int16)), ValueError),
    (dict(first_offsets=np.full(257, 2**62, np.int64)), IndexError),
    (dict(rest_offsets=np.full(257, -1, np.int64)), IndexError),
    (dict(dead=np.zeros(17, np.uint8)), ValueError),
])
def test_group_plan_refuses_values_out_of_range(changed, error):
    with pytest.raises(error):
        cwalk.group_plan(*{**_plan_args(), **changed}.values())


def test_group_plan_of_nothing():
    args = {**_plan_args(), "walked": np.zeros(0, np.int64), "rested": np.zeros(0, np.int64)}
    assert cwalk.group_plan(*args.values()) == (b"", b"", b"", b"", b"\0" * 4, b"")  # one int32 offset


def test_tail_pack_refuses_malformed_input():
    # "ab" (token 0), "ac" (1), "b" (2), "bcd" (3); the mask holds token 2
    spellings = [b"ab", b"ac", b"b", b"bcd"]
    by_first, first_offsets = np.arange(4, dtype=np.int64), np.zeros(257, np.int64)
    first_offsets[ord("a") + 1:] = 2
    first_offsets[ord("b") + 1:] = 4
    grouped = np.frombuffer(b"".join(spellings), np.uint8)
    grouped_offsets = np.array([0, 2, 4, 5, 8], np.int64)
    mask = np.array([1 << 2], np.uint32)
    rest, rest_offsets = _tail_rest(mask, by_first, first_offsets)
    skips = np.array([0, 1, 2], np.int16)
    args = dict(mask=mask, by_first=by_first, first_offsets=first_offsets, grouped=grouped,
                grouped_offsets=grouped_offsets, rest=rest, rest_offsets=rest_offsets, skips=skips,
                data=np.zeros(8, np.uint8), data_offsets=np.zeros(4, np.int32), shared=np.zeros(3, np.uint8))

    def pack(**changed):
        return cwalk.tail_pack(*{**args, **changed}.values())

    assert pack() == 3 and bytes(args["data"][:3]) == b"bcd" and args["data_offsets"].tolist() == [0, 1, 2, 3]
    assert args["shared"].tolist() == [0, 0, 0]
    for changed, error in [(dict(rest=rest[::-1].copy()), ValueError),               # not by_first's order
                           (dict(rest=np.array([0, 1, 2], np.int64)), ValueError),   # token 2 is in the mask
                           (dict(mask=np.zeros(1, np.uint32)), ValueError),          # token 2 is not in the rest
                           (dict(mask=np.zeros(0, np.uint32)), ValueError),
                           (dict(skips=np.array([0, 3, 0], np.int16)), ValueError),  # past "ac"'s end
                           (dict(data=np.zeros(2, np.uint8)), ValueError),
                           (dict(data=np.zeros(8, np.int8)), TypeError),
                           (dict(skips=skips.astype(np.int32)), TypeError),
                           (dict(data_offsets=np.zeros(3, np.int32)), ValueError),
                           (dict(shared=np.zeros(2, np.uint8)), ValueError),
                           (dict(grouped_offsets=grouped_offsets[:4]), ValueError),
                           (dict(grouped_offsets=np.array([0, 2, 4, 5, 9], np.int64)), ValueError),
                           (dict(grouped_offsets=np.array([0, 3, 2, 5, 8], np.int64)), ValueError),
                           (dict(by_first=np.array([0, 1, 2, 99], np.int64)), ValueError),
                           (dict(by_first=np.array([0, 1, 2, -1], np.int64)), ValueError),
                           (dict(first_offsets=np.full(257, 5, np.int64)), ValueError),
                           (dict(rest_offsets=np.full(257, 3, np.int64)), ValueError),
                           (dict(rest_offsets=rest_offsets[:256]), ValueError),
                           (dict(by_first=_strided(by_first)), ValueError)]:
        with pytest.raises(error):
            pack(**changed)
    with pytest.raises(TypeError, match="11 arguments"):
        cwalk.tail_pack(mask)


def test_loop_bits_row_runs_and_equal_bits_refuse_malformed_input():
    # "a" starts tokens 0-1, "b" tokens 2-4: first = {"a"} reads the "a" side (the fewer tokens)
    by_first, first_offsets = np.arange(5, dtype=np.int64), np.zeros(257, np.int64)
    first_offsets[ord("a") + 1:] = 2
    first_offsets[ord("b") + 1:] = 5
    tail, first = np.full(2, 3, np.uint32), np.zeros(256, np.uint8)
    first[ord("a")] = 1
    assert cwalk.loop_bits(tail, by_first, first_offsets, first) == np.array([3, 0], np.uint32).tobytes()
    for args, error in [((_strided(tail), by_first, first_offsets, first), ValueError),
                        ((tail, _strided(by_first), first_offsets, first), ValueError),
                        ((tail, by_first, _strided(first_offsets), first), ValueError),
                        ((tail, by_first, first_offsets, _strided(first)), ValueError),
                        ((tail.view(np.uint16), by_first, first_offsets, first), TypeError),
                        ((tail, by_first.view(np.int32), first_offsets, first), TypeError),
                        ((tail, by_first, first_offsets, first.astype(np.int16)), TypeError),
                        ((tail, by_first, first_offsets[:-1], first), ValueError),
                        ((tail, by_first, first_offsets, first[:-1]), ValueError),
                        ((tail, by_first[:4], first_offsets, first), IndexError),
                        ((tail, by_first, np.full(257, -1, np.int64), first), IndexError),
                        ((tail, by_first, np.full(257, 2**62, np.int64), first), IndexError),
                        ((tail, np.array([0, 2**62, 2, 3, 4], np.int64), first_offsets, first), IndexError),
                        ((tail, np.array([-1, 0, 2, 3, 4], np.int64), first_offsets, first), IndexError),
                        ((np.zeros(0, np.uint32), by_first, first_offsets, first), IndexError)]:
        with pytest.raises(error):
            cwalk.loop_bits(*args)
    row = np.ones(256, np.int32)
    assert cwalk.row_runs(row, first_offsets)[1] == np.array([0, 5], np.int64).tobytes()
    for args, error in [((row[:255], first_offsets), ValueError), ((row, first_offsets[:256]), ValueError),
                        ((_strided(row), first_offsets), ValueError), ((row, _strided(first_offsets)), ValueError),
                        ((row.astype(np.int64), first_offsets), TypeError), ((row, None), TypeError),
                        ((np.zeros(0, np.int32), first_offsets), ValueError)]:
        with pytest.raises(error):
            cwalk.row_runs(*args)
    alternating = np.array([b % 2 for b in range(256)], np.int32)  # the most runs a row has: 128
    live, ranges = cwalk.row_runs(alternating, np.arange(257, dtype=np.int64))
    assert len(live) == 128 * 8 and len(ranges) == 128 * 16
    cells = np.zeros(128, np.int32)
    for args, error in [((cells[:127], 0), ValueError), ((_strided(cells), 0), ValueError),
                        ((cells.astype(np.int64), 0), TypeError), ((cells, 2**70), OverflowError),
                        ((cells, "0"), TypeError), ((cells,), TypeError), ((np.zeros(0, np.int32), 0), ValueError)]:
        with pytest.raises(error):
            cwalk.equal_bits(*args)


# --- item kinds ---------------------------------------------------------------------

def _of_kind(array, kind):
    """The same bytes as ``array`` read as items of another kind of the same
    size (None: the kind has no such item size, or ``array`` is of it already)."""
    dtype = array.dtype
    other = {
        "float": {8: np.float64, 4: np.float32, 2: np.float16},
        "complex": {8: np.complex64},
        "signedness": {(k, n): np.dtype(f"{'iu'[k == 'i']}{n}") for k in "iu" for n in (1, 2, 4, 8)},
        "byte order": {n: dtype.newbyteorder() for n in (2, 4, 8)},
        "bool": {1: np.bool_},
    }[kind].get((dtype.kind, dtype.itemsize) if kind == "signedness" else dtype.itemsize)
    return None if other is None or np.dtype(other) == dtype else array.view(other)


def _kinds_calls(dfa):
    """Entry points with valid arguments, one of each expected kind: signed
    (int16/int32/int64), unsigned (uint8 data, a uint32 mask, written to by
    set_bits), and picks (bool or int32)."""
    first_offsets = np.zeros(257, np.int64)
    first_offsets[ord("a") + 1:] = 2
    first = np.zeros(256, np.uint8)
    first[ord("a")] = 1
    row = np.zeros(256, np.int32)
    row[ord("a")] = 1
    def starts(picks):
        return dict(first_row=row, first_bytes=np.frombuffer(b"ab", np.uint8), picks=picks,
                    along=np.array([1], np.int64), out=np.zeros(2, np.int64))

    return [
        (lambda *args: cwalk.walk_span(dfa, *args), {**_span_args(dfa), "loop_mask": np.zeros(1, np.uint32)}),
        (cwalk.group_plan, _plan_args()),
        (cwalk.loop_bits, dict(tail_mask=np.full(2, 3, np.uint32), by_first_byte=np.arange(5, dtype=np.int64),
                               first_offsets=first_offsets, first=first)),
        (cwalk.row_runs, dict(first_row=row, first_offsets=first_offsets)),
        (cwalk.set_bits, dict(mask=np.zeros(2, np.uint32), tokens=np.array([3, 40], np.int64))),
        (cwalk.start_states, starts(np.array([0, -1], np.int32))),
        (cwalk.start_states, starts(np.array([True, False]))),
    ]


@pytest.mark.parametrize("kind", ["float", "complex", "signedness", "byte order", "bool"])
def test_arrays_of_another_kind_are_refused(kind):
    """An array whose items have the expected size but another kind (the
    same bytes viewed as float, complex, the other signedness, the other byte
    order, bool where uint8 is read) is refused with a TypeError naming the
    argument: before take() read the format, only the item size was checked,
    and each of these calls read the bytes as the integers expected."""
    dfa = LazyByteDFA("ab")
    refused = []
    for call, args in _kinds_calls(dfa):
        with dfa.resolving():
            call(*args.values())  # valid as given
        for name, array in args.items():
            bad = _of_kind(array, kind) if isinstance(array, np.ndarray) else None
            if bad is None or (name == "picks" and bad.dtype == np.uint8):
                continue
            with dfa.resolving(), pytest.raises(TypeError, match=f"{name}: |picks of"):
                call(*{**args, name: bad}.values())
            refused.append(name)
    assert len(refused) == {"float": 29, "complex": 20, "signedness": 38, "byte order": 29, "bool": 9}[kind]


def test_flags_and_picks_take_bool_or_uint8_or_int32():
    """What stays accepted: a plan's skipped flags as bool or uint8 (the same
    start states), links as int32."""
    dfa = LazyByteDFA("ab")
    *_, (call, args) = _kinds_calls(dfa)
    for picks in (np.array([True, False]), np.array([1, 0], np.uint8), np.array([0, -1], np.int32)):
        out = np.zeros(2, np.int64)
        call(*{**args, "picks": picks, "out": out}.values())
        assert out.tolist() == [1, 0]  # along[0], then first_row[b"b"]


# --- threads and re-entry ---------------------------------------------------------

def _long_span(seed: int):
    """The pattern of a walk_span call of several thousand tokens, its
    arguments and its twin's result (the twin resolves the cells of its own
    automaton: a fresh one for the call waits on unknown cells)."""
    rng = random.Random(seed)
    pattern = rng.choice(PATTERNS)
    dfa = LazyByteDFA(pattern)
    spellings = sorted(bytes(rng.choice(b"abcd") for _ in range(rng.randrange(1, 6))) for _ in range(6000))
    data = np.frombuffer(b"".join(spellings), np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in spellings]))).astype(np.int64)
    shared = np.empty(6000, np.uint8)
    cwalk.common_prefixes(data, offsets, shared)
    args = (data, offsets, np.array([[0, 2500], [2600, 6000]], np.int64), INITIAL,
            np.arange(6000, dtype=np.int64), None, 6000 // 32 + 1, np.zeros(0, np.int64), np.zeros(0, np.int64), False)
    return pattern, args + (shared,), _walk_span_twin(dfa, *args)


def test_walks_on_several_threads_keep_their_own_scratch():
    calls = [_long_span(seed) for seed in range(4)]
    failures = []

    def work(pattern, args, expected):
        for _ in range(5):
            dfa = LazyByteDFA(pattern)
            with dfa.resolving():
                result = _span_result(cwalk.walk_span(dfa, *args))
            if result != expected:
                failures.append(args)

    threads = [threading.Thread(target=work, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


class _Reentering:
    """An automaton (table, step_held, num_states) whose cells are resolved by
    an inner walk_span on the same thread, as a step_held that walks would:
    the inner walk must not take the outer one's scratch."""

    def __init__(self):
        pattern, self.inner_args, self.expected_inner = _long_span(7)
        self.inner_dfa = lambda: LazyByteDFA(pattern)
        self.num_states = 3
        # 0 dead, 1 start, 2 after an "a": every cell unknown but the dead row
        self.table = np.full((3, 256), -1, np.int32)
        self.table[0] = 0
        self.inner_results = []

    def step_held(self, state, byte):
        inner = self.inner_dfa()  # a fresh one: its walk waits on unknown cells, writing all its scratch
        with inner.resolving():
            self.inner_results.append(_span_result(cwalk.walk_span(inner, *self.inner_args)))
        self.table[state, byte] = 2 if byte == ord("a") else 0
        return int(self.table[state, byte])


@pytest.mark.parametrize("shared", [None, np.array([0, 1, 1, 0, 0, 1], np.uint8)])
def test_a_walk_reentered_from_step_held(shared):
    # with shared prefixes, the second and third "a" wait at the first's cell with no byte walked
    outer = _Reentering()
    data = np.frombuffer(b"aaabaa", np.uint8)
    args = (data, np.arange(7, dtype=np.int64), np.array([[0, 6]], np.int64), 1, np.arange(6, dtype=np.int64),
            None, 1, np.zeros(0, np.int64), np.zeros(0, np.int64), False, shared)
    mask, successors, _ = cwalk.walk_span(outer, *args)
    assert np.frombuffer(mask, np.uint32).tolist() == [0b110111]
    assert np.frombuffer(successors, np.int32).tolist() == [2]
    assert outer.inner_results and all(result == outer.expected_inner for result in outer.inner_results)


@pytest.mark.parametrize("answer, error", [(10**6, IndexError), (2**31, IndexError), (2**32, IndexError),
                                           (-5, IndexError), (-1, IndexError), ("2", TypeError),
                                           (ValueError("no"), ValueError)])
def test_a_step_held_answering_nonsense_raises(answer, error):
    """A cell resolved to a state outside the table (or no state) raises
    IndexError: before resolve() checked step_held's answer, -5 left an error
    return with no exception set (SystemError) and 2**32 was truncated to 0
    (DEAD: the token silently dead)."""
    outer = _Reentering()

    def step_held(state, byte):
        if isinstance(answer, Exception):
            raise answer
        return answer

    outer.step_held = step_held
    data = np.frombuffer(b"aaab", np.uint8)
    args = (data, np.array([0, 2, 4], np.int64), np.array([[0, 2]], np.int64), 1, np.arange(2, dtype=np.int64),
            None, 1, np.zeros(0, np.int64), np.zeros(0, np.int64), False, None)
    with pytest.raises(error):
        cwalk.walk_span(outer, *args)


# --- the Thompson construction's ASCII sets ------------------------------------------

def test_ascii_sets_are_the_template_sets_on_random_input():
    rc = pytest.importorskip("tokendfa.analysis.regex_compiler")
    if not rc.NATIVE_THOMPSON:
        pytest.skip("the compiled construction is not built")
    from tokendfa.analysis.regex_tree import chars
    rng = random.Random(32)
    for case in range(CASES):
        top = rng.choice([127, 127, 128, 255])
        points = sorted(set(rng.randrange(top + 1) for _ in range(rng.randrange(1, 140))))
        ranges, at = [], 0
        while at < len(points):
            hi = points[at] + rng.randrange(0, 3)
            ranges.append((points[at], min(hi, top)))
            at += 1
            while at < len(points) and points[at] <= ranges[-1][1] + 1:
                at += 1
        tree = chars(tuple(ranges))
        nfa = rc.ThompsonNFA(tree, rc.DEFAULT_MAX_NFA_STATES, None)
        start = nfa.new_state()
        end = nfa.build(tree, start)
        fragment = rc.thompson_fragment(tree)
        assert (fragment.start, fragment.end, [tuple(row) for row in fragment.eps], list(fragment.edges)) == \
            (start, end, [tuple(row) for row in nfa.eps], [tuple(map(tuple, row)) for row in nfa.edges]), case


def test_a_table_replaced_by_step_held_is_not_read_past():
    """Two entries wait on the same unknown cell; resolving the first, the
    automaton's step_held replaces its table with a smaller one (a view of
    one row of a larger array, whose next row reads as state 5). Resolving
    the second must check its state against the table taken again: before
    resolve() did, it read the cell 1 KB past the new table's end and
    returned state 5 as the token's successor."""
    outer = _Reentering()
    backing = np.full((2, 256), 5, np.int32)
    backing[0] = 0

    def step_held(state, byte):
        outer.table = backing[:1]
        return 0

    outer.step_held = step_held
    args = (np.frombuffer(b"aa", np.uint8), np.array([0, 1, 2], np.int64), np.array([[0, 2]], np.int64), 1,
            np.arange(2, dtype=np.int64), None, 1, np.zeros(0, np.int64), np.zeros(0, np.int64), False, None)
    with pytest.raises(IndexError, match="outside the table"):
        cwalk.walk_span(outer, *args)


class _ShortTableAfterHandBack(LazyByteDFA):
    """An automaton whose ``table`` (what the walk reads; the state store
    keeps its own ``_table``) turns into a shorter one (one row, a view of a
    larger array of DEAD cells) once a cell handed back to Python discovers
    a state. LazyByteDFA's own table only grows."""

    armed = False

    @property
    def table(self):
        return self.__dict__.get("_short", self._table)

    def _discover(self, kernel):
        state = super()._discover(kernel)
        if self.armed:
            self._short = np.zeros((2, 256), np.int32)[:1]
        return state


def test_a_table_shortened_during_a_session_walk_is_not_read_past(monkeypatch):
    """The walk over the native state store resolves a pass's waiting cells
    one after another, reading each entry's cell from the table without a
    check (its state was checked against the table when the entry stopped).
    A cell handed back to Python may replace the table; a shorter one
    would leave the next entries' states past its end. Tables taken again
    are refused when shorter (IndexError); before, the second entry read
    its cell past the table's end (DEAD there) and its token was left out
    of the mask with no error."""
    from tokendfa.analysis import lazydfa as lazydfa_module

    if lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built")
    monkeypatch.setattr(lazydfa_module, "_RESERVED_ROWS", 2)  # the first new state is past the table: handed back
    args = (np.frombuffer(b"ab", np.uint8), np.array([0, 1, 2], np.int64), np.array([[0, 2]], np.int64), INITIAL,
            np.arange(2, dtype=np.int64), None, 1, np.zeros(0, np.int64), np.zeros(0, np.int64), False, None)
    dfa = _ShortTableAfterHandBack("(ab|b)*a")
    with dfa.resolving():
        assert np.frombuffer(cwalk.walk_span(dfa, *args)[0], np.uint32).tolist() == [0b11]  # "a" and "b" alive
    dfa = _ShortTableAfterHandBack("(ab|b)*a")
    dfa.armed = True
    with dfa.resolving(), pytest.raises(IndexError, match="outside the table"):
        cwalk.walk_span(dfa, *args)
    assert lazydfa_module._lazycore.store_info(dfa._core_context)["handed_back"] == 1


@pytest.mark.parametrize("ranges", [((5, 3),), ((True, 5),), tuple((i, i) for i in range(0, 130, 2)),
                                    ((3, 10), (5, 7)), ((10, 20), (0, 5)), ((0, 127), (0, 127)), ((-1, 5),),
                                    ((0, 2**70),), ((0, 127), (128, 2**70)), ()],
                         ids=["reversed", "bool", "65 ranges", "overlapping", "unsorted", "twice", "negative",
                              "huge", "ascii and huge", "empty"])
def test_odd_ascii_sets_are_the_template_sets(ranges):
    """Ranges the ASCII path must not take as its own (bools, more than 64
    ranges, a bound outside 0-127, a reversed pair) fall to the template path
    and give what ThompsonNFA gives, the same NFA or the same exception."""
    rc = pytest.importorskip("tokendfa.analysis.regex_compiler")
    if not rc.NATIVE_THOMPSON:
        pytest.skip("the compiled construction is not built")
    from tokendfa.analysis.regex_tree import Chars

    def reference():
        nfa = rc.ThompsonNFA(Chars(ranges), rc.DEFAULT_MAX_NFA_STATES, None)
        start = nfa.new_state()
        end = nfa.build(Chars(ranges), start)
        return start, end, [tuple(row) for row in nfa.eps], [tuple(map(tuple, row)) for row in nfa.edges]

    def compiled():
        fragment = rc.thompson_fragment(Chars(ranges))
        return fragment.start, fragment.end, [tuple(row) for row in fragment.eps], list(fragment.edges)

    results = []
    for build in (reference, compiled):
        try:
            results.append(build())
        except Exception as error:  # noqa: BLE001 - the same exception type is what is compared
            results.append(type(error))
    assert results[0] == results[1]
