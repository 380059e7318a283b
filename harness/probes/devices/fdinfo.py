"""DRM fdinfo of one process (``/proc/PID/fdinfo/FD``): the server's own device memory and engine time.

Format (docs.kernel.org/gpu/drm-usage-stats.html): one ``key: value`` per line; memory in
bytes with an optional ``KiB``/``MiB``; engine time in ``ns``.  The same DRM client shows up
on several fds, so clients are counted once per ``(drm-pdev, drm-client-id)``.  Memory keys by
driver: amdgpu ``drm-memory-vram``/``drm-memory-gtt`` and ``amd-evicted-vram`` (the most direct
"my model was evicted" signal on AMD Linux); xe and newer kernels ``drm-resident-vram0``/
``drm-resident-gtt``; i915 discrete ``drm-resident-local0`` (region name not confirmed by a
real capture).  Readable for the user's own processes only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.probes.devices.base import read_text, runtime_status

UNITS = {"": 1, "KiB": 1024, "MiB": 1024 * 1024, "ns": 1}
VALUE = re.compile(r"^(\d+)\s*(KiB|MiB|ns)?$")
VRAM_KEYS = ("drm-memory-vram", "drm-resident-vram0", "drm-resident-local0")
GTT_KEYS = ("drm-memory-gtt", "drm-resident-gtt")


def parse(text: str) -> dict[str, object]:
    """Every ``key: value`` line: numbers with a unit become integers (bytes, ns); other values
    stay strings (``drm-driver``, ``drm-pdev``)."""
    out: dict[str, object] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep or not key:
            continue
        value = value.strip()
        m = VALUE.match(value)
        out[key.strip()] = int(m.group(1)) * UNITS[m.group(2) or ""] if m else value
    return out


def first(record: dict[str, object], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, int):
            return value
    return None


def summarize(records: list[dict[str, object]]) -> dict[str, dict[str, int]]:
    """Per PCI device: the process's VRAM, GTT, evicted VRAM (bytes) and engine time (ns), each DRM
    client counted once."""
    seen: set[tuple[object, object]] = set()
    out: dict[str, dict[str, int]] = {}
    for r in records:
        if "drm-driver" not in r:
            continue
        client = (r.get("drm-pdev"), r.get("drm-client-id"))
        if client in seen:
            continue
        seen.add(client)
        dev = out.setdefault(str(r.get("drm-pdev") or "unknown").lower(), {})
        for name, value in (("process_mem_bytes", first(r, VRAM_KEYS)), ("process_gtt_bytes", first(r, GTT_KEYS)),
                            ("process_evicted_bytes", first(r, ("amd-evicted-vram",)))):
            if value is not None:
                dev[name] = dev.get(name, 0) + value
        engine = [v for k, v in r.items() if k.startswith("drm-engine-") and not k.startswith("drm-engine-capacity")
                  and isinstance(v, int)]
        if engine:
            dev["process_engine_ns"] = dev.get("process_engine_ns", 0) + sum(engine)
    return out


def read_process(pid: int, proc_root: Path = Path("/proc")) -> list[dict[str, object]]:
    """The parsed fdinfo of every DRM fd of ``pid`` (others are skipped)."""
    base = proc_root / str(pid) / "fdinfo"
    try:
        names = sorted(base.iterdir())
    except OSError:
        return []
    out = []
    for path in names:
        text = read_text(path)
        if text and "drm-driver" in text:
            out.append(parse(text))
    return out


@dataclass
class FdinfoProbe:
    """One process's use of one DRM device (by PCI address), with the device's runtime PM state."""

    pid: int
    device: str  # PCI address, lower-case
    proc_root: Path = Path("/proc")
    sys_root: Path = Path("/sys")
    name: str = "fdinfo"
    opened: list[str] = field(default_factory=list)

    def power_state(self) -> str | None:
        self.opened.append("power/runtime_status")
        return runtime_status(read_text(self.sys_root / "bus" / "pci" / "devices" / self.device / "power" /
                                        "runtime_status"))

    def read(self) -> dict[str, object]:
        self.opened.append("fdinfo")
        return dict(summarize(read_process(self.pid, self.proc_root)).get(self.device, {}))


def devices_of(pid: int, proc_root: Path = Path("/proc")) -> list[str]:
    """The PCI addresses ``pid`` holds DRM clients on."""
    return sorted(summarize(read_process(pid, proc_root)))
