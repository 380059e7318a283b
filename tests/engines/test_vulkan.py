"""The Vulkan backend, built and driven for real: lbench's Vulkan build of the pinned llama.cpp on
the Vulkan device this machine has (Mesa's lavapipe on the project's VMs, a software device on the
CPU, admitted with --device 0).  Skipped only where no Vulkan loader, glslc or device can be had,
saying which."""

import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from harness.engines import devices, provision

pytestmark = pytest.mark.engine


@pytest.fixture(scope="session")
def vulkan_binary() -> Path:
    plan = provision.plan_build(backend="vulkan")
    if not plan.is_built():
        missing = [what for what, ok in (("the Vulkan loader (libvulkan1)", ctypes.util.find_library("vulkan")),
                                         ("glslc", shutil.which("glslc"))) if not ok]
        if missing:
            pytest.skip(f"no {' or '.join(missing)} here: the Vulkan engine cannot be built (apt-get install "
                        "glslc mesa-vulkan-drivers libvulkan-dev spirv-headers; scripts/setup.sh does it)")
        provision.install(plan, log=lambda s: print(f"[vulkan engine] {s}", file=sys.stderr, flush=True))
    binary = plan.binary("llama-server")
    if not devices.list_devices(binary, {**os.environ, "GGML_VK_VISIBLE_DEVICES": "0"})[0]:
        pytest.skip("no Vulkan device here, not even a software one (apt-get install mesa-vulkan-drivers)")
    return binary


@pytest.fixture
def vk_env(lbench_env, vulkan_binary, tmp_path, monkeypatch) -> dict[str, str]:
    """An isolated lbench whose engine cache is the real one (so --backend vulkan finds the build)."""
    (tmp_path / "cache").mkdir(exist_ok=True)
    (tmp_path / "cache" / "engines").symlink_to(vulkan_binary.parents[2], target_is_directory=True)
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)
    return {k: v for k, v in lbench_env.items()}


def _only_run(env: dict[str, str]) -> Path:
    (run_dir,) = list(Path(env["LBENCH_RESULTS_DIR"]).iterdir())
    return run_dir


def _nothing_written(env: dict[str, str]) -> bool:
    results = Path(env["LBENCH_RESULTS_DIR"])
    return not results.exists() or not any(results.iterdir())


def test_a_cpu_type_device_is_never_used_silently(vk_env, vulkan_binary):
    if devices.list_devices(vulkan_binary)[0]:
        pytest.skip("this machine has a Vulkan GPU ggml uses by default; the refusal is for CPU-type devices only")
    r = run_cli("idle", "-m", "tiny-q8", "--backend", "vulkan", "--pauses", "0", "--reps", "1", env=vk_env)
    assert r.returncode == 2, r.stderr + r.stdout
    text = " ".join((r.stderr + r.stdout).split())
    assert "sees no vulkan device" in text and "0 = llvmpipe" in text and "--device 0" in text
    assert _nothing_written(vk_env)
    r = run_cli("idle", "-m", "tiny-q8", "--backend", "vulkan", "--device", "7", "--pauses", "0", env=vk_env)
    assert r.returncode == 2 and "device index 7 (GGML_VK_VISIBLE_DEVICES=7) names no vulkan device" in " ".join(r.stderr.split())
    assert _nothing_written(vk_env)


