"""recipe.sh for claims (harness/repro/recipe.py): models named by what a maintainer can get, the
figures captured by the recorded steps, the claim's own checks evaluated in shell, a verdict
line at the end of every recipe.  The check section is run for real by bash; no engine here
(tests/repro/test_recipe_engine.py runs a recipe against the real router)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engines.binary import Binary
from harness.engines.router import RouterModel, TimelineEvent, preset_ini
from harness.repro.claims import HOLDS, Requirement, judge, load_claims
from harness.repro.lab import Lab, log_ere
from harness.repro.recipe import _STOP, SCRIPT_WORDS, figure_lines, verdict_lines, write_recipe

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
    lab.models, lab.shell_figures, lab.given, lab.unmeasured = models, {}, {}, {}
    lab.session = SimpleNamespace(backend=router)
    lab.environment_set = lambda: {"LLAMA_CACHE": "/x"}
    return lab


def _spec(*checks: Requirement):
    return SimpleNamespace(id="c", claim="a claim", check=list(checks))


def check_section(lab: Lab, checks, lbench_verdict) -> list[str]:
    """The figures, the claim's checks in shell, and the final verdict lines, as write_recipes
    assembles them for one router."""
    names: dict[str, str] = {}
    lines = ["# ---- what this script observed (computed before the router stops)", 'echo "figures observed:"',
             *figure_lines(lab, names), *_STOP]
    return lines + verdict_lines(names, dict(getattr(lab, "unmeasured", {}) or {}), checks, lbench_verdict)


def _run_checks(tmp_path: Path, lab: Lab, checks, verdict) -> subprocess.CompletedProcess:
    """The check section alone, after a stand-in router (a sleep) and an empty work folder."""
    script = tmp_path / "checks.sh"
    script.write_text("set -u\nWORK=$(mktemp -d)\nsleep 30 & ROUTER_PID=$!\nSAMPLER_PID=$ROUTER_PID\n"
                      + "\n".join(check_section(lab, checks, verdict)) + "\n")
    return subprocess.run([BASH, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


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


# ---- the helpers the scenarios' shell figures rest on, run by bash on constructed captures ----

def _bash(script: str, work: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    from harness.repro.recipe import _FUNCTIONS

    return subprocess.run([BASH, "-c", "set -u\n" + "\n".join(_FUNCTIONS) + "\n" + script], capture_output=True,
                          text=True, timeout=timeout, env={"WORK": str(work), "PATH": "/usr/bin:/bin"})


def test_wait_log_waits_for_the_line_instead_of_giving_up_at_once(tmp_path):
    """awk printed the deadline with OFMT (%.6g: 1.79618e+09), so every wait ended at once."""
    log = tmp_path / "router.stderr.log"
    log.write_text("")
    started = time.monotonic()
    done = _bash(f"( sleep 0.6; echo 'srv  spawning server instance with name=a on port 1' >> {log} ) & "
                 f"wait_log {shlex.quote(log_ere('spawn', 'a'))} 0 10; echo rc=$?", tmp_path)
    assert "rc=0" in done.stdout and "waited" not in done.stdout, done.stdout + done.stderr
    assert 0.5 < time.monotonic() - started < 5
    gave_up = _bash(f"wait_log {shlex.quote(log_ere('spawn', 'b'))} 0 0.5; echo rc=$?", tmp_path)
    assert "rc=1" in gave_up.stdout and "(waited 0.5 s for" in gave_up.stdout


def test_the_sse_capture_stamps_model_and_status_and_waits_on_them(tmp_path):
    from harness.repro.recipe import _SSE

    events = ('data: {"model":"a b","event":"status","data":{"status":"loading"}}\n'
              ': keep-alive\n'
              'data: {"model":"a b","event":"status","data":{"status":"loaded"}}\n'
              'data: not json\n'
              'data: {"model":"c","data":{"status":"sleeping"}}\n')
    (tmp_path / "events.txt").write_text(events)
    capture = _SSE.replace('curl -sN "http://127.0.0.1:$PORT/models/sse"', 'cat "$WORK/events.txt"')
    done = _bash(f"{capture}\nwait; T_x=0; cat \"$WORK/sse.txt\"; wait_sse c sleeping 0 5; echo rc=$?; "
                 f"{Lab.sh_sse_first('a b', 'loaded', 'x')}; sse_count 'a b' loading", tmp_path)
    rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    assert [r[1:] for r in rows] == [["a b", "loading"], ["a b", "loaded"], ["c", "sleeping"]], done.stdout
    assert all(float(r[0]) > 1e9 for r in rows)
    tail = done.stdout.splitlines()[-3:]
    assert tail[0] == "rc=0" and tail[1] == rows[1][0] and tail[2] == "1", done.stdout


def test_models_loaded_counts_the_named_models_get_models_lists_as_loaded(tmp_path):
    (tmp_path / "models.json").write_text('{"data":[{"id":"a","status":{"value":"loaded"}},'
                                          '{"id":"b","status":{"value":"unloaded"}},{"id":"c","status":{"value":"loaded"}}]}')
    assert _bash("models_loaded a b", tmp_path).stdout.strip() == "1"
    assert _bash("models_loaded a b c", tmp_path).stdout.strip() == "2"
    (tmp_path / "models.json").unlink()
    assert _bash("models_loaded a", tmp_path).stdout.strip() == "0"  # no reply: none loaded


def test_the_sampler_counts_live_children_and_their_memory(tmp_path):
    from harness.repro.recipe import _SAMPLER

    awk = _SAMPLER[_SAMPLER.index("awk"):_SAMPLER.index("; sleep")]
    ps = "  10     1 Sl  1000\n  11    10 Sl  5000\n  12    10 Z      0\n  13    10 Rl  7000\n  14    11 S    999\n"
    done = subprocess.run([BASH, "-c", awk.replace('"$ROUTER_PID"', "10")], input=ps, capture_output=True, text=True)
    assert done.stdout.split() == ["2", "13000", "1000", "7000"]  # the zombie and the grandchild left out


def _log_lab(tmp_path: Path, lines: list[str], marks: dict[str, int], replies=()) -> tuple[Lab, str]:
    """``lines`` as the router's log (for the script) and as lbench's timeline (parsed, received at
    t = the line's index), with log marks after the given lines: the lab and the script's L_ lines."""
    from harness.engines.router import TimelineEvent, parse_router_line
    from timeline_lab import timeline_lab

    (tmp_path / "router.stderr.log").write_text("\n".join(lines) + "\n")
    events = []
    for i, text in enumerate(lines):
        kind, detail = parse_router_line(text) or ("other", {})
        events.append(TimelineEvent(float(i), "router", kind, detail.get("model"), detail, text))
    lab = timeline_lab(events, replies=list(replies), log_marks={k: n - 0.5 for k, n in marks.items()})
    return lab, "".join(f"L_{k}={n}; " for k, n in marks.items())


def test_lru_rounds_in_shell_agree_with_the_rounds_python_judged(tmp_path):
    from harness.repro.victim_scenarios import lru_plan, lru_rounds

    since = {"a": 0, "b": 1, "c": 2}
    plan = [(f"round{i}", *lru_plan(order, since)) for i, order in
            enumerate((["b", "a", "c"], ["c", "b", "a"], ["a", "b", "c"]), start=1)]  # the last: not telling
    evict = "srv  evicting idle LRU name={} for a queued request"
    lines = ["srv  request for name=d queued at position 1", evict.format("b"), "srv  x", evict.format("c"),
             evict.format("b")]  # the last round's victim is not its LRU model
    lab, marks = _log_lab(tmp_path, lines, {"round1": 1, "round2": 3, "round3": 4})
    figures = lru_rounds(plan)
    got = {name: _bash(marks + figure.shell(lab), tmp_path).stdout.strip() for name, figure in figures.items()}
    assert got == {"round_victims": "b,c,b", "rounds": "3", "non_lru_victims": "1", "distinguishing_rounds": "2"}
    assert got == {name: str(figure.value(lab)) for name, figure in figures.items()}  # what lbench judges
    lab, marks = _log_lab(tmp_path, lines[:2], {"round1": 1, "round2": 2, "round3": 2})
    none = _bash(marks + figures["rounds"].shell(lab), tmp_path).stdout.strip()
    assert none == "1" == str(figures["rounds"].value(lab))  # a round without an eviction line is not run to its end


@pytest.mark.parametrize("evict_first", [False, True])
def test_wanted_victim_figures_in_shell_follow_the_log_order(tmp_path, evict_first):
    """A router log after the thaw (line 3 on) for wanted-victim: the rule (A proxied, then evicted) or its
    negation (A evicted before its request is proxied)."""
    from harness.repro.lab import Reply
    from harness.repro.victim_scenarios import wanted_figures

    head = ["srv  spawning server instance with name=a on port 1", "srv  request for name=c queued at position 1"]
    proxy, evict = "srv  proxying request to model a on port 1", "srv  evicting idle LRU name=a for a queued request"
    tail = [evict, proxy] if evict_first else [proxy, evict]
    lab, marks = _log_lab(tmp_path, head + tail + ["srv  spawning server instance with name=c on port 2"], {"thaw": 2},
                          [Reply("c", 0, 1, 200, "", sh_n=1)])
    (tmp_path / "sse.txt").write_text("5.000\ta\tloaded\n")
    (tmp_path / "reply-1.status").write_text("200\n")
    lab.marks = {"thaw": 4.0}
    lab.session.events.append(TimelineEvent(5.0, "sse", "status:loaded", "a", {}, ""))
    figures = wanted_figures("a", "c")
    got = {name: _bash(f"T_thaw=4; {marks}{figure.shell(lab)}", tmp_path).stdout.strip()
           for name, figure in figures.items()}
    assert got == {"a_came_up": "true", "a_evicted_while_wanted": "true" if evict_first else "false",
                   "a_spawns_before_served": "1", "a_evicted_after_served": "false" if evict_first else "true",
                   "first_victim": "a", "c_spawned_after_a_evicted": "true", "c_ok": "true"}
    words = {name: str(v).lower() if isinstance(v, bool) else str(v) for name, v in
             ((name, figure.value(lab)) for name, figure in figures.items())}
    assert got == words  # what lbench judges


def test_a_router_that_refuses_to_start_is_an_observation_when_the_claim_is_about_it(tmp_path):
    """``start_may_fail``: the recipe notes STARTED=false, skips the steps, reads the log and judges."""
    lab = _lab(tmp_path, None)
    stub = tmp_path / "llama-server"
    stub.write_text("#!/bin/sh\necho 'error: number of models to load on startup (3) exceeds models_max (2)' >&2\n"
                    "exit 1\n")
    stub.chmod(0o755)
    lab.start_may_fail = True
    lab.act("echo STEP-RAN")
    lab.figure("router_started", 'echo "$STARTED"')
    lab.figure("message_found", Lab.sh_flag("grep -qF 'exceeds models_max (2)' \"$WORK/router.stderr.log\""))
    spec = _spec(Requirement("router_started", "==", False), Requirement("message_found", "==", True))
    write_recipe(lab, spec, "holds")
    done = subprocess.run([BASH, str(lab.run_dir / "recipe.sh")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "LLAMA_SERVER": str(stub), "PORT": "1",
                                             "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "STEP-RAN" not in done.stdout and "the router did not start" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "verdict: the claim holds (lbench found: holds): reproduced"
    lab.start_may_fail = False  # any other claim: a router that does not come up is a setup failure
    write_recipe(lab, spec, "holds")
    strict = subprocess.run([BASH, str(lab.run_dir / "recipe.sh")], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "LLAMA_SERVER": str(stub), "PORT": "1",
                                               "TMPDIR": str(tmp_path)})
    assert strict.returncode == 2 and "did not come up" in strict.stderr


def test_one_recipe_runs_several_routers_in_turn_and_judges_their_figures_together(tmp_path):
    from harness.repro.recipe import write_recipes

    stub = tmp_path / "llama-server"
    stub.write_text("#!/bin/sh\nexit 1\n")
    stub.chmod(0o755)
    labs = []
    for tag, figure in (("control", "control_started"), ("case", "router_started")):
        lab = _lab(tmp_path / tag, None)
        lab.run_dir = tmp_path / "claim" / tag
        lab.run_dir.mkdir(parents=True)
        lab.router.preset_path.rename(lab.run_dir / "preset.ini")
        lab.session.backend.preset_path = lab.run_dir / "preset.ini"
        lab.start_may_fail = True
        lab.figure(figure, 'echo "$STARTED"')
        labs.append(lab)
    labs[1].given_figure("n", 1)
    spec = _spec(Requirement("control_started", "==", False), Requirement("router_started", "==", False),
                 Requirement("n", "==", 1))
    write_recipes(labs, tmp_path / "claim" / "recipe.sh", spec, "holds")
    text = (tmp_path / "claim" / "recipe.sh").read_text()
    assert "# ---- router 1 of 2 (control)" in text and "# ---- router 2 of 2 (case)" in text
    done = subprocess.run([BASH, str(tmp_path / "claim" / "recipe.sh")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "LLAMA_SERVER": str(stub), "PORT": "1",
                                             "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("the router did not start") == 2
    assert "/control/router.stderr.log" in done.stdout and "/case/router.stderr.log" in done.stdout


def test_a_figure_no_shell_tool_measures_says_why(tmp_path):
    lab = _lab(tmp_path, None)
    lab.figure("ok", "echo 1")
    lab.unmeasurable("spawns_seen", "read from the kernel's process events connector")
    done = _run_checks(tmp_path, lab, [Requirement("ok", "==", 1), Requirement("spawns_seen", ">=", 10)], "holds")
    assert done.returncode == 3
    assert "  spawns_seen: read from the kernel's process events connector" in done.stdout


@pytest.mark.parametrize("one_per_tick", [False, True])
def test_one_tick_evictions_in_shell_stop_at_the_first_exit(tmp_path, one_per_tick):
    """The tick lines between Y's request and the thaw, before any exit line there (the negated rule:
    one line, the next only after the first victim exited), in shell and in Python."""
    from harness.repro.figures import TickEvictions

    lines = ["srv  evicting idle LRU name=zz for a queued request",  # before Y's mark: not counted
             "srv  request for name=y queued at position 2",
             "srv  evicting idle LRU name=a for a queued request"]
    lines += (["srv  instance name=a exited with status 0", "srv  evicting idle LRU name=b for a queued request"]
              if one_per_tick else ["srv  evicting idle LRU name=b for a queued request",
                                    "srv  instance name=a exited with status 0"])
    lab, marks = _log_lab(tmp_path, lines + ["srv  evicting idle LRU name=c for a queued request"], {"y": 1, "thaw": 5})
    for figure, expected in ((TickEvictions("y", "thaw"), "1" if one_per_tick else "2"),
                             (TickEvictions("y", "thaw", True), "a" if one_per_tick else "a,b")):
        assert _bash(marks + figure.shell(lab), tmp_path).stdout.strip() == expected == str(figure.value(lab))


def test_a_recipe_runs_again_when_its_attempt_could_not_create_the_situation(tmp_path):
    """``retry_when``: the script execs itself again (``ATTEMPT``), as lbench tries again, then gives up."""
    from harness.repro.recipe import write_recipes

    lab = _lab(tmp_path, None)
    stub = tmp_path / "llama-server"
    stub.write_text("#!/bin/sh\nexit 1\n")
    stub.chmod(0o755)
    lab.start_may_fail = True
    lab.figure("ok", "echo 1")
    lab.retry_when('[ "${ATTEMPT:-1}" -lt 2 ]', "the first attempt always fails here", 3)
    write_recipes([lab], lab.run_dir / "recipe.sh", _spec(Requirement("ok", "==", 1)), "holds")
    env = {"PATH": "/usr/bin:/bin", "LLAMA_SERVER": str(stub), "PORT": "1", "TMPDIR": str(tmp_path)}
    done = subprocess.run([BASH, str(lab.run_dir / "recipe.sh")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("attempt 1: the first attempt always fails here") == 1
    assert done.stdout.strip().endswith("reproduced")
    lab.retry_when("true", "never", 2)
    write_recipes([lab], lab.run_dir / "recipe.sh", _spec(Requirement("ok", "==", 1)), "holds")
    never = subprocess.run([BASH, str(lab.run_dir / "recipe.sh")], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, env=env)
    assert never.returncode == 3 and "attempt 2: never" in never.stdout
    assert "not created in 2 attempts" in never.stdout.strip().splitlines()[-1]


def test_router_recipe_environment_carries_the_device_selection(tmp_path, monkeypatch):
    """--device puts GGML_VK_VISIBLE_DEVICES in lbench's own environment (unchanged there): the router
    recipe's environment still names it, so a maintainer's rerun drives the same device."""
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    lab = object.__new__(Lab)
    lab.binary = Binary(tmp_path / "llama-server", "test", "v1", 1, "x", "0" * 64)
    lab.run_dir, lab.extra_env = tmp_path, {}
    env = Lab.environment_set(lab)
    assert env["GGML_VK_VISIBLE_DEVICES"] == "0" and env["LLAMA_CACHE"] == str(tmp_path / "llama-cache")
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES")
    assert "GGML_VK_VISIBLE_DEVICES" not in Lab.environment_set(lab)
