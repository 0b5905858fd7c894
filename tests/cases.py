"""The one table of regex cases every build path is held to.

Each case names a pattern, strings it must match and strings it must not.
The toy vocabulary cannot spell every pattern: there the builds must raise
:class:`~tokendfa.analysis.errors.VocabularyCoverageError`, exactly when the brute
force finds no way to finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    pattern: str
    matches: tuple[str, ...]
    rejects: tuple[str, ...] = ()
    alphabet: str = field(default="", compare=False)  # extra characters for random strings


URL = r"(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?"

CASES = [
    Case("digits", r"[0-9]+", ("1", "250", "0012"), ("", "a", "1a")),
    Case("phone", r"[0-9]{3}-[0-9]{4}", ("555-1234",), ("5551234", "55-1234", "555-12345")),
    Case("optional_fraction", r"a(\.[0-9]+)?", ("a", "a.5", "a.125"), ("a.", ".5", "aa")),
    Case("number", r"-?[0-9]+(\.[0-9]+)?", ("1", "-12", "1.5", "-0.25"), ("-", "1.", ".5", "--1")),
    Case("repeated_group", r"(ab)+", ("ab", "abab", "ababab"), ("", "a", "aba", "abb")),
    Case("alternation_prefix", r"a|abc", ("a", "abc"), ("ab", "abca", "")),
    Case("bounded_repeat", r"[a-c]{2,4}x?", ("ab", "abca", "cccx", "acx"), ("a", "abcab", "x")),
    Case("keywords", r"(true|false|null)", ("true", "false", "null"), ("nul", "True", "truefalse")),
    Case("quoted", r'"[^"]*"', ('""', '"abc"', '"é 日"', '"a\nb"'), ('"', '"a"b"', 'a')),
    Case("json_string", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
         ('""', '"a b"', r'"say \"hi\""', r'"\u00e9"', '"日本"'), ('"\\x"', '"a\nb"', '"')),
    Case("unicode_literals", r"é|日本", ("é", "日本"), ("e", "日", "本", "é日本")),
    Case("unicode_class", r"[à-ÿ]+", ("é", "àÿ", "ñandú"[0]), ("a", "é1", "Ā")),
    Case("negated_class", r"[^a-c]{1,3}", ("x", "日本", "😀x"), ("a", "xyzw", "")),
    Case("dot", r"x.y", ("xay", "x日y", "x😀y", "x y"), ("x\ny", "xy", "xaay")),
    Case("emoji", r"(😀|ok)+", ("😀", "ok😀ok"), ("o", "😁")),
    Case("empty_alternative", r"(a|)b", ("ab", "b"), ("a", "aab")),
    Case("email", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}", ("ada@math.org", "a.b@c.io"),
         ("ada@org", "@a.io", "ADA@x.org")),
    Case("json_object", r'\{"id": [0-9]{1,5}, "name": "[a-zA-Z ]{0,10}"(, "ok": (true|false))?\}',
         ('{"id": 12, "name": "Ada L"}', '{"id": 0, "name": "", "ok": true}'),
         ('{"id": 123456, "name": ""}', '{"id": 1, "name": "x", "ok": nope}')),
    Case("iso_date", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
         ("2024-02-29", "1999-12-31"), ("2024-13-01", "2024-00-10", "2024-1-1")),
    Case("url", URL, ("https://example.com", "www.a-b.org/path/x", "x.io"), ("https:/x", "")),
    Case("case_insensitive", r"(?i)yes|no", ("yes", "YeS", "No"), ("y", "nope")),
    Case("anchored", r"^ab$", ("ab",), ("a", "abab")),
    Case("empty_pattern", r"", ("",), ("a",)),
    Case("key_list", r'\{"id":[0-9]+,"created_at":"[0-9-]+","owner":"[a-z]+","status":(open|closed),'
         r'"labels":\[("[a-z]+"(,"[a-z]+")*)?\],"parent_id":(null|[0-9]+)\}',
         ('{"id":1,"created_at":"2024-01-02","owner":"ada","status":open,"labels":[],'
          '"parent_id":null}',
          '{"id":7,"created_at":"1-2","owner":"b","status":closed,"labels":["x","yz"],'
          '"parent_id":42}'),
         ('{"id":1}', '{"id":1,"created_at":"2024","owner":"Ada","status":open,"labels":[],'
          '"parent_id":null}')),
    Case("whitespace_run", r"a[ \t\n]{0,4}b", ("ab", "a \t\nb", "a    b"), ("a     b", "a_b")),
]
