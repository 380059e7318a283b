"""lbench gate / compare / baseline / evidence on run directories written by the store."""

import json
import re
import socket
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
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


def _runs(root, n, **kw):
    seed = kw.pop("seed", 0)
    return [make_idle_run(root, seed=seed + i, **kw) for i in range(n)]


def _side(flag, ids):
    return [x for rid in ids for x in (flag, rid)]


def test_gate_exit_codes_and_ci_outputs(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = _runs(root, 3, reps=20, sd=0.01)
    b = _runs(root, 3, reps=20, sd=0.01, seed=10)
    slow = _runs(root, 3, scale=1.3, seed=20, reps=20, sd=0.01)
    noisy = _runs(root, 2, seed=30, reps=6, sd=0.3)
    summary = tmp_path / "summary.md"
    env = {**lbench_env, "GITHUB_STEP_SUMMARY": str(summary)}
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", b), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no change" in r.stdout and "Welch t on per-run log medians" in flat(r.stdout)
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", slow), "--junit", str(tmp_path / "g.xml"),
                "--json", str(tmp_path / "g.json"), env=env)
    assert r.returncode == 1 and "REGRESSION" in r.stderr
    assert re.search(r"warm: B/A 1.3\d \[[\d.]+, [\d.]+\], B slower by 3\d% \(p50 latency_ms [\d.]+ vs [\d.]+ ms\): "
                     r"slower;", flat(r.stdout)), r.stdout
    data = json.loads((tmp_path / "g.json").read_text())  # strict JSON: no NaN or Infinity
    assert data["status"] == "fail" and data["failures"] == ["m · keep-alive=default · warm · latency_ms"]
    assert "❌ regression" in summary.read_text() and "✅ pass" in summary.read_text()
    assert re.search(r"\| [\d.]+ ms \| [\d.]+ ms \|", summary.read_text())  # centres carry their unit
    # data that cannot rule out a large slowdown is inconclusive (3), never a pass, and says what would decide it
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", noisy), env=env)
    assert r.returncode == 3 and "inconclusive" in r.stdout and "next step:" in r.stderr
    assert "runs per side would detect +10%" in flat(r.stderr) and "**Next step**" in summary.read_text()
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", noisy), "--inconclusive-ok", env=env)
    assert r.returncode == 0 and "not evidence of no slowdown" in flat(r.stderr)


