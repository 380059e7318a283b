"""The first request after a cold start, an eviction or a sleep, split into phases
(``lbench swap --first-request``, harness/runs/swap_first.py).

Each measured request is placed on the router's timeline (``events``, router lines on the
router's clock) by its markers, in order: ``send`` (the client), ``victim_stop`` (the router told
the model it evicts to stop), ``victim_exit`` (its exit line), ``spawn`` (the spawn line of the
requested model), ``load_start`` (the first /models/sse event with load progress), ``weights_read``
(the last progress event of the ``text_model`` stage, value 1), ``loaded`` (/models/sse
``loaded``), ``first_byte`` (the client).  A phase ends at a marker and starts at the marker
before it that was seen; ``queue_wait`` runs from the send to the router's first step for it:

================  ======================================================================
queue_wait_ms     send -> the router's first step (the victim's stop, the spawn, or a sleeping
                  child's load progress)
victim_exit_ms    the victim told to stop -> its exit line
spawn_ms          the victim's exit -> the spawn line (or the send -> spawn, cold)
child_start_ms    spawn -> the child's first load progress (process start, arguments, GGUF header)
weights_ms        load progress 0 -> the text model's progress 1 (the tensors' data)
ready_ms          weights read -> /models/sse ``loaded`` (context, warm-up)
first_token_ms    loaded -> the first byte of the answer (proxy, prompt, first token)
================  ======================================================================

The phases of a request add up to its time to first byte (markers not seen leave their
phase empty and their time in the next one).  The load's bytes per second (the file's size
over ``weights_ms``) is set against this host's own read of the same file (cold for the
``cold`` state, warm otherwise; ``read_floor`` in the manifest) as a ratio.  Build 11434's
/models/sse names the stages ``text_model``, ``spec_model`` and ``mmproj_model``; there is no
``fit_params`` stage in its source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.calibration import quantile_interval

MARKERS = ["send", "victim_stop", "victim_exit", "spawn", "load_start", "weights_read", "loaded", "first_byte"]
PHASE_OF = {"victim_exit": "victim_exit_ms", "spawn": "spawn_ms", "load_start": "child_start_ms",
            "weights_read": "weights_ms", "loaded": "ready_ms", "first_byte": "first_token_ms"}
FIRST_PHASES = ["queue_wait_ms", "victim_exit_ms", "spawn_ms", "child_start_ms", "weights_ms", "ready_ms",
                "first_token_ms"]
FIRST_COLUMNS = ["rep", "state", "model", "index", *FIRST_PHASES, "ttfb_ms", "latency_ms", "error_kind",
                 "file_bytes", "load_bytes_per_s", "floor_bytes_per_s", "ratio_to_floor"]
SUMMARY_COLUMNS = ["state", "model", "phase", "n", "median", "ci_low", "ci_high"]  # ms, or a ratio


def _detail(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        out = json.loads(str(raw))
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _first_t(ev: pd.DataFrame, after: float, kinds: Iterable[str], model: str | None = None,
             not_model: str | None = None) -> float | None:
    sel = ev[(ev["t_s"] >= after) & ev["kind"].isin(list(kinds))]
    if model is not None:
        sel = sel[sel["model"] == model]
    if not_model is not None:
        sel = sel[sel["model"].notna() & (sel["model"] != not_model)]
    return None if sel.empty else float(sel["t_s"].iloc[0])


def markers(request: Mapping[str, Any], events: pd.DataFrame) -> dict[str, float | None]:
    """The request's markers (seconds, run clock); None where the timeline has none."""
    t_send = float(request["t_send_s"])
    t_end = float(request["t_done_s"]) if pd.notna(request.get("t_done_s")) else math.inf
    model = str(request["model"])
    ev = events[(events["t_s"] >= t_send) & (events["t_s"] <= t_end)].sort_values("t_s", kind="stable")
    m: dict[str, float | None] = dict.fromkeys(MARKERS)
    m["send"] = t_send
    m["victim_stop"] = _first_t(ev, t_send, ("evict", "stop_sent", "kill_loading"), not_model=model)
    if m["victim_stop"] is not None:
        victim = ev[(ev["t_s"] == m["victim_stop"]) & ev["kind"].isin(["evict", "stop_sent", "kill_loading"])]
        m["victim_exit"] = _first_t(ev, m["victim_stop"], ("exited",), model=str(victim["model"].iloc[0]))
    m["spawn"] = _first_t(ev, t_send, ("spawn",), model=model)
    mine = ev[(ev["model"] == model) & ev["kind"].eq("status:loading")]
    progress = [(float(t), _detail(d)) for t, d in zip(mine["t_s"], mine["detail"])]
    progress = [(t, d) for t, d in progress if d.get("progress") is not None]
    if progress:
        m["load_start"] = progress[0][0]
        text = [t for t, d in progress if d.get("stage") in (None, "text_model") and float(d["progress"]) >= 1.0]
        m["weights_read"] = text[0] if text else None
    m["loaded"] = _first_t(ev, t_send, ("status:loaded",), model=model)
    fb = request.get("t_first_byte_s")
    m["first_byte"] = float(fb) if fb is not None and pd.notna(fb) else None
    return m


