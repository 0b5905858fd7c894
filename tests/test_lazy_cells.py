"""A lazy row's cells resolved one at a time in the native state store
(analysis/_lazycore.c's store_fast) against the Python reference.

The first cell the store resolves in a row also writes DEAD on every byte
the row's cut leaves out; the row's later cells skip that pass (a flag a
state in the store). These tests resolve rows cell by cell, in an order
that starts inside a range, between ranges and at the ends, and check the
table cell for cell (UNKNOWN cells alike) against the reference after each
cell, and that the pass was made once a row.
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendfa.analysis import lazydfa as lazydfa_module
from tokendfa.analysis.dfa import DEAD
from tokendfa.analysis.lazydfa import UNKNOWN, LazyByteDFA
from tokendfa.lazy import kernels as lazy_kernels

# rows of several ranges with gaps between them (letters, digits, quote,
# backslash, the wide characters' lead bytes), and definitions under stacks
P, Q = "\ud800", "\ud801"  # placeholders: one surrogate character each
DEFINITIONS = {P: r'"(?:[^"\\\x00-\x1f]|\\["n])*"', Q: rf"\{{(?:{P}:(?:{P}|-?[0-9]+)(?:,{P}:(?:{P}|[0-9]+))*)?\}}"}
PATTERNS = [r"(?:[a-f]+|[0-9]{2}|x[^a-z]y)*z", rf"\[(?:{Q}(?:,{Q})*)?\]"]


def _cell_order(rng) -> list[int]:
    """Every byte once: a few chosen to land inside ranges, at their
    edges and between them first, then the rest shuffled."""
    first = [ord(c) for c in 'b0"z\\{'] + [0, 255, 0x80, 0xC3]
    rest = [b for b in rng.permutation(256).tolist() if b not in first]
    return first + rest


@pytest.mark.skipif(not lazydfa_module.NATIVE_CORE, reason="the compiled core is not built here (or TOKENDFA_NATIVE=0)")
@pytest.mark.parametrize("pattern", PATTERNS)
def test_cells_one_at_a_time_are_the_reference_and_the_cut_is_written_once_a_row(pattern, monkeypatch):
    from tokendfa.analysis import _lazycore

    native = LazyByteDFA(pattern, definitions=DEFINITIONS)
    monkeypatch.setattr(lazydfa_module, "_lazycore", None)
    reference = LazyByteDFA(pattern, definitions=DEFINITIONS)
    assert native._core_context is not None and reference._core_context is None
    rng = np.random.default_rng(11)
    rows, resolved = 0, 0
    state = 1
    while state < reference.num_states and state < 120:
        for byte in _cell_order(rng):
            unknown = reference.table[state, byte] == UNKNOWN
            for dfa in (native, reference):
                dfa.partial_row(state, 1 << byte)
            resolved += bool(unknown)
            count = reference.num_states
            assert native.num_states == count
            np.testing.assert_array_equal(native.table[state], reference.table[state])
        np.testing.assert_array_equal(native.table[:count], reference.table[:count])  # UNKNOWN cells alike
        assert (native.table[state] != UNKNOWN).all()
        rows += 1
        state += 1
    count = reference.num_states
    native._publish()
    assert native._kernels == reference._kernels
    np.testing.assert_array_equal(native.finals[:count], reference.finals[:count])
    assert (native.table[1:state] == DEAD).any()  # some bytes fall outside every cut
    info = _lazycore.store_info(native._core_context)
    # each row's cells were resolved by the store (nothing needed the stack
    # handed back to Python), several cells a row, one DEAD pass a row
    assert info["handed_back"] == 0 or pattern != PATTERNS[0], info
    assert resolved > 2 * rows, (resolved, rows)
    assert 0 < info["cut_passes"] <= rows, (info, rows)
    assert info["cut_passes"] >= rows - info["handed_back"], (info, rows)


@pytest.mark.skipif(not lazy_kernels.NATIVE_WALK, reason="the compiled walk is not built (or TOKENDFA_NATIVE=0)")
def test_the_walk_refuses_a_cell_outside_the_table_and_tells_dead_from_unknown():
    """walk_known tests DEAD and UNKNOWN with one comparison a byte and
    checks each state it goes on from against the table's rows: a cell
    leading past the rows, or to a negative id other than UNKNOWN, is an
    IndexError before the table is read there; DEAD ends an entry, an
    UNKNOWN cell is resolved and the walk goes on."""
    from tokendfa.lazy import kernels

    cwalk = kernels._cwalk
    dfa = LazyByteDFA("ab[cd]e|x")
    a = dfa.step(1, ord("a"))
    b = dfa.step(a, ord("b"))
    rows = len(dfa.table)
    data = np.frombuffer(b"abce" b"abde" b"ax" b"x", dtype=np.uint8)
    offsets = np.array([0, 4, 8, 10, 11], dtype=np.int32)

    def walk():
        states = np.ones(4, dtype=np.int64)
        ended_entries, ended_states = np.full(4, -9, dtype=np.int64), np.full(4, -9, dtype=np.int64)
        with dfa.resolving():
            ended = cwalk.walk_packed(dfa, data, offsets, states, ended_entries, ended_states)
        return ended_entries[:ended].tolist(), ended_states[:ended].tolist(), ended_entries[ended:].tolist()

    assert dfa.table[b, ord("c")] == UNKNOWN  # resolved by the walk, which goes on past it
    entries, ends, untouched = walk()
    assert entries == [0, 1, 3] and all(dfa.is_final(end) for end in ends) and untouched == [-9]
    c = int(dfa.table[b, ord("c")])
    for bad in (rows, rows + 1000, -2, -(1 << 31)):
        dfa.table[b, ord("c")] = bad  # "abce" goes on from the bad cell
        with pytest.raises(IndexError, match="outside the table"):
            walk()
    dfa.table[b, ord("c")] = DEAD
    assert walk()[0] == [1, 3]
    dfa.table[b, ord("c")] = c
    assert walk()[0] == [0, 1, 3]
