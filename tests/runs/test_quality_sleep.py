"""Run quality names a sleep inside a pause (the slept_s column) and what it cannot see on a Mac."""

import pandas as pd

from harness.runs.quality import assess


def _samples(slept: list[float | None]) -> pd.DataFrame:
    return pd.DataFrame({"model": "m", "setting": "s", "pause_requested_s": 1.0,
                         "latency_ms": [10.0] * len(slept), "slept_s": slept})


def test_a_sleep_inside_a_pause_is_a_warning():
    quiet = {"cpus": 2, "loadavg_1m": 0.0, "busy_processes": [], "thermal": None}
    assert not any("slept" in w for w in assess(quiet, quiet, _samples([0.0, 0.0001, None, 0.0, 0.0, 0.0])))
    warnings = assess(quiet, quiet, _samples([0.0, 41.2, 0.0, 0.0, 0.0, 0.0]))
    assert any("slept during 1 pause(s)" in w and "41.2 s" in w for w in warnings)


def test_mac_blind_spots_are_said():
    mac = {"cpus": 10, "loadavg_1m": 0.1, "busy_processes": [], "unreadable_processes": 312,
           "thermal": {"power_source": "AC Power"}}
    text = " | ".join(assess(mac, mac, None))
    assert "thermal state unknown" in text and "312 processes" in text
