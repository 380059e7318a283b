"""The device-probe interface and the columns of one device sample.

A probe reads one device (or one process's view of it).  ``power_state`` is read first
and must not wake the device (a sysfs ``power/runtime_status`` read); when it says the
device is not ``active``, the sampler records that and calls nothing else on the device
(reading hwmon/gpu_metrics keeps an AMD dGPU out of D3hot; NVML/nvidia-smi bring an
NVIDIA GPU to D0: docs/probes.md).  ``read`` returns metric columns, units in the names
(``METRICS``); a metric the source does not have is absent (null in the table, never 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

# metric columns a probe may return (the device_samples table; harness/schema.py documents them)
METRICS = (
    "mem_used_bytes", "mem_total_bytes", "gtt_used_bytes", "process_mem_bytes", "process_gtt_bytes",
    "process_evicted_bytes", "process_engine_ns", "sm_clock_mhz", "mem_clock_mhz", "pstate", "power_w",
    "budget_bytes", "wired_bytes", "process_anon_bytes", "gpu_alloc_bytes", "file_resident_pct",
)

# runtime PM states (kernel drivers/base/power/sysfs.c, rtpm_status_show: active, suspended, suspending,
# resuming, error, unsupported); only "active" may be read
ACTIVE = "active"


class DeviceProbe(Protocol):
    """One source reading one device."""

    name: str  # the source: nvml, drm, fdinfo, vulkan, apple, process, pagecache
    device: str  # which device: a PCI address, "nvml:0", "cpu", ...

    def power_state(self) -> str | None:
        """The runtime PM state (``active``, ``suspended``, ...), or None when the source has none.
        Must not wake the device."""
        ...

    def read(self) -> dict[str, object]:
        """The metrics (keys from ``METRICS``).  Called only when ``power_state`` is None or active."""
        ...


def read_text(path: Path) -> str | None:
    """A small sysfs/procfs file's text, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 16).decode(errors="replace")
    except OSError:
        return None


def runtime_status(text: str | None) -> str | None:
    """``power/runtime_status`` content -> the state.  Missing or unreadable means unknown
    (None: treated as active, never as suspended: amdgpu_top #119); an unexpected word is
    kept as read."""
    if text is None:
        return None
    word = text.strip()
    return word or None


def may_read(state: str | None) -> bool:
    """Whether a device in ``state`` may be read without waking it: active, or unknown."""
    return state is None or state == ACTIVE
