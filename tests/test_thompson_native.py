"""The compiled Thompson construction (analysis/_thompson.c) makes ThompsonNFA's NFA.

ThompsonNFA (and the lazy automaton's _CallingThompsonNFA) is the reference,
selected by TOKENDFA_NATIVE=0; the compiled construction must give the same
NFA state for state, row for row: on the case table, on trees with every
kind of node, with shared definitions copied (the eager compiler) or called
(the lazy one), and on the lazy NFAs of real schemas. It must also refuse
malformed input with an exception, never by reading or writing out of
bounds.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from cases import CASES
from tokendfa.analysis import lazydfa, limits
from tokendfa.analysis import regex_compiler as rc
from tokendfa.analysis.errors import BuildLimitError, RegexError, TimeLimitError, TokenDFAError
from tokendfa.analysis.literal_sets import LiteralDFA
from tokendfa.analysis.regex_tree import (Alt, Call, Chars, Concat, Excluding, LiteralSet, Repeat, Text, alt,
                                          call, chars, concat, literal_set, parse_regex, repeat, text)

pytestmark = pytest.mark.skipif(not rc.NATIVE_THOMPSON, reason="the compiled construction is not built "
                                "(or TOKENDFA_NATIVE=0)")

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))


def _reference(tree, shared=None, flat=False):
    nfa = rc.ThompsonNFA(tree, rc.DEFAULT_MAX_NFA_STATES, shared)
    start = nfa.new_state()
    end = nfa.build(tree, start)
    edges = [tuple(x for edge in row for x in edge) if flat else tuple(map(tuple, row)) for row in nfa.edges]
    return start, end, [tuple(row) for row in nfa.eps], edges


def _compiled(tree, shared=None, flat=False):
    fragment = rc.thompson_fragment(tree, shared=shared, flat=flat)
    return fragment.start, fragment.end, [tuple(row) for row in fragment.eps], list(fragment.edges)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_case_table(case):
    tree = parse_regex(case.pattern)
    assert _compiled(tree) == _reference(tree)
    assert _compiled(tree, flat=True) == _reference(tree, flat=True)


TREES = {
    "text_ascii": text("hello"),
    "text_wide": text("aé日😀b"),
    "chars": chars([(0x30, 0x39), (0xE9, 0xE9), (0x10000, 0x10FFFF)]),
    "nothing": chars([]),
    "surrogates": chars([(0xD800, 0xDFFF)]),
    "alt": alt([text("a"), concat(text("b"), repeat(chars([(0x61, 0x7A)]), 0, None))]),
    "bounded": repeat(concat(text("ab"), repeat(text("c"), 0, 2)), 2, 5),
    "exact": repeat(alt([text("x"), text("yz")]), 3, 3),
    "at_least": repeat(concat(chars([(0x61, 0x62)]), text("é")), 2, None),
    "star": repeat(alt([text("a"), repeat(text("b"), 1, None)]), 0, None),
    "zero": concat(text("q"), repeat(text("x"), 0, 0)),
    "nested": repeat(repeat(repeat(chars([(0x61, 0x63)]), 1, 3), 0, 2), 2, None),
    "literal_set": concat(text("<"), literal_set([f"w{i}" for i in range(40)] + ["", "é"]), text(">")),
    "literal_alternation": alt([text(f"word{i}") for i in range(40)]),
    "literal_alternation_not_plain": alt([text(f"word{i}") for i in range(39)] + [repeat(text("z"), 1, None)]),
    "literal_in_repeat": repeat(literal_set(["ab", "abc", "b"]), 1, 3),
    "big_repeat": repeat(concat(chars([(0x20, 0x7E)]), text("-")), 0, 40),
    "undefined_call": concat(text("a"), call("\ud800"), text("b")),
    "excluding": concat(text('"'), Excluding(("", "ab", "abc", "b", "ba"), ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)),
                                             alt([chars([(0x80, 0x10FFFF)]), text("\\n")]),
                                             repeat(chars([(0x20, 0x21), (0x23, 0x10FFFF)]), 0, None)), text('"')),
    "excluding_repeated": repeat(Excluding(("x", "xy"), ((0x61, 0x7A),), text("!"), repeat(text("?"), 0, 2)), 2, 3),
    # ASCII sets (made in C, no template) beside sets that reach past 0x7f (from a template)
    "ascii_sets": concat(chars([(0, 0)]), chars([(0x7F, 0x7F)]), chars([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)]),
                         repeat(chars([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]), 1, 4),
                         chars([(0x20, 0x21), (0x23, 0x80)]), chars([(0x7F, 0x80)]), chars([(0x61, 0x61)])),
    "ascii_set_of_64_ranges": chars([(c, c) for c in range(0, 128, 2)]),   # the most an ASCII set has
    "set_of_65_ranges": chars([(c, c) for c in range(0, 130, 2)]),
}


@pytest.mark.parametrize("name", list(TREES))
def test_every_kind_of_node(name):
    tree = TREES[name]
    assert _compiled(tree) == _reference(tree)
    assert _compiled(tree, flat=True) == _reference(tree, flat=True)


def test_copied_definitions():
    """The eager compiler copies a definition's minimal DFA where it is called."""
    definitions = {"\ud800": "[ab]+c?", "\ud801": "x\ud800y|z", "\ud802": "[^\\x00-\\xff]", "\ud803": "a{0}"}
    shared = rc.SharedDefinitions(definitions, rc.DEFAULT_MAX_NFA_STATES)
    for pattern in ["\ud800", "q\ud801(\ud800|\ud802)*", "(\ud801\ud803){2,3}", "\ud804"]:
        tree = parse_regex(pattern, calls=True, anchors=False)
        assert _compiled(tree, shared) == _reference(tree, shared), pattern