def test_idle_sweep_with_prompt_evaluation_on_the_vulkan_device(vk_env):
    r = run_cli("idle", "-m", "tiny-q8", "--backend", "vulkan", "--device", "0", "--pauses", "0,0.5", "--reps", "2",
                "--warmup", "2", "--self-check", "2", "--prompt-tokens", "0,32", "--no-report", env=vk_env,
                timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    assert "device: backend vulkan: Vulkan0" in " ".join(r.stdout.split() + r.stderr.split())
    run_dir = _only_run(vk_env)
    m = json.loads((run_dir / "manifest.json").read_text())
    engine = m["engine"]
    assert engine["backend"] == "vulkan" and engine["device_used"] == ["Vulkan0"]
    assert engine["device_select"] == {"GGML_VK_VISIBLE_DEVICES": "0"}
    assert engine["backend_devices"][0]["backend"] == "vulkan" and engine["backend_devices"][0]["total_mib"] > 0
    if shutil.which("vulkaninfo"):
        assert engine["drivers"] and engine["drivers"][0]["deviceName"] in engine["backend_devices"][0]["description"]
    assert [c["setting"] for c in m["cells"]] == ["keep-alive=default", "keep-alive=default,prompt=32"]
    assert m["cells"][1]["axis_knobs"] == {"prompt_tokens": 32}
    samples = pd.read_parquet(run_dir / "samples.parquet")
    measured = samples[(samples["phase"] == "measure") & samples["error"].isna()]
    assert len(measured) == 2 * 2 * 2
    decode, prompt = (measured[measured["prompt_tokens"] == n] for n in (0, 32))
    assert set(decode["server_prompt_n"]) == {1}  # the cached one-token decode
    assert set(prompt["server_prompt_n"]) == {32} and (prompt["server_cache_n"] == 0).all()  # no cache reuse
    assert (prompt["server_prompt_per_second"] > 0).all()
    for cell in m["cells"]:  # the server itself loaded the Vulkan driver of that device
        assert any(lib.startswith("libvulkan_") for lib in cell["startup"]["driver_libs"]), cell["startup"]
    _rerun_scripts_select_the_device(vk_env, run_dir, 2)


def _rerun_scripts_select_the_device(env: dict[str, str], run_dir: Path, n_scripts: int) -> None:
    """lbench evidence's rerun scripts export the selection variable before the server starts."""
    out = run_dir.parent.parent / f"evidence-{run_dir.name}"
    r = run_cli("evidence", run_dir.name, "-o", str(out), env=env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    scripts = sorted(out.glob("rerun-*.sh"))
    assert len(scripts) == n_scripts
    for script in scripts:
        text = script.read_text()
        assert "# the device: backend vulkan, Vulkan0 (llvmpipe" in text, text[:2000]
        assert text.index("export GGML_VK_VISIBLE_DEVICES=0") < text.index('"$LLAMA_SERVER"')
        assert subprocess.run(["sh", "-n", str(script)]).returncode == 0


def test_swap_storm_on_the_vulkan_device(vk_env):
    r = run_cli("swap", "--backend", "vulkan", "--device", "0", "-m", "tiny-q8", "-m", "tiny-q4", "--models-max", "1",
                "-n", "6", "--no-report", env=vk_env, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    run_dir = _only_run(vk_env)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["engine"]["backend"] == "vulkan" and m["engine"]["device_used"] == ["Vulkan0"]
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert len(requests) == 6 and set(requests["http_status"]) == {200}
    _rerun_scripts_select_the_device(vk_env, run_dir, 1)


def _manifests(env: dict[str, str]) -> dict[str, dict]:
    return {d.name: json.loads((d / "manifest.json").read_text()) for d in Path(env["LBENCH_RESULTS_DIR"]).iterdir()}


def test_ab_runs_both_sides_on_the_vulkan_device(vk_env):
    r = run_cli("ab", "-m", "tiny-q8", "--backend", "vulkan", "--device", "0", "--pauses", "0,0.2", "--reps", "3",
                "--min-rounds", "3", "--max-rounds", "3", "--b-arg", "--threads", "--b-arg", "1", env=vk_env,
                timeout=1200)
    # a verdict, whatever it is
    assert r.returncode in (0, 1, 3, 4), r.stderr[-3000:] + r.stdout[-3000:]
    manifests = _manifests(vk_env)
    (job,) = [m for m in manifests.values() if m["kind"] == "ab"]
    sides = job["ab"]["outcome"]["run_ids"]  # the job names every arm's runs
    assert {arm: len(ids) for arm, ids in sides.items()} == {"a": 3, "b": 3, "aa": 3}
    assert sorted(i for ids in sides.values() for i in ids) == sorted(k for k, m in manifests.items() if m["kind"] == "idle")
    for side, run_ids in sides.items():
        for run_id in run_ids:
            engine = manifests[run_id]["engine"]
            assert engine["backend"] == "vulkan" and engine["device_used"] == ["Vulkan0"], (side, engine)
            assert engine["device_select"] == {"GGML_VK_VISIBLE_DEVICES": "0"}
            assert ("--threads" in manifests[run_id]["cells"][0]["argv"]) == (side == "b")


def test_bisect_gate_runs_its_steps_on_the_vulkan_device(vk_env):
    """The range's first build (cached for Vulkan) is measured on the device; a build not cached for
    Vulkan is 'not checkable here' with --no-install (a Vulkan build per step takes tens of minutes
    on this machine: docs/builds.md)."""
    last = provision.BUILD_NUMBER + 1  # not in the cache for Vulkan (no install asked)
    r = run_cli("bisect", "--gate", "--backend", "vulkan", "--device", "0", "-m", "tiny-q8", "--pauses", "0,0.2",
                "--reps", "2", "--from", str(provision.BUILD_NUMBER), "--to", str(last),
                "--builds", f"{provision.BUILD_NUMBER},{last}", "--no-install", "--retries", "0", env=vk_env,
                timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    text = " ".join(r.stdout.split())
    assert "device: backend vulkan: Vulkan0" in text and "1 of 2 candidate builds are not built for vulkan" in text
    assert f"an end of the range is undecided ({provision.BUILD_NUMBER}: not slower, {last}: not checkable here)" in text
    manifests = _manifests(vk_env)
    assert len(manifests) == 3  # the reference build measured three times (the gate's unit is the run)
    for m in manifests.values():
        assert m["engine"]["backend"] == "vulkan" and m["engine"]["device_used"] == ["Vulkan0"]
        assert m["engine"]["build_number"] == provision.BUILD_NUMBER
    r = run_cli("bisect", "--gate", "--backend", "vulkan", "-m", "tiny-q8", "--from", str(provision.BUILD_NUMBER),
                "--to", str(last), "--builds", f"{provision.BUILD_NUMBER},{last}", "--no-install", env=vk_env)
    assert r.returncode == 2 and "--device 0" in " ".join(r.stderr.split())  # no silent CPU, before any step
    assert len(_manifests(vk_env)) == 3
