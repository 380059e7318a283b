"""compare + gate on synthetic samples: a known shift is detected, A/A is not."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from harness.analysis.gate import GateConfig, decide, junit, load_config, markdown, verdict_config, verdict_json


def test_decide_exit_codes_with_verdicts():
    """fail > refuse > inconclusive > pass; inconclusive maps to 0 only when asked."""
    from harness.analysis.verdicts import GroupData, VerdictConfig, decide_groups

    rng = np.random.default_rng(2)

    def runs(level, n, sd):
        return [level * rng.lognormal(0, sd, n) for _ in range(3)]

    a = runs(20.0, 30, 0.02)
    cfg = GateConfig()
    same = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, runs(20.0, 30, 0.02))], VerdictConfig())
    assert decide(same, cfg).exit_code == 0
    slow = GroupData("m", "s", "warm", "latency_ms", a, runs(30.0, 30, 0.02))
    refused = GroupData("m", "s", "woken", "latency_ms", a, [np.array([60.0])])
    out = decide(decide_groups([slow, refused], VerdictConfig()), cfg)
    assert out.status == "fail" and out.exit_code == 1 and len(out.missing) == 1  # a refusal hides no regression
    assert decide(decide_groups([refused], VerdictConfig()), cfg).exit_code == 2
    unsure = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, runs(20.0, 5, 0.5))], VerdictConfig())
    assert decide(unsure, cfg).exit_code == 3 and decide(unsure, cfg, inconclusive_ok=True).exit_code == 0
    # a 3% slowdown measured precisely is inside the 5% band: no change, pass
    small = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, runs(20.6, 200, 0.005))],
                          VerdictConfig(), seed=1)
    assert small[0].verdict in ("no change", "inconclusive") and decide(small, cfg).exit_code != 1


class _FakeRun:
    def __init__(self, frame, rid):
        from harness.record import parse_record

        self.frame, self.run_id = frame, rid
        self.record = parse_record({"kind": "idle", "run_id": rid}, rid)

    def table(self, name="samples"):
        return self.frame


def _idle_frame(curve, reps=10, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for pause in (0.0, 0.5, 1.0, 2.0, 3.0):
        for _ in range(reps):
            v = curve(pause) * rng.lognormal(0, 0.03)
            rows.append({"model": "m", "setting": "s", "phase": "measure", "error": None,
                         "pause_requested_s": pause, "latency_ms": v, "server_prompt_ms": v - 1})
    return pd.DataFrame(rows)


def test_gate_fails_a_new_wake_step_in_the_candidate():
    from harness.analysis.compare import judge_runs

    a = [_FakeRun(_idle_frame(lambda p: 20.0, seed=i), f"a{i}") for i in range(2)]
    b = [_FakeRun(_idle_frame(lambda p: 20.0 if p < 2 else 60.0, seed=10 + i), f"b{i}") for i in range(2)]
    res, info = judge_runs(a, b)
    assert info["shapes_a"]["m · s"].shape == "none" and info["shapes_b"]["m · s"].shape == "step"
    assert [c["change"] for c in info["step_changes"]] == ["new"]
    out = decide(res, GateConfig())
    # the pre-registered warm group (pauses pooled) fails; the new-step group, chosen on B, is reported only
    assert out.status == "fail" and [r.regime for r in out.failures] == ["warm"]
    new = [r for r in res if r.regime.startswith("new step") and r.metric == "latency_ms"]
    assert new and new[0].verdict == "slower" and new[0].role == "reported" and "chosen after looking at B" in new[0].note
    same, _ = judge_runs(a, [_FakeRun(_idle_frame(lambda p: 20.0, seed=20 + i), f"c{i}") for i in range(2)])
    assert all(r.verdict != "slower" for r in same)


def test_gating_family_is_one_group_by_default_and_pauses_do_not_overlap_it():
    """Default: one vote per (model, setting), A's warm regime; --gate-on pauses: those pause groups only;
    'regimes': A's regimes, which partition the pauses.  No voting group shares a sample with another."""
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate_config import parse_gate_on

    a = [_FakeRun(_idle_frame(lambda p: 20.0 if p < 2 else 60.0, seed=i), f"a{i}") for i in range(3)]
    b = [_FakeRun(_idle_frame(lambda p: 20.0 if p < 2 else 60.0, seed=10 + i), f"b{i}") for i in range(3)]
    default, info = judge_runs(a, b)
    assert [v.regime for v in default if v.primary] == ["warm"] and info["gate_on"].startswith("the warm regime")
    pauses, _ = judge_runs(a, b, gate_on=parse_gate_on("0,3"))
    assert [v.regime for v in pauses if v.primary] == ["pause=0s", "pause=3s"]
    regimes, _ = judge_runs(a, b, gate_on=parse_gate_on("regimes"))
    assert sorted(v.regime for v in regimes if v.primary) == ["warm", "woken"]
    from harness.errors import BadInput

    with pytest.raises(BadInput, match="pauses the baseline does not have"):
        judge_runs(a, b, gate_on=parse_gate_on("7"))
    with pytest.raises(BadInput, match="--gate-on"):
        parse_gate_on("soon")


