"""The calibrate run's own report: findings first, the ok/over table, per pause, a plot (real engine)."""

import re
from pathlib import Path

import pytest
from conftest import run_cli

from harness.analysis.calibration import TARGETS

pytestmark = pytest.mark.engine


def test_short_calibrate_run_writes_its_own_report(engine_env):
    r = run_cli("calibrate", "--reps", "1", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    html = (run_dir / "report.html").read_text()
    assert "<h1>Harness calibration</h1>" in html and "Idle-wake latency" not in html  # not the idle template
    findings = html[html.index("<h2>Findings</h2>"):html.index("</ul>")]
    assert re.search(r"\d of 5 targets met", findings)
    assert "n=20" in findings  # steady back-to-back requests: 30 per block minus the 10 settling ones
    assert findings.count(", within the target of") + findings.count(", OVER the target of") == len(TARGETS)
    table = html[html.index("<h2>Targets</h2>"):html.index("<h2>Per pause</h2>")]
    rows = re.findall(r"<tr>.*?</tr>", table, flags=re.S)[1:]
    assert [re.search(r"<code>(\w+)</code>", row).group(1) for row in rows] == list(TARGETS)
    assert all(re.search(r"<b>(ok|over)</b>", row) for row in rows)
    assert table.count("data:image/png;base64,") == 1
    per_pause = html[html.index("<h2>Per pause</h2>"):]
    for pause in ("0.02 s", "0.05 s", "0.1 s", "0.2 s", "0.3 s", "back to back, steady"):
        assert f"<td class=\"l\">{pause}</td>" in per_pause
    # the CLI prints the same headline, after the figures table
    assert re.search(r"\d of 5 targets met", r.stdout)
    # the table first, then the result in sentences, then where the report is: the last lines on the screen
    assert r.stdout.index("harness calibration") < r.stdout.index("targets met") < r.stdout.index("report: ")
