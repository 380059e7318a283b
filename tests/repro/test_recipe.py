"""recipe.sh for claims (harness/repro/recipe.py): models named by what a maintainer can get, the
figures captured by the recorded steps, the claim's own checks evaluated in shell, a verdict
line at the end of every recipe.  The check section is run for real by bash; no engine here
(tests/repro/test_recipe_engine.py runs a recipe against the real router)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engines.binary import Binary
from harness.engines.router import RouterModel, preset_ini
from harness.repro.claims import HOLDS, Requirement, judge, load_claims
from harness.repro.lab import Lab, log_ere
from harness.repro.recipe import SCRIPT_WORDS, check_section, write_recipe

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


@pytest.fixture
def tiny_model(lbench_env) -> Path:
    from harness.models.resolve import resolve

    return resolve("tiny-q8").path


def _lab(tmp_path: Path, model_path: Path | None) -> Lab:
    """A Lab whose router never started (argv and preset as RouterProcess writes them)."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    models = [RouterModel("tiny-q8", model_path)] if model_path else []
    preset = run_dir / "preset.ini"
    preset.write_text(preset_ini(models, ctx_size=512, parallel=1) if models else "[*]\nc = 512\n")
    binary_path = tmp_path / "llama-server"
    router = SimpleNamespace(argv=[str(binary_path), "--host", "127.0.0.1", "--port", "40000", "--models-preset",
                                   str(preset), "--no-webui"], preset_path=preset)
    lab = object.__new__(Lab)
    lab.binary = Binary(binary_path, "test", "v1", 1, "x", "0" * 64)
    lab.run_dir, lab.actions, lab.replies, lab.t0 = run_dir, [], [], time.perf_counter()
    lab.models, lab.shell_figures, lab.given = models, {}, {}
    lab.session = SimpleNamespace(backend=router)
    lab.environment_set = lambda: {"LLAMA_CACHE": "/x"}
    return lab


def _spec(*checks: Requirement):
    return SimpleNamespace(id="c", claim="a claim", check=list(checks))


def _run_checks(tmp_path: Path, lab: Lab, checks, verdict) -> subprocess.CompletedProcess:
    """The check section alone, after a stand-in router (a sleep) and an empty work folder."""
    script = tmp_path / "checks.sh"
    script.write_text("set -u\nWORK=$(mktemp -d)\nsleep 30 & ROUTER_PID=$!\nSAMPLER_PID=$ROUTER_PID\n"
                      + "\n".join(check_section(lab, checks, verdict)) + "\n")
    return subprocess.run([BASH, str(script)], capture_output=True, text=True, timeout=30, cwd=tmp_path)


CASES = [  # (figure commands, given, checks, python figures) -> lbench's verdict from judge()
    ({"peak": "echo 2"}, {"cap": 2}, [Requirement("peak", "<=", ref="cap")], {"peak": 2, "cap": 2}),
    ({"peak": "echo 3"}, {"cap": 2}, [Requirement("peak", "<=", ref="cap")], {"peak": 3, "cap": 2}),
    ({"said": Lab.sh_flag("true")}, {}, [Requirement("said", "==", True)], {"said": True}),
    ({"said": Lab.sh_flag("false")}, {}, [Requirement("said", "==", True)], {"said": False}),
    ({"err": "echo 0.4"}, {}, [Requirement("err", "<=", 1.0)], {"err": 0.4}),
    ({"victim": "echo tiny-q4"}, {"expected": "tiny-q4"}, [Requirement("victim", "==", ref="expected")],
     {"victim": "tiny-q4", "expected": "tiny-q4"}),
    ({"n": "echo 1"}, {}, [Requirement("n", "==", 0, undecided=True)], {"n": 1}),  # -> inconclusive
]


@pytest.mark.parametrize("figures, given, checks, py", CASES)
def test_shell_verdict_comes_from_the_same_requirements_as_pythons(tmp_path, figures, given, checks, py):
    lab = _lab(tmp_path, None)
    for name, command in figures.items():
        lab.figure(name, command)
    for name, value in given.items():
        lab.given_figure(name, value)
    verdict = judge(_spec(*checks), py)[0]
    done = _run_checks(tmp_path, lab, checks, verdict)
    assert done.returncode == 0, done.stdout + done.stderr  # the script reaches lbench's verdict
    last = done.stdout.strip().splitlines()[-1]
    assert last == f"verdict: the claim {SCRIPT_WORDS[verdict]} (lbench found: {SCRIPT_WORDS[verdict]}): reproduced"
    other = "holds" if verdict != HOLDS else "contradicted"
    differs = _run_checks(tmp_path, lab, checks, other)
    assert differs.returncode == 1 and "NOT reproduced" in differs.stdout


