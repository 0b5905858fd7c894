"""No silent narrowing: lone surrogates, inline flags, escapes and counts the
dialects read differently, narrowed formats.

Every construct here either compiles exactly (checked against ``jsonschema``
on the JSON texts the regex accepts or refuses, and through an index built
over a byte vocabulary) or is refused with an ``UnsupportedSchemaError``
naming the keyword and its JSON pointer, through the library and the CLI.

Lone surrogates (``"\\ud800"``, valid JSON text, read back by every JSON
parser as that one UTF-16 code unit):

* in an annotation they change nothing, sharing included;
* in an ``enum``, a ``const`` or a property name they are written as their
  escape, ``\\ud800`` (hex digits in either case), the only spelling UTF-8
  text has for them, and what ``json.dumps`` and ``JSON.stringify`` write;
* in a ``pattern`` (raw, ``\\ud800`` alone or ``\\u{d800}``) they are refused:
  a pattern here reads characters, which a lone surrogate is not. An escaped
  pair (``\\ud83d\\ude00``) is the one character it encodes, as in ECMA-262.

In a ``pattern``, what ECMA-262 and Python's ``re`` (jsonschema's) read
differently is refused: inline flags, escaped letters ECMA gives no meaning
(``\\Z``), counts with no lower bound (``x{,3}``). A format asserted
narrower than its RFC is listed in the notes.
"""

from __future__ import annotations

import functools
import json
import re

import jsonschema
import numpy as np
import pytest

from tokendfa import Index, Vocabulary
from tokendfa.analysis.errors import UnsupportedSchemaError
from tokendfa.schema.api import instance_text
from tokendfa.schema.api import regex_from_schema as compile_schema

regex_from_schema = functools.partial(compile_schema, any_depth=2)

# shares pieces (a $ref used in several places): the count of definitions says whether
# sharing held
SHARED = {"$defs": {"item": {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 30}, "tags": {"type": "array", "items": {"type": "string"}},
    "size": {"type": "integer", "minimum": 0, "maximum": 9999}}, "required": ["name"]}},
    "type": "object", "properties": {k: {"$ref": "#/$defs/item"} for k in "abcd"}}


def _matches(schema, text: str) -> bool:
    return re.fullmatch(regex_from_schema(schema).regex, text, re.ASCII) is not None


def _valid(schema, text: str) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))


@functools.lru_cache(maxsize=1)
def _byte_vocabulary() -> Vocabulary:
    """One token per ASCII byte, so that any ASCII text walks token by token."""
    return Vocabulary([bytes([b]) for b in range(128)] + [None], eos_token_ids=128, name="ascii-bytes")


def _index_accepts(index: Index, text: str) -> bool:
    state = index.initial_state
    for byte in text.encode("ascii"):
        if not index.is_allowed(state, byte):
            return False
        state = index.advance(state, byte)
    return index.is_final(state)


# --- surrogates -----------------------------------------------------------------------

def test_a_surrogate_in_an_annotation_changes_nothing():
    plain = compile_schema(SHARED)
    annotated = compile_schema(dict(SHARED, description="\ud800", title="\udfff\ud83d",
                                    examples=["\udc00"], **{"x-odd": {"pattern": "\\ud800"}}))
    assert len(plain.tree_definitions) > 0
    assert annotated.pattern == plain.pattern and annotated.definitions == plain.definitions


SURROGATE_LITERALS = [
    ({"const": "\ud800"}, ['"\\ud800"', '"\\uD800"'], ['"\\ud801"', '"a"', '"\\\\ud800"']),
    ({"enum": ["a", "x\udfffy", 3]}, ['"a"', '"x\\udfffy"', '"x\\uDFFFy"', "3"],
     ['"xy"', '"x\\udffey"', '"\\udfff"']),
    ({"type": "object", "properties": {"\udbff": {"type": "integer"}}, "required": ["\udbff"],
      "additionalProperties": False}, ['{"\\udbff":1}', '{"\\uDBFF":-2}'], ['{}', '{"\\udbff":"1"}']),
    ({"const": {"k\ud800": ["\udc00"]}}, ['{"k\\ud800":["\\udc00"]}'], ['{"k\\ud800":[]}']),
    ({"type": "object", "propertyNames": {"enum": ["\ud800", "b"]}, "maxProperties": 1},
     ['{}', '{"\\ud800":null}', '{"b":[]}'], ['{"a":1}']),
]


