"""The real-runs gate benchmark: orchestration (rotation, independent trials, rows kept at once)
and the error-rate arithmetic, with an injected executor; one small real-engine run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from harness.analysis.gate import GateConfig
from harness.analysis.gate_bench import _trials_needed, error_rates, sentences
from harness.analysis.intervals import clopper_pearson
from harness.analysis.verdicts import GroupData, decide_groups
from harness.errors import BadInput
from harness.models import presets
from harness.runs.gate_bench import ORDERS, Relabeled, run_gate_bench, slowed_alias


class FakeRun:
    def __init__(self, run_id: str, side: str, samples: np.ndarray):
        self.run_id, self.side, self.x = run_id, side, samples

    def table(self, name="samples"):
        return pd.DataFrame({"model": ["b-model"] * len(self.x), "latency_ms": self.x})


class Quiet:
    def message(self, text):
        pass


def fake_world(slowdown: float):
    rng = np.random.default_rng(7)
    log: list[tuple[str, dict]] = []

    def execute(prep, reporter, extra_manifest):
        log.append((prep, extra_manifest["gate_bench"]))
        level = 100.0 * (1 + slowdown if prep == "slow" else 1.0)
        return FakeRun(f"run{len(log)}", prep, level * np.exp(rng.normal(0, 0.01, 20)))

    def judge(a, b, cfg, gate_on=None):
        log.append(("judge", {"gate_on": gate_on}))
        return decide_groups([GroupData("m", "s", "warm", "latency_ms", [r.x for r in a], [r.x for r in b])], cfg), {}

    return execute, judge, log


def test_trials_rotate_sides_share_no_runs_and_keep_each_decision_at_once():
    execute, judge, log = fake_world(0.5)
    rows = []
    trials = run_gate_bench({"A": "base", "A2": "base", "B": "slow"}, GateConfig(), bench_id="b1", trials=3,
                            runs_per_side=2, model_label="m", reporter=Quiet(), on_decision=rows.append,
                            execute=execute, judge=judge)
    judged = [m for p, m in log if p == "judge"]
    log[:] = [e for e in log if e[0] != "judge"]
    assert len(log) == 3 * 2 * 3  # trials x rounds x sides
    assert len(judged) == 6 and all(m["gate_on"] is None for m in judged)  # the default family: warm
    sides = [m["side"] for _, m in log]
    for i in range(6):  # each round runs every side once, in the rotated order
        assert tuple(sides[3 * i:3 * i + 3]) == ORDERS[i % len(ORDERS)]
    ids = [r.run_id for t in trials for side in t.runs.values() for r in side]
    assert len(ids) == len(set(ids)) == 18  # no run serves two trials
    assert [(r["trial"], r["condition"]) for r in rows] == [(1, "A/A"), (1, "slowed"), (2, "A/A"), (2, "slowed"),
                                                            (3, "A/A"), (3, "slowed")]
    assert all(r["condition"] != "slowed" or r["gate_status"] == "fail" for r in rows)  # +50% is caught
    assert all(r["condition"] != "A/A" or r["gate_status"] != "fail" for r in rows)
    assert rows[1]["worst_ratio"] == pytest.approx(1.5, rel=0.02)
    assert rows[0]["a_run_ids"].count("run") == 2


def _prepared(tmp_path, on_decision=None, trials=2):
    from types import SimpleNamespace

    from harness.runs.gate_bench import GateBenchSpec, PreparedGateBench

    base, slow = SimpleNamespace(models=[SimpleNamespace(label="m")]), SimpleNamespace()
    spec = GateBenchSpec(idle=None, slow_model="m+2l", cfg=GateConfig(), trials=trials, runs_per_side=2,
                         gate_on=None, design={"model": "m"})
    return PreparedGateBench(spec, {"A": base, "A2": base, "B": slow}, tmp_path, on_decision), slow


def test_the_bench_is_a_run_that_journals_each_decision_then_its_summary(tmp_path):
    """execute_gate_bench: one gate-bench run (RunSession): each decision is in the journal before the
    command prints it, then the pooled slowdown goes into the manifest and the rates into analysis.json;
    lbench runs lists it."""
    from harness.analysis.persisted import load_analysis
    from harness.runindex import iter_records
    from harness.runs.gate_bench import execute_gate_bench

    execute, judge, _ = fake_world(0.5)
    seen = []

    def on_decision(row):
        (run_dir,) = tmp_path.glob("*-gate-bench-*")
        on_disk = (run_dir / "decisions.jsonl").read_text().splitlines()
        seen.append((row["trial"], row["condition"], len(on_disk)))

    prepared, slow = _prepared(tmp_path, on_decision)
    run = execute_gate_bench(prepared, Quiet(), execute=lambda p, r, **kw: execute(
        "slow" if p is slow else "base", r, **kw), judge=judge)
    assert seen == [(1, "A/A", 1), (1, "slowed", 2), (2, "A/A", 3), (2, "slowed", 4)]
    assert run.kind == "gate-bench" and run.complete and "-gate-bench-" in run.run_id
    manifest = json.loads((run.dir / "manifest.json").read_text())
    assert manifest["schema_version"] >= 2 and manifest["rows"] == {"decisions": 4}
    section = manifest["gate_bench"]
    assert section["mode"] == "measured" and section["model"] == "m"
    assert section["gate_outcome_of_pooled_size"] == "fail" and section["slowdown_size"][0]["ratio"] > 1.4
    assert sum(len(v) for v in section["run_ids"].values()) == 2 * 2 * 3
    decisions = run.table("decisions")  # through the store's schema (harness/schema.py)
    assert list(decisions["condition"]) == ["A/A", "slowed"] * 2 and set(decisions["run_id"]) == {run.run_id}
    assert str(decisions["trial"].dtype) == "Int64"
    analysis = load_analysis(run)
    assert {r["condition"]: r["failed"] for r in analysis["rates"]} == {"A/A": 0, "slowed": 2}
    assert any(f.startswith("True size of the slowdown") for f in analysis["findings"])
    assert [r.run_id for r in iter_records(tmp_path, kind="gate-bench", quiet=True)] == [run.run_id]


def test_ctrl_c_keeps_every_decision_made(tmp_path):
    """Interrupted in trial 2: the run ends 'interrupted' with trial 1's decisions, re-raising."""
    from harness.runs.gate_bench import execute_gate_bench
    from harness.store import open_run

    execute, judge, log = fake_world(0.5)
    prepared, slow = _prepared(tmp_path, trials=3)

    def interrupted(p, r, **kw):
        if kw["extra_manifest"]["gate_bench"]["trial"] == 2:
            raise KeyboardInterrupt
        return execute("slow" if p is slow else "base", r, **kw)

    with pytest.raises(KeyboardInterrupt):
        execute_gate_bench(prepared, Quiet(), execute=interrupted, judge=judge)
    (run_dir,) = tmp_path.glob("*-gate-bench-*")
    run = open_run(run_dir, tmp_path)
    assert run.record.status == "interrupted"
    assert list(run.table("decisions")["trial"]) == [1, 1]


