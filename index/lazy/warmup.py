"""A warm-up walk: JSON texts the lazy engine serves once at start-up, so that
its per-vocabulary plans for the contexts common to JSON generation are made.

A cold token row reads two per-vocabulary caches that hold nothing of one
schema: walk plans, keyed by a row's live first bytes and loop set
(:mod:`tokendfa.lazy.plans`), and loop masks, keyed by a loop set and the
first bytes into it (:func:`tokendfa.lazy.tables._loop_bits`). The same keys
come back in schema after schema (after ``:`` in a closed object, inside a
free string, after a number's digits, before ``,`` or ``}``); in a long-lived
server each is made once, in a fresh process (or in each child a prepared
parent forks) inside the first schemas' cold steps.

:data:`WARM_UP` holds a few schemas of the common kinds, each with compact
instances written from JSON Schema in general (nullable values, formats,
bounded and free strings, a string of no whitespace, integers and numbers
with and without a minimum, booleans, arrays, nested and free objects,
escapes and wide characters, and a declared key's prefix inside an open
object's key);
:func:`walk_texts` serves every state of an instance's walk. The runtime's
preparer (``tokendfa.runtime.index.prepare_builds``, what
:meth:`Vocabulary.prepare` runs) compiles each schema and walks its
instances. The walk picks, at each state, the shortest allowed token that
spells the next bytes of the text: no tokenizer needed (a lazy server never
loads the encoder), and the states it visits are the text's states at every
byte, those any tokenization of the text visits. prepare() also makes the
walk plans of the rows with one live printable byte (:func:`make_key_plans`),
what a declared key's next character needs.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

import numpy as np

from ..analysis.errors import TokenNotAllowedError
from ..vocab.vocabulary import Vocabulary
from .plans import _walk_plan
from .tables import vocabulary_tables

if TYPE_CHECKING:
    from .tables import _VocabularyTables

# The bytes whose one-byte walk plans prepare() makes (make_key_plans): the
# printable ASCII characters. A row with one live byte is a declared key's
# next character (or a literal's); on 84 JSONSchemaBench schemas outside
# MaskBench's sample, 9 of the 10 walk plans most schemas built were such
# rows ('c' in 27 schemas, 's', '_' in 26, 'l' in 22, '.' in 19, 't' 18).
_KEY_BYTES = np.arange(0x20, 0x7F, dtype=np.int64)


# The characters after a declared key's prefix whose plans the last
# warm-up schema makes (see there): every character that followed one in 168 JSONSchemaBench
# schemas (MaskBench's sample and 42 others, benchmarks/warm_plan_keys.py:
# letters of both cases, digits, '_', '-'); each plan ~76 kB on Qwen2.5.
_KEY_CHARACTERS = string.ascii_letters + string.digits + "_-"


class WarmUp(NamedTuple):
    """A schema and compact instances of it to walk."""

    schema: Any
    instances: tuple[str, ...]


# The longest token tried at each step (each try is a dict lookup); the
# walk takes the shortest that is allowed, one byte wherever a token spells
# it (see walk_texts).
_LONGEST = 16

_OBJECT_INSTANCES = (
    '{"id":"a1","name":"Alice Smith","age":31,"score":4.75,"active":true,"tags":["x","y"],'
    '"address":{"city":"Paris","zip":"75001"},"notes":null}',
    '{"count":0,"ratio":-0.5,"total":12e3,"items":[{"key":"k","value":1},{"key":"v2","value":-2.5}],'
    '"empty":{},"none":[],"ok":false,"text":"line\\nbreak \\"quoted\\" \\u00e9t\\u00e9 caf\\u00e9"}',
    '{"description":"A longer sentence, with punctuation: commas; colons and (parentheses).",'
    '"url":"https://example.com/path?q=1&r=2","email":"user@example.org","date":"2024-01-31",'
    '"when":"2024-01-31T12:30:00Z","uuid":"123e4567-e89b-12d3-a456-426614174000","unicode":"日本語 ünï"}',
)

WARM_UP: tuple[WarmUp, ...] = (
    # Free objects and free values at every depth: keys, strings, numbers, literals, nesting.
    WarmUp({"type": "object"}, _OBJECT_INSTANCES),
    WarmUp({}, ('[1,-2,3.5,true,false,null,"s",{"a":[]}]', '"text"', "-12.5e-3", "null")),
    # Closed objects of the common property kinds (the keys differ from schema
    # to schema; what follows each ':' is what recurs). Keys in the declared
    # order, as the schema compiler serves them.
    WarmUp({"type": "object",
            "properties": {"name": {"type": "string"}, "title": {"type": "string", "maxLength": 255},
                           "code": {"type": "string", "maxLength": 32}, "id": {"type": "string", "minLength": 1},
                           "body": {"type": "string", "maxLength": 1024},
                           "note": {"type": ["string", "null"]}, "count": {"type": "integer"},
                           "size": {"type": "integer", "minimum": 0}, "rank": {"type": ["integer", "null"]},
                           "price": {"type": "number"}, "weight": {"type": "number", "minimum": 0},
                           "share": {"type": ["number", "null"]}, "on": {"type": "boolean"},
                           "off": {"type": ["boolean", "null"]},
                           "kind": {"type": "string", "enum": ["alpha", "beta", "gamma"]},
                           "tags": {"type": "array", "items": {"type": "string"}},
                           "ids": {"type": "array", "items": {"type": "integer"}},
                           "values": {"type": "array", "items": {"type": "number"}},
                           "created": {"type": "string", "format": "date-time"},
                           "day": {"type": "string", "format": "date"},
                           "link": {"type": "string", "format": "uri"},
                           "mail": {"type": "string", "format": "email"},
                           "uid": {"type": "string", "format": "uuid"},
                           "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                           "child": {"type": "object", "properties": {"key": {"type": "string"},
                                                                      "value": {"type": "number"}},
                                     "required": ["key"], "additionalProperties": False},
                           "items": {"type": "array", "items": {"type": "object"}}},
            "additionalProperties": False},
           ('{"name":"Widget Pro 2","title":"A short title","code":"AB-12","id":"x","body":"Some text. More text!",'
            '"note":null,"count":-3,"size":42,"rank":null,"price":19.99,"weight":0.5,"share":null,"on":true,'
            '"off":null,"kind":"beta","tags":["red","green"],"ids":[1,22,333],"values":[1.5,-2,3e2],'
            '"created":"2023-11-05T08:15:30.123+02:00","day":"2023-11-05","link":"http://a.b/c",'
            '"mail":"a.b@c.de","uid":"00000000-0000-4000-8000-000000000000","meta":{"k":"v","k2":"w"},'
            '"child":{"key":"k","value":7},"items":[{"a":1},{}]}',
            '{"name":"","note":"n","count":0,"size":0,"rank":7,"price":-1.25,"weight":100,"share":0.333,'
            '"on":false,"off":true,"kind":"gamma","tags":[],"ids":[],"values":[],"meta":{},"child":{"key":"only"},'
            '"items":[]}')),
    # Every property required (function-call arguments, records): a value is
    # then followed by ',' alone, the last (in a closed object) by '}' alone;
    # each kind of value once in the middle and once last.
    WarmUp({"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "c": {"type": "string"},
                           "d": {"type": "boolean"}, "e": {"type": "integer", "minimum": 0},
                           "f": {"type": "number", "minimum": 0}, "g": {"type": ["integer", "null"]},
                           "h": {"type": ["number", "null"]}, "i": {"type": ["string", "null"]},
                           "j": {"type": "array", "items": {"type": "integer"}},
                           "k": {"type": "array", "items": {"type": "string"}},
                           "l": {"type": "object", "properties": {"m": {"type": "number"}}, "required": ["m"]},
                           "n": {"type": "integer"}},
            "required": list("abcdefghijkln"), "additionalProperties": False},
           ('{"a":12,"b":3.25,"c":"x y","d":true,"e":7,"f":0.5,"g":null,"h":-1e5,"i":"z","j":[3,40],'
            '"k":["p","q"],"l":{"m":2.5},"n":-6}',
            '{"a":-1,"b":-20,"c":"","d":false,"e":0,"f":12,"g":5,"h":null,"i":null,"j":[],"k":[],'
            '"l":{"m":-3E+2},"n":10}')),
    WarmUp({"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"}},
            "required": ["x", "y"]},
           ('{"x":"v","y":1.5}', '{"x":"w","y":-20}', '{"x":"","y":3e-2}')),
    WarmUp({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}},
            "required": ["x", "y"]},
           ('{"x":12,"y":"a b"}',)),
    WarmUp({"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"}},
            "required": ["x", "y"], "additionalProperties": False},
           ('{"x":"v","y":1.5}', '{"x":"w","y":-20}', '{"x":"","y":3e-2}')),
    WarmUp({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "string"}},
            "required": ["x", "y"], "additionalProperties": False},
           ('{"x":12,"y":"a b"}', '{"x":-0.5,"y":""}')),
    # Inside an open object's key (additionalProperties not false: JSON
    # Schema's default), after a prefix of one declared name, that name's
    # next character leaves the free key's loop and every other character
    # stays in it: a walk plan for each such character (the row's live bytes
    # '"', '\\' and it). Half the walk plans a prepared process's schemas
    # built were these (58 of 109 on 84 held-out JSONSchemaBench schemas, 57
    # of 112 on MaskBench's sample), each made in a cold step (~0.1 ms of it
    # in a fresh fork). The texts stop in that state.
    WarmUp({"type": "object", "properties": {c + c: {"type": "integer"} for c in _KEY_CHARACTERS}},
           tuple('{"' + c for c in _KEY_CHARACTERS)),
    # A string of no whitespace ("^\\S+$", "^[^\\s]+$": 42 of JSONSchemaBench's
    # 7,952 schemas have a pattern with \S or [^\s]). Its loop set (printable
    # ASCII but the space, '"' and '\\') is no other warm-up's: its tail set,
    # the rest packed and the walk plans of its rows were made in one cold
    # step (Github_medium o1's step 7: 4.25 -> 1.60 ms in a fresh fork, paired
    # best of 5; ~5-8 ms and ~0.6 MB more in prepare()).
    WarmUp({"type": "object", "properties": {"token": {"type": "string", "pattern": "^\\S+$"}},
            "required": ["token"], "additionalProperties": False},
           ('{"token":"a-1.b/c_d"}',)),
)


def make_key_plans(tables: "_VocabularyTables") -> None:
    """The walk plans of the rows whose one live first byte is a printable
    ASCII character, made in the vocabulary's plan cache (every token
    starting with that byte once in all: ~6 MB on Qwen)."""
    for byte in _KEY_BYTES:
        _walk_plan(tables, _KEY_BYTES[byte - 0x20:byte - 0x1F])


def _single_byte_tokens(vocabulary: Vocabulary) -> np.ndarray:
    """The lowest id of the token that is each byte alone (-1 where none),
    from the lazy tables: the vocabulary's lookup by bytes costs ~250 ms to
    make on Gemma 3's 262,144 tokens, which a lazy server never uses."""
    tables = vocabulary_tables(vocabulary)
    ids = np.flatnonzero(tables.lengths == 1)[::-1]
    found = np.full(256, -1, dtype=np.int64)
    found[tables.columns[0][ids]] = ids   # the last write of a byte is its lowest id
    return found