@pytest.mark.parametrize("schema,valid,invalid", SURROGATE_LITERALS, ids=lambda v: str(v)[:40])
def test_a_lone_surrogate_in_a_literal_is_written_as_its_escape(schema, valid, invalid):
    for text in valid:
        assert _valid(schema, text), text
        assert _matches(schema, text), text
    for text in invalid:
        assert not _matches(schema, text), text


def test_surrogate_literals_through_an_index_match_the_reference():
    vocab = _byte_vocabulary()
    schema = {"enum": ["a", "\ud800", {"\udc00": 1}]}
    fast = Index.from_schema(schema, vocab, lazy=False)
    reference = Index.from_schema(schema, vocab, lazy=False, method="reference")
    for name, array in reference.arrays.as_dict().items():
        assert np.array_equal(array, fast.arrays.as_dict()[name]), name
    lazy = Index.from_schema(schema, vocab)
    for index in (fast, lazy):
        for text in ('"\\ud800"', '"\\uD800"', '{"\\udc00":1}', '"a"'):
            assert _index_accepts(index, text), text
        assert not _index_accepts(index, '"\\ud801"')


def test_surrogate_literals_share_as_any_other_text():
    odd = dict(SHARED, properties=dict(SHARED["properties"], odd={"const": "\ud800"}))
    even = dict(SHARED, properties=dict(SHARED["properties"], odd={"const": "x"}))
    assert len(compile_schema(odd).tree_definitions) == len(compile_schema(even).tree_definitions) > 0
    assert instance_text(odd, {"odd": "\ud800"}) == '{"odd":"\\ud800"}'
    assert _matches(odd, '{"a":{"name":"n"},"odd":"\\ud800"}')


def test_a_split_surrogate_pair_no_json_text_spells_is_refused():
    # only a Python string holds one: JSON reads "\ud83d\ude00" as one character
    with pytest.raises(UnsupportedSchemaError, match="surrogate pair as two characters"):
        compile_schema({"const": "\ud83d\ude00"})
    assert _matches({"const": json.loads('"\\ud83d\\ude00"')}, '"\U0001F600"')


@pytest.mark.parametrize("pattern,where", [
    ("\\ud800", "/"), ("^a\\udc00", "/"), ("[\\ud800-\\udbff]", "/"), ("\\u{dfff}", "/"),
    ("\ud800", "/"), ("\\ude00\\ud83d", "/"),
])
def test_a_lone_surrogate_in_a_pattern_is_refused(pattern, where):
    with pytest.raises(UnsupportedSchemaError, match=f"'pattern' at {re.escape(where)}: lone surrogate"):
        compile_schema({"type": "string", "pattern": pattern})


def test_a_lone_surrogate_in_a_nested_pattern_names_its_place():
    schema = {"properties": {"a": {"patternProperties": {"\\udead": {}}}}}
    with pytest.raises(UnsupportedSchemaError, match="'patternProperties' at /properties/a: lone surrogate U\\+DEAD"):
        compile_schema(schema)


def test_an_escaped_surrogate_pair_in_a_pattern_is_its_character():
    schema = {"type": "string", "pattern": "^x\\ud83d\\ude00+$"}
    result = compile_schema(schema)
    assert re.fullmatch(result.regex, '"x\U0001F600\U0001F600"')
    assert not re.fullmatch(result.regex, '"x"')
    # and sharing stays on beside it
    shared = dict(SHARED, properties=dict(SHARED["properties"], odd=schema))
    assert len(compile_schema(shared).tree_definitions) == len(compile_schema(SHARED).tree_definitions)


