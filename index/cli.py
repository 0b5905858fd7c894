"""The ``tokendfa`` command: build, inspect, check, and a demo.

Every error tokendfa raises on purpose, and every bad argument, becomes one
line on stderr and exit status 2; a traceback means a bug in tokendfa.

Every path is untrusted, whether given on the command line or found inside
an index file (``check`` follows the vocabulary an index names): inputs are
read only from regular files, opened without blocking and read up to a size
bound (:mod:`tokendfa.analysis.regular_files`: a FIFO, a device or a
directory is one line, never a hang or a read without end); an output must
be a regular file or not exist yet, and never one of the inputs. An index
file is read once into memory and decoded from there, so what ``inspect``
describes and what ``check`` walks is the file as it was read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time

from .analysis.errors import IndexFileError, TokenDFAError
from .analysis.regular_files import check_output_file, read_regular_file

DEFAULT_VOCABULARY = "qwen2.5"
# Bounds on what the command reads whole. The largest schemas of
# JSONSchemaBench are under a megabyte; an index file larger than the
# build's default memory budget (at most 1 GiB) could not have been built
# with the defaults either.
MAX_TEXT_BYTES = 64 << 20
MAX_INDEX_FILE_BYTES = 1 << 30

# The demo's schema: a small person record, bounded so that every random
# walk through its index ends.
DEMO_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{1,12}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "pattern": "^[a-z]{1,10}@[a-z]{1,10}\\.(com|org)$"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,8}$"},
                 "maxItems": 3},
    },
    "required": ["name", "age", "email"],
    "additionalProperties": False,
}
DEMO_TEXT = '{"name":"Ada","age":36,"email":"ada@lovelace.org","tags":["math","engines"]}'


class _OneLineParser(argparse.ArgumentParser):
    """Bad arguments as one line and exit status 2, like every other error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"tokendfa: error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except TokenDFAError as exc:
        print(f"tokendfa: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokendfa: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="tokendfa",
        description="Compile a regex and an LLM vocabulary into a token-level DFA index.")
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="build an index file")
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--regex", help="the pattern (Python re syntax, matched against the whole text)")
    source.add_argument("--regex-file", help="a file holding the pattern")
    source.add_argument("--schema", help="a JSON Schema file (compiled to a regex, then built)")
    build.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                       help="JSON whitespace a schema allows (default: %(default)s)")
    build.add_argument("--lenient", action="store_true",
                       help="widen schema constraints that cannot be compiled exactly, "
                            "listing each, instead of failing")
    build.add_argument("--any-depth", type=_any_depth, default="auto", metavar="N|auto",
                       help="levels of arrays and objects a value the schema leaves free may "
                            "nest (default: %(default)s, as deep as keeps the automaton small)")
    build.add_argument("--vocab", default=DEFAULT_VOCABULARY,
                       help="a built-in vocabulary name or a tokenizer path (default: %(default)s)")
    build.add_argument("-o", "--output", required=True, help="where to write the index")
    build.add_argument("--jobs", type=int, default=1, help="parallel workers (joblib n_jobs)")
    build.add_argument("--method", choices=("fast", "reference"), default="fast")
    build.add_argument("--max-states", type=_positive(int), default=None,
                       help="fail early when the pattern's automaton has more states")
    build.add_argument("--time-limit", type=_positive(float), default=None, metavar="SECONDS",
                       help="give up (with an error, writing nothing) after this long")
    build.add_argument("--memory-budget", type=_positive(int), default=None, metavar="BYTES",
                       help="bytes the build's largest tables may take (default: half the "
                            "available memory, at most 1 GiB)")
    build.add_argument("--uncompressed", action="store_true",
                       help="store the arrays raw: a larger file that loading maps without "
                            "copying (for very large indexes shared by many processes)")
    build.set_defaults(run=_build)

    inspect = commands.add_parser("inspect", help="describe an index file")
    inspect.add_argument("file")
    inspect.set_defaults(run=_inspect)

    check = commands.add_parser("check", help="tokenize TEXT and walk it through an index")
    check.add_argument("file")
    check.add_argument("text")
    check.add_argument("--vocab", default=None,
                       help="the vocabulary (default: the one recorded in the index)")
    check.set_defaults(run=_check)

    _add_cache_commands(commands)

    demo = commands.add_parser(
        "demo", help=f"build and use an index for a sample JSON Schema with {DEFAULT_VOCABULARY}")
    demo.add_argument("--vocab", default=DEFAULT_VOCABULARY)
    demo.add_argument("--samples", type=int, default=3)
    demo.set_defaults(run=_demo)
    return parser


