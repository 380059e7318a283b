"""DRM sysfs probe (AMD, Intel) on real file contents laid out in tmp_path (sources in sysfs_layout.py)."""

from pathlib import Path

from harness.probes.devices import drm
from sysfs_layout import (ACTIVE, CONTROL_AUTO, CONTROL_ON, PP_DPM_MCLK, PP_DPM_SCLK, SUSPENDED, VRAM_TOTAL,
                          VRAM_USED_IDLE, VRAM_USED_LOADED, lay_out_card)

# https://github.com/hakandundar34coding/system-monitoring-center/issues/45: `grep .` over the files, so each
# line is "<path>:<line>"; the file's own lines are what follows the path (non-current levels keep a trailing space)
GREP_FORM = """/sys/class/drm/card1/device/pp_dpm_sclk:0: 300Mhz 
/sys/class/drm/card1/device/pp_dpm_sclk:6: 1233Mhz *
/sys/class/drm/card1/device/pp_dpm_sclk:7: 1268Mhz 
"""
# https://github.com/sibradzic/amdgpu-clocks/issues/21 (APU): `0: 400Mhz `, `1: 933Mhz *`, `2: 1067Mhz `, `3: 1200Mhz `
APU_SCLK = "0: 400Mhz \n1: 933Mhz *\n2: 1067Mhz \n3: 1200Mhz \n"
# https://github.com/ROCm/amdsmi/pull/174: cat .../hwmon/hwmon9/power1_cap (microwatts; the same one-integer
# format as power1_input/power1_average, of which no bare real read was found: docs/probes.md)
POWER1_CAP = "1000000000\n"


def test_vram_counters_are_bytes():
    assert drm.parse_int(VRAM_USED_LOADED) == 2056237056
    assert drm.parse_int(VRAM_USED_IDLE) == 5439488
    assert drm.parse_int(POWER1_CAP) == 1_000_000_000
    assert drm.parse_int("") is None and drm.parse_int(None) is None


def test_dpm_current_level_is_the_marked_line():
    assert drm.parse_dpm(PP_DPM_SCLK) == 852
    assert drm.parse_dpm(PP_DPM_MCLK) == 96
    assert drm.parse_dpm(APU_SCLK) == 933
    file_lines = "".join(line.split(":", 1)[1] + "\n" for line in GREP_FORM.splitlines())
    assert drm.parse_dpm(file_lines) == 1233
    assert drm.parse_dpm("0: 852Mhz\n1: 991Mhz\n") is None  # no level marked: unknown, not the first


def test_amd_card_read_when_active_and_runtime_pm_off(tmp_path: Path):
    lay_out_card(tmp_path, {"power/runtime_status": ACTIVE, "power/control": CONTROL_ON,
                            "mem_info_vram_used": VRAM_USED_LOADED, "mem_info_vram_total": VRAM_TOTAL,
                            "pp_dpm_sclk": PP_DPM_SCLK, "pp_dpm_mclk": PP_DPM_MCLK})
    [card] = drm.find_cards(tmp_path)
    assert card.device == "0000:01:00.0" and card.driver == "amdgpu" and not card.runtime_pm
    assert card.power_state() == "active"
    assert card.read() == {"mem_used_bytes": 2056237056, "mem_total_bytes": 8573157376, "sm_clock_mhz": 852,
                           "mem_clock_mhz": 96}


def test_runtime_pm_auto_reads_memory_only(tmp_path: Path):
    """power/control auto: the card may suspend, and clock/power files go through its PM: not read."""
    lay_out_card(tmp_path, {"power/runtime_status": ACTIVE, "power/control": CONTROL_AUTO,
                            "mem_info_vram_used": VRAM_USED_IDLE, "pp_dpm_sclk": PP_DPM_SCLK})
    [card] = drm.find_cards(tmp_path)
    assert card.runtime_pm
    assert card.read() == {"mem_used_bytes": 5439488}
    assert not any("pp_dpm" in p or "hwmon" in p for p in card.opened)


def test_suspended_state_is_read_from_runtime_status(tmp_path: Path):
    lay_out_card(tmp_path, {"power/runtime_status": SUSPENDED, "mem_info_vram_used": VRAM_USED_LOADED})
    [card] = drm.find_cards(tmp_path)
    assert card.power_state() == "suspended"
    assert card.opened == ["card1/device/power/runtime_status"]


def test_missing_runtime_status_is_unknown_not_suspended(tmp_path: Path):
    lay_out_card(tmp_path, {"mem_info_vram_used": VRAM_USED_LOADED})
    [card] = drm.find_cards(tmp_path)
    assert card.power_state() is None


def test_intel_xe_and_i915_actual_frequency(tmp_path: Path):
    # https://github.com/ilya-zlobintsev/LACT/issues/893 (Arc B580 at idle: act_freq 0, i.e. in RC6)
    xe = tmp_path / "xe"
    lay_out_card(xe, {"tile0/gt1/freq0/act_freq": "0\n", "tile0/gt1/freq0/cur_freq": "1200\n",
                      "power/control": CONTROL_ON}, card="card0", bdf="0000:03:00.0", driver="xe")
    [card] = drm.find_cards(xe)
    assert card.driver == "xe" and card.read() == {"sm_clock_mhz": 0}
    # https://github.com/lm-sensors/lm-sensors/issues/430: `/sys/class/drm/card0/gt_act_freq_mhz: 350`
    i915 = tmp_path / "i915"
    lay_out_card(i915, {"power/control": CONTROL_ON}, card="card0", bdf="0000:00:02.0", driver="i915")
    (i915 / "class" / "drm" / "card0" / "gt_act_freq_mhz").write_text("350\n")
    [card] = drm.find_cards(i915)
    assert card.read() == {"sm_clock_mhz": 350}


def test_connectors_and_missing_tree(tmp_path: Path):
    assert drm.find_cards(tmp_path) == []
    lay_out_card(tmp_path, {"mem_info_vram_used": VRAM_USED_LOADED})
    (tmp_path / "class" / "drm" / "card1-DP-1").mkdir()  # a connector, not a card
    assert [c.device for c in drm.find_cards(tmp_path)] == ["0000:01:00.0"]
