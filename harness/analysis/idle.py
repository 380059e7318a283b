"""What an idle (or calibrate) sweep showed: per-pause summaries, wake step per cell, the
cross-check against llama-idle, and the harness's own figures, in plain data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.regimes import wake_summary
from harness.units import ms
from harness.analysis.verdicts import boot_log_ratio, centre
from harness.engines import registry
from harness.analysis.frames import frame_json

if TYPE_CHECKING:
    from harness.store import Run


def ms_ci(value: float | None, ci: Sequence[float | None] | None) -> str:
    """"118 ms [115, 121]" (a 95% interval), or "118 ms (no interval)"."""
    lo, hi = (ci or (None, None))[:2] if ci is not None else (None, None)
    if lo is None or hi is None or lo != lo or hi != hi:
        return f"{ms(value)} ms (too few samples for an interval)"
    return f"{ms(value)} ms [{ms(lo)}, {ms(hi)}]"


def _after(pause: float) -> str:
    return "back to back" if pause == 0 else f"after a {pause:g} s pause"


def headline(wake: list[dict], summary: pd.DataFrame) -> list[str]:
    """One sentence per (model, setting) with numbers and 95% intervals, read from the one wake
    model (``wake`` rows of analysis.json): the answer to "how slow is the first token after idle"."""
    lines = []
    for w in wake:
        cell = f"{w['model']} · {w['setting']}"
        g = summary[(summary["model"] == w["model"]) & (summary["setting"] == w["setting"])] \
            if not summary.empty else summary
        g = g.sort_values("pause_requested_s")
        if w["shape"] == "none" or g.empty:
            text = f"{cell}: no clear wake step"
            if len(g):
                first, last = g.iloc[0], g.iloc[-1]
                text += (f" from {first['pause_requested_s']:g} to {last['pause_requested_s']:g} s (median "
                         f"{ms_ci(w['warm_median_ms'], w['warm_ci'])} over all pauses): the first "
                         f"token takes {ms_ci(last['median'], (last['ci_low'], last['ci_high']))} "
                         f"{_after(last['pause_requested_s'])}, against "
                         f"{ms_ci(first['median'], (first['ci_low'], first['ci_high']))} "
                         f"{_after(first['pause_requested_s'])}")
            lines.append(text + _stalls(w) + ".")
            continue
        warm_upto = w["last_warm_s"]
        warm_where = "back to back" if warm_upto == 0 else f"after pauses up to {warm_upto:g} s"
        if w["shape"] == "ramp":
            woken_where = f"after a pause of {w['first_woken_s']:g} s or more"
        else:
            woken_where = f"after a pause of {w['first_woken_s']:g} s" + (
                " or more" if w.get("second_first_s") is None else f" (to {w['second_last_s']:g} s)")
        place = f" ({w['place_text']})" if w.get("place_text") else ""
        text = (f"{cell}: {woken_where} the first token takes {ms_ci(w['woken_median_ms'], w['woken_ci'])}, "
                f"against {ms_ci(w['warm_median_ms'], w['warm_ci'])} {warm_where}: {w['text']}{place}, "
                f"penalty {ms_ci(w['penalty_ms'], w['penalty_ci'])}")
        lines.append(text + _stalls(w) + ".")
    return lines


def _stalls(w: dict) -> str:
    """The stalls as their own figure (the wake model leaves them out of the fit), or ""."""
    return f"; {w['stall_text']}" if w.get("stall_text") else ""


def findings(wake: list[dict], good: pd.DataFrame) -> list[str]:
    """How the wake model was chosen, per cell (the headline says what it found)."""
    lines = []
    for w in wake:
        cell = good[(good["model"] == w["model"]) & (good["setting"] == w["setting"])]
        n_reps = cell.groupby("pause_requested_s").size()
        reps = int(n_reps.min()) if len(n_reps) else 0
        text = f"{w['model']} · {w['setting']}: "
        if w.get("p_value") is not None:
            within = " within each repetition" if w.get("test_blocked") else ""
            text += (f"step test p = {w['p_value']:.2g} ({w['n_perm']} shuffles of the pause labels{within}, stall "
                     f"rule re-applied on each; a step is called at p <= {w['alpha']:g}, so at most "
                     f"{100 * w['alpha']:g}% of flat curves are); ")
        tested = w.get("p_value") is not None  # the test answered none against a step: BIC chooses among rising shapes
        shapes = [s for s in w["bic"] if not (tested and s == "none")]
        text += (f"shape by BIC on the bulk (stalls left out) among {', '.join(shapes) or 'none'}"
                 f" (chosen: {w['shape']}); {reps} reps per pause")
        if w.get("has_step") and w.get("place_support") is not None:
            text += (f"; the step's place held in {100 * w['place_support']:.0f}% of {w['n_boot']} refits on "
                     f"resampled data; the penalty's interval comes from the same refits, each at its own "
                     f"place (so it counts the place having been chosen from the data, never as a penalty of 0)")
        if w.get("note"):
            text += f"; {w['note']}"
        text += "."
        if len(n_reps) and reps < 6:
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

    good = stats.measured(samples)
    if good.empty or "engine" not in good or good["engine"].nunique() < 2:
        return []

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
    summary = stats.summarize_by_pause(samples, "latency_ms")
    out = {
        "summary_latency": summary,
        "summary_server": stats.summarize_by_pause(samples, "server_prompt_ms"),
        "wake": wake, "per_gb": per_gb,  # the one wake model (harness.analysis.regimes.wake_model)
        "headline": headline(wake, summary),
        "findings": findings(wake, good) if not good.empty else [],
        "cross_check": cross_check(samples),
        "harness": harness_figures(good),
        "n_measured": int(len(good)), "n_errors": int(len(errors)),
    }
    return out


def with_fit(headline: list[str], wake: list[dict], cells: Sequence[Any]) -> list[str]:
    """Each headline sentence, with the cell's fit warning when the model did not fit on the GPU (the cell's
    ``fit``, from what llama-server reported): a CPU/GPU split must not read as the device's wake."""
    warnings = {(c.model, c.setting): c.facts["fit"]["warning"] for c in cells
                if isinstance(c.facts.get("fit"), dict) and c.facts["fit"].get("warning")}
    return [f"{text} Warning: {warnings[(w['model'], w['setting'])]}." if (w["model"], w["setting"]) in warnings
            else text for w, text in zip(wake, headline)] + headline[len(wake):]


def summarize_run(run: Run) -> dict:
    """The idle/calibrate part of analysis.json (see harness/analysis/persisted.py)."""

    out = analyze_idle(run.table("samples"), [{"label": m.label, "bytes": m.bytes} for m in run.record.models])
    out["headline"] = with_fit(out["headline"], out["wake"], run.record.cells)
    out["summary_latency"] = frame_json(out["summary_latency"])
    out["summary_server"] = frame_json(out["summary_server"])
    return out