def test_a_surrogate_name_tested_against_a_pattern_is_refused():
    # patternProperties would have to say whether "." matches a lone surrogate (ECMA and
    # Python say yes); our patterns read characters
    schema = {"type": "object", "properties": {"\ud800": {"type": "integer"}},
              "patternProperties": {".": {"type": "string"}}}
    with pytest.raises(UnsupportedSchemaError, match="lone surrogate"):
        compile_schema(schema)


# --- inline flags and escapes no reading makes exact -----------------------------------

@pytest.mark.parametrize("pattern", ["(?i)^abc$", "(?s)^a.b$", "(?m)^a$", "(?is)x", "(?i:a)b",
                                     "a(?s:.)b"])
def test_inline_flags_in_a_pattern_are_refused(pattern):
    with pytest.raises(UnsupportedSchemaError, match=r"'pattern' at /properties/p: .*inline flags"):
        compile_schema({"properties": {"p": {"type": "string", "pattern": pattern}}})


def test_verbose_flag_changes_only_the_writing():
    assert _matches({"type": "string", "pattern": "(?x)^a b c$"}, '"abc"')


@pytest.mark.parametrize("escape", ["\\Z", "\\A", "\\z", "\\G", "\\h", "\\R", "\\K", "\\e", "\\a", "\\Q", "\\X"])
def test_an_escape_no_dialect_agrees_on_is_refused_not_read_as_a_letter(escape):
    with pytest.raises(UnsupportedSchemaError, match=rf"'pattern' at /: escape {re.escape(escape)}"):
        compile_schema({"type": "string", "pattern": f"^abc{escape}"})


@pytest.mark.parametrize("pattern", ["^a{,2}$", "x{,10}", "(ab){,3}c"])
def test_a_count_with_no_lower_bound_is_refused(pattern):
    # ECMA-262 reads a{,2} as the text "a{,2}" (or refuses it with the u flag), Python's re as a{0,2}
    with pytest.raises(UnsupportedSchemaError, match=r"'pattern' at /: quantifier \{,"):
        compile_schema({"type": "string", "pattern": pattern})
    # where both read the braces alike, they still compile
    assert _matches({"type": "string", "pattern": "^a{2,}b{1,2}[{,2}]$"}, '"aaab,"')
    assert _matches({"type": "string", "pattern": "^a{ 2}$"}, '"a{ 2}"')


def test_known_escapes_still_read():
    schema = {"type": "string", "pattern": "^\\d\\w\\s\\x41\\u0042\\t\\/\\.\\-$"}
    assert _matches(schema, '"1a A B\\t/.-"'.replace(" A B", " AB"))


def test_index_from_regex_honours_its_own_flags():
    # Index.from_regex reads Python syntax: (?i) and \Z mean what they mean there
    vocab = _byte_vocabulary()
    index = Index.from_regex("(?i)abc", vocab, lazy=False)
    assert _index_accepts(index, "aBc") and not _index_accepts(index, "abd")
    index = Index.from_regex("(?s)a.b", vocab, lazy=False)
    assert _index_accepts(index, "a\nb")
    from tokendfa.analysis.errors import RegexError
    for pattern in ("abc\\Z", "\\Aabc", "abc\\z"):
        with pytest.raises(RegexError):
            Index.from_regex(pattern, vocab, lazy=False)


# --- through the CLI --------------------------------------------------------------------

@pytest.mark.parametrize("schema,error", [
    ('{"type": "string", "pattern": "(?i)^abc$"}', "inline flags"),
    ('{"type": "string", "pattern": "^abc\\\\Z"}', "escape \\Z"),
    ('{"type": "string", "pattern": "\\\\ud800"}', "lone surrogate"),
    ('{"description": "\\ud800", "enum": ["\\ud800", "a"]}', None),
])
def test_cli(tmp_path, capsys, schema, error):
    from tokendfa.cli import main

    path = tmp_path / "schema.json"
    path.write_text(schema)
    out = tmp_path / "out.tdfa"
    status = main(["build", "--schema", str(path), "--vocab", "qwen2.5", "-o", str(out)])
    stderr = capsys.readouterr().err
    if error is None:
        assert status in (0, None) and out.exists(), stderr
        return
    assert status == 2 and not out.exists()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tokendfa: error: ") and error in lines[0], stderr
    assert "at /" in lines[0]