def test_kept_buffers_across_builds_of_every_size():
    """A build keeps its move logs and scratch arrays for the next (up to
    1 MiB each): builds small after large (logs past that bound, freed),
    large after small (kept ones grown) and nested ones (a definition's
    copy built from inside the caller's build, which holds the kept ones)
    give the reference's NFA each time."""
    small, large = text("ab"), repeat(chars([(0x61, 0x7A)]), 0, 60_000)
    middle = concat(text("{"), repeat(alt([text("x"), chars([(0x30, 0x39)])]), 1, 300), text("}"))
    for tree in (small, middle, large, small, middle, small, large, middle):
        assert _compiled(tree, flat=True) == _reference(tree, flat=True)
    definitions = {"\ud800": "[ab]{1,40}c?", "\ud801": "x\ud800y|z{1,30}"}
    for pattern in ["q\ud801{1,3}", "\ud800", "(\ud801|\ud800){2,4}"]:
        shared = rc.SharedDefinitions(definitions, rc.DEFAULT_MAX_NFA_STATES)
        tree = parse_regex(pattern, calls=True, anchors=False)
        assert _compiled(tree, shared) == _reference(tree, shared), pattern


def test_called_definitions_and_byte_tables():
    """Calls as calls (the lazy NFA), and the byte tables either way."""
    definitions = {"\ud800": "[ab]+c?", "\ud801": "x\ud800y|z(\ud800){2}", "\ud802": "(\ud801|w)*"}
    tables = {}
    for native in (True, False):
        saved = rc._thompson
        rc._thompson = saved if native else None
        try:
            dfa = lazydfa.LazyByteDFA("a\ud802b|\ud801", definitions=definitions)
            dfa.compile_everything()
            nfa = dfa._nfa
            tables[native] = (nfa.start, nfa.final, list(nfa.eps), list(nfa.edges), list(nfa.calls),
                              bytes(nfa.ends))
            eager = rc.byte_tables_from_regex("a\ud802b|\ud801", definitions=definitions)
            tables[native, "eager"] = tuple(array.tobytes() for array in eager)
        finally:
            rc._thompson = saved
    assert tables[True] == tables[False]
    assert tables[True, "eager"] == tables[False, "eager"]
    assert any(tables[True][4])   # calls were made


def _reaches_end(fragment) -> bool:
    """Whether every state of a lazy fragment reaches its end (a call passing to its return), searched backward."""
    base = fragment.start   # a fragment starts at its first state
    predecessors: dict = {}
    for i, (eps, edges) in enumerate(zip(fragment.eps, fragment.edges)):
        for t in list(eps) + list(edges[2::3]):
            predecessors.setdefault(t, []).append(base + i)
    for q, items in fragment.calls:
        for _, ret in items:
            predecessors.setdefault(ret, []).append(q)
    seen, todo = {fragment.end}, [fragment.end]
    while todo:
        for source in predecessors.get(todo.pop(), ()):
            if source not in seen:
                seen.add(source)
                todo.append(source)
    return len(seen) == len(fragment.eps)


