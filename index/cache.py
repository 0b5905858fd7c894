"""One index cache on disk, shared by every process of a machine.

A server with many workers, or many jobs on one machine, asks for the same
few schemas over and over. :class:`IndexCache` keeps each built index as an
ordinary index file (:mod:`tokendfa.runtime.files`) named by a hash of
everything that determines it:

* the kind (``regex`` or ``schema``) and the source: the pattern, or the
  schema as canonical JSON (keys sorted, no spaces), so that the same schema
  written differently is one entry;
* the options that change the result (a schema's ``whitespace``, ``lenient``,
  ``max_recursion_depth``, ``any_depth``), with their defaults filled in, so
  that spelling a default out is the same entry; options that only change
  how the index is built (``n_jobs``, ``backend``, ``method``, whose two
  builds give the same index, ``progress``, ``max_states``) are not part of it;
* the vocabulary's :attr:`~tokendfa.Vocabulary.fingerprint` (its content,
  not its name or path);
* the index file format version and the tokendfa version, so an upgrade
  never serves an index an older build made.

Concurrency, with no server process:

* entries are written by :meth:`Index.save`, which writes a temporary file in
  the same folder and renames it into place: a reader sees a whole file or
  none;
* one build per key: a process that misses takes the key's lock file
  (``fcntl.flock``) before building; the others block on it, then find the
  file and load it. A lock file is only removed by eviction, and only while
  nobody holds it; a process that locked a file that was removed meanwhile
  notices (the path no longer names its inode) and locks again;
* an entry that does not load, whatever the reason (truncated, corrupted or
  forged, a format this version cannot read, a FIFO, a directory or a device
  at its name, a file larger than :data:`MAX_ENTRY_BYTES`), is removed and
  rebuilt under the key's lock, with a warning that names the entry and the
  reason. Entries are read as regular files only, opened without blocking
  (:mod:`tokendfa.analysis.regular_files`), and decoded from memory, so
  whatever sits at an entry's name can neither block a request nor change
  under the index that serves it.

Read-only folders: a folder filled ahead of time (``tokendfa cache fill``)
and then mounted read-only serves its entries; a miss there is built and
returned uncached, with a warning, as is any entry the cache cannot write.

Size: after each write, the least recently used entries (oldest modification
time; a hit sets it to now) are deleted until the folder holds at most
``max_bytes`` of entries. The entry just written is never evicted, so one
index larger than the bound still stays.

Safety: entries are tokendfa's own validated index files, never pickles; a
file planted in the folder can at worst fail to load (and be rebuilt) or
hold a wrong automaton for a key, which needs write access to the folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import stat
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis.errors import IndexFileError
from .analysis.regular_files import read_regular_file

if TYPE_CHECKING:  # pragma: no cover
    from .runtime.index import Index
    from .vocab.vocabulary import Vocabulary

__all__ = ["IndexCache", "CacheStats", "CacheEntry", "default_cache_dir", "DEFAULT_MAX_BYTES",
           "MAX_ENTRY_BYTES"]

ENVIRONMENT_VARIABLE = "TOKENDFA_CACHE_DIR"
DEFAULT_MAX_BYTES = 1 << 30  # compressed schema indexes are tens of kilobytes: thousands fit
ENTRY_SUFFIX = ".tdfa"
# An entry is read whole into memory (compressed schema indexes are tens of
# kilobytes; the largest regex indexes of the tests a few megabytes): a file
# past this bound at an entry's name is treated as a damaged entry.
MAX_ENTRY_BYTES = 1 << 30
# A schema file of a fill: the largest of JSONSchemaBench are under a megabyte.
MAX_SCHEMA_FILE_BYTES = 64 << 20
KINDS = ("regex", "schema")

# Options that change the index, with the defaults of Index.from_schema.
_RESULT_OPTIONS: dict[str, dict[str, Any]] = {
    "regex": {},
    "schema": {"whitespace": "compact", "lenient": False, "max_recursion_depth": 3,
               "any_depth": "auto"},
}
# Options that change how an index is built, never which index.
_BUILD_OPTIONS = frozenset({"method", "n_jobs", "backend", "max_states", "progress", "row_budget"})


def default_cache_dir() -> Path:
    """``$TOKENDFA_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokendfa``, else
    ``~/.cache/tokendfa``."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tokendfa"


@functools.lru_cache(maxsize=1)
def _tokendfa_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tokendfa")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


@dataclass(frozen=True)
class CacheStats:
    """What one :class:`IndexCache` object did in this process."""
    hits: int = 0      # loaded from the folder
    builds: int = 0    # built here (and written)
    repaired: int = 0  # entries that did not load, deleted before their rebuild
    evicted: int = 0   # entries deleted to keep the folder under max_bytes
    uncached: int = 0  # built here but not written (a read-only folder, a failed write)


