"""The vLLM processor under both model runners, registered twice, with
speculative decoding, index files from the operator's folder, and bounded
requests, against the installed vLLM (0.32, CPU build) without running a
model.

* Both runners' plugin loaders (``_load_logitsprocs_plugins``,
  ``_load_v2_logitsprocs_plugins``) and explicit-class loaders accept the
  class; vLLM's own builders, given the class explicitly as well as through
  the entry point, build two instances of which one works.
* The V2 processor is driven as the Model Runner V2 drives it (slots,
  ``add_request``, ``apply(logits, LogitsContext)`` with one row per draft
  token) over a simulated batch that adds, reorders, preempts, resumes and
  finishes requests, with drafts accepted and rejected; every constrained
  row must equal what the V1 processor writes for the same committed tokens
  plus the row's drafts.
* Index names, the folder, FIFOs; the compile time limit with a hostile
  schema in the middle of a batch, in the front end and in the worker; the
  memo's byte bound; the front end's configuration lookup.
"""

from __future__ import annotations

import inspect
import logging
import os
import random
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor.interface",
                    reason="needs vLLM 0.32 (its V2 processor interface)")

from conftest import TOY_EOS, TOY_TOKENS  # noqa: E402
from test_vllm_processor import (  # noqa: E402,F401 - vllm_module is a fixture
    DEVICE, PIN, REGEX, SCHEMA, WIDTH, Engine, FrontEnd, engine_config, logits_for, params, vllm_module)
from tokendfa import Index  # noqa: E402

# A schema that takes ~0.75 s to compile over the toy vocabulary (30 objects
# of 8 required properties under oneOf): over a 0.2 s limit. Each test takes
# its own (the property names shuffled by ``seed``): a schema's parts, once
# compiled, are cached in the process and compile faster the next time.
def hostile(seed: int) -> dict:
    """A schema whose compile takes ~1.5 s here in a warm process (an allOf
    of twelve two-way anyOfs: a product of 4,096 branches), far past the
    tests' 0.2 s limit, so the wall-clock bounds below (generous, for a
    loaded machine) fail only when the limit does not fire; ``seed`` names
    its properties, so each seed is a new schema to the memo. (Ten anyOfs
    took ~6 s once; with the lazy front end they take ~0.2 s warm, so the
    limit fired or not depending on the tests run before.)"""
    return {"allOf": [{"anyOf": [{"required": [f"a{i}s{seed}"]}, {"required": [f"b{i}s{seed}"]}]}
                      for i in range(12)]}


# --- both runners load it, once ----------------------------------------------------------

def test_both_runners_plugin_loaders_accept_the_entry_point():
    from vllm.v1.sample.logits_processor import (_load_logitsprocs_by_fqcns,
                                                 _load_logitsprocs_plugins)
    from vllm.v1.worker.gpu.sample.logits_processor.loader import (
        _load_v2_logitsprocs_by_fqcns, _load_v2_logitsprocs_plugins)

    fqcn = "tokendfa.integrations.vllm:TokenDFALogitsProcessor"
    for loaded in (_load_logitsprocs_plugins(), _load_v2_logitsprocs_plugins(),
                   _load_logitsprocs_by_fqcns([fqcn]), _load_v2_logitsprocs_by_fqcns([fqcn])):
        names = [f"{cls.__module__}:{cls.__qualname__}" for cls in loaded]
        assert fqcn in names
    from tokendfa.integrations.vllm import TokenDFALogitsProcessor

    _load_logitsprocs_by_fqcns([TokenDFALogitsProcessor])
    _load_v2_logitsprocs_by_fqcns([TokenDFALogitsProcessor])


def fake_req_states(slots=8, length=64):
    return SimpleNamespace(
        device=DEVICE, max_num_reqs=slots, vocab_size=WIDTH,
        all_token_ids=SimpleNamespace(gpu=torch.zeros(slots, length, dtype=torch.int64, device=DEVICE)),
        prompt_len=SimpleNamespace(np=np.zeros(slots, dtype=np.int32)),
        prefill_len=SimpleNamespace(np=np.zeros(slots, dtype=np.int32)),
        total_len=SimpleNamespace(gpu=torch.zeros(slots, dtype=torch.int32, device=DEVICE)))


def ours(processors, module):
    return [p for p in processors if isinstance(p, module.TokenDFALogitsProcessor)]


