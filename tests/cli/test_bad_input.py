"""Bad input: a clear message, exit 2, and nothing written to results/."""

from pathlib import Path

import pytest
from conftest import run_cli

from harness.models import presets
from harness.models.synth import synthesize


def _no_results(env):
    results = Path(env["LBENCH_RESULTS_DIR"])
    return not results.exists() or not any(results.iterdir())


@pytest.fixture
def tiny_file(tmp_path):
    return synthesize(presets.get_shape("tiny"), presets.get_quant("q8"), tmp_path / "tiny.gguf").path


def test_unknown_alias(engine_env):
    r = run_cli("idle", "-m", "llama9-400b-q8", env=engine_env)
    assert r.returncode == 2 and "unknown model alias 'llama9-400b-q8'" in r.stderr and "tiny-q8" in r.stderr
    assert _no_results(engine_env)


def test_missing_file(engine_env):
    r = run_cli("idle", "-m", "/nope/model.gguf", env=engine_env)
    assert r.returncode == 2 and "model file not found" in r.stderr and _no_results(engine_env)


def test_not_gguf(engine_env, tmp_path):
    f = tmp_path / "readme.gguf"
    f.write_text("not a model")
    r = run_cli("idle", "-m", str(f), env=engine_env)
    assert r.returncode == 2 and "not a GGUF file" in r.stderr and _no_results(engine_env)


def test_truncated_gguf(engine_env, tmp_path, tiny_file):
    f = tmp_path / "cut.gguf"
    f.write_bytes(tiny_file.read_bytes()[:-500])
    r = run_cli("idle", "-m", str(f), env=engine_env)
    assert r.returncode == 2 and "truncated GGUF" in r.stderr and _no_results(engine_env)


@pytest.mark.parametrize("pauses,fragment", [("-1", "negative"), ("0,abc", "not a number")])
def test_bad_pauses(engine_env, pauses, fragment):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", pauses, env=engine_env)
    assert r.returncode == 2 and fragment in r.stderr and "--pauses" in r.stderr and _no_results(engine_env)


def test_bad_keep_alive_and_reps(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--keep-alive", "forever", env=engine_env)
    assert r.returncode == 2 and "keep-alive" in r.stderr and _no_results(engine_env)
    r = run_cli("idle", "-m", "tiny-q8", "--reps", "zero", env=engine_env)
    assert r.returncode == 2 and _no_results(engine_env)


def test_bad_llama_server_path(lbench_env):
    r = run_cli("idle", "-m", "tiny-q8", "--llama-server", "/nope/llama-server", env=lbench_env)
    assert r.returncode == 2 and "not found or not executable" in r.stderr and _no_results(lbench_env)


def test_report_of_unknown_run(lbench_env):
    r = run_cli("report", "nope", env=lbench_env)
    assert r.returncode == 2 and "no run 'nope'" in r.stderr


def test_help_has_examples():
    for cmd in (["idle"], ["swap"], ["repro"], ["compare"], ["gate"], ["evidence"], ["gate-bench"], ["baseline", "save"], ["calibrate"], ["report"], ["runs"], ["engine", "install"], ["engine", "info"],
                ["model", "synth"], ["model", "info"], ["model", "list"]):
        r = run_cli(*cmd, "--help")
        assert r.returncode == 0 and "Examples" in r.stdout, cmd
