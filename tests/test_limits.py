"""A build's time limit counts the request's work, not the process's.

What a vocabulary makes once for every later build (its tables, and its
tokenizer's encoder, loaded on first use) is outside the limit
(:func:`tokendfa.analysis.limits.excluded`), whichever kind of tokenizer it
comes from: a short limit on the first request of a fresh vocabulary must
not fire because that request was the first to need the encoder, and a
build that is really over its limit must still be stopped.
"""

from __future__ import annotations

import json
import pickle
import time

import pytest

from tokendfa import Index, TimeLimitError, Vocabulary
from tokendfa.analysis import limits

# Loading an encoder stands in as this long (a real one: Gemma 3's tokenizer.json
# 0.7-1.9 s, Qwen2.5's tiktoken 0.15 s), past the limit given to the first request.
LOAD_SECONDS = 1.5
LIMIT = 1.0
# a schema of forced text: its fast-forward table is encoded with the tokenizer's own encoder
FORCED = json.dumps({"type": "object", "properties": {"greeting": {"const": "hello world"}},
                     "required": ["greeting"], "additionalProperties": False})


def _slowly(real):
    def loaded(*args, **kwargs):
        time.sleep(LOAD_SECONDS)
        return real(*args, **kwargs)
    return loaded


@pytest.fixture(scope="module")
def byte_level_folder(tmp_path_factory):
    """A small byte-level BPE saved as transformers saves it (tokenizer.json and its companions)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(['{"greeting": "hello world"}\n', "the quick brown fox\n"] * 50, trainer)
    folder = tmp_path_factory.mktemp("byte-level")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    return folder


def _tokenizer_json(folder, monkeypatch) -> Vocabulary:
    import tokenizers

    from tokendfa.vocab.huggingface import read_folder
    from tokendfa.vocab.tokenizer_json import TokenizerFileEncoder

    vocab = read_folder(folder)
    assert isinstance(vocab.encoder, TokenizerFileEncoder)
    monkeypatch.setattr(tokenizers.Tokenizer, "from_file", _slowly(tokenizers.Tokenizer.from_file))
    return vocab


def _transformers_folder(folder, monkeypatch) -> Vocabulary:
    from tokendfa.vocab import huggingface

    read = huggingface.read_folder(folder)
    monkeypatch.setattr(huggingface, "_load_transformers_tokenizer",
                        _slowly(huggingface._load_transformers_tokenizer))
    return Vocabulary(read.tokens, read.eos_token_ids, name="folder",
                      encoder=huggingface.FolderTransformersEncoder(str(folder)))


def _sentencepiece(folder, monkeypatch) -> Vocabulary:
    from tokendfa.vocab import sentencepiece

    # a copy through pickle holds the model, and loads its processor on first use
    vocab = pickle.loads(pickle.dumps(Vocabulary.builtin("mistral-sp32k")))
    assert vocab.encoder._processor is None
    monkeypatch.setattr(sentencepiece, "load_processor", _slowly(sentencepiece.load_processor))
    return vocab


def _tiktoken(folder, monkeypatch) -> Vocabulary:
    from tokendfa.vocab.tiktoken import TiktokenEncoder

    vocab = pickle.loads(pickle.dumps(Vocabulary.builtin("qwen2.5")))
    assert vocab.encoder._encoding is None
    monkeypatch.setattr(TiktokenEncoder, "_build", _slowly(TiktokenEncoder._build))
    return vocab


@pytest.mark.parametrize("fresh", [_tokenizer_json, _transformers_folder, _sentencepiece, _tiktoken],
                         ids=["tokenizer.json", "transformers", "sentencepiece", "tiktoken"])
def test_the_first_request_does_not_pay_for_the_encoder(fresh, byte_level_folder, monkeypatch):
    vocab = fresh(byte_level_folder, monkeypatch)
    vocab.prepare(eager=False)   # the tables, not the encoder: what is left is the encoder's load
    excluded = limits.excluded_seconds()
    started = time.perf_counter()
    index = Index.from_schema(FORCED, vocab, lazy=False, time_limit=LIMIT)
    # the build needs no encoder: its fast-forward table is made when first asked for
    assert time.perf_counter() - started < LOAD_SECONDS
    assert limits.excluded_seconds() - excluded < LOAD_SECONDS / 2   # the encoder not loaded
    started = time.perf_counter()
    forced = index.forced_tokens(index.initial_state)   # the table, under the build's limit
    spent = time.perf_counter() - started
    # the encoder was loaded inside the table's making, and its time is not the request's
    assert spent > LOAD_SECONDS and limits.excluded_seconds() - excluded >= LOAD_SECONDS * 0.9
    assert vocab.decode(forced.tolist()).startswith(b'{"greeting":"')
    state = index.initial_state
    for token in vocab.encode('{"greeting":"hello world"}'):
        state = index.advance(state, token)
    assert index.is_final(state)
    # a build really over its limit is still stopped, the encoder loaded or not
    from hostile.cases import _allof_of_anyofs

    started = time.perf_counter()
    with pytest.raises(TimeLimitError):
        Index.from_schema(_allof_of_anyofs(12), vocab, lazy=False, time_limit=0.3)
    assert time.perf_counter() - started < 0.3 + 1.0


def test_a_second_thread_waiting_for_the_encoder_s_load_is_not_counted(byte_level_folder, monkeypatch):
    """Vocabulary.prepare() loads the encoder on a thread of its own; a build
    that needs it meanwhile waits for that load, outside its limit too."""
    import threading

    vocab = _tokenizer_json(byte_level_folder, monkeypatch)
    loading = threading.Thread(target=vocab.encode, args=("warm up",))
    loading.start()
    time.sleep(0.1)   # the load has begun: the build below waits for its lock
    try:
        with limits.limits(time_limit=LIMIT) as given:
            vocab.encode("hello world")
            moved = limits.current().deadline - given.deadline
            limits.check()
    finally:
        loading.join()
    assert moved >= LOAD_SECONDS - 0.2, moved


def test_the_vocabulary_s_spelling_index_and_fingerprint_are_outside_the_limit():
    """The longest-match fallback's table of bytes -> ids, and the fingerprint
    (a hash of every token), are the vocabulary's, made once."""
    import random

    rng = random.Random(3)
    tokens = sorted({bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
                     for _ in range(150_000)})
    vocab = Vocabulary(tokens, eos_token_ids=0)
    with limits.limits(time_limit=30) as given:
        started = time.monotonic()
        vocab.ids_for_bytes(tokens[5])
        assert vocab.fingerprint
        spent = time.monotonic() - started
        moved = limits.current().deadline - given.deadline
    assert spent > 0.01 and spent * 0.9 <= moved <= spent + 1e-6, (spent, moved)


