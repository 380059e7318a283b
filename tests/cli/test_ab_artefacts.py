"""``lbench ab --json/--junit/--markdown``: the gate job's three files from its own run (verdict,
contrasts, every run id, the virtual flag), written together by the one gate writer, so CI keeps one
verdict per job (docs/ci/)."""

import json
import xml.etree.ElementTree as ET

import pytest

from harness.analysis.persisted import load_analysis
from harness.errors import BadInput
from harness.runs.ab_output import gate_job_outputs
from harness.runs.gate_output import write_gate_outputs
from harness.store import RunWriter, open_run


def _job_run(root, status="fail"):
    """An ab job's run directory as execute_gate_job writes it: rounds, looks and the outcome."""
    w = RunWriter(root, "ab", {"ab": {"design": {"arms": ["a", "b", "aa"], "gated_pauses": [0.0]},
                                      "sides": {"a": {"binary": {"build_number": 11434}}, "b": {}}}})
    for rnd in (1, 2, 3, 4):
        for pos, arm in enumerate(("a", "b", "aa")):
            level = 4.6 + (0.1 if arm == "b" else 0.0) + 0.001 * rnd
            w.append({"run_id": w.run_id, "round": rnd, "position": pos + 1, "arm": arm,
                      "idle_run_id": f"r{rnd}{arm}", "group": "pause 0 s", "level_log": level,
                      "median_ms": 2.718281828 ** level, "round_wall_s": 1.0}, table="rounds")
    for contrast, ratio, verdict in (("B vs A", 1.105, "slower"), ("A/A", 1.0, "inside the band")):
        w.append({"run_id": w.run_id, "round": 4, "final": False, "level_one_sided": 0.001, "status": status,
                  "reason": "B is slower (pause 0 s)", "group": "pause 0 s", "contrast": contrast, "ratio": ratio,
                  "ratio_ci_low": ratio - 0.01, "ratio_ci_high": ratio + 0.01, "verdict": verdict, "margin": 0.03,
                  "df": 4, "residual_sd": 0.01}, table="looks")
    w.manifest["ab"]["outcome"] = {"status": status, "reason": "B is slower (pause 0 s)", "rounds": 4,
                                   "planned_rounds": 30, "elapsed_s": 40.0,
                                   "run_ids": {a: [f"r{i}{a}" for i in (1, 2, 3, 4)] for a in ("a", "b", "aa")}}
    w.finish("complete")
    return open_run(w.dir, root)


def test_the_job_writes_json_junit_and_markdown_together_and_the_step_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = _job_run(tmp_path / "results")
    texts = gate_job_outputs(run, load_analysis(run))
    paths = [tmp_path / "ab.json", tmp_path / "ab.xml", tmp_path / "ab.md"]
    write_gate_outputs({paths[0]: texts.json, paths[1]: texts.junit, paths[2]: texts.markdown}, texts.markdown)
    data = json.loads(paths[0].read_text())
    assert data["status"] == "fail" and data["rounds"] == 4 and data["run_ids"]["aa"][0] == "r1aa"
    assert {c["contrast"] for c in data["contrasts"]} == {"B vs A", "A/A"} and "virtual" in data
    assert [r["b_over_a"] for r in data["per_round"]] == pytest.approx([2.718281828 ** 0.1] * 4, rel=1e-6)
    suite = ET.fromstring(paths[1].read_text())
    assert suite.tag == "testsuite" and suite.get("failures") == "1"
    assert run.run_id in paths[2].read_text() and summary.read_text() == paths[2].read_text()
    assert "B vs A | 1.105 [1.095, 1.115]" in texts.markdown


def test_an_unwritable_artefact_is_bad_input_and_writes_none(tmp_path):
    ok = tmp_path / "ok.json"
    with pytest.raises(BadInput):
        write_gate_outputs({ok: "{}", tmp_path / "missing" / "x.xml": "<x/>"}, "")
    assert not ok.exists()