def test_a_figure_the_script_cannot_measure_is_named_on_the_last_lines(tmp_path):
    lab = _lab(tmp_path, None)
    lab.figure("peak", "echo 1")
    checks = [Requirement("peak", "<=", 2), Requirement("rss_ratio", "<=", 1.05, says="peak memory over the cap's")]
    done = _run_checks(tmp_path, lab, checks, "holds")
    assert done.returncode == 3
    tail = done.stdout.strip().splitlines()[-3:]
    assert tail[0] == "not checked by this script (1 of 2 checks):"
    assert "peak memory over the cap's (rss_ratio)" in tail[1]
    assert tail[2].startswith("verdict: not reproduced by this script alone: on the 1 check(s) it evaluates "
                              "the claim holds; lbench found: holds")


def test_a_recipe_that_can_evaluate_no_check_says_so(tmp_path):
    lab = _lab(tmp_path, None)
    done = _run_checks(tmp_path, lab, [Requirement("victim", "==", ref="expected")], "holds")
    assert done.returncode == 3
    assert done.stdout.strip().splitlines()[-1] == ("verdict: not checked by this script: it can evaluate none of "
                                                    "the claim's 1 check(s); lbench found: holds")


def test_a_figure_that_came_out_empty_is_not_observed(tmp_path):
    lab = _lab(tmp_path, None)
    lab.figure("peak", "true")  # prints nothing
    done = _run_checks(tmp_path, lab, [Requirement("peak", "<=", 2)], "holds")
    assert "peak: not observed" in done.stdout and done.returncode == 1
    assert "verdict: the claim inconclusive" in done.stdout


def test_hostile_figure_text_is_printed_not_run(tmp_path):
    lab = _lab(tmp_path, None)
    lab.figure("x", "echo 1", how="$(touch pwned)\ntouch pwned")
    lab.given_figure("y'$(touch pwned)'", "a'$(touch pwned)'")
    checks = [Requirement("x", "==", "1'$(touch pwned)'", says="`touch pwned`"),
              Requirement("z", "==", 1, says="$(touch pwned)")]
    done = _run_checks(tmp_path, lab, checks, "holds")
    assert not list(tmp_path.rglob("pwned")), done.stdout
    assert "`touch pwned` (x) was 1, expected == 1'$(touch pwned)': NOT met" in done.stdout
    assert "$(touch pwned) (z): computed by lbench" in done.stdout


def test_recipe_names_models_by_generator_and_hash_not_the_cache(tmp_path, tiny_model):
    from harness.models.gguf_info import file_sha256

    lab = _lab(tmp_path, tiny_model)
    write_recipe(lab, _spec(Requirement("peak_children", "<=", 2)), "holds")
    text = (lab.run_dir / "recipe.sh").read_text()
    assert str(tiny_model) not in text and "/.cache/" not in text and str(tiny_model.parent) not in text
    assert "#   lbench model synth tiny --quant q8 --seed 0 --out tiny-q8.gguf" in text
    sha = file_sha256(tiny_model)
    assert f'[ "$got" = {sha} ]' in text  # checked before use
    assert "printf 'model = %s\\n' \"$MODEL_1\"" in text
    assert subprocess.run([BASH, "-n", str(lab.run_dir / "recipe.sh")]).returncode == 0


def test_every_registered_claim_recipe_ends_with_a_verdict_line(tmp_path, tiny_model):
    """For every claim spec: the recipe parses, and its last printed lines are a verdict (or the
    list of checks it cannot evaluate, then a verdict): never a silent end."""
    lab = _lab(tmp_path, tiny_model)
    specs = load_claims()
    assert len(specs) > 30
    for spec in specs:
        write_recipe(lab, spec, "holds")
        text = (lab.run_dir / "recipe.sh").read_text()
        assert subprocess.run([BASH, "-n", str(lab.run_dir / "recipe.sh")]).returncode == 0, spec.id
        lines = text.rstrip().splitlines()
        assert lines[-1] in ("exit 3", "fi"), (spec.id, lines[-3:])
        assert any(line.lstrip().startswith('echo "verdict:') for line in lines[-6:]), (spec.id, lines[-6:])
        for req in spec.check:
            if req.figure != "peak_children":  # the one figure every router recipe samples itself
                assert f"({req.figure}): " in text or f"'  {req.figure}: " in text, (spec.id, req.figure)


