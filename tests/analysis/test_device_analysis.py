"""The perturbation check and the per-setting table on known data (harness/analysis/device.py)."""

import pandas as pd
from device_frames import interleaved, rewire

from harness.analysis import device


def test_no_effect_is_within_tolerance():
    [p] = device.perturbation(interleaved(0.0))
    assert p["verdict"] == "within 2%"
    assert abs(p["penalty_diff_ms"]) < 0.5
    assert p["n_reps_on"] == p["n_reps_off"] == 4
    assert p["long_pauses_from_s"] == 2.0 and p["short_pause_s"] == 0.0
    assert "within 2%" in device.perturbation_sentence(p)


def test_a_real_effect_moves_it():
    [p] = device.perturbation(interleaved(10.0))  # +10 ms on 50 ms: +20%
    assert p["verdict"] == "moves it"
    assert 9.0 < p["penalty_diff_ms"] < 11.0
    lo, hi = p["long_latency_diff_ci_pct"]
    assert lo > 2.0 and 15.0 < p["long_latency_diff_pct"] < 25.0


def test_not_interleaved_has_no_perturbation_figure():
    frame = interleaved(0.0)
    frame["device_sampling"] = None
    assert device.perturbation(frame) == []
    assert device.perturbation(frame.iloc[0:0]) == []


def test_setting_table_memory_during_the_longest_pause():
    samples = pd.concat([interleaved(0.0).assign(setting=s) for s in ("A=unset", "A=30000")])
    dev = pd.DataFrame([
        # two readings in the pause before seq 3 (a 3 s pause): the last one counts
        {"model": "tiny", "setting": "A=unset", "pause_requested_s": 3.0, "seq": 3, "probe": "drm",
         "device": "0000:01:00.0", "t_since_pause_start_s": 0.5, "left_alone": False, "mem_used_bytes": 2056237056},
        {"model": "tiny", "setting": "A=unset", "pause_requested_s": 3.0, "seq": 3, "probe": "drm",
         "device": "0000:01:00.0", "t_since_pause_start_s": 2.5, "left_alone": False, "mem_used_bytes": 5439488},
        {"model": "tiny", "setting": "A=30000", "pause_requested_s": 3.0, "seq": 3, "probe": "drm",
         "device": "0000:01:00.0", "t_since_pause_start_s": 2.5, "left_alone": False, "mem_used_bytes": 2056237056},
        {"model": "tiny", "setting": "A=30000", "pause_requested_s": 3.0, "seq": 7, "probe": "drm",
         "device": "0000:01:00.0", "t_since_pause_start_s": 2.5, "left_alone": True, "mem_used_bytes": None},
    ])
    rows = device.setting_table(samples, dev)
    assert [r["setting"] for r in rows] == ["A=unset", "A=30000"]
    unset, kept = rows
    assert unset["pause_s"] == 3.0 and unset["latency_ms"]["n"] == 8
    [mem] = unset["memory"]
    assert (mem["probe"], mem["device"], mem["metric"], mem["median_bytes"], mem["n"]) == \
        ("drm", "0000:01:00.0", "mem_used_bytes", 5439488.0, 1)
    assert kept["memory"][0]["median_bytes"] == 2056237056.0 and kept["memory"][0]["n"] == 1
    assert "prompt_tokens_per_s" not in unset  # one cached token: no prompt-eval rate


def test_wired_memory_is_preferred_and_its_fall_in_the_long_pause_is_measured():
    dev = rewire()
    assert device.memory_metric(dev) == "process_mem_bytes"  # the plain order: the first memory column
    assert device.memory_metric(dev, prefer_wired=True) == "wired_bytes"
    short, long = device.memory_through_pauses(dev, "wired_bytes")
    assert (short["pause_s"], long["pause_s"]) == (0.5, 3.0) and short["n"] == long["n"] == 6
    assert short["change_median_bytes"] == 0.0  # one reading at 0.1 s: no time to fall
    assert long["change_median_bytes"] == -4 * 2**30  # 8 GiB -> 4 GiB after 1 s
    lo, hi = long["change_ci_bytes"]
    assert lo == hi == -4 * 2**30 and long["last_reading_s"] == 2.6
    flat = device.memory_through_pauses(dev, "process_mem_bytes")
    assert [r["change_median_bytes"] for r in flat] == [0.0, 0.0] and {r["probe"] for r in flat} == {"process"}


def test_memory_through_pauses_skips_devices_left_alone_and_absent_metrics():
    dev = rewire()
    dev.loc[dev["probe"] == "apple", "left_alone"] = True
    assert device.memory_through_pauses(dev, "wired_bytes") == []
    assert device.memory_through_pauses(dev, "gtt_used_bytes") == []
    assert device.memory_metric(dev.iloc[0:0]) is None