def test_registered_twice_it_runs_once_under_both_runners(vllm_module):
    from vllm.v1.sample.logits_processor import build_logitsprocs
    from vllm.v1.worker.gpu.sample.logits_processor.loader import build_custom_logits_processors

    explicit = [vllm_module.TokenDFALogitsProcessor]   # as well as the entry point
    config = engine_config()
    config.scheduler_config = SimpleNamespace(max_num_seqs=8)
    v1 = ours(build_logitsprocs(config, DEVICE, PIN, False, explicit).all,
              vllm_module)
    v2 = ours(build_custom_logits_processors(engine_config(), fake_req_states(), False, explicit),
              vllm_module)
    for built, kind in ((v1, vllm_module.V1Processor), (v2, vllm_module.V2Processor)):
        assert len(built) == 2 and all(type(p) is kind for p in built)
        assert sorted(p.duplicate for p in built) == [False, True]
    v2.sort(key=lambda p: p.duplicate)
    ask = params({"tokendfa_regex": REGEX})
    assert [p.add_request(0, ask) for p in v2] == [True, False]
    logits = logits_for(1)
    assert torch.equal(v2[1].apply(logits.clone(), None), logits)
    # A processor built later for the same engine (vLLM rebuilt its batch
    # after the first one served) is not a duplicate.
    assert not vllm_module.V2Processor(v2[0]._config, fake_req_states()).duplicate


# --- V2 with speculative decoding, against V1 ------------------------------------------

