"""The hostile corpus: inputs built to exhaust time or memory, and what each must end in.

Every case is a generator (sizes are parameters, kept just big enough to
prove the bound) and an expected outcome: ``"ok"`` (a working index) or the
name of the error class it must raise. ``either`` lists outcomes that are
all acceptable, where the first bound to trip depends on the machine's speed
(a state budget on a fast machine, the time limit on a loaded one).

Each case runs in a child process under a 2 GiB address-space limit and
10 s of CPU time, with 60 s of wall clock as a backstop (tests/test_hostile.py); the library gets ``time_limit=``
:data:`TIME_LIMIT` and the CLI ``--time-limit``, so a case that would run
on is stopped by the limit under test rather than by the harness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

TIME_LIMIT = 4.0
LIMITED = ("BuildLimitError", "TimeLimitError")


@dataclass(frozen=True)
class Case:
    name: str
    kind: str            # "regex", "schema", "index_file", "vocab_file", "scenario"
    make: object         # () -> str (regex or schema JSON) or bytes (a file); a scenario: (folder) -> Scenario
    either: tuple = field(default=LIMITED)
    vocab: str = "toy"


def _nested_arrays(depth: int) -> str:
    schema: object = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return json.dumps(schema)


def _ref_cycle() -> str:
    return json.dumps({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                       "$ref": "#/$defs/a"})


def _ref_cycle_through_object() -> str:
    return json.dumps({"$defs": {"node": {"type": "object", "properties": {
        "next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}}, "$ref": "#/$defs/node"})


def _allof_of_anyofs(n: int) -> str:
    """n two-way anyOfs of ``required`` under one allOf: a product of 2**n branches."""
    return json.dumps({"allOf": [{"anyOf": [{"required": [f"a{i}"]}, {"required": [f"b{i}"]}]}
                                 for i in range(n)]})


def _nested_one_ofs(n: int) -> str:
    """n nested oneOfs, each beside a short string: every branch negates the other."""
    schema: object = {"type": "string", "maxLength": 2}
    for _ in range(n):
        schema = {"oneOf": [schema, {"type": "string", "maxLength": 2}]}
    return json.dumps(schema)


def _nested_wide_any_ofs(depth: int, width: int) -> str:
    """anyOfs of arrays nested ``depth`` deep, ``width`` wide: width**depth leaves (5 x 10: a
    7 MB schema whose compilation runs past the corpus's time limit; 5 x 8, 2.4 MB, now
    compiles within it)."""
    schema: object = {"type": "integer"}
    for _ in range(depth):
        schema = {"anyOf": [{"type": "array", "items": schema, "minItems": j} for j in range(width)]}
    return json.dumps(schema)


CASES: list[Case] = [
    # DFAs exponential in the pattern's length
    *[Case(f"exp-ab-{k}", "regex", lambda k=k: f"(a|b)*a(a|b){{{k}}}") for k in (18, 22, 30)],
    *[Case(f"exp-dotstar-{k}", "regex", lambda k=k: f"(.*a){{{k}}}(a|b)*a(a|b){{{k}}}",
           either=("ok",) + LIMITED) for k in (12, 24)],
    Case("exp-classes-20", "regex", lambda: "[ab]*" + "".join(f"[a{c}]" for c in "bcx") * 7,
         either=("ok",) + LIMITED),
    # nested and very large counted repetitions
    Case("nested-count-1000^3", "regex", lambda: "((a{1000}){1000}){1000}"),
    Case("nested-count-alt", "regex", lambda: "(((a|b){100}){100}){100}"),
    Case("count-1e6", "regex", lambda: "a{1000000}"),
    Case("count-1e5-class", "regex", lambda: "[ab]{0,100000}"),
    # deep groups, megabyte patterns, huge alternations
    Case("groups-5000", "regex", lambda: "(" * 5000 + "a" + ")" * 5000,
         either=("RegexError",) + LIMITED),
    Case("groups-50000", "regex", lambda: "(?:" * 50000 + "a" + ")" * 50000,
         either=("RegexError",) + LIMITED),
    Case("literal-1MB", "regex", lambda: "ab" * 500_000),
    Case("alternation-100k", "regex", lambda: "|".join(f"a{i}" for i in range(100_000)),
         either=("ok",) + LIMITED),
    Case("alternation-small-ok", "regex", lambda: "|".join("a" * i for i in range(1, 200)),
         either=("ok",)),
    # schemas
    Case("schema-nested-400", "schema", lambda: _nested_arrays(400),
         either=("UnsupportedSchemaError",) + LIMITED, vocab="qwen2.5"),
    Case("schema-nested-40", "schema", lambda: _nested_arrays(40), either=("ok",) + LIMITED,
         vocab="qwen2.5"),
    Case("schema-ref-cycle", "schema", _ref_cycle,
         either=("SchemaError", "UnsupportedSchemaError", "EmptyLanguageError") + LIMITED),
    Case("schema-ref-recursive-object", "schema", _ref_cycle_through_object,
         either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-enum-30k", "schema",
         lambda: json.dumps({"enum": [f"value-{i}" for i in range(30_000)]}),
         either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-const-huge", "schema", lambda: json.dumps({"const": "x" * 300_000}),
         either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-properties-3000", "schema", lambda: json.dumps({
        "type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3000)},
        "minProperties": 1500, "maxProperties": 2000}),
        either=("ok", "UnsupportedSchemaError") + LIMITED, vocab="qwen2.5"),
    Case("schema-exploding-pattern", "schema", lambda: json.dumps(
        {"type": "string", "pattern": "^(a|b)*a(a|b){30}$"}),
        either=("UnsupportedSchemaError",) + LIMITED, vocab="qwen2.5"),
    Case("schema-pattern-intersection", "schema", lambda: json.dumps(
        {"type": "string", "allOf": [{"pattern": f"^(.*a.{{{k}}})"} for k in range(3, 12)]}),
        either=("ok", "UnsupportedSchemaError") + LIMITED, vocab="qwen2.5"),
    Case("schema-allof-40-patterns", "schema", lambda: json.dumps(
        {"type": "string", "allOf": [{"pattern": f"[a-{chr(100 + i % 20)}]{{{i % 7}}}"}
                                     for i in range(40)]}),
        either=("ok", "UnsupportedSchemaError") + LIMITED, vocab="qwen2.5"),
    Case("schema-multipleof-huge", "schema", lambda: json.dumps(
        {"type": "integer", "multipleOf": 10 ** 300, "minimum": -10 ** 305}),
        either=("ok", "UnsupportedSchemaError") + LIMITED, vocab="qwen2.5"),
    Case("schema-multipleof-odd", "schema", lambda: json.dumps(
        {"type": "integer", "multipleOf": 7919 * 7907}),
        either=("ok", "UnsupportedSchemaError") + LIMITED, vocab="qwen2.5"),
    # combinator products, negations of choices, literal expansion: the schema
    # compiler's own loops (each ran 8 s to minutes past a 2 s limit before they checked it)
    # (the product's regex may also pass max_regex_length first: which bound
    # ends it depends on how fast the compiler writes it)
    Case("schema-allof-anyof-12", "schema", lambda: _allof_of_anyofs(12),
         either=("RegexTooLongError",) + LIMITED, vocab="qwen2.5"),
    Case("schema-allof-anyof-24", "schema", lambda: _allof_of_anyofs(24),
         either=("RegexTooLongError",) + LIMITED, vocab="qwen2.5"),
    Case("schema-nested-oneof-7", "schema", lambda: _nested_one_ofs(7), vocab="qwen2.5"),
    Case("schema-allof-if-14", "schema", lambda: json.dumps({"type": "object", "allOf": [
        {"if": {"required": [f"a{i}"]}, "then": {"required": [f"b{i}"]}, "else": {"required": [f"c{i}"]}}
        for i in range(14)]}), vocab="qwen2.5"),
    Case("schema-enum-30k-objects", "schema", lambda: json.dumps(
        {"type": "object", "properties": {"a": {"type": "integer"}},
         "enum": [{"a": i} for i in range(30_000)]}),
        either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-nested-wide-anyof", "schema", lambda: _nested_wide_any_ofs(5, 10), vocab="qwen2.5"),
]

# Silent narrowings (issue 32): a lone surrogate anywhere once turned off definition
# sharing, and a lazy index then wrote its 32 levels of free values out in full
# (a 26-byte schema grew past 3 GiB); each construct here compiles exactly or is refused.
_SURROGATE_FREE = {"type": "object", "properties": {"a": {}, "b": {"type": "array"}},
                   "description": "\ud800"}
CASES += [
    Case("schema-surrogate-annotation", "schema", lambda: '{"description": "\\ud800"}',
         either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-surrogate-annotation-free-object", "schema", lambda: json.dumps(_SURROGATE_FREE),
         either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-surrogate-pair-pattern", "schema", lambda: json.dumps(
        {"type": "object", "properties": {"e": {"type": "string", "pattern": "\\ud83d\\ude00"}}}),
        either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-surrogate-enum", "schema", lambda: json.dumps(
        {"anyOf": [{"enum": ["a", "\ud800", {"\udfff": [1]}]}, {"type": "object"}]}),
        either=("ok",) + LIMITED, vocab="qwen2.5"),
    Case("schema-surrogate-lone-pattern", "schema", lambda: json.dumps(
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "^\\ud800"}}}),
        either=("UnsupportedSchemaError",), vocab="qwen2.5"),
    *[Case(f"schema-inline-flag-{flag}", "schema", lambda flag=flag: json.dumps(
        {"type": "string", "pattern": f"(?{flag})^a.b$"}), either=("UnsupportedSchemaError",),
        vocab="qwen2.5") for flag in "ism"],
    *[Case(f"schema-pattern-escape-{letter}", "schema", lambda letter=letter: json.dumps(
        {"type": "string", "pattern": f"^abc\\{letter}"}), either=("UnsupportedSchemaError",),
        vocab="qwen2.5") for letter in "ZAzG"],
    Case("schema-surrogate-in-pointer", "schema", lambda: json.dumps(
        {"properties": {"\ud800": {"type": "string", "pattern": "(?i)x"}}}),
        either=("UnsupportedSchemaError",), vocab="qwen2.5"),
    Case("schema-pattern-count-from-none", "schema", lambda: json.dumps(
        {"type": "string", "pattern": "^a{,3}$"}), either=("UnsupportedSchemaError",), vocab="qwen2.5"),
    # a narrowed format's regex refuses a valid member (a quoted local part), and the
    # complement of a narrowed format holds valid values: refused, not dropped or widened
    Case("schema-enum-narrowed-format", "schema", lambda: json.dumps(
        {"enum": ['"q"@example.com', "x@y.com"], "format": "email"}),
        either=("UnsupportedSchemaError",), vocab="qwen2.5"),
    Case("schema-not-narrowed-format", "schema", lambda: json.dumps(
        {"type": "string", "not": {"format": "time"}}), either=("UnsupportedSchemaError",), vocab="qwen2.5"),
    # the validator checks the enum against a 1.5 MB pattern: Python's re compiled it
    # where the time limit could not stop it
    Case("schema-enum-long-pattern", "schema", lambda: json.dumps(
        {"enum": ["x", "y"], "pattern": "a" * 1_500_000}),
        either=("EmptyLanguageError",) + LIMITED, vocab="qwen2.5"),
]


# --- index files that lie about their size, tokenizer files that are not ----------

def _forged_index(change) -> bytes:
    """A real toy index file whose header ``change(header)`` rewrites (checksums fixed)."""
    import struct
    import zlib

    import msgpack

    from tokendfa import Index, Vocabulary
    from tokendfa.runtime.files import _PREAMBLE, _aligned, encode_index

    vocab = Vocabulary([b"a", b"b", None], eos_token_ids=2, name="tiny")
    raw = encode_index(Index.from_regex("(ab)+", vocab, lazy=False), compress=False)
    _, size, _ = _PREAMBLE.unpack_from(raw, 0)
    header = msgpack.unpackb(raw[_PREAMBLE.size:_PREAMBLE.size + size], raw=False)
    data = raw[_aligned(_PREAMBLE.size + size):]
    data = change(header, data)
    header["data_size"], header["data_crc"] = len(data), zlib.crc32(data)
    packed = msgpack.packb(header, use_bin_type=True)
    head = struct.pack("<8sII", b"TOKENDFA", len(packed), zlib.crc32(packed)) + packed
    return head + b"\0" * (_aligned(len(head)) - len(head)) + data


def _runs_bomb(header, data):
    """masks announced as 2**20 x 2**10 words (4 GiB), stored as one run of zeros."""
    import zlib

    import numpy as np

    entry = next(e for e in header["arrays"] if e["name"] == "masks")
    rows, words = 1 << 20, 1 << 10
    stored = zlib.compress(np.array([0, rows * words], dtype="<u4").tobytes())
    entry.update(shape=[rows, words], encoding="runs", nbytes=rows * words * 4,
                 offset=len(data), stored_nbytes=len(stored))
    return data + stored


def _zlib_bomb(header, data):
    """finals announced as 1.5 GB, stored as a deflated stream of zeros (refused unread)."""
    import zlib

    entry = next(e for e in header["arrays"] if e["name"] == "finals")
    size = 1_500_000_000
    stored = zlib.compress(bytes(1 << 24), 9)
    entry.update(shape=[size], encoding="zlib", nbytes=size, offset=len(data),
                 stored_nbytes=len(stored))
    return data + stored


def _huge_raw_shape(header, data):
    entry = next(e for e in header["arrays"] if e["name"] == "masks")
    entry.update(shape=[1 << 40, 1 << 20], nbytes=(1 << 62))
    return data


def _regression(name: str) -> bytes:
    """One of tests/fuzz/mutate.py's hand-made forgeries."""
    from fuzz.mutate import regression_mutants

    return dict(regression_mutants())[name]


