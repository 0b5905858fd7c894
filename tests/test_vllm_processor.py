"""The vLLM logits processor's bookkeeping, without running vLLM.

vLLM drives the processor with ``update_state(BatchUpdate)`` (requests
removed, added with a live list of their output ids, moved one way or
swapped) and ``apply(logits)``. These tests play vLLM's part over the toy
vocabulary (see ``conftest.py``; 30 tokens, 64 logits) and check, after
every call, that each constrained row allows exactly
``index.get_tokens(state)`` of the text it generated so far and that other
rows are untouched. When vLLM is not installed, a minimal stand-in of the
three names the module takes from it (the base class, ``MoveDirectionality``,
``BatchUpdate``) is installed in ``sys.modules`` for the duration of a test;
with vLLM installed, its own classes are used. ``tests/test_vllm.py`` runs
the processor inside a real engine.
"""

from __future__ import annotations

import abc
import enum
import importlib
import json
import os
import random
import re
import sys
import types
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from conftest import TOY_EOS, TOY_TOKENS, toy_vocabulary
from tokendfa import Guide, Index, Vocabulary

TOKEN = {data: i for i, data in reversed(list(enumerate(TOY_TOKENS))) if data is not None}
WIDTH = 64  # logits: 34 ids past the toy vocabulary
# Where the logits live: the CPU here and in CI; TOKENDFA_TEST_DEVICE=cuda runs
# the same checks with GPU tensors and pinned buffers (benchmarks/gpu_check.py).
DEVICE = torch.device(os.environ.get("TOKENDFA_TEST_DEVICE", "cpu"))
PIN = DEVICE.type == "cuda"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 52}},
          "required": ["a"], "additionalProperties": False}
REGEX = r"(ab|c)x-[0-9]{1,3}"


def _fake_vllm() -> dict[str, types.ModuleType]:
    """The parts of vLLM 0.32 the module uses, with the same shapes."""
    class LogitsProcessor(abc.ABC):
        @classmethod
        def validate_params(cls, sampling_params):
            return None

    class MoveDirectionality(enum.Enum):
        UNIDIRECTIONAL = enum.auto()
        SWAP = enum.auto()

    @dataclass(frozen=True)
    class BatchUpdate:
        batch_size: int
        removed: list
        added: list
        moved: list

    lp = types.ModuleType("vllm.v1.sample.logits_processor")
    lp.LogitsProcessor, lp.MoveDirectionality, lp.BatchUpdate = (
        LogitsProcessor, MoveDirectionality, BatchUpdate)
    logger = types.ModuleType("vllm.logger")
    logger.init_logger = lambda name: __import__("logging").getLogger(name)
    config = types.ModuleType("vllm.config")
    config.get_current_vllm_config_or_none = lambda: None
    modules = {name: types.ModuleType(name) for name in ("vllm", "vllm.v1", "vllm.v1.sample")}
    modules.update({lp.__name__: lp, logger.__name__: logger, config.__name__: config})
    return modules


@pytest.fixture
def vllm_module(monkeypatch, tmp_path, toy_vocab):
    """tokendfa.integrations.vllm, imported afresh over the real vLLM or the
    stand-in, with the toy vocabulary as every model's and an empty index cache."""
    try:
        importlib.import_module("vllm.v1.sample.logits_processor")
    except ImportError:
        for name, module in _fake_vllm().items():
            monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "tokendfa.integrations.vllm", raising=False)
    monkeypatch.setenv("TOKENDFA_CACHE_DIR", str(tmp_path / "cache"))
    module = importlib.import_module("tokendfa.integrations.vllm")
    monkeypatch.setattr(module._INDEXES, "vocabulary", lambda model_config, serving=True: toy_vocab)
    yield module
    sys.modules.pop("tokendfa.integrations.vllm", None)


def engine_config(speculative=None, v2=False, **settings):
    model_config = SimpleNamespace(tokenizer="/models/toy", get_vocab_size=lambda: WIDTH,
                                   hf_text_config=SimpleNamespace(eos_token_id=TOY_EOS))
    return SimpleNamespace(model_config=model_config, speculative_config=speculative,
                           use_v2_model_runner=v2, additional_config={"tokendfa": settings})


