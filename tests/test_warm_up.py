"""Vocabulary.prepare()'s warm-up: each of its schemas compiled once, and
every piece they build kept for the process from that one compile
(``keeping_repeats``; elsewhere a repeat is kept the second time it is built)."""

from __future__ import annotations

import contextlib

from tokendfa import Index
from tokendfa.analysis import regex_compiler as rc


@contextlib.contextmanager
def _empty_store():
    """The process's kept repeats emptied for the block, then put back."""
    saved, seen, states = dict(rc._STAMPS), dict(rc._SEEN), rc._stamped_states[0]
    rc._STAMPS.clear()
    rc._SEEN.clear()
    rc._stamped_states[0] = 0
    try:
        yield
    finally:
        rc._STAMPS.clear()
        rc._STAMPS.update(saved)
        rc._SEEN.clear()
        rc._SEEN.update(seen)
        rc._stamped_states[0] = states


def _construction(tree) -> None:
    nfa = rc.ThompsonNFA(tree, 10_000)
    nfa.build(tree, nfa.new_state())


def test_keeping_repeats_keeps_a_repeat_the_first_time_it_is_built():
    from tokendfa.analysis.regex_tree import parse_regex

    tree = parse_regex(r'\{(?:,"a_name_kept_at_once":(?:true|false|null))?\}')
    with _empty_store():
        with rc.keeping_repeats():
            _construction(tree)
        assert len(rc._STAMPS) == 1
    other = parse_regex(r'\{(?:,"a_name_kept_the_second_time":(?:true|false|null))?\}')
    with _empty_store():   # and outside the block, the second time as before
        _construction(other)
        assert not rc._STAMPS
        _construction(other)
        assert len(rc._STAMPS) == 1


def test_prepare_compiles_each_warm_up_schema_once_and_keeps_its_pieces(qwen_vocab, monkeypatch):
    from tokendfa.lazy import warmup as lazy_warmup
    from tokendfa.runtime import index as runtime_index

    compiled: list = []
    real = Index.from_schema.__func__

    def counted(cls, schema, vocabulary, **options):
        compiled.append(schema)
        return real(cls, schema, vocabulary, **options)

    with _empty_store():
        monkeypatch.setattr(Index, "from_schema", classmethod(counted))
        qwen_vocab.prepare(eager=False)
        warm_ups = (runtime_index._WARM_UP_COMMON, runtime_index._WARM_UP_SCHEMA)
        assert [warm_ups.index(schema) for schema in compiled[:2]] == [0, 1]
        assert compiled[2:] == [warm.schema for warm in lazy_warmup.WARM_UP]   # walked for their plans
        kept = dict(rc._STAMPS)
        # the compiled construction builds every repeat (~0.15 us a state) and keeps none;
        # ThompsonNFA (TOKENDFA_NATIVE=0) keeps the warm-up's pieces
        assert bool(kept) != rc.NATIVE_THOMPSON
        # compiled again, they build no repeat anew: every one was kept the first time
        for schema in warm_ups:
            index = Index.from_schema(schema, qwen_vocab)
            index.get_mask(index.initial_state)
            index.byte_dfa.compile_everything()
        assert rc._STAMPS == kept
