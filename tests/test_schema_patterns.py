"""Plain ``pattern`` values read straight into trees equal what the general path makes.

``strings.translate_pattern`` reads a plain pattern (anchored at both ends,
ASCII characters and classes, each repeated or not) itself and builds its
tree; every other pattern goes through Python's parser and the regex text.
Trees are interned, so the two paths agree when they return the same node.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from tokendfa.schema import strings
from tokendfa.schema.regexes import from_text

BENCH = Path(os.environ.get("TOKENDFA_JSONSCHEMABENCH",
                            Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"))

# (min_length, max_length) bounds each pattern is read under: none, within
# its widths, folded into its one variable run, excluding every length, equal
BOUNDS = [(0, None), (1, None), (0, 12), (3, 5), (5, 3), (2, 2), (0, 0), (10, None), (0, 300)]

PLAIN = [
    "^a$", "^ab$", "^[a]$", "^[.]$", r"^\.$", "^a{0}b$", "^a{1}$", "^[a-]$", "^[-a]$", r"^[a\-z]+$",
    r"^[\d.]+$", r"^[\w-]{3,5}$", r"^\d+\.\d+$", "^x?y*z+$", "^[A-Z]{2}[0-9]{2,}$", "^ $", "^[!-!]$",
    r"^[\]]$", r"^\/$", "^/$", "^[a-z]{0,1000}$", r"^\d{4}-\d{2}-\d{2}$", r"^[a-zA-Z0-9_\.]+$",
    "^[1-9][0-9]*$", "^[a-z][a-z0-9_]*$", "^[#-Z]+$", "^[ -!]+$", "^[a-c]{2,4}[x]?$",
    # classes holding '"' or '\\', written as escapes beside the rest
    '^[a"]$', r"^[a\\]+$", "^[ -~]+$", r"^[a\"]$", r"^\'\ \_$",
    '^[ !"#$%&\\\'()*+,\\-./0-9:;<=>?@A-Z\\[\\\\\\]\\^_`a-z{\\|}]+$',   # Github_easy:0
]
# not plain: the general path reads them (or refuses them, as before)
NOT_PLAIN = [
    "a", "^a", "a$", "^$", r"^a\$", "^[]$", "^[^a]$", "^a|b$", "^(a)$", "^(?:a)+$", "^a+?$", "^a**$",
    "^a{,3}$", "^a{2,1}$", "^a{1001}$", "^.$", r"^\s$", r"^\n$", r"^\\$", r"^[\\]$", '^"$', '^["]$',
    "^é$", "^[a-é]$", r"^\u0041$", r"^[\d-z]$", "^[[]$", "^[#-[]+$", "^a{x}$", "^]$", "^}$",
    r"^\"$", r"^\1$", r"^[\1]$", r"^\a$", "^" + "a" * 2000 + "$",
]


@pytest.mark.parametrize("pattern", PLAIN)
@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_plain_pattern_is_the_general_tree(pattern, bounds):
    fast = strings._plain_pattern(pattern, *bounds)
    if fast is strings._NOT_PLAIN:
        # a plain pattern is left to the general path only where the lengths
        # cannot be folded into it, which it refuses with its message
        assert bounds != (0, None)
        with pytest.raises(strings.PatternUnsupported):
            strings._translate_pattern_text(pattern, *bounds)
        return
    assert fast is from_text(strings._translate_pattern_text(pattern, *bounds))


@pytest.mark.parametrize("pattern", NOT_PLAIN)
def test_other_patterns_take_the_general_path(pattern):
    assert strings._plain_pattern(pattern, 0, None) is strings._NOT_PLAIN


def test_lengths_that_cannot_be_folded_are_left_to_the_general_path():
    # two variable runs: the general path refuses the lengths with a message
    assert strings._plain_pattern("^a*b*$", 0, 3) is strings._NOT_PLAIN
    with pytest.raises(strings.PatternUnsupported):
        strings.translate_pattern("^a*b*$", 0, 3)
    # no text of the lengths: nothing, on both paths
    assert strings._plain_pattern("^a{4}$", 0, 3) is None
    assert from_text(strings._translate_pattern_text("^a{4}$", 0, 3)) is None


def _corpus_patterns() -> list[str]:
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.add(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    found.update(name for name in value if isinstance(name, str))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                schema = json.loads(line).get("schema")
                if isinstance(schema, str):
                    try:
                        schema = json.loads(schema)
                    except ValueError:
                        continue
                walk(schema)
    return sorted(found)


def test_every_corpus_pattern_reads_the_same_on_both_paths():
    patterns = _corpus_patterns()
    if not patterns:
        pytest.skip("JSONSchemaBench not found (set TOKENDFA_JSONSCHEMABENCH)")
    plain = 0
    for pattern in patterns:
        for bounds in BOUNDS:
            fast = strings._plain_pattern(pattern, *bounds)
            if fast is strings._NOT_PLAIN:
                continue
            plain += 1
            assert fast is from_text(strings._translate_pattern_text(pattern, *bounds)), (pattern, bounds)
    # about two in five of the corpus's patterns are plain (857 of 2,119 when written)
    assert plain >= len(patterns) // 4
