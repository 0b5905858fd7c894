"""Vocabulary files: paths checked with clear errors, and data files shipped
inside installed packages.

Every adapter reads its tokenizer's files through these, so a missing file,
a directory where a file was expected, or an unreadable file is a
:class:`~tokendfa.analysis.errors.VocabularyError` that names the path.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
from pathlib import Path
from typing import Any

from ..analysis.errors import VocabularyError, import_optional


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
        raise VocabularyError(f"{what} must be a file, but {str(p)!r} is a directory")
    return p


def read_file(p: Path, what: str) -> bytes:
    try:
        return p.read_bytes()
    except OSError as e:
        raise VocabularyError(f"cannot read {what} {str(p)!r}: {e.strerror or e}") from e


def read_head(p: Path, n: int = 256) -> bytes:
    """The first ``n`` bytes, enough to tell what kind of file it is."""
    try:
        with p.open("rb") as f:
            return f.read(n)
    except OSError as e:
        raise VocabularyError(f"cannot read vocabulary file {str(p)!r}: {e.strerror or e}") from e


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