def test_simulated_cells_come_back_from_the_table_as_computed():
    """The simulated table is tidy (one row per figure) and reads back into the cells gate_sim made."""
    import pandas as pd

    from harness.analysis.gate_bench import cells, simulated_rows
    from harness.schema import apply_schema

    gate = {"spread": "given sd 0.2", "run_sd": 0.2, "rule": "margin", "runs_per_side": 3, "history_runs": 0,
            "trials": 10, "fail A/A (ratio 1)": {"k": 1, "n": 10, "rate": 0.1, "ci": [0.0025, 0.445]},
            "coverage A/A (ratio 1)": 0.9}
    ab = {"spread": "s", "run_sd": 0.1, "spending": "obf", "min_rounds": 3, "max_rounds": 10, "trials": 10,
          "pass +10%": {"k": 0, "n": 10, "rate": 0.0, "ci": [0.0, 0.308]}, "mean rounds +10%": 9.5}
    rows = [dict(r, run_id="x") for r in simulated_rows(gate, "gate") + simulated_rows(ab, "ab")]
    assert len(rows) == 4 and {r["figure"] for r in rows} >= {"coverage A/A (ratio 1)", "mean rounds +10%"}
    frame = apply_schema(pd.DataFrame(rows), "simulated")
    assert cells(frame, "gate") == [gate] and cells(frame, "ab") == [ab]


