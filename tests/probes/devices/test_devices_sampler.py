"""The sampler: bounded rate, no reading starts inside the guard before the request, a suspended device
is left alone (a tmp_path sysfs laid out from real files, sysfs_layout.py)."""

import math
import time
from pathlib import Path

import pytest

from harness.probes.devices import drm
from harness.probes.devices.sampler import MIN_INTERVAL_S, DeviceSampler
from sysfs_layout import ACTIVE, CONTROL_ON, PP_DPM_SCLK, SUSPENDED, VRAM_USED_LOADED, lay_out_card


def card(tmp_path: Path, status: str) -> drm.DrmProbe:
    lay_out_card(tmp_path, {"power/runtime_status": status, "power/control": CONTROL_ON,
                            "mem_info_vram_used": VRAM_USED_LOADED, "pp_dpm_sclk": PP_DPM_SCLK})
    [probe] = drm.find_cards(tmp_path)
    return probe


def run_window(sampler: DeviceSampler, pause_s: float) -> float:
    start = time.perf_counter()
    send_at = start + pause_s
    sampler.window({"rep": 0, "seq": 5, "pause_requested_s": pause_s}, start, send_at)
    while time.perf_counter() < send_at:
        time.sleep(0.01)
    sampler.stop()
    sampler.join()
    return send_at


def test_rate_is_bounded():
    with pytest.raises(ValueError):
        DeviceSampler([], lambda row: None, interval_s=MIN_INTERVAL_S / 2)


def test_samples_through_the_pause_and_stops_before_the_guard(tmp_path: Path):
    rows: list[dict] = []
    sampler = DeviceSampler([card(tmp_path, ACTIVE)], rows.append, interval_s=0.1, guard_s=0.2)
    run_window(sampler, 0.8)
    assert rows, "an active device is sampled"
    # at most one reading per interval over the sampled part of the pause (0.8 - 0.2 s)
    assert len(rows) <= math.ceil((0.8 - 0.2) / 0.1) + 1
    assert all(r["t_before_send_s"] >= 0.2 for r in rows)  # no reading started inside the guard
    assert all(not r["ended_after_send"] for r in rows)
    first = rows[0]
    assert first["mem_used_bytes"] == 2056237056 and first["sm_clock_mhz"] == 852
    assert first["runtime_status"] == "active" and not first["left_alone"]
    assert first["rep"] == 0 and first["seq"] == 5 and first["device"] == "0000:01:00.0"
    cost = sampler.cost()
    assert cost["n_readings"] == len(rows) and cost["window_s"] > 0 and cost["cpu_s"] >= 0


def test_a_suspended_device_is_left_alone(tmp_path: Path):
    probe = card(tmp_path, SUSPENDED)
    rows: list[dict] = []
    sampler = DeviceSampler([probe], rows.append, interval_s=0.1, guard_s=0.1)
    run_window(sampler, 0.5)
    assert rows and all(r["left_alone"] and r["runtime_status"] == "suspended" for r in rows)
    assert all("mem_used_bytes" not in r for r in rows)
    assert set(probe.opened) == {"card1/device/power/runtime_status"}  # nothing else was touched
    assert sampler.cost()["n_left_alone"] == len(rows)


def test_no_window_when_the_pause_has_no_room(tmp_path: Path):
    rows: list[dict] = []
    sampler = DeviceSampler([card(tmp_path, ACTIVE)], rows.append, interval_s=0.1, guard_s=0.25)
    now = time.perf_counter()
    assert sampler.window({}, now, now + 0.1) is False  # a 0.1 s pause is inside the guard
    sampler.join()
    assert rows == []


def test_a_failing_probe_is_recorded_not_raised():
    class Broken:
        name, device = "broken", "x"

        def power_state(self) -> str | None:
            return None

        def read(self) -> dict:
            raise OSError("gone")

    rows: list[dict] = []
    sampler = DeviceSampler([Broken()], rows.append, interval_s=0.1, guard_s=0.05)
    run_window(sampler, 0.2)
    assert rows and rows[0]["error"] == "OSError: gone"


def test_a_probe_with_a_longer_minimum_interval_is_read_less_often():
    class Slow:
        name, device, min_interval_s = "slow", "s", 10.0

        def power_state(self) -> str | None:
            return None

        def read(self) -> dict:
            return {"budget_bytes": 1}

    class Fast(Slow):
        name, device, min_interval_s = "fast", "f", 0.0

    rows: list[dict] = []
    sampler = DeviceSampler([Slow(), Fast()], rows.append, interval_s=0.1, guard_s=0.05)
    run_window(sampler, 0.5)
    assert [r["probe"] for r in rows].count("slow") == 1
    assert [r["probe"] for r in rows].count("fast") > 1
