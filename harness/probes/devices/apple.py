"""Apple Silicon through the existing ioreg/vm_stat path (``harness.probes.macos``).

ioreg's ``In use system memory`` (the GPU's share of unified memory), ``Alloc system memory``
and vm_stat's wired memory; no root needed.  Both are forked commands (ioreg, vm_stat), so they
run only in the pause, never in the window before a timed request (the sampler's guard).  Apple
GPUs have no runtime PM file to check first.  Parsers are tested on captures in
tests/fixtures/macos/; never run through the sampler here (no Mac).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.probes import macos


@dataclass
class AppleProbe:
    name: str = "apple"
    device: str = "apple-gpu"

    def power_state(self) -> str | None:
        return None

    def read(self) -> dict[str, object]:
        out: dict[str, object] = {}
        g = macos.read_gpu_memory() or {}
        if g.get("in_use_system_memory_bytes") is not None:
            out["mem_used_bytes"] = g["in_use_system_memory_bytes"]
        if g.get("alloc_system_memory_bytes") is not None:
            out["gpu_alloc_bytes"] = g["alloc_system_memory_bytes"]
        wired = macos.read_wired_bytes()
        if wired is not None:
            out["wired_bytes"] = wired
        return out


def find() -> tuple[list[AppleProbe], str]:
    if not macos.on_macos():
        return [], "not available: an Apple GPU reading (macOS only)"
    return [AppleProbe()], "available (ioreg AGXAccelerator PerformanceStatistics, vm_stat)"
