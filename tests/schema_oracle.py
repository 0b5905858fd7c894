"""The ``jsonschema`` package as the judge of a schema's regex, on chosen instances.

:func:`agrees` compiles a schema and checks every instance both ways: a value
``jsonschema`` accepts must match in the form the regex writes it
(:func:`~tokendfa.schema.api.instance_text`), and a value it refuses must not
match in compact form (nor, when that differs, in our key order).
"""

from __future__ import annotations

import json
import re

import jsonschema

from tokendfa.schema.api import instance_text, regex_from_schema


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def agrees(schema, values, *, must_accept=(), **options) -> str:
    """Compile ``schema`` (strict: no widening) and check ``values`` against ``jsonschema``.

    ``must_accept`` are values the test expects to be valid (so a test cannot
    pass with only invalid instances). Returns the regex.
    """
    result = regex_from_schema(schema, **options)
    assert not result.widenings, result.widenings
    regex = re.compile(result.regex, re.ASCII)
    validator = jsonschema.validators.validator_for(schema)(schema)
    for value in must_accept:
        assert validator.is_valid(value), f"{compact(value)} is expected valid under {schema}"
    for value in list(values) + list(must_accept):
        if validator.is_valid(value):
            text = instance_text(schema, value)
            assert regex.fullmatch(text), f"valid {text} refused"
        else:
            for text in {compact(value), instance_text(schema, value)}:
                assert not regex.fullmatch(text), f"invalid {text} accepted"
    return result.regex