# --- no long stretch of work between two deadline checks ------------------------------
# (benchmarks/limit_gaps.py finds them: it records every check of a build)

def _checks(monkeypatch) -> list[tuple[str, int]]:
    """Where each limits.check() of the block is called from: (function, line)."""
    import sys

    calls: list[tuple[str, int]] = []
    real = limits.check

    def recorded() -> None:
        frame = sys._getframe(1)
        calls.append((frame.f_code.co_name, frame.f_lineno))
        real()

    monkeypatch.setattr(limits, "check", recorded)
    return calls


def test_the_end_of_a_subset_construction_checks_the_deadline(monkeypatch):
    """After its last state, a construction of 100,000 states drops its sets
    and fills its table (0.1 s on 300,000 states, 0.8 s once on a loaded
    machine, and the limit fired that late): a chunk at a time, checked."""
    from tokendfa.analysis.regex_compiler import byte_tables_from_regex

    calls = _checks(monkeypatch)
    with limits.limits(time_limit=60):
        transitions, _ = byte_tables_from_regex("ab" * 50_000)
    assert transitions.shape[0] > 100_000
    from collections import Counter

    counts = Counter(calls)
    loop = max(at for at, call in enumerate(calls) if call[0] == "_determinise"
               and counts[call] > 1000)   # the check of each state
    after = calls[loop + 1:]
    # the sets dropped, the table filled, the NFA's lists dropped: each in chunks
    assert sum(name == "release_checked" for name, _ in after) >= 3 * 6, after
    assert sum(name == "_determinise" for name, _ in after) >= 6, after