class V2Runner:
    """Plays the Model Runner V2: slots from a free list, requests added with
    add_request (again after preemption, into whatever slot is free), each
    step's rows built as LogitsContext (row 0 fed the last committed token,
    rows 1.. the drafts), and greedy verification of the drafts."""

    def __init__(self, module, toy_vocab, rng, max_tokens=None) -> None:
        from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext

        self.LogitsContext = LogitsContext
        self.module, self.vocab, self.rng = module, toy_vocab, rng
        self.max_tokens = max_tokens   # every request's, closed within (None: 14 tokens, not said)
        self.req_states = fake_req_states()
        self.lp = module.TokenDFALogitsProcessor(engine_config(v2=True), self.req_states)
        assert type(self.lp) is module.V2Processor
        self.free = list(range(8))[::-1]
        self.slot_of: dict[int, int] = {}            # request -> slot (running)
        self.requests: dict[int, dict] = {}
        self.counts = dict.fromkeys(("accepted", "rejected", "refused_draft", "preempted",
                                     "resumed", "partial_prefill", "finished", "eos_draft"), 0)

    def add(self, rid: int, pattern: str | None) -> None:
        prompt = [self.rng.choice([0, 3, 5]) for _ in range(self.rng.randint(2, 4))]
        self.requests[rid] = {"pattern": pattern, "prompt": prompt, "output": [],
                              "index": Index.from_regex(pattern, self.vocab) if pattern else None,
                              "fresh": True}
        self._place(rid)

    def _place(self, rid: int) -> None:
        request = self.requests[rid]
        slot = self.free.pop()
        self.slot_of[rid] = slot
        tokens = request["prompt"] + request["output"]
        self.req_states.all_token_ids.gpu[slot].zero_()
        self.req_states.all_token_ids.gpu[slot, :len(tokens)] = torch.tensor(tokens)
        self.req_states.prompt_len.np[slot] = len(request["prompt"])
        extra = {"tokendfa_regex": request["pattern"]} if request["pattern"] else {"seed": rid}
        assert self.lp.add_request(slot, self._params(extra)) == (request["pattern"] is not None)

    def _params(self, extra):
        return params(extra) if self.max_tokens is None else params(extra, max_tokens=self.max_tokens)

    def preempt(self, rid: int) -> None:
        self.free.append(self.slot_of.pop(rid))   # the runner frees the slot; nothing is said
        self.counts["preempted"] += 1

    def resume(self, rid: int) -> None:
        self._place(rid)
        self.counts["resumed"] += 1

    def _state(self, request, tokens):
        """The reference's state after ``tokens`` (None: refused; "eos": ended)."""
        index = request["index"]
        state = index.initial_state
        for token in tokens:
            if token == TOY_EOS:
                # EOS before the match is complete is refused like any token
                return "eos" if index.is_final(state) else None
            if not index.is_allowed(state, token):
                return None
            state = index.advance(state, token)
        return state

    def _plan(self, request, count):
        """A likely continuation: allowed tokens walked from the committed state."""
        if request["index"] is None:
            return [self.rng.randrange(len(TOY_TOKENS)) for _ in range(count)]
        state, plan = self._state(request, request["output"]), []
        while len(plan) < count and state not in (None, "eos"):
            allowed = request["index"].get_tokens(state).tolist()
            token = self.rng.choice(allowed)
            plan.append(token)
            state = "eos" if token == TOY_EOS else request["index"].advance(state, token)
        return plan

    def step(self, reference_module) -> list[int]:
        """One step over the running requests (in a random order); returns the
        requests that finished."""
        running = list(self.slot_of)
        self.rng.shuffle(running)
        rows = []   # (rid, k, input token, position, drafts so far)
        plans = {}
        for rid in running:
            request, slot = self.requests[rid], self.slot_of[rid]
            committed = request["prompt"] + request["output"]
            if request["fresh"] and self.rng.random() < 0.3:
                # A prompt chunk that does not finish the prefill: its row is sampled and thrown away.
                rows.append((rid, 0, committed[-2], len(committed) - 2, []))
                plans[rid] = None
                self.counts["partial_prefill"] += 1
                continue
            request["fresh"] = False
            plan = self._plan(request, self.rng.randint(0, 3)) + [0] * 3
            drafts = []
            for k in range(self.rng.randint(0, 3)):
                token = plan[k]
                if self.rng.random() < 0.25:
                    token = self.rng.randrange(len(TOY_TOKENS))   # a poor draft
                drafts.append(token)
            plans[rid] = plan
            rows.append((rid, 0, committed[-1], len(committed) - 1, []))
            rows += [(rid, k + 1, drafts[k], len(committed) + k, drafts[:k + 1])
                     for k in range(len(drafts))]
        count = len(rows)
        logits = torch.randn(count, WIDTH, generator=torch.Generator().manual_seed(self.rng.randrange(1 << 30))).to(DEVICE)
        for r, (rid, k, _, _, _) in enumerate(rows):
            if plans[rid] is not None and k < len(plans[rid]):
                logits[r, plans[rid][k]] += 10.0   # the target model agrees with the plan
        order = []
        for rid in running:
            if rid not in order:
                order.append(rid)
        ctx = self.LogitsContext(
            expanded_idx_mapping=torch.tensor([self.slot_of[row[0]] for row in rows], dtype=torch.int32, device=DEVICE),
            idx_mapping=torch.tensor([self.slot_of[rid] for rid in order], dtype=torch.int32, device=DEVICE),
            idx_mapping_np=np.array([self.slot_of[rid] for rid in order], dtype=np.int32),
            expanded_local_pos=torch.tensor([row[1] for row in rows], dtype=torch.int32, device=DEVICE),
            input_ids=torch.tensor([row[2] for row in rows], dtype=torch.int32, device=DEVICE),
            pos=torch.tensor([row[3] for row in rows], dtype=torch.int64, device=DEVICE),
            seq_lens_upper_bound_np=np.array([row[3] + 1 for row in rows], dtype=np.int32))
        before = logits.clone()
        out = self.lp.apply(logits, ctx)
        self._check(reference_module, rows, before, out)
        return self._verify(rows, out)

    def _check(self, reference_module, rows, before, out) -> None:
        """Each constrained row as the V1 processor writes it for the same
        committed tokens plus that row's drafts."""
        v1 = reference_module.TokenDFALogitsProcessor(engine_config(), DEVICE, PIN)
        batch, expected_rows = [], []
        for r, (rid, k, _, position, drafts) in enumerate(rows):
            request = self.requests[rid]
            if request["pattern"] is None:
                assert torch.equal(out[r], before[r]), "an unconstrained row changed"
                continue
            committed = request["output"][:max(0, position + 1 - k - len(request["prompt"]))]
            if self._state(request, drafts and committed + drafts) is None:
                # Past a draft the index refuses: the verifier rejects it, the
                # row only needs some finite value (it has the last allowed state's mask).
                assert torch.isfinite(out[r]).any()
                self.counts["refused_draft"] += 1
                continue
            if TOY_EOS in drafts:
                self.counts["eos_draft"] += 1
            batch.append((len(batch), self._params({"tokendfa_regex": request["pattern"]}),
                          request["prompt"], committed + drafts))
            expected_rows.append(r)
        if not batch:
            return
        lp_module = __import__("vllm.v1.sample.logits_processor", fromlist=["BatchUpdate"])
        v1.update_state(lp_module.BatchUpdate(batch_size=len(batch), removed=[], added=batch,
                                              moved=[]))
        expected = v1.apply(before[expected_rows].clone())
        assert torch.equal(out[expected_rows], expected)

    def _verify(self, rows, out) -> list[int]:
        """Greedy verification: drafts accepted while they equal the target's
        choice, then the target's token."""
        finished = []
        by_request: dict[int, list[int]] = {}
        for r, row in enumerate(rows):
            by_request.setdefault(row[0], []).append(r)
        for rid, mine in by_request.items():
            request = self.requests[rid]
            if len(mine) == 1 and rows[mine[0]][3] < len(request["prompt"]) - 1:
                continue   # the partial prefill chunk: nothing is committed
            targets = [int(out[r].argmax()) for r in mine]
            drafts = [rows[r][2] for r in mine[1:]]
            new = []
            for k, target in enumerate(targets):
                if k < len(drafts) and drafts[k] == target:
                    new.append(target)
                    self.counts["accepted"] += 1
                    if target == TOY_EOS:
                        break
                    continue
                if k < len(drafts):
                    self.counts["rejected"] += 1
                new.append(target)
                break
            if TOY_EOS in new:
                new = new[:new.index(TOY_EOS) + 1]
            limit = self.max_tokens or 14
            new = new[:limit - len(request["output"])]   # vLLM stops at max_tokens
            request["output"] += new
            if request["pattern"] is not None:
                assert self._state(request, request["output"][:-1] if new[-1] == TOY_EOS
                                   else request["output"]) is not None
            if new[-1] == TOY_EOS or len(request["output"]) >= limit:
                finished.append(rid)
        for rid in finished:
            self.free.append(self.slot_of.pop(rid))
            self.counts["finished"] += 1
        return finished


