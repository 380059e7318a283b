"""The harness measuring itself (``lbench calibrate``): overhead, pause error, efficiency, HTTP floor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis import stats
from harness.analysis.idle import summarize_run as summarize_idle

if TYPE_CHECKING:
    from harness.record import Cell
    from harness.store import Run

# Each repetition: a block of back-to-back requests, then short pauses.  Harness
# overhead is read from the steady part of the block; pause error and efficiency
# from the whole run.
CALIBRATION_BLOCK = 30
STEADY_AFTER = 10  # back-to-back requests the server needs to settle after a pause
CALIBRATION_PAUSES = [0.0] * CALIBRATION_BLOCK + [0.02, 0.05, 0.1, 0.2, 0.3]
TARGETS = {"overhead_p50_ms": 0.5, "overhead_p99_ms": 2.0, "harness_p50_ms": 0.2, "pause_error_p99_ms": 1.0,
           "efficiency": 1.03}


def steady_mask(good: pd.DataFrame) -> pd.Series:
    """True for back-to-back requests at least STEADY_AFTER requests after the last pause."""
    since_pause = []
    count = 0
    for pause in good["pause_requested_s"]:
        count = count + 1 if pause == 0 else 0
        since_pause.append(count)
    return pd.Series(since_pause, index=good.index, dtype=float) > STEADY_AFTER


def calibration_figures(samples: pd.DataFrame, cells: Sequence[Mapping[str, Any]] | Sequence[Cell]) -> dict[str, float]:
    """The harness's own figures.

    Overhead (client wall minus server time) is taken from steady back-to-back
    requests (at least STEADY_AFTER requests with pause 0 since the last pause):
    there it is the harness plus the server's HTTP handling, an upper bound on what
    the harness adds.  For a few requests after a pause the server's own threads
    are still waking up (its prompt_ms is slow in the very same samples, in
    kernel-tick steps); those are reported separately, as information.
    """
    good = stats.measured(samples).sort_values(["cell", "seq"])
    steady = steady_mask(good)
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
        **client_figures(back_to_back, after_pause),
        **efficiency_parts(good, denominator),
    }


EFFICIENCY_PARTS = {"efficiency_server_untimed": "the server's untimed work and HTTP",
                    "efficiency_client": "lbench inside requests", "efficiency_between": "between requests"}


def efficiency_parts(good: pd.DataFrame, denominator: float) -> dict[str, float]:
    """Where the sweep's wall time beyond (pauses + server time) went, each as a share of that sum.

    wall = sum over requests of (pause actually slept + latency), and latency = server time +
    client work + the rest, so efficiency - 1 = between + client + server_untimed exactly:
    ``between``: time between a response and the next send beyond the requested pause (lbench's
    bookkeeping, the sleep's overshoot); ``client``: lbench's own work inside the requests
    (``client_ms``); ``server_untimed``: the rest of the overhead (the server's request handling
    outside its timings, HTTP, the kernel waking either side)."""
    nan = float("nan")
    if not denominator or good.empty:
        return {"efficiency_between": nan, "efficiency_client": nan, "efficiency_server_untimed": nan}
    between = (good["pause_actual_s"] - good["pause_requested_s"]).sum()
    client_ms = _client_ms(good)
    client = client_ms.sum() / 1000.0 if client_ms.size == len(good) else nan
    overhead = good["overhead_ms"].sum() / 1000.0
    return {"efficiency_between": between / denominator, "efficiency_client": client / denominator,
            "efficiency_server_untimed": (overhead - client) / denominator if client == client
            else overhead / denominator}


def _client_ms(rows: pd.DataFrame) -> pd.Series:
    return rows["client_ms"].dropna() if "client_ms" in rows else pd.Series(dtype=float)


def client_figures(back_to_back: pd.DataFrame, after_pause: pd.DataFrame) -> dict[str, float]:
    """harness = the client's own work on the timed path (``client_ms``: writing the request, framing
    the response after its first byte), measured per request.  NaN for runs recorded before lbench
    measured it."""
    nan = float("nan")
    b2b, after = _client_ms(back_to_back), _client_ms(after_pause)
    return {
        "harness_p50_ms": stats.percentile(b2b, 50) if len(b2b) else nan,
        "harness_p99_ms": stats.percentile(b2b, 99) if len(b2b) else nan,
        "harness_after_pause_p50_ms": stats.percentile(after, 50) if len(after) else nan,
        "harness_after_pause_p99_ms": stats.percentile(after, 99) if len(after) else nan,
    }


def floor_figures(samples: pd.DataFrame, overhead_b2b: pd.Series, overhead_after: pd.Series) -> dict[str, float]:
    """beyond floor = client latency - server time - HTTP floor (GET /health on the same connection,
    timed the same way), back to back and after pauses: the server's untimed completion work (JSON,
    tokenizing, task queue, response) plus the client's, so an upper bound on the harness."""
    nan = float("nan")
    if "phase" not in samples or not samples["phase"].eq("floor-http").any():
        return {k: nan for k in ("floor_p50_ms", "floor_p99_ms", "floor_after_pause_p50_ms",
                                 "floor_after_pause_p99_ms", "beyond_floor_p50_ms", "beyond_floor_p99_ms",
                                 "beyond_floor_after_pause_p50_ms", "beyond_floor_after_pause_p99_ms")}
    floor = samples[samples["phase"].eq("floor-http") & samples["error"].isna()]
    b2b = floor[floor["pause_requested_s"] == 0]["latency_ms"]
    after = floor[floor["pause_requested_s"] > 0]["latency_ms"]
    f50 = stats.percentile(b2b, 50)
    a50 = stats.percentile(after, 50) if len(after) else nan
    return {
        "floor_p50_ms": f50, "floor_p99_ms": stats.percentile(b2b, 99),
        "floor_after_pause_p50_ms": a50, "floor_after_pause_p99_ms": stats.percentile(after, 99) if len(after) else nan,
        "beyond_floor_p50_ms": stats.percentile(overhead_b2b - f50, 50),
        "beyond_floor_p99_ms": stats.percentile(overhead_b2b - f50, 99),
        "beyond_floor_after_pause_p50_ms": stats.percentile(overhead_after - a50, 50) if len(after) else nan,
        "beyond_floor_after_pause_p99_ms": stats.percentile(overhead_after - a50, 99) if len(after) else nan,
    }