@pytest.mark.parametrize("name", list(TREES))
def test_dense_is_every_state_reaching_the_end(name):
    """A lazy build says whether every state reaches its fragment's end (the
    lazy automaton then skips its alive and prune passes): checked against a
    search over the rows, on every kind of node, with states that cannot
    finish (an empty set inside a concatenation) and with calls."""
    trees = [TREES[name], Alt((Concat((Text("a"), Chars(()), TREES[name])), Text("c"))),
             concat(TREES[name], call("\ud800"), repeat(concat(call("\ud801"), text("x")), 0, None))]
    for tree in trees:
        fragment = rc.thompson_fragment(tree, base=7, shared={"\ud800", "\ud801"}, calls=True, flat=True)
        assert fragment.dense == _reaches_end(fragment)
    assert rc.thompson_fragment(trees[0], base=7, shared={"\ud800"}, calls=True, flat=True).dense == (
        name not in ("nothing", "surrogates"))   # sets of no byte sequence
    assert not rc.thompson_fragment(trees[1], base=7, shared={"\ud800"}, calls=True, flat=True).dense


def test_a_definition_with_dead_states_is_pruned_alike():
    """Fragments the lazy automaton cannot skip pruning for (states that
    cannot finish; a callee that matches nothing, under a dense fragment)
    give the Python construction's pruned tables, which never skips."""
    definitions = {"\ud800": Alt((Concat((Text("a"), Chars(()), Text("b"))), Text("c"))),
                   "\ud801": Chars(()),
                   "\ud802": alt([concat(text("x"), call("\ud801")), concat(text("y"), call("\ud800"))])}
    tree = concat(text("<"), alt([call("\ud802"), call("\ud800")]), text(">"))
    native, python = _lazy_tables(tree, definitions, True), _lazy_tables(tree, definitions, False)
    assert native == python
    # "a" leads to a state that cannot finish, "x" to a call of a definition
    # that matches nothing: both edges are dropped, "c" and "y" kept
    lows = {row[i] for row in native[3] for i in range(0, len(row), 3)}
    assert {ord("c"), ord("y")} <= lows and not {ord("a"), ord("x")} & lows


def _schema_records(per_source: int):
    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for taken, line in enumerate(handle):
                if taken == per_source:
                    break
                yield path.name, json.loads(line)["schema"]


def _lazy_tables(tree, definitions, native: bool):
    saved = rc._thompson
    rc._thompson = saved if native else None
    lazydfa._SHARED_FRAGMENTS.clear()   # built, not copied from the other run's templates
    try:
        with limits.limits(time_limit=20):
            dfa = lazydfa.LazyByteDFA(tree, definitions=definitions or None)
            dfa.compile_everything()
    finally:
        rc._thompson = saved
    nfa = dfa._nfa
    return nfa.start, nfa.final, list(nfa.eps), list(nfa.edges), list(nfa.calls), bytes(nfa.ends)


@pytest.mark.skipif(not BENCH.is_dir(), reason="JSONSchemaBench not found")
def test_real_schemas():
    """The lazy NFAs of real schemas, every definition compiled, are the same both ways."""
    from tokendfa.schema.api import regex_from_schema

    compared = 0
    for name, schema in _schema_records(4):
        try:
            compiled = regex_from_schema(schema, any_depth=2, state_budget=None, share_free_levels=True)
            native = _lazy_tables(compiled.tree, compiled.tree_definitions, True)
            reference = _lazy_tables(compiled.tree, compiled.tree_definitions, False)
        except (TokenDFAError, TimeLimitError):
            continue
        assert native == reference, name
        compared += 1
    assert compared >= 50, compared


# --- malformed input is refused, never read out of bounds ------------------------

@pytest.fixture
def misconfigured():
    """Configure the module with a spec of the test's, and restore the real one after."""
    real = rc.NativeSpec(Chars, Text, Concat, Alt, Repeat, Call, LiteralSet, Excluding, rc._set_template,
                         rc._literal_automaton, rc.NFAFragment)

    def configure(**changes):
        rc._thompson.configure(real._replace(**changes))

    yield configure
    rc._thompson.configure(real)