@pytest.mark.parametrize("max_tokens", [None, 9])
def test_v2_with_drafts_matches_v1_while_requests_come_go_and_are_preempted(vllm_module, toy_vocab,
                                                                            max_tokens):
    """With ``max_tokens``, a draft position k closes within the k fewer
    tokens left, as V1 does for the same tokens; every request then ends
    with EOS on a complete match within max_tokens."""
    rng = random.Random(11)
    patterns = [REGEX, "12|5", r"-?(0|[12][0-9]{0,2})(\.[0-9]{1,2})?",
                r'\{"a":(0|[1-9]|[1-4][0-9]|5[0-2])\}', r"(abc|x)+-(12|5)"]
    runner = V2Runner(vllm_module, toy_vocab, rng, max_tokens)
    pending = [patterns[i % len(patterns)] for i in range(25)] + [None] * 5
    rng.shuffle(pending)
    preempted: list[int] = []
    next_id = 0
    done = []
    for _ in range(400):
        while pending and runner.free and len(runner.slot_of) < 5:
            runner.add(next_id, pending.pop())
            next_id += 1
        if preempted and runner.free and rng.random() < 0.5:
            runner.resume(preempted.pop(0))
        if runner.slot_of and rng.random() < 0.08:
            rid = rng.choice(list(runner.slot_of))
            runner.preempt(rid)
            preempted.append(rid)
        if not runner.slot_of and not preempted and not pending:
            break
        if runner.slot_of:
            done += runner.step(vllm_module)
    assert len(done) == 30
    counts = runner.counts
    assert all(counts[name] > 0 for name in counts), counts   # every case was exercised
    if max_tokens is not None:
        closed = [r["output"][-1] == TOY_EOS for r in runner.requests.values() if r["pattern"]]
        assert all(closed) and len(closed) == 25
    for request in runner.requests.values():
        if request["pattern"] and request["output"][-1] == TOY_EOS:
            text = toy_vocab.decode(request["output"][:-1])
            import re
            assert re.fullmatch(request["pattern"].encode(), text)


# --- index files from the operator's folder ----------------------------------------------

