"""Constrained generation in vLLM: one logits processor serving every request
that asks for a constraint, under both of vLLM's model runners.

:class:`TokenDFALogitsProcessor` is registered under vLLM's
``vllm.logits_processors`` entry-point group when tokendfa is installed, so
every vLLM engine of the environment loads it (a request that does not ask
for a constraint costs nothing). It is a subclass of both of vLLM 0.32's
processor base classes, the V1 model runner's
(``vllm.v1.sample.logits_processor.LogitsProcessor``, the CPU build's) and
the Model Runner V2's (``vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor``,
the default on CUDA), so both runners' loaders accept it; building it picks
the implementation from the arguments the runner gives: ``(vllm_config,
device, is_pin_memory)`` makes a :class:`V1Processor`, ``(vllm_config,
req_states)`` a :class:`V2Processor`. Passing it explicitly as well
(``LLM(..., logits_processors=[TokenDFALogitsProcessor])``, as vLLM's
documentation shows) makes vLLM build it twice (it does not deduplicate
entry-point and explicit processors); the second instance built for the same
engine in the same build finds the first and does nothing.

A request opts in through ``SamplingParams.extra_args``::

    SamplingParams(extra_args={"tokendfa": {"json_schema": schema}})   # a dict, a bool or JSON text
    SamplingParams(extra_args={"tokendfa": {"regex": r"[0-9]{3}-[0-9]{4}"}})
    SamplingParams(extra_args={"tokendfa": {"index": "phone.tdfa"}})  # a file of the index folder

and, against the OpenAI server, whose ``vllm_xargs`` carries only strings,
numbers and lists, through flat keys: ``{"tokendfa_json_schema": "<JSON
text>"}``, ``{"tokendfa_regex": "..."}``, ``{"tokendfa_index": "name"}``.
The text the request generates is then a match of the pattern (or a
document valid for the schema), and it ends (EOS) only on a complete match.
It closes within the request's ``max_tokens``: when few tokens are left,
only the tokens after which the text can still reach a complete match and
EOS in the tokens that remain are allowed (:class:`~tokendfa.Guide` with
``max_tokens``; on by default, see ``close_within_max_tokens`` below). A
request turns this off with ``{"tokendfa": {..., "close_within_max_tokens":
False}}`` (flat: ``"tokendfa_close_within_max_tokens": "false"``); a request
that cannot close within its ``max_tokens`` at all is served without it,
with a warning in the log, and ``max_tokens`` may then cut it short.

# The operator's settings (:class:`Settings`)

Environment variables, or the engine option ``additional_config={"tokendfa":
{...}}`` (which wins):

* ``TOKENDFA_INDEX_DIR`` / ``index_dir``: the folder of index files a request
  may name. A request's ``index`` is a file name in it (path separators and
  ``..`` are refused); only regular files are read (opened non-blocking and
  checked with ``fstat``, so a FIFO or a device cannot block the server).
  Without the folder, ``index`` requests are refused with a message saying
  how to enable them. No error tells the client anything about paths outside
  the folder.
* ``TOKENDFA_COMPILE_TIME_LIMIT`` / ``compile_time_limit`` (seconds, default
  5): the time limit of every compile a request causes, in the front end
  (``validate_params``) and in the worker (building its index, and each
  step's advance and mask of a row, which compile the lazy index's new
  states).
* ``TOKENDFA_MEMO_BYTES`` / ``memo_bytes`` (default 1 GiB): the bytes the
  indexes each process keeps for later requests may take (estimated; see
  :func:`index_bytes`).
* ``TOKENDFA_PRELOAD`` / ``preload`` (default on): the worker reads the
  model's vocabulary and its lazy tables while the engine starts, on a
  thread, instead of with the first constrained request.
* ``TOKENDFA_CLOSE_WITHIN_MAX_TOKENS`` / ``close_within_max_tokens`` (default
  on): each request's text closes within its ``max_tokens`` (V1: the
  request's ``SamplingParams.max_tokens`` less the tokens generated; V2:
  the same for row ``k = 0``, and ``k`` fewer for draft position ``k``); a
  request's own ``close_within_max_tokens`` wins.

A setting that cannot be read is logged and its default used: a typo must
not stop an engine.

# Where the work happens

vLLM runs this class in two processes. The front end (the ``LLM`` object or
the API server) calls :meth:`~TokenDFALogitsProcessor.validate_params` for
every request before scheduling it; the worker builds one instance and
drives it each step.

* ``validate_params`` reads the constraint, reads the model's vocabulary
  (``Vocabulary.from_pretrained`` on the model's tokenizer folder, once per
  process: the folder vLLM was given, or for a hub id the Hub cache's
  snapshot vLLM loaded the tokenizer from, so the vocabulary store serves
  the next process either way) and the lazy engine's tables of it
  (:func:`tokendfa.lazy.load_or_make_tables`), both from the cache folder
  where the worker left them while the engine started, and builds the
  index under the compile time limit. It prepares nothing more: it only
  checks requests, and never computes a mask. Any problem
  (an unknown key, a schema that is not JSON or that tokendfa cannot
  compile, a compile over the time limit, an invalid regex, an index name
  that is not in the folder, an index built for another vocabulary) is a
  ``ValueError`` with a one-line message, which vLLM turns into a validation
  error (HTTP 400), so a bad request never reaches the engine.
* Schemas and regexes are served by lazy indexes (:class:`~tokendfa.lazy.LazyIndex`):
  a request's schema is usually new, and a lazy index gives its first mask
  in milliseconds where the eager build takes a second or two over Gemma's
  262,144 tokens. The front end builds one to validate the request, the
  worker its own (the two processes share no memory), and each process
  keeps indexes in a memo bounded in bytes, so a schema used over and over
  keeps the rows its generations computed.
* ``validate_params`` is a classmethod: vLLM 0.32 gives it the request, not
  the engine's configuration. :func:`engine_config` finds the configuration
  on the front end's ``InputProcessor`` a few frames up (the one place that
  knows vLLM's call chain). When it cannot (a direct call, another vLLM),
  it fails safe: only the checks that need no vocabulary run (JSON, schema,
  regex syntax, index file header), and anything the worker then fails to
  build ends that request at once (only EOS allowed) with an error in the
  log, never an engine crash.
* The worker reads the vocabulary and prepares it for serving
  (``Vocabulary.prepare(eager=False)``) on a thread while the engine starts
  (``TOKENDFA_PRELOAD``), writing the vocabulary store's entry and the lazy
  tables' file for the front end; with the preload off, when the first
  constrained request arrives.
* A request the worker cannot serve (its index fails to build, a compile
  passes the time limit, a token the index refuses because something after
  this processor changed the logits) ends: its rows allow only EOS from then
  on, with a line in the log; the other requests go on.

# V1: a persistent batch

Row ``i`` of the logits is the request at batch index ``i``.
``update_state`` follows the batch (removed, added with a live reference to
the request's output ids, moved one way or swapped); ``apply`` advances each
constrained row's :class:`~tokendfa.Guide` with the output ids it has not
seen yet (read there, not in ``update_state``: with asynchronous scheduling
vLLM appends a placeholder first and writes the real id just before
sampling), then masks the rows. vLLM's V1 runner loads no custom logits
processor under speculative decoding, so there a constrained request is
refused.

# V2: slots, and one row per draft token

Requests live in slots (``add_request(slot, params)`` starts one; slots are
recycled, so it resets all of the slot's state). ``apply(logits, ctx)`` is
given the step's layout: row ``r`` belongs to slot
``ctx.expanded_idx_mapping[r]``, is draft position ``k =
ctx.expanded_local_pos[r]`` of its request, sits at sequence position
``ctx.pos[r]`` and was fed token ``ctx.input_ids[r]``. For each constrained
request, row ``k = 0`` is fed the last committed token (position ``p``), and
rows ``k >= 1`` are fed the draft tokens. Its guide is brought up to date
with the committed output, positions ``prompt_len .. p``: the token at
``p`` is row 0's input; the ones before it that the guide has not seen are
the previous step's accepted drafts (speculative decoding accepts a prefix
of the drafts), which this processor remembered, or, where it has none (the
first step after a request resumes from preemption), are read from the
runner's ``req_states.all_token_ids``. Row ``k`` is then masked by the
state the guide reaches through the first ``k`` drafts, walked on a
separate guide: the request's own guide only ever holds committed tokens,
so the drafts the next step shows were rejected (its position ``p`` came
back short of them) are simply never fed, and a rewind (a position before
what the guide has seen) rolls the guide back. Rows after a draft the index
refuses are masked like the last allowed state (the verifier rejects that
draft whatever they say); rows after a drafted EOS allow only EOS.

# A step's masks

Each constrained row's guide copies its allowed-token bitset into row ``k``
of an ``int32 [rows, words]`` (pinned) buffer (:func:`fill_request_rows`, the one
loop that writes a step's masks), and once for all rows, the buffer goes to
the logits' device, is unpacked there a byte at a time through a ``[256,
8]`` table of ``0`` / ``-inf``, and is added into the constrained rows
(``index_add_``). Measured on this project's 2-core CPU machine for 262,144
logits, the table costs 0.4 ms for one row and 2.6 ms for sixteen; shifting
each word into a bool mask and ``masked_fill_`` took 2.8 ms and 38 ms.
Columns past the vocabulary are never allowed; EOS is allowed exactly where
the text is a complete match.

# What it cannot do (vLLM 0.32)

* Speculative decoding under the V1 runner (vLLM loads no custom processor
  there; passing this one explicitly makes vLLM refuse to start). Under V2
  it is served as above.
* vLLM's own ``structured_outputs`` or ``min_tokens > 0`` together with a
  tokendfa constraint: both can forbid the only tokens the other allows,
  which leaves a row with nothing to pick; such a request is refused.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.errors import (IndexFileError, TimeLimitError, TokenDFAError, TokenNotAllowedError,
                               import_optional)
from ..analysis.limits import limits
from ..analysis.regular_files import open_regular_file
from ..runtime.files import decode_index
from ..runtime.guide import Guide
from ..runtime.index import Index
from ..vocab.vocabulary import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    from ..lazy import LazyIndex

__all__ = ["TokenDFALogitsProcessor", "V1Processor", "V2Processor", "Constraint", "Settings",
           "constraint_of", "engine_config", "fill_request_rows", "index_bytes", "EXTRA_ARGS_KEY",
           "XARGS_KEYS", "tokenizer_folder"]

# Importing this module is opting in to torch and vLLM (neither is a
# dependency of tokendfa).
torch = import_optional("torch", extra=None, needed_for="tokendfa.integrations.vllm")
_vllm_lp = import_optional("vllm.v1.sample.logits_processor", extra=None,
                           needed_for="tokendfa.integrations.vllm", package="vllm")
MoveDirectionality = _vllm_lp.MoveDirectionality
try:  # the Model Runner V2's interface (vLLM 0.32; import-light, loads on the CPU build)
    from vllm.v1.worker.gpu.sample.logits_processor.interface import (
        LogitsProcessor as _V2Base)
except ImportError:  # pragma: no cover - a vLLM without V2: a base class with nothing in it
    class _V2Base:  # type: ignore[no-redef]
        pass

if sys.byteorder != "little":  # pragma: no cover
    # The masks are little-endian words read a byte at a time below.
    raise ImportError("tokendfa.integrations.vllm needs a little-endian machine")

EXTRA_ARGS_KEY = "tokendfa"
# extra_args["tokendfa"] keys, and the flat vllm_xargs keys, -> the constraint's kind.
NESTED_KEYS = {"json_schema": "schema", "regex": "regex", "index": "index"}
XARGS_KEYS = {"tokendfa_json_schema": "schema", "tokendfa_regex": "regex", "tokendfa_index": "index"}
# The request's options (not constraints): extra_args["tokendfa"] key -> flat vllm_xargs key.
OPTION_KEYS = {"close_within_max_tokens": "tokendfa_close_within_max_tokens"}
_MEMO_COUNT = 256  # indexes kept per process at most, whatever their bytes


def _logger():
    # Under vLLM's logger, whose handler and level vLLM sets up: the messages
    # appear in the engine's log, in its format (a logger named after this
    # module has no handler, so its INFO lines were lost).
    from vllm.logger import init_logger

    return init_logger("vllm.tokendfa")


# --- the operator's settings -------------------------------------------------------------

_DEFAULT_TIME_LIMIT = 5.0   # seconds: a Gemma schema's lazy index takes ~0.4 s to start on 2 cores
_DEFAULT_MEMO_BYTES = 1 << 30
_ENABLE_INDEXES = ("index files are not enabled on this server (the operator sets "
                   "TOKENDFA_INDEX_DIR, or additional_config={'tokendfa': {'index_dir': ...}}, "
                   "to the folder of index files requests may name)")


@dataclass(frozen=True)
class Settings:
    """The operator's settings (see the module docstring): environment
    variables, overridden by ``additional_config["tokendfa"]`` of the engine."""

    index_dir: str | None = None
    compile_time_limit: float = _DEFAULT_TIME_LIMIT
    memo_bytes: int = _DEFAULT_MEMO_BYTES
    preload: bool = True
    close_within_max_tokens: bool = True

    @classmethod
    def of(cls, vllm_config: Any = None) -> "Settings":
        options: dict = {}
        extra = getattr(vllm_config, "additional_config", None)
        if isinstance(extra, dict) and isinstance(extra.get(EXTRA_ARGS_KEY), dict):
            options = extra[EXTRA_ARGS_KEY]
            for name in sorted(set(options) - {"index_dir", "compile_time_limit", "memo_bytes",
                                               "preload", "close_within_max_tokens"}):
                _warn_once(f"tokendfa: unknown setting {name!r} in additional_config; ignored")
        index_dir = options.get("index_dir", os.environ.get("TOKENDFA_INDEX_DIR")) or None
        if index_dir is not None:
            index_dir = os.path.abspath(os.fspath(index_dir))
        return cls(index_dir,
                   _positive(options, "compile_time_limit", "TOKENDFA_COMPILE_TIME_LIMIT",
                             float, _DEFAULT_TIME_LIMIT),
                   _positive(options, "memo_bytes", "TOKENDFA_MEMO_BYTES", int, _DEFAULT_MEMO_BYTES),
                   _switch(options, "preload", "TOKENDFA_PRELOAD", True),
                   _switch(options, "close_within_max_tokens", "TOKENDFA_CLOSE_WITHIN_MAX_TOKENS", True))


def _switch(options: dict, name: str, variable: str, default: bool) -> bool:
    value = options.get(name, os.environ.get(variable))
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    _warn_once(f"tokendfa: setting {name} ({variable}) is {value!r}, not on/off; "
               f"the default ({'on' if default else 'off'}) is used")
    return default


def _positive(options: dict, name: str, variable: str, kind: type, default):
    value = options.get(name, os.environ.get(variable))
    if value is None or value == "":
        return default
    try:
        number = kind(value)
        if not number > 0:
            raise ValueError
    except (TypeError, ValueError):
        _warn_once(f"tokendfa: {name}={value!r} is not a positive number; using {default}")
        return default
    return number


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    # The settings are read for every request the front end checks: a bad
    # one is said once per process, not once per request.
    if message not in _WARNED:
        _WARNED.add(message)
        _logger().error("%s", message)


# --- the request's constraint ---------------------------------------------------------

@dataclass(frozen=True)
class Constraint:
    """What one request asked for."""
    kind: str      # "schema", "regex" or "index"
    source: Any    # the schema (dict or bool), the pattern, or the index file's path
    key: str       # how the request spelled it, for messages
    close: bool | None = None   # close within max_tokens (None: as the engine's setting says)


def constraint_of(extra_args: dict | None) -> Constraint | None:
    """The constraint in a request's ``SamplingParams.extra_args``, or ``None``
    when it asks for none. ``ValueError`` (one line) for arguments this
    processor cannot read; keys that do not start with ``tokendfa`` belong to
    others and are ignored."""
    if not extra_args:
        return None
    if not isinstance(extra_args, dict):
        return None
    found: list[tuple[str, str, Any]] = []  # (key as spelled, kind, value)
    options: dict[str, tuple[str, Any]] = {}  # option -> (key as spelled, value)
    flat_options = {flat: name for name, flat in OPTION_KEYS.items()}
    if EXTRA_ARGS_KEY in extra_args:
        nested = extra_args[EXTRA_ARGS_KEY]
        if not isinstance(nested, dict):
            raise ValueError(f"extra_args[{EXTRA_ARGS_KEY!r}] must be a dict with one of "
                             f"{_names(NESTED_KEYS)}, not {type(nested).__name__}")
        unknown = sorted(set(map(str, nested)) - set(NESTED_KEYS) - set(OPTION_KEYS))
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} in extra_args[{EXTRA_ARGS_KEY!r}]; "
                             f"expected one of {_names(NESTED_KEYS)} (and the options "
                             f"{_names(OPTION_KEYS)})")
        found += [(f"{EXTRA_ARGS_KEY}.{name}", NESTED_KEYS[name], value)
                  for name, value in nested.items() if name in NESTED_KEYS]
        options.update((name, (f"{EXTRA_ARGS_KEY}.{name}", value))
                       for name, value in nested.items() if name in OPTION_KEYS)
    for name, value in extra_args.items():
        if not isinstance(name, str) or not name.startswith(EXTRA_ARGS_KEY + "_"):
            continue
        if name in flat_options:
            options[flat_options[name]] = (name, value)
            continue
        if name not in XARGS_KEYS:
            raise ValueError(f"unknown key {name!r}; expected one of {_names(XARGS_KEYS)} "
                             f"(and the options {_names(flat_options)})")
        found.append((name, XARGS_KEYS[name], value))
    close = None
    if "close_within_max_tokens" in options:
        spelled, value = options["close_within_max_tokens"]
        close = _flag(spelled, value)
        if not found:
            raise ValueError(f"{spelled} is an option of a tokendfa constraint, and the request "
                             f"gives none; give one of {_names(NESTED_KEYS)}")
    if not found:
        if EXTRA_ARGS_KEY in extra_args:
            raise ValueError(f"extra_args[{EXTRA_ARGS_KEY!r}] is empty; give one of "
                             f"{_names(NESTED_KEYS)}")
        return None
    if len(found) > 1:
        raise ValueError(f"give one tokendfa constraint, not {len(found)} "
                         f"({', '.join(key for key, _, _ in found)})")
    key, kind, value = found[0]
    if kind == "schema":
        if isinstance(value, (str, bytes, bytearray)):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"{key} is not JSON: {exc}") from None
            except RecursionError:
                raise ValueError(f"{key} is nested too deeply to read") from None
        if not isinstance(value, (dict, bool)):
            raise ValueError(f"{key} must be a JSON Schema (an object or a boolean), "
                             f"not {type(value).__name__}")
    elif kind == "regex":
        if not isinstance(value, str):
            raise ValueError(f"{key} must be a string, not {type(value).__name__}")
    else:
        if not isinstance(value, str):
            raise ValueError(f"{key} must be the name of an index file, not {type(value).__name__}")
        if (not value or value in (".", "..") or ".." in value or "\x00" in value
                or any(sep and sep in value for sep in (os.sep, os.altsep, "/", "\\"))):
            raise ValueError(f"{key} must be the name of a file in the server's index folder, "
                             "without path separators or '..'")
    return Constraint(kind, value, key, close)


def _flag(key: str, value: Any) -> bool:
    """A request's on/off option: a bool, 0 or 1, or their words (vllm_xargs
    carries strings and numbers)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ValueError(f"{key} must be true or false, not {value!r}")


