"""Hostile paths: what sits where a file is expected, for the CLI and the cache.

Each case is a scenario built in a fresh folder: a FIFO, a device, a
directory or a forged index file where the CLI or the index cache expects a
regular file; an output path that is an input or not a regular file;
arguments out of range; a cache folder mounted read-only. The CLI must end
in one line and exit status 2 (or, where the cache repairs what it meets,
succeed), never block, read without end, replace what it was not asked to,
or print a traceback; the library's same step (:attr:`Scenario.library`)
must end in its documented error or serve the right index.

``make(folder)`` returns the :class:`Scenario`; ``run_case.py`` runs it
under the corpus's limits (2 GiB of address space, 10 s). :func:`path_cases`
makes the cases with ``cases.py``'s ``Case`` (passed in, so that either
module can be imported first).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["a"], "additionalProperties": False}
PATTERN = "(ab)+"
FILL_VOCABULARY = "mistral-sp32k"  # a fill's schema builds in 0.2 s with it, 2.5 s with qwen2.5


@dataclass
class Scenario:
    argv: list[str] | None                  # the CLI's arguments (None: run ``cli`` instead)
    library: Callable[[], object] | None = None  # the library's same step (None: CLI only)
    output: str | None = None               # must not be created unless the CLI succeeds
    keep: tuple[str, ...] = ()              # must be as they were unless the CLI succeeds
    cli: Callable[[], dict] | None = None   # runs the CLI itself (in a read-only mount)
    refused: bool = True                    # the CLI must refuse (status 2), not succeed


def device_node(folder: str, name: str = "null") -> str | None:
    """A private character device like /dev/null (1, 3) inside ``folder``,
    where this process may make one (root); None elsewhere. Tests write over
    this one, never the machine's /dev/null: a regression would replace the
    real device with a regular file for every process of the machine."""
    import stat as stat_module

    path = os.path.join(folder, name)
    try:
        os.mknod(path, stat_module.S_IFCHR | 0o666, os.makedev(1, 3))
    except (OSError, AttributeError):
        return None
    return path


# --- building blocks -------------------------------------------------------------

def _fifo(folder: str, name: str = "fifo") -> str:
    path = os.path.join(folder, name)
    os.mkfifo(path)
    return path


def _schema_file(folder: str, name: str = "schema.json") -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        json.dump(SCHEMA, handle)
    return path


def forge(raw: bytes, change: Callable[[dict], None]) -> bytes:
    """The index file ``raw`` with its header rewritten by ``change(header)``,
    checksums fixed, so only the forged field can be wrong."""
    import msgpack

    from tokendfa.runtime.files import _PREAMBLE, _aligned

    _, size, _ = _PREAMBLE.unpack_from(raw, 0)
    header = msgpack.unpackb(raw[_PREAMBLE.size:_PREAMBLE.size + size], raw=False)
    data = raw[_aligned(_PREAMBLE.size + size):]
    change(header)
    header["data_size"], header["data_crc"] = len(data), zlib.crc32(data)
    packed = msgpack.packb(header, use_bin_type=True)
    head = struct.pack("<8sII", b"TOKENDFA", len(packed), zlib.crc32(packed)) + packed
    return head + b"\0" * (_aligned(len(head)) - len(head)) + data


def _array(header: dict, name: str) -> dict:
    return next(e for e in header["arrays"] if e["name"] == name)


FORGERIES = {
    # a string where a mapping belongs, an integer where a list belongs, a boolean in a shape
    "metadata-string-for-mapping": lambda h: h["metadata"].update(build="fast"),
    "metadata-int-for-list": lambda h: h["metadata"].update(kind="schema", widenings=5, notes=7),
    "shape-boolean": lambda h: _array(h, "eos_token_ids").update(shape=[True]),
    "vocabulary-string-for-mapping": lambda h: h["metadata"].update(vocabulary="qwen2.5"),
}


def _index_bytes() -> bytes:
    from tokendfa import Index
    from tokendfa.runtime.files import encode_index

    # Raw arrays, the toy vocabulary's one EOS: the loader reads that shape
    # directly (a boolean there was a TypeError).
    return encode_index(Index.from_regex(PATTERN, _toy(), lazy=False), compress=False)


def _toy():
    from conftest import toy_vocabulary

    return toy_vocabulary()


def _cache_entry(folder: str, kind: str, source) -> str:
    from tokendfa.cache import IndexCache

    cache = IndexCache(os.path.join(folder, "cache"))
    return str(cache.path_for(cache.key(kind, source, _toy())))


def _served_right(folder: str, kind: str, source) -> Callable[[], str]:
    """The library's step for a damaged cache entry: get_or_build serves the
    index a fresh build gives, and warns naming the entry."""
    def step() -> str:
        import numpy as np

        from tokendfa import Index
        from tokendfa.cache import IndexCache

        cache = IndexCache(os.path.join(folder, "cache"))
        entry = str(cache.path_for(cache.key(kind, source, _toy())))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            index = cache.get_or_build(kind, source, _toy())
        build = Index.from_regex if kind == "regex" else Index.from_schema
        fresh = build(source, _toy(), lazy=False)
        assert np.array_equal(index.arrays.masks, fresh.arrays.masks), "a wrong index served"
        assert any(entry in str(w.message) for w in caught), [str(w.message) for w in caught]
        return "ok"
    return step


# --- inputs that are not regular files --------------------------------------------

def _input(flag: str, what: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        path = {"fifo": lambda: _fifo(folder), "dev-zero": lambda: "/dev/zero",
                "directory": lambda: folder}[what]()
        out = os.path.join(folder, "out.tdfa")
        if flag == "--vocab":
            argv = ["build", "--regex", "a+", "--vocab", path, "-o", out]

            def library():
                from tokendfa import Vocabulary

                Vocabulary.from_spec(path)
            return Scenario(argv, library, output=out)
        return Scenario(["build", flag, path, "-o", out], None, output=out)
    return make


# --- outputs that are an input, or not a regular file -------------------------------

def _output(what: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        schema = _schema_file(folder)
        if what == "the-input":
            out = schema
        elif what == "a-link-to-the-input":
            out = os.path.join(folder, "link.json")
            os.symlink(schema, out)
        elif what == "a-device":
            out = device_node(folder) or _fifo(folder)  # a FIFO where no device can be made
        elif what == "fifo":
            out = _fifo(folder)
        else:  # a directory
            out = os.path.join(folder, "out.tdfa")
            os.mkdir(out)
        return Scenario(["build", "--schema", schema, "-o", out], None, keep=(schema, out))
    return make


# --- index files: forged metadata, a FIFO, a vocabulary path inside ----------------

def _inspect_forged(forgery: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        path = os.path.join(folder, "forged.tdfa")
        with open(path, "wb") as handle:
            handle.write(forge(_index_bytes(), FORGERIES[forgery]))
        # The library's side: the same forgery as a cache entry, repaired or served right.
        entry = _cache_entry(folder, "regex", PATTERN)
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        with open(entry, "wb") as handle:
            handle.write(forge(_index_bytes(), FORGERIES[forgery]))
        step = _served_right(folder, "regex", PATTERN)

        def library():
            try:
                step()
            except AssertionError as exc:
                if "a wrong index" in str(exc):
                    raise
                # metadata-only forgeries load: served without a warning is right too
        return Scenario(["inspect", path], library)
    return make


def _inspect_fifo(folder: str) -> Scenario:
    fifo = _fifo(folder)
    entry = _cache_entry(folder, "regex", PATTERN)
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    os.mkfifo(entry)
    return Scenario(["inspect", fifo], _served_right(folder, "regex", PATTERN))


def _check_vocabulary_inside(what: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        target = _fifo(folder) if what == "fifo" else "/dev/zero"
        path = os.path.join(folder, "index.tdfa")
        with open(path, "wb") as handle:
            handle.write(forge(_index_bytes(), lambda h: h["metadata"]["vocabulary"].update(
                source=target)))

        def library():
            from tokendfa import Vocabulary

            Vocabulary.from_spec(target)
        return Scenario(["check", path, "abab"], library)
    return make


# --- the cache: what sits at an entry's name, bad arguments, a read-only folder -----

def _fill_folder(folder: str) -> str:
    schemas = os.path.join(folder, "schemas")
    os.mkdir(schemas)
    _schema_file(schemas, "a.json")
    return schemas


def _entry_of_fill(folder: str) -> str:
    from tokendfa import Vocabulary
    from tokendfa.cache import IndexCache

    cache = IndexCache(os.path.join(folder, "cache"))
    return str(cache.path_for(cache.key("schema", json.dumps(SCHEMA),
                                        Vocabulary.builtin(FILL_VOCABULARY))))


def _cache_entry_is(what: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        schemas = _fill_folder(folder)
        for entry in (_entry_of_fill(folder), _cache_entry(folder, "schema", SCHEMA)):
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            if what == "fifo":
                os.mkfifo(entry)
            elif what == "directory":
                os.mkdir(entry)
            elif what == "link-to-dev-zero":
                os.symlink("/dev/zero", entry)
            else:  # a forged header
                with open(entry, "wb") as handle:
                    handle.write(forge(_index_bytes(), FORGERIES["shape-boolean"]))
        argv = ["cache", "fill", "--schemas", schemas, "--cache-dir", os.path.join(folder, "cache"),
                "--vocab", FILL_VOCABULARY]
        return Scenario(argv, _served_right(folder, "schema", SCHEMA), keep=(_entry_of_fill(folder),),
                        refused=False)
    return make


def _cache_argument(what: str) -> Callable[[str], Scenario]:
    def make(folder: str) -> Scenario:
        schemas = _fill_folder(folder)
        argv = ["cache", "fill", "--schemas", schemas]
        if what == "max-bytes-negative":
            argv += ["--max-bytes", "-5", "--cache-dir", os.path.join(folder, "cache")]
        elif what == "jobs-zero":
            argv += ["--jobs", "0", "--cache-dir", os.path.join(folder, "cache")]
        else:  # --cache-dir naming a file
            argv += ["--cache-dir", os.path.join(schemas, "a.json")]
        return Scenario(argv, None, keep=(os.path.join(schemas, "a.json"),))
    return make


def read_only_command(folder: str, argv: list[str]) -> list[str] | None:
    """``argv`` run with ``folder`` read-only: a private read-only bind mount
    where this process may make one (root, ``unshare``), else with write
    permission removed (enough for anyone but root); None where neither holds."""
    if os.geteuid() != 0:
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o555)
        os.chmod(folder, 0o555)
        return argv
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    where = shlex.quote(folder)
    mount = f"mount --bind {where} {where} && mount -o remount,bind,ro {where} {where}"
    script = f"{mount} && exec {shlex.join(argv)}"
    probe = subprocess.run([unshare, "-m", "sh", "-c", mount], capture_output=True)
    return [unshare, "-m", "sh", "-c", script] if probe.returncode == 0 else None


_READ_ONLY_STEP = """
import json, sys, warnings
sys.path.insert(0, {tests!r})
from conftest import toy_vocabulary
from tokendfa.cache import IndexCache
cache = IndexCache({cache!r})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    hit = cache.get_or_build("schema", {schema!r}, toy_vocabulary())
    miss = cache.get_or_build("regex", "(ab)+", toy_vocabulary())
