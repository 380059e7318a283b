"""The harness measuring itself (``lbench calibrate``): overhead, pause error, efficiency, HTTP floor."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import stats

# Each repetition: a block of back-to-back requests, then short pauses.  Harness
# overhead is read from the steady part of the block; pause error and efficiency
# from the whole run.
CALIBRATION_BLOCK = 30
STEADY_AFTER = 10  # back-to-back requests the server needs to settle after a pause
CALIBRATION_PAUSES = [0.0] * CALIBRATION_BLOCK + [0.02, 0.05, 0.1, 0.2, 0.3]
TARGETS = {"overhead_p50_ms": 0.5, "overhead_p99_ms": 2.0, "harness_p50_ms": 0.2, "pause_error_p99_ms": 1.0,
           "efficiency": 1.03}


def calibration_figures(samples: pd.DataFrame, cells: list[dict]) -> dict[str, float]:
    """The harness's own figures.

    Overhead (client wall minus server time) is taken from steady back-to-back
    requests (at least STEADY_AFTER requests with pause 0 since the last pause):
    there it is the harness plus the server's HTTP handling, an upper bound on what
    the harness adds.  For a few requests after a pause the server's own threads
    are still waking up (its prompt_ms is slow in the very same samples, in
    kernel-tick steps); those are reported separately, as information.
    """
    good = stats.measured(samples).sort_values(["cell", "seq"])
    since_pause = []
    count = 0
    for pause in good["pause_requested_s"]:
        count = count + 1 if pause == 0 else 0
        since_pause.append(count)
    steady = pd.Series(since_pause, index=good.index) > STEADY_AFTER
    wall = sum(c.get("sweep_wall_s") or 0 for c in cells)
    denominator = good["pause_requested_s"].sum() + good["server_ms"].sum() / 1000.0
    back_to_back = good[steady]
    after_pause = good[~steady]
    # samples where the server's own compute was also inflated (> 3x its median) were
    # hit by host scheduling, which no client can avoid: shown separately
    undisturbed = back_to_back[back_to_back["server_prompt_ms"] <= 3 * back_to_back["server_prompt_ms"].median()]
    return {
        "overhead_p50_ms": stats.percentile(back_to_back["overhead_ms"], 50),
        "overhead_p99_ms": stats.percentile(back_to_back["overhead_ms"], 99),
        "pause_error_p99_ms": stats.percentile((good["pause_actual_s"] - good["pause_requested_s"]).abs() * 1e3, 99),
        "efficiency": wall / denominator if denominator else float("nan"),
        "n": float(len(good)),
        "n_back_to_back": float(len(back_to_back)),
        "overhead_p99_undisturbed_ms": stats.percentile(undisturbed["overhead_ms"], 99),
        "n_disturbed": float(len(back_to_back) - len(undisturbed)),
        "overhead_after_pause_p50_ms": stats.percentile(after_pause["overhead_ms"], 50),
        "overhead_after_pause_p99_ms": stats.percentile(after_pause["overhead_ms"], 99),
        "server_ms_p50": float(np.median(good["server_ms"])) if len(good) else float("nan"),
        **floor_figures(samples, back_to_back["overhead_ms"], after_pause["overhead_ms"]),
    }


def floor_figures(samples: pd.DataFrame, overhead_b2b: pd.Series, overhead_after: pd.Series) -> dict[str, float]:
    """harness cost = client latency - server time - HTTP floor (GET /health on the same connection,
    timed the same way), back to back and after pauses."""
    nan = float("nan")
    if "phase" not in samples or not samples["phase"].eq("floor-http").any():
        return {k: nan for k in ("floor_p50_ms", "floor_p99_ms", "floor_after_pause_p50_ms",
                                 "floor_after_pause_p99_ms", "harness_p50_ms", "harness_p99_ms",
                                 "harness_after_pause_p50_ms", "harness_after_pause_p99_ms")}
    floor = samples[samples["phase"].eq("floor-http") & samples["error"].isna()]
    b2b = floor[floor["pause_requested_s"] == 0]["latency_ms"]
    after = floor[floor["pause_requested_s"] > 0]["latency_ms"]
    f50 = stats.percentile(b2b, 50)
    a50 = stats.percentile(after, 50) if len(after) else nan
    return {
        "floor_p50_ms": f50, "floor_p99_ms": stats.percentile(b2b, 99),
        "floor_after_pause_p50_ms": a50, "floor_after_pause_p99_ms": stats.percentile(after, 99) if len(after) else nan,
        "harness_p50_ms": stats.percentile(overhead_b2b - f50, 50),
        "harness_p99_ms": stats.percentile(overhead_b2b - f50, 99),
        "harness_after_pause_p50_ms": stats.percentile(overhead_after - a50, 50) if len(after) else nan,
        "harness_after_pause_p99_ms": stats.percentile(overhead_after - a50, 99) if len(after) else nan,
    }


def summarize_run(run) -> dict:
    """The calibrate part of analysis.json: the idle analysis plus the harness's own figures and targets."""
    from harness.analysis.idle import summarize_run as summarize_idle

    figures = calibration_figures(run.table("samples"), run.manifest.get("cells", []))
    return {**summarize_idle(run), "calibration": figures, "calibration_targets": TARGETS}
