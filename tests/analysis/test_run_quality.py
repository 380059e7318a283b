"""Run-quality warnings from snapshots and samples (harness.runs.quality)."""

from pathlib import Path

import numpy as np
import pandas as pd

from harness.runs.quality import assess, snapshot


def test_snapshot_reads_this_machine():
    s = snapshot(interval_s=0.05)
    assert s["cpus"] >= 1 and "busy_processes" in s and "governor" in s


def test_assess_warns_on_load_busy_processes_few_reps_and_wide_distributions():
    quiet = {"cpus": 4, "loadavg_1m": 0.1, "busy_processes": [], "governor": "performance"}
    loaded = {"cpus": 4, "loadavg_1m": 3.5, "busy_processes": [{"pid": 7, "name": "cc1", "cpu_pct": 95.0}],
              "governor": "powersave"}
    rng = np.random.default_rng(0)
    rows = [{"model": "m", "setting": "s", "pause_requested_s": 0.0, "latency_ms": v}
            for v in rng.lognormal(np.log(20), 0.02, 10)]
    rows += [{"model": "m", "setting": "s", "pause_requested_s": 1.0, "latency_ms": v} for v in (2.0, 12.0, 2.1)]
    rows += [{"model": "m", "setting": "s", "pause_requested_s": 2.0, "latency_ms": v}
             for v in [1.5] * 5 + [12.0] * 5]
    samples = pd.DataFrame(rows)
    assert assess(quiet, quiet, samples.iloc[:10]) == []
    w = " | ".join(assess(loaded, loaded, samples))
    assert "load average 3.5" in w and "cc1 (pid 7)" in w and "powersave" in w
    assert "m · s: only 3 reps (< 6) at pause 1 s" in w and "very wide distribution at 2 s (p90/p10 = 8.0)" in w


def test_few_reps_at_many_pauses_is_one_warning_per_cell_and_gate_names_runs_once():
    from harness.cli.verdicts import quality_lines as _quality_lines
    from harness.record import parse_record
    from harness.store import Run

    rows = [{"model": "m", "setting": "s", "pause_requested_s": p, "latency_ms": 10.0 + i}
            for p in (0.0, 0.3, 0.6, 1.0) for i in range(3)]
    quiet = {"cpus": 4, "loadavg_1m": 0.1, "busy_processes": [], "governor": "performance"}
    w = assess(quiet, quiet, pd.DataFrame(rows))
    assert w == ["m · s: only 3 reps (< 6) at 4 pauses (0, 0.3, 0.6, 1 s): no 95% interval for those medians"]
    runs = [Run(Path(f"/r/{i}"), parse_record({"run_id": f"r{i}", "kind": "idle", "quality": {"warnings": w}},
                                              f"/r/{i}/manifest.json")) for i in range(3)]
    lines = _quality_lines(runs, "A")
    assert len(lines) == 1 and lines[0].startswith("warning (A 3 of 3 runs): m · s: only 3 reps")


def test_many_busy_processes_are_one_warning_per_moment():
    procs = [{"pid": p, "name": f"cc1plus-{p}", "cpu_pct": 90.0 - p} for p in range(6)]
    snap = {"cpus": 2, "loadavg_1m": 0.1, "busy_processes": procs, "governor": "performance"}
    w = [x for x in assess(snap, snap, None) if "busy" in x]
    assert len(w) == 2  # before and after, not 12 lines
    assert w[0].startswith("6 other processes were busy before the run") and w[0].endswith("and 3 more")
    assert "cc1plus-0 (pid 0) 90.0%" in w[0] and "cc1plus-3" not in w[0]