print(json.dumps({{"hits": cache.stats.hits, "builds": cache.stats.builds,
                  "warnings": [str(w.message) for w in caught], "states": miss.num_states}}))
"""


def _read_only_cache(folder: str) -> Scenario:
    from tokendfa import Vocabulary
    from tokendfa.cache import IndexCache

    cache_dir = os.path.join(folder, "cache")
    schemas = _fill_folder(folder)
    # Filled ahead of time: SCHEMA for the toy vocabulary (the library's hit)
    # and a.json for the fill's vocabulary (the fill's hit); b.json is the fill's miss.
    IndexCache(cache_dir).get_or_build("schema", SCHEMA, _toy())
    IndexCache(cache_dir).get_or_build("schema", json.dumps(SCHEMA), Vocabulary.builtin(FILL_VOCABULARY))
    with open(os.path.join(schemas, "b.json"), "w") as handle:
        json.dump({"type": "string", "maxLength": 3}, handle)
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = _READ_ONLY_STEP.format(tests=tests, cache=cache_dir, schema=SCHEMA)
    library_argv = read_only_command(cache_dir, [sys.executable, "-c", code])
    cli_argv = [sys.executable, "-m", "tokendfa.cli", "cache", "fill", "--schemas", schemas,
                "--cache-dir", cache_dir, "--vocab", FILL_VOCABULARY]

    def library():
        if library_argv is None:
            return "ok"  # no way to make a read-only folder here
        done = subprocess.run(library_argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-1500:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert (report["hits"], report["builds"]) == (1, 0), report
        assert any("uncached" in w for w in report["warnings"]), report
        return "ok"

    def cli() -> dict:
        if library_argv is None:
            return {"status": 0, "stderr": "", "wrote": True}  # nothing to test here
        done = subprocess.run(cli_argv, capture_output=True, text=True, timeout=60)
        # The hit serves; the miss is built but cannot be kept, so the fill
        # says so and fails (status 1): that is the right outcome here.
        right = (done.returncode == 1 and "1 already cached, 1 failed" in done.stdout
                 and "b.json" in done.stderr and "uncached" in done.stderr
                 and "Traceback" not in done.stderr)
        if right:
            return {"status": 0, "stderr": "", "wrote": True}
        return {"status": done.returncode, "stderr": done.stdout + done.stderr, "wrote": False}

    # Made read-only after the set-up, for both steps (the CLI's in a mount of its own).
    cli_argv[:] = read_only_command(cache_dir, cli_argv) or cli_argv
    return Scenario(None, library, cli=cli)


def path_cases(Case) -> list:
    return [
        *[Case(f"path-{what}-as-{flag.strip('-')}", "scenario", _input(flag, what),
               either=("VocabularyError",) if flag == "--vocab" else ("ok",))
          for flag, what in [("--schema", "fifo"), ("--regex-file", "fifo"), ("--vocab", "fifo"),
                             ("--schema", "dev-zero"), ("--vocab", "dev-zero"),
                             ("--schema", "directory")]],
        *[Case(f"output-is-{what}", "scenario", _output(what), either=("ok",))
          for what in ("the-input", "a-link-to-the-input", "a-device", "fifo", "directory")],
        *[Case(f"inspect-{forgery}", "scenario", _inspect_forged(forgery), either=("ok",))
          for forgery in FORGERIES],
        Case("inspect-fifo", "scenario", _inspect_fifo, either=("ok",)),
        *[Case(f"check-vocabulary-inside-is-{what}", "scenario", _check_vocabulary_inside(what),
               either=("VocabularyError",)) for what in ("fifo", "dev-zero")],
        *[Case(f"cache-entry-is-{what}", "scenario", _cache_entry_is(what), either=("ok",))
          for what in ("fifo", "directory", "link-to-dev-zero", "forged-header")],
        *[Case(f"cache-fill-{what}", "scenario", _cache_argument(what), either=("ok",))
          for what in ("max-bytes-negative", "jobs-zero", "cache-dir-a-file")],
        Case("cache-read-only", "scenario", _read_only_cache, either=("ok",)),
    ]