@pytest.mark.parametrize("template", [
    (3, ((0, 0, 5), (), ())),          # a target past the template
    (3, ((0, 0, 0), (), ())),          # back to the source
    (3, ((0, 300, 1), (), ())),        # not a byte
    (3, ((5, 4, 1), (), ())),          # lo > hi
    (2, ((0, 0, 1),)),                 # fewer rows than nodes
    (1, ((),)),                        # too few nodes
    (2, ((0, 0),), ()),                # not a pair
    (2, ([(0, 0, 1)], ())),            # a row that is not a tuple
    (10**30, ((), ())),                # an absurd size
])
def test_a_malformed_set_template_raises(misconfigured, template):
    misconfigured(set_template=lambda ranges: template)
    with pytest.raises((TypeError, ValueError)):
        rc.thompson_fragment(chars([(0x61, 0x62), (0xE9, 0xE9)]))   # not only ASCII: from its template


@pytest.mark.parametrize("fragment", [dict, lambda **fields: fields])
def test_a_fragment_class_that_is_not_a_tuple_is_refused(misconfigured, fragment):
    # the fragment is made as tuple.__new__ makes it: anything else is refused
    # when configured, and the configuration before it stays
    with pytest.raises(TypeError, match="tuple subclass"):
        misconfigured(fragment=fragment)
    made = rc.thompson_fragment(chars([(0x61, 0x62)]), base=5)
    assert type(made) is rc.NFAFragment
    assert (made.start, made.end) == (5, 6)
    assert made.edges == [((0x61, 0x62, 6),), ()] and made.eps == [(), ()] and made.calls == []


def _literal(starts, lo, hi, target, finals):
    return LiteralDFA(*(np.array(a, dtype=np.int64) for a in (starts, lo, hi, target)),
                      np.array(finals, dtype=bool))


@pytest.mark.parametrize("dfa", [
    _literal([0, 1, 1], [97], [97], [2], [False, True]),        # a target past the automaton
    _literal([0, 1, 1], [97], [97], [0], [False, True]),        # back to the initial state
    _literal([0, 1, 1], [97], [300], [1], [False, True]),       # not a byte
    _literal([0, 2, 1], [97], [97], [1], [False, True]),        # an index past the edges
    _literal([0, 1], [97], [97], [1], [False, True]),           # starts too short
    LiteralDFA(*(np.array([0, 1, 1], dtype=np.int32) for _ in range(4)), np.array([0, 1], dtype=bool)),
])
def test_a_malformed_literal_automaton_raises(misconfigured, dfa):
    misconfigured(literal_automaton=lambda node: dfa)
    with pytest.raises((TypeError, ValueError)):
        rc.thompson_fragment(literal_set(["a", "b"]))


def test_a_malformed_definition_template_raises():
    class Shared:
        def __init__(self, template):
            self.given = template

        def __contains__(self, key):
            return True

        def template(self, key):
            return self.given

    for template in [(((0, 0, 3),), (0,)), (((0, 0, 0),), (1,)), ([], (0,)), (((),), ("x",)), ((), (0,))]:
        with pytest.raises((TypeError, ValueError)):
            rc.thompson_fragment(call("\ud800"), shared=Shared(template))


def test_bounds_and_depth():
    with pytest.raises(BuildLimitError):
        rc.thompson_fragment(repeat(text("ab"), 10**12, 10**12))
    with pytest.raises(BuildLimitError):
        rc.thompson_fragment(repeat(text("ab"), 0, 2**70), max_states=1000)
    with pytest.raises(BuildLimitError):
        rc.byte_tables_from_regex("(?:a|b){1000}", max_nfa_states=500)
    deep = text("a")
    for i in range(3000):
        deep = Concat((text("x"), Alt((deep, text("y")))))
    with pytest.raises(RecursionError):
        rc.thompson_fragment(deep)
    with pytest.raises(RegexError):
        rc.byte_tables_from_regex(deep)


def test_a_malformed_request_raises():
    request = rc.NativeRequest(-1, 10, 10, 32, False, None, None, False, limits.check, lambda reached: None)
    with pytest.raises(ValueError):
        rc._thompson.build(text("a"), request)
    with pytest.raises(TypeError):
        rc._thompson.build(text("a"), request._replace(base=0, check=None))
    with pytest.raises(TypeError):
        rc._thompson.build(object(), request._replace(base=0))


