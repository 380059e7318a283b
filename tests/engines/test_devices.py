"""``--list-devices`` and ``vulkaninfo --summary`` parsers, on real outputs quoted with their source."""

from pathlib import Path

from harness.engines import devices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vulkan"

# REAL, https://github.com/ollama/ollama/issues/16508 (quoted in ../shared/reference/gpu-probes.md §6.4)
CUDA_LIST = """Available devices:
  CUDA0: NVIDIA GeForce RTX 3080 Ti (11909 MiB, 11650 MiB free)
  CUDA1: NVIDIA RTX PRO 4000 Blackwell SFF Edition (24026 MiB, 23795 MiB free)
"""
# REAL, https://github.com/AlexsJones/llmfit/issues/570 (gpu-probes.md §5.5)
METAL_LIST = """llama-server --list-devices
Available devices:
  MTL0: Apple M1 Max (26000 MiB, 25999 MiB free)
"""


def test_cuda_devices():
    devs = devices.parse_list_devices(CUDA_LIST)
    assert [d.name for d in devs] == ["CUDA0", "CUDA1"]
    assert devs[1].description == "NVIDIA RTX PRO 4000 Blackwell SFF Edition"
    assert (devs[0].total_mib, devs[0].free_mib) == (11909, 11650)
    assert {d.backend for d in devs} == {"cuda"}


def test_metal_device_and_the_command_line_before_the_header():
    (dev,) = devices.parse_list_devices(METAL_LIST)
    assert dev.as_dict() == {"name": "MTL0", "description": "Apple M1 Max", "total_mib": 26000, "free_mib": 25999,
                             "backend": "metal"}


def test_lavapipe_list_devices_captured_here():
    """Captured on this project's VM (Debian 12, Mesa 22.3.6 lavapipe) from lbench's Vulkan build of
    llama.cpp 11434 with GGML_VK_VISIBLE_DEVICES=0 (stdout and stderr together, as lbench reads it);
    the name's own parentheses are kept, the last memory group counts."""
    text = (FIXTURES / "list-devices-lavapipe-debian12.txt").read_text()
    (dev,) = devices.parse_list_devices(text)
    assert dev.name == "Vulkan0" and dev.backend == "vulkan"
    assert dev.description.startswith("llvmpipe (LLVM 15.0.6, 256 bits)")
    assert (dev.total_mib, dev.free_mib) == (2048, 2048)


def test_no_device_visible_is_an_empty_list():
    """The same Vulkan build on the same VM without GGML_VK_VISIBLE_DEVICES: ggml skips the CPU-type
    lavapipe device and llama-server prints ``(none)``."""
    text = (FIXTURES / "list-devices-no-visible-device-debian12.txt").read_text()
    assert "(none)" in text and devices.parse_list_devices(text) == []
    assert devices.parse_list_devices("") == []


def test_vulkaninfo_summary_of_lavapipe_captured_here():
    """``vulkaninfo --summary`` captured on this project's VM (Debian 12, vulkan-tools 1.3.239,
    mesa-vulkan-drivers 22.3.6); its warnings on stderr are not in the file (lbench reads stdout)."""
    (gpu,) = devices.parse_vulkaninfo_summary((FIXTURES / "vulkaninfo-summary-lavapipe-debian12.txt").read_text())
    assert gpu["index"] == "0"
    assert gpu["deviceType"] == "PHYSICAL_DEVICE_TYPE_CPU"
    assert gpu["deviceName"] == "llvmpipe (LLVM 15.0.6, 256 bits)"
    assert gpu["driverInfo"] == "Mesa 22.3.6 (LLVM 15.0.6)"
    assert gpu["driverName"] == "llvmpipe"


def test_backend_of_device_names():
    assert devices.backend_of_name("Vulkan1") == "vulkan"
    assert devices.backend_of_name("ROCm0") == "hip"
    assert devices.backend_of_name("CPU") is None


def test_older_ggml_names_its_metal_device_metal():
    """`llama-bench --list-devices` on an M4 Max as ardanlabs/kronk#10 quotes it (2025-11-23): that ggml's
    Metal device was "Metal" (newer ones "MTL0"); BLAS, beside it, has no index and is no device lbench uses."""
    text = (FIXTURES.parent / "devices" / "list-devices-m4max-metal-kronk10.txt").read_text()
    (dev,) = devices.parse_list_devices(text)
    assert dev.as_dict() == {"name": "Metal", "description": "Apple M4 Max", "total_mib": 98304, "free_mib": 98303,
                             "backend": "metal"}
