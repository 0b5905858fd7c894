"""Vocabulary.prepare()'s plan warm-up (tokendfa.lazy.warmup): the walk plans
and loop masks of the contexts common to JSON made at start-up, so that a
prepared process's first schemas find them cached, with the same answers."""

from __future__ import annotations

import json

import numpy as np

from conftest import cached_vocabulary, masks_along
from tokendfa import Index, Vocabulary
from tokendfa.lazy import vocabulary_tables
from tokendfa.lazy import warmup


def _fresh_qwen(name: str) -> Vocabulary:
    """A copy of qwen2.5 with nothing made yet (the caches live with the object)."""
    qwen = cached_vocabulary("qwen2.5")
    return Vocabulary(qwen.tokens, qwen.eos_token_ids, name=name)


def _cached_keys(tables) -> tuple[set, set, set]:
    return set(tables.walk_plans._plans), set(tables.chain_plans._plans), set(tables.loop_masks)


def test_prepare_makes_the_warm_up_plans_and_the_one_byte_plans():
    vocab = _fresh_qwen("qwen2.5 warmed")
    vocab.prepare(eager=False)
    tables = vocabulary_tables(vocab)
    for byte in b'cs_.t"{,':
        assert tables.walk_plans.get((np.array([byte], dtype=np.int64).tobytes(),)) is not None
    kept = _cached_keys(tables)
    # walking the warm-up again makes no plan and no loop mask: prepare() made them all
    for warm in warmup.WARM_UP:
        index = Index.from_schema(warm.schema, vocab)
        assert warmup.walk_texts(index, vocab, warm.instances) > 0
    assert _cached_keys(tables) == kept
    # and a schema of the same kinds, written otherwise, meets its number contexts made
    schema = {"type": "object", "properties": {"qty": {"type": "integer"}, "cost": {"type": "number"},
                                               "label": {"type": "string"}},
              "required": ["qty", "cost", "label"], "additionalProperties": False}
    index = Index.from_schema(schema, vocab)
    warmup.walk_texts(index, vocab, ['{"qty":250,"cost":-3.5e2,"label":"a box"}'])
    new_walk_plans = _cached_keys(tables)[0] - kept[0]
    assert len(new_walk_plans) <= 2   # the key's own letters in a closed object


def test_prepare_makes_the_plans_of_a_declared_key_prefix_in_an_open_object():
    """Inside an open object's key, after a prefix of one declared name, the
    row's plan (the name's next character out of the free key's loop) is
    made by prepare() for letters, digits, '_' and '-': typing a declared
    name makes none (a vocabulary prepared without that warm-up made one a
    character here)."""
    vocab = _fresh_qwen("qwen2.5 open keys")
    vocab.prepare(eager=False)
    tables = vocabulary_tables(vocab)
    for name, value in (("Kind", '"v"'), ("x_9-Z", "1")):
        index = Index.from_schema({"type": "object", "properties": {name: {"type": "string" if value[0] == '"'
                                                                          else "integer"}}}, vocab)
        kept = set(tables.walk_plans._plans)
        assert warmup.walk_texts(index, vocab, ['{"' + name + '":' + value + '}']) == len(name) + len(value) + 5
        assert set(tables.walk_plans._plans) == kept


def test_prepare_makes_the_plans_of_a_string_of_no_whitespace():
    """A string pattern of no whitespace (\\S), written two ways in another
    schema, meets the walk plans of its loop made by prepare() (without that
    warm-up its first walk made two)."""
    vocab = _fresh_qwen("qwen2.5 no whitespace")
    vocab.prepare(eager=False)
    tables = vocabulary_tables(vocab)
    kept = _cached_keys(tables)
    for pattern in ("^[\\S]+$", "^[^\\s]+$"):
        index = Index.from_schema({"type": "object", "properties": {"primary_key": {"type": "string",
                                                                                    "pattern": pattern}},
                                   "required": ["primary_key"], "additionalProperties": False}, vocab)
        assert warmup.walk_texts(index, vocab, ['{"primary_key":"x9/Y-z.w"}']) == 26
    assert _cached_keys(tables) == kept


def test_the_warm_up_walk_serves_the_state_at_every_byte():
    vocab = cached_vocabulary("qwen2.5")   # every byte is a token
    text = '{"a":[1,2.5,"x\\"y"],"b":null}'
    assert warmup.walk_texts(Index.from_schema({}, vocab), vocab, [text]) == len(text.encode())
    # a text the schema refuses stops where it is refused
    assert warmup.walk_texts(Index.from_schema({"type": "integer"}, vocab), vocab, ["12x3"]) == 2


SCHEMAS = [
    ({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}, "name": {"type": "string"},
                                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}},
                                       "price": {"type": ["number", "null"]}, "when": {"type": "string",
                                                                                       "format": "date-time"}},
      "required": ["id", "name"], "additionalProperties": False},
     [{"id": 7, "name": "Zoë \"Q\"", "tags": ["a", "bcdefgh"], "price": -0.25, "when": "2020-02-29T23:59:59Z"},
      {"id": 12, "name": "", "price": None}]),
    ({"type": "object"}, [{"k": [1, {"n": None}], "s": "text with spaces", "x": 1e-3, "b": True}]),
]


def test_prepared_and_unprepared_vocabularies_give_the_samemasks_along():
    """The plans the warm-up made answer as the ones a cold row makes: the
    same masks along every step, prepared or not."""
    prepared = _fresh_qwen("qwen2.5 prepared")
    prepared.prepare(eager=False)
    plain = _fresh_qwen("qwen2.5 plain")   # tables made on first use: no warm-up
    for schema, instances in SCHEMAS:
        texts = [json.dumps(i, separators=(",", ":"), ensure_ascii=False) for i in instances]
        assert masks_along(Index.from_schema(schema, prepared), prepared, texts) == \
            masks_along(Index.from_schema(schema, plain), plain, texts)
    assert len(vocabulary_tables(prepared).walk_plans) > len(vocabulary_tables(plain).walk_plans)
