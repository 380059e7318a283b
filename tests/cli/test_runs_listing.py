"""`lbench runs`: measured samples apart from warm-ups, duration, the report when rendered."""

from pathlib import Path

from conftest import run_cli

from harness.store import RunWriter


def test_runs_lists_measured_apart_from_warmups_with_duration_and_report(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    w = RunWriter(root, "idle", {"models": [{"label": "tiny-q8"}]})
    for phase, n in (("warmup", 2), ("measure", 3)):
        for i in range(n):
            w.append({"model": "tiny-q8", "setting": "s", "phase": phase, "pause_requested_s": 0.0,
                      "latency_ms": 1.0 + i, "error": None})
    w.append({"model": "tiny-q8", "setting": "s", "phase": "measure", "pause_requested_s": 0.0,
              "latency_ms": None, "error": "timeout"})
    w.finish("complete")
    (w.dir / "report.html").write_text("<html></html>")
    listed = run_cli("runs", env=lbench_env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if w.run_id in line)
    assert "3 samples (+2 warm-up), 1 failed" in row and row.rstrip().endswith("yes")
    assert " s " in row  # a duration in seconds
