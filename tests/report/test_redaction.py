"""Redaction covers short user names and a run made under another home, on every artifact that
leaves the machine: evidence Markdown, gate Markdown, JSON and JUnit (issue 12, class 8)."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from conftest import run_cli

from harness.report import redact
from harness.report.redact import Redactor
from harness.store import RunWriter

FOREIGN_HOME = "/home/al"  # the run was made by user "al" (two letters) on host box7.lab
FOREIGN_HOST = "box7.lab"
MODEL = f"{FOREIGN_HOME}/models/tiny-{FOREIGN_HOST}"  # a server-side model named by its path


def foreign_run(root: Path, seed: int) -> str:
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": 0},
        "models": [{"label": MODEL, "synthetic": False, "path": f"{FOREIGN_HOME}/models/tiny.gguf"}],
        "host": {"cpu_model": "TestCPU", "os": "Linux", "hostname": FOREIGN_HOST},
        "engine": {"path": f"{FOREIGN_HOME}/.cache/lbench/engines/x/bin/llama-server", "build_number": 11434},
        "cells": []})
    w.manifest["command"] = f"lbench idle -m {FOREIGN_HOME}/models/tiny.gguf --results /data/al/results"
    for pause in (0.0, 0.5, 1.5, 2.0):
        for rep in range(8):
            v = 20.0 * rng.lognormal(0, 0.05)
            w.append({"model": MODEL, "setting": "keep-alive=default", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1,
                      "server_ms": v - 1, "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    return w.run_id


def assert_redacted(text: str, what: str) -> None:
    for leak in (FOREIGN_HOME, "box7", "/data/al/", str(Path.home()) + "/"):
        assert leak not in text, f"{what} leaks {leak!r}"
    assert "keep-alive=default" in text, f"{what}: an ordinary word containing the user name was changed"
    assert "~/models/tiny" in text, what


def test_every_artifact_that_leaves_the_machine_is_redacted(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = foreign_run(root, 0), foreign_run(root, 1)
    out = tmp_path / "ev"
    r = run_cli("evidence", a, b, "-o", str(out), env=lbench_env)
    assert r.returncode == 0, r.stderr
    evidence = (out / "evidence.md").read_text()
    assert_redacted(evidence, "evidence")
    assert "/data/<user>/results" in evidence and "<host>" in evidence
    for run_id in (a, b):  # the report copies people attach are redacted too (HTML-escaped placeholders)
        html = (out / f"{run_id}-report.html").read_text()
        assert_redacted(html, "report copy")
        assert "&lt;host&gt;" in html
    summary = tmp_path / "summary.md"
    r = run_cli("gate", "--baseline", a, "--candidate", b, "--markdown", str(tmp_path / "g.md"),
                "--json", str(tmp_path / "g.json"), "--junit", str(tmp_path / "g.xml"),
                env={**lbench_env, "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode in (0, 3), r.stdout + r.stderr
    for name in ("g.md", "g.json", "g.xml"):
        assert_redacted((tmp_path / name).read_text(), name)
    assert_redacted(summary.read_text(), "GITHUB_STEP_SUMMARY")
    json.loads((tmp_path / "g.json").read_text())  # still valid JSON
    suite = ET.fromstring((tmp_path / "g.xml").read_text().split("?>", 1)[1])  # still valid XML
    assert any("&lt;host&gt;" not in c.get("classname") and "<host>" in c.get("classname") for c in suite)
    r = run_cli("gate", "--baseline", a, "--candidate", b, "--json", str(tmp_path / "raw.json"), "--no-redact",
                env=lbench_env)
    assert FOREIGN_HOME in (tmp_path / "raw.json").read_text()


def test_short_user_name_of_this_machine(monkeypatch):
    monkeypatch.setattr(redact.getpass, "getuser", lambda: "x")
    monkeypatch.setattr(redact.Path, "home", staticmethod(lambda: Path("/home/x")))
    red = Redactor()
    text = red("model /home/x/m.gguf, cache /srv/x/data, ssh x@h, USER=x, user: x; max x, x-axis, C:\\Users\\x\\m")
    assert text == ("model ~/m.gguf, cache /srv/<user>/data, ssh <user>@h, USER=<user>, user: <user>; max x, "
                    "x-axis, ~\\m")


def test_a_home_and_user_seen_only_in_the_text_or_the_runs_manifest():
    red = Redactor(runs=[{"host": {"hostname": "h1"}, "engine": {"path": "/Users/bob/bin/llama-server"}}])
    assert red("bob ran it on h1 in /Users/bob/x; /home/carol/y is carol's") == \
        "<user> ran it on <host> in ~/x; ~/y is <user>'s"
    assert red("the root cause of /root/.cache") .endswith("~/.cache")


def test_disabled_redaction_changes_nothing():
    text = f"{Path.home()}/x on {FOREIGN_HOST}"
    assert Redactor(False)(text) == text


def test_compare_html_is_redacted(lbench_env, tmp_path):
    import base64
    import getpass
    import re

    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = foreign_run(root, 0), foreign_run(root, 1)
    local = json.loads((root / b / "manifest.json").read_text())  # the candidate was made here, by this user
    local["engine"]["path"] = f"{Path.home()}/.cache/lbench/engines/x/bin/llama-server"
    local["host"]["user"] = getpass.getuser()
    (root / b / "manifest.json").write_text(json.dumps(local))
    page = tmp_path / "compare.html"
    r = run_cli("compare", a, b, "--html", str(page), env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr
    html = page.read_text()
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)
    for leak in (FOREIGN_HOME, FOREIGN_HOST, str(Path.home()) + "/", f">{getpass.getuser()}<"):
        assert leak not in text, f"compare.html leaks {leak!r}"
    assert "~/.cache/lbench/engines/x/bin/llama-server" in text and "&lt;host&gt;" in text
    pngs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert pngs and all(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)  # inline images left whole
    r = run_cli("compare", a, b, "--html", str(tmp_path / "raw.html"), "--no-redact", env=lbench_env)
    assert FOREIGN_HOME in (tmp_path / "raw.html").read_text()
