"""`lbench export`: the wake figures as Bencher's BMF and github-action-benchmark's
customSmallerIsBetter JSON, validated against each format's documented schema (the schemas and
their quoted sources: tests/export_schemas.py)."""

import json

import jsonschema
from conftest import run_cli
from export_schemas import BMF_SCHEMA, GAB_SCHEMA

from harness.analysis.persisted import load_analysis
from harness.report.export import export
from harness.store import RunWriter, open_run


def _idle_run(tmp_path, *, step: bool):
    """An idle run written through the real store: 6 repetitions on 6 pauses, a +100% step
    between 1 s and 1.5 s (or a flat curve)."""
    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0}, "host": {"os": "Linux"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": "tiny-q8", "synthetic": True, "preset": "tiny", "bytes": 100, "quant": "Q8_0"}],
        "cells": [{"model": "tiny-q8", "setting": "default", "error": None, "n_samples": 36}],
    })
    for rep in range(6):
        for pause in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0):
            ms = 10.0 + 0.3 * rep + (10.0 if step and pause >= 1.5 else 0.0)
            w.append({"model": "tiny-q8", "setting": "default", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause + 1e-4, "latency_ms": ms,
                      "server_prompt_ms": ms - 1, "server_ms": ms - 1, "overhead_ms": 1.0, "http_status": 200,
                      "error": None})
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_bmf_and_gab_carry_the_wake_model_with_intervals(tmp_path):
    run = _idle_run(tmp_path, step=True)
    wake = load_analysis(run)["wake"][0]
    assert wake["has_step"]  # the figures below are this row's, whatever the model's internals
    bmf = export(run, "bmf")
    jsonschema.validate(bmf, BMF_SCHEMA)
    bench = bmf["lbench-idle/tiny-q8/default"]
    assert bench["wake-penalty-ms"] == {"value": wake["penalty_ms"], "lower_value": wake["penalty_ci"][0],
                                        "upper_value": wake["penalty_ci"][1]}
    assert bench["warm-first-token-ms"]["value"] == wake["warm_median_ms"]
    assert bench["woken-first-token-ms"]["lower_value"] == wake["woken_ci"][0]
    assert bench["wake-threshold-s"] == {"value": wake["first_woken_s"], "lower_value": wake["last_warm_s"],
                                         "upper_value": wake["first_woken_s"]}
    gab = export(run, "github-action-benchmark")
    jsonschema.validate(gab, GAB_SCHEMA)
    by_name = {e["name"]: e for e in gab}
    penalty = by_name["lbench-idle/tiny-q8/default/wake-penalty-ms"]
    assert penalty["unit"] == "ms" and penalty["value"] == wake["penalty_ms"]
    assert penalty["range"].startswith("95% CI [") and run.run_id in penalty["extra"]


def test_no_step_leaves_the_missing_figures_out(tmp_path):
    run = _idle_run(tmp_path, step=False)
    wake = load_analysis(run)["wake"][0]
    assert not wake["has_step"] and wake["penalty_ms"] is None
    bmf = export(run, "bmf")
    jsonschema.validate(bmf, BMF_SCHEMA)
    assert set(bmf["lbench-idle/tiny-q8/default"]) == {"warm-first-token-ms"}
    gab = export(run, "github-action-benchmark")
    jsonschema.validate(gab, GAB_SCHEMA)
    assert [e["name"] for e in gab] == ["lbench-idle/tiny-q8/default/warm-first-token-ms"]


def test_cli_writes_the_file_whole_and_rejects_bad_input(tmp_path):
    run = _idle_run(tmp_path / "results", step=True)
    env = {"LBENCH_RESULTS_DIR": str(tmp_path / "results")}
    r = run_cli("export", run.run_id, "--format", "github-action-benchmark", "-o", str(tmp_path / "gab.json"), env=env)
    assert r.returncode == 0, r.stderr
    jsonschema.validate(json.loads((tmp_path / "gab.json").read_text()), GAB_SCHEMA)
    r = run_cli("export", "latest", env=env)  # bmf on standard output
    assert r.returncode == 0 and "lbench-idle/tiny-q8/default" in json.loads(r.stdout)
    bad = run_cli("export", "latest", "--format", "csv", "-o", str(tmp_path / "x.json"), env=env)
    assert bad.returncode == 2 and "unknown --format 'csv'" in bad.stderr and not (tmp_path / "x.json").exists()
    nodir = run_cli("export", "latest", "-o", str(tmp_path / "missing" / "x.json"), env=env)
    assert nodir.returncode == 2 and "create the folder first" in nodir.stderr