def test_index_files_come_only_from_the_folder_and_only_regular_files(vllm_module, toy_vocab,
                                                                     tmp_path, monkeypatch):
    folder = tmp_path / "indexes"
    folder.mkdir()
    Index.from_regex("12|5", toy_vocab).save(folder / "num.tdfa")
    (tmp_path / "outside.tdfa").write_bytes((folder / "num.tdfa").read_bytes())
    os.mkfifo(folder / "pipe.tdfa")
    (folder / "sub").mkdir()
    (folder / "empty.tdfa").write_bytes(b"")
    front = FrontEnd(vllm_module, engine_config(index_dir=str(folder)))
    front.validate(params({"tokendfa_index": "num.tdfa"}))
    messages = []
    for name in ("pipe.tdfa", "sub", "missing.tdfa", "empty.tdfa"):
        started = time.monotonic()
        with pytest.raises(ValueError) as caught:
            front.validate(params({"tokendfa_index": name}))
        assert time.monotonic() - started < 2   # a FIFO does not block
        messages.append(str(caught.value).replace(name, "NAME"))
        assert str(folder) not in str(caught.value) and "\n" not in str(caught.value)
    # One message whatever the reason.
    assert set(messages) == {"tokendfa_index: no index file named 'NAME' in the server's "
                             "index folder"}
    for name in ("../outside.tdfa", str(tmp_path / "outside.tdfa"), "indexes/../outside.tdfa"):
        with pytest.raises(ValueError, match="without path separators or '..'"):
            front.validate(params({"tokendfa_index": name}))
    # Without a folder: refused, saying how to enable index files.
    monkeypatch.delenv("TOKENDFA_INDEX_DIR", raising=False)
    with pytest.raises(ValueError, match="TOKENDFA_INDEX_DIR"):
        FrontEnd(vllm_module, engine_config()).validate(params({"tokendfa_index": "num.tdfa"}))
    # The worker serves the folder's file, and ends a request naming another.
    monkeypatch.setenv("TOKENDFA_INDEX_DIR", str(folder))
    engine = Engine(vllm_module)
    engine.update(added=[(0, {"tokendfa_index": "num.tdfa"}, Index.from_regex("12|5", toy_vocab)),
                         (1, {"tokendfa_index": "pipe.tdfa"}, None)])
    out = engine.lp.apply(logits_for(2))
    assert out[1].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    assert sorted(out[0].isfinite().nonzero().flatten().tolist()) == sorted(
        Index.from_regex("12|5", toy_vocab).get_tokens(1).tolist())


# --- bounds ----------------------------------------------------------------------------------

@pytest.fixture
def log_lines(vllm_module, monkeypatch, caplog):
    logger = logging.getLogger("tokendfa-test")
    monkeypatch.setattr(vllm_module, "_logger", lambda: logger)
    caplog.set_level(logging.INFO, logger="tokendfa-test")
    return caplog


def test_a_hostile_schema_in_the_front_end_is_a_one_line_error_within_the_limit(vllm_module):
    front = FrontEnd(vllm_module, engine_config(compile_time_limit=0.2))
    import json
    started = time.monotonic()
    front.validate(params({"tokendfa_regex": REGEX}))
    with pytest.raises(ValueError) as caught:
        front.validate(params({"tokendfa_json_schema": json.dumps(hostile(1))}))
    assert time.monotonic() - started < 2.5
    assert str(caught.value) == ("tokendfa_json_schema: compiling it took longer than the time "
                                 "limit of 0.2 s")
    front.validate(params({"tokendfa": {"json_schema": SCHEMA}}))   # the next one is served
    # Without the limit it compiles (the bound, not the schema, refused it).
    FrontEnd(vllm_module, engine_config(compile_time_limit=30)).validate(
        params({"tokendfa": {"json_schema": hostile(1)}}))


