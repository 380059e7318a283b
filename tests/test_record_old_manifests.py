"""Manifests of an older lbench (schema 1 and 2) left ``running`` by a killed run (issue 47): they
record no process, so they read ``abandoned`` only where time proves the run over (the manifest names
this host and was last written before this machine booted), else ``running (unverifiable: written by
an older lbench)``; in ``lbench runs``, ``lbench report`` and ``lbench history add``.

The fixtures (tests/fixtures/old_manifests/, README there) are real runs of those lbench versions,
SIGKILLed mid-sweep.  A copy is made to look like a run of this host (its ``host.hostname`` set to this
machine's name) or of another one, and its manifest's time set before or after this machine's boot."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import psutil
import pytest

from harness.record import read_record
from conftest import run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "old_manifests"
CASES = sorted(d for d in FIXTURES.iterdir() if (d / "manifest.json").is_file())
UNVERIFIABLE = "running (unverifiable: written by an older lbench)"


def test_the_fixtures_are_old_killed_runs():
    versions = sorted(json.loads((d / "manifest.json").read_text()).get("schema_version", 1) for d in CASES)
    assert versions == [1, 2], versions
    for d in CASES:
        manifest = json.loads((d / "manifest.json").read_text())
        assert manifest["status"] == "running" and "process" not in manifest
        assert any(json.loads(x)["phase"] == "measure" for x in (d / "samples.jsonl").read_text().splitlines())


def _copy(case: Path, results: Path, *, host: str, before_boot: bool) -> Path:
    run_dir = results / case.name
    shutil.copytree(case, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["host"]["hostname"] = host
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    if before_boot:
        t = psutil.boot_time() - 3600
        os.utime(run_dir / "manifest.json", (t, t))
    return run_dir


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_written_here_before_the_boot_reads_abandoned(lbench_env, case):
    results = Path(lbench_env["LBENCH_RESULTS_DIR"])
    run_dir = _copy(case, results, host=socket.gethostname(), before_boot=True)
    record = read_record(run_dir / "manifest.json")
    assert record.status == "abandoned" and "before this machine last booted" in (record.abandoned or "")
    assert record.unverifiable is None and record.status_shown == "abandoned"
    r = run_cli("runs", env=lbench_env)
    line = next(x for x in r.stdout.splitlines() if run_dir.name in x)
    assert "abandoned" in line and "running" not in line, r.stdout
    r = run_cli("report", run_dir.name, env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(status: abandoned)" in (run_dir / "report.html").read_text()
    r = run_cli("history", "add", str(run_dir), "--archive", str(results.parent / "archive"), env=lbench_env)
    assert r.returncode == 2 and "abandoned" in r.stderr and "before this machine last booted" in r.stderr, r.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_otherwise_it_reads_running_unverifiable(lbench_env, case):
    results = Path(lbench_env["LBENCH_RESULTS_DIR"])
    here = _copy(case, results, host=socket.gethostname(), before_boot=False)  # written since the boot
    record = read_record(here / "manifest.json")
    assert record.status == "running" and record.abandoned is None and record.unfinished
    assert record.status_shown == UNVERIFIABLE
    r = run_cli("runs", env=lbench_env)
    assert UNVERIFIABLE in " ".join(r.stdout.split()), r.stdout
    r = run_cli("report", here.name, env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(status: {UNVERIFIABLE})" in (here / "report.html").read_text()
    r = run_cli("history", "add", str(here), "--archive", str(results.parent / "archive"), env=lbench_env)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and "still running, or was killed" in text and UNVERIFIABLE in text, r.stderr
    # another host's run, even from before this boot: this machine's boot proves nothing about it
    shutil.rmtree(here)
    elsewhere = _copy(case, results, host=socket.gethostname() + "-other", before_boot=True)
    assert read_record(elsewhere / "manifest.json").status_shown == UNVERIFIABLE