def test_relabeled_run_reports_the_stand_in_model():
    r = Relabeled(FakeRun("x", "slow", np.ones(3)), "tiny-q8")
    assert set(r.table()["model"]) == {"tiny-q8"} and r.run_id == "x"


def test_error_rates_use_exact_binomial_intervals():
    d = pd.DataFrame({"condition": ["A/A"] * 10 + ["slowed"] * 10,
                      "gate_status": ["pass"] * 7 + ["fail"] * 3 + ["fail"] * 8 + ["inconclusive"] * 2,
                      "trial_wall_s": [60.0] * 20})
    rates = error_rates(d).set_index("condition")
    assert rates.loc["A/A", "failed"] == 3 and rates.loc["A/A", "rate"] == pytest.approx(0.3)
    assert rates.loc["A/A", "rate_ci_low"] == pytest.approx(0.0667, abs=1e-3)  # textbook Clopper-Pearson 3/10
    assert rates.loc["A/A", "rate_ci_high"] == pytest.approx(0.6525, abs=1e-3)
    assert rates.loc["slowed", "inconclusive"] == 2 and rates.loc["slowed", "minutes_per_decision"] == 1.0
    text = " ".join(sentences(error_rates(d), []))
    assert "3 of 10 A/A" in text and "misses the goal of <= 1%" in text
    assert "can neither show nor rule out the goal of >= 90%" in text  # 8/10: [44%, 97%]


def test_zero_failures_in_a_small_benchmark_cannot_show_a_one_percent_rate():
    low, high = clopper_pearson(0, 10)
    assert low == 0 and high == pytest.approx(0.3085, abs=1e-3)
    d = pd.DataFrame({"condition": ["A/A"] * 10, "gate_status": ["pass"] * 10, "trial_wall_s": [1.0] * 10})
    assert "can neither show nor rule out" in " ".join(sentences(error_rates(d), []))
    n = _trials_needed(0.01)
    assert clopper_pearson(0, n)[1] <= 0.01 < clopper_pearson(0, n - 1)[1]


def test_a_design_knob_is_one_level_not_an_axis():
    from harness.cli.gate_bench import _one

    assert _one(None) is None and _one("1") == ["1"]
    with pytest.raises(BadInput, match="one design"):
        _one("1,2")


def test_deeper_twin_alias():
    assert slowed_alias("llama3.2-1b-q4", 2) == "llama3.2-1b+2l-q4"
    shape, quant = presets.parse_synthetic_alias("llama3.2-1b+2l-q4")
    assert shape.n_layer == 18 and shape.n_embd == 2048 and quant.name == "q4"
    assert presets.parse_synthetic_alias("tiny+0l-q8") is None and presets.parse_synthetic_alias("nope+2l-q8") is None
    with pytest.raises(BadInput, match="not a synthetic preset"):
        slowed_alias("/models/x.gguf", 2)
    with pytest.raises(BadInput, match="extra-layers"):
        slowed_alias("tiny-q8", 0)