class FrontEnd:
    """Calls validate_params as vLLM 0.32's InputProcessor does: through one
    function in between, with the engine's config on ``self``."""

    def __init__(self, module, config) -> None:
        self.vllm_config = config
        self.module = module

    def validate(self, params) -> None:
        _validate_logits_processors_parameters(self.module.TokenDFALogitsProcessor, params)


def _validate_logits_processors_parameters(cls, params) -> None:
    cls.validate_params(params)


def params(extra_args=None, **fields):
    return SimpleNamespace(extra_args=extra_args, structured_outputs=None, min_tokens=0, **fields)


# --- reading the request ---------------------------------------------------------------

def test_constraints_are_read_from_both_spellings(vllm_module):
    read = vllm_module.constraint_of
    assert read(None) is None and read({}) is None and read({"other": 1}) is None
    assert read({"tokendfa": {"json_schema": SCHEMA}}).source == SCHEMA
    assert read({"tokendfa": {"json_schema": json.dumps(SCHEMA)}}).source == SCHEMA
    assert read({"tokendfa_json_schema": json.dumps(SCHEMA), "x": 2}).source == SCHEMA
    flat = read({"tokendfa_regex": REGEX})
    assert (flat.kind, flat.source, flat.key) == ("regex", REGEX, "tokendfa_regex")
    assert read({"tokendfa": {"index": "b.tdfa"}}).kind == "index"
    assert read({"tokendfa": {"json_schema": True}}).source is True


@pytest.mark.parametrize("extra_args, message", [
    ({"tokendfa": {"schema": {}}}, "unknown key 'schema' in extra_args['tokendfa']"),
    ({"tokendfa_schema": "{}"}, "unknown key 'tokendfa_schema'"),
    ({"tokendfa": {}}, "extra_args['tokendfa'] is empty"),
    ({"tokendfa": "[0-9]"}, "extra_args['tokendfa'] must be a dict"),
    ({"tokendfa_json_schema": "{'type': 1}"}, "tokendfa_json_schema is not JSON: Expecting"),
    ({"tokendfa_json_schema": "[1]"}, "must be a JSON Schema (an object or a boolean), not list"),
    ({"tokendfa_regex": 5}, "tokendfa_regex must be a string, not int"),
    ({"tokendfa_regex": "a", "tokendfa": {"regex": "b"}}, "give one tokendfa constraint, not 2"),
    ({"tokendfa_index": "/etc/passwd"}, "tokendfa_index must be the name of a file in the server's index folder"),
    ({"tokendfa_index": "../x.tdfa"}, "without path separators or '..'"),
    ({"tokendfa_index": "a\\b"}, "without path separators"),
    ({"tokendfa": {"index": ".."}}, "without path separators or '..'"),
    ({"tokendfa_index": 3}, "tokendfa_index must be the name of an index file, not int"),
])
def test_bad_arguments_are_one_line_value_errors(vllm_module, extra_args, message):
    with pytest.raises(ValueError) as caught:
        vllm_module.constraint_of(extra_args)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# --- validation in the front end ---------------------------------------------------------

def test_validation_builds_a_lazy_index_and_each_process_keeps_its_own(vllm_module, toy_vocab, tmp_path):
    from tokendfa.lazy import LazyIndex

    FrontEnd(vllm_module, engine_config()).validate(params({"tokendfa_regex": REGEX}))
    front = vllm_module._INDEXES
    constraint = vllm_module.constraint_of({"tokendfa": {"regex": REGEX}})
    built = front.index(constraint, toy_vocab)
    assert isinstance(built, LazyIndex)          # the one validation built: the memo's
    # The worker is another process: a fresh per-process memo builds its own.
    worker = vllm_module._Indexes()
    index = worker.index(constraint, toy_vocab)
    assert isinstance(index, LazyIndex) and index is not built
    assert index is worker.index(constraint, toy_vocab)   # then the memo
    schema = vllm_module.constraint_of({"tokendfa": {"json_schema": SCHEMA}})
    assert isinstance(worker.index(schema, toy_vocab), LazyIndex)
    assert not (tmp_path / "cache").exists()     # nothing is written to the index cache