def _names(keys: dict[str, str]) -> str:
    return ", ".join(repr(k) for k in keys)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- the model's vocabulary and the indexes, once per process ----------------------------

_LAZY_BASE_BYTES = 64 << 10   # a lazy index's automaton and bookkeeping before any row


def index_bytes(index: "Index | LazyIndex") -> int:
    """Bytes ``index`` holds, for the memo's bound: an eager index's arrays;
    for a lazy one, which grows as it serves, a conservative estimate from
    what it holds now: a mask and its successors per served state (masks of
    equal rows are shared, counted here each time) and a 256-entry row per
    byte-automaton state. Both count what closing within ``max_tokens``
    keeps (at most ~4.5 MB an index)."""
    closing = int(getattr(index, "closing_bytes", 0))   # what closing within budgets keeps
    if isinstance(index, Index):
        return int(index.nbytes) + closing
    words = (int(index.vocab_size) + 31) // 32
    byte_states = int(getattr(index.byte_dfa, "num_states", 0))
    return (_LAZY_BASE_BYTES + int(index.num_served_states) * (words * 4 + 256) + byte_states * 1024
            + closing)


class _NoSuchIndex(ValueError):
    """The request's index name names no readable regular file of the folder
    (one message for every reason, so it reveals nothing more)."""


