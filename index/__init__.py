"""Token-level DFA indexes: build, store, load and serve.

Reading order:

* :mod:`index.vocabulary`  token id -> exact bytes, EOS ids, fingerprint
* :mod:`index.tokenizers`  every tokenizer quirk, and the built-in vocabularies
* :mod:`index.reference`   the brute-force build: the definition of an index
* :mod:`index.build`       the fast build: signatures, prefix graphs, joblib
* :mod:`index.assemble`    raw edges -> canonical, compressed arrays
* :mod:`index.tokenindex`  :class:`Index`: immutable arrays served in O(1)
* :mod:`index.guide`       :class:`Guide`: one generation's cursor
* :mod:`index.files`       versioned msgpack + raw-array files, atomic writes
* :mod:`index.cli`         the ``tokendfa`` command

Importing this package (to load and serve an index) needs only numpy and
msgpack; the compiler's dependencies load when a build is asked for.
"""

from analysis.errors import (
    BuildLimitError,
    TimeLimitError,
    EmptyLanguageError,
    IndexFileError,
    IndexVersionError,
    InvalidStateError,
    MaskBufferError,
    RegexError,
    SchemaError,
    TokenDFAError,
    TokenNotAllowedError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    VocabularyCoverageError,
    VocabularyError,
    VocabularyMismatchError,
)
from index.guide import Guide
from index.tokenindex import Index
from index.vocabulary import Vocabulary

__all__ = [
    "Index", "Guide", "Vocabulary",
    "TokenDFAError", "RegexError", "UnsupportedRegexError", "EmptyLanguageError",
    "SchemaError", "UnsupportedSchemaError", "VocabularyError", "VocabularyCoverageError",
    "BuildLimitError", "TimeLimitError", "IndexFileError", "IndexVersionError", "VocabularyMismatchError",
    "TokenNotAllowedError", "InvalidStateError", "MaskBufferError",
]
