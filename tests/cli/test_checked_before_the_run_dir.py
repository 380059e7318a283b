"""Exit 2 means nothing was written: the checks that need resolved models or the engine also run
before the run directory exists (issue 12, class 4)."""

import shutil
import socket
from pathlib import Path

import pytest
from conftest import run_cli

from harness.models import presets
from harness.models.synth import synthesize
from harness.runs import preflight


def _nothing_written(env) -> bool:
    results = Path(env["LBENCH_RESULTS_DIR"])
    return not results.exists() or not any(results.iterdir())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.engine
def test_swap_model_name_the_router_preset_cannot_hold(engine_env, tmp_path):
    odd = synthesize(presets.get_shape("tiny"), presets.get_quant("q8"), tmp_path / "semi;colon.gguf").path
    r = run_cli("swap", "-m", str(odd), "-m", "tiny-q4", "--requests", "2", "--no-report", env=engine_env)
    assert r.returncode == 2 and "preset INI cannot hold" in r.stderr, r.stderr
    assert _nothing_written(engine_env)


def test_external_server_url_where_nothing_answers(lbench_env):
    r = run_cli("idle", "--engine", "openai", "--url", f"http://127.0.0.1:{_closed_port()}", "-m", "some-model",
                "--no-report", env=lbench_env)
    assert r.returncode == 2 and "nothing answers at" in r.stderr and "--url" in r.stderr
    assert _nothing_written(lbench_env)
    r = run_cli("idle", "--engine", "openai", "--url", "http://127.0.0.1:99999", "-m", "m", env=lbench_env)
    assert r.returncode == 2 and "bad port" in r.stderr and _nothing_written(lbench_env)


def test_cache_state_with_an_engine_whose_models_live_on_the_server(lbench_env):
    with socket.socket() as listener:  # something answers at the URL: the cache state is what is wrong
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        r = run_cli("idle", "--engine", "openai", "--url", url, "-m", "some-model", "--cache-state", "cold",
                    env=lbench_env)
    assert r.returncode == 2 and "cannot take a cache state" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and _nothing_written(lbench_env)


@pytest.mark.engine
@pytest.mark.parametrize("option", ["--cpus", "--client-cpus"])
def test_cpu_lists_naming_cpus_this_machine_lacks(engine_env, option):
    r = run_cli("idle", "-m", "tiny-q8", option, "4095", "--reps", "1", "--pauses", "0", env=engine_env)
    assert r.returncode == 2 and "does not offer: 4095" in r.stderr and option in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and _nothing_written(engine_env)


@pytest.mark.engine
@pytest.mark.parametrize("line,fragment", [
    ('client_nice = "high"', "client_nice has the wrong type"),
    ('shuffle = "no"', "shuffle has the wrong type"),
    ("reps = 2.5", "reps has the wrong type"),
    ("models = [5]", "models has the wrong type"),
    ('request_timeout_s = "soon"', "request_timeout_s has the wrong type"),
    ("request_timeout_s = 0", "request_timeout_s must be seconds"),
])
def test_spec_values_of_the_wrong_type(engine_env, tmp_path, line, fragment):
    spec = tmp_path / "bad.toml"
    spec.write_text(f"[idle]\n{line}\n")
    r = run_cli("idle", "--spec", str(spec), env=engine_env)
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _nothing_written(engine_env)


def test_cpu_range_is_bounded_before_it_is_expanded():
    with pytest.raises(Exception, match="too wide"):
        preflight.check_cpus("0-100000000000", "--cpus")
    if shutil.which("taskset"):
        preflight.check_cpus("0", "--cpus")  # CPU 0 is always there


@pytest.mark.engine
@pytest.mark.parametrize("command,args,fragments", [
    # unknown flags are refused by the allow-list (harness/engines/server_policy.py) before the binary is asked
    ("idle", ["--server-arg", "--no-such-flag"], ["'--no-such-flag' is refused", "not on lbench's list", "--server-arg"]),
    ("swap", ["--server-arg", "--ctx-sise", "--server-arg", "256"],
     ["'--ctx-sise' is refused", "did you mean --ctx-size"]),
    ("swap", ["--server-arg=--threads=1", "--server-arg", "-zz"], ["'-zz' is refused"]),
    ("idle", ["--ctx-size", "100000000"], ["ctx_size must be an integer >= 64 and <= 16777216", "--ctx-size"]),
    ("idle", ["--ctx-size", "4096"], ["larger than the 2048 tokens model tiny-q8 was trained for",
                                      "--ctx-size 2048 or less"]),
    ("swap", ["--server-arg", "-c", "--server-arg", "99999999999"], ["context size must be an integer",
                                                                     "--server-arg -c/--ctx-size"]),
    ("swap", ["--server-arg", "--ctx-size=lots"], ["context size must be an integer from 1", "'lots'"]),
])
def test_unknown_server_flags_and_absurd_context_sizes(engine_env, command, args, fragments):
    """The allow-list, then the real binary's --help, decide which flags pass; the GGUF's context_length bounds the context."""
    base = ["-m", "tiny-q8", "--reps", "1", "--pauses", "0"] if command == "idle" else \
        ["-m", "tiny-q8", "-m", "tiny-q4", "-n", "2"]
    r = run_cli(command, *base, *args, "--no-report", env=engine_env)
    assert r.returncode == 2, r.stderr + r.stdout
    text = " ".join(r.stderr.split())  # the message may wrap at 80 columns
    for fragment in fragments:
        assert fragment in text, r.stderr
    assert "Traceback" not in r.stderr and _nothing_written(engine_env)


@pytest.mark.engine
def test_known_server_flags_and_a_trained_context_pass(engine_env, engine_binary):
    from harness.engines import server_flags

    flags = server_flags.known_flags(engine_binary)  # parsed from the real --help, then cached
    assert {"-c", "--ctx-size", "--threads", "--no-webui", "--models-max", "-lv"} <= flags
    assert server_flags.HELP_CACHE.get(engine_binary) == sorted(flags)
    server_flags.check_run(engine_binary, 2048, ["--threads", "1", "-lv", "4", "--cpu-range", "0-0", "-t", "-1"],
                           [("tiny-q8", 2048)])
    server_flags.check_run(engine_binary, 512, ["-c", "0"], [("tiny-q8", 2048)])  # 0: the model's own


def test_the_bundled_ollama_grid_without_ollama(lbench_env):
    """`lbench idle --spec ollama-keep-alive` (the grid straddling 180 s and 300 s) loads and, with no Ollama
    answering and none on PATH (none is installed on this machine), stops before a run directory: exit 2, the fix."""
    if shutil.which("ollama"):
        pytest.skip("an `ollama` is on PATH: lbench would start it (this check needs a machine without Ollama)")
    r = run_cli("idle", "--spec", "ollama-keep-alive", "--ollama-url", f"http://127.0.0.1:{_closed_port()}",
                "--no-report", env=lbench_env)
    assert r.returncode == 2, r.stderr
    assert "no Ollama answers at" in r.stderr and "not on PATH" in r.stderr and "start Ollama" in r.stderr
    assert "Traceback" not in r.stderr and _nothing_written(lbench_env)
