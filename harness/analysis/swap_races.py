"""Every request's fate, and the races between loading, eviction and proxying that a storm provoked.

Users of the router met, in 2026 (docs/workloads.md, "Races"): an HTTP 500 the router wrote
itself (``proxy error: Could not establish connection`` after it logged ``http client error``),
``model limit reached, try again later`` on concurrent cold starts, a model evicted while a
request for it waited, and a request proxied to a child already told to stop.  This module
names each from a swap run's ``requests`` and ``events`` tables (router lines on the router's
clock, ``storm_events``; ``served_as`` and ``t_router_s`` from ``with_served_as``):

``evicted_with_waiter``
    the router told model X to stop (an eviction, a stop or a force-kill of a loading child)
    while a request for X had logged its "waiting until ... loaded" line and had not yet been
    proxied (fewer ``proxy`` lines for X since the waiters arrived than waiters).
``proxied_to_stopping``
    a ``proxy`` line for X after X was told to stop and before its ``exited`` line.

Error kinds (``error_kind`` of the requests table, harness/workloads/swap.py) are counted apart:
``proxy_error`` (the router's own 500), ``limit_reached``, ``deadline`` (no full answer in time: a
hang), ``truncated`` (an HTTP 200 whose stream stopped short), and the rest by HTTP status or
transport error.
"""

from __future__ import annotations

import math

import pandas as pd

from harness.analysis.swap_served import next_state

RACE_COLUMNS = ["t_s", "race", "model", "detail"]
TOLD_TO_STOP = ("evict", "stop_sent", "kill_loading")
DONE_LEAD_S = 0.025  # as lru_check: the router is done with a request a little before the client reads its end
ERROR_WORDS = {
    "proxy_error": "the router's own HTTP 500 'proxy error' (it could not reach the child it proxied to)",
    "limit_reached": "'model limit reached, try again later' (no slot for a load)",
    "deadline": "no full answer within the request deadline (a hang)",
    "truncated": "HTTP 200 whose streamed answer stopped short (the child died or was stopped mid-answer)",
    "disconnected": "the connection closed with no answer",
    "load_failed": "the router could not load the model",
}


def errors_by_kind(requests: pd.DataFrame) -> dict[str, int]:
    """Failed requests by ``error_kind``, most frequent first."""
    if requests.empty:
        return {}
    failed = requests[requests["error"].notna()]
    return {str(k): int(v) for k, v in failed["error_kind"].fillna("error").value_counts().items()}


def races(requests: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """One row per race seen (``RACE_COLUMNS``), in time order."""
    if events.empty:
        return pd.DataFrame(columns=RACE_COLUMNS)
    events = events.sort_values("t_s", kind="stable")
    known = requests[requests["t_router_s"].notna() & requests["served_as"].ne("resident")] \
        if not requests.empty and "t_router_s" in requests else requests.iloc[0:0]
    state: dict[str, str] = {}
    told_at: dict[str, float] = {}
    proxies: dict[str, list[float]] = {}
    rows: list[dict] = []
    for e in events.itertuples(index=False):
        model = e.model
        if not isinstance(model, str):
            continue
        before = state.get(model, "unloaded")
        if e.kind == "proxy":
            proxies.setdefault(model, []).append(e.t_s)
            if before == "stopping":
                rows.append({"t_s": e.t_s, "race": "proxied_to_stopping", "model": model,
                             "detail": f"proxied {1000 * (e.t_s - told_at[model]):.0f} ms after the router told "
                                       f"{model} to stop, before its exit"})
        elif e.kind in TOLD_TO_STOP and before in ("loading", "ready"):
            told_at[model] = e.t_s
            mine = known[(known["model"] == model) & (known["t_router_s"] <= e.t_s)
                         & (known["t_done_s"].fillna(math.inf) > e.t_s + DONE_LEAD_S)]
            if len(mine):
                since = float(mine["t_router_s"].min())
                proxied = sum(1 for t in proxies.get(model, []) if since <= t <= e.t_s)
                if len(mine) > proxied:
                    fate = ", ".join(f"#{int(r.index)} {r.error_kind if isinstance(r.error_kind, str) else 'answered'}"
                                     for r in mine.itertuples())
                    rows.append({"t_s": e.t_s, "race": "evicted_with_waiter", "model": model,
                                 "detail": f"{len(mine) - proxied} request(s) for {model} waited at the router "
                                           f"({e.kind} while {before}; requests: {fate})"})
        state[model] = next_state(before, e.kind)
    return pd.DataFrame(rows, columns=RACE_COLUMNS)


def race_findings(found: pd.DataFrame, requests: pd.DataFrame, events: pd.DataFrame) -> list[str]:
    """The races and every error kind, in words: races first (they are faults of the router)."""
    out = []
    for race, words in (("evicted_with_waiter", "EVICTED WHILE WAITED FOR"),
                        ("proxied_to_stopping", "PROXIED TO A STOPPING CHILD")):
        sel = found[found["race"] == race] if not found.empty else found
        if len(sel):
            first = sel.iloc[0]
            out.append(f"{words}: {len(sel)} time(s); the first at t={first['t_s']:.3f} s: {first['detail']}")
    kinds = errors_by_kind(requests)
    lines = int(events["kind"].eq("proxy_error").sum()) if not events.empty else 0
    for kind, n in kinds.items():
        what = ERROR_WORDS.get(kind, kind)
        extra = f"; the router logged 'http client error' {lines} time(s)" if kind == "proxy_error" else ""
        out.append(f"error {kind} x{n}: {what}{extra}")
    if lines and "proxy_error" not in kinds:
        out.append(f"the router logged 'http client error' {lines} time(s), but no request got its 500 "
                   "(the client had left, or another engine's line)")
    return out