@pytest.mark.parametrize("extra_args, message", [
    ({"tokendfa_json_schema": json.dumps({"type": "string", "pattern": "a(?=b)"})},
     "tokendfa_json_schema: unsupported keyword 'pattern' at /: lookaround"),
    ({"tokendfa_json_schema": json.dumps({"type": "integer", "minimum": 5, "maximum": 1})},
     "tokendfa_json_schema: "),
    ({"tokendfa_regex": "(ab"}, "tokendfa_regex: "),
    ({"tokendfa_regex": "a(?=b)"}, "lookahead"),
    ({"tokendfa_regex": "日本"}, "tokendfa_regex: "),     # the toy vocabulary cannot spell 本
    ({"tokendfa_index": "x.tdfa"}, "tokendfa_index: index files are not enabled on this server (the operator sets TOKENDFA_INDEX_DIR"),
])
def test_validation_refuses_what_cannot_be_served(vllm_module, extra_args, message):
    with pytest.raises(ValueError) as caught:
        FrontEnd(vllm_module, engine_config()).validate(params(extra_args))
    assert message in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_an_index_file_for_another_vocabulary_is_refused(vllm_module, tmp_path, toy_vocab,
                                                         monkeypatch):
    monkeypatch.setenv("TOKENDFA_INDEX_DIR", str(tmp_path))
    other = Vocabulary([*TOY_TOKENS[:-1], b"zz"], eos_token_ids=TOY_EOS, name="other")
    Index.from_regex("ab", other).save(tmp_path / "other.tdfa")
    Index.from_regex("ab", toy_vocab).save(tmp_path / "mine.tdfa")
    front = FrontEnd(vllm_module, engine_config())
    front.validate(params({"tokendfa": {"index": "mine.tdfa"}}))
    with pytest.raises(ValueError, match="tokendfa.index: .*vocabulary"):
        front.validate(params({"tokendfa": {"index": "other.tdfa"}}))


def test_combinations_vllm_cannot_serve_are_refused(vllm_module):
    ask = {"tokendfa_regex": REGEX}
    with pytest.raises(ValueError, match="either structured_outputs or a tokendfa"):
        FrontEnd(vllm_module, engine_config()).validate(
            SimpleNamespace(extra_args=ask, structured_outputs=object(), min_tokens=0))
    with pytest.raises(ValueError, match="min_tokens"):
        FrontEnd(vllm_module, engine_config()).validate(
            SimpleNamespace(extra_args=ask, structured_outputs=None, min_tokens=3))
    with pytest.raises(ValueError, match="V1 model runner runs no custom logits processor with "
                                         "speculative decoding"):
        FrontEnd(vllm_module, engine_config(speculative=object())).validate(params(ask))
    # The V2 runner serves it (one logits row per draft token).
    FrontEnd(vllm_module, engine_config(speculative=object(), v2=True)).validate(params(ask))
    # Requests without a constraint are never refused.
    FrontEnd(vllm_module, engine_config(speculative=object())).validate(params({"x": 1}))


