"""The benchmark scripts' argument checks: a mistake is refused before a long
run starts, not found when its report is lost at the end."""

import subprocess
import sys
from pathlib import Path

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
