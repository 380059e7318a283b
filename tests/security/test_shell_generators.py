"""Every piece of shell text lbench writes for someone else to run, fed hostile names and run in
a sandbox (issue 26, class 1).

The recipe is executed for real by bash in a temporary directory, with the router binary a
stand-in script (it records its argv and sleeps) and ``curl``/``pgrep`` stand-ins on PATH that
record theirs: no ``pwned`` file may appear anywhere, and every hostile value must reach the
program it was meant for as one exact argument.  No llama-server is involved: what is tested is
the text lbench generates, not the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import shell
from harness.engines.binary import Binary
from harness.engines.router import RouterProcess
from harness.repro import lab as lab_mod
from harness.repro.lab import Lab
from harness.repro.recipe import write_recipe

HOSTILE = [
    "a'$(touch pwned)'.gguf",
    "a\"$(touch pwned)\".gguf",
    "$(touch pwned)",
    "`touch pwned`",
    "x; touch pwned; y",
    "x && touch pwned",
    "x\ntouch pwned\n",
    "x\rtouch pwned",
    "INI\ntouch pwned",
    "--alias x( |$)'; touch pwned; '",
    "a|touch pwned",
    "a > pwned",
    "x\\'; touch pwned #",
    "-n",
    "",
]

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _sandbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(sandbox dir the recipe runs in, stub bin dir, record dir)."""
    box, stubs, record = tmp_path / "box", tmp_path / "stubs", tmp_path / "record"
    for d in (box, stubs, record):
        d.mkdir()
    # each stand-in writes its argv, NUL-separated, to a new file in $RECORD_DIR
    _stub(stubs / "curl", 'printf "%s\\0" curl "$@" > "$RECORD_DIR/$$.curl"; exit 0\n')
    # pgrep "finds" a PID no process has (find_child waits up to 10 s for one that is never found)
    _stub(stubs / "pgrep", 'printf "%s\\0" pgrep "$@" > "$RECORD_DIR/$$.pgrep"; echo 2147483646\n')
    return box, stubs, record


def _fake_lab(tmp_path: Path, hostile: str, monkeypatch) -> Lab:
    """A Lab whose router never started: its argv, preset and binary carry ``hostile``."""
    bin_dir = tmp_path / f"bin {hostile[:40]}".replace("/", "_")
    bin_dir.mkdir(exist_ok=True)
    router_bin = bin_dir / f"llama-server{hostile[:20]}".replace("/", "_")
    _stub(router_bin, 'printf "%s\\0" "$0" "$@" > "$RECORD_DIR/router.argv"; exec sleep 30\n')
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    preset = run_dir / "preset.ini"
    preset.write_text(f"; written by lbench\n[*]\nc = 512\n\n[{hostile}]\nmodel = /m/{hostile}\nINI\ntouch pwned\n")
    router = SimpleNamespace(
        argv=[str(router_bin), "--host", "127.0.0.1", "--port", "40000", "--models-preset", str(preset),
              "--no-webui", "--threads", hostile, "--alias", hostile],
        preset_path=preset, request_path=RouterProcess.request_path,
        request_body=lambda m, prompt, n: RouterProcess.request_body(None, m, prompt, n))
    lab = object.__new__(Lab)
    lab.binary = Binary(router_bin, "test", f"v{hostile}", 1, hostile, "0" * 64)
    lab.run_dir, lab.actions, lab.replies, lab.t0 = run_dir, [], [], time.perf_counter()
    lab.session = SimpleNamespace(backend=router)
    lab.environment_set = lambda: {"LLAMA_CACHE": "/x", "LBENCH_HOSTILE": hostile, "OMP_WAIT_POLICY": hostile}
    lab.http = SimpleNamespace(post=lambda *a, **k: SimpleNamespace(status_code=200, text="{}"))
    monkeypatch.setattr(lab_mod.os, "kill", lambda pid, sig: None)  # freeze/thaw record, signal nobody
    return lab


def _drive(lab: Lab, hostile: str) -> None:
    """Every step a scenario can record, each carrying the hostile value."""
    me = os.getpid()
    lab.__dict__["_pid_model"] = {me: hostile}
    lab.note(f"use order (oldest first): {hostile}, {hostile}")
    lab.request(hostile)
    lab.post("/models/load", hostile)
    lab.freeze(me)
    lab.thaw(me)
    lab.environ(me)
    lab.sleep(0)
    lab.wave([hostile, "b"], "Hello")


def _records(record: Path, suffix: str) -> list[list[str]]:
    return [p.read_bytes().decode().split("\0")[:-1] for p in sorted(record.glob(f"*{suffix}"),
                                                                        key=lambda p: int(p.name.split(".")[0]))]


