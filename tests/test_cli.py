"""The tokendfa command: build, inspect, check, demo, and one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tokendfa import Index
import json

from tokendfa.cli import DEMO_SCHEMA, main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_build_inspect_check(tmp_path, capsys):
    path = str(tmp_path / "phone.tdfa")
    code, out, _ = run(capsys, "build", "--regex", "[0-9]{3}-[0-9]{4}", "--vocab", "qwen2.5",
                       "-o", path)
    assert code == 0 and "9 states" in out and os.path.exists(path)
    assert Index.load(path).pattern == "[0-9]{3}-[0-9]{4}"

    code, out, _ = run(capsys, "inspect", path)
    assert code == 0
    assert "[0-9]{3}-[0-9]{4}" in out and "qwen2.5 (151,665 tokens" in out
    assert "states       9 (1 final)" in out and f"{os.path.getsize(path):,} bytes" in out

    assert run(capsys, "check", path, "555-1234")[:2] == (0, "accepted: a complete match in 8 tokens\n")
    code, out, _ = run(capsys, "check", path, "555-12")
    assert code == 1 and out.startswith("prefix:")
    code, out, _ = run(capsys, "check", path, "55a-1234")
    assert code == 1 and out.startswith("rejected at token 2 (id 64, b'a') at byte 2")


def test_build_from_a_regex_file(tmp_path, capsys):
    pattern_file = tmp_path / "pattern.txt"
    pattern_file.write_text("(ab)+\n")
    path = str(tmp_path / "ab.tdfa")
    code, out, _ = run(capsys, "build", "--regex-file", str(pattern_file), "--vocab", "sp32k",
                       "-o", path)
    assert code == 0
    assert Index.load(path).pattern == "(ab)+"


@pytest.mark.parametrize("argv, message", [
    (["build", "--regex", "(?=a)b", "-o", "{out}"],
     "unsupported regex construct: lookahead at position 0"),
    (["build", "--regex", "(a)\\1", "-o", "{out}"], "backreference \\1 at position 3"),
    (["build", "--regex", "[0-9", "-o", "{out}"], "invalid regex at position 0: unterminated character set"),
    (["build", "--regex", "[^\\s\\S]", "-o", "{out}"], "matches no string at all"),
    (["build", "--regex", "a", "--vocab", "nope", "-o", "{out}"], "'nope' is neither a built-in"),
    (["build", "--regex-file", "{missing}", "-o", "{out}"], "cannot read regex file"),
    (["inspect", "{missing}"], "cannot read index file"),
    (["build", "--regex", "a$b", "-o", "{out}"], "anchor $ (only allowed at the very end) at position 1"),
    (["build", "--regex", "a", "--vocab", "{junk}", "-o", "{out}"], "junk.tiktoken"),
    (["build", "--schema", "{bad_json}", "-o", "{out}"], "line 1 column"),
    (["build", "--schema", "{unsupported}", "-o", "{out}"], "unsupported keyword 'multipleOf' at /properties/n"),
    (["build", "--regex", "[0-9]{{9}}", "--max-states", "5", "-o", "{out}"],
     "has 10 states, more than the limit of 5"),
])
def test_errors_are_one_line_and_write_nothing(tmp_path, capsys, argv, message):
    junk = tmp_path / "junk.tiktoken"
    junk.write_text("this is not base64 at all\n")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"type": "object",')
    unsupported = tmp_path / "unsupported.json"
    unsupported.write_text('{"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}}')
    values = {"out": str(tmp_path / "out.tdfa"), "missing": str(tmp_path / "missing"),
              "junk": str(junk), "bad_json": str(bad_json), "unsupported": str(unsupported)}
    argv = [part.format(**values) for part in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("tokendfa: error: ") and err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err
    assert not os.path.exists(values["out"])


@pytest.mark.slow
def test_installed_entry_point_runs_the_demo(tmp_path):
    # The script installed beside this interpreter (one on PATH may belong to another install).
    command = shutil.which("tokendfa", path=os.path.dirname(sys.executable))
    argv = [command, "demo", "--samples", "2"] if command else [
        sys.executable, "-m", "tokendfa.cli", "demo", "--samples", "2"]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "accepted" in result.stdout and json.dumps(DEMO_SCHEMA) in result.stdout
    assert result.stdout.count("valid)") == 2 and "INVALID" not in result.stdout


def test_time_limit_stops_a_long_build(tmp_path, capsys):
    out = tmp_path / "slow.tdfa"
    code, _, err = run(capsys, "build", "--regex", "(a|b|c|d)*e[a-z]{40}", "--time-limit", "0.01",
                       "-o", str(out))
    assert code == 2 and "took longer than the time limit of 0.01 s" in err
    assert not out.exists()


def test_build_a_schema_with_a_chosen_free_value_depth(tmp_path, capsys):
    schema = tmp_path / "free.json"
    schema.write_text('{"type": "object", "properties": {"meta": {}}, "additionalProperties": false}')
    deep, shallow = str(tmp_path / "deep.tdfa"), str(tmp_path / "shallow.tdfa")
    code, _, err = run(capsys, "build", "--schema", str(schema), "-o", deep)
    assert code == 0 and 'note: any_depth="auto" took 5 levels' in err
    code, _, err = run(capsys, "build", "--schema", str(schema), "--any-depth", "1", "-o", shallow)
    assert code == 0 and "nest arrays and objects at most 1 level(s) deep" in err and "auto" not in err
    assert Index.load(shallow).metadata["notes"] == [err.strip().removeprefix("note: ")]
    code, out, _ = run(capsys, "inspect", shallow)
    assert code == 0 and "notes        values the schema leaves free" in out

    def accepts(path, text):
        return run(capsys, "check", path, text)[0] == 0

    two_levels = '{"meta":[[1]]}'
    assert accepts(deep, two_levels) and not accepts(shallow, two_levels)
    assert accepts(shallow, '{"meta":[1]}')
    with pytest.raises(SystemExit):
        main(["build", "--schema", str(schema), "--any-depth", "deep", "-o", deep])
    assert "expected a whole number >= 0 or 'auto', not 'deep'" in capsys.readouterr().err


# --- every path is untrusted (issue #32) -------------------------------------------

@pytest.fixture
def no_hang():
    """A FIFO that blocks fails the test instead of hanging it."""
    import signal

    def stop(signum, frame):
        raise TimeoutError("blocked: the command waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _hostile_paths(tmp_path) -> dict:
    from hostile.path_cases import FORGERIES, _index_bytes, device_node, forge

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "integer"}')
    link = tmp_path / "link.json"
    link.symlink_to(schema)
    values = {"fifo": str(fifo), "schema": str(schema), "link": str(link),
              "out": str(tmp_path / "out.tdfa"), "folder": str(tmp_path),
              "device": device_node(str(tmp_path))}
    raw = _index_bytes()
    for name, change in FORGERIES.items():
        path = tmp_path / f"{name}.tdfa"
        path.write_bytes(forge(raw, change))
        values[name] = str(path)
    for name, source in (("source_fifo", str(fifo)), ("source_zero", "/dev/zero")):
        path = tmp_path / f"{name}.tdfa"
        path.write_bytes(forge(raw, lambda h, s=source: h["metadata"]["vocabulary"].update(source=s)))
        values[name] = str(path)
    return values


@pytest.mark.parametrize("argv, message", [
    (["build", "--schema", "{fifo}", "-o", "{out}"], "schema file {fifo}: it is a FIFO, not a regular file"),
    (["build", "--regex-file", "{fifo}", "-o", "{out}"], "regex file {fifo}: it is a FIFO"),
    (["build", "--regex", "a", "--vocab", "{fifo}", "-o", "{out}"], "{fifo}: it is a FIFO"),
    (["build", "--regex", "a", "--vocab", "/dev/zero", "-o", "{out}"],
     "/dev/zero: it is a character device, not a regular file"),
    (["build", "--schema", "/dev/zero", "-o", "{out}"], "/dev/zero: it is a character device"),
    (["build", "--schema", "{folder}", "-o", "{out}"], "it is a directory"),
    (["build", "--schema", "{schema}", "-o", "{schema}"], "it is the input {schema}"),
    (["build", "--schema", "{schema}", "-o", "{link}"], "it is the input {schema}"),
    (["build", "--regex", "a", "-o", "{device}"],
     "refusing to write the index to {device}: it is a character device"),
    (["build", "--regex", "a", "-o", "{fifo}"], "{fifo}: it is a FIFO, and tokendfa writes only"),
    (["inspect", "{fifo}"], "index file {fifo}: it is a FIFO"),
    (["inspect", "{metadata-string-for-mapping}"], "metadata"),
    (["inspect", "{metadata-int-for-list}"], "metadata"),
    (["inspect", "{shape-boolean}"], "shape-boolean.tdfa"),
    (["check", "{shape-boolean}", "ab", "--vocab", "qwen2.5"], "shape-boolean.tdfa"),
    (["check", "{source_fifo}", "ab"], "vocabulary file {fifo}: it is a FIFO"),
    (["check", "{source_zero}", "ab"], "vocabulary file /dev/zero: it is a character device"),
    (["cache", "fill", "--schemas", "{folder}", "--max-bytes", "-5"],
     "argument --max-bytes: expected a whole number >= 0, not '-5'"),
    (["cache", "fill", "--schemas", "{folder}", "--jobs", "0"], "argument --jobs: expected a number"),
    (["cache", "fill", "--schemas", "{folder}", "--cache-dir", "{schema}"],
     "--cache-dir {schema}: not a folder"),
    (["cache", "info", "--cache-dir", "{schema}"], "Not a directory"),
])
def test_untrusted_paths_and_bad_arguments_are_one_line(tmp_path, capsys, no_hang, argv, message):
    values = _hostile_paths(tmp_path)
    if "{device}" in argv and values["device"] is None:
        pytest.skip("no device node can be made here (not root)")
    argv = [part.format(**values) for part in argv]
    schema_before = (tmp_path / "schema.json").read_bytes()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith("tokendfa: error: ") and err.count("\n") == 1, err
    assert message.format(**values) in err
    assert "Traceback" not in err
    # Nothing written, nothing replaced.
    assert not os.path.exists(values["out"])
    assert (tmp_path / "schema.json").read_bytes() == schema_before
    assert (tmp_path / "link.json").is_symlink()
    import stat

    assert stat.S_ISFIFO(os.stat(values["fifo"]).st_mode)
    if values["device"] is not None:  # a private one: never the machine's /dev/null
        assert stat.S_ISCHR(os.stat(values["device"]).st_mode)


def test_inputs_are_read_up_to_a_bound(tmp_path, capsys, monkeypatch):
    import tokendfa.cli as cli

    monkeypatch.setattr(cli, "MAX_TEXT_BYTES", 100)
    schema = tmp_path / "big.json"
    schema.write_text('{"type": "string", "description": "' + "x" * 200 + '"}')
    code, _, err = run(capsys, "build", "--schema", str(schema), "-o", str(tmp_path / "out.tdfa"))
    assert code == 2 and "holds 237 bytes, more than the 100 a schema file may have" in err


def test_check_reads_the_index_once(tmp_path, capsys):
    """The vocabulary path recorded in a real index is followed (a built-in here)."""
    path = str(tmp_path / "ab.tdfa")
    assert run(capsys, "build", "--regex", "(ab)+", "-o", path)[0] == 0
    assert run(capsys, "check", path, "abab")[:2] == (0, "accepted: a complete match in 2 tokens\n")
