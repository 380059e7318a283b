"""The devices a llama-server build reports, which one a run uses, and the driver behind it.

``llama-server --list-devices`` prints, after ``Available devices:``, one line per non-CPU device in
one format for every backend (llama.cpp ``common/arg.cpp``: ``"  %s: %s (%zu MiB, %zu MiB free)"``);
names contain parentheses, so the last ``(<int> MiB, <int> MiB free)`` group is the memory.

ggml's Vulkan backend skips CPU-type devices (Mesa's lavapipe) unless ``GGML_VK_VISIBLE_DEVICES``
names them.  lbench never falls back to the CPU silently: a Vulkan (CUDA, HIP) build that lists no
device is refused (exit 2) with the raw device indexes that exist, and ``--device N`` selects one
through the backend's own variable, recorded in the manifest with the device it gave.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.engines import backends
from harness.errors import BadInput

# a device name ends in its index (Vulkan0, CUDA1, MTL0); older ggml named its one Metal device "Metal" (a real
# M4 Max list: tests/fixtures/devices/list-devices-m4max-metal-kronk10.txt); BLAS (no index) is not one lbench uses
DEVICE_RE = re.compile(r"^\s*(?P<name>[A-Za-z][\w-]*\d+|Metal):\s+(?P<description>.*)\s+"
                       r"\((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")
# the device name's prefix -> the backend (ggml_backend_dev_name of each backend)
PREFIXES = tuple((p, b.name) for b in backends.BACKENDS.values() for p in b.device_prefixes)
# how each backend is told which device to use (None: lbench cannot select one)
SELECT_ENV = {b.name: b.selects_device_with for b in backends.BACKENDS.values() if b.selects_device_with}
GPU_BACKENDS = tuple(b.name for b in backends.BACKENDS.values() if b.chooses_device)
MAX_RAW_INDEX = 8  # raw Vulkan device indexes probed when none is visible
VULKANINFO_KEYS = ("deviceName", "deviceType", "driverName", "driverInfo", "apiVersion", "driverVersion",
                   "vendorID", "deviceID", "conformanceVersion")


def is_selection_var(name: str) -> bool:
    """Whether ``name`` is a backend's device selection variable (``--device`` sets it in lbench's own
    environment, so scripts that rerun a run without lbench must carry it even where it is unchanged)."""
    return name in SELECT_ENV.values()


@dataclass(frozen=True)
class Device:
    name: str  # Vulkan0, CUDA1, MTL0 (what llama-server's --device takes)
    description: str
    total_mib: int
    free_mib: int

    @property
    def backend(self) -> str | None:
        return backend_of_name(self.name)

    def as_dict(self) -> dict:
        return {**asdict(self), "backend": self.backend}


def backend_of_name(name: str) -> str | None:
    return next((b for p, b in PREFIXES if name.startswith(p)), None)


def parse_list_devices(text: str) -> list[Device]:
    """The devices of ``llama-server --list-devices`` output (stdout and stderr together: the
    backend's own lines, e.g. ``ggml_vulkan: ...``, are skipped)."""
    out: list[Device] = []
    take = False
    for line in text.splitlines():
        if line.strip().startswith("Available devices"):
            take = True
            continue
        if not take:
            continue
        m = DEVICE_RE.match(line)
        if m:
            out.append(Device(m["name"], m["description"].strip(), int(m["total"]), int(m["free"])))
    return out


def list_devices(binary: Path, env: Mapping[str, str] | None = None) -> tuple[list[Device], str]:
    """(devices, raw output) of ``binary --list-devices`` under ``env`` (default: lbench's)."""
    try:
        p = subprocess.run([str(binary), "--list-devices"], capture_output=True, text=True, timeout=120,
                           env=dict(env if env is not None else os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"{binary} --list-devices failed: {exc}"
    text = p.stdout + p.stderr
    return parse_list_devices(text), text


def parse_vulkaninfo_summary(text: str) -> list[dict[str, str]]:
    """The ``GPUn:`` blocks of ``vulkaninfo --summary`` (its warnings before the header are skipped)."""
    gpus: list[dict[str, str]] = []
    in_devices = False
    for line in text.splitlines():
        if line.startswith("Devices:"):
            in_devices = True
            continue
        if not in_devices:
            continue
        m = re.match(r"^GPU(\d+):\s*$", line)
        if m:
            gpus.append({"index": m.group(1)})
            continue
        kv = re.match(r"^\s+(\w+)\s*=\s*(.*?)\s*$", line)
        if kv and gpus and kv.group(1) in VULKANINFO_KEYS:
            gpus[-1].setdefault(kv.group(1), kv.group(2))
    return gpus


def vulkan_drivers() -> list[dict[str, str]]:
    """What ``vulkaninfo --summary`` says of each Vulkan device (empty when vulkaninfo is absent)."""
    try:
        p = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_vulkaninfo_summary(p.stdout)


# the driver libraries a GPU backend loads into the server (Mesa's lavapipe is libvulkan_lvp.so)
DRIVER_LIB = re.compile(r"/(libvulkan_\w+\.so[\w.]*|libnvidia-\w+\.so[\w.]*|libcuda\.so[\w.]*|"
                        r"libamdhip64\.so[\w.]*|libze_\w+\.so[\w.]*)\s*$")


def driver_libs(pid: int | None) -> list[str] | None:
    """The device driver libraries mapped into process ``pid`` (Linux ``/proc/<pid>/maps``): the
    evidence that a running server loaded its device's driver; None where it cannot be read."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return sorted({m.group(1) for m in map(DRIVER_LIB.search, text.splitlines()) if m})


@dataclass(frozen=True)
class DeviceChoice:
    """The devices a run's servers see, how they were chosen, and the driver behind them."""

    backend: str
    select_var: str | None  # the variable that chose them (GGML_VK_VISIBLE_DEVICES), when set
    select_value: str | None
    devices: tuple[Device, ...]
    drivers: tuple[dict, ...] = ()

    def facts(self) -> dict:
        return {"backend": self.backend, "device_select": {self.select_var: self.select_value}
                if self.select_var else {}, "backend_devices": [d.as_dict() for d in self.devices],
                "device_used": [d.name for d in self.devices], "drivers": list(self.drivers)}

    @property
    def summary(self) -> str:
        if not self.devices:
            return f"backend {self.backend}: no device" + (" listed" if self.backend == "unknown" else " (CPU)")
        sel = f" ({self.select_var}={self.select_value})" if self.select_var else ""
        # llama-server splits the model over every device it sees (--device or *_VISIBLE_DEVICES narrow it)
        return f"backend {self.backend}: " + ", ".join(f"{d.name} {d.description}" for d in self.devices) + sel


def _raw_vulkan_devices(binary: Path, env: Mapping[str, str]) -> list[tuple[int, Device]]:
    """Every raw Vulkan index that names a device, CPU-type ones included (each one made visible)."""
    found = []
    for i in range(MAX_RAW_INDEX):
        devs, _ = list_devices(binary, {**env, "GGML_VK_VISIBLE_DEVICES": str(i)})
        if not devs:
            break
        found.append((i, devs[0]))
    return found


_CHOICES: dict[tuple, DeviceChoice] = {}


def choose(binary: Path, backend: str, device: int | None = None, where: str = "--device") -> DeviceChoice:
    """The devices ``binary`` (a ``backend`` build) will use; ``device`` is a raw index for the
    backend's selection variable.  Refused (exit 2, naming what exists) when a GPU build would
    see no device, or the index names none."""
    env = dict(os.environ)
    var = SELECT_ENV.get(backend)
    if device is not None:
        if var is None:
            raise BadInput(f"--device is not supported for the {backend} backend", where=where,
                           hint="drop --device" + ("" if backend in ("cpu", "metal") else
                                                   "; select the device with the backend's own variable"))
        env[var] = str(device)
    key = (str(binary), backend, var, env.get(var) if var else None)
    if key in _CHOICES:
        return _CHOICES[key]
    if backend not in GPU_BACKENDS:
        choice = DeviceChoice(backend, None, None, tuple(list_devices(binary, env)[0]))
        _CHOICES[key] = choice
        return choice
    devs, raw = list_devices(binary, env)
    devs = [d for d in devs if d.backend == backend]
    if not devs:
        available = ""
        hint = "check the driver (vulkaninfo --summary, nvidia-smi)"
        if backend == "vulkan":
            raw_devs = _raw_vulkan_devices(binary, {k: v for k, v in env.items() if k != var})
            available = "; devices by raw index: " + (", ".join(f"{i} = {d.description}" for i, d in raw_devs)
                                                      or "none (no Vulkan driver found)")
            if raw_devs:
                hint = (f"pass --device {raw_devs[0][0]} to use {raw_devs[0][1].description} (ggml skips CPU-type "
                        "Vulkan devices such as Mesa's lavapipe unless GGML_VK_VISIBLE_DEVICES names them; "
                        "lbench never falls back to the CPU silently)")
        chosen = env.get(var) if var else None
        if chosen is not None:  # --device N, or the user's own variable
            what = f"device index {chosen} ({var}={chosen}) names no {backend} device"
            hint = f"use an index that exists (--device N){available and ': ' + available.split(': ', 1)[1]}"
        else:
            what = f"the {backend} build sees no {backend} device"
        raise BadInput(what + available, where=f"--device / {var}" if chosen is not None else str(binary),
                       hint=hint + "\n" + raw.strip()[-600:])
    drivers = tuple(vulkan_drivers()) if backend == "vulkan" else ()
    if backend == "vulkan" and var in env:  # the driver of the device chosen by raw index
        try:
            indexes = {int(x) for x in str(env[var]).split(",") if x.strip()}
            drivers = tuple(d for d in drivers if int(d.get("index", -1)) in indexes) or drivers
        except ValueError:
            pass
    choice = DeviceChoice(backend, var if var in env else None, env.get(var) if var else None, tuple(devs), drivers)
    _CHOICES[key] = choice
    return choice
