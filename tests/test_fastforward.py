"""The fast-forward table (tokendfa.builder.fastforward.forced_token_table).

The table is made for all states at once; it is held here, state for
state, to :func:`forced_tokens_for_state` run on each forced state's run
(the definition: the tokenizer's own tokens, walked through the index
arrays, given back while a longer allowed token could start where they
start, found by bisecting the sorted spellings and reading the mask).
"""

from __future__ import annotations

import numpy as np
import pytest

from cases import CASES
from conftest import cached_vocabulary
from test_literal_sets import enum_values
from tokendfa import Index
from tokendfa.analysis.literals import forced_bytes, forced_run
from tokendfa.builder import assemble
from tokendfa.builder import fastforward


def per_state(dfa, dfa_state_of, arrays, vocab) -> list[list[int]]:
    forced = forced_bytes(dfa)
    found = []
    for state, dfa_state in enumerate(np.asarray(dfa_state_of).tolist()):
        if forced[dfa_state] < 0:
            found.append([])
            continue
        run, _ = forced_run(dfa, dfa_state, forced)
        found.append(fastforward.forced_tokens_for_state(arrays, state, run, vocab))
    return found


def check_builds(vocab, builds, monkeypatch) -> int:
    """Build each index, and compare its table with the per-state answer."""
    made, seen = {}, []
    original_of, original_table = fastforward.ForcedRuns.of.__func__, fastforward.ForcedRuns.table

    def recording_of(cls, dfa, dfa_state_of):
        runs = original_of(cls, dfa, dfa_state_of)
        made[id(runs)] = (runs, dfa)
        return runs

    def recording_table(self, arrays, vocabulary):
        result = original_table(self, arrays, vocabulary)
        seen.append((made[id(self)][1], self.dfa_state_of, arrays, result))
        return result

    monkeypatch.setattr(fastforward.ForcedRuns, "of", classmethod(recording_of))
    monkeypatch.setattr(fastforward.ForcedRuns, "table", recording_table)
    compared = nonempty = 0
    for name, build in builds:
        seen.clear()
        try:
            index = build()
        except Exception:  # noqa: BLE001 - patterns a vocabulary cannot spell
            continue
        assert not seen, name  # the table waits until it is asked for
        index.forced_tokens(index.initial_state)
        dfa, dfa_state_of, arrays, (offsets, tokens) = seen[-1]
        table = [tokens[offsets[s]:offsets[s + 1]].tolist() for s in range(len(offsets) - 1)]
        assert table == per_state(dfa, dfa_state_of, arrays, vocab), name
        assert all(index.forced_tokens(s).tolist() == row for s, row in enumerate(table)), name
        compared += 1
        nonempty += sum(1 for row in table if row)
    assert nonempty  # the table is not trivially empty
    return compared


HEALING = [
    r'\{"(orderId|orderName)":[0-9]+\}',            # nothing forced past "order": longer tokens
    r'\{"name_of_the_person":"[a-zA-Z ]*"\}',        # stops before '":"'
    r"(é|è)x",                                        # a run that stops inside a character
    r"日本語(テキスト|の本)",
    r"abc(abcdefgh|xyz)*end",
]


@pytest.mark.parametrize("chunk", [1 << 20, 7])   # the runs at once, or a few at a time
@pytest.mark.parametrize("name", ["qwen2.5", "toy"])
def test_forced_token_table_is_the_per_state_answer(name, chunk, monkeypatch):
    monkeypatch.setattr(fastforward, "_CHUNK_BYTES", chunk)
    vocab = cached_vocabulary(name)
    patterns = [case.pattern for case in CASES] + HEALING
    builds = [(p, lambda p=p: Index.from_regex(p, vocab, lazy=False)) for p in patterns]
    assert check_builds(vocab, builds, monkeypatch) >= 10


