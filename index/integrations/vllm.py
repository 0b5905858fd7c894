"""Constrained generation in vLLM: one logits processor serving every request
that asks for a constraint.

:class:`TokenDFALogitsProcessor` is a vLLM (0.32, V1 model runner) batch-level
logits processor. Installed with tokendfa, it is registered under vLLM's
``vllm.logits_processors`` entry-point group, so every vLLM engine of the
environment loads it (a request that does not ask for a constraint costs
nothing). A request opts in through ``SamplingParams.extra_args``::

    SamplingParams(extra_args={"tokendfa": {"json_schema": schema}})   # a dict, a bool or JSON text
    SamplingParams(extra_args={"tokendfa": {"regex": r"[0-9]{3}-[0-9]{4}"}})
    SamplingParams(extra_args={"tokendfa": {"index": "/srv/indexes/phone.tdfa"}})

and, against the OpenAI server, whose ``vllm_xargs`` carries only strings,
numbers and lists, through flat keys: ``{"tokendfa_json_schema": "<JSON
text>"}``, ``{"tokendfa_regex": "..."}``, ``{"tokendfa_index": "/path"}``.
The text the request generates is then a match of the pattern (or a
document valid for the schema), and it ends (EOS) only on a complete match;
``max_tokens`` can still cut it short.

# Where the work happens

vLLM runs this class in two processes. The front end (the ``LLM`` object or
the API server) calls :meth:`validate_params` for every request before
scheduling it; the worker builds one instance and calls
:meth:`~TokenDFALogitsProcessor.update_state` before each forward pass and
:meth:`~TokenDFALogitsProcessor.apply` on each step's logits.

* :meth:`validate_params` reads the constraint, reads the model's vocabulary
  (``Vocabulary.from_pretrained`` on the model's tokenizer, once per
  process) and builds the index. Any problem (an unknown key, a schema that
  is not JSON or that tokendfa cannot compile, an invalid regex, a missing
  index file, an index built for another vocabulary) is a ``ValueError``
  with a one-line message, which vLLM turns into a validation error
  (HTTP 400), so a bad request never reaches the engine.
* Schemas and regexes are served by lazy indexes (:class:`~tokendfa.lazy.LazyIndex`):
  a request's schema is usually new, and a lazy index gives its first mask
  in milliseconds where the eager build takes a second or two over Gemma's
  262,144 tokens (a cold batch of four new schemas waited 30.7 s on eager
  builds, 11.1 s with xgrammar). The front end builds one to validate the
  request (the schema compiles, the vocabulary can spell a match), the
  worker builds its own (the two processes share no memory), and each
  process keeps the last few in a memo, so a schema used over and over
  keeps the rows its generations computed. Free values nest
  ``LAZY_ANY_DEPTH`` levels. An index built ahead of time (``tokendfa
  build``, ``tokendfa cache fill``) is served with ``"index": path``.
* ``validate_params`` is a classmethod: vLLM gives it the request, not the
  engine's configuration. The front end's ``InputProcessor`` that calls it
  holds the configuration, and this module finds it by looking at the
  calling frames (checked against vLLM 0.32). When it cannot (a direct call),
  only the checks that need no vocabulary run (JSON, schema, regex syntax,
  index file header), and anything the worker then fails to build ends that
  request at once (only EOS allowed) with an error in the log, never an
  engine crash.
* The worker reads the vocabulary when the first constrained request
  arrives, not at start-up: every vLLM engine in the environment loads this
  class, and most never see a constrained request. That first request pauses
  the engine once for the read (about 5 s for Gemma 3 on a 2-core machine).

# A step

vLLM keeps a persistent batch: row ``i`` of the logits is the request at
batch index ``i``. ``update_state`` follows the batch: requests removed,
added (with their parameters and a live reference to their list of output
token ids) and moved (one way, or swapped), in that order. Each constrained
row gets a :class:`~tokendfa.Guide`. ``apply`` then, for each constrained row:

1. advances the guide with the output ids it has not seen yet (read here,
   not in ``update_state``: with asynchronous scheduling vLLM appends a
   placeholder there and writes the real id just before sampling);
2. copies the guide's allowed-token bitset into row ``k`` of an
   ``int32 [rows, words]`` (pinned) buffer: a copy of a precomputed row;

and once for all rows, copies the buffer to the logits' device, unpacks it
there a byte at a time through a ``[256, 8]`` table of ``0`` / ``-inf``, and
adds the result into the constrained rows (``index_add_``). Measured on this
project's 2-core CPU machine for 262,144 logits, the table costs 0.4 ms for
one row and 2.6 ms for sixteen; shifting each word into a bool mask and
``masked_fill_`` took 2.8 ms and 38 ms. Columns past the vocabulary (models
often have more logits than tokens) are never allowed; EOS is allowed
exactly where the text is a complete match (the index says so).

A row that reached its end (EOS accepted, which vLLM only lets through with
``ignore_eos``) or whose token the index refused (something after this
processor changed the logits) allows only EOS from then on.

# What it cannot do (vLLM 0.32)

* Speculative decoding: vLLM loads no custom logits processor then
  ("Custom logits processors are not supported when speculative decoding is
  enabled."); a constrained request is refused in that case.
* The GPU Model Runner V2 (the default on CUDA) has another processor
  interface and refuses V1 plugins at start-up; set
  ``VLLM_USE_V2_MODEL_RUNNER=0``. The CPU build always uses the V1 runner.
* vLLM's own ``structured_outputs`` or ``min_tokens > 0`` together with a
  tokendfa constraint: both can forbid the only tokens the other allows,
  which leaves a row with nothing to pick; such a request is refused.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.errors import IndexFileError, TokenDFAError, TokenNotAllowedError, import_optional
from ..analysis.regular_files import check_regular_file
from ..runtime.guide import Guide
from ..runtime.index import Index
from ..vocab.vocabulary import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    from ..lazy import LazyIndex

__all__ = ["TokenDFALogitsProcessor", "Constraint", "constraint_of", "EXTRA_ARGS_KEY", "XARGS_KEYS"]

# Importing this module is opting in to torch and vLLM (neither is a
# dependency of tokendfa).
torch = import_optional("torch", extra=None, needed_for="tokendfa.integrations.vllm")
_vllm_lp = import_optional("vllm.v1.sample.logits_processor", extra=None,
                           needed_for="tokendfa.integrations.vllm", package="vllm")
LogitsProcessor = _vllm_lp.LogitsProcessor
MoveDirectionality = _vllm_lp.MoveDirectionality

if sys.byteorder != "little":  # pragma: no cover
    # The masks are little-endian words read a byte at a time below.
    raise ImportError("tokendfa.integrations.vllm needs a little-endian machine")

EXTRA_ARGS_KEY = "tokendfa"
# extra_args["tokendfa"] keys, and the flat vllm_xargs keys, -> the constraint's kind.
NESTED_KEYS = {"json_schema": "schema", "regex": "regex", "index": "index"}
XARGS_KEYS = {"tokendfa_json_schema": "schema", "tokendfa_regex": "regex", "tokendfa_index": "index"}
_MEMO_SIZE = 64  # indexes kept per process (a lazy one keeps the rows served so far)


def _logger():
    # vLLM's logger, so the messages appear in the engine's log format.
    from vllm.logger import init_logger

    return init_logger(__name__)


# --- the request's constraint ---------------------------------------------------------

@dataclass(frozen=True)
class Constraint:
    """What one request asked for."""
    kind: str      # "schema", "regex" or "index"
    source: Any    # the schema (dict or bool), the pattern, or the index file's path
    key: str       # how the request spelled it, for messages


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
    if EXTRA_ARGS_KEY in extra_args:
        nested = extra_args[EXTRA_ARGS_KEY]
        if not isinstance(nested, dict):
            raise ValueError(f"extra_args[{EXTRA_ARGS_KEY!r}] must be a dict with one of "
                             f"{_names(NESTED_KEYS)}, not {type(nested).__name__}")
        unknown = sorted(set(map(str, nested)) - set(NESTED_KEYS))
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} in extra_args[{EXTRA_ARGS_KEY!r}]; "
                             f"expected one of {_names(NESTED_KEYS)}")
        found += [(f"{EXTRA_ARGS_KEY}.{name}", NESTED_KEYS[name], value)
                  for name, value in nested.items()]
    for name, value in extra_args.items():
        if not isinstance(name, str) or not name.startswith(EXTRA_ARGS_KEY + "_"):
            continue
        if name not in XARGS_KEYS:
            raise ValueError(f"unknown key {name!r}; expected one of {_names(XARGS_KEYS)}")
        found.append((name, XARGS_KEYS[name], value))
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
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{key} must be a path, not {type(value).__name__}")
        value = os.fspath(value)
    return Constraint(kind, value, key)


def _names(keys: dict[str, str]) -> str:
    return ", ".join(repr(k) for k in keys)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- the model's vocabulary and the indexes, once per process ----------------------------

class _Indexes:
    """Per process: the vocabulary of each model seen (read once) and the
    indexes built or loaded (a small LRU memo)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vocabularies: dict[tuple, Vocabulary] = {}
        self._memo: OrderedDict[tuple, "Index | LazyIndex"] = OrderedDict()

    def vocabulary(self, model_config: Any) -> Vocabulary:
        """The model's vocabulary: ``Vocabulary.from_pretrained`` on its
        tokenizer folder, or on the tokenizer vLLM loaded when the model was
        named by a hub id (vLLM has downloaded it by then)."""
        path = getattr(model_config, "tokenizer", None) or getattr(model_config, "model", None)
        key = (str(path), getattr(model_config, "tokenizer_revision", None))
        with self._lock:
            vocab = self._vocabularies.get(key)
            if vocab is None:
                if path is not None and os.path.isdir(str(path)):
                    vocab = Vocabulary.from_pretrained(str(path))
                else:
                    from vllm.tokenizers.registry import cached_tokenizer_from_config

                    tokenizer = cached_tokenizer_from_config(model_config)
                    if tokenizer is None:
                        raise ValueError("the model's tokenizer is not loaded "
                                         "(skip_tokenizer_init), so its vocabulary is unknown")
                    vocab = Vocabulary.from_pretrained(tokenizer)
                self._vocabularies[key] = vocab
            return vocab

    def index(self, constraint: Constraint, vocab: Vocabulary) -> "Index | LazyIndex":
        if constraint.kind == "index":
            # A request names the path: a FIFO there would block this
            # process in open(), a device be read without end.
            stat = check_regular_file(constraint.source, "index file", IndexFileError)
            key = ("index", os.path.realpath(constraint.source), stat.st_mtime_ns, stat.st_size,
                   vocab.fingerprint)
        else:
            key = (constraint.kind, json.dumps(constraint.source, sort_keys=True), vocab.fingerprint)
        with self._lock:
            index = self._memo.get(key)
            if index is not None:
                self._memo.move_to_end(key)
                return index
        if constraint.kind == "index":
            index = Index.load(constraint.source, vocab)
        elif constraint.kind == "regex":
            index = Index.from_regex(constraint.source, vocab, lazy=True)
        else:
            index = Index.from_schema(constraint.source, vocab, lazy=True)
        with self._lock:
            self._memo[key] = index
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return index


