"""Damaged results are read or refused clearly (issue 12, class 6): a truncated Parquet file falls
back to the journal with a note; a killed swap run still gets its report."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, wait_gone

from harness.errors import BadInput
from harness.store import RunWriter, open_run


def _finished_run(root: Path) -> RunWriter:
    w = RunWriter(root, "idle", {"config": {}})
    for i in range(50):
        w.append({"phase": "measure", "rep": i, "latency_ms": 1.0 + i, "error": None})
    w.finish("complete")
    return w


def test_truncated_parquet_falls_back_to_the_journal_with_a_note(tmp_path, capsys):
    w = _finished_run(tmp_path)
    parquet = w.dir / "samples.parquet"
    parquet.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])
    run = open_run(w.run_id, tmp_path)
    frame = run.table("samples")
    assert list(frame["latency_ms"]) == [1.0 + i for i in range(50)]
    assert run.notes and "samples.parquet" in run.notes[0] and "journal" in run.notes[0]
    assert "read from the journal" in capsys.readouterr().err


def test_damaged_parquet_without_a_journal_is_refused_in_one_line(tmp_path):
    w = _finished_run(tmp_path)
    (w.dir / "samples.parquet").write_bytes(b"PAR1 not really")
    (w.dir / "samples.jsonl").unlink()
    with pytest.raises(BadInput, match="damaged .* no journal"):
        open_run(w.run_id, tmp_path).table("samples")


@pytest.mark.engine
def test_report_of_a_run_with_a_truncated_parquet(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.05", "--reps", "3", "--warmup", "1", "--self-check", "0",
                "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr
    run_dir = next(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    parquet = run_dir / "samples.parquet"
    parquet.write_bytes(parquet.read_bytes()[:100])
    r = run_cli("report", run_dir.name, env=engine_env)
    assert r.returncode == 0 and "read from the journal" in r.stderr, r.stderr
    html = (run_dir / "report.html").read_text()
    assert "Damaged file:" in html and "6 measured samples" in html


@pytest.mark.engine
def test_report_of_a_killed_swap_run(engine_env):
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    cli = subprocess.Popen([sys.executable, "-m", "harness", "swap", "-m", "tiny-q8", "-m", "tiny-q4",
                            "--requests", "2000", "--no-report"], cwd=REPO, env={**os.environ, **engine_env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        give_up = time.monotonic() + 300
        while time.monotonic() < give_up and cli.poll() is None:
            journals = list(results.glob("*/requests.jsonl"))
            if journals and len(journals[0].read_text().splitlines()) >= 6:
                break
            time.sleep(0.1)
        assert cli.poll() is None, "the storm ended before it could be killed"
        os.kill(cli.pid, signal.SIGKILL)  # no sampler block, no Parquet, status still "running"
        cli.wait()
    finally:
        if cli.poll() is None:
            cli.kill()
    run_dir = next(results.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "running" and "sampler" not in manifest
    router_pid = manifest["router"]["pid"]
    assert not wait_gone([router_pid])  # the watchdog ends the router
    r = run_cli("report", run_dir.name, env=engine_env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    html = (run_dir / "report.html").read_text()
    assert "Incomplete run" in html and "sampler was stopped" in html