def test_forced_token_table_of_enums_is_the_per_state_answer_qwen(monkeypatch):
    vocab = cached_vocabulary("qwen2.5")
    schemas = [
        {"type": "string", "enum": enum_values(300, seed=11)},   # escapes, unicode, shared prefixes
        {"type": "string", "enum": enum_values(2500, seed=12)},
        {"type": "object", "properties": {"name_of_the_person": {"type": "string"},
                                          "code": {"enum": enum_values(150, seed=13)}},
         "required": ["name_of_the_person", "code"], "additionalProperties": False},
    ]
    builds = [(str(i), lambda s=s: Index.from_schema(s, vocab, lazy=False)) for i, s in enumerate(schemas)]
    assert check_builds(vocab, builds, monkeypatch) == len(schemas)


def test_encode_many_is_encode_toy_and_qwen():
    for name in ("toy", "qwen2.5"):
        vocab = cached_vocabulary(name)
        texts = ["abc", "a.5", "日本", "\u0100 not spelled by toy", "", 'q"t', "é"]
        expected = []
        for text in texts:
            try:
                expected.append(vocab.encode(text))
            except Exception:  # noqa: BLE001 - VocabularyError: None
                expected.append(None)
        assert vocab.encode_many(texts) == expected


def test_encode_many_checks_what_the_encoder_gives():
    """An encoder's ids that do not spell the text (wrong, out of range, not
    text) are replaced by encode()'s own match, text by text."""
    from conftest import TOY_EOS, TOY_TOKENS
    from tokendfa import Vocabulary

    answers = {"abc": [18], "ab": [0, 0], "a.": [99], "1.5": [17, 20], "12": [6, 7], "b": []}

    def encoder(text):
        return list(answers.get(text, []))

    vocab = Vocabulary(TOY_TOKENS, TOY_EOS, name="toy-encoded", encoder=encoder)
    texts = list(answers) + ["\u0100"]
    assert vocab.encode_many(texts) == [vocab.encode(t) if t != "\u0100" else None for t in texts]
    assert vocab.encode_many(["abc", "12"]) == [[18], [6, 7]]   # the encoder's own ids, checked at once


def test_the_table_made_later_is_the_build_s_table_once_whichever_thread_asks(tmp_path, monkeypatch):
    """An index from ``from_schema``/``from_regex`` makes its fast-forward
    table when first asked for it: the same arrays as a build that makes it
    at once, made once however many threads ask together, and in its file."""
    import threading

    from tokendfa.builder import build_index
    from tokendfa.schema import regex_from_schema

    vocab = cached_vocabulary("qwen2.5")
    schema = {"type": "object", "properties": {"name_of_the_person": {"type": "string"},
                                               "code": {"enum": enum_values(200, seed=21)}},
              "required": ["name_of_the_person", "code"], "additionalProperties": False}
    index = Index.from_schema(schema, vocab, lazy=False)
    calls = []
    original = fastforward.ForcedRuns.table

    def counting(self, arrays, vocabulary):
        calls.append(1)
        return original(self, arrays, vocabulary)

    monkeypatch.setattr(fastforward.ForcedRuns, "table", counting)
    answers, barrier = {}, threading.Barrier(8)

    def ask(number):
        barrier.wait()
        answers[number] = [index.forced_tokens(s).tolist() for s in range(index.num_states)]

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert all(answer == answers[0] for answer in answers.values())
    assert sum(map(len, answers[0])) > 100          # the enum's codes are forced past their first bytes
    monkeypatch.undo()

    compiled = regex_from_schema(schema)
    at_once = build_index(compiled.tree, vocab, definitions=compiled.tree_definitions,
                          dfa=compiled.automaton).arrays    # a build that makes the table at once
    for name, array in at_once.as_dict().items():
        assert np.array_equal(getattr(index.arrays, name), array), name
    index.save(tmp_path / "enum.tdfa")
    loaded = Index.load(tmp_path / "enum.tdfa", vocab)
    assert [loaded.forced_tokens(s).tolist() for s in range(loaded.num_states)] == answers[0]
