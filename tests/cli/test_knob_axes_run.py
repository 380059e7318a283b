"""`lbench idle` with an env axis, a server-args axis and prompt evaluation, on the real llama-server;
bad backends, devices and axes are exit 2 with nothing written."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli


def _nothing_written(env: dict[str, str]) -> bool:
    results = Path(env["LBENCH_RESULTS_DIR"])
    return not results.exists() or not any(results.iterdir())


@pytest.mark.engine
def test_env_server_args_and_prompt_axes_become_cells(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.05", "--reps", "2", "--warmup", "1", "--self-check", "0",
                "--env-axis", "GGML_VK_KEEPALIVE_MS=unset,30000", "--server-args-axis", "none",
                "--server-args-axis=--batch-size 256", "--prompt-tokens", "0,16", "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    m = json.loads((run_dir / "manifest.json").read_text())
    assert len(m["cells"]) == 8 and m["engine"]["backend"] == "cpu"
    for cell in m["cells"]:
        knobs = cell["axis_knobs"]
        assert (cell["env_overrides"].get("GGML_VK_KEEPALIVE_MS") == "30000") == \
            (knobs["env"]["GGML_VK_KEEPALIVE_MS"] == "30000")
        assert ("--batch-size" in cell["argv"]) == (knobs["server_args"] == ["--batch-size", "256"])
    samples = pd.read_parquet(run_dir / "samples.parquet")
    measured = samples[(samples["phase"] == "measure") & samples["error"].isna()]
    assert len(measured) == 8 * 2 * 2
    assert set(measured["knob_env"]) == {"GGML_VK_KEEPALIVE_MS=unset", "GGML_VK_KEEPALIVE_MS=30000"}
    assert set(measured["knob_server_args"]) == {"none", "--batch-size 256"}
    prompt = measured[measured["prompt_tokens"] == 16]
    assert set(prompt["server_prompt_n"]) == {16} and (prompt["server_prompt_per_second"] > 0).all()
    assert set(measured.loc[measured["prompt_tokens"] == 0, "server_prompt_n"]) == {1}
    from harness.analysis.frames import json_frame

    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert json_frame(analysis["summary_latency"])["setting"].nunique() == 8  # each axis value its own group
    assert len(analysis["headline"]) == 8  # the wake model answers for each cell


@pytest.mark.parametrize("args, words", [
    (["idle", "--backend", "nosuch"], "unknown backend 'nosuch'"),
    (["idle", "-m", "tiny-q8", "--backend", "cuda"], "no cuda build"),
    (["idle", "-m", "tiny-q8", "--env-axis", "LLAMA_ARG_HOST=0.0.0.0"], "reserved"),
    (["idle", "-m", "tiny-q8", "--server-args-axis=--host 0.0.0.0"], "reserved"),
    (["idle", "-m", "tiny-q8", "--prompt-tokens", "0,x"], "bad prompt length"),
    (["swap", "--env-axis", "LLAMA_ARG_PORT=1,2"], "reserved"),
    (["engine", "install", "--backend", "nosuch"], "unknown backend"),
    (["ab", "-m", "tiny-q8", "--b-backend", "hip"], "no hip build"),
    (["bisect", "--gate", "--from", "11434", "--to", "11434", "--builds", "11434", "--backend", "nosuch"],
     "unknown backend 'nosuch'"),
])
def test_bad_backend_and_axes_are_exit_2_with_nothing_written(lbench_env, args, words):
    r = run_cli(*args, env=lbench_env)
    assert r.returncode == 2, r.stderr + r.stdout
    assert words in " ".join(r.stderr.split())
    assert _nothing_written(lbench_env)


@pytest.mark.engine
def test_device_on_the_cpu_backend_is_refused(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--device", "0", "--pauses", "0", env=engine_env)
    assert r.returncode == 2 and "cannot select a cpu device" in " ".join(r.stderr.split())
    assert _nothing_written(engine_env)


@pytest.mark.engine
def test_swap_runs_one_storm_per_env_value(engine_env):
    r = run_cli("swap", "-m", "tiny-q8", "-m", "tiny-q4", "-n", "4", "--env-axis", "GGML_VK_KEEPALIVE_MS=unset,30000",
                "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    runs = sorted(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    configs = [json.loads((d / "manifest.json").read_text())["config"] for d in runs]
    assert sorted(c["env"][0] for c in configs) == ["GGML_VK_KEEPALIVE_MS=30000", "GGML_VK_KEEPALIVE_MS=unset"]
    assert all(c["name"].startswith("swap GGML_VK_KEEPALIVE_MS=") for c in configs)


@pytest.mark.engine
def test_swap_runs_one_storm_per_server_args_value(engine_env):
    """--server-args-axis on a swap storm: one short storm per set of arguments, the arguments on the
    router's command line and, by the router's own log, on every child it spawned."""
    r = run_cli("swap", "-m", "tiny-q8", "-m", "tiny-q4", "-n", "4", "--server-args-axis", "none",
                "--server-args-axis=--batch-size 256", "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    runs = {json.loads((d / "manifest.json").read_text())["config"]["name"]: d
            for d in Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir()}
    assert sorted(runs) == ["swap args=--batch-size 256", "swap args=none"]
    for name, run_dir in runs.items():
        m = json.loads((run_dir / "manifest.json").read_text())
        given = name.endswith("256")
        assert m["config"]["server_args"] == (["--batch-size", "256"] if given else [])
        assert m["router"]["argv"][-2:] == ["--batch-size", "256"] if given else "--batch-size" not in m["router"]["argv"]
        log = (run_dir / "logs" / "router.stderr.log").read_text()
        spawned = log.count("spawning server instance with args:")
        assert spawned >= 2 and log.count("load:   --batch-size") == (spawned if given else 0)
        assert len(pd.read_parquet(run_dir / "requests.parquet")) == 4
