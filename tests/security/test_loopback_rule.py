"""The loopback rule (issue 26, class 2): arguments, environment variables and preset keys that
would choose the address, the port, the model or the preset are refused with exit 2 and the
reason, whatever option they come through, before any run directory exists.  No server is
started: every refusal happens while the spec is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines import reserved
from harness.engines.router import RouterModel, preset_ini
from harness.errors import BadInput
from conftest import run_cli

FORMS = ["--host", "--host=0.0.0.0", "--ho", "--port", "--port=80", "--po", "-m", "--model", "--model=x.gguf",
         "--models-dir", "--models-preset", "--models_preset", "--reuse-port", "-hf", "--hf-repo", "-mu",
         "--model-url", "-dr", "--mo"]
ALLOWED = ["--threads", "-t", "4", "--models-max", "--mmproj", "-c", "2048", "--no-webui", "-lv", "--poll",
           "0.0.0.0", "::", "--parallel", "-np", "--sleep-idle-seconds"]


@pytest.mark.parametrize("arg", FORMS)
def test_every_form_of_a_reserved_flag_is_refused(arg):
    with pytest.raises(BadInput, match="reserved"):
        reserved.check_args(["--threads", "2", arg, "0.0.0.0"], "--server-arg")


def test_other_flags_and_values_pass():
    reserved.check_args(ALLOWED, "--server-arg")


@pytest.mark.parametrize("key", ["LLAMA_ARG_HOST", "LLAMA_ARG_PORT", "llama_arg_host", "LLAMA_ARG_MODEL",
                                 "LLAMA_ARG_MODELS_PRESET", "LLAMA_ARG_HF_REPO"])
def test_reserved_environment_is_refused(key):
    with pytest.raises(BadInput, match="reserved"):
        reserved.check_env({key: "0.0.0.0"}, "router environment")


@pytest.mark.parametrize("key", ["host", "port", "model", "m", "LLAMA_ARG_HOST", "models-preset", "hf-repo"])
def test_reserved_preset_keys_are_refused(tmp_path, key):
    with pytest.raises(BadInput, match="reserved"):
        preset_ini([RouterModel("a", tmp_path / "a.gguf")], ctx_size=512, parallel=1, global_extra={key: "x"})
    with pytest.raises(BadInput, match="reserved"):
        preset_ini([RouterModel("a", tmp_path / "a.gguf", extra=((key, "x"),))], ctx_size=512, parallel=1)


def test_preset_keys_and_values_stay_on_their_line(tmp_path):
    for extra in ((("load-on-startup", "true\nhost = 0.0.0.0"),), (("a\n[*]\nhost", "x"),)):
        with pytest.raises(BadInput, match="preset INI cannot hold"):
            preset_ini([RouterModel("a", tmp_path / "a.gguf", extra=extra)], ctx_size=512, parallel=1)


def test_start_points_refuse_too(tmp_path):
    """The check where servers start (a caller that skipped the spec still cannot break the rule)."""
    from harness.engines.llama_server import LlamaServerEngine
    from harness.engines.binary import Binary
    from harness.engines.router import RouterProcess

    binary = Binary(tmp_path / "llama-server", "test", "v", 1, "c", "0")
    with pytest.raises(BadInput, match="reserved"):
        LlamaServerEngine(binary, extra_args=["--host", "0.0.0.0"])
    with pytest.raises(BadInput, match="reserved"):
        RouterProcess(binary, [], models_max=2, run_dir=tmp_path, extra_args=["--port=80"])
    with pytest.raises(BadInput, match="reserved"):
        RouterProcess(binary, [], models_max=2, run_dir=tmp_path, extra_env={"LLAMA_ARG_HOST": "::"})
    with pytest.raises(BadInput, match="environment variable name"):
        RouterProcess(binary, [], models_max=2, run_dir=tmp_path, extra_env={"A;touch pwned": "1"})
    assert not (tmp_path / "preset.ini").exists()


def _refused(r, results: Path) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "reserved" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not results.exists() or not any(results.iterdir()), list(results.iterdir())


@pytest.mark.parametrize("args", [
    ["idle", "-m", "tiny-q8", "--server-arg", "--host", "--server-arg", "0.0.0.0"],
    ["idle", "-m", "tiny-q8", "--server-arg=--port=8080"],
    ["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--server-arg", "--host", "--server-arg", "::"],
    ["ab", "-m", "tiny-q8", "--b-arg", "--host", "--b-arg", "0.0.0.0"],
    ["ab", "-m", "tiny-q8", "--a-arg", "-m", "--a-arg", "/other.gguf"],
], ids=["idle", "idle-port", "swap", "ab-b", "ab-a"])
def test_every_command_refuses_before_a_run_directory(lbench_env, args):
    _refused(run_cli(*args, env=lbench_env, timeout=120), Path(lbench_env["LBENCH_RESULTS_DIR"]))


@pytest.mark.parametrize("kind,text", [
    ("idle", '[idle]\nmodels = ["tiny-q8"]\nserver_args = ["--host", "0.0.0.0"]\n'),
    ("swap", '[swap]\nmodels = ["tiny-q8", "tiny-q4"]\nserver_args = "--models-preset=/tmp/p.ini"\n'),
])
def test_spec_files_refuse(lbench_env, tmp_path, kind, text):
    spec = tmp_path / f"{kind}.toml"
    spec.write_text(text)
    _refused(run_cli(kind, "--spec", str(spec), env=lbench_env, timeout=120), Path(lbench_env["LBENCH_RESULTS_DIR"]))


@pytest.mark.parametrize("params", ['reserved = { LLAMA_ARG_HOST = "0.0.0.0" }',
                                    'server_args = ["--port", "80"]'])
def test_claim_params_refuse(lbench_env, tmp_path, params):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "c.toml").write_text(
        'id = "c"\nclaim = "x"\nsource = { seed = "s.txt", statement = "s" }\nscenario = "env-models-max"\n'
        f'[params]\nmodels = ["tiny-q8", "tiny-q4"]\n{params}\n')
    r = run_cli("repro", "c", env={**lbench_env, "LBENCH_CLAIMS": str(claims)}, timeout=120)
    _refused(r, Path(lbench_env["LBENCH_RESULTS_DIR"]))
