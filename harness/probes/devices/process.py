"""The server process's host memory: the "device memory" of the CPU backend and of a software
Vulkan device (lavapipe allocates device memory from host RAM).

Reads ``/proc/PID/status`` (``VmRSS``, ``RssAnon``, ``RssFile``; kB), one small file, no
device behind it, so it cannot wake anything; it is also the probe that actually samples on a
machine without a GPU (this one), which is what the perturbation measurement runs on here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.probes.devices.base import read_text


def parse_status(text: str | None) -> dict[str, int]:
    """``/proc/PID/status`` memory lines in bytes: VmRSS, RssAnon, RssFile (``kB`` = KiB)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        parts = value.split()
        if sep and key in ("VmRSS", "RssAnon", "RssFile") and len(parts) == 2 and parts[1] == "kB" \
                and parts[0].isdigit():
            out[key] = int(parts[0]) * 1024
    return out


@dataclass
class ProcessProbe:
    pid: int
    proc_root: Path = Path("/proc")
    name: str = "process"
    device: str = "cpu"

    def power_state(self) -> str | None:
        return None

    def read(self) -> dict[str, object]:
        status = parse_status(read_text(self.proc_root / str(self.pid) / "status"))
        out: dict[str, object] = {}
        if "VmRSS" in status:
            out["process_mem_bytes"] = status["VmRSS"]
        if "RssAnon" in status:
            out["process_anon_bytes"] = status["RssAnon"]
        return out