def _add_cache_commands(commands) -> None:
    # A command of its own rather than more options on ``build``: ``build``
    # writes one index to -o, a fill writes many into the shared cache, and
    # the group has room for looking at the cache too (``cache info``).
    cache = commands.add_parser("cache", help="the shared index cache (tokendfa.cache)")
    actions = cache.add_subparsers(dest="cache_command", required=True)
    fill = actions.add_parser(
        "fill", help="build the index of every schema in a folder into the cache ahead of time")
    fill.add_argument("--schemas", required=True, metavar="FOLDER",
                      help="a folder of JSON Schema files (*.json, searched recursively)")
    fill.add_argument("--cache-dir", default=None, metavar="DIR",
                      help="the cache folder (default: $TOKENDFA_CACHE_DIR or ~/.cache/tokendfa)")
    fill.add_argument("--max-bytes", type=_whole, default=None,
                      help="size bound of the cache folder in bytes (default: 1 GiB)")
    fill.add_argument("--vocab", default=DEFAULT_VOCABULARY,
                      help="a built-in vocabulary name or a tokenizer path (default: %(default)s)")
    fill.add_argument("--whitespace", choices=("compact", "flexible"), default="compact")
    fill.add_argument("--lenient", action="store_true")
    fill.add_argument("--any-depth", type=_any_depth, default="auto", metavar="N|auto")
    fill.add_argument("--jobs", type=_jobs, default=1,
                      help="schemas built at once (joblib n_jobs; -1: one per core)")
    fill.add_argument("--backend", default=None,
                      help="joblib backend (default: loky processes; 'dask' starts a local "
                           "Dask cluster of --jobs workers)")
    fill.set_defaults(run=_cache_fill)
    info = actions.add_parser("info", help="describe the cache folder")
    info.add_argument("--cache-dir", default=None, metavar="DIR")
    info.set_defaults(run=_cache_info)


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, not {text!r}")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0:  # joblib: n_jobs=-1 is one per core, 0 means nothing
        raise argparse.ArgumentTypeError(f"expected a number of workers (1, 2, ... or -1 for one "
                                         f"per core), not {text!r}")
    return value


