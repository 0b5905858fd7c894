"""JSON Schema -> regex, exact or refused with the keyword's JSON pointer.

Reading order:

* :mod:`tokendfa.schema.api`       :func:`regex_from_schema`, :class:`SchemaRegex` and
  :func:`instance_text`: options, dialect and meta-schema check, ``$ref`` registry
* :mod:`tokendfa.schema.direct`    the common schemas (a few keywords) straight to the
  compiler's trees, for a lazy index's options; anything else declined to the general path
* :mod:`tokendfa.schema.depth`     free-value and recursion depths within the regex and
  automaton budgets, ``any_depth="auto"``
* :mod:`tokendfa.schema.ir`        the compiler's internal forms: :class:`~.ir.Sub`, the
  constraints it writes itself (frozen dataclasses no schema can spell), choices, the flat
* :mod:`tokendfa.schema.keywords`  the JSON Schema keyword table (anything else, ``x-*``
  included, is an annotation) and the absorbers of the constraints
* :mod:`tokendfa.schema.compiler`  :class:`~.compiler.Compiler`: flatten, split choices,
  emit per type; shared pieces, the generic value, whitespace layout
* :mod:`tokendfa.schema.negation`  ``not``, pushed down keyword by keyword
* :mod:`tokendfa.schema.disjoint`  which ``oneOf`` branches can never hold together
* :mod:`tokendfa.schema.scalars`   ``enum``/``const`` literals, null, booleans, numbers and
  strings of a flat
* :mod:`tokendfa.schema.arrays`    prefixes, items, lengths, ``contains``, ``uniqueItems``
* :mod:`tokendfa.schema.objects`   declared, required and additional members, counts
* :mod:`tokendfa.schema.numbers`   regexes of numbers: integer ranges, decimal bounds, ``multipleOf``
* :mod:`tokendfa.schema.strings`   regexes of strings: JSON escapes, lengths, ECMA ``pattern``
* :mod:`tokendfa.schema.formats`   regexes of the ``format`` names we assert
* :mod:`tokendfa.schema.regexes`   writing regex text: alternations, counted repeats, groups

May import: :mod:`tokendfa.analysis` (errors, the regex algebra and automata),
jsonschema (with referencing and jsonschema_specifications) and the standard
library, numpy inside functions; never the builder or the runtime.
"""

from .api import SchemaRegex, regex_from_schema

__all__ = ["SchemaRegex", "regex_from_schema"]
