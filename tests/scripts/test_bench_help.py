"""scripts/bench_help.py runs and prints a figure per command (its numbers are a benchmark, not checked)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_help_prints_floor_and_rows():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_help.py"), "-n", "1", "--only", "runs"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert 'import typer, rich' in out
    ratio_to_bare = [line for line in out.splitlines() if line.startswith("lbench --help / the bare")]
    assert len(ratio_to_bare) == 1 and "goal <= 2.5" in ratio_to_bare[0]  # docs/architecture.md's start-up goal
    rows = [line for line in out.splitlines() if line.startswith("lbench ") and line not in ratio_to_bare]
    assert [r.split("  ")[0].strip() for r in rows] == ["lbench --help", "lbench runs --help"]
    for row in rows:
        ms, ratio = row.split()[-3:-1]
        assert float(ms) > 0 and float(ratio) > 0


def test_bench_help_rejects_bad_n():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_help.py"), "-n", "0"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "-n must be >= 1" in proc.stderr
