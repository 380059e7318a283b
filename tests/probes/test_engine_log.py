from harness.probes.engine_log import parse_devices, parse_startup

CPU_LOG = """0.00.003.208 I srv    load_model: loading model '/m.gguf'
0.00.005.921 I cmn          init: llama threadpool init, n_threads = 2
0.00.033.476 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 2048, kv_unified = 'false'
0.00.034.685 I srv  llama_server: model loaded
"""
# [reconstructed] from the format strings in ggml-metal-device.m
METAL_LOG = """0.00.001.000 I ggml_metal_device_init: GPU name:   Apple M3 Pro
0.00.001.100 I ggml_metal_device_init: use residency sets    = true
0.00.001.200 I ggml_metal_device_init: recommendedMaxWorkingSetSize  = 27648.00 MB
0.00.001.300 I ggml_metal_rsets_init: creating a residency set collection (keep_alive = 180 s)
0.00.002.000 I srv    load_model: loading model '/m.gguf'
0.01.500.000 I load_tensors: offloaded 33/33 layers to GPU
0.01.523.000 I srv  llama_server: model loaded
"""


def test_cpu_startup_facts():
    f = parse_startup(CPU_LOG)
    assert f == {"n_threads": 2, "n_slots": 1, "n_ctx_slot": 2048, "server_load_ms": 31.477}


def test_metal_startup_facts():
    f = parse_startup(METAL_LOG)
    assert f["use_residency_sets"] is True and f["residency_keep_alive_s"] == 180
    assert f["recommended_max_working_set_mb"] == 27648.0 and f["offloaded_layers"] == "33/33"
    assert f["gpu_name"] == "Apple M3 Pro" and f["server_load_ms"] == 1521.0


def test_devices():
    assert parse_devices("Available devices:\n  (none)\n") == ["(none)"]
    assert parse_devices("junk\nAvailable devices:\n  CUDA0: NVIDIA H200 (143 GiB, 140 GiB free)\n") == [
        "CUDA0: NVIDIA H200 (143 GiB, 140 GiB free)"]
