"""What an idle (or calibrate) sweep showed: per-pause summaries, wake step per cell, the
cross-check against llama-idle, and the harness's own figures, in plain data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.regimes import wake_summary


def findings(good: pd.DataFrame) -> list[str]:
    """The run's findings in plain sentences: wake step (shape chosen by BIC) or none, per cell."""
    from harness.analysis.regimes import shape_all

    lines = []
    for (model, setting), fit in shape_all(good).items():
        n_reps = good[(good["model"] == model) & (good["setting"] == setting)].groupby("pause_requested_s").size()
        text = f"{model} · {setting}: {fit.threshold_text()}"
        if fit.has_step:
            text += (f"; latency {fit.warm_median_ms:.1f} ms warm -> {fit.woken_median_ms:.1f} ms woken, penalty "
                     f"{fit.penalty_ms:.1f} ms (95% CI {fit.penalty_ci[0]:.1f}–{fit.penalty_ci[1]:.1f}, "
                     f"bootstrap over samples)")
        text += f" (shape by BIC among {', '.join(fit.bic)}; {int(n_reps.min()) if len(n_reps) else 0} reps per pause)."
        if len(n_reps) and n_reps.min() < 6:
            text += " Fewer than 6 reps per pause: no per-pause 95% interval; treat the shape as tentative."
        lines.append(text)
    return lines


AGREE_MARGIN = 0.05  # the like-for-like goal: server prompt_ms within +/-5% of llama-idle's decode


def agreement(ratio_ci: tuple[float, float], margin: float = AGREE_MARGIN) -> str:
    """'agree' when the whole interval lies inside [1/(1+m), 1+m], 'server slower'/'server faster'
    when it lies wholly outside, else 'inconclusive'."""
    lo, hi = ratio_ci
    if lo != lo:
        return "inconclusive"
    if lo >= 1 / (1 + margin) and hi <= 1 + margin:
        return "agree"
    if lo > 1 + margin:
        return "server slower"
    if hi < 1 / (1 + margin):
        return "server faster"
    return "inconclusive"


def _per_run(frame: pd.DataFrame, column: str) -> list:
    if "run_id" in frame and frame["run_id"].nunique() > 1:
        return [g[column].to_numpy(dtype=float) for _, g in frame.groupby("run_id")]
    return [frame[column].to_numpy(dtype=float)]


def cross_check(samples: pd.DataFrame) -> list[dict]:
    """Per model and pause: lbench through HTTP vs llama-idle in-process, ratio of medians.

    ``ratio_server`` (server prompt_ms / llama-idle decode) gets a 95% interval from the same
    two-level bootstrap as compare's verdicts (samples within a run; runs too when ``samples``
    pools several runs, so the run is the unit) and a label against +/-5% (``agreement``)."""
    from harness.analysis.verdicts import boot_log_ratio, centre

    good = stats.measured(samples)
    if good.empty or "engine" not in good or good["engine"].nunique() < 2:
        return []
    from harness.engines import registry

    rows = []
    pairs = [(k.pairs_with, k.name) for k in registry.all_kinds() if k.can("cross_check")]
    for (model, g), (server_name, idle_name) in ((mg, pair) for mg in good.groupby("model") for pair in pairs):
        server = g[g["engine"] == server_name]
        idle = g[g["engine"] == idle_name]
        for pause in sorted(set(idle["pause_requested_s"]) & set(server["pause_requested_s"])):
            s_at = server[server["pause_requested_s"] == pause]
            i_at = idle[idle["pause_requested_s"] == pause]
            idle_runs, prompt_runs = _per_run(i_at, "latency_ms"), _per_run(s_at, "server_prompt_ms")
            s_lat = centre(_per_run(s_at, "latency_ms"))
            s_srv, i_lat = centre(prompt_runs), centre(idle_runs)
            nan = float("nan")
            ci = (nan, nan)
            if s_srv == s_srv and i_lat == i_lat and min(len(i_at), len(s_at)) >= 3:
                draws = np.exp(boot_log_ratio(idle_runs, prompt_runs, seed=int(pause * 1000)))
                ci = (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))
            rows.append({"model": model, "pause_s": float(pause), "http_latency_ms": s_lat, "server_prompt_ms": s_srv,
                         "llama_idle_ms": i_lat, "ratio_http": s_lat / i_lat if i_lat else nan,
                         "ratio_server": s_srv / i_lat if i_lat else nan,
                         "ratio_server_ci_low": ci[0], "ratio_server_ci_high": ci[1],
                         "agreement": agreement(ci), "n_server": int(len(s_at)), "n_llama_idle": int(len(i_at)),
                         "n_runs": int(s_at["run_id"].nunique()) if "run_id" in s_at else 1})
    return rows


def harness_figures(good: pd.DataFrame) -> dict:
    """The harness's share of each measured request: overhead (client - server) and pause error."""
    overhead = good["overhead_ms"].dropna() if not good.empty else []
    pause_err = (good["pause_actual_s"] - good["pause_requested_s"]).abs() * 1000 if not good.empty else []
    return {"overhead_p50_ms": stats.percentile(overhead, 50), "overhead_p99_ms": stats.percentile(overhead, 99),
            "pause_error_p99_ms": stats.percentile(pause_err, 99)}


def analyze_idle(samples: pd.DataFrame, models: list) -> dict:
    """Everything the CLI, the report and the evidence say about an idle run (summaries as frames)."""
    good = stats.measured(samples)
    wake, per_gb = wake_summary(good, models) if not good.empty else ([], [])
    errors = samples[samples["error"].notna()] if not samples.empty else samples
    out = {
        "summary_latency": stats.summarize_by_pause(samples, "latency_ms"),
        "summary_server": stats.summarize_by_pause(samples, "server_prompt_ms"),
        "wake": wake, "per_gb": per_gb,
        "findings": findings(good) if not good.empty else [],
        "cross_check": cross_check(samples),
        "harness": harness_figures(good),
        "n_measured": int(len(good)), "n_errors": int(len(errors)),
    }
    return out


def summarize_run(run) -> dict:
    """The idle/calibrate part of analysis.json (see harness/analysis/persisted.py)."""
    from harness.analysis.persisted import frame_json

    out = analyze_idle(run.table("samples"), [{"label": m.label, "bytes": m.bytes} for m in run.record.models])
    out["summary_latency"] = frame_json(out["summary_latency"])
    out["summary_server"] = frame_json(out["summary_server"])
    return out