def test_a_hostile_schema_in_the_middle_of_a_worker_batch_ends_alone(vllm_module, toy_vocab,
                                                                    log_lines):
    regex, schema = Index.from_regex(REGEX, toy_vocab), Index.from_schema(SCHEMA, toy_vocab)
    # V1: the worker builds under the limit (vLLM's front end would have
    # refused it; here it reaches the worker, as with another front end).
    engine = Engine(vllm_module)
    engine.lp._settings = vllm_module.Settings(compile_time_limit=0.2)
    started = time.monotonic()
    engine.update(added=[(0, {"tokendfa_regex": REGEX}, regex),
                         (1, {"tokendfa": {"json_schema": hostile(2)}}, None),
                         (2, {"tokendfa": {"json_schema": SCHEMA}}, schema)])
    assert time.monotonic() - started < 2.5
    out = engine.lp.apply(logits_for(3))
    assert out[1].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    assert out[0].isfinite().nonzero().flatten().tolist() == regex.get_tokens(1).tolist()
    assert out[2].isfinite().nonzero().flatten().tolist() == schema.get_tokens(1).tolist()
    assert any("took longer than the time limit of 0.2 s" in r.getMessage()
               and "the request is ended" in r.getMessage() for r in log_lines.records)
    # V2: the same batch through add_request.
    lp = vllm_module.TokenDFALogitsProcessor(engine_config(v2=True, compile_time_limit=0.2),
                                             fake_req_states())
    assert [lp.add_request(slot, params(extra)) for slot, extra in enumerate(
        [{"tokendfa_regex": REGEX}, {"tokendfa": {"json_schema": hostile(3)}},
         {"tokendfa": {"json_schema": SCHEMA}}])] == [True, True, True]
    assert lp._slots[1].closed and not lp._slots[0].closed and not lp._slots[2].closed