def _no_pwned(*roots: Path) -> None:
    found = [p for r in roots for p in r.rglob("*pwned*") if p.name == "pwned"]
    assert not found, f"the script ran an injected command: {found}"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_recipe_runs_hostile_values_as_data(tmp_path, monkeypatch, hostile):
    lab = _fake_lab(tmp_path, hostile, monkeypatch)
    _drive(lab, hostile)
    write_recipe(lab)
    recipe = lab.run_dir / "recipe.sh"
    text = recipe.read_text()
    assert subprocess.run([BASH, "-n", str(recipe)], capture_output=True).returncode == 0, text
    for line in text.splitlines():  # a comment never carries a raw control character onto a new line
        assert "\r" not in line or not line.lstrip().startswith("#")
    box, stubs, record = _sandbox(tmp_path)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "RECORD_DIR": str(record), "HOME": str(box), "PORT": "40001",
           "TMPDIR": str(box)}
    started = time.monotonic()
    done = subprocess.run([BASH, str(recipe)], cwd=box, env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 20, "the recipe waited on the router (a bare `wait`)"
    _no_pwned(box, tmp_path, Path.cwd())
    assert "logs in" in done.stdout, done.stderr
    # the router got its argv word for word (port and preset as the recipe sets them)
    argv = (record / "router.argv").read_bytes().decode().split("\0")[:-1]
    want = list(lab.router.argv)
    want[want.index("--port") + 1] = "40001"
    i = want.index("--models-preset") + 1
    assert argv[i].endswith("/preset.ini") and argv[i] != str(lab.router.preset_path)
    want[i] = argv[i]
    assert argv == want
    assert Path(argv[i]).read_text().rstrip("\n") == lab.router.preset_path.read_text().rstrip("\n")
    # every request body reached curl as one word, the hostile model name intact
    bodies = [json.loads(a[a.index("-d") + 1]) for a in _records(record, ".curl") if "-d" in a]
    assert sum(b.get("model") == hostile for b in bodies) >= 3, bodies
    # pgrep got one pattern that matches the hostile alias exactly (as an ERE)
    patterns = [a[-1] for a in _records(record, ".pgrep")]
    assert (patterns or not hostile) and all(p == "--alias " + shell.ere_literal(hostile) + "( |$)" for p in patterns), patterns


def test_preset_written_by_the_recipe_is_the_one_lbench_used(tmp_path, monkeypatch):
    """The preset is written line by line, each line one quoted word (no here-document a line
    could end early); the byte-for-byte comparison runs in test_recipe_runs_hostile_values_as_data."""
    lab = _fake_lab(tmp_path, "INI", monkeypatch)
    write_recipe(lab)
    text = (lab.run_dir / "recipe.sh").read_text()
    assert "<<" not in text
    assert "printf '%s\\n' INI >> \"$WORK/preset.ini\"" in text


def test_recipe_that_cannot_be_written_says_why_in_one_comment(tmp_path):
    from harness.repro.recipe import write_lab_recipe

    lab = object.__new__(Lab)
    lab.run_dir = tmp_path
    write_lab_recipe(lab)  # write_recipe fails: no router argv
    lines = (tmp_path / "recipe.sh").read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("# recipe could not be written")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_comment_is_one_line(hostile):
    line = shell.comment(f"engine: /opt/{hostile}")
    assert line.startswith("# ") and len(line.splitlines()) == 1 and "\r" not in line


def test_export_refuses_a_name_that_is_not_one():
    assert shell.export("LLAMA_ARG_X", "$(touch pwned)") == "export LLAMA_ARG_X='$(touch pwned)'"
    for bad in ("A=B", "A;touch pwned", "1A", "", "A B", "A\nB"):
        with pytest.raises(ValueError):
            shell.export(bad, "v")


@pytest.mark.parametrize("hostile", HOSTILE)
def test_ere_literal_matches_exactly_the_text(tmp_path, hostile):
    """grep -E with the escaped pattern finds the text itself and nothing broader."""
    if "\n" in hostile or "\r" in hostile or not hostile:
        pytest.skip("grep matches lines")
    f = tmp_path / "lines"
    f.write_text(f"{hostile}\nzzz-unrelated\n")
    got = subprocess.run(["grep", "-E", "-x", "--", shell.ere_literal(hostile), str(f)], capture_output=True, text=True)
    assert got.stdout.splitlines() == [hostile]


@pytest.mark.parametrize("hostile", HOSTILE + ["lbench idle -m a'$(touch pwned)'.gguf; touch pwned `touch pwned`",
                                               "lbench idle 'unbalanced", "lbench idle > pwned"])
def test_evidence_command_is_one_quoted_command(tmp_path, hostile):
    """The command an evidence bundle shows, from a hostile manifest, runs as the one command its
    words make (here an ``lbench`` stand-in) and nothing else."""
    from harness.report.evidence import command_text

    box, stubs, record = _sandbox(tmp_path)
    _stub(stubs / "lbench", 'printf "%s\\0" lbench "$@" > "$RECORD_DIR/0.lbench"\n')
    text = command_text(hostile if hostile.startswith("lbench") else f"lbench idle -m {hostile}")
    assert len(text.splitlines()) == 1
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "RECORD_DIR": str(record), "HOME": str(box)}
    subprocess.run([BASH, "-c", text], cwd=box, env=env, capture_output=True, timeout=300)
    _no_pwned(box, tmp_path)


