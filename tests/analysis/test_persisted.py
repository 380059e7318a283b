"""analysis.json: written with the run, read back instead of recomputing, recomputed when stale."""

import json
from pathlib import Path

import pytest
from conftest import run_cli

from harness.analysis import persisted
from harness.analysis.persisted import ANALYSIS_FILE, ANALYSIS_VERSION, load_analysis, write_analysis
from harness.report.render import render_report
from harness.store import RunWriter, open_run


def _idle_run(tmp_path):
    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0}, "host": {"os": "Linux"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": "m", "synthetic": False, "preset": "tiny", "n_params": 10, "bytes": 100,
                    "path": "/m.gguf", "quant": "Q8_0", "arch": "llama", "sha256": "ab" * 32}],
        "cells": [{"model": "m", "setting": "s", "notes": [], "error": None, "env_overrides": {}, "n_samples": 6,
                   "sweep_wall_s": 1.0, "efficiency": 1.0, "argv": ["llama-server", "-m", "/m.gguf"]}]})
    for rep in range(3):
        for pause, ms in ((0.0, 1.0), (1.0, 20.0)):
            w.append({"model": "m", "setting": "s", "phase": "measure", "rep": rep, "pause_requested_s": pause,
                      "pause_actual_s": pause, "latency_ms": ms + rep, "server_prompt_ms": ms - 0.5,
                      "server_ms": ms - 0.5, "overhead_ms": 0.5, "http_status": 200, "error": None})
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def _forbid_recompute(monkeypatch):
    def boom(run):
        raise AssertionError("the analysis was recomputed")

    monkeypatch.setattr(persisted, "analyze", boom)
    monkeypatch.setattr("harness.analysis.idle.analyze_idle", boom)
    monkeypatch.setattr("harness.analysis.swap.summarize_swap", boom)


def test_report_reads_analysis_json_without_recomputing(tmp_path, monkeypatch):
    run = _idle_run(tmp_path)
    write_analysis(run)
    _forbid_recompute(monkeypatch)
    html = render_report(run).read_text()
    assert run.run_id in html and "22.00" in html  # max latency at pause 1.0, from analysis.json


def test_missing_or_older_analysis_is_recomputed_and_saved(tmp_path):
    run = _idle_run(tmp_path)
    assert not (run.dir / ANALYSIS_FILE).exists()
    first = load_analysis(run)
    saved = json.loads((run.dir / ANALYSIS_FILE).read_text())
    assert saved["schema_version"] == ANALYSIS_VERSION and saved["run_id"] == run.run_id
    assert saved["findings"] == first["findings"] and saved["n_measured"] == 6
    saved.update(schema_version=ANALYSIS_VERSION - 1, n_measured=-1)  # written by an older lbench
    (run.dir / ANALYSIS_FILE).write_text(json.dumps(saved))
    assert load_analysis(run)["n_measured"] == 6
    assert json.loads((run.dir / ANALYSIS_FILE).read_text())["schema_version"] == ANALYSIS_VERSION


def test_reanalyze_recomputes_a_current_file(tmp_path):
    run = _idle_run(tmp_path)
    data = write_analysis(run)
    data["n_measured"] = -1
    (run.dir / ANALYSIS_FILE).write_text(json.dumps(data))
    assert load_analysis(run)["n_measured"] == -1  # current: trusted as is
    assert load_analysis(run, reanalyze=True)["n_measured"] == 6


def test_a_running_run_is_analysed_but_not_saved(tmp_path):
    w = RunWriter(tmp_path, "idle", {"models": [], "cells": []})
    w.append({"model": "m", "setting": "s", "phase": "measure", "pause_requested_s": 0.0, "latency_ms": 1.0})
    w._journals["samples"].flush()
    run = open_run(w.dir, tmp_path)
    assert load_analysis(run)["n_measured"] == 1
    assert not (w.dir / ANALYSIS_FILE).exists()


@pytest.mark.engine
def test_tiny_idle_run_writes_analysis_json_and_report_reuses_it(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.05", "--reps", "2", "--warmup", "1", "--no-report",
                env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    analysis = json.loads((run_dir / ANALYSIS_FILE).read_text())
    assert analysis["schema_version"] == ANALYSIS_VERSION and analysis["kind"] == "idle"
    assert analysis["run_status"] == "complete" and analysis["n_measured"] == 4
    printed = " ".join(r.stdout.split())  # the CLI wraps long sentences between words
    assert analysis["headline"]
    for sentence in analysis["headline"]:  # the CLI printed the answer analysis.json holds
        assert " ".join(sentence.split()) in printed
    before = (run_dir / ANALYSIS_FILE).stat().st_mtime_ns
    again = run_cli("report", run_dir.name, env=engine_env)
    assert again.returncode == 0, again.stderr
    assert (run_dir / ANALYSIS_FILE).stat().st_mtime_ns == before  # reused, not rewritten
    assert run_dir.name in (run_dir / "report.html").read_text()