def test_without_the_engine_config_the_vocabulary_free_checks_still_run(vllm_module, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("TOKENDFA_INDEX_DIR", str(tmp_path))
    validate = vllm_module.TokenDFALogitsProcessor.validate_params
    validate(params({"tokendfa_regex": REGEX}))
    validate(params({"tokendfa_json_schema": json.dumps(SCHEMA)}))
    with pytest.raises(ValueError, match="tokendfa_regex: "):
        validate(params({"tokendfa_regex": "(ab"}))
    with pytest.raises(ValueError, match="no index file named 'missing.tdfa' in the server's "
                                         "index folder"):
        validate(params({"tokendfa_index": "missing.tdfa"}))
    assert not (tmp_path / "cache").exists()   # nothing was built


# --- the batch ----------------------------------------------------------------------------

class Engine:
    """Plays vLLM: a persistent batch of requests, each with its live output list."""

    def __init__(self, module) -> None:
        self.module = module
        self.lp = module.TokenDFALogitsProcessor(engine_config(), DEVICE, PIN)
        self.outputs: dict[int, list[int]] = {}      # batch index -> output ids (vLLM's list)
        self.indexes: dict[int, Index | None] = {}   # batch index -> the index it should follow
        self.tags: dict[int, object] = {}            # batch index -> the caller's label

    def update(self, removed=(), added=(), moved=()):
        """vLLM's order: removed, added (index, extra_args, index[, tag]), moved."""
        lp_module = sys.modules["vllm.v1.sample.logits_processor"]
        tables = (self.outputs, self.indexes, self.tags)
        for i in removed:
            for table in tables:
                table.pop(i, None)
        entries = []
        for i, extra_args, index, *tag in added:
            self.outputs[i] = []
            self.indexes[i] = index
            self.tags[i] = tag[0] if tag else None
            entries.append((i, params(extra_args), [2], self.outputs[i]))
        for a, b, direction in moved:
            for table in tables:
                value = table.pop(a)
                if direction == "swap":
                    table[a] = table.pop(b)
                table[b] = value
        directions = {"one": lp_module.MoveDirectionality.UNIDIRECTIONAL,
                      "swap": lp_module.MoveDirectionality.SWAP}
        self.lp.update_state(lp_module.BatchUpdate(
            batch_size=len(self.outputs), removed=sorted(removed, reverse=True), added=entries,
            moved=[(a, b, directions[d]) for a, b, d in moved]))

    def step(self, logits: torch.Tensor) -> torch.Tensor:
        before = logits.clone()
        out = self.lp.apply(logits)
        assert out is logits
        for i in range(logits.shape[0]):
            index = self.indexes.get(i)
            allowed = torch.isfinite(out[i]).nonzero().flatten().tolist()
            if index is None:
                assert torch.equal(out[i], before[i]), f"unconstrained row {i} changed"
                continue
            assert torch.equal(out[i][torch.isfinite(out[i])], before[i][torch.isfinite(out[i])])
            assert allowed == self.expected(index, self.outputs[i]), (i, self.outputs[i])
        return out

    @staticmethod
    def expected(index: Index, output: list[int]) -> list[int]:
        state = index.initial_state
        for n, token in enumerate(output):
            if token == TOY_EOS:
                return [TOY_EOS]            # ended: only EOS from then on
            state = index.advance(state, token)
        return index.get_tokens(state).tolist()


def logits_for(rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, WIDTH, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="a GPU race: runs with TOKENDFA_TEST_DEVICE=cuda "
                    "on a GPU machine (benchmarks/gpu_check.py); there is no copy to race on a CPU")
def test_a_host_a_step_ahead_of_the_gpu_leaves_the_last_steps_mask_alone(vllm_module, toy_vocab):
    # vLLM's asynchronous scheduling can call apply() for the next step while
    # the GPU has not yet copied this step's mask out of the pinned buffer.
    # A long kernel holds the copy back; the second step must wait for it
    # instead of writing its own mask into the buffer under it.
    engine = Engine(vllm_module)
    regex = Index.from_regex(REGEX, toy_vocab)
    engine.update(added=[(0, {"tokendfa_regex": REGEX}, regex)])
    engine.lp.apply(logits_for(1))   # the device tables are made (a copy that syncs)
    first, second = logits_for(1), logits_for(1, seed=1)
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000_000)       # ~0.5 s of GPU time before the next copy runs
    engine.lp.apply(first)
    engine.outputs[0] += [TOKEN[b"c"]]
    engine.lp.apply(second)
    torch.cuda.synchronize()
    start = regex.initial_state
    assert first[0].isfinite().nonzero().flatten().tolist() == regex.get_tokens(start).tolist()
    after_c = regex.advance(start, TOKEN[b"c"])
    assert second[0].isfinite().nonzero().flatten().tolist() == regex.get_tokens(after_c).tolist()