def test_relocated_rows():
    """A fragment's rows stamped elsewhere (lazydfa's templates): the same as shifting in Python."""
    eps = [(), (3, 4), (7,)]
    edges = [(), (97, 98, 5), (0, 9, 2, 48, 57, 10)]
    assert rc.relocated_rows(eps, 100, 1) == [(), (103, 104), (107,)]
    assert rc.relocated_rows(tuple(edges), -2, 3) == [(), (97, 98, 3), (0, 9, 0, 48, 57, 8)]
    for rows, stride in [([[1]], 1), ([("x",)], 1), ([(1, 2, 2**40)], 3), ([(1,)], 0), (None, 1)]:
        with pytest.raises((TypeError, ValueError)):
            rc._thompson.relocated(rows, 1, stride)


def _targets(eps, edges):
    """Every state number the rows name: epsilon targets and the flat edges' targets."""
    return [t for row in eps for t in row] + [t for row in edges for t in row[2::3]]


def test_rows_name_a_state_with_one_int():
    """The rows hold one int object a state, whichever rows name it (the
    memory of a fragment's rows: 15% less on 126 of MaskBench's
    fragments), with the same values as the reference's."""
    tree = repeat(alt([text("ab"), chars([(0x61, 0x7A), (0xE9, 0xE9)]), repeat(text("c"), 1, None)]), 2, 6)
    fragment = rc.thompson_fragment(tree, base=1000, flat=True)
    assert _compiled(tree, flat=True) == _reference(tree, flat=True)
    named: dict = {}
    targets = _targets(fragment.eps, fragment.edges)
    assert len(targets) > len(set(targets))   # some state is named twice
    for t in targets + [fragment.start, fragment.end]:
        assert named.setdefault(t, t) is t, t
    # relocated rows too, within the cache's reach and past it (a 512-slot cache, by value)
    offset = 5_000
    eps, edges = rc.relocated_rows(fragment.eps, offset, 1), rc.relocated_rows(fragment.edges, offset, 3)
    assert _targets(eps, edges) == [t + offset for t in targets]
    moved: dict = {}
    for t in _targets(eps, edges):
        assert moved.setdefault(t, t) is t, t
    far = [(1, 1 + 512), (1,), (1 + 512, 1)]
    assert rc.relocated_rows(far, 7, 1) == [(8, 520), (8,), (520, 8)]


def test_excluding_is_its_branches():
    """An Excluding built from its trie matches what its branches (to_regex's tree) match."""
    import random

    from tokendfa.analysis.minimise import canonical_byte_dfa

    rng = random.Random(3)
    single = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F))
    for _ in range(40):
        names = tuple(sorted({"".join(rng.choice("ab_~ ") for _ in range(rng.randint(0, 4)))
                              for _ in range(rng.randint(1, 6))}))
        node = Excluding(names, single, alt([chars([(0x80, 0x7FF)]), text("\\n")]),
                         repeat(chars([(0x20, 0x21), (0x23, 0x7FF)]), 0, None))
        for native in (True, False):
            saved = rc._thompson
            rc._thompson = saved if native else None
            try:
                built = canonical_byte_dfa(*rc.byte_tables_from_regex(node))
                branches = canonical_byte_dfa(*rc.byte_tables_from_regex(node.branches()))
            finally:
                rc._thompson = saved
            assert np.array_equal(built.transitions, branches.transitions), names
            assert np.array_equal(built.finals, branches.finals), names


class _FakeExcluding:
    """What the compiled construction reads of an Excluding, unchecked."""

    def __init__(self, names, single, multi=text("!"), rest=text("?")):
        self.names, self.single, self.multi, self.rest = names, single, multi, rest


@pytest.mark.parametrize("names, single", [
    (("é",), ((0x20, 0x7E),)),                 # not ASCII
    (("a",), ((0x62, 0x63),)),                 # a character not in single
    (("a",), ((0x61, 0x200),)),                # single past ASCII
    (("a",), ((0x61, 0x62), (0x60, 0x70))),    # ranges not sorted and disjoint
    (("a",), ((0x62, 0x61),)),                 # lo > hi
    (["a"], ((0x61, 0x61),)),                  # names not a tuple
    (("a", 3), ((0x61, 0x61),)),               # a name not a str
    (("a",), ((0x61,),)),                      # a range not a pair
])
def test_a_malformed_excluding_raises(misconfigured, names, single):
    misconfigured(excluding=_FakeExcluding)
    with pytest.raises((TypeError, ValueError)):
        rc.thompson_fragment(_FakeExcluding(names, single))


