"""Files named by paths tokendfa does not control: only regular files, opened
without blocking, read with a size bound.

A path given on a command line, found inside an index file, or sitting at a
cache entry's name may name anything: a FIFO (``open()`` blocks until a writer
comes, forever), a device (``/dev/zero`` reads without end, ``/dev/null`` is
replaced by a regular file when written over), a directory, or a regular file
far larger than anything tokendfa reads. Every such path goes through here:

* :func:`check_regular_file` refuses what is not a regular file from its
  ``stat``, before anything opens it (opening a device can act on it);
* :func:`open_regular_file` checks the same, then opens with ``O_NONBLOCK``
  (a FIFO swapped in meanwhile cannot block the open) and checks the opened
  descriptor again (``fstat``: what was opened, not what the path names now);
* :func:`read_regular_file` reads such a file whole, at most ``max_bytes``;
* :func:`check_output_file` refuses an output path that exists and is not a
  regular file, or that is one of the inputs (writing over it would destroy
  the input);
* :func:`replace_file` writes a file whole or not at all: a temporary file
  beside it, renamed over it, so a reader (or a mapping) of the old file is
  never handed a half-written one.

Each takes the error class to raise (a :class:`~tokendfa.analysis.errors.TokenDFAError`
subclass), so that a vocabulary file fails with ``VocabularyError`` and an
index file with ``IndexFileError``, each with one line naming the path.
Standard library only: every layer may use it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from typing import Any

__all__ = ["check_regular_file", "open_regular_file", "read_regular_file", "check_output_file",
           "replace_file", "kind_of"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str:
    """What a ``st_mode`` names, in words (``"a FIFO"``, ``"a regular file"``)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_regular_file(path: Any, what: str, error: type[Exception]) -> os.stat_result:
    """The ``stat`` of ``path`` (symbolic links followed), or ``error`` when
    it does not exist, cannot be looked at, or is not a regular file."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise error(f"cannot read {what} {os.fsdecode(path)}: {reason}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"cannot read {what} {os.fsdecode(path)}: it is {kind_of(info.st_mode)}, "
                    f"not a regular file")
    return info


def open_regular_file(path: Any, what: str, error: type[Exception]) -> int:
    """A read-only descriptor of the regular file at ``path`` (the caller
    closes it); ``error`` for anything else (see the module docstring)."""
    check_regular_file(path, what, error)
    name = os.fsdecode(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {_reason(exc)}") from None
    try:
        info = os.fstat(descriptor)
    except OSError as exc:
        os.close(descriptor)
        raise error(f"cannot read {what} {name}: {_reason(exc)}") from None
    if not stat.S_ISREG(info.st_mode):  # replaced between the stat and the open
        os.close(descriptor)
        raise error(f"cannot read {what} {name}: it is {kind_of(info.st_mode)}, "
                    f"not a regular file")
    return descriptor


def read_regular_file(path: Any, what: str, error: type[Exception], *, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of
    them; ``error`` for anything else (see the module docstring)."""
    descriptor = open_regular_file(path, what, error)
    name = os.fsdecode(path)
    try:
        size = os.fstat(descriptor).st_size
        if size > max_bytes:
            raise error(f"cannot read {what} {name}: it holds {size:,} bytes, more than "
                        f"the {max_bytes:,} a {what} may have")
        chunks, total = [], 0
        while True:  # one more byte than allowed tells a file that grew meanwhile
            chunk = os.read(descriptor, min(max_bytes + 1 - total, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise error(f"cannot read {what} {name}: it holds more than the "
                            f"{max_bytes:,} bytes a {what} may have")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {_reason(exc)}") from None
    finally:
        os.close(descriptor)


def check_output_file(path: Any, what: str, error: type[Exception],
                      inputs: Iterable[Any] = ()) -> None:
    """Refuse ``path`` as an output when it exists and is not a regular file
    (writing would replace a device, a FIFO or a directory with a file), or
    when it is the same file as one of ``inputs`` (an input path, or a link to it).
    A path that does not exist yet is fine."""
    name = os.fsdecode(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise error(f"cannot write {what} {name}: {reason}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"refusing to write {what} {name}: it is {kind_of(info.st_mode)}, "
                    f"and tokendfa writes only regular files")
    for source in inputs:
        try:
            other = os.stat(source)
        except (OSError, ValueError):
            continue
        if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
            raise error(f"refusing to write {what} {name}: it is the input "
                        f"{os.fsdecode(source)}, which writing would destroy")


def replace_file(path: Any, parts: Iterable[bytes], *, prefix: str = ".tokendfa-",
                 durable: bool = True) -> None:
    """Write ``parts`` to ``path`` atomically: a temporary file in the same
    folder, renamed over ``path`` once complete (removed on any failure).
    ``durable`` also syncs the data to disk before the rename."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    descriptor, temporary = tempfile.mkstemp(prefix=prefix, suffix=".partial", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for part in parts:
                handle.write(part)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
