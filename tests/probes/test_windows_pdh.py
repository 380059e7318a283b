"""Windows GPU memory from typeperf (probes/windows.py), on a real capture (tests/fixtures/windows/).
Windows itself never ran here; the per-process counters have no real capture (docs/windows.md)."""

from pathlib import Path

from harness.probes import windows

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "windows"


def test_adapter_dedicated_usage_from_a_real_typeperf_capture():
    # RamazanKara/vramwatch's test fixture: "real output captured from an AMD Radeon RX 7900 XT on Windows 11"
    samples = windows.parse_typeperf((FIX / "typeperf_gpu_adapter_dedicated_rx7900xt.txt").read_text())
    assert len(samples) == 1  # the German status lines after the data are not samples
    adapters = windows.adapter_memory(samples[0])
    assert adapters == {"luid_0x00000000_0x00017E08_phys_0": {"dedicated_bytes": 0},
                        "luid_0x00000000_0x679BDD95_phys_0": {"dedicated_bytes": 5764141056}}


def test_counter_paths_with_and_without_the_machine():
    assert windows.split_path(r"\\HOMEPC\GPU Adapter Memory(luid_0x00000000_0x00017E08_phys_0)\Dedicated Usage") == (
        "GPU Adapter Memory", "luid_0x00000000_0x00017E08_phys_0", "Dedicated Usage")
    assert windows.split_path(r"\GPU Adapter Memory(*)\Shared Usage") == ("GPU Adapter Memory", "*", "Shared Usage")
    assert windows.split_path("(PDH-CSV 4.0)") is None


def test_no_header_no_samples_and_not_windows_not_available():
    assert windows.parse_typeperf("") == [] and windows.parse_typeperf("Error: no valid counters.\n") == []
    assert windows.read_gpu_memory() is None  # not Windows: "not available", never 0