_INDEXES = _Indexes()


def _check_without_vocabulary(constraint: Constraint) -> None:
    """What can be checked without the model's vocabulary."""
    if constraint.kind == "schema":
        from ..schema.api import regex_from_schema

        regex_from_schema(constraint.source)
    elif constraint.kind == "regex":
        from ..analysis.regex_syntax import normalize_pattern

        normalize_pattern(constraint.source)
    else:
        check_regular_file(constraint.source, "index file", IndexFileError)  # never a FIFO
        Index.load(constraint.source)


def _engine_config() -> Any:
    """The VllmConfig of the front end calling :meth:`validate_params`: its
    ``InputProcessor`` is a few frames up (vLLM 0.32:
    ``InputProcessor._validate_params`` -> ``validate_logits_processors_parameters``
    -> ``validate_params``), else the config vLLM has set as current, else None."""
    try:
        frame = sys._getframe(2)
    except ValueError:  # called from the top of a program: no caller to look at
        frame = None
    for _ in range(8):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        config = getattr(owner, "vllm_config", None)
        if config is not None and getattr(config, "model_config", None) is not None:
            return config
        frame = frame.f_back
    try:
        from vllm.config import get_current_vllm_config_or_none
    except ImportError:  # pragma: no cover
        return None
    return get_current_vllm_config_or_none()