def phases(m: Mapping[str, float | None]) -> dict[str, float]:
    """Milliseconds per phase from the markers (``FIRST_PHASES``; nan where not seen)."""
    out = dict.fromkeys(FIRST_PHASES, math.nan)
    prev: float | None = m["send"]
    queued = False
    for name in MARKERS[1:]:
        t = m[name]
        if t is None or prev is None:
            continue
        if not queued and name != "first_byte":
            out["queue_wait_ms"] = (t - prev) * 1000
            queued = True
        else:
            out[PHASE_OF[name] if name in PHASE_OF else "queue_wait_ms"] = (t - prev) * 1000
        prev = t
    return out


def first_request_table(requests: pd.DataFrame, events: pd.DataFrame, floors: list[dict]) -> pd.DataFrame:
    """One row per measured first request (``FIRST_COLUMNS``)."""
    if requests.empty or "first_measured" not in requests:
        return pd.DataFrame(columns=FIRST_COLUMNS)
    measured = requests[requests["first_measured"].eq(True)]
    floor_of = {}
    for f in floors:  # from a manifest (untrusted): rows of the wrong shape are left out
        if isinstance(f, dict) and isinstance(f.get("rep"), int) and isinstance(f.get("model"), str) \
                and all(isinstance(f.get(k), (int, float, type(None))) for k in
                        ("bytes", "cold_bytes_per_s", "warm_bytes_per_s")):
            floor_of[(f["rep"], f["model"])] = f
    rows = []
    for r in measured.to_dict("records"):
        m = markers(r, events)
        row: dict[str, Any] = {"rep": int(r["first_rep"]), "state": r["first_state"], "model": r["model"],
                               "index": int(r["index"]), **phases(m), "ttfb_ms": r.get("ttfb_ms"),
                               "latency_ms": r.get("latency_ms"), "error_kind": r.get("error_kind")}
        floor = floor_of.get((row["rep"], row["model"]), {})
        size = floor.get("bytes")
        weights_s = row["weights_ms"] / 1000
        load = size / weights_s if size and math.isfinite(weights_s) and weights_s > 0 else math.nan
        ref = floor.get("cold_bytes_per_s" if row["state"] == "cold" else "warm_bytes_per_s")
        row.update(file_bytes=size, load_bytes_per_s=load, floor_bytes_per_s=ref,
                   ratio_to_floor=load / ref if ref and math.isfinite(load) else math.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=FIRST_COLUMNS)


def first_request_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per state, model and phase (and ``ttfb_ms``): n, median and its 95% order-statistic
    interval (none below 6 repetitions)."""
    rows = []
    for (state, model), grp in table.groupby(["state", "model"], sort=False):
        for phase in [*FIRST_PHASES, "ttfb_ms", "ratio_to_floor"]:
            x = pd.to_numeric(grp[phase], errors="coerce").to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            low, high = quantile_interval(x, 0.5) if x.size else (math.nan, math.nan)
            rows.append({"state": state, "model": model, "phase": phase, "n": int(x.size),
                         "median": float(np.median(x)) if x.size else math.nan, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def first_findings(table: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """One sentence per state and model: the first request's time to first byte and where it went."""
    out = []
    failed = table[table["error_kind"].notna()] if not table.empty else table
    if len(failed):
        out.append(f"FIRST REQUEST FAILED: {len(failed)} of {len(table)} measured first requests failed ("
                   + ", ".join(f"{k} x{n}" for k, n in failed["error_kind"].value_counts().items()) + ")")
    for (state, model), grp in summary.groupby(["state", "model"], sort=False):
        by = grp.set_index("phase")
        total = by.loc["ttfb_ms"]
        if not total["n"]:
            continue
        parts = [f"{p[:-3].replace('_', ' ')} {by.loc[p, 'median']:.0f}" for p in FIRST_PHASES
                 if by.loc[p, "n"] and math.isfinite(by.loc[p, "median"])]
        ci = (f" (95% interval {total['ci_low']:.0f}-{total['ci_high']:.0f})"
              if math.isfinite(total["ci_low"]) else " (no interval below 6 repetitions)")
        ratio = by.loc["ratio_to_floor"]
        floor = (f"; the load read the weights at {ratio['median']:.2f}x this host's own "
                 f"{'cold' if state == 'cold' else 'warm'} read of the file" if ratio["n"] else "")
        out.append(f"first request, {state}, {model}: time to first byte median {total['median']:.0f} ms"
                   f"{ci}, n={int(total['n'])}; by phase (median ms): " + ", ".join(parts) + floor)
    return out
