"""Baselines: kept beside the results, 'latest' of the kind asked for, the old cache location
still read, and a run never compared with itself."""

import json

from conftest import run_cli

from harness import baselines
from harness.store import open_run


def _run(root, run_id: str, kind: str) -> None:
    d = root / run_id
    (d / "logs").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "run_id": run_id, "kind": kind,
                                                 "status": "complete", "cells": [], "host": {}, "engine": {}}))


def _env(tmp_path):
    return {"LBENCH_CACHE_DIR": str(tmp_path / "cache"), "LBENCH_RESULTS_DIR": str(tmp_path / "results")}


def test_save_latest_keeps_the_newest_idle_run_beside_the_results(tmp_path):
    results = tmp_path / "results"
    _run(results, "20260101T000001Z-idle-aaaa", "idle")
    _run(results, "20260101T000002Z-swap-bbbb", "swap")  # newer, but not idle
    r = run_cli("baseline", "save", "latest", "--name", "main", env=_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "run 20260101T000001Z-idle-aaaa" in r.stdout
    meta = json.loads((results / ".baselines" / "main" / "baseline.json").read_text())
    assert meta["run_id"] == "20260101T000001Z-idle-aaaa"
    assert not (tmp_path / "cache" / "baselines").exists()
    r = run_cli("baseline", "save", "latest", "--kind", "swap", "--name", "storm", env=_env(tmp_path))
    assert r.returncode == 0 and "20260101T000002Z-swap-bbbb" in r.stdout
    shown = run_cli("baseline", "show", env=_env(tmp_path)).stdout
    assert "main: run 20260101T000001Z-idle-aaaa" in shown and "storm: run 20260101T000002Z-swap-bbbb" in shown
    # the baselines folder is not a run: 'latest' and the run list never see it
    assert open_run("latest", results).run_id == "20260101T000002Z-swap-bbbb"


def test_a_baseline_in_the_old_cache_location_is_still_found(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path / "cache"))
    old = tmp_path / "cache" / "baselines" / "main"
    _run(old, "20260101T000001Z-idle-aaaa", "idle")
    (old / "baseline.json").write_text(json.dumps({"name": "main", "run_id": "20260101T000001Z-idle-aaaa",
                                                   "saved_at": "x", "fingerprint": {"id": "f"}}))
    results = tmp_path / "results"
    assert baselines.resolve_run("baseline:main", results).run_id == "20260101T000001Z-idle-aaaa"
    (listed,) = baselines.list_baselines(results)
    assert listed["old_location"] is True


def test_gate_refuses_a_run_against_itself(tmp_path):
    results = tmp_path / "results"
    _run(results, "20260101T000001Z-idle-aaaa", "idle")
    assert run_cli("baseline", "save", "latest", "--name", "main", env=_env(tmp_path)).returncode == 0
    for command in (["gate", "--baseline", "baseline:main", "--candidate", "latest"],
                    ["compare", "baseline:main", "latest"]):
        r = run_cli(*command, env=_env(tmp_path))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "both hold run 20260101T000001Z-idle-aaaa" in r.stderr
