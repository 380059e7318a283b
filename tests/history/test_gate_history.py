"""lbench gate --baseline history:idle_warm_p50 over an archive of the suite's real runs (a real
llama-server idle sweep, copied into a series by ``clone_run``: test input, never a figure)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import run_cli
from history_runs import clone_run, real_runs, trusted  # noqa: F401 (a fixture)

from harness.history.catalog import add_runs

pytestmark = pytest.mark.engine

SCALES = (0.98, 1.01, 1.0, 1.03, 0.99, 1.02)  # run-to-run levels of the copies (a small between-run spread)


def test_the_gate_against_a_real_history(real_runs, tmp_path, lbench_env):
    made = tmp_path / "made"
    made.mkdir()
    copies = [clone_run(real_runs["idle"], made, n, build=11434, scale=s) for n, s in enumerate(SCALES)]
    archive = tmp_path / "archive"
    added, refused = add_runs(trusted(archive), copies)
    assert refused == [] and len(added) == len(SCALES)
    ids = [c.name for c in copies]
    # known answer: the candidate is a copy of an archived run (left out of the window): not slower
    cand = tmp_path / "cand" / ids[2]
    shutil.copytree(next(archive.glob(f"*/{ids[2]}")), cand)
    r = run_cli("gate", "--baseline", "history:idle_warm_p50", "--candidate", str(cand), "--archive", str(archive),
                "--build", "11434", "--json", str(tmp_path / "same.json"), env=lbench_env)
    assert r.returncode in (0, 3), r.stdout + r.stderr
    data = json.loads((tmp_path / "same.json").read_text())
    assert data["baseline"] == [i for i in ids if i != ids[2]] and data["status"] != "fail"
    warm = next(g for g in data["groups"] if g["regime"] == "warm" and g["metric"] == "latency_ms")
    assert warm["verdict"] != "slower" and "pooled t over the history window" in warm["unit"]
    # a real run made 40% slower, on a newer build: the default baseline build is the newest before it
    slow = [clone_run(real_runs["idle"], tmp_path / "slow", 100 + n, build=11500, scale=1.4 * s)
            for n, s in enumerate((1.0, 1.01))]
    r = run_cli("gate", "--baseline", "history:idle_warm_p50", *[x for d in slow for x in ("--candidate", str(d))],
                "--archive", str(archive), env=lbench_env)
    assert r.returncode == 1 and "REGRESSION" in r.stderr, r.stdout + r.stderr
    assert "on build 11434 (the newest build before the candidate's 11500)" in " ".join(r.stdout.split())


def test_a_swap_history_names_its_model_and_gates(real_runs, tmp_path, lbench_env):
    made = tmp_path / "made"
    made.mkdir()
    copies = [clone_run(real_runs["swap"], made, n, build=11434, scale=s) for n, s in enumerate(SCALES[:4])]
    archive = tmp_path / "archive"
    assert add_runs(trusted(archive), copies)[1] == []
    cand = clone_run(real_runs["swap"], tmp_path / "cand", 50, build=11500, scale=1.0)
    base = ("gate", "--baseline", "history:swap_load_ms", "--candidate", str(cand), "--archive", str(archive))
    r = run_cli(*base, env=lbench_env)  # two models, each its own swap_load_ms series
    assert r.returncode == 2 and "matches 2 series" in r.stderr and "--model" in r.stderr, r.stdout + r.stderr
    r = run_cli(*base, "--model", "tiny-q8", "--json", str(tmp_path / "g.json"), env=lbench_env)
    data = json.loads((tmp_path / "g.json").read_text())  # a verdict was reached and written
    assert data["baseline"] == [c.name for c in copies] and data["info"]["history_baseline"]["model"] == "tiny-q8"
    # round-robin with one model resident never serves a request resident: that group is refused
    # for too few samples (exit 2, the gate's own rule); the loads' group is judged, never slower
    loads = next(g for g in data["groups"] if g["regime"] == "waited for a load")
    assert loads["verdict"] != "slower" and loads["n_runs_a"] == 4 and "history window" in loads["unit"]
    assert data["status"] != "fail" and r.returncode in (0, 2, 3), r.stdout + r.stderr
