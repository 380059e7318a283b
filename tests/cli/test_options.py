"""Shared options are declared once; experiment defaults come from the spec classes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from conftest import REPO, run_cli
from harness.cli import app
from harness.cli.options import default, shown
from harness.spec import IdleSpec, SwapSpec


def _commands():
    def walk(command, path):
        if hasattr(command, "params") and not hasattr(command, "commands"):
            yield " ".join(path), command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, path + [name])
    return dict(walk(typer.main.get_command(app), []))


def _option(command, flag: str):
    return next((p for p in command.params if flag in getattr(p, "opts", [])), None)


# `engine install --build N` builds one build, `gate --build N` picks the history baseline's build:
# other options under the same name
# (ab's --margin is the gate job's: per pause too, e.g. 0=0.03,1=0.10, with the job's own default)
OTHER_MEANING = {"--build": {"engine install", "gate"}, "--margin": {"ab"}}


@pytest.mark.parametrize("flag", ["--results", "--llama-server", "--report", "--build", "--margin"])
def test_shared_option_has_one_help_text(flag):
    found = {name: _option(cmd, flag) for name, cmd in _commands().items()
             if name not in OTHER_MEANING.get(flag, set())}
    found = {name: opt for name, opt in found.items() if opt is not None}
    assert len(found) >= 2, f"{flag} is used by {sorted(found)}"
    helps = {opt.help for opt in found.values()}
    assert len(helps) == 1, f"{flag} has several help texts: {helps}"


def test_every_command_that_reads_runs_takes_results():
    commands = _commands()
    for name in ("idle", "swap", "repro", "calibrate", "report", "runs", "compare", "gate", "gate-bench",
                 "evidence", "ab", "bisect", "baseline save"):
        assert _option(commands[name], "--results") is not None, name


def test_swap_options_leave_defaults_to_swapspec():
    # None = not given, so a --spec file's values are not overridden; the help names SwapSpec's default
    swap = _commands()["swap"]
    checked = 0
    for param in swap.params:
        if param.name in {f.name for f in dataclasses.fields(SwapSpec)}:
            assert param.default in (None, False) or param.default == [], (param.name, param.default)
            checked += 1
    assert checked >= 10
    assert _option(swap, "--models-max").help.endswith(shown(SwapSpec().models_max))


def test_idle_options_leave_defaults_to_the_spec():
    idle = _commands()["idle"]
    fields = {f.name for f in dataclasses.fields(IdleSpec)}
    spec_options = [p for p in idle.params if p.name in fields]
    assert len(spec_options) >= 10
    for param in spec_options:
        assert param.default in (None, False) or param.default == [], (param.name, param.default)
    assert _option(idle, "--reps").help.endswith(shown(IdleSpec().reps))


def test_default_reads_factories_and_rejects_unknown_fields():
    assert default(SwapSpec, "models") == SwapSpec().models
    with pytest.raises(KeyError):
        default(SwapSpec, "no_such_field")


def _flat(text: str) -> str:  # rich wraps long titles
    return "".join(text.split())


def test_results_dir_comes_from_env_then_option(tmp_path):
    env_dir, opt_dir = tmp_path / "from-env", tmp_path / "from-option"
    for d in (env_dir, opt_dir, tmp_path / "results"):
        d.mkdir()
    env = {"LBENCH_RESULTS_DIR": str(env_dir)}
    listed = run_cli("runs", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert str(env_dir) in _flat(listed.stdout)
    listed = run_cli("runs", "--results", str(opt_dir), env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert str(opt_dir) in _flat(listed.stdout) and str(env_dir) not in _flat(listed.stdout)
    clean = {k: v for k, v in os.environ.items() if k != "LBENCH_RESULTS_DIR"}
    proc = subprocess.run([sys.executable, "-m", "harness", "runs"], capture_output=True, text=True, cwd=tmp_path,
                          env={**clean, "COLUMNS": "300", "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "results") in _flat(proc.stdout)


def test_runs_in_a_missing_results_dir_is_an_error_not_an_empty_table(tmp_path):
    listed = run_cli("runs", "--results", str(tmp_path / "nope"), cwd=tmp_path)
    assert listed.returncode == 2 and "no results directory" in listed.stderr and "lbench idle" in listed.stderr


def test_version_without_engine_says_not_built(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LBENCH_LLAMA_SERVER"}
    env.update(LBENCH_CACHE_DIR=str(tmp_path / "cache"), PATH=str(tmp_path / "bin"), COLUMNS="300",
               PYTHONPATH=str(REPO))
    (tmp_path / "bin").mkdir()
    proc = subprocess.run([sys.executable, "-m", "harness", "--version"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import harness

    lines = proc.stdout.splitlines()
    assert lines[0] == f"lbench {harness.__version__}"
    assert "not built" in lines[1]
    assert not (tmp_path / "cache" / "engines").exists() or not any((tmp_path / "cache" / "engines").iterdir())


@pytest.mark.engine
def test_version_names_the_engine_build(engine_env, engine_binary):
    proc = run_cli("--version", env=engine_env)
    assert proc.returncode == 0, proc.stderr
    assert "llama-server build 11434" in proc.stdout
    assert str(Path(engine_binary).resolve()) in proc.stdout.replace("\n", "")


def test_device_goes_to_each_side_whose_backend_selects_devices(monkeypatch):
    """lbench ab --a-backend cpu --b-backend vulkan --device 0: the Vulkan side gets its selection
    variable; --device is refused only when no side's backend takes a device."""
    from harness.cli.options import select_device
    from harness.errors import BadInput

    for var in ("GGML_VK_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        # set, then delete: monkeypatch restores only what it recorded, and delenv of an absent
        # variable records nothing, so what select_device sets would leak into later tests
        monkeypatch.setenv(var, "unset-by-test")
        monkeypatch.delenv(var)
    select_device("cpu", 0, None, ("vulkan", None))
    assert os.environ["GGML_VK_VISIBLE_DEVICES"] == "0" and "CUDA_VISIBLE_DEVICES" not in os.environ
    select_device("cuda", 1, None, ("vulkan", None))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1" and os.environ["GGML_VK_VISIBLE_DEVICES"] == "1"
    with pytest.raises(BadInput, match="cannot select a cpu and metal device"):
        select_device("cpu", 0, None, ("metal", None))
    with pytest.raises(BadInput, match="must be >= 0"):
        select_device("vulkan", -1, None)
