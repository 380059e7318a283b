"""lbench gate / compare / baseline / evidence on run directories written by the store."""

import json
import re
import socket
from pathlib import Path

import numpy as np
from conftest import run_cli

from harness.store import RunWriter


def flat(text: str) -> str:
    """Output with its line breaks and indents undone (the summary wraps at the console width)."""
    return " ".join(text.split())


def make_idle_run(root: Path, scale=1.0, reps=8, seed=0, host=None, sd=0.05, slow_pauses=()):
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": 0}, "models": [{"label": "m", "synthetic": True, "path": str(Path.home() / "m.gguf")}],
        "host": {"cpu_model": "TestCPU", "os": "Linux", "hostname": host or socket.gethostname(),
                 "home": str(Path.home())},
        "engine": {"build_number": 11434, "sha256": "ab" * 32}, "cells": []})
    for pause in (0.0, 0.5, 1.5, 2.0):
        for rep in range(reps):
            v = (20.0 if pause < 1 else 60.0) * (scale if not slow_pauses or pause in slow_pauses else 1.0) \
                * rng.lognormal(0, sd)
            w.append({"model": "m", "setting": "keep-alive=default", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1,
                      "server_ms": v - 1, "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    return w.run_id


def test_gate_exit_codes_and_ci_outputs(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_idle_run(root, reps=20, sd=0.01)
    b = make_idle_run(root, reps=20, sd=0.01, seed=1)
    slow = make_idle_run(root, scale=1.3, seed=2, reps=20, sd=0.01)
    noisy = make_idle_run(root, seed=4, reps=6, sd=0.3)
    summary = tmp_path / "summary.md"
    env = {**lbench_env, "GITHUB_STEP_SUMMARY": str(summary)}
    r = run_cli("gate", "--baseline", a, "--candidate", b, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no change" in r.stdout and "one run per side: between-run variance is not in the interval" in flat(r.stdout)
    r = run_cli("gate", "--baseline", a, "--candidate", slow, "--junit", str(tmp_path / "g.xml"),
                "--json", str(tmp_path / "g.json"), env=env)
    assert r.returncode == 1 and "REGRESSION" in r.stderr
    assert re.search(r"B is 1.3x \[[\d.]+, [\d.]+\] slower than A \(p50 latency_ms [\d.]+ vs [\d.]+ ms\): slower;",
                     flat(r.stdout)), r.stdout
    assert json.loads((tmp_path / "g.json").read_text())["status"] == "fail"
    assert "❌ regression" in summary.read_text() and "✅ pass" in summary.read_text()
    assert re.search(r"\| [\d.]+ ms \| [\d.]+ ms \|", summary.read_text())  # centres carry their unit
    # data that cannot rule out a large slowdown is inconclusive (3), never a pass
    r = run_cli("gate", "--baseline", a, "--candidate", noisy, env=env)
    assert r.returncode == 3 and "inconclusive" in r.stdout
    assert run_cli("gate", "--baseline", a, "--candidate", noisy, "--inconclusive-ok", env=env).returncode == 0
    # several runs per side are pooled as runs
    r = run_cli("gate", "--baseline", a, "--baseline", b, "--candidate", slow, "--candidate", slow, env=env)
    assert r.returncode == 1 and "samples in 2 vs 2 runs" in flat(r.stdout)


def test_refused_group_does_not_hide_a_regression(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_idle_run(root, reps=20, sd=0.01)
    few = make_idle_run(root, reps=2, seed=3, sd=0.01)
    r = run_cli("gate", "--baseline", a, "--candidate", few, env=lbench_env)
    assert r.returncode == 2 and "not enough data" in r.stderr
    # +50% at short pauses while the long-pause groups are refused (reps=3): the regression wins
    w = make_idle_run(root, reps=3, sd=0.01, scale=1.5, seed=5, slow_pauses=(0.0, 0.5))
    r = run_cli("gate", "--baseline", a, "--candidate", w, env=lbench_env)
    assert r.returncode == 1 and "REGRESSION" in r.stderr, r.stdout


def test_baseline_save_show_and_use(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_idle_run(root)
    b = make_idle_run(root, seed=1)
    assert run_cli("baseline", "save", a, "--name", "main", env=lbench_env).returncode == 0
    shown = run_cli("baseline", "show", env=lbench_env)
    assert "main" in shown.stdout and a in shown.stdout
    r = run_cli("compare", "baseline:main", b, env=lbench_env)
    assert r.returncode == 0 and "no change" in r.stdout
    r = run_cli("gate", "--baseline", "baseline:nope", "--candidate", b, env=lbench_env)
    assert r.returncode == 2 and "no baseline named 'nope'" in r.stderr


def test_evidence_redacts_home_and_host(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    run = make_idle_run(root, host="build-mac-07.example.lan")
    out = tmp_path / "ev"
    assert run_cli("evidence", run, "-o", str(out), env=lbench_env).returncode == 0
    text = (out / "evidence.md").read_text()
    assert str(Path.home()) not in text and "build-mac-07.example.lan" not in text and socket.gethostname() not in text
    assert "<host>" in text and "<details><summary>Environment</summary>" in text and "```sh" in text
    assert list(out.glob("*.png"))
    assert run_cli("evidence", run, "-o", str(out), "--no-redact", env=lbench_env).returncode == 0
    assert "build-mac-07.example.lan" in (out / "evidence.md").read_text()
