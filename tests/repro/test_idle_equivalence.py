"""Idle "no penalty" claims as equivalence tests: groups per (model, long pause), the server
start as the unit, a margin fixed in the spec; undecided data gives "inconclusive"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.verdicts import VerdictConfig, decide_groups
from harness.engines.binary import locate
from harness.repro.claims import CONTRADICTED, HOLDS, INCONCLUSIVE, gate_cause, judge_repeats, load_claims
from harness.repro.base import Context
from harness.repro.idle_scenarios import equivalence_figures, equivalence_groups
from harness.repro.registry import SCENARIOS


def frame(levels: dict[float, float], *, starts=3, n=12, noise=0.01, model="m") -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for s in range(1, starts + 1):
        for pause, level in levels.items():
            for x in level * np.exp(rng.normal(0, noise, n)):
                rows.append({"model": model, "start": s, "phase": "measure", "error": None,
                             "pause_requested_s": pause, "latency_ms": x})
    return pd.DataFrame(rows)


def test_equal_pause_is_no_change_and_a_slow_pause_is_slower():
    f = frame({0.0: 100.0, 0.05: 100.0, 1.4: 100.5, 3.0: 150.0})
    verdicts = decide_groups(equivalence_groups(f, [0.0, 0.05], [1.4, 3.0]), VerdictConfig(margin=0.10))
    by = {v.regime: v for v in verdicts}
    assert by["pause=1.4s"].verdict == "no change" and by["pause=3s"].verdict == "slower"
    assert by["pause=1.4s"].n_runs_a == 3 and by["pause=1.4s"].unit.startswith("Welch t")  # the start is the unit
    figs = equivalence_figures(verdicts, margin=0.10, models=["m"], starts=3, long=[1.4, 3.0])
    assert (figs["groups"], figs["groups_no_change"], figs["groups_slower"], figs["groups_undecided"]) == (2, 1, 1, 0)
    assert figs["worst_group"].startswith("m · cpu · pause=3s") and figs["max_pause_s"] == 3.0


def test_noisy_data_is_undecided_not_no_change():
    f = frame({0.0: 100.0, 1.4: 100.0}, starts=2, n=6, noise=0.4)
    verdicts = decide_groups(equivalence_groups(f, [0.0], [1.4]), VerdictConfig(margin=0.10))
    figs = equivalence_figures(verdicts, margin=0.10, models=["m"], starts=2, long=[1.4])
    assert figs["groups_undecided"] == 1 and figs["groups_no_change"] == 0


def _spec(claim_id: str):
    (spec,) = [c for c in load_claims() if c.id == claim_id]
    return spec


@pytest.mark.parametrize("figures, verdict", [
    ({"groups_slower": 0, "groups_undecided": 0}, HOLDS),
    ({"groups_slower": 0, "groups_undecided": 3}, INCONCLUSIVE),  # wide intervals are no evidence of no effect
    ({"groups_slower": 2, "groups_undecided": 3}, CONTRADICTED),
])
def test_claim_verdict_from_the_group_counts(figures, verdict):
    assert judge_repeats(_spec("idle-host-cpu-equivalence"), [figures])[0] == verdict


def test_the_seed_claim_is_about_apple_cpu_and_the_linux_result_is_lbench_s_own(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    seed_claim, finding = _spec("idle-cpu-no-penalty"), _spec("idle-host-cpu-equivalence")
    cause = gate_cause(seed_claim, "cpu")
    assert cause and "apple-cpu" in cause[1]
    assert gate_cause(finding, "cpu") is None and "lbench finding" in finding.claim
    for spec in (seed_claim, finding, _spec("idle-cuda-no-penalty")):
        p = spec.params
        assert len(p["models"]) >= 2 and p["starts"] >= 2 and max(p["long_pauses_s"]) >= 60 and p["margin"] > 0


@pytest.mark.engine
def test_idle_equivalence_runs_fresh_servers_per_model(engine_env, tmp_path):
    from harness.models.resolve import resolve

    ev = SCENARIOS["idle-equivalence"](Context(locate(), tmp_path, resolve),
                          {"models": ["tiny-q8", "tiny-q4"], "short_pauses_s": [0.0], "long_pauses_s": [0.2],
                           "reps": 3, "starts": 2, "margin": 0.10})
    samples = pd.read_parquet(tmp_path / "samples.parquet")
    assert set(samples["model"]) == {"tiny-q8", "tiny-q4"} and set(samples["start"]) == {1, 2}
    assert ev.figures["groups"] == 2 and ev.figures["starts_per_model"] == 2
    assert len(ev.lines) == 2 and all("pause=0.2s" in line for line in ev.lines)
    assert len(list((tmp_path / "logs").glob("server-*.log"))) == 4  # 2 models x 2 starts