def test_log_patterns_match_the_router_lines_they_stand_for():
    """The EREs the recipe greps the router log with match the lines harness/engines/router.py parses,
    and not the lines that only name the model."""
    from harness.engines.router import parse_router_line

    lines = [("spawn", "srv  spawning server instance with name=a b on port 4123"),
             ("exited", "srv  instance name=a b exited with status 0"),
             ("evict", "srv  evicting idle LRU name=a b for a queued request"),
             ("evict", "srv  evicting idle LRU name=a b to make room for name=c"),
             ("evict", "srv  model name=a b went idle, giving up its slot to a queued request"),
             ("evict", "srv  models_max limit reached, removing LRU name=a b"),
             ("kill_timeout", "srv  force-killing model instance name=a b after timeout"),
             ("stop_sent", "srv  stopping model instance name=a b"),
             ("queued", "srv  request for name=a b queued at position 1"),
             ("cancelled", 'srv  operator(): got exception: {"error":{"code":500,"message":"request cancelled while '
                           'waiting for model name=a b","type":"server_error"}}')]
    for kind, line in lines:
        parsed = parse_router_line(line)
        assert parsed and parsed[0] == kind, (kind, parsed)
        assert kind == "cancelled" or parsed[1]["model"] == "a b", (kind, parsed)  # (the router's parser reads
        # the JSON's tail into a cancelled line's name; the scenario matches the text, as the recipe does)
    not_evictions = ["srv  ensure_model: slot available, loading queued model name=a b",
                     "srv  ensure_model: waiting until model name=a b is fully loaded...",
                     "srv  model name=a b is still loading, force-killing"]
    cases = [(k, line, "1") for k, line in lines] + [("evict", line, "0") for line in not_evictions]
    for kind, line, want_full in cases:
        for ere, want in ((log_ere(kind, "a b"), want_full), (log_ere(kind, "a"), "0"), (log_ere(kind, None), want_full)):
            done = subprocess.run(["grep", "-cE", "--", ere], input=line + "\n", capture_output=True, text=True)
            assert done.stdout.strip() == want, (kind, ere, line)


def test_log_order_lists_the_models_in_the_order_of_their_lines(tmp_path):
    (tmp_path / "router.stderr.log").write_text(
        "srv  request for name=c.1 queued at position 1\nsrv  request for name=b queued at position 2\n"
        "srv  request for name=cX1 queued at position 3\nsrv  request for name=zz queued at position 4\n")
    done = subprocess.run([BASH, "-c", Lab.sh_log_order("queued", ["b", "c.1"])], capture_output=True, text=True,
                          env={"WORK": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "c.1,b"


def test_log_count_between_marks_counts_only_lines_logged_in_between(tmp_path):
    (tmp_path / "router.stderr.log").write_text("x\nsrv  spawning server instance with name=b on port 1\n"
                                                "y\nsrv  spawning server instance with name=b on port 2\n")
    env = {"WORK": str(tmp_path), "PATH": "/usr/bin:/bin"}
    between = subprocess.run([BASH, "-c", "L_b=1; L_thaw=2; " + Lab.sh_log_count_between("b", "thaw", "spawn", "b")],
                             capture_output=True, text=True, env=env)
    after = subprocess.run([BASH, "-c", "L_thaw=2; " + Lab.sh_log_count_between("thaw", None, "spawn", "b")],
                           capture_output=True, text=True, env=env)
    assert (between.stdout.strip(), after.stdout.strip()) == ("1", "1")


@pytest.mark.parametrize("line", ["srv  evicting idle LRU name=tiny-q4 for a queued request",
                                  "srv  evicting idle LRU name=tiny-q4 to make room for name=tiny-f16",
                                  "srv  model name=tiny-q4 went idle, giving up its slot to a queued request",
                                  "srv  models_max limit reached, removing LRU name=tiny-q4"])
def test_first_model_of_an_eviction_line_in_every_form_the_builds_log(tmp_path, line):
    (tmp_path / "router.stderr.log").write_text("srv  spawning server instance with name=tiny-q8 on port 1\n"
                                                + line + "\nsrv  evicting idle LRU name=zz for a queued request\n")
    done = subprocess.run([BASH, "-c", Lab.sh_log_first_evicted()], capture_output=True, text=True,
                          env={"WORK": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "tiny-q4", done.stderr