class _Indexes:
    """Per process: the vocabulary of each model seen (read once) and the
    indexes built or loaded (an LRU memo bounded in bytes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vocabularies: dict[tuple, Vocabulary] = {}
        self._serving: set[tuple] = set()   # the keys prepared for serving
        self._memo: OrderedDict[tuple, "Index | LazyIndex"] = OrderedDict()

    def vocabulary(self, model_config: Any, *, serving: bool = True) -> Vocabulary:
        """The model's vocabulary: ``Vocabulary.from_pretrained`` on its
        tokenizer folder (:func:`tokenizer_folder`: the folder it names, or
        the Hub cache's snapshot of a hub id), which the vocabulary store
        keeps for the next process; else on the tokenizer vLLM loaded.

        With the lazy engine's tables (:func:`tokendfa.lazy.load_or_make_tables`:
        read from the cache folder when another process of the same
        vocabulary made them, which the worker does while the engine
        starts); ``serving`` (the worker) prepares the rest of what serving
        uses, where the front end, which only builds indexes to check
        requests, stops at the tables: on Gemma 3, 0.1-0.2 s instead of the
        0.7-1.1 s of making them and preparing, measured on the loaded
        2-core machine."""
        path = getattr(model_config, "tokenizer", None) or getattr(model_config, "model", None)
        revision = getattr(model_config, "tokenizer_revision", None)
        key = (str(path), revision)
        with self._lock:
            vocab = self._vocabularies.get(key)
            if vocab is not None and serving and key not in self._serving:
                vocab.prepare(eager=False)
                self._serving.add(key)
            if vocab is None:
                folder = tokenizer_folder(path, revision)
                if folder is not None:
                    vocab = Vocabulary.from_pretrained(folder)
                else:
                    from vllm.tokenizers.registry import cached_tokenizer_from_config

                    tokenizer = cached_tokenizer_from_config(model_config)
                    if tokenizer is None:
                        raise ValueError("the model's tokenizer is not loaded "
                                         "(skip_tokenizer_init), so its vocabulary is unknown")
                    vocab = Vocabulary.from_pretrained(tokenizer)
                # The per-vocabulary tables now, once per process: not
                # inside the first request's compile, whose time limit is
                # the request's own. Only what lazy indexes use: requests
                # are served by lazy indexes.
                from ..lazy import load_or_make_tables

                load_or_make_tables(vocab)
                if serving:
                    vocab.prepare(eager=False)
                    self._serving.add(key)
                self._vocabularies[key] = vocab
            return vocab

    def index(self, constraint: Constraint, vocab: Vocabulary | None,
              settings: Settings | None = None) -> "Index | LazyIndex":
        """The constraint's index, from the memo or built (under the caller's
        limits); with ``vocab`` None (no engine configuration) only the
        checks that need no vocabulary run, and None is returned."""
        settings = settings or Settings.of()
        if constraint.kind == "index":
            return self._index_file(constraint.source, vocab, settings)
        if vocab is None:
            _check_without_vocabulary(constraint)
            return None
        key = (constraint.kind, json.dumps(constraint.source, sort_keys=True), vocab.fingerprint)
        index = self._recall(key, settings)
        if index is None:
            if constraint.kind == "regex":
                index = Index.from_regex(constraint.source, vocab, lazy=True)
            else:
                index = Index.from_schema(constraint.source, vocab, lazy=True)
            self._keep(key, index, settings)
        return index

    def _index_file(self, name: str, vocab: Vocabulary | None, settings: Settings) -> Index | None:
        if settings.index_dir is None:
            raise ValueError(_ENABLE_INDEXES)
        path = os.path.join(settings.index_dir, name)
        try:
            # Only a regular file, opened without blocking (a FIFO would wait
            # for a writer); its error names the path, which the client must
            # not see, so every reason becomes the one message.
            fd = open_regular_file(path, "index file", IndexFileError)
        except IndexFileError:
            raise _NoSuchIndex(name) from None
        try:
            info = os.fstat(fd)
            if info.st_size == 0:
                raise _NoSuchIndex(name)
            key = ("index", info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size,
                   vocab.fingerprint if vocab is not None else None)
            index = self._recall(key, settings) if vocab is not None else None
            if index is not None:
                return index
            try:
                # Read, not mapped: a file truncated in place under a mapping
                # would kill the worker with SIGBUS (see runtime.files).
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    buffer = handle.read()
            except (OSError, MemoryError, OverflowError):
                raise _NoSuchIndex(name) from None
        finally:
            os.close(fd)
        index = decode_index(buffer, vocab, name=name)
        if vocab is None:
            return None
        self._keep(key, index, settings)
        return index

    def _recall(self, key: tuple, settings: Settings):
        with self._lock:
            index = self._memo.get(key)
            if index is not None:
                self._memo.move_to_end(key)
                self._trim(settings.memo_bytes)   # lazy indexes have grown since
            return index

    def _keep(self, key: tuple, index, settings: Settings) -> None:
        with self._lock:
            self._memo[key] = index
            self._trim(settings.memo_bytes)

    def _trim(self, budget: int) -> None:
        """Drop the least recently used indexes until the rest fit ``budget``
        (the newest too, if alone it does not: its request keeps it alive)."""
        sizes = {key: index_bytes(index) for key, index in self._memo.items()}
        total = sum(sizes.values())
        while self._memo and (total > budget or len(self._memo) > _MEMO_COUNT):
            key, _ = self._memo.popitem(last=False)
            total -= sizes[key]

    def forget(self, index) -> None:
        """Drop ``index`` from the memo (a compile of it passed the time
        limit: it is not served to later requests)."""
        with self._lock:
            for key in [key for key, kept in self._memo.items() if kept is index]:
                del self._memo[key]

    def total_bytes(self) -> int:
        with self._lock:
            return sum(index_bytes(index) for index in self._memo.values())


_INDEXES = _Indexes()


def tokenizer_folder(name: Any, revision: str | None = None) -> str | None:
    """The local folder of the tokenizer vLLM was given as ``name``: the
    folder itself, or for a hub id the Hub cache's snapshot of ``revision``
    (``main`` by default) when it holds ``tokenizer.json``; None otherwise
    (not downloaded, or not a Hugging Face repository).

    vLLM loads a hub id's tokenizer from that snapshot (it downloads the
    repository's files there when the engine starts, before any request),
    so reading the folder gives the same vocabulary as converting vLLM's
    tokenizer object, and a folder is what the vocabulary store keys by its
    files: the next process loads it instead of converting the tokenizer
    again (seconds for Gemma's 262,144 tokens). Only the local cache is
    looked at (``huggingface_hub.try_to_load_from_cache``), never the
    network; vLLM's tokenizer loader takes the default cache folder too."""
    if name is None:
        return None
    text = os.fspath(name) if isinstance(name, os.PathLike) else str(name)
    if os.path.isdir(text):
        return text
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id=text, filename="tokenizer.json", revision=revision)
    except Exception:  # noqa: BLE001 - not a repository id (HFValidationError), no huggingface_hub
        return None
    if not isinstance(found, str) or not os.path.isfile(found):
        return None
    return os.path.dirname(found)


