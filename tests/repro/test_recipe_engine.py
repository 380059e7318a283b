"""A claim's recipe.sh, run for real: ``lbench repro`` judges the claim on the real router, then
bash runs the written recipe against a fresh router of its own (LLAMA_SERVER the cached binary,
the models made with the generator commands the recipe names) and must print lbench's verdict
and exit 0."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from harness.engines.loopback import free_port

pytestmark = [pytest.mark.engine, pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")]

# a reply's body, children counted, log lines; a frozen child, a wait for a log line, time marks; a router
# that refuses to start; statuses from /models/sse; the victim named by the log; two routers in one recipe
CLAIMS = {"router-limit-reached": "holds", "router-default-cap-4": "holds", "router-stop-timeout": "holds",
          "router-startup-exceeds": "holds", "router-sleeping-keeps-slot": "holds",
          "router-victim-lru-get": "contradicted", "router-no-cap-startup": "contradicted",
          # figure objects of harness/repro/figures.py the ones above do not reach: LogBefore after a mark,
          # LogCountBefore, SseSent, FirstEvicted after a mark (wanted-victim); LruRounds (lru-order)
          "router-victim-not-wanted": "holds", "router-victim-lru": "holds"}
WORDS = {"holds": "holds", "contradicted": "does not hold"}


def test_claim_recipes_reproduce_the_verdict_without_lbench(engine_env, engine_binary, tmp_path):
    r = run_cli("repro", *CLAIMS, env=engine_env, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet").set_index("claim_id")["verdict"]
    for claim, verdict in CLAIMS.items():
        assert verdicts[claim] == verdict, (claim, verdicts[claim])
        claim_dir = run_dir / "claims" / claim
        recipe = claim_dir / "recipe.sh" if (claim_dir / "recipe.sh").is_file() else claim_dir / "rep-1" / "recipe.sh"
        text = recipe.read_text()
        assert "/.cache/" not in text.replace(str(engine_binary), "")  # the models are not named by the cache
        box = tmp_path / claim
        box.mkdir()
        # the maintainer makes the models with the generator commands the recipe names
        commands = re.findall(r"^#   lbench model synth (.+)$", text, flags=re.M)
        assert commands, text[:2000]
        for command in commands:
            made = run_cli("model", "synth", *command.split(), env=engine_env, cwd=box, timeout=300)
            assert made.returncode == 0, made.stderr
        env = {**os.environ, "LLAMA_SERVER": str(engine_binary), "PORT": str(free_port()), "TMPDIR": str(box)}
        done = subprocess.run(["bash", str(recipe)], cwd=box, env=env, capture_output=True, text=True, timeout=300)
        assert "is not the file measured" not in done.stderr  # the generator made the same bytes
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        lines = done.stdout.strip().splitlines()
        word = WORDS[verdict]
        assert lines[-1] == f"verdict: the claim {word} (lbench found: {word}): reproduced", lines[-8:]
        if claim != "router-no-cap-startup":  # one router: its children sampled
            assert any(line.startswith("  peak_children: ") for line in lines)
        else:  # two routers, one recipe: the control starts, the uncapped one is refused on this build
            assert "the router started" in lines and any(line.startswith("the router did not start") for line in lines)


IDLE_SPEC = """id = "idle-tiny-equivalence"
claim = "a one-token request after a 0.5 s pause is as fast as after a short one (test spec)"
source = { seed = "002_2cb27210bd1007e6.txt", statement = "test" }
requires = ["cpu"]
scenario = "idle-equivalence"
[params]
models = ["tiny-q8"]
short_pauses_s = [0.0, 0.05]
long_pauses_s = [0.5]
reps = 5
starts = 2
margin = 0.10
[[check]]
figure = "groups_slower"
op = "=="
value = 0
[[check]]
figure = "groups_undecided"
op = "=="
value = 0
undecided = true
"""


def test_an_idle_equivalence_recipe_measures_and_decides_without_lbench(engine_env, engine_binary, tmp_path):
    """The recipe starts llama-server twice, times the pauses with curl and decides in awk; the verdict of
    a timing claim is a new measurement, so the test asks for a verdict line and exit 0 or 1, not agreement."""
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "idle-tiny-equivalence.toml").write_text(IDLE_SPEC)
    r = run_cli("repro", "idle-tiny-equivalence", env={**engine_env, "LBENCH_CLAIMS": str(claims)}, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    recipe = run_dir / "claims" / "idle-tiny-equivalence" / "recipe.sh"
    text = recipe.read_text()
    box = tmp_path / "box"
    box.mkdir()
    for command in re.findall(r"^#   lbench model synth (.+)$", text, flags=re.M):
        assert run_cli("model", "synth", *command.split(), env=engine_env, cwd=box, timeout=300).returncode == 0
    env = {**os.environ, "LLAMA_SERVER": str(engine_binary), "PORT": str(free_port()), "TMPDIR": str(box)}
    done = subprocess.run(["bash", str(recipe)], cwd=box, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("verdict: the claim "), lines[-8:]
    assert "  groups: 1" in lines and any(line.startswith("  tiny-q8 pause=0.5s: ") for line in lines)
    samples = list(box.rglob("times.txt"))
    assert samples and len(samples[0].read_text().splitlines()) == 2 * 5 * 3  # starts x reps x pauses
