"""Device sections of lbench evidence and the report (harness/report/device.py), from a run's own tables."""

import pandas as pd
from device_frames import interleaved, rewire

from harness.report.device import memory_timeline
from harness.report.evidence import device_section, md
from harness.store import RunWriter, open_run


def _run(tmp_path, samples: pd.DataFrame, device_rows: list[dict]):
    w = RunWriter(tmp_path, "idle", {"config": {}, "cells": []})
    for row in samples.to_dict("records"):
        w.append({**row, "cell": 0})
    for row in device_rows:
        w.append(row, table="device_samples")
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_evidence_renders_the_before_after_table_and_the_plot(tmp_path):
    samples = pd.concat([interleaved(0.0).assign(setting=s) for s in ("GGML_VK_KEEPALIVE_MS=unset",
                                                                      "GGML_VK_KEEPALIVE_MS=30000")])
    dev = [{"cell": 0, "model": "tiny", "setting": s, "rep": rep, "seq": rep * 4 + 3, "pause_requested_s": 3.0,
            "probe": "process", "device": "cpu", "t_since_pause_start_s": t, "t_before_send_s": 3.0 - t,
            "runtime_status": None, "left_alone": False, "process_mem_bytes": (100 + rep) * 2**20}
           for s in ("GGML_VK_KEEPALIVE_MS=unset", "GGML_VK_KEEPALIVE_MS=30000") for rep in range(8)
           for t in (0.5, 1.0, 2.5)]
    run = _run(tmp_path, samples, dev)
    out = tmp_path / "ev"
    out.mkdir()
    lines, files = device_section(run, run.table("samples"), out)
    text = "\n".join(lines)
    assert f"run `{run.run_id}`" in text and "after the longest pause (3 s)" in text
    # 8 requests after the 3 s pause, process memory 100..107 MiB: median 103.5, order-statistic 95% CI 100-107
    assert ("| tiny | GGML_VK_KEEPALIVE_MS=unset | process cpu process_mem_bytes: 103.5 MiB (95% CI 100.0–107.0) "
            "(n=8)") in text
    assert "within 2%" in text  # the interleaved arms' perturbation sentence
    assert files == [f"{run.run_id}-tiny-device.png"] and (out / files[0]).read_bytes()[:4] == b"\x89PNG"


def test_no_device_samples_no_device_section(tmp_path):
    samples = interleaved(0.0)
    samples["device_sampling"] = None
    run = _run(tmp_path, samples, [])
    out = tmp_path / "ev"
    out.mkdir()
    lines, files = device_section(run, run.table("samples"), out)
    assert files == [] and not any("|" in line for line in lines)  # one setting: no before/after table
    assert md("a|b") == "a\\|b"


def test_memory_timeline_draws_wired_memory_and_says_how_to_read_it_beside_the_slope():
    timeline = memory_timeline(rewire(), "RUN")
    assert timeline["metric"] == "wired_bytes" and timeline["wired"] and timeline["absent"] is None
    assert timeline["figure"][:4] == b"\x89PNG" and timeline["what"] == "macOS wired memory (vm_stat)"
    long = timeline["rows"][-1]
    assert long["pause_s"] == 3.0 and "8,194.5 MiB → 4,098.5 MiB (change -4,096.0 MiB" in long["text"]
    assert "clock ramp" in timeline["read_together"] and "re-wire" in timeline["read_together"]


def test_without_device_samples_the_timeline_names_the_option_that_makes_them():
    timeline = memory_timeline(pd.DataFrame(), "RUN")
    assert timeline["figure"] is None and timeline["rows"] == []
    assert "--device-probes auto" in timeline["absent"]


def test_memory_timeline_of_a_long_grid_keys_pauses_by_a_colour_bar():
    dev = pd.concat([rewire().assign(pause_requested_s=p, seq=lambda f, i=i: f["seq"] + 100 * i)
                     for i, p in enumerate((1, 2, 3, 5, 10, 30, 60, 185))])
    timeline = memory_timeline(dev, "RUN")
    assert timeline["figure"][:4] == b"\x89PNG" and len({r["pause_s"] for r in timeline["rows"]}) == 8
