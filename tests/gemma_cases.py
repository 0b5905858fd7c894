"""What the real-model tests ask Gemma 3 270M for (tests/test_vllm.py, and
the transformers test in tests/test_generation.py).

It is a base model: each prompt starts the text the schema describes. Every
string and array is bounded and every number has few digits, so each
generation can end (EOS) well within ``MAX_TOKENS``; a test that finds a text
cut short by the limit has found a real problem, not a long answer.
"""

from __future__ import annotations

MAX_TOKENS = 120

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "email": {"type": "string", "pattern": "^[a-z]{1,10}@[a-z]{1,10}\\.com$"},
        },
        "required": ["name", "age", "email"],
        "additionalProperties": False,
    },
    "weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 16},
            "condition": {"enum": ["sunny", "cloudy", "rain", "snow"]},
            "celsius": {"type": "integer", "minimum": -50, "maximum": 50},
            "wind": {"enum": ["low", "high", None]},
        },
        "required": ["city", "condition", "celsius", "wind"],
        "additionalProperties": False,
    },
    "points": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"x": {"type": "integer", "minimum": -99, "maximum": 99},
                           "y": {"type": "integer", "minimum": -99, "maximum": 99}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "minItems": 1,
        "maxItems": 3,
    },
    "order": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 9999},
            "items": {"type": "array", "items": {"type": "string", "maxLength": 12},
                      "minItems": 1, "maxItems": 3},
            "paid": {"type": "boolean"},
            "note": {"type": ["string", "null"], "maxLength": 16},
        },
        "required": ["id", "items", "paid", "note"],
        "additionalProperties": False,
    },
}

PROMPTS = {
    "person": ["A customer record in JSON: ", "Employee: "],
    "weather": ["Today's weather report as JSON: ", "Forecast for Paris: "],
    "points": ["The triangle's corners as a JSON list: ", "Points: "],
    "order": ["Order #1234 in JSON: ", "The shopping cart: "],
}

REGEX = r"\(?[0-9]{3}\)? [0-9]{3}-[0-9]{4}"
REGEX_PROMPT = "Call our office at "