def walk_texts(index, vocabulary: Vocabulary, texts: Iterable[str]) -> int:
    """Serve every state the texts' walks through ``index`` reach (a lazy
    index: each cold row fills the per-vocabulary plans it needs). Each step
    takes the shortest allowed token that spells the next bytes, so that the
    walk serves the state at every byte where the vocabulary spells the byte
    alone: the states of any tokenization of the text (a model's BPE tokens
    split digits and punctuation, where the longest tokens passed over ~30%
    of the states; measured with benchmarks/warm_plan_keys.py). A text whose
    next bytes no allowed token spells stops there. Returns the steps taken."""
    single = _single_byte_tokens(vocabulary)
    steps = 0
    for text in texts:
        data = text.encode("utf-8")
        state, at = index.initial_state, 0
        while at < len(data):
            index.get_mask(state)
            token, end = int(single[data[at]]), at + 1
            if token < 0 or not index.is_allowed(state, token):
                # no one-byte token (a wide character in a vocabulary without
                # byte tokens): the vocabulary's lookup by bytes, made on first use
                for end in range(at + 1, min(len(data), at + _LONGEST) + 1):
                    token = next((t for t in vocabulary.ids_for_bytes(data[at:end]) if index.is_allowed(state, t)),
                                 None)
                    if token is not None:
                        break
                else:
                    break
            try:
                state = index.advance(state, token)
            except TokenNotAllowedError:
                break
            at, steps = end, steps + 1
        index.get_mask(state)
    return steps