def test_a_wide_step_of_the_subset_construction_checks_the_deadline(monkeypatch):
    """A state of 20,000 NFA states (the start of a wide alternation that is not
    a literal set) is one step of the construction: it checks every 4,096."""
    from tokendfa.analysis.regex_compiler import byte_tables_from_regex

    calls = _checks(monkeypatch)
    with limits.limits(time_limit=60):
        byte_tables_from_regex("(?:" + "|".join(f"k{i}y?" for i in range(20_000)) + ")")
    assert sum(name == "_parts" for name, _ in calls) >= 20_000 // 4096, calls[:20]


def test_the_lazy_nfa_checks_the_deadline_while_it_stores_a_large_fragment(monkeypatch):
    """The rows of a fragment of ~150,000 states become tuples a chunk at a time
    (0.2 s at once on 500,000), checked between chunks."""
    from tokendfa.analysis.lazydfa import LazyByteDFA

    calls = _checks(monkeypatch)
    with limits.limits(time_limit=60):
        dfa = LazyByteDFA("(?:" + "|".join(f"k{i}y?" for i in range(20_000)) + ")")
        dfa.compile_everything()   # the alternation is a definition, compiled when first reached
    # a check before each chunk of 16,384 rows and one after them, fragment by fragment
    # (the compiled construction checks between its chunks of rows, called from thompson_fragment)
    from tokendfa.analysis.regex_compiler import NATIVE_THOMPSON

    where = "thompson_fragment" if NATIVE_THOMPSON else "_build"
    assert sum(name == where for name, _ in calls) >= 140_000 // 16_384 + 1, sorted(set(calls))[:20]


# --- a call that cannot check the deadline is stopped once nobody waits for it ------


def _deadline_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "tokendfa-deadline-call"]


def _spin_forever():
    while True:
        pass


def _wait_for_no_deadline_threads(seconds: float) -> list:
    stop = time.monotonic() + seconds
    while _deadline_threads() and time.monotonic() < stop:
        time.sleep(0.01)
    return _deadline_threads()


def test_a_call_past_the_deadline_is_stopped_not_left_running():
    """Left running, such a call kept a core and the interpreter lock busy after its
    build had raised: the next builds of a 1.5-million-character pattern overshot a
    0.5 s limit by more each time (0.11, 0.24, 0.37 s; over 1 s on a loaded CI
    machine). A call that never ends on its own is the sharpest case."""
    assert _wait_for_no_deadline_threads(5.0) == []
    with limits.limits(time_limit=0.2):
        started = time.monotonic()
        with pytest.raises(TimeLimitError):
            limits.call_within_deadline(_spin_forever)
        assert time.monotonic() - started < 1.5
    assert _wait_for_no_deadline_threads(2.0) == []


def test_a_call_within_the_deadline_gives_its_result_or_its_error():
    with limits.limits(time_limit=30.0):
        assert limits.call_within_deadline(sorted, [3, 1, 2]) == [1, 2, 3]
        with pytest.raises(ZeroDivisionError):
            limits.call_within_deadline(divmod, 1, 0)
    assert _wait_for_no_deadline_threads(2.0) == []


def test_a_long_pattern_s_parse_stops_with_its_build():
    """Python's parser took ~3 us a character: 9 s more on this pattern, had it run on."""
    vocab = Vocabulary.builtin("qwen2.5")
    vocab.prepare()
    with pytest.raises(TimeLimitError):
        Index.from_regex("a" * 3_000_000, vocab, time_limit=0.3)
    assert _wait_for_no_deadline_threads(2.0) == []