def test_evidence_command_not_from_lbench_is_shown_as_a_comment():
    from harness.report.evidence import command_text

    assert command_text("touch pwned").startswith("#")
    assert command_text("/venv/bin/lbench idle -m tiny-q8") == "/venv/bin/lbench idle -m tiny-q8"
    assert command_text(["lbench"]).startswith("#")


def test_fence_cannot_be_closed_by_its_text():
    lines = shell.fence("a\n```\n<img src=x onerror=alert(1)>\n````", "sh")
    assert lines[0] == "`````sh" and lines[-1] == "`````"


@pytest.mark.engine
def test_a_real_storm_recipe_with_a_hostile_model_name_reruns_safely(engine_env, tmp_path):
    """End to end: `lbench repro` of a storm on a model file named ``a'$(touch pwned)'.gguf`` (the
    issue's case), then its recipe.sh run with bash against the real llama-server router in a
    sandbox folder: it finishes (every wave waits for its own requests only), the router serves
    the hostile name, and no ``pwned`` file appears."""
    import socket

    from harness.models import presets
    from harness.models.synth import synthesize

    models = tmp_path / "models"
    models.mkdir()
    hostile = synthesize(presets.get_shape("tiny"), presets.get_quant("q8"), models / "a'$(touch pwned)'.gguf").path
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "storm.toml").write_text(
        'id = "hostile-storm"\nclaim = "x"\nsource = { seed = "s.txt", statement = "s" }\nscenario = "storm"\n'
        f"[params]\nmodels = [{json.dumps(str(hostile))}, \"tiny-q4\"]\nmodels_max = 1\nrequests = 4\n"
        '[[check]]\nfigure = "peak_children"\nop = "<="\nvalue = 1\n')
    box = tmp_path / "box"
    box.mkdir()
    r = subprocess.run([os.sys.executable, "-m", "harness", "repro", "hostile-storm"], cwd=box, capture_output=True,
                       text=True, timeout=600, env={**os.environ, **engine_env, "LBENCH_CLAIMS": str(claims)})
    assert r.returncode in (0, 1), r.stderr[-3000:]
    (recipe,) = Path(engine_env["LBENCH_RESULTS_DIR"]).glob("*/claims/hostile-storm/recipe.sh")
    _no_pwned(box, tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the models as a maintainer points at them (MODEL_n, the recipe's own variables)
    q4 = Path(engine_env["LBENCH_CACHE_DIR"]) / "models" / "synthetic-tiny-q4-seed0.gguf"
    done = subprocess.run([BASH, str(recipe)], cwd=box, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PORT": str(port), "TMPDIR": str(box), "MODEL_1": str(hostile),
                               "MODEL_2": str(q4)})
    _no_pwned(box, tmp_path, Path.cwd())
    assert "logs in" in done.stdout, done.stderr[-3000:]
    assert "verdict: the claim" in done.stdout.strip().splitlines()[-1], done.stdout[-2000:]
    work = Path(done.stdout.split("logs in ", 1)[1].splitlines()[0])
    log = (work / "router.stderr.log").read_text(errors="replace")
    # the router served the waves' requests for the model under its hostile name
    assert "proxying request to model a'$(touch pwned)'" in log, log[-3000:]


@pytest.mark.parametrize("hostile", [h for h in HOSTILE if h])
def test_the_printed_rebuild_command_runs_as_printed(tmp_path, hostile, monkeypatch):
    """The rebuild hint of a damaged engine (a line people paste into a shell) with hostile
    CMAKE_ARGS: an `lbench` stand-in gets exactly the install words and CMAKE_ARGS that split
    back to the same cmake arguments; nothing else runs."""
    import shlex

    from harness.engines import provision

    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path / "cache"))
    plan = provision.plan_build(shlex.join([f"-DX={hostile}", "-DGGML_CUDA=ON"]), build=10500)
    cmd = provision.rebuild_command(plan)
    assert len(cmd.splitlines()) == 1 or any(c in hostile for c in "\n\r")  # only inside its quotes
    box, stubs, record = _sandbox(tmp_path)
    _stub(stubs / "lbench", 'printf "%s\\0" "$CMAKE_ARGS" "$@" > "$RECORD_DIR/0.lbench"\n')
    subprocess.run([BASH, "-c", cmd], cwd=box, env={"PATH": f"{stubs}:/usr/bin:/bin", "RECORD_DIR": str(record)},
                   capture_output=True, timeout=300)
    _no_pwned(box, tmp_path)
    (got,) = _records(record, ".lbench")
    assert shlex.split(got[0]) == plan.extra_cmake_args
    assert got[1:] == ["engine", "install", "--force", "--build", "10500"]
