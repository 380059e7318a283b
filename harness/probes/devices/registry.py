"""Which device probes exist on this machine, why the others do not, and the chosen set.

``describe`` answers before a server runs (``lbench probes``, and the check that a probe
asked for exists: exit 2 naming those available); ``build`` makes the probes of one server
process once it runs (fdinfo and process readings need its PID).  ``auto`` picks every
available source, Vulkan's budget only where no NVML or DRM reading exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.errors import BadInput
from harness.probes.devices import apple, drm, fdinfo, nvml, pagecache, vulkan
from harness.probes.devices.base import DeviceProbe
from harness.probes.devices.process import ProcessProbe

SOURCES = ("nvml", "drm", "fdinfo", "vulkan", "apple", "process", "pagecache")
OFF = ("off", "none")


def _linux_proc(proc_root: Path) -> bool:
    return sys.platform.startswith("linux") and (proc_root / "self" / "status").exists()


def describe(sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc")) -> dict[str, str]:
    """Per source: ``available (...)`` or ``not available: why``."""
    out: dict[str, str] = {}
    _, out["nvml"] = nvml.find_devices(None, sys_root)
    cards = drm.find_cards(sys_root)
    listed = ", ".join(f"{c.device} {c.driver or '?'}" for c in cards)
    out["drm"] = (f"available (DRM sysfs: {listed})" if cards
                  else f"not available: no DRM card under {sys_root}/class/drm (no AMD or Intel GPU driver)")
    out["fdinfo"] = ("available (DRM fdinfo of the server process)" if cards and _linux_proc(proc_root) else
                     "not available: needs Linux and a DRM device" if not cards else "not available: needs Linux /proc")
    _, out["vulkan"] = vulkan.find()
    _, out["apple"] = apple.find()
    out["pagecache"] = pagecache.status()
    out["process"] = ("available (/proc/PID/status of the server: host memory, the CPU backend's and a software "
                      "device's memory)" if _linux_proc(proc_root) else "not available: needs Linux /proc")
    return out


def available(status: dict[str, str]) -> list[str]:
    return [s for s in SOURCES if status.get(s, "").startswith("available")]


def select(text: str | None, status: dict[str, str], where: str = "--device-probes") -> list[str]:
    """``auto`` (every available source; Vulkan only where NVML and DRM are absent), ``off``, or a
    comma list of sources, each of which must be available here (else exit 2 naming those that are)."""
    value = (text or "auto").strip().lower()
    have = available(status)
    if value == "auto":
        return [s for s in have if s != "vulkan" or not {"nvml", "drm"} & set(have)]
    if value in OFF:
        return []
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if name not in SOURCES:
            raise BadInput(f"unknown device probe {name!r}", where=where,
                           hint=f"one of {', '.join(SOURCES)}, auto or off; available here: {', '.join(have) or 'none'}")
        if name not in have:
            raise BadInput(f"device probe {name!r} is not available here ({status[name]})", where=where,
                           hint=f"available here: {', '.join(have) or 'none'} (lbench probes lists them); or auto / off")
    return list(dict.fromkeys(names))


def build(names: list[str], pid: int | None, sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc"),
          model_path: Path | None = None) -> list[DeviceProbe]:
    """The probes of ``names`` for the server process ``pid`` (and ``model_path``: the page-cache probe's file;
    none for a model that lives on the server)."""
    probes: list[DeviceProbe] = []
    for name in names:
        if name == "nvml":
            probes += nvml.find_devices(pid, sys_root)[0]
        elif name == "drm":
            probes += drm.find_cards(sys_root)
        elif name == "fdinfo" and pid is not None:
            devices = fdinfo.devices_of(pid, proc_root) or [c.device for c in drm.find_cards(sys_root)]
            probes += [fdinfo.FdinfoProbe(pid, d, proc_root, sys_root) for d in devices]
        elif name == "vulkan":
            probes += vulkan.find()[0]
        elif name == "apple":
            probes += apple.find()[0]
        elif name == "process" and pid is not None:
            probes.append(ProcessProbe(pid, proc_root))
        elif name == "pagecache" and model_path is not None:
            probes.append(pagecache.PageCacheProbe(model_path))
    return probes