def _any_depth(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return _whole(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 or 'auto', not {text!r}") from None


def _load_vocabulary(spec: str):
    from .vocab.vocabulary import Vocabulary

    return Vocabulary.from_spec(spec)


def _read_text(path: str, what: str) -> str:
    data = read_regular_file(path, what, _UsageError, max_bytes=MAX_TEXT_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _UsageError(f"cannot read {what} {path}: {exc}") from None


def _read_index(path: str, vocabulary=None, *, verify: bool = True):
    """The index file at ``path``, read once (see the module docstring):
    ``(index, the file's bytes)``. A file whose header or arrays are forged
    is one line, whatever the loader raised."""
    from .runtime.files import decode_index

    data = read_regular_file(path, "index file", IndexFileError, max_bytes=MAX_INDEX_FILE_BYTES)
    try:
        index = decode_index(data, vocabulary, verify=verify, name=path)
    except TokenDFAError:
        raise
    except Exception as exc:  # noqa: BLE001 - a forged file, not a bug of this command
        raise IndexFileError(f"{path}: not a valid index file ({type(exc).__name__}: {exc})") from None
    if not isinstance(index.metadata, dict):
        raise IndexFileError(f"{path}: not a valid index file (its metadata is not a mapping)")
    return index, data


def _read_pattern(args) -> str:
    if args.regex is not None:
        return args.regex
    return _read_text(args.regex_file, "regex file").rstrip("\n")


class _UsageError(TokenDFAError):
    pass


def _input_paths(args) -> list[str]:
    """The files a build reads, which its output must not be."""
    paths = [path for path in (getattr(args, "schema", None), getattr(args, "regex_file", None))
             if path is not None]
    if args.vocab and os.path.exists(args.vocab):
        paths.append(args.vocab)
    return paths


def _build(args) -> int:
    from .runtime.index import Index

    # Before the build: refused at once, not after minutes of work.
    check_output_file(args.output, "the index to", _UsageError, inputs=_input_paths(args))
    schema = _read_text(args.schema, "schema file") if args.schema else None
    pattern = None if schema is not None else _read_pattern(args)
    vocabulary = _load_vocabulary(args.vocab)
    started = time.perf_counter()
    # The limits are checked inside the build's loops (tokendfa.analysis.limits):
    # no signal handler, so the same limits hold for a library caller and in threads.
    # lazy=False: the file must hold the whole index, built at once (a schema's
    # free values as deep as keeps the automaton small, any_depth="auto").
    options = dict(method=args.method, n_jobs=args.jobs, max_states=args.max_states,
                   time_limit=args.time_limit, memory_budget=args.memory_budget, lazy=False)
    if schema is not None:
        index = Index.from_schema(schema, vocabulary, whitespace=args.whitespace,
                                  lenient=args.lenient, any_depth=args.any_depth, **options)
    else:
        index = Index.from_regex(pattern, vocabulary, **options)
    built = time.perf_counter() - started
    for widening in index.metadata.get("widenings", []):
        print(f"widened: {widening}", file=sys.stderr)
    for note in index.metadata.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    try:
        index.save(args.output, compress=not args.uncompressed)
    except OSError as exc:
        raise _UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"built {args.output}: {index.num_states} states, "
          f"{len(index.arrays.masks)} distinct masks, {os.path.getsize(args.output):,} bytes, "
          f"in {built:.2f} s with {vocabulary.name} ({vocabulary.size:,} tokens)")
    return 0


def _inspect(args) -> int:
    index, data = _read_index(args.file)
    try:
        rows = _describe(index, data)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        # The metadata is whatever the file says: a string where a mapping
        # belongs, a number where a list does. Described, it is one line.
        raise IndexFileError(f"{args.file}: malformed metadata "
                             f"({type(exc).__name__}: {exc})") from None
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def _describe(index, data: bytes) -> list[tuple[str, str]]:
    meta = index.metadata
    vocab = meta.get("vocabulary", {})
    arrays = index.arrays
    rows = [
        ("kind", meta.get("kind", "regex")),
        ("pattern", meta.get("pattern", "")),
        ("vocabulary", f"{vocab.get('name')} ({vocab.get('size'):,} tokens, "
                       f"fingerprint {str(vocab.get('fingerprint'))[:16]})"),
        ("source", vocab.get("source") or "-"),
        ("states", f"{index.num_states} ({len(index.final_states)} final)"),
        ("transitions", f"{index.num_transitions:,} token transitions "
                        f"({len(arrays.edge_group):,} stored as {int(arrays.token_group.max()) + 1:,} token groups)"),
        ("masks", f"{len(arrays.masks):,} distinct of {index.num_states}"),
        ("memory", f"{index.nbytes:,} bytes"),
        ("file size", f"{len(data):,} bytes ({_file_encodings(data)})"),
        ("build", ", ".join(f"{k}={v}" for k, v in meta.get("build", {}).items())),
    ]
    if meta.get("kind") == "schema":
        rows.insert(2, ("whitespace", meta.get("whitespace", "compact")))
        rows.insert(3, ("widenings", "; ".join(meta.get("widenings", [])) or "none"))
        rows.insert(4, ("notes", "; ".join(meta.get("notes", [])) or "none"))
    return rows


def _file_encodings(data: bytes) -> str:
    from .runtime.files import array_encodings

    encodings = array_encodings(data)
    packed = [name for name, encoding in encodings.items() if encoding != "raw"]
    if not packed:
        return "every array raw, mapped at load"
    return f"{', '.join(packed)} compressed; the rest raw"


def _check(args) -> int:
    from .runtime.files import decode_index
    from .runtime.guide import Guide

    unverified, data = _read_index(args.file, verify=False)
    spec = args.vocab
    if spec is None:
        recorded = unverified.metadata.get("vocabulary")
        spec = recorded.get("source") if isinstance(recorded, dict) else None
        if not isinstance(spec, str) or not spec:
            raise _UsageError(f"the index {args.file} does not record where its vocabulary "
                              f"comes from: pass --vocab")
    # A path written inside the file is as untrusted as the file: the
    # vocabulary loaders read regular files only, with a size bound
    # (tokendfa.vocab._files), the same checks as --vocab.
    vocabulary = _load_vocabulary(spec)
    try:
        index = decode_index(data, vocabulary, name=args.file)  # the bytes read once, verified
    except TokenDFAError:
        raise
    except Exception as exc:  # noqa: BLE001 - a forged file, not a bug of this command
        raise IndexFileError(f"{args.file}: not a valid index file "
                             f"({type(exc).__name__}: {exc})") from None
    token_ids = vocabulary.encode(args.text)
    guide = Guide(index)
    offset = 0
    for position, token_id in enumerate(token_ids):
        if not index.is_allowed(guide.state, token_id):
            print(f"rejected at token {position} (id {token_id}, "
                  f"{vocabulary.tokens[token_id]!r}) at byte {offset}: the text so far "
                  f"{args.text.encode()[:offset]!r} cannot go on this way")
            return 1
        guide.advance(token_id)
        offset += len(vocabulary.tokens[token_id] or b"")
    if guide.can_end():
        print(f"accepted: a complete match in {len(token_ids)} tokens")
        return 0
    print(f"prefix: valid so far ({len(token_ids)} tokens) but not a complete match")
    return 1


def _cache_fill(args) -> int:
    from .cache import DEFAULT_MAX_BYTES, IndexCache

    folder = args.schemas
    if not os.path.isdir(folder):
        raise _UsageError(f"--schemas {folder}: not a folder")
    if args.cache_dir is not None and os.path.exists(args.cache_dir) \
            and not os.path.isdir(args.cache_dir):
        raise _UsageError(f"--cache-dir {args.cache_dir}: not a folder")
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(folder)
                   for name in names if name.endswith(".json"))
    cache = IndexCache(args.cache_dir, max_bytes=args.max_bytes if args.max_bytes is not None
                       else DEFAULT_MAX_BYTES)
    if not files:
        print(f"no *.json files in {folder}: nothing to fill", file=sys.stderr)
        return 0
    # Checked once here so that a bad --vocab is one error, not one per schema;
    # workers load it again from the spec.
    vocabulary = _load_vocabulary(args.vocab)
    spec = vocabulary.source or args.vocab
    options = dict(whitespace=args.whitespace, lenient=args.lenient, any_depth=args.any_depth)
    started = time.perf_counter()
    counts = {"built": 0, "cached": 0, "failed": 0}
    outcomes = _fill_outcomes(files, vocabulary, spec, cache, options, args)
    for done, outcome in enumerate(outcomes, 1):
        counts[outcome.status] += 1
        if outcome.status == "failed":
            print(f"\r\033[Kfailed: {outcome.path}: {outcome.error}", file=sys.stderr)
        _progress_bar(done, len(files), counts["failed"])
    print(file=sys.stderr)
    print(f"filled {cache.directory}: {len(files)} schemas, {counts['built']} built, "
          f"{counts['cached']} already cached, {counts['failed']} failed, in "
          f"{time.perf_counter() - started:.1f} s ({cache.total_bytes():,} bytes in the cache)")
    return 1 if counts["failed"] else 0


def _fill_outcomes(files, vocabulary, spec, cache, options, args):
    from joblib import Parallel, delayed, parallel_config

    from .cache import fill_one

    directory = str(cache.directory)
    if args.jobs == 1 and args.backend is None:
        for path in files:
            yield fill_one(path, vocabulary, directory, cache.max_bytes, options)
        return
    # Workers get the spec, not the vocabulary: each loads it once, where
    # shipping the table with every task would cost more than most builds.
    tasks = (delayed(fill_one)(path, spec, directory, cache.max_bytes, options) for path in files)
    with contextlib.ExitStack() as stack:
        if args.backend == "dask":
            from distributed import Client, LocalCluster

            workers = args.jobs if args.jobs > 0 else os.cpu_count() or 1
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1,
                                                       processes=True, dashboard_address=None))
            stack.enter_context(Client(cluster))
        stack.enter_context(parallel_config(backend=args.backend) if args.backend
                            else contextlib.nullcontext())
        yield from Parallel(n_jobs=args.jobs, return_as="generator_unordered")(tasks)