def test_lenient_mode_widens_what_strict_mode_refuses_and_says_so():
    for pattern in ("(?i)^abc$", "^abc\\Z", "\\ud800", "^a{,2}$"):
        result = compile_schema({"type": "string", "pattern": pattern}, lenient=True)
        assert len(result.widenings) == 1 and "'pattern' at / ignored" in result.widenings[0]
        assert re.fullmatch(result.regex, '"ABC"')


def test_an_index_of_a_schema_text_holding_a_raw_surrogate_saves_and_loads(tmp_path):
    # a Python str may hold the surrogate itself (not its escape); the file's metadata is UTF-8
    vocab = _byte_vocabulary()
    text = '{"enum": ["\ud800", "a"], "description": "\udfff"}'
    for index in (Index.from_schema(text, vocab, lazy=False), Index.from_schema(text, vocab).complete()):
        index.save(tmp_path / "x.tdfa")
        loaded = Index.load(tmp_path / "x.tdfa", vocab)
        assert json.loads(loaded.metadata["schema"]) == json.loads(text)
        assert _index_accepts(loaded, '"\\ud800"')
    lenient = Index.from_schema({"properties": {"\ud800": {"type": "string", "pattern": "(?i)x"}}},
                                vocab, lazy=False, lenient=True)
    lenient.save(tmp_path / "y.tdfa")
    assert "/properties/\\ud800" in Index.load(tmp_path / "y.tdfa", vocab).metadata["widenings"][0]


def test_cli_names_a_pointer_holding_a_surrogate_on_one_line(tmp_path, capsys):
    from tokendfa.cli import main

    path = tmp_path / "schema.json"
    path.write_text('{"properties": {"\\ud800": {"type": "string", "pattern": "(?i)x"}}}')
    status = main(["build", "--schema", str(path), "--vocab", "qwen2.5", "-o", str(tmp_path / "o.tdfa")])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "inline flags" in lines[0], lines


def test_a_narrowed_format_is_listed_in_the_notes():
    result = compile_schema({"properties": {"to": {"type": "string", "format": "email"},
                                            "at": {"type": "string", "format": "ipv4"}},
                             "additionalProperties": False})
    assert [n for n in result.notes if n.startswith("format")] == ["format 'email' at /properties/to is narrowed: no quoted local parts or "
                            "address literals; host names of up to 4 labels of up to 62 characters "
                            "or up to 8 labels of up to 30 (a longer valid one is refused)"]
    # what the note says is refused is valid to jsonschema's own checker
    assert not re.fullmatch(result.regex, '{"to":"\\"a b\\"@example.com"}')


# a value a narrowed format's regex refuses is checked against the full format, or refused
QUOTED = '"q"@example.com'     # a valid e-mail address (quoted local part) the regex refuses


@pytest.mark.parametrize("schema", [{"enum": [QUOTED, "x@y.com"], "format": "email"},
                                    {"const": QUOTED, "format": "email"},
                                    {"enum": ["http://[::1]/", "http://a/"], "format": "uri"},
                                    {"properties": {"to": {"enum": [QUOTED], "format": "email"}}}])
def test_a_literal_a_narrowed_format_cannot_settle_is_refused_not_dropped(schema):
    with pytest.raises(UnsupportedSchemaError, match=r"^unsupported keyword 'format' at /.*narrowed"):
        regex_from_schema(schema)


def test_lenient_mode_leaves_such_a_literal_out_and_says_so():
    result = regex_from_schema({"enum": [QUOTED, "x@y.com"], "format": "email"}, lenient=True)
    assert re.fullmatch(result.regex, '"x@y.com"') and not re.fullmatch(result.regex, json.dumps(QUOTED))
    assert [n for n in result.notes if QUOTED in n and "left out" in n], result.notes


