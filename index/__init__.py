"""tokendfa: compile a regex or a JSON Schema and an LLM vocabulary into a
precompiled token-level DFA index, and serve it at every decoding step.

Layers, in reading order (each a subpackage whose docstring says what it
holds and what it may import):

* :mod:`tokendfa.analysis`      pure functions over automata: regex -> byte DFA,
  byte classes, literals, signatures, the regex algebra, the one exception tree
* :mod:`tokendfa.vocab`         :class:`Vocabulary` and the tokenizer adapters
* :mod:`tokendfa.schema`        JSON Schema -> regex
* :mod:`tokendfa.builder`         byte DFA + vocabulary -> index arrays
* :mod:`tokendfa.lazy`          the lazy engine: an index whose token rows are
  computed on first request; completes to the builder's arrays
* :mod:`tokendfa.runtime`       :class:`Index`, :class:`Guide`, index files
* :mod:`tokendfa.cache`         built indexes on disk, shared by every process
* :mod:`tokendfa.integrations`  generators: transformers
* :mod:`tokendfa.cli`           the ``tokendfa`` command

``import tokendfa`` (to load and serve an index) imports only numpy and
msgpack; the compiler's dependencies load when a build is asked for.
"""

from .analysis.errors import (
    BuildLimitError,
    TimeLimitError,
    EmptyLanguageError,
    IndexFileError,
    IdTypeError,
    IndexVersionError,
    InvalidStateError,
    MaskBufferError,
    RegexError,
    RegexTooLongError,
    SchemaError,
    TokenDFAError,
    TokenNotAllowedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    VocabularyCoverageError,
    VocabularyError,
    VocabularyMismatchError,
)
from .runtime.batch import fill_masks
from .runtime.guide import Guide
from .runtime.index import Index, prepare_builds
from .vocab.vocabulary import Vocabulary, register_preparer

# Vocabulary.prepare() also makes the lazy engine's tables and warms the
# schema compiler (the vocabulary layer cannot import the builder itself).
register_preparer(prepare_builds)

__all__ = [
    "Index", "Guide", "Vocabulary", "fill_masks",
    "TokenDFAError", "RegexError", "UnsupportedRegexError", "EmptyLanguageError",
    "SchemaError", "UnsupportedSchemaError", "RegexTooLongError", "VocabularyError", "VocabularyCoverageError",
    "BuildLimitError", "TimeLimitError", "IndexFileError", "IndexVersionError", "VocabularyMismatchError",
    "TokenNotAllowedError", "InvalidStateError", "IdTypeError", "MaskBufferError",
]
