"""``lbench ab --json/--junit/--markdown``: the gate's three files for the final look, naming
both sides' runs, so CI keeps one verdict per job (docs/ci/apple-silicon-gate.yml)."""

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

from test_render import _stepped_run  # noqa: E402

from harness.analysis.compare import judge_runs  # noqa: E402
from harness.analysis.gate import decide, load_config, verdict_config  # noqa: E402
from harness.cli.ab import _write_artefacts  # noqa: E402
from harness.analysis.campaign import ABResult  # noqa: E402


def test_ab_writes_the_final_looks_json_junit_and_markdown(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    a, b = _stepped_run(tmp_path / "a"), _stepped_run(tmp_path / "b")
    cfg = load_config(None)
    verdicts, info = judge_runs([a], [b], verdict_config(cfg))
    res = ABResult(a_runs=[a], b_runs=[b], looks=[{"round": 1, "status": "x", "alpha_per_look": 0.05}],
                   verdicts=verdicts, info=info)
    outcome = decide(verdicts, cfg)
    paths = [tmp_path / "ab.json", tmp_path / "ab.xml", tmp_path / "ab.md"]
    _write_artefacts(res, outcome, paths[1], paths[0], paths[2])
    data = json.loads(paths[0].read_text())
    assert data["baseline"] == [a.run_id] and data["candidate"] == [b.run_id]
    assert data["status"] == outcome.status and data["rounds"] == 1 and data["looks"][0]["round"] == 1
    assert ET.fromstring(paths[1].read_text()).tag == "testsuite"
    assert a.run_id in paths[2].read_text() and summary.read_text() == paths[2].read_text()