def test_rows_follow_adds_moves_swaps_and_removals(vllm_module, toy_vocab):
    engine = Engine(vllm_module)
    regex = Index.from_regex(REGEX, toy_vocab)
    schema = Index.from_schema(SCHEMA, toy_vocab)
    engine.update(added=[(0, {"tokendfa_regex": REGEX}, regex), (1, None, None),
                         (2, {"tokendfa": {"json_schema": SCHEMA}}, schema)])
    engine.step(logits_for(3))
    engine.outputs[0] += [TOKEN[b"ab"]]
    engine.outputs[1] += [TOKEN[b"x"]]
    engine.outputs[2] += [TOKEN[b"{"]]
    engine.lp.update_state(None)
    engine.step(logits_for(3, 1))
    # Row 0 finishes; vLLM condenses: the last request moves into the hole.
    engine.update(removed=[0], moved=[(2, 0, "one")])
    engine.outputs[0] += [TOKEN[b'"a']]
    engine.step(logits_for(2, 2))
    engine.update(moved=[(0, 1, "swap")])
    engine.outputs[1] += [TOKEN[b'"'], TOKEN[b":"]]   # two at once: both are fed
    engine.step(logits_for(2, 3))
    # A new request takes index 0, which still had a row (the unconstrained one).
    engine.update(added=[(0, {"tokendfa_regex": "12|5"}, Index.from_regex("12|5", toy_vocab))])
    engine.step(logits_for(2, 4))
    engine.outputs[0] += [TOKEN[b"12"]]
    engine.step(logits_for(2, 5))
    assert engine.lp.apply(logits_for(2, 6))[0].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    # The same request added again with a non-constrained one: the row goes.
    engine.update(added=[(0, None, None)])
    engine.step(logits_for(2, 7))


def test_after_eos_or_a_refused_token_only_eos_is_allowed(vllm_module, toy_vocab):
    engine = Engine(vllm_module)
    index = Index.from_regex("12|5", toy_vocab)
    engine.update(added=[(0, {"tokendfa_regex": "12|5"}, index),
                         (1, {"tokendfa_regex": "12|5"}, index)])
    engine.step(logits_for(2))
    engine.outputs[0] += [TOKEN[b"5"], TOY_EOS]          # ignore_eos: vLLM goes on
    engine.outputs[1] += [TOKEN[b"x"]]                   # something overrode the mask
    out = engine.lp.apply(logits_for(2, 1))
    for row in (0, 1):
        assert out[row].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    engine.outputs[0] += [TOY_EOS, TOY_EOS]
    engine.outputs[1] += [TOY_EOS]
    assert engine.lp.apply(logits_for(2, 2)).isfinite().sum().item() == 2


def test_a_request_the_worker_cannot_build_ends_instead_of_crashing(vllm_module):
    engine = Engine(vllm_module)
    engine.update(added=[(0, {"tokendfa_regex": "(ab"}, None), (1, None, None)])
    before = logits_for(2)
    out = engine.lp.apply(before.clone())
    assert out[0].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    assert torch.equal(out[1], before[1])


