"""Vulkan's memory budget (VK_EXT_memory_budget) through ``vulkaninfo``, where nothing else reads the device.

``vulkaninfo`` prints, per memory heap, ``size``, and with the extension ``budget`` and
``usage`` (bytes).  The budget is the driver's device-wide view (it allows for other
processes); ``usage`` is vulkaninfo's *own* process, so it says nothing about the server.
Each reading starts a process that creates a Vulkan instance (tens of milliseconds of CPU
and, on a real GPU, a device open that can wake it), and it has no PCI address to check the
runtime PM state against first, so this probe is read at most every ``MIN_INTERVAL_S`` and
only where nothing else reads the device (``auto``); llama.cpp's own ``--list-devices``
("N MiB free" = budget - usage) is recorded at server start instead.  Mesa's software
device (lavapipe, this machine) does not expose the extension: the probe then says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

HEAP = re.compile(r"^\s*memoryHeaps\[(\d+)\]:\s*$")
FIELD = re.compile(r"^\s*(size|budget|usage)\s*=\s*(\d+)")
MIN_INTERVAL_S = 5.0


def parse_heaps(text: str) -> list[dict[str, object]]:
    """One dict per ``memoryHeaps[i]`` block: index, size/budget/usage bytes (those present),
    device_local (the ``MEMORY_HEAP_DEVICE_LOCAL_BIT`` flag)."""
    heaps: list[dict[str, object]] = []
    current: dict[str, object] | None = None
    for line in text.splitlines():
        m = HEAP.match(line)
        if m:
            current = {"index": int(m.group(1)), "device_local": False}
            heaps.append(current)
            continue
        if current is None:
            continue
        f = FIELD.match(line)
        if f:
            current.setdefault(f.group(1), int(f.group(2)))
        elif "MEMORY_HEAP_DEVICE_LOCAL_BIT" in line:
            current["device_local"] = True
        elif line.strip().startswith(("memoryTypes", "VkPhysicalDevice")):
            current = None
    return heaps


def budget(heaps: list[dict[str, object]]) -> dict[str, object]:
    """The device-local heaps' size and budget, summed (llama.cpp's dGPU rule); {} without the extension."""
    local = [h for h in heaps if h.get("device_local")]
    if not local or not all("budget" in h for h in local):
        return {}
    return {"mem_total_bytes": sum(int(h["size"]) for h in local),  # type: ignore[call-overload]
            "budget_bytes": sum(int(h["budget"]) for h in local)}  # type: ignore[call-overload]


@dataclass
class VulkanProbe:
    exe: str
    name: str = "vulkan"
    device: str = "vulkan:0"
    min_interval_s: float = MIN_INTERVAL_S  # the sampler reads it no more often than this

    def power_state(self) -> str | None:
        return None  # no PCI device known to vulkaninfo's output here; only used where nothing else exists

    def read(self) -> dict[str, object]:
        try:
            text = subprocess.run([self.exe], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
        return budget(parse_heaps(text))


def find() -> tuple[list[VulkanProbe], str]:
    exe = shutil.which("vulkaninfo")
    if exe is None:
        return [], "not available: vulkaninfo is not installed (Debian: vulkan-tools)"
    try:
        text = subprocess.run([exe], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"not available: vulkaninfo failed ({exc})"
    heaps = parse_heaps(text)
    if not heaps:
        return [], "not available: vulkaninfo listed no memory heaps (no Vulkan device)"
    if not budget(heaps):
        return [], ("not available: the Vulkan device does not expose VK_EXT_memory_budget (no heap budget in "
                    "vulkaninfo; Mesa's lavapipe has none)")
    return [VulkanProbe(exe)], f"available (vulkaninfo heap budget, at most every {MIN_INTERVAL_S:g} s)"