@pytest.mark.parametrize("schema, kept, refused", [
    # a leap second is valid at 23:59 UTC, whatever the offset; the regex takes only Z
    ({"enum": ["00:59:60+01:00", "23:59:60+01:00", "23:59:60Z"], "format": "time"},
     ["00:59:60+01:00", "23:59:60Z"], ["23:59:60+01:00"]),
    ({"enum": ["2016-12-31T18:59:60-05:00", "2016-12-31T23:59:60-05:00"], "format": "date-time"},
     ["2016-12-31T18:59:60-05:00"], ["2016-12-31T23:59:60-05:00"]),
    # a label of 63 characters and 5 labels of 40: valid host names beyond both families
    ({"enum": ["a" * 63 + ".com", ".".join(["b" * 40] * 5), "a" * 64, "-a.com"], "format": "hostname"},
     ["a" * 63 + ".com", ".".join(["b" * 40] * 5)], ["a" * 64, "-a.com"]),
    ({"enum": ["x@" + "a" * 63 + ".com", "x@a..com", "x y@a.com"], "format": "email"},
     ["x@" + "a" * 63 + ".com"], ["x@a..com", "x y@a.com"]),
])
def test_a_literal_the_full_format_settles_compiles_exactly(schema, kept, refused):
    result = regex_from_schema(schema)
    for value in kept:
        assert re.fullmatch(result.regex, json.dumps(value)), value
    for value in refused:
        assert not re.fullmatch(result.regex, json.dumps(value)), value
    assert not [n for n in result.notes if "left out" in n]


@pytest.mark.parametrize("name, valid", [("time", "00:59:60+01:00"), ("date-time", "2016-12-31T18:59:60-05:00"),
                                         ("uri", "http://[::1]/"), ("hostname", "a" * 63)])
def test_the_negation_of_a_narrowed_format_is_refused_or_widened(name, valid):
    # its regex's complement holds valid values, which `not` must refuse
    schema = {"type": "string", "not": {"format": name}}
    with pytest.raises(UnsupportedSchemaError, match=f"^unsupported keyword 'not' at /not: negation of format '{name}'"):
        regex_from_schema(schema)
    result = regex_from_schema(schema, lenient=True)
    assert result.widenings and re.fullmatch(result.regex, json.dumps(valid))


def test_one_of_a_leap_second_and_its_format_refuses_the_value_both_take():
    # both branches take "00:59:60+01:00", so oneOf refuses it (the narrowed
    # checker read the first as no time, proved the branches apart and took it)
    result = regex_from_schema({"oneOf": [{"const": "00:59:60+01:00"}, {"type": "string", "format": "time"}]})
    assert not re.fullmatch(result.regex, '"00:59:60+01:00"')
    assert re.fullmatch(result.regex, '"12:00:00Z"')


PAIR = "\ud83d\ude00"   # a Python string only: JSON reads the two escapes as one character


@pytest.mark.parametrize("schema, where", [
    ({"const": PAIR}, "'const' at /"),
    ({"properties": {"a": {"enum": ["x", PAIR]}}}, "'enum' at /properties/a"),
    ({"properties": {"a": {"allOf": [{"const": {"k": [PAIR]}}]}}}, "'const' at /properties/a/allOf/0"),
    ({"properties": {PAIR: {"type": "null"}}}, "'properties' at /"),
    ({"properties": {"b": {"properties": {"x": {}}, "required": [PAIR]}}}, "'required' at /properties/b"),
    ({"type": "object", "propertyNames": {"enum": [PAIR]}}, "'propertyNames' at /"),
    ({"properties": {"a": {"$ref": "#/$defs/d"}}, "$defs": {"d": {"enum": [PAIR, 1]}}}, "'$ref' at /properties/a"),
])
def test_a_split_surrogate_pair_is_refused_naming_its_keyword_and_pointer(schema, where):
    with pytest.raises(UnsupportedSchemaError, match=f"^unsupported keyword {re.escape(where)}: the string "
                       r"'\\ud83d\\ude00' holds a surrogate pair as two characters"):
        compile_schema(schema)