def test_sampled_generations_match_while_the_batch_is_reshuffled(vllm_module, toy_vocab):
    """Random sampling from the masked logits, with requests finishing,
    arriving and moving as vLLM does (a new request takes the lowest free
    index, then the last rows move down into the remaining holes; sometimes
    two rows swap); every finished text must match its pattern."""
    rng = random.Random(7)
    patterns = [REGEX, "12|5", r"-?(0|[12][0-9]{0,2})(\.[0-9]{1,2})?",
                r'\{"a":(0|[1-9]|[1-4][0-9]|5[0-2])\}']
    indexes = {p: Index.from_regex(p, toy_vocab) for p in patterns}
    engine = Engine(vllm_module)
    pending = [patterns[i % len(patterns)] for i in range(24)] + [None] * 6
    rng.shuffle(pending)
    finished: list[tuple[str, bytes]] = []

    def request(i):
        pattern = pending.pop()
        extra_args = {"tokendfa": {"regex": pattern}} if pattern else {"seed": i}
        return (i, extra_args, indexes[pattern] if pattern else None, pattern)

    engine.update(added=[request(i) for i in range(5)])
    for step in range(600):
        if not engine.outputs:
            break
        rows = len(engine.outputs)
        out = engine.step(torch.randn(rows, WIDTH, generator=torch.Generator().manual_seed(step)).to(DEVICE))
        probs = torch.softmax(out, dim=-1).cpu()
        done = []
        for i in range(rows):
            token = int(torch.multinomial(probs[i], 1,
                                          generator=torch.Generator().manual_seed(step * 10 + i)))
            engine.outputs[i].append(token)
            if token == TOY_EOS or (engine.tags[i] is None and len(engine.outputs[i]) >= 8):
                done.append(i)
                if engine.tags[i] is not None:
                    finished.append((engine.tags[i], toy_vocab.decode(engine.outputs[i][:-1])))
        if not done:
            engine.lp.update_state(None)
            continue
        holes = sorted(done)
        added = [request(holes.pop(0)) for _ in range(min(len(holes), len(pending)))]
        live = sorted(set(range(rows)) - set(done))
        moved = []
        while holes and live and live[-1] > holes[0]:
            moved.append((live.pop(), holes.pop(0), "one"))
        engine.update(removed=sorted(holes, reverse=True), added=added, moved=moved)
        if rng.random() < 0.3 and len(engine.outputs) > 1:
            a, b = rng.sample(sorted(engine.outputs), 2)
            engine.update(moved=[(a, b, "swap")])
    assert not engine.outputs and not pending
    assert len(finished) == 24
    for pattern, text in finished:
        assert re.fullmatch(pattern.encode(), text), (pattern, text)


@pytest.mark.parametrize("value, preload", [(None, True), ("0", False), ("off", False), ("1", True),
                                            ("maybe", True)])
def test_the_vocabulary_is_read_ahead_unless_the_operator_says_not(vllm_module, monkeypatch,
                                                                    value, preload):
    if value is None:
        monkeypatch.delenv("TOKENDFA_PRELOAD", raising=False)
    else:
        monkeypatch.setenv("TOKENDFA_PRELOAD", value)
    assert vllm_module.Settings.of().preload is preload


# --- the vocabulary of a model named by a hub id ---------------------------------------

@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory):
    """A small byte-level BPE tokenizer folder, as transformers saves it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(['{"name": "x", "age": 12}\n', "hello world\n"] * 50, trainer)
    folder = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    return folder


def hub_cache(cache, repo_id: str, files, commit: str = "0123456789abcdef0123456789abcdef01234567"):
    """``files`` laid out as huggingface_hub's cache holds a downloaded
    repository: content-named blobs, a snapshot folder of links to them, and
    ``refs/main`` naming the snapshot's commit."""
    import hashlib

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def hub_config(repo_id: str):
    return SimpleNamespace(model=repo_id, tokenizer=repo_id, tokenizer_revision=None,
                           skip_tokenizer_init=False)


