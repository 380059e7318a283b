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
    assert open_run("bbbb", tmp_path).manifest["status"] == "failed"  # an explicit id still works


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