FIGURE_TEXT = {  # what each target figure measures, for the report and the findings
    "overhead_p50_ms": "overhead p50 (client latency - server time, steady back to back)",
    "overhead_p99_ms": "overhead p99 (client latency - server time, steady back to back)",
    "harness_p50_ms": "harness p50 (lbench's own work on the timed path, measured per request)",
    "pause_error_p99_ms": "pause error p99 (|actual - requested pause|)",
    "efficiency": "sweep efficiency (wall / (pauses + server time))",
}


def quantile_interval(values: npt.ArrayLike, q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the q-quantile from order statistics (binomial, exact coverage
    >= ``confidence``); (nan, nan) when n is too small for one (e.g. n < 6 for a median, < ~370 for p99)."""
    from scipy.stats import binom

    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    n = x.size
    nan = (float("nan"), float("nan"))
    if n == 0:
        return nan
    tail = (1 - confidence) / 2
    below = int(binom.ppf(tail, n, q))  # largest m with P(B <= m) <= tail is `below` or `below - 1`
    if binom.cdf(below, n, q) > tail:
        below -= 1
    low_rank, high_rank = below + 1, int(binom.ppf(1 - tail, n, q)) + 1  # 1-based ranks
    if low_rank < 1 or high_rank > n:
        return nan
    return float(x[low_rank - 1]), float(x[high_rank - 1])


def _check(key: str, value: float, n: int, interval: tuple[float, float]) -> dict:
    target = TARGETS[key]
    lo, hi = interval
    if value != value:  # not measured (e.g. client_ms in a run recorded before lbench measured it)
        return {"figure": key, "what": FIGURE_TEXT[key], "value": value, "target": target, "ok": None,
                "n": int(n), "ci_low": lo, "ci_high": hi, "interval_vs_target": "not measured"}
    if lo != lo:
        against = "no interval"
    else:
        against = "below" if hi <= target else "above" if lo > target else "straddles"
    return {"figure": key, "what": FIGURE_TEXT[key], "value": value, "target": target,
            "ok": bool(value <= target), "n": int(n), "ci_low": lo, "ci_high": hi, "interval_vs_target": against}


def target_checks(samples: pd.DataFrame, figures: dict[str, float]) -> list[dict]:
    """One row per target: measured value, n, 95% interval (order statistics), ok/over.

    Efficiency is one ratio of totals over the run: it has no interval."""
    good = stats.measured(samples).sort_values(["cell", "seq"])
    steady = good[steady_mask(good)] if not good.empty else good
    b2b = steady["overhead_ms"].dropna() if not good.empty else pd.Series(dtype=float)
    pause_err = (good["pause_actual_s"] - good["pause_requested_s"]).abs() * 1e3 if not good.empty else b2b
    harness = _client_ms(steady)
    nan2 = (float("nan"), float("nan"))
    return [
        _check("overhead_p50_ms", figures["overhead_p50_ms"], len(b2b), quantile_interval(b2b, 0.5)),
        _check("overhead_p99_ms", figures["overhead_p99_ms"], len(b2b), quantile_interval(b2b, 0.99)),
        _check("harness_p50_ms", figures["harness_p50_ms"], harness.notna().sum(), quantile_interval(harness, 0.5)),
        _check("pause_error_p99_ms", figures["pause_error_p99_ms"], len(pause_err),
               quantile_interval(pause_err, 0.99)),
        {**_check("efficiency", figures["efficiency"], len(good), nan2),
         "parts": {k: figures.get(k, float("nan")) for k in EFFICIENCY_PARTS}},
    ]


def pause_groups(samples: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Measured requests by pause, back to back split into steady and settling (first STEADY_AFTER)."""
    good = stats.measured(samples)
    if good.empty:
        return []
    good = good.sort_values(["cell", "seq"])
    steady = steady_mask(good)
    groups = [("back to back, steady", good[steady]),  # "back to back" named once; the next row is its start
              (f"settling: first {STEADY_AFTER} after a pause", good[~steady & good["pause_requested_s"].eq(0)])]
    groups += [(f"{p:g} s", good[good["pause_requested_s"].eq(p)]) for p in sorted(set(good["pause_requested_s"]) - {0})]
    return [(label, g) for label, g in groups if not g.empty]


def pause_checks(samples: pd.DataFrame) -> list[dict]:
    """Per pause group: n, overhead median with its interval, pause error p99 against its target,
    the server's own time."""
    rows = []
    for label, g in pause_groups(samples):
        lo, hi = quantile_interval(g["overhead_ms"], 0.5)
        err = (g["pause_actual_s"] - g["pause_requested_s"]).abs() * 1e3
        err_p99 = stats.percentile(err, 99)
        rows.append({"pause": label, "pause_requested_s": float(g["pause_requested_s"].iloc[0]), "n": int(len(g)),
                     "overhead_p50_ms": stats.percentile(g["overhead_ms"], 50), "overhead_ci_low": lo,
                     "overhead_ci_high": hi, "overhead_p99_ms": stats.percentile(g["overhead_ms"], 99),
                     "pause_error_p99_ms": err_p99, "pause_error_ok": bool(err_p99 <= TARGETS["pause_error_p99_ms"]),
                     "server_ms_p50": stats.percentile(g["server_ms"], 50)})
    return rows


def _fmt(value: float, key: str) -> str:
    return "–" if value != value else (f"{value:.3f}" if key == "efficiency" else f"{value:.3f} ms")


def calibration_findings(checks: list[dict], pauses: list[dict]) -> list[str]:
    """The calibrate run's headline in sentences: which targets hold, which are over, with n and intervals."""
    if not checks or all(c["value"] != c["value"] for c in checks):
        return ["No measured samples: nothing to check against the targets."]
    measured = [c for c in checks if c["ok"] is not None]
    ok = [c for c in measured if c["ok"]]
    lines = [f"{len(ok)} of {len(measured)} targets met"
             + (f"; over: {', '.join(c['figure'] for c in measured if not c['ok'])}." if len(ok) < len(measured)
                else ".")
             + "".join(f" {c['figure']} was not measured in this run." for c in checks if c["ok"] is None)]
    for c in measured:
        if c["ci_low"] == c["ci_low"]:
            ci = f"95% CI {_fmt(c['ci_low'], c['figure'])} – {_fmt(c['ci_high'], c['figure'])}, n={c['n']}"
            settled = {"below": "the whole interval is within the target",
                       "above": "the whole interval is over the target",
                       "straddles": "the interval straddles the target: more --reps would settle it"}[
                           c["interval_vs_target"]]
        elif c["figure"] == "efficiency":
            ci, settled = f"one ratio over the run, n={c['n']} requests", ""
        else:
            ci, settled = f"n={c['n']}, too few for a 95% interval", "more --reps would give one"
        verdict = "within" if c["ok"] else "OVER"
        line = (f"{c['what'][0].upper()}{c['what'][1:]}: {_fmt(c['value'], c['figure'])} ({ci}), {verdict} the "
                f"target of {_fmt(c['target'], c['figure'])}" + (f"; {settled}." if settled else "."))
        parts = {k: v for k, v in (c.get("parts") or {}).items() if v == v}
        if parts and c["value"] > 1:
            line += " Its excess over 1: " + ", ".join(f"{EFFICIENCY_PARTS[k]} {v:+.3f}" for k, v in parts.items()) + "."
        lines.append(line)
    over = [p["pause"] for p in pauses if not p["pause_error_ok"]]
    if pauses:
        lines.append(f"Pause error p99 is within {TARGETS['pause_error_p99_ms']:g} ms at every pause." if not over
                     else f"Pause error p99 is over {TARGETS['pause_error_p99_ms']:g} ms at: {', '.join(over)}.")
    return lines


def summarize_run(run: Run) -> dict:
    """The calibrate part of analysis.json: the idle analysis plus the harness's own figures, the targets,
    one check per target and per pause, and findings about them (in place of the idle wake-step findings)."""

    samples = run.table("samples")
    figures = calibration_figures(samples, run.record.cells)
    checks = target_checks(samples, figures)
    pauses = pause_checks(samples)
    return {**summarize_idle(run), "calibration": figures, "calibration_targets": TARGETS,
            "calibration_checks": checks, "calibration_pauses": pauses,
            "findings": calibration_findings(checks, pauses),
            "headline": calibration_findings(checks, pauses)}  # a calibration's answer is its targets
