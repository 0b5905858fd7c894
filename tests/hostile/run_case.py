"""Run one hostile case in this process and print its outcome as one JSON line.

``python run_case.py NAME lib``: the library's whole build (``Index.from_regex`` /
``from_schema`` with ``lazy=False`` and ``time_limit``, ``Index.load``,
``Vocabulary.from_spec``); ``python run_case.py NAME lazy``: the library's
default, a lazy index, and its first mask;
``python run_case.py NAME cli``: ``tokendfa build``/``inspect`` through
``tokendfa.cli.main``, with stderr captured. A scenario (``tests/hostile/path_cases.py``)
builds its own folder and runs its own arguments and library step. The
caller sets the limits of the process (address space, CPU time, wall clock).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hostile.cases import ALL_CASES, TIME_LIMIT  # noqa: E402


def main() -> None:
    name, mode = sys.argv[1], sys.argv[2]
    case = next(c for c in ALL_CASES if c.name == name)
    if case.kind == "scenario":
        print(json.dumps(run_scenario(case, mode)))
        return
    payload = case.make()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "input")
        with open(path, "wb" if isinstance(payload, bytes) else "w") as handle:
            handle.write(payload)
        started = time.perf_counter()
        result = run_cli(case, path, folder) if mode == "cli" else run_library(case, path, lazy=mode == "lazy")
        result["seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(result))


def _vocabulary(spec: str):
    from tokendfa import Vocabulary

    if spec == "toy":
        from conftest import toy_vocabulary

        return toy_vocabulary()
    return Vocabulary.from_spec(spec)


def run_library(case, path: str, lazy: bool) -> dict:
    from tokendfa import Index, TokenDFAError, Vocabulary

    # build_seconds: the build alone (vocabulary read before); less excluded_seconds, what
    # the time limit bounds
    timing: dict = {}
    try:
        if case.kind in ("regex", "schema"):
            build = Index.from_regex if case.kind == "regex" else Index.from_schema
            with open(path) as handle:
                text = handle.read()
            vocabulary = _vocabulary(case.vocab)
            from tokendfa.analysis.limits import excluded_seconds

            excluded = excluded_seconds()
            started = time.perf_counter()
            try:
                index = build(text, vocabulary, time_limit=TIME_LIMIT, lazy=lazy)
                if lazy:
                    index.get_mask(index.initial_state)
            finally:
                timing["build_seconds"] = round(time.perf_counter() - started, 3)
                # the vocabulary's tables and encoder, made on first use: the process's
                # work, outside the limit (tokendfa.analysis.limits.excluded)
                timing["excluded_seconds"] = round(excluded_seconds() - excluded, 3)
        elif case.kind == "index_file":
            Index.load(path)
        else:
            Vocabulary.from_spec(path)
        return {"outcome": "ok", **timing}
    except TokenDFAError as exc:
        return {"outcome": type(exc).__name__, "message": str(exc)[:300], **timing}


def _state(path: str):
    """What a path is now: its kind, and a regular file's bytes."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as handle:
            return info.st_mode, handle.read()
    return info.st_mode, os.path.realpath(path)


def run_scenario(case, mode: str) -> dict:
    from tokendfa import TokenDFAError

    with tempfile.TemporaryDirectory() as folder:
        scenario = case.make(folder)
        started = time.perf_counter()
        if mode != "cli":
            try:
                if scenario.library is not None:
                    scenario.library()
                result = {"outcome": "ok"}
            except TokenDFAError as exc:
                result = {"outcome": type(exc).__name__, "message": str(exc)[:300]}
        elif scenario.cli is not None:
            result = scenario.cli()
        else:
            watched = [p for p in (*scenario.keep, scenario.output) if p]
            before = {p: _state(p) for p in watched}
            result = _call_cli(scenario.argv)
            result["wrote"] = any(_state(p) != before[p] for p in watched)
            if scenario.refused and result["status"] == 0:
                result["status"] = "0: accepted what it must refuse"
        result["seconds"] = round(time.perf_counter() - started, 3)
        # a read-only bind mount or chmod may be left: let the folder go
        for root, dirs, _ in os.walk(folder):
            for name in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(root, name), 0o755)
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o755)
    return result


def _call_cli(argv: list[str]) -> dict:
    from tokendfa.cli import main as cli

    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:
            status = cli(argv)
        except SystemExit as exc:
            status = exc.code
        except BaseException:  # a traceback: the test reports it
            import traceback

            status, stderr = "crash", io.StringIO(traceback.format_exc())
    return {"status": status, "stderr": stderr.getvalue()[-2000:]}


def run_cli(case, path: str, folder: str) -> dict:
    from tokendfa.cli import main as cli

    output = os.path.join(folder, "out.tdfa")
    if case.kind in ("regex", "schema"):
        flag = "--regex-file" if case.kind == "regex" else "--schema"
        vocab = case.vocab if case.vocab != "toy" else "qwen2.5"
        argv = ["build", flag, path, "--vocab", vocab, "-o", output, "--time-limit", str(TIME_LIMIT)]
    elif case.kind == "index_file":
        argv = ["inspect", path]
    else:
        argv = ["build", "--regex", "a+", "--vocab", path, "-o", output]
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:
            status = cli(argv)
        except SystemExit as exc:
            status = exc.code
        except BaseException as exc:  # a traceback: the test reports it
            import traceback

            status, stderr = "crash", io.StringIO(traceback.format_exc())
    return {"status": status, "stderr": stderr.getvalue()[-2000:],
            "wrote": os.path.exists(output)}


if __name__ == "__main__":
    main()
