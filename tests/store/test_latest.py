"""'latest' never picks a run that did not complete, unless asked (issue 12, class 4)."""

import json

import pytest
from conftest import run_cli

from harness.errors import BadInput
from harness.store import open_run


def _run(root, run_id: str, status: str) -> None:
    d = root / run_id
    (d / "logs").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "run_id": run_id, "kind": "idle",
                                                 "status": status, "cells": []}))


def test_latest_skips_runs_that_did_not_complete_and_says_so(tmp_path, capsys):
    _run(tmp_path, "20260101T000001Z-idle-aaaa", "complete")
    _run(tmp_path, "20260101T000002Z-idle-bbbb", "failed")
    _run(tmp_path, "20260101T000003Z-idle-cccc", "interrupted")
    _run(tmp_path, "20260101T000004Z-idle-dddd", "running")  # a killed run, or one in progress
    assert open_run("latest", tmp_path).run_id.endswith("aaaa")
    note = capsys.readouterr().err
    assert "newest complete run" in note and "bbbb (failed)" in note and "cccc (interrupted)" in note
    assert "dddd (running)" in note and "latest-any" in note
    assert open_run("latest-any", tmp_path).run_id.endswith("dddd")  # asked for
    assert open_run("bbbb", tmp_path).record.status == "failed"  # an explicit id still works


def test_latest_without_a_complete_run_is_refused(tmp_path):
    _run(tmp_path, "20260101T000002Z-idle-bbbb", "failed")
    with pytest.raises(BadInput, match="no complete run for 'latest'.*bbbb, is failed"):
        open_run("latest", tmp_path)


def test_report_latest_refuses_a_failed_newest_run(lbench_env, tmp_path):
    from pathlib import Path

    _run(Path(lbench_env["LBENCH_RESULTS_DIR"]), "20260101T000002Z-idle-bbbb", "failed")
    r = run_cli("report", "latest", env=lbench_env)
    assert r.returncode == 2 and "no complete run" in r.stderr and "latest-any" in r.stderr
    assert "Traceback" not in r.stderr


def _typed_run(root, run_id: str, kind: str) -> None:
    _run(root, run_id, "complete")
    manifest = root / run_id / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "kind": kind}))


def test_latest_of_the_kinds_asked_for_passes_over_newer_runs_of_another_kind(tmp_path, capsys):
    _typed_run(tmp_path, "20260101T000001Z-idle-aaaa", "idle")
    _typed_run(tmp_path, "20260101T000002Z-calibrate-bbbb", "calibrate")
    assert open_run("latest", tmp_path).run_id.endswith("bbbb")  # any kind: report, evidence
    assert open_run("latest", tmp_path, kinds={"idle"}).run_id.endswith("aaaa")
    assert "20260101T000002Z-calibrate-bbbb (calibrate)" in capsys.readouterr().err
    with pytest.raises(BadInput, match="no swap run for 'latest'"):
        open_run("latest", tmp_path, kinds={"swap"})


def test_gate_and_compare_after_a_calibrate_run_take_the_newest_idle_run(lbench_env):
    """gate after calibrate once picked the calibrate run as 'latest' and advised --reps."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
    from test_gate_cli import make_idle_run

    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_idle_run(root, reps=12, sd=0.01)
    b = make_idle_run(root, reps=12, sd=0.01, seed=1)
    # a newer, complete calibrate run (what `lbench calibrate` leaves behind)
    import shutil
    from datetime import datetime, timedelta

    later = datetime.strptime(b[:16], "%Y%m%dT%H%M%SZ") + timedelta(seconds=1)
    calib = root / f"{later:%Y%m%dT%H%M%SZ}-calibrate-zzzz"

    shutil.copytree(root / b, calib)
    manifest = json.loads((calib / "manifest.json").read_text())
    (calib / "manifest.json").write_text(json.dumps({**manifest, "kind": "calibrate", "run_id": calib.name}))
    assert sorted(p.name for p in root.iterdir())[-1] == calib.name  # it is the newest
    assert run_cli("baseline", "save", a, "--name", "main", env=lbench_env).returncode == 0
    for args in (("gate", "--baseline", "baseline:main", "--candidate", "latest"), ("compare", a, "latest")):
        r = run_cli(*args, env=lbench_env)
        # one run per side: the gate says inconclusive (exit 3) with what would decide; compare reports
        assert r.returncode in (0, 3), r.stdout + r.stderr
        assert f"B: {b} (1 run)" in r.stdout and calib.name not in r.stdout
        assert f"{calib.name} (calibrate)" in r.stderr  # said on stderr: passed over
    r = run_cli("baseline", "save", "latest", "--name", "next", env=lbench_env)
    assert r.returncode == 0 and f"run {b}" in r.stdout
