"""The NVIDIA GPU's facts for the host record (NVML via the optional ``nvidia-ml-py`` package).

The readings once taken around each timed request (page cache, vm_stat, ioreg, NVML) are device
probes now, sampled in the pause only (``harness/probes/devices``).
"""

from __future__ import annotations

import os
from types import ModuleType


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