def _check_without_vocabulary(constraint: Constraint) -> None:
    """What can be checked of a schema or regex without the model's vocabulary."""
    if constraint.kind == "schema":
        from ..schema.api import regex_from_schema

        regex_from_schema(constraint.source)
    else:
        from ..analysis.regex_syntax import normalize_pattern

        normalize_pattern(constraint.source)


def _build(constraint: Constraint, vocab: Vocabulary | None, settings: Settings):
    """The constraint's index under the compile time limit; errors as one-line ValueErrors."""
    try:
        with limits(time_limit=settings.compile_time_limit):
            return _INDEXES.index(constraint, vocab, settings)
    except _NoSuchIndex:
        raise ValueError(f"{constraint.key}: no index file named {constraint.source!r} "
                         "in the server's index folder") from None
    except TimeLimitError:
        raise ValueError(f"{constraint.key}: compiling it took longer than the time limit of "
                         f"{settings.compile_time_limit:g} s") from None
    except (TokenDFAError, OSError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise _problem(constraint, exc) from None


def _problem(constraint: Constraint, exc: BaseException) -> ValueError:
    if isinstance(exc, OSError):  # only a name of the folder could have been opened
        text = f"cannot read index file {constraint.source!r}"
    else:
        text = str(exc) or type(exc).__name__
    return ValueError(_one_line(f"{constraint.key}: {text}"))


# --- the engine's configuration in the front end -------------------------------------------

def engine_config() -> Any:
    """The VllmConfig of the front end calling ``validate_params``, or None.

    vLLM 0.32 passes ``validate_params`` the request only. Its caller's
    caller is the front end's ``InputProcessor._validate_params``, whose
    ``self.vllm_config`` is the engine's configuration (V1 runner: through
    ``validate_logits_processors_parameters``; V2: through the closure
    ``build_custom_logits_processors_params_validator`` returns); this looks
    a few frames up for an object with a ``vllm_config`` that has a
    ``model_config``, then at the config vLLM has set as current. Anything
    unexpected gives None, which callers treat as "configuration unknown"
    (the checks that need no vocabulary only): never an error.
    """
    try:
        frame = sys._getframe(2)   # past this function and validate_params
        for _ in range(8):
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            config = getattr(owner, "vllm_config", None)
            if config is not None and getattr(config, "model_config", None) is not None:
                return config
            frame = frame.f_back
        from vllm.config import get_current_vllm_config_or_none

        config = get_current_vllm_config_or_none()
        return config if getattr(config, "model_config", None) is not None else None
    except Exception:  # noqa: BLE001 - failing safe is the contract
        return None


def _uses_v2(config: Any) -> bool:
    try:
        return bool(getattr(config, "use_v2_model_runner", False))
    except Exception:  # noqa: BLE001 - a property that refuses the configuration
        return False


# --- a step's masks --------------------------------------------------------------------

def fill_request_rows(guides: "list[Guide | None]", bitmask: np.ndarray, eos_row: np.ndarray,
                      time_limit: float) -> list[tuple[int, BaseException]]:
    """Write row ``k`` of ``bitmask`` from ``guides[k]`` (None: only EOS),
    each row under ``time_limit`` (a lazy index compiles a state it has not
    served yet). Returns the rows that failed, with their errors; those rows
    hold ``eos_row``. The one loop that writes a step's masks. Not
    :func:`tokendfa.fill_masks`: that batch call stops at the first error,
    where here a row over its limit ends its own request alone (and its
    threads do not pay yet: ``benchmarks/RESULTS.md``, batch masks)."""
    failed: list[tuple[int, BaseException]] = []
    for k, guide in enumerate(guides):
        if guide is None:
            bitmask[k] = eos_row
            continue
        try:
            with limits(time_limit=time_limit):
                guide.write_mask_into(bitmask, row=k)
        except (TokenDFAError, MemoryError, RecursionError) as exc:
            bitmask[k] = eos_row
            failed.append((k, exc))
    return failed


class _Masker:
    """The step's bitmask buffer (host, pinned off the CPU) and its unpacking
    into ``-inf`` on the logits' device."""

    def __init__(self, width: int, device: Any, pin: bool) -> None:
        self.width = width
        self.words = (width + 31) // 32     # widened if the vocabulary is wider
        self._device = torch.device(device)
        self._pin = bool(pin)
        self._bitmask: torch.Tensor | None = None     # int32 [capacity, words]
        self._bitmask_np: np.ndarray | None = None    # the same memory
        self._table: torch.Tensor | None = None       # [256, 8] of 0 / -inf on the device
        self._penalty: torch.Tensor | None = None     # [capacity * words * 4, 8] on the device
        self.eos_ids: list[int] = []
        self._eos_words: np.ndarray | None = None
        # Recorded after the last asynchronous copy out of the pinned buffer.
        # vLLM's asynchronous scheduling lets the host run a step ahead of the
        # GPU and syncs before a step only when some request has a sampled
        # token to read back, so without this wait the next step could
        # overwrite the buffer before the GPU has copied it.
        self._copied: Any = None

    def widen(self, vocab_size: int, eos_ids) -> None:
        words = (max(self.width, vocab_size) + 31) // 32
        if words != self.words:
            self.words, self._bitmask = words, None
        self.eos_ids, self._eos_words = list(eos_ids), None

    def eos_row(self) -> np.ndarray:
        if self._eos_words is None:
            eos = np.zeros(self.words, dtype=np.uint32)
            for token in self.eos_ids:
                if 0 <= token < self.words * 32:
                    eos[token >> 5] |= np.uint32(1 << (token & 31))
            self._eos_words = eos.view(np.int32)
        return self._eos_words

    def rows(self, count: int) -> np.ndarray:
        """The buffer's first ``count`` rows, to be written (the last step's
        copy out of it has finished)."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
        if self._bitmask is None or self._bitmask.shape[0] < count:
            capacity = max(8, 1 << (count - 1).bit_length())
            pin = self._pin and self._device.type != "cpu"
            self._bitmask = torch.zeros((capacity, self.words), dtype=torch.int32, pin_memory=pin)
            self._bitmask_np = self._bitmask.numpy()
            self._penalty = None
        return self._bitmask_np[:count]

    def mask(self, logits: Any, order: list[int]) -> None:
        """Add ``-inf`` to the disallowed columns of rows ``order`` (ascending)
        of ``logits``, row ``k`` of the buffer for ``order[k]``."""
        count, words = len(order), self.words
        width = logits.shape[1]
        device, dtype = logits.device, logits.dtype
        if self._table is None or self._table.device != device or self._table.dtype != dtype:
            bits = (np.arange(256)[:, None] >> np.arange(8)) & 1   # little-endian bit order
            values = np.where(bits == 1, 0.0, -np.inf).astype(np.float32)
            self._table = torch.from_numpy(values).to(device=device, dtype=dtype)
            self._penalty = None
        capacity = self._bitmask.shape[0]
        if self._penalty is None or self._penalty.device != device:
            self._penalty = torch.empty((capacity * words * 4, 8), device=device, dtype=dtype)
        data = self._bitmask[:count].to(device, non_blocking=True).view(torch.uint8).view(-1)
        if device.type == "cuda" and self._bitmask.is_pinned():
            self._copied = torch.cuda.Event()
            self._copied.record()
        penalty = self._penalty[:count * words * 4]
        torch.index_select(self._table, 0, data.to(torch.int64), out=penalty)
        if words * 32 >= width:
            penalty = penalty.view(count, words * 32)[:, :width]
        else:  # more logits than the buffer has bits: the columns past it are never allowed
            penalty = torch.cat([penalty.view(count, words * 32),
                                 torch.full((count, width - words * 32), float("-inf"),
                                            device=device, dtype=dtype)], dim=1)
        if count == logits.shape[0] and order[0] == 0 and order[-1] == count - 1:
            logits.add_(penalty)   # every row constrained, in order
        else:
            logits.index_add_(0, torch.tensor(order, dtype=torch.int64, device=device), penalty)


# --- the logits processor -----------------------------------------------------------------

# id(vllm_config) -> the first processor built for that engine configuration
# (weakly held): a second one of the same build does nothing (see _claim).
_BUILT: dict[int, "weakref.ref[TokenDFALogitsProcessor]"] = {}
_BUILT_LOCK = threading.Lock()


class TokenDFALogitsProcessor(_vllm_lp.LogitsProcessor, _V2Base):
    """Constrains every request whose ``extra_args`` asks for it (see the
    module docstring); leaves the other rows of the batch untouched.

    A subclass of both runners' base classes, so both loaders accept it;
    ``TokenDFALogitsProcessor(vllm_config, device, is_pin_memory)`` (the V1
    runner's call) is a :class:`V1Processor`,
    ``TokenDFALogitsProcessor(vllm_config, req_states)`` (the V2 runner's)
    a :class:`V2Processor`."""

    def __new__(cls, vllm_config: Any = None, *args: Any, **kwargs: Any):
        if cls is TokenDFALogitsProcessor:
            v2 = "req_states" in kwargs or (len(args) == 1 and not kwargs)
            cls = V2Processor if v2 else V1Processor
        return object.__new__(cls)

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuse, with a one-line ``ValueError``, a request whose constraint
        cannot be served; build its (lazy) index otherwise."""
        constraint = constraint_of(getattr(sampling_params, "extra_args", None))
        if constraint is None:
            return
        if getattr(sampling_params, "structured_outputs", None) is not None:
            raise ValueError("a request takes either structured_outputs or a tokendfa "
                             "constraint, not both")
        if getattr(sampling_params, "min_tokens", 0):
            raise ValueError("min_tokens > 0 cannot be combined with a tokendfa constraint "
                             "(it forbids EOS where the pattern may allow nothing else)")
        config = engine_config()
        settings = Settings.of(config)
        if (config is not None and getattr(config, "speculative_config", None)
                and not _uses_v2(config)):
            raise ValueError("vLLM's V1 model runner runs no custom logits processor with "
                             "speculative decoding, so a tokendfa constraint cannot be applied "
                             "(the V2 runner, VLLM_USE_V2_MODEL_RUNNER=1, can)")
        if constraint.kind == "index" and settings.index_dir is None:
            raise ValueError(f"{constraint.key}: {_ENABLE_INDEXES}")
        vocab = None
        if config is not None:
            try:
                vocab = _INDEXES.vocabulary(config.model_config, serving=False)
            except Exception as exc:  # noqa: BLE001 - a tokenizer library raises anything
                raise ValueError(_one_line(f"tokendfa cannot read the model's vocabulary: "
                                           f"{type(exc).__name__}: {exc}")) from None
        _build(constraint, vocab, settings)

    # The runners' other hooks, so that neither base class leaves this one
    # abstract; the two implementations override what their runner calls.
    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: Any) -> None:
        return None

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        return False

    def apply_staged_writes(self) -> None:
        return None

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        return logits

    # --- shared by both implementations ----------------------------------------------

    def _setup(self, vllm_config: Any, width: int, device: Any, pin: bool, build: Any) -> None:
        # Cheap on purpose: every engine in the environment builds one.
        self._config = vllm_config
        self._build_of = build
        self._used = False
        self._model_config = vllm_config.model_config
        self._settings = Settings.of(vllm_config)
        self._vocab: Vocabulary | None = None
        self._masker = _Masker(width, device, pin)
        config = getattr(self._model_config, "hf_text_config", None)
        ids = getattr(config, "eos_token_id", None)
        self._masker.eos_ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
        self.duplicate = self._claim()
        if self.duplicate:
            _logger().info("tokendfa: the processor is registered twice (entry point and "
                           "logits_processors); this second instance does nothing")
        elif self._settings.preload:
            # The worker reads the model's vocabulary while the engine starts
            # (torch.compile, KV cache: tens of seconds), not when the first
            # constrained request arrives (~1-2 s for Gemma 3 from tokenizer.json
            # and its tables); that request then waits on the read's lock at
            # most. TOKENDFA_PRELOAD=0 reads it on first use instead.
            threading.Thread(target=self._preload, name="tokendfa-vocabulary",
                             daemon=True).start()

    def _preload(self) -> None:
        try:
            _INDEXES.vocabulary(self._model_config)
        except Exception as exc:  # the first request reports it, with its own context
            _logger().warning("tokendfa: reading the model's vocabulary ahead of time failed "
                              "(%s); it is read again with the first constrained request", exc)

    def _claim(self) -> bool:
        """Whether another instance of this class was built for the same
        engine in the same build (vLLM builds the entry point's and the
        explicitly passed one back to back, with the same arguments): then
        this one is the duplicate."""
        with _BUILT_LOCK:
            for key in [key for key, ref in _BUILT.items() if ref() is None]:
                del _BUILT[key]
            ref = _BUILT.get(id(self._config))
            first = ref() if ref is not None else None
            if (first is not None and first._config is self._config and type(first) is type(self)
                    and first._build_of is self._build_of and not first._used):
                return True
            _BUILT[id(self._config)] = weakref.ref(self)
            return False

    def _vocabulary(self) -> Vocabulary:
        if self._vocab is None:
            vocab = _INDEXES.vocabulary(self._model_config)
            self._masker.widen(vocab.size, vocab.eos_token_ids)
            self._vocab = vocab
        return self._vocab

    def _guide_for(self, params: Any) -> "Guide | None | bool":
        """The request's guide; None for a request this processor must end
        (logged); False for one that asks for no constraint."""
        try:
            constraint = constraint_of(getattr(params, "extra_args", None))
        except ValueError as exc:  # validate_params refused it already; never crash the engine
            _logger().error("tokendfa: %s; the request is ended", exc)
            return None
        if constraint is None:
            return False
        try:
            vocab = self._vocabulary()
            if constraint.kind == "index" and self._settings.index_dir is None:
                raise ValueError(f"{constraint.key}: {_ENABLE_INDEXES}")
            index = _build(constraint, vocab, self._settings)
            return self._budgeted(index, constraint, getattr(params, "max_tokens", None))
        except Exception as exc:  # noqa: BLE001 - any failure ends this request, not the engine
            _logger().error("tokendfa: %s; the request is ended", _one_line(str(exc)))
            return None

    def _budgeted(self, index: "Index | LazyIndex", constraint: Constraint, max_tokens: Any) -> Guide:
        """The request's guide, closing within ``max_tokens`` unless the
        request or the operator turned that off; a request whose text cannot
        close within its ``max_tokens`` at all is served without it (said
        once in the log)."""
        close = self._settings.close_within_max_tokens if constraint.close is None else constraint.close
        if not close or not isinstance(max_tokens, int) or max_tokens < 1:
            return Guide(index)
        with limits(time_limit=self._settings.compile_time_limit):
            least = index.finish_bound(index.initial_state, max_tokens)
        if least > max_tokens:
            _logger().warning("tokendfa: %s: closing the text may take more than the request's "
                              "max_tokens=%d; served without closing in time", constraint.key, max_tokens)
            return Guide(index)
        return Guide(index, max_tokens=max_tokens)

    def _advance(self, guide: Guide, token: int, where: str) -> bool:
        """Feed ``token`` to ``guide`` under the time limit; False when the
        request must end here (EOS accepted, a refused token, a compile over
        the limit: logged unless EOS)."""
        try:
            with limits(time_limit=self._settings.compile_time_limit):
                guide.advance(token)
        except TokenNotAllowedError as exc:
            _logger().warning("tokendfa: %s: %s; only EOS is allowed from now on",
                              where, _one_line(str(exc)))
            return False
        except (TokenDFAError, MemoryError, RecursionError) as exc:
            self._failed(guide, exc, where)
            return False
        return token not in guide.index.eos_token_ids   # EOS accepted: ended (ignore_eos goes on)

    def _failed(self, guide: Guide, exc: BaseException, where: str) -> None:
        _INDEXES.forget(guide.index)
        if isinstance(exc, TimeLimitError):
            text = f"compiling its next state took longer than {self._settings.compile_time_limit:g} s"
        else:
            text = _one_line(str(exc) or type(exc).__name__)
        _logger().error("tokendfa: %s: %s; the request is ended with EOS", where, text)


class _Row:
    """One constrained request of the V1 batch."""

    __slots__ = ("guide", "output_ids", "consumed", "closed")

    def __init__(self, guide: Guide | None, output_ids: list[int]) -> None:
        self.guide = guide
        self.output_ids = output_ids   # vLLM's own list: it grows as the request generates
        self.consumed = 0              # how many of output_ids the guide has seen
        self.closed = guide is None    # only EOS from now on


class V1Processor(TokenDFALogitsProcessor):
    """The V1 model runner's processor: a persistent batch (see the module docstring)."""

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        self._setup(vllm_config, int(vllm_config.model_config.get_vocab_size()), device,
                    is_pin_memory, build=None)
        self._rows: dict[int, _Row] = {}

    def is_argmax_invariant(self) -> bool:
        return self.duplicate  # it changes which token greedy decoding picks

    def update_state(self, batch_update: Any) -> None:
        if batch_update is None or self.duplicate:
            return
        self._used = True
        # Order: removed, added, moved (vLLM's BatchUpdate contract). An
        # added or moved request may take an index that still has a row.
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            guide = self._guide_for(params)
            if guide is False:
                self._rows.pop(index, None)
            else:
                self._rows[index] = _Row(guide, output_ids)
        for first, second, direction in batch_update.moved:
            a, b = self._rows.pop(first, None), self._rows.pop(second, None)
            if a is not None:
                self._rows[second] = a
            if b is not None and direction == MoveDirectionality.SWAP:
                self._rows[first] = b

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        if not self._rows or self.duplicate:
            return logits
        self._used = True
        order = sorted(self._rows)
        for index in order:
            self._follow(index, self._rows[index])
        guides = [None if self._rows[i].closed else self._rows[i].guide for i in order]
        self._fill(guides, order, lambda k: self._rows[order[k]])
        self._masker.mask(logits, order)
        return logits

    def _fill(self, guides, order, owner) -> None:
        bitmask = self._masker.rows(len(guides))
        for k, exc in fill_request_rows(guides, bitmask, self._masker.eos_row(),
                                        self._settings.compile_time_limit):
            self._failed(guides[k], exc, f"batch row {order[k]}")
            owner(k).closed = True

    def _follow(self, index: int, row: _Row) -> None:
        """Feed the guide the output ids it has not seen."""
        output = row.output_ids
        while row.consumed < len(output):
            token = output[row.consumed]
            if token < 0:
                break  # an asynchronous-scheduling placeholder: the real id comes later
            row.consumed += 1
            if not row.closed and not self._advance(row.guide, token, f"batch row {index}"):
                row.closed = True


class _Slot:
    """One constrained request of the V2 runner, in its slot."""

    __slots__ = ("guide", "prompt_len", "consumed", "closed", "drafts", "draft_start")

    def __init__(self, guide: Guide | None) -> None:
        self.guide = guide
        self.prompt_len: int | None = None   # read from the runner at the first step
        self.consumed = 0                    # committed output tokens seen
        self.closed = guide is None          # only EOS from now on
        self.drafts: list[int] = []          # the last step's draft tokens ...
        self.draft_start = -1                # ... and the sequence position of the first


class V2Processor(TokenDFALogitsProcessor):
    """The Model Runner V2's processor: slots, and one logits row per draft
    token under speculative decoding (see the module docstring)."""

    def __init__(self, vllm_config: Any, req_states: Any) -> None:
        width = int(getattr(req_states, "vocab_size", 0) or vllm_config.model_config.get_vocab_size())
        device = getattr(req_states, "device", "cpu")
        pin = torch.device(device).type == "cuda"
        self._setup(vllm_config, width, device, pin, build=req_states)
        self._req_states = req_states
        self._slots: dict[int, _Slot] = {}

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        self._slots.pop(req_idx, None)   # a recycled slot: nothing of its last request stays
        if self.duplicate:
            return False
        self._used = True
        guide = self._guide_for(sampling_params)
        if guide is False:
            return False
        self._slots[req_idx] = _Slot(guide)
        return True

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        if not self._slots or self.duplicate or ctx is None:
            return logits
        if not any(int(slot) in self._slots for slot in ctx.idx_mapping_np):
            return logits
        layout = torch.stack([ctx.expanded_idx_mapping.to(torch.int64),
                              ctx.expanded_local_pos.to(torch.int64),
                              ctx.input_ids.to(torch.int64),
                              ctx.pos.to(torch.int64)]).cpu().numpy()
        slot_of, local, inputs, positions = (row.tolist() for row in layout)
        groups: dict[int, list[int]] = {}   # slot -> its rows, in draft order
        for r, slot in enumerate(slot_of):
            if slot in self._slots:
                groups.setdefault(slot, []).append(r)
        order: list[int] = []
        guides: list[Guide | None] = []
        owners: list[_Slot] = []
        for slot, rows in groups.items():
            rows.sort(key=lambda r: local[r])
            state = self._slots[slot]
            first = rows[0]
            drafts = [inputs[r] for r in rows[1:]]
            self._catch_up(slot, state, positions[first], inputs[first])
            order += rows
            guides += self._row_guides(slot, state, drafts)
            owners += [state] * len(rows)
            state.drafts, state.draft_start = drafts, positions[first] + 1
        if not order:
            return logits
        ranked = sorted(range(len(order)), key=order.__getitem__)
        order = [order[i] for i in ranked]
        guides = [guides[i] for i in ranked]
        owners = [owners[i] for i in ranked]
        bitmask = self._masker.rows(len(guides))
        for k, exc in fill_request_rows(guides, bitmask, self._masker.eos_row(),
                                        self._settings.compile_time_limit):
            if not owners[k].closed:
                self._failed(guides[k], exc, f"slot row {order[k]}")
                owners[k].closed = True
        self._masker.mask(logits, order)
        return logits

    def _catch_up(self, slot: int, state: _Slot, position: int, token: int) -> None:
        """Bring the slot's guide to the committed output up to and including
        ``position`` (whose token, row 0's input, is ``token``)."""
        if state.prompt_len is None:
            state.prompt_len = int(self._req_states.prompt_len.np[slot])
        need = position + 1 - state.prompt_len   # committed output tokens at this step
        if need <= state.consumed:
            if need < state.consumed:   # the runner went back: forget what it took back
                back = state.consumed - max(need, 0)
                if not state.closed:
                    state.guide.rollback(min(back, state.guide.num_tokens))
                state.consumed -= back
            return
        start = state.prompt_len + state.consumed   # the first position the guide has not seen
        tokens: list[int] = []
        while start + len(tokens) < position:
            j = start + len(tokens) - state.draft_start
            if state.draft_start < 0 or not 0 <= j < len(state.drafts):
                break
            tokens.append(state.drafts[j])   # an accepted draft of the last step
        if start + len(tokens) < position:   # not seen as drafts: the runner's committed tokens
            tokens += self._committed(slot, start + len(tokens), position)
        tokens.append(token)
        for token in tokens:
            state.consumed += 1
            if not state.closed and not self._advance(state.guide, token, f"slot {slot}"):
                state.closed = True

    def _committed(self, slot: int, start: int, stop: int) -> list[int]:
        tokens = self._req_states.all_token_ids
        tokens = getattr(tokens, "gpu", tokens)
        return [int(t) for t in tokens[slot, start:stop].cpu().tolist()]

    def _row_guides(self, slot: int, state: _Slot, drafts: list[int]) -> "list[Guide | None]":
        """The guide of each of the request's rows: the committed state, then
        the state after each draft (on guides of their own)."""
        if state.closed:
            return [None] * (1 + len(drafts))
        guides: list[Guide | None] = [state.guide]
        remaining = state.guide.remaining   # the committed state's budget left (None: no budget)
        walker = Guide(state.guide.index, state.guide.state)
        refused = False
        for token in drafts:
            last = guides[-1]
            if last is None or refused:
                guides.append(last)   # after a drafted EOS: EOS; after a refused draft: unused
                continue
            try:
                with limits(time_limit=self._settings.compile_time_limit):
                    walker.advance(token)
            except TokenNotAllowedError:
                # The verifier rejects this draft whatever the rows after it
                # allow: they keep the last allowed state's mask.
                refused = True
                guides.append(last)
                continue
            except (TokenDFAError, MemoryError, RecursionError) as exc:
                self._failed(state.guide, exc, f"slot {slot}")
                state.closed = True
                return [None] * (1 + len(drafts))
            if token in walker.index.eos_token_ids:
                guides.append(None)   # a drafted EOS: only EOS after it
                continue
            # draft position k = len(guides) has k fewer tokens of the budget left
            left = None if remaining is None else remaining - len(guides)
            guides.append(Guide(walker.index, walker.state,
                                max_tokens=left if left is not None and left >= 0 else None))
        return guides