def test_excluding_with_calls_in_a_lazy_nfa():
    """Definitions of one shape whose Excluding's rest calls another definition:
    the second is a copy of the first's fragment with its callee renamed (the
    shape renames calls inside an Excluding too); the same NFA both ways."""
    single = ((0x61, 0x7A),)

    def keys(callee):
        return concat(text("<"), Excluding(("ab", "b"), single, text("!"), call(callee)), text(">"))

    definitions = {"\ud800": parse_regex("[ab]+"), "\ud801": parse_regex("[cd]?"),
                   "\ud802": keys("\ud800"), "\ud803": keys("\ud801")}
    tables = {}
    for native in (True, False):
        saved = rc._thompson
        rc._thompson = saved if native else None
        lazydfa._SHARED_FRAGMENTS.clear()
        try:
            dfa = lazydfa.LazyByteDFA(alt([call("\ud802"), concat(text("-"), call("\ud803"))]),
                                      definitions=definitions)
            dfa.compile_everything()
            nfa = dfa._nfa
            tables[native] = (list(nfa.eps), list(nfa.edges), list(nfa.calls))
            table, finals = dfa.explore()
            assert finals.any()
        finally:
            rc._thompson = saved
    assert tables[True] == tables[False]
    assert sum(map(bool, tables[True][2])) >= 2


def test_a_helper_that_reconfigures_midway(misconfigured):
    """configure() called from a helper during a build (the module's globals
    change under it): the build keeps the spec it started with, for telling
    nodes apart and for the helpers it calls, and makes the reference's NFA."""

    class Other:
        pass

    calls = []

    def set_template(ranges):
        if not calls:
            misconfigured(text=Other)
        calls.append(ranges)
        return rc._set_template(ranges)

    # sets that reach past ASCII (those come from their templates)
    tree = concat(chars([(0x61, 0x7A), (0xE9, 0xE9)]), text("xy"), chars([(0x30, 0x39), (0x100, 0x101)]), text("z"))
    misconfigured(set_template=set_template)
    assert _compiled(tree) == _reference(tree)
    assert len(calls) == 2


_DEEP_EXCLUDING = """
import sys, threading
import numpy as np
from tokendfa.analysis import regex_compiler as rc
from tokendfa.analysis.regex_tree import Excluding, text
sys.setrecursionlimit(20000)
node = text("x")
for _ in range({depth}):
    node = Excluding(("ab", "ac"), ((0x61, 0x7A),), text("\\u00e9"), node)
out = {{}}

def build(native):
    saved = rc._thompson
    rc._thompson = saved if native else None
    try:
        out[native] = rc.byte_tables_from_regex(node)
    finally:
        rc._thompson = saved

threading.stack_size({stack})
for native in (True, False):
    worker = threading.Thread(target=build, args=(native,))
    worker.start()
    worker.join()
assert all(np.array_equal(a, b) for a, b in zip(out[True], out[False]))
print("same", out[True][0].shape)
"""


def test_deeply_nested_excluding_keeps_the_c_stack_small():
    """Excluding nodes nested 2,000 deep (each one's rest the next; the
    compiled construction recurses through them) built on a thread of a 4 MB
    stack: the reference's tables, not a crash (2.5 KB of C stack a level
    overflowed it). In a child process, so that a crash fails the test."""
    import subprocess
    import sys

    script = _DEEP_EXCLUDING.format(depth=2000, stack=4 << 20)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("same")


def test_a_deep_trie_of_names():
    """Thousands of names sharing prefixes and one very long name: the trie is
    built without recursion, and both constructions make the same NFA."""
    names = tuple(sorted({"k" * (i % 50) + format(i, "x") for i in range(3000)} | {"a" * 20000}))
    tree = Excluding(names, ((0x20, 0x7E),), text("\u00e9"), repeat(chars([(0x61, 0x7A)]), 0, None))
    assert _compiled(tree) == _reference(tree)
