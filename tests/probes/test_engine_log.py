import pytest

from harness.probes.engine_log import backend_of_devices, parse_devices, parse_startup, stamp_s

CPU_LOG = """0.00.003.208 I srv    load_model: loading model '/m.gguf'
0.00.005.921 I cmn          init: llama threadpool init, n_threads = 2
0.00.033.476 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 2048, kv_unified = 'false'
0.00.034.685 I srv  llama_server: model loaded
"""
# Metal lines: each is a real line quoted in shared/reference/mac-audit.md (row 5 and "checked and
# found right"), built-11434 format strings from ggml-metal-device.m; the GPU name line
# "GPU name:   MTL0 (Apple M4)" as captured in public logs (audit row 5)
GPU_NAME_M4 = "ggml_metal_device_init: GPU name:   MTL0 (Apple M4)"
GPU_NAME_OLD = "ggml_metal_device_init: GPU name:   MTL0"  # a captured build-8506 log (audit row 5)
def test_cpu_startup_facts():
    f = parse_startup(CPU_LOG)
    assert f == {"n_threads": 2, "n_slots": 1, "n_ctx_slot": 2048, "server_load_ms": 31.477}


def test_log_stamps_are_seconds_since_the_process_started():
    """M.SS.mmm.uuu, from CPU_LOG's lines and a router line (tests/engines/test_router_parsing.py)."""
    assert [stamp_s(line) for line in CPU_LOG.splitlines()] == pytest.approx([0.003208, 0.005921, 0.033476, 0.034685])
    assert stamp_s("0.02.506.877 I srv          join: request for name=a queued at position 1") == pytest.approx(2.506877)
    assert stamp_s("I srv  unload: stopping model instance name=tiny-f16") is None


def test_metal_gpu_name_real_lines():
    assert parse_startup(GPU_NAME_M4)["gpu_name"] == "MTL0 (Apple M4)"
    assert parse_startup(GPU_NAME_OLD)["gpu_name"] == "MTL0"


# `llama-server --list-devices` on an M1 Max, quoted in a public repository's source comment as
# measured output (found by code search: "Available devices: / BLAS: Accelerate ... / MTL0: Apple M1 Max")
M1_MAX_DEVICES = """Available devices:
  BLAS: Accelerate (0 MiB, 0 MiB free)
  MTL0: Apple M1 Max (25559 MiB, 25558 MiB free)
"""
# the WARN line a Metal build can print at default verbosity (ggml-metal-device.m; audit row 20)
TENSOR_WARNING = "ggml_metal_device_init: the tensor API is not supported in this environment - disabling"


def test_devices_metal_and_cpu_on_a_mac():
    devices = parse_devices(M1_MAX_DEVICES)
    assert devices == ["BLAS: Accelerate (0 MiB, 0 MiB free)", "MTL0: Apple M1 Max (25559 MiB, 25558 MiB free)"]
    assert backend_of_devices(devices) == "metal"  # the name is MTL0: "Metal" is never printed
    cpu_build = M1_MAX_DEVICES.replace("  MTL0: Apple M1 Max (25559 MiB, 25558 MiB free)\n", "")
    assert backend_of_devices(parse_devices(cpu_build)) == "cpu"  # a CPU build on a Mac is not metal


def test_a_warning_after_the_list_is_not_a_device():
    assert parse_devices(M1_MAX_DEVICES + TENSOR_WARNING + "\n") == parse_devices(M1_MAX_DEVICES)
    assert parse_devices("Available devices:\n  (none)\n") == ["(none)"]