def test_a_hub_id_is_read_from_its_cached_snapshot_and_stored(vllm_module, tokenizer_files,
                                                              tmp_path, monkeypatch):
    import huggingface_hub

    from tokendfa.vocab import huggingface, stored

    monkeypatch.delenv(stored.STORE_ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = hub_cache(tmp_path / "hub", "org/tiny", tokenizer_files)
    assert vllm_module.tokenizer_folder("org/tiny") == str(snapshot)
    expected = Vocabulary.from_pretrained(str(tokenizer_files))

    vocab = vllm_module._Indexes().vocabulary(hub_config("org/tiny"))
    assert (vocab.tokens, vocab.eos_token_ids) == (expected.tokens, expected.eos_token_ids)
    assert vocab.source == str(snapshot)
    # Keyed by the snapshot's files: the next process (a new memo) loads the
    # entry without reading the tokenizer.
    entries = sorted((tmp_path / "cache" / "vocabularies").glob(f"*{stored.SUFFIX}"))
    assert [p.name for p in entries] == [stored.folder_key(snapshot) + stored.SUFFIX]
    monkeypatch.setattr(huggingface, "read_folder",
                        lambda *a, **k: pytest.fail("read the tokenizer on a store hit"))
    again = vllm_module._Indexes().vocabulary(hub_config("org/tiny"))
    assert again.tokens == expected.tokens


def test_a_hub_id_not_in_the_cache_uses_the_tokenizer_vllm_loaded(vllm_module, tokenizer_files,
                                                                  tmp_path, monkeypatch):
    import huggingface_hub
    from transformers import PreTrainedTokenizerFast
    from tokendfa.vocab import stored

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub_cache(tmp_path / "hub", "org/tiny", tokenizer_files)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_files))
    tokenizer.name_or_path = "org/elsewhere"   # vLLM reports the hub id, not the snapshot
    registry = types.ModuleType("vllm.tokenizers.registry")
    registry.cached_tokenizer_from_config = lambda model_config: tokenizer
    monkeypatch.setitem(sys.modules, "vllm.tokenizers.registry", registry)
    expected = Vocabulary.from_pretrained(str(tokenizer_files))
    store = tmp_path / "cache" / "vocabularies"
    before = sorted(store.glob(f"*{stored.SUFFIX}"))
    for name in ("org/elsewhere", "not a repository id", "/no/such/folder"):
        assert vllm_module.tokenizer_folder(name) is None
        vocab = vllm_module._Indexes().vocabulary(hub_config(name))
        assert vocab.tokens == expected.tokens
    # a tokenizer object has no files to key (its lazy tables, keyed by the
    # vocabulary's fingerprint, are kept beside)
    assert sorted(store.glob(f"*{stored.SUFFIX}")) == before


def test_the_front_end_reads_the_tables_the_worker_left_and_prepares_nothing_more(
        vllm_module, tokenizer_files, monkeypatch):
    """The worker (serving) prepares the vocabulary and leaves its lazy tables
    in the cache folder; the front end (which only checks requests) reads
    them instead of making them, and prepares nothing more."""
    from tokendfa.lazy import tables, tables_ready

    config = hub_config(str(tokenizer_files))
    worker = vllm_module._Indexes().vocabulary(config)
    assert tables_ready(worker) and worker.has_derived("byte-occurrences")
    monkeypatch.setattr(tables, "_vocabulary_tables",
                        lambda vocabulary: pytest.fail("made the tables instead of reading them"))
    front = vllm_module._Indexes()
    vocab = front.vocabulary(config, serving=False)
    assert vocab is not worker and vocab.fingerprint == worker.fingerprint
    assert tables_ready(vocab) and not vocab.has_derived("byte-occurrences")
    vllm_module._build(vllm_module.Constraint("regex", "[0-9]{3}", "regex"), vocab,
                       vllm_module.Settings())
    assert front.vocabulary(config) is vocab and vocab.has_derived("byte-occurrences")  # serving now


# --- closing within max_tokens ------------------------------------------------------------

LONG = r'\{"a":"[abc ]*"(,"b":-?[0-9]+)?\}'   # a string and a number without end: can run out


def _budget_step(lp, rows, logits):
    """Apply, then check each row against its reference guide and sample the next token."""
    out = lp.apply(logits)
    picked = []
    for r, (output, reference) in enumerate(rows):
        allowed = torch.isfinite(out[r]).nonzero().flatten().tolist()
        expected = [TOY_EOS] if reference.ended else reference.get_tokens().tolist()
        assert allowed == expected, (r, output)
        token = int(out[r].argmax())
        output.append(token)
        if not reference.ended:
            reference.advance(token)
        picked.append(token)
    return picked


