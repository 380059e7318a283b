"""Memory probes a workload may read around each request, without touching the server.

Each probe returns a dict of named readings (units in the names).  A probe that
cannot run on this platform is not built; ``describe_probes`` says why, so a
report shows "not available" rather than zeros.

- page cache (Linux): percent of the model file resident (mincore);
- wired memory (macOS): ``vm_stat`` pages wired down x page size;
- Apple GPU memory (macOS): ioreg's ``In use system memory`` / ``Alloc system memory``;
- NVIDIA GPU memory used (NVML via the optional ``nvidia-ml-py`` package).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from harness.probes import macos, pagecache

Probe = Callable[[], dict]


def _nvml_handle() -> tuple[tuple[ModuleType, object] | None, str | None]:
    try:
        import pynvml  # from nvidia-ml-py, optional (pip install 'lbench[nvidia]')
    except ImportError:
        return None, "not available: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("LBENCH_NVML_DEVICE", "0")))
        return (pynvml, handle), None
    except Exception as exc:  # NVMLError has many subclasses; any failure means no NVIDIA GPU here
        return None, f"not available: NVML: {exc}"


def nvidia_facts() -> dict | None:
    nv, _ = _nvml_handle()
    if nv is None:
        return None
    pynvml, handle = nv
    mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
    name = pynvml.nvmlDeviceGetName(handle)
    return {"gpu_name": name.decode() if isinstance(name, bytes) else name, "gpu_memory_total_bytes": int(mem.total),
            "driver": str(pynvml.nvmlSystemGetDriverVersion())}


def build_probes(model_path: Path | None) -> tuple[list[Probe], dict[str, str]]:
    probes: list[Probe] = []
    status: dict[str, str] = {}
    if model_path is None:
        status["page_cache"] = "not available: the model has no local file (it lives on the server)"
    elif pagecache.available():
        residency = pagecache.ResidencyProbe(model_path)  # one mapping for the whole sweep
        probes.append(lambda: {"file_resident_pct": _pct(residency())})
        status["page_cache"] = "available (mincore over an mmap of the model file)"
    else:
        status["page_cache"] = "not available: needs Linux mincore/posix_fadvise"
    if macos.on_macos():
        probes.append(lambda: {"wired_bytes": macos.read_wired_bytes()})
        status["wired"] = "available (vm_stat)"

        def apple_gpu() -> dict:
            g = macos.read_gpu_memory() or {}
            return {"apple_gpu_in_use_bytes": g.get("in_use_system_memory_bytes"),
                    "apple_gpu_alloc_bytes": g.get("alloc_system_memory_bytes")}

        probes.append(apple_gpu)
        status["apple_gpu"] = "available (ioreg AGXAccelerator PerformanceStatistics)"
    else:
        status["wired"] = "not available: wired memory is a macOS reading"
        status["apple_gpu"] = "not available: an Apple GPU reading"
    nv, why = _nvml_handle()
    if nv is not None:
        pynvml, handle = nv
        awake = _runtime_active(pynvml, handle)
        probes.append(lambda: {"gpu_used_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
                               if awake() else None})
        status["nvidia"] = "available (NVML; not read while the GPU is runtime-suspended)"
    else:
        status["nvidia"] = why or "not available"
    return probes, status


def _runtime_active(pynvml: ModuleType, handle: object) -> Callable[[], bool]:
    """Whether the GPU may be read now: its PCI ``power/runtime_status`` is active or unknown
    (an NVML call wakes a suspended GPU; docs/probes.md)."""
    from harness.probes.devices.base import may_read, read_text, runtime_status
    from harness.probes.devices.nvml import sysfs_address

    try:
        bdf = sysfs_address(pynvml.nvmlDeviceGetPciInfo(handle).busId)
    except Exception:  # no PCI id: nothing to check
        return lambda: True
    path = Path("/sys/bus/pci/devices") / bdf / "power" / "runtime_status"
    return lambda: may_read(runtime_status(read_text(path)))


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else round(100.0 * fraction, 3)


def combine(probes: list[Probe]) -> Probe | None:
    if not probes:
        return None

    def read() -> dict:
        out: dict = {}
        for p in probes:
            out.update(p())
        return out

    return read