FILE_CASES: list[Case] = [
    Case("index-runs-bomb", "index_file", lambda: _forged_index(_runs_bomb),
         either=("IndexFileError",)),
    Case("index-zlib-bomb", "index_file", lambda: _forged_index(_zlib_bomb),
         either=("IndexFileError",)),
    Case("index-huge-shape", "index_file", lambda: _forged_index(_huge_raw_shape),
         either=("IndexFileError",)),
    Case("index-truncated", "index_file", lambda: _forged_index(lambda h, d: d)[:100],
         either=("IndexFileError",)),
    # forgeries with valid checksums (issue #32): a foreign exception or a
    # served token past the vocabulary before the loader checked them
    *[Case(f"index-forged-{name}", "index_file", lambda name=name: _regression(name),
           either=("IndexFileError",))
      for name in ("bool-in-shape", "shape-overflows-int64", "misaligned-offset", "bool-offset",
                   "version-true", "mask-bits-past-vocabulary", "state-0-offers-everything")],
    Case("vocab-empty", "vocab_file", lambda: b"", either=("VocabularyError",)),
    Case("vocab-truncated-json", "vocab_file",
         lambda: b'{"model": {"type": "BPE", "vocab": {"a": 0, "b"', either=("VocabularyError",)),
    Case("vocab-wrong-kind", "vocab_file", lambda: b"\x89PNG\r\n\x1a\n" + bytes(4000),
         either=("VocabularyError",)),
    Case("vocab-json-not-tokenizer", "vocab_file", lambda: b'[1, 2, 3]',
         either=("VocabularyError",)),
]

ALL_CASES = CASES + FILE_CASES

# Paths that are not what they seem, for the CLI and the cache (tests/hostile/path_cases.py).
from hostile.path_cases import path_cases  # noqa: E402

ALL_CASES = ALL_CASES + path_cases(Case)