def test_the_design_is_built_in_runs_not_in_the_command():
    """lbench gate-bench only parses and prints: the design (ab's rounds, the simulated bench, the spec of
    real runs and the design kept in its manifest) comes from harness.runs.gate_bench."""
    from harness.runs.gate_bench import bench_spec, job_config, simulation_spec
    from harness.spec import IdleSpec

    job = job_config("15m", "0.03", seed=7)
    assert (job.budget_s, job.margin, job.seed) == (900.0, 0.03, 7)  # trial n's orders then use seed 7 + n
    cfg = GateConfig()
    sim = simulation_spec(cfg, trials=None, seed=3, spreads=[0.2], reps=None, within_sd=None, stall_p=None,
                          budget="15m", ab_margin=None, round_s=8.0)
    assert (sim.trials, sim.reps, sim.spreads, sim.seed, sim.job.seed, sim.round_s) == (400, 5, (0.2,), 3, 3, 8.0)
    with pytest.raises(BadInput, match="--round-s"):
        simulation_spec(cfg, trials=10, seed=0, spreads=None, reps=5, within_sd=None, stall_p=None, budget="15m",
                        ab_margin=None, round_s=0)
    idle = IdleSpec(models=["tiny-q8"], pauses_s=[0.0, 1.5], reps=5).validate()
    spec = bench_spec(idle, cfg, model="tiny-q8", slow_model="tiny+2l-q8", trials=3, runs_per_side=2, gate_on=None,
                      knobs={"threads": "1", "cpus": None, "client_cpus": None, "omp_wait_policy": None},
                      job=None, budget="15m")
    assert spec.design["threads"] == "1" and spec.design["gate_on"] == "warm" and "ab" not in spec.design
    assert (spec.slow_model, spec.trials, spec.job) == ("tiny+2l-q8", 3, None)
    with_job = bench_spec(idle, cfg, model="tiny-q8", slow_model="tiny+2l-q8", trials=3, runs_per_side=2,
                          gate_on="warm", knobs={}, job=job, budget="15m")
    assert with_job.design["ab"] and with_job.design["ab_margin"] == 0.03 and with_job.job is job


@pytest.mark.engine
def test_gate_bench_on_real_runs_keeps_every_run_and_decision(engine_env):
    res = Path(engine_env["LBENCH_RESULTS_DIR"])
    p = run_cli("gate-bench", "-m", "tiny-q8", "--trials", "1", "--runs-per-side", "1", "--pauses", "0",
                "--reps", "3", "--threads", "1", "--warmup", "2", env=engine_env)
    assert p.returncode == 0, p.stderr[-2000:]
    (bench,) = res.glob("*-gate-bench-*")
    manifest = json.loads((bench / "manifest.json").read_text())
    design = manifest["gate_bench"]
    decisions = pd.read_parquet(bench / "decisions.parquet")
    assert list(decisions["condition"]) == ["A/A", "slowed"]
    assert design["slow_model"] == "tiny+2l-q8"
    assert (design["threads"], design["warmup"]) == ("1", 2)  # the design knobs, recorded
    for side in ("A", "A2", "B"):
        (run_id,) = design["run_ids"][side]
        manifest = json.loads((res / run_id / "manifest.json").read_text())
        assert manifest["gate_bench"] == {"bench_id": bench.name, "trial": 1, "side": side}
    assert "False alarms: " in p.stdout and "True size of the slowdown" in p.stdout


