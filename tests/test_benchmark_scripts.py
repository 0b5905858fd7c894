"""The benchmark scripts' argument checks: a mistake is refused before a long
run starts, not found when its report is lost at the end."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_maskbench_refuses_a_report_name_its_raw_results_would_overwrite(tmp_path):
    # The raw results go next to the report as .json: with --out run.json they
    # were written over the report after the run (13 minutes).
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_maskbench.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "ending in .md" in done.stderr and str(tmp_path / "run.md") in done.stderr
    assert not out.exists()


def test_build_report_written_elsewhere_keeps_its_plot_beside_it():
    # A run with --out in a scratch folder wrote its plot over the committed
    # benchmarks/build_time_vs_vocab.png (the mistral-sp32k run over the qwen plot).
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_build
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert bench_build.parse_args(["--out", "/tmp/scratch/sp32k.md"]).plot == Path("/tmp/scratch/sp32k.png")
    assert bench_build.parse_args([]).plot == bench_build.DEFAULT_PLOT
    assert bench_build.parse_args(["--out", "/tmp/a.md", "--plot", "/tmp/b.png"]).plot == Path("/tmp/b.png")


def test_a_childs_answer_or_why_there_is_none():
    # The dev scripts (lazy_step_faults.py, lazy_step_sampler.py, ...) each
    # run a schema in a child through answer_in_child: what the child
    # answers comes back as JSON carries it; an exception, a death or a hang
    # is a ChildFailed that says which, in the seconds asked, not a wait.
    import os
    import time

    sys.path.insert(0, str(BENCHMARKS.parent))
    from benchmarks.support.isolation import ChildFailed, answer_in_child

    assert answer_in_child(lambda: [(1, 2), {"a": None}], 30) == [[1, 2], {"a": None}]
    assert answer_in_child(os.getpid, 30) != os.getpid()  # computed in another process
    for work, why in [(lambda: 1 / 0, "ZeroDivisionError"), (lambda: os._exit(3), "exit code 3"),
                      (lambda: time.sleep(60), "no result within 1 s")]:
        started = time.monotonic()
        with pytest.raises(ChildFailed, match=why):
            answer_in_child(work, 1)
        assert time.monotonic() - started < 20
