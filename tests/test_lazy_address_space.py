"""Lazy indexes under an address-space limit: each reserves only a few MB,
and an allocation that fails anyway is a tokendfa error, not a bare OSError.

Each case runs in a child process under ``RLIMIT_AS`` (what ``ulimit -v``
and many container runtimes set): a reservation counts whole there, touched
or not."""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import json, resource, sys
    from conftest import toy_vocabulary
    from tokendfa import Index, TokenDFAError
    limit = int(sys.argv[1]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    vocab, held = toy_vocabulary(), []
    try:
        for i in range(int(sys.argv[2])):
            index = Index.from_regex(f"(ab|c){{1,{i + 2}}}x?", vocab)
            index.get_mask(index.advance(index.initial_state, 0))
            held.append(index)
        print(json.dumps({"held": len(held)}))
    except TokenDFAError as exc:
        print(json.dumps({"held": len(held), "error": type(exc).__name__, "message": str(exc)}))
    except BaseException as exc:
        print(json.dumps({"held": len(held), "foreign": type(exc).__name__, "message": str(exc)}))
""")


def _run(limit_mb: int, count: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(limit_mb), str(count)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.cache
def _baseline_mb() -> int:
    """The address space of a child that has imported tokendfa and made one index."""
    code = ("from conftest import toy_vocabulary\nfrom tokendfa import Index\n"
            "i = Index.from_regex('a', toy_vocabulary()); i.get_mask(i.initial_state)\n"
            "print(int(open('/proc/self/statm').read().split()[0]) * 4096 >> 20)")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env=env, timeout=300).stdout.split()[-1])


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS") or sys.platform != "linux",
                    reason="address-space limits as Linux sets them")
def test_the_vllm_memo_of_64_lazy_indexes_fits_under_a_limit():
    # 64 MB reserved per index exhausted 2 GiB at the 28th; the limit here is
    # the process's own size plus 512 MB, so 64 indexes reserving even 8 MB
    # each would fail
    limit = _baseline_mb() + 512
    result = _run(limit, 64)
    assert result == {"held": 64}, result


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS") or sys.platform != "linux",
                    reason="address-space limits as Linux sets them")
def test_running_out_of_address_space_is_a_tokendfa_error():
    result = _run(_baseline_mb() + 48, 400)
    assert "foreign" not in result, result
    assert result.get("error") == "BuildLimitError", result
    assert 0 < result["held"] < 400


_GROWING = textwrap.dedent("""
    import json, resource
    from tokendfa import TokenDFAError
    from tokendfa.analysis.lazydfa import LazyByteDFA
    dfa = LazyByteDFA("(a|b)*a(a|b){12}", max_states=10**7)
    mapped = int(open("/proc/self/statm").read().split()[0]) * 4096
    limit = mapped + (40 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        for _ in range(16):  # 4 MB, then 8, 16, 32, 64 MB: past the limit
            dfa._grow()
        print(json.dumps({"rows": len(dfa.table)}))
    except TokenDFAError as exc:
        state = dfa.initial
        for byte in b"ba" * 8 + b"a" * 13:  # the automaton goes on with the table it has
            state = dfa.step(state, byte)
        print(json.dumps({"error": type(exc).__name__, "message": str(exc), "rows": len(dfa.table),
                          "final": dfa.is_final(state)}))
    except BaseException as exc:
        print(json.dumps({"foreign": type(exc).__name__, "message": str(exc)}))
""")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS") or sys.platform != "linux",
                    reason="address-space limits as Linux sets them")
@pytest.mark.parametrize("native", ["1", "0"])
def test_a_table_that_cannot_grow_is_a_build_limit_error(native):
    """The table grows (in place with the compiled core, by a copy without)
    until the address-space limit refuses: a BuildLimitError that says so,
    and the automaton keeps the rows it had."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", TOKENDFA_NATIVE=native)
    done = subprocess.run([sys.executable, "-c", _GROWING], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.get("error") == "BuildLimitError", result
    assert "could not be allocated" in result["message"]
    assert 4096 <= result["rows"] < 65536 and result["final"] is True