def test_simulate_is_a_run_and_takes_measured_variance_components(tmp_path):
    p = run_cli("gate-bench", "--simulate", "--trials", "10", "--sd", "0.2", "--within-sd", "0.1", "--stall-p",
                "0.05", "--reps", "8", "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "within-run sd 0.1 with 5% stalls of 1.5x (given)" in " ".join(p.stdout.split())
    (run_dir,) = tmp_path.glob("*-gate-bench-*")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["gate_bench"]["run_model"]["reps"] == 8
    simulated = pd.read_parquet(run_dir / "simulated.parquet")
    assert set(simulated["run_sd"]) == {0.2} and set(simulated["campaign"]) == {"gate", "ab"}
    assert manifest["rows"] == {"simulated": len(simulated)}
    listed = run_cli("runs", "--kind", "gate-bench", "--results", str(tmp_path))
    assert run_dir.name in listed.stdout and "simulated" in listed.stdout
    report = run_cli("report", run_dir.name, "--results", str(tmp_path))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "given sd 0.2" in (run_dir / "report.html").read_text()
    bad = run_cli("gate-bench", "--sd", "0.2", "--results", str(tmp_path))  # a simulated figure on real runs
    assert bad.returncode == 2 and "--simulate" in bad.stderr
    bad = run_cli("gate-bench", "--simulate", "--sd", "-1", "--results", str(tmp_path))
    assert bad.returncode == 2 and "--sd" in bad.stderr
    bad = run_cli("gate-bench", "--simulate", "--woken-sd", "0", "--results", str(tmp_path))
    assert bad.returncode == 2 and "--woken-sd" in bad.stderr
    assert len(list(tmp_path.glob("*-gate-bench-*"))) == 1  # bad input writes nothing


def test_simulate_with_a_woken_group_names_both_margins(tmp_path):
    p = run_cli("gate-bench", "--simulate", "--trials", "10", "--sd", "0.04", "--woken-sd", "0.05", "--round-s", "30",
                "--budget", "4m", "--ab-margin", "0=0.03,1=0.10", "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    text = " ".join(p.stdout.split())
    assert "margins 3% (pause 0) and 10% (pause 1 s, woken sd 0.05)" in text
    assert "given sd 0.04 + woken sd 0.05" in text


class LevelRun:
    """An injected idle run: its samples (one pause) in the columns idle_levels reads."""

    def __init__(self, run_id: str, level: float, rng):
        self.run_id = run_id
        self.x = level * np.exp(rng.normal(0, 0.003, 8))

    def table(self, name="samples"):
        return pd.DataFrame({"phase": "measure", "setting": "s", "pause_requested_s": 0.0, "latency_ms": self.x,
                             "error": None})


def test_ab_mode_makes_each_decision_a_whole_gate_job(tmp_path):
    """gate-bench --ab: per trial an A/A job (b = a third copy of A) and a slowed job, alternating which
    goes first; each job is an ab run of its own, its status the decision; the pooled size in the manifest."""
    from types import SimpleNamespace

    from harness.analysis.gate_config import RoundsConfig
    from harness.runs.gate_bench import GateBenchSpec, PreparedGateBench, execute_gate_bench
    from harness.spec import IdleSpec

    rng = np.random.default_rng(3)
    engine = SimpleNamespace(binary=None, facts=lambda: {"name": "llama-server"})
    spec_a = IdleSpec(models=["m"], pauses_s=[0.0], reps=8)
    base = SimpleNamespace(models=[], spec=spec_a, engine=engine)
    slow = SimpleNamespace(models=[], spec=spec_a, engine=engine)
    made = []

    def execute(prep, reporter, extra_manifest=None):
        made.append(extra_manifest["ab"]["arm"])
        return LevelRun(f"r{len(made)}", 100.0 * (1.2 if prep is slow else 1.0), rng)

    spec = GateBenchSpec(idle=spec_a, slow_model="m+2l", cfg=GateConfig(), trials=2, design={"model": "m"},
                         job=RoundsConfig(budget_s=None, max_rounds=12))
    run = execute_gate_bench(PreparedGateBench(spec, {"A": base, "A2": base, "B": slow}, tmp_path), Quiet(),
                             execute=execute)
    decisions = run.table("decisions")
    assert list(decisions["condition"]) == ["A/A", "slowed", "slowed", "A/A"]
    assert dict(zip(decisions["condition"], decisions["gate_status"])) == {"A/A": "pass", "slowed": "fail"}
    jobs = sorted(tmp_path.glob("*-ab-*"))
    assert len(jobs) == 4 and set(decisions["job_run_id"]) == {j.name for j in jobs}
    section = json.loads((run.dir / "manifest.json").read_text())["gate_bench"]
    assert section["mode"] == "gate jobs" and section["slowdown_size"][0]["ratio"] == pytest.approx(1.2, rel=0.01)
    assert len(section["job_run_ids"]["A/A"]) == 2