def test_junit_counts_equal_its_testcases_and_secondaries_are_marked():
    from harness.analysis.compare import judge_runs

    a = [_FakeRun(_idle_frame(lambda p: 20.0, seed=i), f"a{i}") for i in range(3)]
    b = [_FakeRun(_idle_frame(lambda p: 20.0, reps=6, seed=10 + i), f"b{i}") for i in range(1)]
    res, _ = judge_runs(a, b)
    outcome = decide(res, GateConfig())
    suite = ET.fromstring(junit(outcome))
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
    secondary = [c for c in cases if "server_prompt_ms" in c.get("name")]
    assert secondary and all("does not vote" in c.get("name") and c.find("skipped") is not None for c in secondary)
    md = markdown(outcome, "a", "b")
    if outcome.status == "inconclusive":
        assert "**Next step**" in md and "runs per side" in md


def test_outputs_parse():
    """A slowdown everywhere: the JUnit, JSON and Markdown of the failed gate parse and agree."""
    from harness.analysis.compare import judge_runs

    a = [_FakeRun(_idle_frame(lambda p: 20.0 if p < 2 else 60.0, seed=i), f"a{i}") for i in range(3)]
    b = [_FakeRun(_idle_frame(lambda p: 1.3 * (20.0 if p < 2 else 60.0), seed=10 + i), f"b{i}") for i in range(3)]
    slow, info = judge_runs(a, b)
    outcome = decide(slow, GateConfig())
    suite = ET.fromstring(junit(outcome))
    assert int(suite.get("failures")) == len(outcome.failures) >= 1
    assert len(suite.findall("testcase")) == len(slow)
    data = json.loads(verdict_json(outcome, ["a"], ["b"], info))
    assert data["status"] == "fail" and data["exit_code"] == 1 and len(data["groups"]) == len(slow)
    md = markdown(outcome, "a", "b")
    assert md.startswith("## lbench gate: ❌ regression") and "| group |" in md and "**FAIL**" in md
    assert "m · s · warm · latency_ms" in md


def test_group_labels_read_as_words():
    from types import SimpleNamespace

    from harness.analysis.verdict_labels import group_label, regime_label

    assert regime_label("pause=0.5s") == "pause 0.5 s" and regime_label("woken") == "woken"
    row = SimpleNamespace(model="m", setting="keep-alive=none", regime="pause=2s", metric="latency_ms")
    assert group_label(row) == "m · keep-alive=none · pause 2 s · latency_ms"


def test_config_file(tmp_path):
    f = tmp_path / "gate.toml"
    f.write_text("[gate]\nalpha = 0.01\nthreshold = 0.2\n[thresholds]\nserver_prompt_ms = 0.3\n")
    cfg = load_config(f)
    assert cfg.alpha == 0.01 and verdict_config(cfg).margin_for("latency_ms") == 0.2
    assert verdict_config(cfg).margin_for("server_prompt_ms") == 0.3
    assert load_config(f, threshold=0.05).threshold == 0.05
    from harness.errors import BadInput

    with pytest.raises(BadInput):
        load_config(None, alpha=2.0)


def test_runs_with_no_model_and_setting_in_common_are_refused():
    from harness.analysis.compare import judge_runs
    from harness.errors import BadInput

    a = [_FakeRun(_idle_frame(lambda p: 20.0), "a")]
    other = _idle_frame(lambda p: 20.0).assign(model="other-model")
    with pytest.raises(BadInput, match="no model and setting in common") as exc:
        judge_runs(a, [_FakeRun(other, "b")])
    assert "baseline: m · s" in exc.value.where and "candidate: other-model · s" in exc.value.where
