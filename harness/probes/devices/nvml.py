"""NVIDIA GPUs through NVML (the optional ``nvidia-ml-py`` package: ``pip install 'lbench[nvidia]'``).

Per device: memory used (``nvmlDeviceGetMemoryInfo``, v2 where the binding has it: v1's
``used`` includes driver-reserved memory), the server process's memory
(``nvmlDeviceGetComputeRunningProcesses``; ``usedGpuMemory`` is None under WDDM), SM and
memory clocks (MHz), P-state and power (milliwatts).  Every call can fail on its own
(unified-memory parts report no memory; gVisor lacks some ioctls), so each is caught
separately and its metric left null.  NVML calls and nvidia-smi bring a suspended GPU to D0,
so ``power_state`` reads the PCI device's ``power/runtime_status`` in sysfs and the sampler
calls NVML only when the GPU is already active.  Not run here (no NVIDIA GPU on this machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.probes.devices.base import read_text, runtime_status

PSTATE_UNKNOWN = 32  # NVML's Pstates enum: PSTATE_0 .. PSTATE_15, PSTATE_UNKNOWN = 32


def pstate_name(value: int | None) -> str | None:
    """NVML's performance state as nvidia-smi prints it: 8 -> ``P8``; unknown -> None."""
    if value is None or not 0 <= int(value) <= 15:
        return None
    return f"P{int(value)}"


def sysfs_address(bus_id: str | bytes) -> str:
    """NVML's PCI bus id (``nvmlPciInfo_t.busId``: an 8-digit domain) as the sysfs address
    (4-digit domain, lower-case)."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    domain, _, rest = text.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else text.lower()


def load() -> tuple[Any, str | None]:
    """``(pynvml, None)`` after nvmlInit, or ``(None, why not)``."""
    try:
        import pynvml  # from nvidia-ml-py, optional
    except ImportError:
        return None, "not available: nvidia-ml-py is not installed (pip install 'lbench[nvidia]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError has many subclasses: any failure means no usable NVIDIA driver
        return None, f"not available: NVML: {exc}"
    return pynvml, None


@dataclass
class NvmlProbe:
    nv: Any  # the pynvml module after nvmlInit
    index: int
    pid: int | None = None  # the server process, for its own memory
    sys_root: Path = Path("/sys")
    name: str = "nvml"
    device: str = ""

    def __post_init__(self) -> None:
        self.handle = self.nv.nvmlDeviceGetHandleByIndex(self.index)
        try:
            self.device = sysfs_address(self.nv.nvmlDeviceGetPciInfo(self.handle).busId)
        except Exception:
            self.device = f"nvml:{self.index}"

    def power_state(self) -> str | None:
        if self.device.startswith("nvml:"):
            return None
        return runtime_status(read_text(self.sys_root / "bus" / "pci" / "devices" / self.device / "power" /
                                        "runtime_status"))

    def _call(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, fn)(self.handle, *args)
        except Exception:  # one field failing leaves the others
            return None

    def read(self) -> dict[str, object]:
        nv = self.nv
        out: dict[str, object] = {}
        version = getattr(nv, "nvmlMemory_v2", None)
        mem = self._call("nvmlDeviceGetMemoryInfo", version) if version is not None else None
        mem = mem if mem is not None else self._call("nvmlDeviceGetMemoryInfo")
        if mem is not None and int(getattr(mem, "total", None) or 0) > 0:
            out["mem_used_bytes"], out["mem_total_bytes"] = int(mem.used), int(mem.total)
        if self.pid is not None:
            for proc in self._call("nvmlDeviceGetComputeRunningProcesses") or []:
                if getattr(proc, "pid", None) == self.pid and getattr(proc, "usedGpuMemory", None) is not None:
                    out["process_mem_bytes"] = int(proc.usedGpuMemory)
        for key, clock in (("sm_clock_mhz", "NVML_CLOCK_SM"), ("mem_clock_mhz", "NVML_CLOCK_MEM")):
            value = self._call("nvmlDeviceGetClockInfo", getattr(nv, clock))
            if value is not None:
                out[key] = int(value)
        pstate = pstate_name(self._call("nvmlDeviceGetPerformanceState"))
        if pstate is not None:
            out["pstate"] = pstate
        mw = self._call("nvmlDeviceGetPowerUsage")
        if mw is not None:
            out["power_w"] = int(mw) / 1000.0
        return out


def find_devices(pid: int | None = None, sys_root: Path = Path("/sys")) -> tuple[list[NvmlProbe], str]:
    nv, why = load()
    if nv is None:
        return [], why or "not available"
    try:
        count = int(nv.nvmlDeviceGetCount())
    except Exception as exc:
        return [], f"not available: NVML: {exc}"
    if count == 0:
        return [], "not available: NVML sees no NVIDIA GPU"
    return [NvmlProbe(nv, i, pid, sys_root) for i in range(count)], f"available (NVML, {count} GPU(s))"
