"""JSON Schema -> regex, exact or refused with the keyword's JSON pointer.

Reading order:

* :mod:`tokendfa.schema.api`       :func:`regex_from_schema` and
  :class:`SchemaRegex`: options, depth bounds, notes, shared pieces
* :mod:`tokendfa.schema.compiler`  the keyword compiler
* :mod:`tokendfa.schema.numbers`   numbers and integers: bounds, multipleOf
* :mod:`tokendfa.schema.strings`   strings: JSON escapes, lengths, patterns,
  formats

May import: :mod:`tokendfa.analysis` (the regex algebra and automata),
jsonschema and the standard library; never the builder or the runtime.
"""

from .api import SchemaRegex, regex_from_schema

__all__ = ["SchemaRegex", "regex_from_schema"]
