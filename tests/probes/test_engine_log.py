import pytest

from harness.probes.engine_log import fit, parse_devices, parse_startup, stamp_s

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
    from harness.engines.binary import reported_backend  # what names a binary's backend (engines/binary.py)

    assert reported_backend(M1_MAX_DEVICES, None)[0] == "metal"  # the name is MTL0
    cpu_build = M1_MAX_DEVICES.replace("  MTL0: Apple M1 Max (25559 MiB, 25558 MiB free)\n", "")
    assert reported_backend(cpu_build, None)[0] != "metal"  # a CPU build on a Mac is not metal


def test_a_warning_after_the_list_is_not_a_device():
    assert parse_devices(M1_MAX_DEVICES + TENSOR_WARNING + "\n") == parse_devices(M1_MAX_DEVICES)
    assert parse_devices("Available devices:\n  (none)\n") == ["(none)"]


# an M2 Pro's llama-server log at -lv 4, quoted in ggml-org/llama.cpp PR #22673 (a comment by boutell):
# every layer on the GPU
M2_PRO_FULL_OFFLOAD = """load_tensors: offloading output layer to GPU
load_tensors: offloading 64 repeating layers to GPU
load_tensors: offloaded 66/66 layers to GPU
load_tensors:   CPU_Mapped model buffer size =   644.14 MiB
load_tensors:  MTL0_Mapped model buffer size = 14803.73 MiB
"""


def test_a_model_on_the_gpu_whole_fits_and_warns_nothing():
    facts = parse_startup(M2_PRO_FULL_OFFLOAD)
    assert facts["offloaded_layers"] == "66/66"
    assert fit(facts, "qwen") == {"offloaded_layers": "66/66", "gpu_share": 1.0, "warning": None}


def test_a_model_split_by_fit_is_a_warning_naming_the_share():
    # decision inputs (not a captured log: no published partial --fit offload line on a Mac was found):
    # what parse_startup returns for "offloaded 20/33 layers to GPU" beside a 5461.34 MB working set
    facts = {"offloaded_layers": "20/33", "recommended_max_working_set_mb": 5461.34}
    out = fit(facts, "llama3-8b-q8")
    assert out is not None and out["gpu_share"] == round(20 / 33, 4)
    assert out["warning"] == ("llama3-8b-q8 does not fit this device (working set 5461.34 MB): llama-server put 20 "
                              "of 33 layers on the GPU (61%) and 13 on the CPU, so this cell measures a CPU/GPU "
                              "split (a smaller model or quantization fits)")
    assert fit({}, "m") is None and fit({"offloaded_layers": "0/0"}, "m") is None  # the log did not say


def test_a_real_partial_fit_offload_is_a_warning():
    """llama.cpp's --fit moving layers off the GPU, in a real log: the llama-server an Ollama started on a 6 GB
    RTX 2060 (2026-06-28; tests/fixtures/ollama/README.md names the source): "cannot meet free memory target",
    then 15 of 33 layers on the GPU.  CUDA, not Metal: no published partial offload on a Mac was found, so the
    Metal working-set figure comes from the Metal device lines below, another machine's."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    log = (fixtures / "ollama" / "llama_server_under_ollama_2026-06-28.log").read_text()
    assert "common_params_fit_impl: cannot meet free memory target of 1024 MiB" in log
    facts = parse_startup(log)
    assert facts["offloaded_layers"] == "15/33" and "recommended_max_working_set_mb" not in facts
    out = fit(facts, "hermes3-8b-q4_0")
    assert out is not None and out["gpu_share"] == round(15 / 33, 4)
    assert out["warning"].startswith("hermes3-8b-q4_0 does not fit this device: llama-server put 15 of 33 layers "
                                     "on the GPU (45%) and 18 on the CPU")
    # an M4 Max's Metal device lines (`--list-devices`, ardanlabs/kronk#10): the working set the warning names
    metal = parse_startup((fixtures / "devices" / "list-devices-m4max-metal-kronk10.txt").read_text())
    assert metal["recommended_max_working_set_mb"] == 103079.22 and metal["use_residency_sets"] is True