def _problem(constraint: Constraint, exc: BaseException) -> ValueError:
    if isinstance(exc, OSError):  # as Index.load says it
        text = f"cannot read index file {exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return ValueError(_one_line(f"{constraint.key}: {text}"))


# --- the logits processor -----------------------------------------------------------------

class _Row:
    """One constrained request of the batch."""

    __slots__ = ("guide", "output_ids", "consumed", "closed")

    def __init__(self, guide: Guide | None, output_ids: list[int]) -> None:
        self.guide = guide
        self.output_ids = output_ids   # vLLM's own list: it grows as the request generates
        self.consumed = 0              # how many of output_ids the guide has seen
        self.closed = guide is None    # only EOS from now on


class TokenDFALogitsProcessor(LogitsProcessor):
    """Constrains every request whose ``extra_args`` asks for it (see the
    module docstring); leaves the other rows of the batch untouched."""

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
        config = _engine_config()
        if config is not None and getattr(config, "speculative_config", None):
            raise ValueError("vLLM runs no custom logits processor with speculative "
                             "decoding, so a tokendfa constraint cannot be applied")
        if config is not None:
            try:
                vocab = _INDEXES.vocabulary(config.model_config)
            except Exception as exc:  # noqa: BLE001 - a tokenizer library raises anything
                raise ValueError(_one_line(f"tokendfa cannot read the model's vocabulary: "
                                           f"{type(exc).__name__}: {exc}")) from None
        try:
            if config is None:
                _check_without_vocabulary(constraint)
            else:
                _INDEXES.index(constraint, vocab)
        except (TokenDFAError, OSError, ValueError, TypeError, RecursionError,
                MemoryError) as exc:
            raise _problem(constraint, exc) from None

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        # Cheap on purpose: every engine in the environment builds one.
        self._model_config = vllm_config.model_config
        self._width = int(self._model_config.get_vocab_size())
        self._device = torch.device(device)
        self._pin = bool(is_pin_memory)
        self._rows: dict[int, _Row] = {}
        self._vocab: Vocabulary | None = None
        self._words = (self._width + 31) // 32   # widened if the vocabulary is wider
        self._bitmask: torch.Tensor | None = None       # int32 [capacity, words], CPU (pinned)
        self._bitmask_np: np.ndarray | None = None      # the same memory
        self._eos_words: np.ndarray | None = None       # int32 [words]: only EOS
        self._table: torch.Tensor | None = None         # [256, 8] of 0 / -inf on the device
        self._penalty: torch.Tensor | None = None       # [capacity * words * 4, 8] on the device

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    # --- the batch --------------------------------------------------------------

    def update_state(self, batch_update: Any) -> None:
        if batch_update is None:
            return
        # Order: removed, added, moved (vLLM's BatchUpdate contract). An
        # added or moved request may take an index that still has a row.
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            row = self._row_for(params, output_ids)
            if row is None:
                self._rows.pop(index, None)
            else:
                self._rows[index] = row
        for first, second, direction in batch_update.moved:
            a, b = self._rows.pop(first, None), self._rows.pop(second, None)
            if a is not None:
                self._rows[second] = a
            if b is not None and direction == MoveDirectionality.SWAP:
                self._rows[first] = b

    def _row_for(self, params: Any, output_ids: list[int]) -> _Row | None:
        try:
            constraint = constraint_of(getattr(params, "extra_args", None))
        except ValueError as exc:  # validate_params refused it already; never crash the engine
            _logger().error("tokendfa: %s; the request is ended", exc)
            return _Row(None, output_ids)
        if constraint is None:
            return None
        try:
            vocab = self._vocabulary()
            index = _INDEXES.index(constraint, vocab)
        except Exception as exc:  # noqa: BLE001 - any failure ends this request, not the engine
            _logger().error("tokendfa: %s; the request is ended", _problem(constraint, exc))
            return _Row(None, output_ids)
        return _Row(Guide(index), output_ids)

    def _vocabulary(self) -> Vocabulary:
        if self._vocab is None:
            vocab = _INDEXES.vocabulary(self._model_config)
            words = (max(self._width, vocab.size) + 31) // 32
            if words != self._words:
                self._words, self._bitmask = words, None
            self._eos_words = None
            self._vocab = vocab
        return self._vocab

    def _eos_row(self) -> np.ndarray:
        """int32 words with only the EOS bits set: the vocabulary's EOS ids,
        or, when it could not be read, the model configuration's."""
        if self._eos_words is None:
            if self._vocab is not None:
                ids = self._vocab.eos_token_ids
            else:
                config = getattr(self._model_config, "hf_text_config", None)
                ids = getattr(config, "eos_token_id", None)
                ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
            eos = np.zeros(self._words, dtype=np.uint32)
            for token in ids:
                if 0 <= token < self._words * 32:
                    eos[token >> 5] |= np.uint32(1 << (token & 31))
            self._eos_words = eos.view(np.int32)
        return self._eos_words

    # --- a step -------------------------------------------------------------------

    def apply(self, logits: Any) -> Any:
        if not self._rows:
            return logits
        order = sorted(self._rows)
        count = len(order)
        bitmask = self._bitmask_rows(count)
        for k, index in enumerate(order):
            row = self._rows[index]
            self._follow(index, row)
            if row.closed:
                bitmask[k] = self._eos_row()
            else:
                row.guide.write_mask_into(bitmask, row=k)
        self._mask(logits, order)
        return logits

    def _follow(self, index: int, row: _Row) -> None:
        """Feed the guide the output ids it has not seen."""
        output = row.output_ids
        while row.consumed < len(output):
            token = output[row.consumed]
            if token < 0:
                break  # an asynchronous-scheduling placeholder: the real id comes later
            row.consumed += 1
            if row.closed:
                continue
            guide = row.guide
            try:
                guide.advance(token)
            except TokenNotAllowedError as exc:
                row.closed = True
                _logger().warning("tokendfa: batch row %d: %s; only EOS is allowed from now on",
                                  index, _one_line(str(exc)))
                continue
            if token in guide.index.eos_token_ids:
                row.closed = True  # EOS accepted (with ignore_eos, vLLM goes on)

    def _bitmask_rows(self, count: int) -> np.ndarray:
        if self._bitmask is None or self._bitmask.shape[0] < count:
            capacity = max(8, 1 << (count - 1).bit_length())
            pin = self._pin and self._device.type != "cpu"
            self._bitmask = torch.zeros((capacity, self._words), dtype=torch.int32, pin_memory=pin)
            self._bitmask_np = self._bitmask.numpy()
            self._penalty = None
        return self._bitmask_np[:count]

    def _mask(self, logits: Any, order: list[int]) -> None:
        count, words = len(order), self._words
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
        penalty = self._penalty[:count * words * 4]
        torch.index_select(self._table, 0, data.to(torch.int64), out=penalty)
        penalty = penalty.view(count, words * 32)[:, :width]   # words * 32 >= width
        if count == logits.shape[0] and order[-1] == count - 1:
            logits.add_(penalty)   # every row constrained, in order
        else:
            logits.index_add_(0, torch.tensor(order, dtype=torch.int64, device=device), penalty)
