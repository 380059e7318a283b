"""NVML conversions, Vulkan heap budgets and the process probe, on real outputs."""

from pathlib import Path

from harness.probes.devices import nvml, process, vulkan

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "devices"

# https://github.com/ggml-org/llama.cpp/issues/16832 (vulkaninfo, one heap with VK_EXT_memory_budget)
HEAP_WITH_BUDGET = """	memoryHeaps[1]:
		size   = 68719476736 (0x1000000000) (64.00 GiB)
		budget = 65283502080 (0xf33333000) (60.80 GiB)
		usage  = 0 (0x00000000) (0.00 B)
		flags: count = 2
			MEMORY_HEAP_DEVICE_LOCAL_BIT
			MEMORY_HEAP_MULTI_INSTANCE_BIT
"""


def test_nvml_pstate_names():
    # `nvidia-smi --format=csv --query-gpu=pstate` prints P8 (https://github.com/netdata/netdata/issues/13577);
    # NVML's enum: PSTATE_0..PSTATE_15, PSTATE_UNKNOWN = 32 (cuda-bindings docs, Pstates)
    assert nvml.pstate_name(8) == "P8"
    assert nvml.pstate_name(2) == "P2"  # https://github.com/ggml-org/llama.cpp/issues/26024 "P2 (medium)"
    assert nvml.pstate_name(nvml.PSTATE_UNKNOWN) is None
    assert nvml.pstate_name(None) is None


def test_vulkan_heap_budget():
    heaps = vulkan.parse_heaps(HEAP_WITH_BUDGET)
    assert heaps == [{"index": 1, "device_local": True, "size": 68719476736, "budget": 65283502080, "usage": 0}]
    assert vulkan.budget(heaps) == {"mem_total_bytes": 68719476736, "budget_bytes": 65283502080}


def test_vulkan_lavapipe_has_no_budget():
    text = (FIX / "vulkaninfo_lavapipe_debian12.txt").read_text()
    heaps = vulkan.parse_heaps(text)
    assert heaps == [{"index": 0, "device_local": True, "size": 2147483648}]
    assert vulkan.budget(heaps) == {}  # no VK_EXT_memory_budget on lavapipe: the probe says not available


def test_process_status_memory():
    text = (FIX / "proc_status_debian12.txt").read_text()
    status = process.parse_status(text)
    assert status == {"VmRSS": 1620 * 1024, "RssAnon": 116 * 1024, "RssFile": 1504 * 1024}
    assert process.parse_status(None) == {}


def test_process_probe_reads_a_proc_tree(tmp_path: Path):
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "status").write_text((FIX / "proc_status_debian12.txt").read_text())
    probe = process.ProcessProbe(77, tmp_path)
    assert probe.power_state() is None
    assert probe.read() == {"process_mem_bytes": 1620 * 1024, "process_anon_bytes": 116 * 1024}