def _progress_bar(done: int, total: int, failed: int, width: int = 30) -> None:
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    note = f", {failed} failed" if failed else ""
    sys.stderr.write(f"\r[{bar}] {done}/{total} schemas{note}\033[K")
    sys.stderr.flush()


def _cache_info(args) -> int:
    from .cache import IndexCache

    cache = IndexCache(args.cache_dir)
    entries = cache.entries()
    print(f"folder   {cache.directory}")
    print(f"entries  {len(entries)}, {sum(e.nbytes for e in entries):,} bytes")
    if entries:
        print(f"oldest   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(entries[0].last_used))}")
        print(f"newest   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(entries[-1].last_used))}")
    return 0


def _demo(args) -> int:
    import json

    import numpy as np

    from .analysis.errors import import_optional
    from .runtime.guide import Guide
    from .runtime.index import Index

    jsonschema = import_optional("jsonschema", extra="build", needed_for="the demo")

    started = time.perf_counter()
    vocabulary = _load_vocabulary(args.vocab).prepare()
    print(f"vocabulary  {vocabulary.name}: {vocabulary.size:,} tokens "
          f"(loaded and prepared in {time.perf_counter() - started:.2f} s)")
    print(f"schema      {json.dumps(DEMO_SCHEMA)}")
    started = time.perf_counter()
    lazy = Index.from_schema(DEMO_SCHEMA, vocabulary)  # lazy: serves at once
    lazy.get_mask(lazy.initial_state)
    print(f"lazy        compiled and first mask in {(time.perf_counter() - started) * 1000:.1f} ms")
    started = time.perf_counter()
    index = lazy.complete()  # the whole index, for a file
    print(f"completed   {index.num_states} states, {len(index.arrays.masks)} distinct masks "
          f"in {time.perf_counter() - started:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "demo.tdfa")
        index.save(path)
        started = time.perf_counter()
        index = Index.load(path, vocabulary)
        print(f"file        {os.path.getsize(path):,} bytes, loaded in "
              f"{(time.perf_counter() - started) * 1000:.1f} ms")

        guide = Guide(index)
        token_ids = vocabulary.encode(DEMO_TEXT)
        for token_id in token_ids:
            guide.advance(token_id)
        print(f"check       {DEMO_TEXT}\n            {len(token_ids)} tokens, "
              f"{'accepted' if guide.can_end() else 'NOT accepted'}")

        rng = np.random.default_rng(0)
        for sample in range(args.samples):
            guide = Guide(index)
            pieces = []
            while not guide.is_finished():
                allowed = guide.get_tokens()
                token_id = int(rng.choice(allowed))
                guide.advance(token_id)
                if token_id not in index.eos_token_ids:
                    pieces.append(vocabulary.tokens[token_id])
            text = b"".join(pieces).decode("utf-8")
            try:
                jsonschema.validate(json.loads(text), DEMO_SCHEMA)
                verdict = "valid"
            except (ValueError, jsonschema.ValidationError):
                verdict = "INVALID"
            print(f"sample {sample + 1}    {text}  ({guide.num_tokens} tokens, {verdict})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