def test_one_run_per_side_is_inconclusive_unless_a_history_gives_the_spread(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = make_idle_run(root, reps=20, sd=0.01), make_idle_run(root, reps=20, sd=0.01, seed=1)
    slow = make_idle_run(root, scale=1.3, seed=2, reps=20, sd=0.01)
    for other in (b, slow):
        r = run_cli("gate", "--baseline", a, "--candidate", other, env=lbench_env)
        assert r.returncode == 3 and "needs >= 2 runs per side" in flat(r.stderr), r.stdout + r.stderr
    history = _runs(root, 4, reps=20, sd=0.01, seed=40)
    r = run_cli("gate", "--baseline", a, "--candidate", slow, *_side("--history", history), env=lbench_env)
    assert r.returncode == 1 and "pooled t with the baseline history" in flat(r.stdout), r.stdout + r.stderr
    r = run_cli("gate", "--baseline", a, "--candidate", b, *_side("--history", history), env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_gate_on_pauses_and_bad_gate_on(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = _runs(root, 3, reps=10, sd=0.01)
    b = _runs(root, 3, reps=10, sd=0.01, seed=10, scale=1.5, slow_pauses=(2.0,))
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", b), "--gate-on", "0,0.5", env=lbench_env)
    assert r.returncode == 0 and "votes on pauses 0, 0.5 s" in flat(r.stdout), r.stdout + r.stderr
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", b), "--gate-on", "2", env=lbench_env)
    assert r.returncode == 1, r.stdout
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", b), "--gate-on", "9", env=lbench_env)
    assert r.returncode == 2 and "pauses the baseline does not have" in r.stderr


def test_gate_plan_sizes_the_design_from_runs(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    runs = _runs(root, 5, reps=10, sd=0.05)
    r = run_cli("gate-plan", *_side("--runs", runs), "--json", str(tmp_path / "plan.json"), env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    (group,) = plan["groups"]
    assert group["runs"] == 5 and group["sd_ci"][0] < group["sd_run"] < group["sd_ci"][1]
    assert "runs per side, slower rule margin (default)" in flat(r.stdout)
    r = run_cli("gate-plan", "--sd", "0.043", env=lbench_env)
    assert r.returncode == 0 and "slower rule zero: 6" in flat(r.stdout), r.stdout  # z gives 5; t needs one more
    r = run_cli("gate-plan", "--runs", runs[0], env=lbench_env)
    assert r.returncode == 2 and "at least 2 runs" in r.stderr


def test_refused_group_does_not_hide_a_regression(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = _runs(root, 2, reps=20, sd=0.01)
    few = _runs(root, 2, reps=1, seed=3, sd=0.01)
    r = run_cli("gate", *_side("--baseline", a), *_side("--candidate", few), env=lbench_env)
    assert r.returncode == 2 and "not enough data" in r.stderr
    # that a regression in one gating group wins over a refused one: test_compare_gate.test_decide_exit_codes


def test_baseline_save_show_and_use(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_idle_run(root)
    b = make_idle_run(root, seed=1)
    assert run_cli("baseline", "save", a, "--name", "main", env=lbench_env).returncode == 0
    shown = run_cli("baseline", "show", env=lbench_env)
    assert "main" in shown.stdout and a in shown.stdout
    r = run_cli("compare", "baseline:main", b, env=lbench_env)
    assert r.returncode == 0 and "inconclusive" in r.stdout  # one run per side: no between-run spread
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


@pytest.mark.parametrize("args,said", [
    (["--budget", "5s", "--pauses", "0,1", "--reps", "8"], "shorter than one round's pauses"),
    (["--budget", "ten minutes"], "--budget must be a duration"),
    (["--margin", "0"], "the margin must be a number > 0"),
    (["--margin", "0=-0.1"], "the margin must be a number > 0"),
    (["--margin", "7=0.1", "--pauses", "0,1"], "--margin names pauses the spec does not have"),
    (["--arms", "a,c"], "unknown arm 'c'"),
    (["--arms", "b,aa"], "--arms must name a and b"),
    (["--min-rounds", "1"], "--min-rounds"),
    (["--spending", "bonferroni"], "--spending must be one of obf, pocock"),
    (["--gate-on", "0,9", "--pauses", "0,1"], "--gate-on names pauses the spec does not have"),
])
def test_ab_refuses_bad_designs_before_any_run(lbench_env, args, said):
    r = run_cli("ab", "-m", "tiny-q8", *args, env=lbench_env)
    assert r.returncode == 2 and said in flat(r.stderr), r.stderr[-2000:]
    results = Path(lbench_env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())  # nothing written


@pytest.mark.engine
def test_a_short_gate_job_on_the_real_engine_decides_and_keeps_every_run(engine_env, tmp_path):
    """Three rounds of A, B and A/A on real llama-server runs (tiny-q8): the job is a run of its own with
    its rounds and looks; its JSON names every run; evidence on it writes the rounds and a rerun script."""
    out = tmp_path / "gate.json"
    r = run_cli("ab", "-m", "tiny-q8", "--pauses", "0", "--reps", "4", "--min-rounds", "3", "--max-rounds", "3",
                "--budget", "30m", "--json", str(out), "--b-arg", "--threads", "--b-arg", "1", env=engine_env)
    assert r.returncode in (0, 1, 3, 4), r.stderr[-3000:]
    text = flat(r.stdout + r.stderr)
    assert "look after round 3:" in text and re.search(r"ab: (pass|fail|inconclusive|unproven) \(run \S+-ab-", text)
    data = json.loads(out.read_text())
    assert data["status"] in ("pass", "fail", "inconclusive", "unproven") and data["rounds"] == 3
    assert {c["contrast"] for c in data["contrasts"]} == {"B vs A", "A/A"}
    assert {arm: len(ids) for arm, ids in data["run_ids"].items()} == {"a": 3, "b": 3, "aa": 3}
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    (job_dir,) = results.glob("*-ab-*")
    rounds = pd.read_parquet(job_dir / "rounds.parquet")
    assert len(rounds) == 9 and sorted(rounds["arm"].unique()) == ["a", "aa", "b"]
    assert all(sorted(g["position"]) == [1, 2, 3] for _, g in rounds.groupby("round"))
    for run_id in rounds["idle_run_id"]:  # every idle run names the job, its round and arm
        manifest = json.loads((results / run_id / "manifest.json").read_text())
        assert manifest["ab"]["job_id"] == job_dir.name
    ev = tmp_path / "ev"
    assert run_cli("evidence", job_dir.name, "-o", str(ev), env=engine_env).returncode == 0
    md = (ev / "evidence.md").read_text()
    assert "A/A" in md and "| group | round | order |" in md and list(ev.glob("rerun-*.sh"))
    assert subprocess.run(["bash", "-n", str(next(ev.glob("rerun-*.sh")))]).returncode == 0