@dataclass(frozen=True)
class CacheEntry:
    """One index file in the cache folder."""
    path: Path
    nbytes: int
    last_used: float  # modification time, set to now on every hit


class IndexCache:
    """Built indexes on disk, keyed by what determines them (see the module
    docstring). Any number of processes may share one folder.

    # Example

    >>> cache = IndexCache("/tmp/tokendfa-cache")                    # doctest: +SKIP
    >>> index = cache.get_or_build("schema", {"type": "integer"}, vocab)  # doctest: +SKIP
    """

    def __init__(self, directory: str | os.PathLike | None = None, *,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be a whole number >= 0, not {max_bytes!r}")
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self._locks = self.directory / "locks"
        self._counts = {"hits": 0, "builds": 0, "repaired": 0, "evicted": 0, "uncached": 0}
        self._ready = False
        # Once per process, here rather than in the first request: reading
        # the installed version and importing the file reader take tens of
        # milliseconds, a hit afterwards well under one.
        _tokendfa_version()
        from .runtime import files  # noqa: F401

    def __repr__(self) -> str:
        return f"IndexCache({str(self.directory)!r}, max_bytes={self.max_bytes})"

    @property
    def stats(self) -> CacheStats:
        return CacheStats(**self._counts)

    # --- keys ---------------------------------------------------------------

    def key(self, kind: str, source: Any, vocabulary: "Vocabulary", **options: Any) -> str:
        """The entry name (hex SHA-256) for these arguments of :meth:`get_or_build`."""
        result_options, _ = _split_options(kind, options)
        key = _key(kind, source, vocabulary, result_options)
        if key is None:
            from .analysis.errors import SchemaError

            raise SchemaError("the schema is not valid JSON, so it has no cache key")
        return key

    def path_for(self, key: str) -> Path:
        return self.directory / f"{key}{ENTRY_SUFFIX}"

    # --- the one call ---------------------------------------------------------

    def get_or_build(self, kind: str, source: Any, vocabulary: "Vocabulary",
                     **options: Any) -> "Index":
        """The index of ``source`` (a regex, or a JSON Schema as a dict, a
        bool or JSON text) for ``vocabulary``: loaded from the folder, or
        built, written, and then returned.

        ``options`` are those of :meth:`Index.from_regex` or
        :meth:`Index.from_schema`. Errors are the build's (a bad schema
        raises :class:`~tokendfa.analysis.errors.SchemaError` and caches
        nothing); an unknown option is a ``TypeError``. An entry that does
        not load is rebuilt, and a miss the folder cannot store (read-only)
        is built and returned uncached, each with a warning.
        """
        result_options, build_options = _split_options(kind, options)
        key = _key(kind, source, vocabulary, result_options)
        if key is None:  # not JSON: the build raises the schema compiler's own error
            return _build(kind, source, vocabulary, result_options, build_options)
        self._prepare()
        path = self.path_for(key)
        index = self._load(path, vocabulary, repair=False)
        if index is not None:
            return index
        with self._locked(key) as locked:
            if not locked:
                # Written by another process meanwhile, or else said why it
                # does not serve (and left, where it cannot be removed).
                index = self._load(path, vocabulary, repair=True)
                if index is not None:
                    return index
                index = _build(kind, source, vocabulary, result_options, build_options)
                self._counts["uncached"] += 1
                return index
            # Another process may have built it while this one waited.
            index = self._load(path, vocabulary, repair=True)
            if index is not None:
                return index
            index = _build(kind, source, vocabulary, result_options, build_options)
            self._counts["builds"] += 1
            try:
                index.save(path)
            except OSError as exc:
                warnings.warn(f"tokendfa: cannot write the cache entry {path}: "
                              f"{exc.strerror or exc}; the index is used uncached", stacklevel=2)
                self._counts["uncached"] += 1
                return index
        self.evict(keep=path)
        return index

    # --- the folder -------------------------------------------------------------

    def entries(self) -> list[CacheEntry]:
        """Every entry, least recently used first."""
        found = []
        try:
            scan = os.scandir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise IndexFileError(f"cannot read the index cache folder {str(self.directory)!r}: "
                                 f"{exc.strerror or exc}") from None
        with scan:
            for item in scan:
                if not item.name.endswith(ENTRY_SUFFIX) or item.name.startswith("."):
                    continue
                try:
                    # Regular files only, links not followed: anything else at
                    # an entry's name is repaired by the request that meets it.
                    if not item.is_file(follow_symlinks=False):
                        continue
                    st = item.stat(follow_symlinks=False)
                except FileNotFoundError:  # evicted by another process meanwhile
                    continue
                found.append(CacheEntry(Path(item.path), st.st_size, st.st_mtime))
        found.sort(key=lambda e: (e.last_used, e.path.name))
        return found

    def total_bytes(self) -> int:
        return sum(e.nbytes for e in self.entries())

    def evict(self, max_bytes: int | None = None, *, keep: Path | None = None) -> int:
        """Delete the least recently used entries until at most ``max_bytes``
        (default: the cache's bound) remain; returns how many were deleted."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        entries = self.entries()
        total = sum(e.nbytes for e in entries)
        deleted = 0
        for entry in entries:
            if total <= limit:
                break
            if keep is not None and entry.path == keep:
                continue
            try:
                entry.path.unlink()
                deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:  # a read-only folder: nothing here can go
                warnings.warn(f"tokendfa: cannot evict the index cache entry {entry.path}: "
                              f"{exc.strerror or exc}", stacklevel=2)
                break
            total -= entry.nbytes
            self._remove_lock(entry.path.name[:-len(ENTRY_SUFFIX)])
        self._counts["evicted"] += deleted
        return deleted

    def clear(self) -> int:
        """Delete every entry; returns how many."""
        return self.evict(0)

    # --- plumbing ----------------------------------------------------------------

    def _prepare(self) -> None:
        if self._ready:
            return
        try:
            self._locks.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not self.directory.is_dir():
                raise IndexFileError(
                    f"cannot use the index cache folder {str(self.directory)!r}: "
                    f"{exc.strerror or exc}") from None
            # A folder filled ahead of time and mounted read-only: its entries
            # still serve; each miss says it cannot be cached (_locked).
        self._ready = True

    def _load(self, path: Path, vocabulary: "Vocabulary", *, repair: bool) -> "Index | None":
        from .runtime.files import decode_index

        try:
            buffer = read_regular_file(path, "index cache entry", IndexFileError,
                                       max_bytes=MAX_ENTRY_BYTES)
            index = decode_index(buffer, vocabulary, name=str(path))
        except Exception as exc:  # noqa: BLE001 - whatever does not load is a damaged entry
            if not os.path.lexists(path):
                return None  # a plain miss (or evicted meanwhile)
            if not repair:
                return None  # decided under the key's lock, where nobody rewrites it
            self._repair(path, exc)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used now
        self._counts["hits"] += 1
        return index

    def _repair(self, path: Path, exc: Exception) -> None:
        """Remove the entry at ``path`` that did not load, saying which and why."""
        # The warning names the entry once: not again inside the reason.
        reason = str(exc).replace(f"{path}: ", "").replace(f" {path}", "")
        if not isinstance(exc, IndexFileError):
            reason = f"{type(exc).__name__}: {reason}"
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()  # only an empty one: a folder's contents are not the cache's
            else:
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            warnings.warn(f"tokendfa: the index cache entry {path} does not load ({reason}) "
                          f"and cannot be removed ({error.strerror or error}); the index is "
                          f"built uncached", stacklevel=3)
            return
        self._counts["repaired"] += 1
        warnings.warn(f"tokendfa: the index cache entry {path} does not load ({reason}); "
                      f"removed, and rebuilt", stacklevel=3)

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[bool]:
        """Hold the key's lock; yields False (after a warning) where the
        folder cannot hold one (read-only), and the caller then builds uncached."""
        descriptor = self._lock_descriptor(key)
        if descriptor is None:
            yield False
            return
        try:
            yield True
        finally:
            os.close(descriptor)  # releases the lock

    def _lock_descriptor(self, key: str) -> int | None:
        lock_path = self._locks / f"{key}.lock"
        flags = (os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        while True:
            try:
                descriptor = os.open(lock_path, flags, 0o644)
            except OSError as exc:
                warnings.warn(f"tokendfa: cannot lock the index cache entry {key} in "
                              f"{self.directory} ({exc.strerror or exc}); the index is built "
                              f"uncached", stacklevel=5)
                return None
            try:
                if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                    warnings.warn(f"tokendfa: the lock file {lock_path} is not a regular file; "
                                  f"the index is built uncached", stacklevel=5)
                    os.close(descriptor)
                    return None
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                try:
                    current = os.stat(lock_path).st_ino == os.fstat(descriptor).st_ino
                except FileNotFoundError:
                    current = False
            except BaseException:
                os.close(descriptor)
                raise
            if current:
                return descriptor
            # Eviction removed this lock file between open and flock: the
            # lock guards nothing now, so take the one at the path.
            os.close(descriptor)

    def _remove_lock(self, key: str) -> None:
        lock_path = self._locks / f"{key}.lock"
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_NONBLOCK
                                 | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # gone, or nothing this process can lock: left as it is
            return
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        else:
            with contextlib.suppress(OSError):
                lock_path.unlink()
        finally:
            os.close(descriptor)


def _split_options(kind: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    defaults = _RESULT_OPTIONS[kind]
    unknown = set(options) - set(defaults) - _BUILD_OPTIONS
    if unknown:
        known = sorted({*defaults, *_BUILD_OPTIONS})
        raise TypeError(f"unknown {kind} build option(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(known)}")
    result = {name: options.get(name, default) for name, default in defaults.items()}
    build = {name: value for name, value in options.items() if name in _BUILD_OPTIONS}
    return result, build


def canonical_source(kind: str, source: Any) -> str | None:
    """The text a key hashes for ``source``: the pattern itself, or the schema
    as compact JSON with sorted keys; ``None`` for schema text that is not JSON."""
    if kind == "regex":
        if not isinstance(source, str):
            raise TypeError(f"a regex is a str, not {type(source).__name__}")
        return source
    if isinstance(source, (str, bytes, bytearray)):
        try:
            source = json.loads(source)
        except (ValueError, RecursionError):
            return None
    try:
        return json.dumps(source, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


def _key(kind: str, source: Any, vocabulary: "Vocabulary", options: dict[str, Any]) -> str | None:
    text = canonical_source(kind, source)
    if text is None:
        return None
    from .runtime.files import FORMAT_VERSION

    material = json.dumps({
        "kind": kind,
        "source": text,
        "options": options,
        "vocabulary": vocabulary.fingerprint,
        "format_version": FORMAT_VERSION,
        "tokendfa": _tokendfa_version(),
    }, sort_keys=True, separators=(",", ":"))  # ASCII: lone surrogates are escaped
    return hashlib.sha256(material.encode("ascii")).hexdigest()


def _build(kind: str, source: Any, vocabulary: "Vocabulary", result_options: dict[str, Any],
           build_options: dict[str, Any]) -> "Index":
    from .runtime.index import Index

    # An entry is a file: the eager build (a lazy index would complete at
    # save(), with a schema's free values at the lazy depth rather than the
    # measured "auto" one that the key names).
    if kind == "regex":
        return Index.from_regex(source, vocabulary, lazy=False, **build_options)
    return Index.from_schema(source, vocabulary, lazy=False, **result_options, **build_options)


# --- filling the cache ahead of time (the CLI's ``tokendfa cache fill``) ---------

@dataclass(frozen=True)
class FillOutcome:
    """What filling the cache did with one schema file."""
    path: str
    status: str           # "built", "cached" or "failed"
    seconds: float
    error: str | None = None
    num_states: int | None = None


@functools.lru_cache(maxsize=4)
def _worker_vocabulary(spec: str) -> "Vocabulary":
    from .vocab.vocabulary import Vocabulary

    return Vocabulary.from_spec(spec)


def fill_one(path: str, vocabulary: "Vocabulary | str", directory: str, max_bytes: int,
             options: dict[str, Any]) -> FillOutcome:
    """Put the index of one schema file into the cache. In a worker process,
    ``vocabulary`` is a spec (:meth:`Vocabulary.from_spec`), loaded once per
    process."""
    import time

    from .analysis.errors import SchemaError, TokenDFAError

    started = time.perf_counter()
    try:
        text = read_regular_file(path, "schema file", SchemaError,
                                 max_bytes=MAX_SCHEMA_FILE_BYTES).decode("utf-8")
        cache = IndexCache(directory, max_bytes=max_bytes)
        if isinstance(vocabulary, str):
            vocabulary = _worker_vocabulary(vocabulary)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            index = cache.get_or_build("schema", text, vocabulary, **options)
    except (TokenDFAError, OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) if isinstance(exc, OSError) else None
        return FillOutcome(path, "failed", time.perf_counter() - started,
                           error=reason or str(exc) or type(exc).__name__)
    said = "; ".join(str(w.message).removeprefix("tokendfa: ") for w in caught)
    if cache.stats.uncached:  # built, but the folder cannot keep it: the fill did not fill
        return FillOutcome(path, "failed", time.perf_counter() - started, error=said or "not stored")
    for warning in caught:  # a repaired entry: said, and filled
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    status = "built" if cache.stats.builds else "cached"
    return FillOutcome(path, status, time.perf_counter() - started, num_states=index.num_states)
