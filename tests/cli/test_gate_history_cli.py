"""lbench gate --baseline history:<series> on constructed archives of real-format run
directories (tests/conftest.py make_history_run): verdicts, what the outputs name, the drift
shrink, and exit 2 for every bad input."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
from conftest import make_history_run, run_cli, trusted

from harness.history.catalog import add_runs

REF = "history:idle_warm_p50"


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def history(lbench_env, tmp_path):
    """An archive: 6 runs of build 100, then 5 of build 200 (one machine, model, setting)."""
    made = tmp_path / "made"
    dirs = [make_history_run(made, n, build=100 if n < 6 else 200, seed=1) for n in range(11)]
    archive = tmp_path / "archive"
    assert add_runs(trusted(archive), dirs)[1] == []
    return archive, [d.name for d in dirs]


def candidates(lbench_env, first, count, *, build=300, scale=1.0, cpu_model="TestCPU", seed=7):
    from pathlib import Path

    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    return [str(make_history_run(root, first + i, build=build, scale=scale, seed=seed, cpu_model=cpu_model))
            for i in range(count)]


def gate(env, archive, cands, *extra):
    return run_cli("gate", "--baseline", REF, *[x for c in cands for x in ("--candidate", c)],
                   "--archive", str(archive), *extra, env=env)


def test_a_history_gate_decides_and_names_its_runs(history, lbench_env, tmp_path):
    archive, ids = history
    same = candidates(lbench_env, 40, 2)
    out = {k: tmp_path / f"g.{k}" for k in ("json", "md", "xml")}
    r = gate(lbench_env, archive, same, "--json", str(out["json"]), "--markdown", str(out["md"]),
             "--junit", str(out["xml"]))
    assert r.returncode in (0, 3), r.stdout + r.stderr  # the same level: never a regression
    text = flat(r.stdout)
    assert f"5 runs of m · keep-alive=default on build 200 (the newest build before the candidate's 300)" in text
    assert "drift checked (Otava): no change point" in text and "pooled between-run sd of m" in text
    assert "pooled t over the history window and the candidate runs (df 5)" in text  # 5 + 2 runs - 2
    data = json.loads(out["json"].read_text())
    assert data["baseline"] == ids[6:] and data["info"]["history_baseline"]["build"] == 200
    assert data["info"]["history_baseline"]["window"] == 10 and data["status"] != "fail"
    warm = next(g for g in data["groups"] if g["regime"] == "warm" and g["metric"] == "latency_ms")
    assert warm["df"] == 5 and warm["n_runs_a"] == 5 and warm["sd_run"] > 0
    md = out["md"].read_text()
    assert "history:idle_warm_p50 (" + ", ".join(ids[6:]) in md and "pooled between-run sd" in md
    props = {p.get("name"): p.get("value") for p in ET.parse(out["xml"]).getroot().iter("property")}
    assert props["history_runs"] == ",".join(ids[6:]) and props["history_build"] == "200"
    slow = candidates(lbench_env, 50, 2, scale=1.3)
    r = gate(lbench_env, archive, slow)
    assert r.returncode == 1 and "REGRESSION" in r.stderr, r.stdout + r.stderr
    r = gate(lbench_env, archive, slow, "--build", "100", "--window", "3")
    assert r.returncode == 1 and "3 runs of m · keep-alive=default on build 100 (given by --build)" in flat(r.stdout)


def test_a_copy_of_a_history_run_as_the_candidate_is_not_slower(history, lbench_env, tmp_path):
    """Known answer: the candidate is one of the archived runs (its own copy is left out of the
    window), so B is one draw of the baseline's own distribution: never 'slower'."""
    archive, ids = history
    copy = tmp_path / "cand" / ids[8]
    shutil.copytree(next(archive.glob(f"*/{ids[8]}")), copy)
    r = gate(lbench_env, archive, [str(copy)], "--build", "200", "--json", str(tmp_path / "g.json"))
    assert r.returncode in (0, 3), r.stdout + r.stderr
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["baseline"] == [i for i in ids[6:] if i != ids[8]] and data["candidate"] == [ids[8]]
    assert data["info"]["history_baseline"]["excluded_candidate_runs"] == [ids[8]]
    warm = next(g for g in data["groups"] if g["regime"] == "warm" and g["metric"] == "latency_ms")
    assert warm["verdict"] != "slower" and warm["ratio_ci"][0] < 1 < warm["ratio_ci"][1]


def test_the_window_shrinks_past_a_change_point(lbench_env, tmp_path):
    made = tmp_path / "made"
    dirs = [make_history_run(made, n, build=100, scale=1.0 if n < 8 else 1.5, seed=2) for n in range(13)]
    archive = tmp_path / "archive"
    add_runs(trusted(archive), dirs)
    at_new_level = candidates(lbench_env, 40, 2, build=200, scale=1.5)
    r = gate(lbench_env, archive, at_new_level, "--json", str(tmp_path / "g.json"))
    assert r.returncode in (0, 3), r.stdout + r.stderr  # pooled across the step it would be 'slower'
    assert f"drift: a change point inside the window between runs {dirs[7].name} and {dirs[8].name}" in flat(r.stdout)
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["baseline"] == [d.name for d in dirs[8:]]
    assert data["info"]["history_baseline"]["dropped_for_drift"] == [d.name for d in dirs[3:8]]


@pytest.mark.parametrize("case", ["series", "archive", "two baselines", "history too", "window alone", "machine",
                                  "kind", "no build before", "window 1"])
def test_bad_input_is_exit_2_with_what_where_and_what_to_do(case, history, lbench_env, tmp_path):
    archive, ids = history
    cand = candidates(lbench_env, 40, 1)
    args = {
        "series": ("gate", "--baseline", "history:nope", "--candidate", cand[0], "--archive", str(archive)),
        "archive": ("gate", "--baseline", REF, "--candidate", cand[0], "--archive", str(tmp_path / "none")),
        "two baselines": ("gate", "--baseline", REF, "--baseline", ids[0], "--candidate", cand[0]),
        "history too": ("gate", "--baseline", REF, "--candidate", cand[0], "--history", ids[0]),
        "window alone": ("gate", "--baseline", cand[0], "--candidate", cand[0], "--window", "5"),
        "machine": ("gate", "--baseline", REF, "--candidate", candidates(lbench_env, 60, 1, cpu_model="Other")[0],
                    "--archive", str(archive)),
        "kind": ("gate", "--baseline", "history:swap_load_ms", "--candidate", cand[0], "--archive", str(archive)),
        "no build before": ("gate", "--baseline", REF, "--candidate", candidates(lbench_env, 70, 1, build=50)[0],
                            "--archive", str(archive)),
        "window 1": ("gate", "--baseline", REF, "--candidate", cand[0], "--archive", str(archive), "--window", "1"),
    }[case]
    expect = {"series": "no history series 'nope'", "archive": "no history archive there",
              "two baselines": "a history baseline stands alone", "history too": "would count the archive's runs twice",
              "window alone": "--window only apply to a history baseline", "machine": "holds no run of machine",
              "kind": "is a series of swap runs", "no build before": "on a build before the candidate's build 50",
              "window 1": "the history window is 1 run(s)"}[case]
    r = run_cli(*args, "--json", str(tmp_path / "g.json"), env=lbench_env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert expect in flat(r.stderr) and "where:" in r.stderr and "what to do:" in r.stderr, r.stderr
    assert not (tmp_path / "g.json").exists()
