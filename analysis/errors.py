"""The one exception hierarchy of tokendfa.

Every error the library raises on purpose derives from :class:`TokenDFAError`,
so a caller can catch the whole family at once, and the CLI can print a
one-line message instead of a traceback. Subclasses that describe bad input
are also ``ValueError``s, as the standard library would raise.

This module sits in the lowest layer (``analysis/``) so that the analysis,
build and serving code all raise from the same tree without ``analysis``
importing ``index``. It also holds :func:`import_optional`, the one way the
package imports a dependency that ``pip install tokendfa`` does not install.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType


class TokenDFAError(Exception):
    """Base of every error tokendfa raises on purpose.

    A lone surrogate in the message (a schema's property name in a pointer, a
    value) is written as its escape, ``\\ud800``: no stream encodes it as
    UTF-8, and a one-line error must print wherever it goes."""

    def __init__(self, *args, **kwargs) -> None:
        # keyword arguments are another base's (ImportError's ``name``, ``path``)
        super().__init__(*(_SURROGATE.sub(_escape, a) if isinstance(a, str) else a for a in args),
                         **kwargs)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


# --- the pattern ---------------------------------------------------------

class RegexError(TokenDFAError, ValueError):
    """The regular expression is not valid syntax."""


class UnsupportedRegexError(RegexError):
    """Valid syntax, but a construct a finite automaton cannot express
    (lookarounds, backreferences, word boundaries, inner anchors, ...)."""


class EmptyLanguageError(TokenDFAError, ValueError):
    """The pattern matches no string at all, so no index can serve it."""


class EmptyRegexError(EmptyLanguageError):
    """An automaton built from a regex (written or compiled from a schema)
    has no string to match; its message shows the regex's head."""


class SchemaError(TokenDFAError, ValueError):
    """A JSON Schema that is not valid JSON or not a valid schema."""


class UnsupportedSchemaError(SchemaError):
    """A schema keyword or value that cannot be compiled exactly."""


class RegexTooLongError(UnsupportedSchemaError):
    """The regex for a schema would pass ``max_regex_length`` characters.

    The schema compiler tries shallower free values and recursion before
    raising it (a longer regex than asked for is a bound, not a keyword we
    cannot write)."""


# --- the vocabulary ------------------------------------------------------

class VocabularyError(TokenDFAError, ValueError):
    """A vocabulary source that cannot be read or makes no sense."""


class VocabularyCoverageError(VocabularyError):
    """The vocabulary cannot spell what the pattern requires.

    ``state`` is the automaton state where generation would be stuck and
    ``needed_bytes`` the bytes the pattern accepts there.
    """

    def __init__(self, message: str, *, state: int | None = None,
                 needed_bytes: bytes = b"") -> None:
        super().__init__(message)
        self.state = state
        self.needed_bytes = needed_bytes


# --- building ------------------------------------------------------------

class BuildLimitError(TokenDFAError):
    """The build went past a configured bound (states, memory, time)."""

    def __init__(self, message: str, *, reached: int | None = None) -> None:
        super().__init__(message)
        self.reached = reached


class TimeLimitError(BuildLimitError):
    """The build ran past the time it was given (``tokendfa build --time-limit``).

    Code that treats other failures as "unknown" must let this one through:
    swallowing it would let the build run on with no limit at all."""


# --- files ---------------------------------------------------------------

class IndexFileError(TokenDFAError, ValueError):
    """An index file that is truncated, corrupted or of an unknown format."""


class IndexVersionError(IndexFileError):
    """An index file written in a format version this library cannot read."""


class VocabularyMismatchError(IndexFileError):
    """An index file built for a different vocabulary than the one given."""


# --- serving -------------------------------------------------------------

class TokenNotAllowedError(TokenDFAError, ValueError):
    """A token that the index does not allow in the current state."""

    def __init__(self, message: str, *, state: int, token_id: int) -> None:
        super().__init__(message)
        self.state = state
        self.token_id = token_id


class InvalidStateError(TokenDFAError, ValueError):
    """A state id, token id or rollback count outside the valid range."""


class IdTypeError(InvalidStateError, TypeError):
    """A state or token id that is not an integer (a string, a float, None):
    an :class:`InvalidStateError` that is also a :class:`TypeError`."""


def check_id_type(value: object, what: str) -> None:
    """Raise :class:`IdTypeError` unless ``value`` is an integer (Python's or
    numpy's: anything with ``__index__``) usable as a ``what`` ("state", "token id")."""
    if not hasattr(type(value), "__index__"):
        raise id_type_error(value, what)


def id_type_error(value: object, what: str) -> IdTypeError:
    """The :class:`IdTypeError` for ``value`` given as a ``what``."""
    return IdTypeError(f"{what} {value!r:.60} is not an integer (got {type(value).__name__})")


class MaskBufferError(TokenDFAError, ValueError):
    """A caller's mask buffer that cannot hold a bitset: too few words, a
    dtype other than 32-bit integers, or a row outside the batch."""


# --- optional dependencies ------------------------------------------------

class MissingDependencyError(TokenDFAError, ImportError):
    """An optional dependency that is not installed, or does not import.

    Loading and serving an index needs only numpy and msgpack; building, the
    built-in vocabularies, Hugging Face tokenizers and the cross-checks each
    need more, installed by an extra (``pip install 'tokendfa[build]'``). The
    message names that extra. Also an ``ImportError``, so code that tries an
    import and carries on without it keeps working."""


def import_optional(module: str, *, extra: str | None, needed_for: str,
                    package: str | None = None) -> ModuleType:
    """``module``, imported, or :class:`MissingDependencyError` naming the
    extra (or, with ``extra=None``, the package) that installs it.

    ``needed_for`` says what the caller was doing ("reading a Hugging Face
    tokenizer"); ``package`` is the pip name when it differs from the module's.
    """
    try:
        return importlib.import_module(module)
    except Exception as exc:  # an installed but broken package raises anything
        package = package or module.split(".")[0]
        install = f"pip install 'tokendfa[{extra}]'" if extra else f"pip install {package}"
        missing = isinstance(exc, ModuleNotFoundError) and (
            exc.name is None or module == exc.name or module.startswith(exc.name + "."))
        if missing:
            message = f"{needed_for} needs {package}, which is not installed: {install}"
        else:
            message = (f"{needed_for} needs {package}, which is installed but does not import "
                       f"({type(exc).__name__}: {exc}); {install} installs versions that work")
        raise MissingDependencyError(message, name=module) from exc