def test_the_memo_is_bounded_in_bytes(vllm_module, toy_vocab):
    memo = vllm_module._Indexes()
    first = Index.from_regex("(ab|c)+x", toy_vocab)
    one = vllm_module.index_bytes(first)
    before = one
    first.get_mask(first.advance(first.initial_state, 0))   # serving a state grows it
    assert vllm_module.index_bytes(first) > before
    settings = vllm_module.Settings(memo_bytes=3 * one + one // 2)
    patterns = [f"(ab|c)+x{'1' * n}" for n in range(6)]
    built = []
    for pattern in patterns:
        built.append(memo.index(vllm_module.constraint_of({"tokendfa_regex": pattern}), toy_vocab,
                                settings))
        assert memo.total_bytes() <= settings.memo_bytes
    assert 1 <= len(memo._memo) <= 3
    # The newest are kept; the oldest were dropped (built again when asked).
    last = vllm_module.constraint_of({"tokendfa_regex": patterns[-1]})
    assert memo.index(last, toy_vocab, settings) is built[-1]
    assert memo.index(vllm_module.constraint_of({"tokendfa_regex": patterns[0]}), toy_vocab,
                      settings) is not built[0]


def test_settings_come_from_the_environment_and_the_engine_option(vllm_module, monkeypatch,
                                                                  log_lines):
    monkeypatch.setenv("TOKENDFA_COMPILE_TIME_LIMIT", "1.5")
    monkeypatch.setenv("TOKENDFA_MEMO_BYTES", "1000")
    monkeypatch.setenv("TOKENDFA_INDEX_DIR", "/srv/idx")
    assert vllm_module.Settings.of(None) == vllm_module.Settings("/srv/idx", 1.5, 1000)
    option = engine_config(compile_time_limit=3, index_dir="/opt/idx")
    assert vllm_module.Settings.of(option) == vllm_module.Settings("/opt/idx", 3.0, 1000)
    monkeypatch.setenv("TOKENDFA_COMPILE_TIME_LIMIT", "soon")
    monkeypatch.setenv("TOKENDFA_MEMO_BYTES", "-5")
    fallback = vllm_module.Settings.of(None)
    assert (fallback.compile_time_limit, fallback.memo_bytes) == (5.0, 1 << 30)
    assert sum("is not a positive number" in r.getMessage() for r in log_lines.records) == 2


# --- the front end's configuration -----------------------------------------------------------

class InputProcessorLike:
    """Holds the configuration as vLLM 0.32's InputProcessor does, and calls
    the installed vLLM's own validator functions, as it does."""

    def __init__(self, config) -> None:
        self.vllm_config = config

    def validate_v1(self, cls, sampling_params):
        from vllm.v1.sample.logits_processor import validate_logits_processors_parameters

        validate_logits_processors_parameters([cls], sampling_params)

    def validate_v2(self, cls, sampling_params):
        from vllm.v1.worker.gpu.sample.logits_processor.loader import (
            build_custom_logits_processors_params_validator)

        build_custom_logits_processors_params_validator([cls])(sampling_params)


def test_the_engine_configuration_is_found_through_vllms_own_call_chain(vllm_module):
    from vllm.v1.engine.input_processor import InputProcessor

    # The call chain engine_config relies on (vLLM 0.32).
    assert "self.validate_logits_processors_params(params)" in inspect.getsource(
        InputProcessor._validate_params)
    cls = vllm_module.TokenDFALogitsProcessor
    ask = params({"tokendfa_regex": REGEX})
    # The configuration is found: V1 with speculative decoding is refused,
    # which only the configuration tells.
    with pytest.raises(Exception, match="V1 model runner runs no custom logits processor"):
        InputProcessorLike(engine_config(speculative=object())).validate_v1(cls, ask)
    InputProcessorLike(engine_config(speculative=object(), v2=True)).validate_v2(cls, ask)
    with pytest.raises(Exception, match="time limit of 0.2 s"):
        InputProcessorLike(engine_config(v2=True, compile_time_limit=0.2)).validate_v2(
            cls, params({"tokendfa_json_schema": __import__("json").dumps(hostile(4))}))


def test_the_configuration_lookup_fails_safe(vllm_module):
    assert vllm_module.engine_config() is None

    looked = []

    class Broken:
        """A caller whose vllm_config raises when read."""

        @property
        def vllm_config(self):
            looked.append(True)
            raise RuntimeError("no")

        def call(self):
            def validate_params():   # the frame engine_config skips
                return vllm_module.engine_config()
            return validate_params()

    assert Broken().call() is None and looked


class SlowRows:
    """An index whose next mask takes longer than any limit (as a lazy
    index's new state of a hostile schema can): everything else delegates."""

    def __init__(self, index) -> None:
        self._index = index

    def __getattr__(self, name):
        return getattr(self._index, name)

    def write_mask_into(self, state, out, row=None):
        from tokendfa.analysis.errors import TimeLimitError

        raise TimeLimitError("the build took longer than the time limit of 0.2 s")


def test_a_compile_over_the_limit_while_serving_ends_that_request_alone(vllm_module, toy_vocab,
                                                                        log_lines):
    regex = Index.from_regex(REGEX, toy_vocab)
    engine = Engine(vllm_module)
    engine.update(added=[(0, {"tokendfa_regex": "12|5"}, None), (1, {"tokendfa_regex": REGEX}, regex)])
    engine.lp._rows[0].guide.index = SlowRows(engine.lp._rows[0].guide.index)
    out = engine.lp.apply(logits_for(2))
    assert out[0].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    assert out[1].isfinite().nonzero().flatten().tolist() == regex.get_tokens(1).tolist()
    assert engine.lp._rows[0].closed
    assert any("compiling its next state took longer than 5 s" in r.getMessage()
               and "ended with EOS" in r.getMessage() for r in log_lines.records)
    # V2: the same, for the slot's rows.
    states = fake_req_states()
    states.prompt_len.np[:] = 1
    lp = vllm_module.TokenDFALogitsProcessor(engine_config(v2=True), states)
    lp.add_request(3, params({"tokendfa_regex": "12|5"}))
    lp.add_request(5, params({"tokendfa_regex": REGEX}))
    lp._slots[3].guide.index = SlowRows(lp._slots[3].guide.index)
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsContext

    ctx = LogitsContext(
        expanded_idx_mapping=torch.tensor([5, 3], dtype=torch.int32, device=DEVICE),
        idx_mapping=torch.tensor([5, 3], dtype=torch.int32, device=DEVICE),
        idx_mapping_np=np.array([5, 3], dtype=np.int32),
        expanded_local_pos=torch.tensor([0, 0], dtype=torch.int32, device=DEVICE),
        input_ids=torch.tensor([2, 2], dtype=torch.int32, device=DEVICE),
        pos=torch.tensor([0, 0], dtype=torch.int64, device=DEVICE),
        seq_lens_upper_bound_np=np.array([1, 1], dtype=np.int32))
    out = lp.apply(logits_for(2), ctx)
    assert out[1].isfinite().nonzero().flatten().tolist() == [TOY_EOS]
    assert out[0].isfinite().nonzero().flatten().tolist() == regex.get_tokens(1).tolist()
    assert lp._slots[3].closed and not lp._slots[5].closed
