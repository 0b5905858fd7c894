"""The native state store (analysis/_lazycore.c) against untrusted and changing input.

The store keeps C copies of what the lazy automaton (LazyByteDFA) holds in
Python; the Python methods are the reference (TOKENDFA_NATIVE=0). These
tests change what the store copied (the state bound) or give it values
outside its arrays, and check that it gives the reference's answer or a
clear error, never a read or write out of bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendfa import BuildLimitError
from tokendfa.analysis import lazydfa as lazydfa_module
from tokendfa.analysis.dfa import INITIAL as INITIAL_STATE
from tokendfa.analysis.lazydfa import LazyByteDFA


@pytest.fixture(params=["native", "python"])
def core(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(lazydfa_module, "_lazycore", None)
    elif lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    return request.param


def _walk(dfa, text):
    state = INITIAL_STATE
    for byte in text.encode():
        state = dfa.partial_row(state, 1 << byte)[byte]
    return int(state)


def test_the_state_bound_lowered_after_the_store_is_made(core):
    """max_states is the automaton's attribute: lowered after states were
    found (the native store made and synced), the next discovery past it
    raises, as the Python reference does."""
    dfa = LazyByteDFA("abcdefghij")
    assert _walk(dfa, "ab") > 0
    count = dfa.num_states
    dfa.max_states = count
    with pytest.raises(BuildLimitError):
        _walk(dfa, "abcdefg")
    dfa.max_states = 10**30   # past 64 bits: no bound at all, as in Python
    assert _walk(dfa, "abcdefghij") > 0


def test_a_state_bound_past_64_bits(core):
    """A bound no int64 holds is no bound (Python compares ints of any size);
    the compiled core read it with PyLong_AsLongLong and raised OverflowError."""
    dfa = LazyByteDFA("abc", max_states=10**30)
    assert _walk(dfa, "abc") > 0
    assert dfa.is_final(_walk(dfa, "abc"))


@pytest.mark.parametrize("state", [2**54 - 1, 2**53, 2**63 - 1, 2**70, "count", "reserved"])
def test_a_state_outside_the_automaton_is_refused(core, state):
    """class_successor and class_chain take a state from their caller: one
    not discovered (in the table's reserved rows, or far past them) raises
    IndexError, as the Python reference does. The compiled checks compared
    (state + 1) * 1024 with the table's length: near 2**54 the product
    wrapped past zero, the check passed, and the row before the table was
    read and written (SIGSEGV)."""
    dfa = LazyByteDFA("abc")
    if state == "count":
        state = dfa.num_states
    elif state == "reserved":
        state = len(dfa.table) - 1
    with pytest.raises((IndexError, OverflowError)):
        dfa.class_successor(state, 1 << 97)
    with pytest.raises((IndexError, OverflowError)):
        dfa.class_chain(state, 1 << 97, False, 5)
    assert dfa.class_successor(INITIAL_STATE, 1 << 97) == _walk(LazyByteDFA("abc"), "a")


@pytest.mark.parametrize("rows, most", [(0, 1), (-1, 1), (2**31 + 1, 2**31 + 1), (2**70, 1), (1, 2**70), (1, 0)])
def test_a_table_of_an_impossible_size_is_refused(rows, most):
    """_lazycore.Table(rows, most) maps rows * 1 KB: sizes from Python are
    checked (1 to 2**31 rows), never wrapped into a small mapping."""
    if lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    with pytest.raises(ValueError, match="2\\*\\*31"):
        lazydfa_module._lazycore.Table(rows, most)


def test_a_table_grows_in_place_and_refuses_impossible_sizes():
    if lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    table = lazydfa_module._lazycore.Table(3, 10_000)
    view = memoryview(table)
    assert (table.rows, len(view), view.readonly) == (3, 3 * 1024, False)
    view[3 * 1024 - 1] = 7
    assert table.grow(2) and table.rows == 3  # no smaller
    assert table.grow(10_000) and table.rows == 10_000  # in its slot: in place
    assert len(memoryview(table)) == 10_000 * 1024 and memoryview(table)[3 * 1024 - 1] == 7
    assert view[3 * 1024 - 1] == 7  # a view taken before reads the same memory
    for rows in (0, -3, 2**31 + 1, 2**64):
        with pytest.raises(ValueError, match="2\\*\\*31"):
            table.grow(rows)
    assert table.rows == 10_000


class _ShrinkingTable(LazyByteDFA):
    """An automaton whose table is replaced by a shorter one (one row, a
    view of a larger array of DEAD cells) during a cell handed back to
    Python: its first discovery arms it, the store's sync after the hand-back
    (which reads ``max_states``) replaces the table, and the store then takes
    that table again. LazyByteDFA's own table only grows."""

    armed = False

    @property
    def max_states(self):
        if self.__dict__.get("_shrink"):
            self._shrink = False
            self._table = np.zeros((2, 256), np.int32)[:1]  # row 1 read past the view reads DEAD, silently
        return self.__dict__["_bound"]

    @max_states.setter
    def max_states(self, value):
        self.__dict__["_bound"] = value

    def _discover(self, kernel):
        state = super()._discover(kernel)
        self._shrink = self.armed
        return state


@pytest.mark.parametrize("call", ["resolve_bytes", "class_chain"])
def test_a_table_shortened_during_a_hand_back_is_not_read_past(monkeypatch, call):
    """After a cell handed back to Python, the store takes the automaton's
    table again and its callers go on reading the state's row (resolve_bytes
    over the rest of the row's bytes, class_chain the row's class cells),
    their check of the state against the table made before. A table now
    shorter than the state is refused with IndexError; before the check
    after a hand-back, both read the row past the table's end and returned
    as if nothing had happened."""
    if lazydfa_module._lazycore is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    monkeypatch.setattr(lazydfa_module, "_RESERVED_ROWS", 2)  # the first new state is past the table: handed back
    dfa = _ShrinkingTable("(ab|b)*a")
    dfa.armed = True
    with pytest.raises(IndexError, match="outside the table"):
        if call == "resolve_bytes":
            dfa.materialise([INITIAL_STATE])
        else:
            dfa.class_chain(INITIAL_STATE, 1 << ord("a"), False, 5)
    assert len(dfa.table) == 1 and lazydfa_module._lazycore.store_info(dfa._core_context)["handed_back"] == 1


def test_reserve_table_grows_a_list_in_place_and_refuses_bad_input():
    """reserve_table makes room in a list (the NFA's tables) without changing
    its items or length; what comes after fills the room. Anything but a list
    and an int, or a size no memory can hold, raises."""
    import sys

    core = lazydfa_module._lazycore
    if core is None:
        pytest.skip("the compiled core is not built (or TOKENDFA_NATIVE=0)")
    for rows in ([], [(1,), (), (2, 3)]):
        before = list(rows)
        core.reserve_table(rows, 1000)
        assert rows == before
        assert sys.getsizeof(rows) >= sys.getsizeof([]) + 1000 * 8
        room = sys.getsizeof(rows)
        rows += [(q,) for q in range(1000 - len(rows))]
        assert len(rows) == 1000 and rows[:len(before)] == before and rows[-1] == (1000 - len(before) - 1,)
        assert sys.getsizeof(rows) == room   # filled in place
        core.reserve_table(rows, 10)   # already room: nothing changes
        assert len(rows) == 1000 and sys.getsizeof(rows) == room
    for args in [((), 5), ([], "5"), ([], 5, 6), (bytearray(), 5)]:
        with pytest.raises(TypeError):
            core.reserve_table(*args)
    with pytest.raises(MemoryError):
        core.reserve_table([], sys.maxsize // 4)
    with pytest.raises(OverflowError):
        core.reserve_table([], 2 ** 70)
