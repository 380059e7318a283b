"""AMD and Intel GPUs on Linux through DRM sysfs (``/sys/class/drm/cardN/device``).

Read per card, keyed on the PCI address (``cardN`` numbers are not stable):
``power/runtime_status`` first (a device that is not active is left alone), then
AMD's ``mem_info_vram_used``/``mem_info_vram_total``/``mem_info_gtt_used`` (bytes),
the current level of ``pp_dpm_sclk``/``pp_dpm_mclk`` (MHz), Intel's actual GT frequency
(xe ``tile*/gt*/freq0/act_freq``, i915 ``gt_act_freq_mhz``) and hwmon power
(``power1_input``, else ``power1_average``, microwatts).

Clock and power files go through the driver's power management (an access can resume the
device or reset its autosuspend timer; "hwmon and gpu_metrics should not be accessed in
order for the dGPU to transition to D3hot", amdgpu_top #90), so while runtime PM may
suspend the card (``power/control`` is ``auto``) only the memory counters are read and the
probe says so.  Every path is under a ``root`` (default ``/sys``) so tests can lay real
files out in a temporary directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.probes.devices.base import read_text, runtime_status

DPM_LINE = re.compile(r"^(\d+):\s*(\d+)Mhz\s*(\*)?$")
CARD_NAME = re.compile(r"^card\d+$")


def parse_int(text: str | None) -> int | None:
    """One decimal integer and a newline (``mem_info_*``, ``power1_*``, ``act_freq``)."""
    if text is None:
        return None
    word = text.strip()
    return int(word) if re.fullmatch(r"-?\d+", word) else None


def parse_dpm(text: str | None) -> int | None:
    """``pp_dpm_sclk``/``pp_dpm_mclk``: the MHz of the level marked ``*`` (None when none is marked).
    Levels may repeat a value, so the marked line is taken, never a frequency lookup."""
    if text is None:
        return None
    for line in text.splitlines():
        m = DPM_LINE.match(line.strip())
        if m and m.group(3):
            return int(m.group(2))
    return None


def pci_address(device_dir: Path) -> str:
    """The PCI address of a card (``readlink cardN/device`` basename), lower-case; the card's
    own name when the link cannot be resolved."""
    try:
        return device_dir.resolve(strict=True).name.lower()
    except OSError:
        return device_dir.parent.name


def driver_name(device_dir: Path) -> str | None:
    link = device_dir / "driver"
    try:
        return link.resolve(strict=True).name
    except OSError:
        return None


@dataclass
class DrmProbe:
    """One DRM card: AMD (amdgpu) or Intel (i915, xe)."""

    device_dir: Path  # <root>/class/drm/cardN/device
    card_dir: Path  # <root>/class/drm/cardN
    name: str = "drm"
    device: str = ""
    driver: str | None = None
    runtime_pm: bool = False  # power/control is "auto": the card may suspend, so clocks and power are not read
    opened: list[str] = field(default_factory=list)  # every file read, in order (what a test checks)

    def __post_init__(self) -> None:
        self.device = self.device or pci_address(self.device_dir)
        self.driver = self.driver or driver_name(self.device_dir)
        control = read_text(self.device_dir / "power" / "control")
        self.runtime_pm = control is not None and control.strip() == "auto"

    def _read(self, path: Path) -> str | None:
        self.opened.append(str(path.relative_to(self.card_dir.parent)))
        return read_text(path)

    def power_state(self) -> str | None:
        return runtime_status(self._read(self.device_dir / "power" / "runtime_status"))

    def read(self) -> dict[str, object]:
        d = self.device_dir
        out: dict[str, object] = {}
        for key, file in (("mem_used_bytes", "mem_info_vram_used"), ("mem_total_bytes", "mem_info_vram_total"),
                          ("gtt_used_bytes", "mem_info_gtt_used")):
            if (d / file).exists():
                value = parse_int(self._read(d / file))
                if value is not None:
                    out[key] = value
        if self.runtime_pm:
            return out
        sclk = parse_dpm(self._read(d / "pp_dpm_sclk")) if (d / "pp_dpm_sclk").exists() else None
        if sclk is None:
            sclk = self._intel_act_freq()
        if sclk is not None:
            out["sm_clock_mhz"] = sclk
        if (d / "pp_dpm_mclk").exists():
            mclk = parse_dpm(self._read(d / "pp_dpm_mclk"))
            if mclk is not None:
                out["mem_clock_mhz"] = mclk
        power = self._hwmon_power_uw()
        if power is not None:
            out["power_w"] = power / 1e6
        return out

    def _intel_act_freq(self) -> int | None:
        """xe: the highest ``act_freq`` over the GTs (0 means the GT sits in RC6, not an error);
        i915: ``gt_act_freq_mhz`` on the card."""
        values = [parse_int(self._read(p)) for p in sorted(self.device_dir.glob("tile*/gt*/freq0/act_freq"))]
        found = [v for v in values if v is not None]
        if found:
            return max(found)
        i915 = self.card_dir / "gt_act_freq_mhz"
        return parse_int(self._read(i915)) if i915.exists() else None

    def _hwmon_power_uw(self) -> int | None:
        """Try ``power1_input``, then ``power1_average`` (most AMD GPUs have only one of the two)."""
        for hwmon in sorted(self.device_dir.glob("hwmon/hwmon*")):
            for file in ("power1_input", "power1_average"):
                if (hwmon / file).exists():
                    value = parse_int(self._read(hwmon / file))
                    if value is not None:
                        return value
        return None


def find_cards(root: Path = Path("/sys")) -> list[DrmProbe]:
    """Every DRM card under ``root`` with a device (connectors such as ``card0-DP-1`` are skipped),
    in PCI-address order."""
    base = root / "class" / "drm"
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return []
    cards = [DrmProbe(base / n / "device", base / n) for n in names if CARD_NAME.match(n)
             and (base / n / "device").is_dir()]
    return sorted(cards, key=lambda c: c.device)
