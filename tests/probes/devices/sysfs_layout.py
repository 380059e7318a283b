"""Lay out a DRM sysfs tree under tmp_path from real file contents (each quoted with its source).

The tree's shape is the kernel's (``class/drm/cardN/device`` a link to the PCI device,
``device/driver`` a link to the driver); every file's content is a real capture named below.
"""

from __future__ import annotations

from pathlib import Path

# https://github.com/ggml-org/llama.cpp/issues/17265 (Polaris 540X, RADV, llama-server loaded)
VRAM_USED_LOADED = "2056237056\n"
# the same issue, "After idling for several seconds:"
VRAM_USED_IDLE = "5439488\n"
# https://github.com/elementary/monitor/issues/369
VRAM_TOTAL = "8573157376\n"
# https://github.com/sibradzic/upp/issues/8 (cat .../pp_dpm_sclk)
PP_DPM_SCLK = "0: 852Mhz *\n1: 991Mhz\n2: 1084Mhz\n3: 1138Mhz\n4: 1200Mhz\n5: 1401Mhz\n6: 1576Mhz\n7: 1663Mhz\n"
# https://github.com/marazmista/radeon-profile/issues/294 (cat .../pp_dpm_mclk, 7900 XTX)
PP_DPM_MCLK = "0: 96Mhz *\n1: 456Mhz\n2: 772Mhz\n3: 1249Mhz\n"
# https://github.com/utajum/g-helper-linux/issues/150 (cat .../power/runtime_status)
ACTIVE = "active\n"
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/907 (cat .../power/runtime_status)
SUSPENDED = "suspended\n"
# power/control values: https://github.com/linrunner/TLP/pull/230 (tlp-stat shows "= auto" on battery,
# "= on" on AC; the file holds the word and a newline, kernel drivers/base/power/sysfs.c)
CONTROL_AUTO = "auto\n"
CONTROL_ON = "on\n"

BDF = "0000:01:00.0"  # the PCI address of utajum/g-helper-linux#150's dGPU


def lay_out_card(root: Path, files: dict[str, str], *, card: str = "card1", bdf: str = BDF,
                 driver: str = "amdgpu") -> Path:
    """``root/class/drm/<card>/device`` -> ``root/bus/pci/devices/<bdf>``, with ``files`` (paths
    relative to the device directory) written there.  Returns the device directory."""
    dev = root / "bus" / "pci" / "devices" / bdf
    dev.mkdir(parents=True)
    drivers = root / "bus" / "pci" / "drivers" / driver
    drivers.mkdir(parents=True)
    (dev / "driver").symlink_to(drivers)
    card_dir = root / "class" / "drm" / card
    card_dir.mkdir(parents=True)
    (card_dir / "device").symlink_to(dev)
    for rel, text in files.items():
        path = dev / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return dev
