"""Issue 33 on the report's surfaces: the headline, the wake table and the plot read one robust wake
model; stalls are their own figure and never set the plot's axis (rows written through the real store)."""

import numpy as np
import pandas as pd

from harness.report.plots import bulk_limits, stall_mask
from harness.report.render import render_report
from harness.store import RunWriter, open_run

GRID = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 2.0, 2.5, 3.0, 4.0]
# the per-pause medians of issue 33's default run (77 and 79 ms, then 84-109 ms); stalls of 346 and 1088 ms
MEDIANS = [77.0, 79.0, 92.0, 96.0, 88.0, 102.0, 94.0, 109.0, 90.0, 99.0, 86.0, 104.0, 97.0, 93.0, 101.0,
           84.0, 95.0, 91.0]
STALLS = {(2.5, 0): 346.0, (3.0, 0): 1088.0, (3.0, 1): 346.0}


def _issue_run(tmp_path):
    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0, "warmup": 2}, "host": {"os": "Linux"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": "m", "synthetic": True, "preset": "tiny", "n_params": 10, "bytes": 100,
                    "path": "/m.gguf", "quant": "Q8_0", "arch": "llama", "sha256": "ab" * 32}],
        "cells": [{"model": "m", "setting": "keep-alive=default", "notes": [], "error": None, "env_overrides": {},
                   "n_samples": 108, "sweep_wall_s": 1.0, "efficiency": 1.0, "argv": ["llama-server"]}],
    })
    rng = np.random.default_rng(0)
    seq = 0
    for rep in range(6):
        for pause, med in zip(GRID, MEDIANS):
            ms = STALLS.get((pause, rep), med * float(rng.lognormal(0, 0.05)))
            w.append({"model": "m", "setting": "keep-alive=default", "phase": "measure", "rep": rep, "seq": seq,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": ms,
                      "server_prompt_ms": ms - 0.5, "server_ms": ms - 0.5, "overhead_ms": 0.5,
                      "http_status": 200, "error": None})
            seq += 1
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_headline_table_and_plot_read_one_robust_model(tmp_path):
    import json

    run = _issue_run(tmp_path)
    html = render_report(run).read_text()
    analysis = json.loads((run.dir / "analysis.json").read_text())
    (wake,) = analysis["wake"]
    assert (wake["shape"], wake["last_warm_s"], wake["first_woken_s"]) == ("step", 0.2, 0.4)
    (headline,) = analysis["headline"]
    assert "after a pause of 0.4 s or more" in headline and "a wake step between 0.2 s and 0.4 s" in headline
    assert "stalls (left out of the fit): 3 of 108 requests" in headline
    assert "2.5 s (1 of 6), 3 s (2 of 6)" in headline
    table = html.split('<table class="wake">')[1].split("</table>")[0]
    assert "a wake step between 0.2 s and 0.4 s" in table and "3 of 108" in table and "at 2.5 s, 3 s" in table
    assert any("held in" in f and "refits" in f for f in analysis["findings"])
    # the plot flags exactly the model's stalls, and its axis is the bulk's
    samples = run.table("samples")
    flags = stall_mask(samples, "latency_ms", wake)
    assert sorted(samples.loc[flags, "latency_ms"]) == [346.0, 346.0, 1088.0]
    lo, hi, log_scale = bulk_limits(samples.loc[~flags, "latency_ms"].to_numpy(), np.array(MEDIANS))
    assert not log_scale and 60 < lo < 77 and 109 < hi < 140


def test_without_a_wake_row_nothing_is_a_stall_and_the_axis_holds_every_point():
    raw = pd.DataFrame({"pause_requested_s": [0.0, 0.0, 1.0], "latency_ms": [10.0, 11.0, 600.0]})
    assert not stall_mask(raw, "latency_ms", None).any()
    lo, hi, log_scale = bulk_limits(raw["latency_ms"].to_numpy(), np.array([10.5, 600.0]))
    assert hi >= 600 and log_scale