@pytest.mark.parametrize("setting, extra, closes", [
    (None, {"tokendfa_regex": LONG}, True),
    (None, {"tokendfa": {"regex": LONG, "close_within_max_tokens": False}}, False),
    (None, {"tokendfa_regex": LONG, "tokendfa_close_within_max_tokens": "0"}, False),
    (False, {"tokendfa_regex": LONG}, False),
    (False, {"tokendfa_regex": LONG, "tokendfa_close_within_max_tokens": 1}, True),
])
def test_v1_requests_close_within_max_tokens_unless_told_not(vllm_module, toy_vocab, setting, extra, closes):
    """Logits that favour the string's characters: without closing, every
    request runs to max_tokens inside the string; with it, each ends with
    EOS on a complete match within max_tokens."""
    lp_module = sys.modules["vllm.v1.sample.logits_processor"]
    config = engine_config() if setting is None else engine_config(close_within_max_tokens=setting)
    assert vllm_module.Settings.of(config).close_within_max_tokens is (setting is None)
    lp = vllm_module.TokenDFALogitsProcessor(config, DEVICE, PIN)
    index = Index.from_regex(LONG, toy_vocab)
    budgets = [9, 12, 20]
    rows = [([], Guide(index, max_tokens=budget if closes else None)) for budget in budgets]
    lp.update_state(lp_module.BatchUpdate(
        batch_size=len(rows), removed=[], moved=[],
        added=[(i, params(extra, max_tokens=budget), [2], rows[i][0])
               for i, budget in enumerate(budgets)]))
    favoured = torch.zeros(WIDTH)
    favoured[[TOKEN[b"abc"], TOKEN[b"a"], TOKEN[b" "], TOKEN[b"1"], TOKEN[b"12"]]] = 5.0
    favoured[TOY_EOS] = 1.0
    for step in range(max(budgets)):
        _budget_step(lp, rows, logits_for(len(rows), step) * 0.1 + favoured.to(DEVICE))
        lp.update_state(None)
        if all(len(output) >= budget for (output, _), budget in zip(rows, budgets)):
            break
    for (output, _), budget in zip(rows, budgets):
        text = output[:budget]
        ended = TOY_EOS in text
        assert ended == closes, (text, budget)
        if closes:
            assert re.fullmatch(LONG.encode(), toy_vocab.decode(text[:text.index(TOY_EOS)]))


def test_a_request_too_short_to_close_is_served_plain_with_a_log_line(vllm_module, toy_vocab,
                                                                     monkeypatch, caplog):
    import logging

    logger = logging.getLogger("tokendfa-test-budget")
    monkeypatch.setattr(vllm_module, "_logger", lambda: logger)
    caplog.set_level(logging.INFO, logger="tokendfa-test-budget")
    lp_module = sys.modules["vllm.v1.sample.logits_processor"]
    lp = vllm_module.TokenDFALogitsProcessor(engine_config(), DEVICE, PIN)
    index = Index.from_regex(LONG, toy_vocab)
    least = index.finish_bound(index.initial_state)
    output: list[int] = []
    lp.update_state(lp_module.BatchUpdate(batch_size=1, removed=[], moved=[], added=[
        (0, params({"tokendfa_regex": LONG}, max_tokens=least - 1), [2], output)]))
    out = lp.apply(logits_for(1))
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == index.get_tokens(1).tolist()
    lines = [r.getMessage() for r in caplog.records if "max_tokens" in r.getMessage()]
    assert len(lines) == 1 and f"max_tokens={least - 1}" in lines[0]


def test_the_closing_option_is_read_and_checked(vllm_module):
    read = vllm_module.constraint_of
    assert read({"tokendfa_regex": "a"}).close is None
    assert read({"tokendfa": {"regex": "a", "close_within_max_tokens": False}}).close is False
    assert read({"tokendfa_regex": "a", "tokendfa_close_within_max_tokens": "true"}).close is True
    with pytest.raises(ValueError, match="true or false"):
        read({"tokendfa_regex": "a", "tokendfa_close_within_max_tokens": "maybe"})
    with pytest.raises(ValueError, match="gives none"):
        read({"tokendfa_close_within_max_tokens": 0})
