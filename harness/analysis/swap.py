"""What a swap storm showed: latency by class, the phases of each swap, the cap,
memory, eviction order, thrash and errors, each stated plainly.

Inputs are a swap run's tables (times are ``t_s``, seconds on the harness clock):
``requests`` (one row per request), ``events`` (router log lines, child lines and
/models/sse events) and ``memory`` (process-tree samples).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.swap_served import (SERVED_AS, accounting_sentence, load_accounting,
                                          load_slots, next_state, storm_events, with_served_as)
from harness.analysis.swap_first import first_findings, first_request_summary, first_request_table
from harness.analysis.swap_races import errors_by_kind, race_findings, races
from harness.engines import registry
from harness.schema import apply_schema
from harness.store import Run
from harness.analysis.frames import frame_json, json_frame

PHASES = ["queue_wait_ms", "victim_stop_ms", "exit_to_spawn_ms", "spawn_to_loaded_ms", "loaded_to_first_byte_ms"]
PHASE_COLUMNS = ["model", "t_spawn_s", "request_index", "waiters", "victim", *PHASES, "total_ms"]


@dataclass
class SwapSummary:
    latency: pd.DataFrame  # class -> n, p50, p90, p99
    swaps: pd.DataFrame  # one row per spawn, with its phases
    lru: pd.DataFrame  # one row per eviction: victim, expected LRU victim, match
    findings: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    served: pd.DataFrame = field(default_factory=pd.DataFrame)  # per request: served_as and the router times
    first: pd.DataFrame = field(default_factory=pd.DataFrame)  # first-request runs: one row per measured request
    first_summary: pd.DataFrame = field(default_factory=pd.DataFrame)  # and per state, model and phase


def _pct(values: npt.ArrayLike, q: float) -> float:
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else math.nan


def n_failed(requests: pd.DataFrame) -> int:
    """Requests of a storm that failed (any error: HTTP, cut off, past the deadline)."""
    return int(requests["error"].notna().sum()) if not requests.empty else 0


def warm_mask(requests: pd.DataFrame) -> pd.Series:
    """True where the model was resident at send; unknown (null) counts as cold."""
    return requests["resident_at_send"].eq(True).fillna(False).astype(bool)


def compare_classes(requests: pd.DataFrame) -> tuple[pd.Series, tuple[str, str]]:
    """The two groups compare and gate judge swap runs by: what the router did (``served_as``:
    a resident child vs a load the request waited for) when every request of the frame has it, else
    residency at send (runs recorded before lbench classified requests, or killed before the end).
    Returns (True where the request is in the first group, the two group names)."""
    if "served_as" in requests and len(requests) and requests["served_as"].notna().all() \
            and not requests["served_as"].eq("unknown").all():
        return requests["served_as"].eq("resident"), ("served resident", "waited for a load")
    return warm_mask(requests), ("warm", "cold")


SERVED_LABELS = {"resident": "resident child", "own_load": "own load", "joined_load": "joined a load",
                 "behind_eviction": "behind an eviction", "unknown": "unknown"}
SENT_RESIDENT, SENT_NOT_RESIDENT = "sent: resident", "sent: not resident"


def latency_table(requests: pd.DataFrame) -> pd.DataFrame:
    """Latency of answered requests: all, by what the router did (``served_as``), and by what
    /models/sse said at send (``resident_at_send``); each grouping adds up to ``all``."""
    rows = []
    ok = requests[requests["error"].isna()] if not requests.empty else requests

    def row(group: str, label: str, sel: pd.DataFrame) -> None:
        x = sel["latency_ms"] if not sel.empty else []
        rows.append({"group": group, "class": label, "n": int(len(sel)), "p50_ms": _pct(x, 50),
                     "p90_ms": _pct(x, 90), "p99_ms": _pct(x, 99), "max_ms": _pct(x, 100)})

    row("all", "all", ok)
    if "served_as" in ok and ok["served_as"].notna().any() and not ok["served_as"].eq("unknown").all():
        for cls in SERVED_AS:
            sel = ok[ok["served_as"] == cls]
            if cls != "unknown" or len(sel):
                row("served as", SERVED_LABELS[cls], sel)
    row("resident at send", SENT_RESIDENT, ok[warm_mask(ok)])
    row("resident at send", SENT_NOT_RESIDENT, ok[~warm_mask(ok)])
    return pd.DataFrame(rows, columns=["group", "class", "n", "p50_ms", "p90_ms", "p99_ms", "max_ms"])


def _latency_row(latency: pd.DataFrame, label: str) -> pd.Series | None:
    sel = latency[latency["class"] == label]
    return None if sel.empty else sel.iloc[0]


STOP_KINDS = ["evict", "stop_sent"]  # the router's scheduler logs "evicting ..."; explicit unloads "stopping ..."


def stop_steps(events: pd.DataFrame, window_s: float = 0.5) -> pd.DataFrame:
    """Moments a running child was told to go: evictions, and stops that no eviction of
    the same model just preceded (explicit unloads)."""
    steps = events[events["kind"].isin(STOP_KINDS)].sort_values("t_s")
    keep, last_evict = [], {}
    for idx, e in steps.iterrows():
        if e["kind"] == "evict":
            last_evict[e["model"]] = e["t_s"]
            keep.append(idx)
        elif e["t_s"] - last_evict.get(e["model"], -math.inf) > window_s:
            keep.append(idx)
    return steps.loc[keep]


# what the router logs when it ends a child itself; an exit after none of these since the
# child's spawn is a death (killed, crashed, failed to load)
ORDERED_EXIT_KINDS = ["evict", "stop_sent", "kill_loading", "kill_timeout"]
DEATH_COLUMNS = ["model", "t_s", "exit_status", "t_spawn_s", "state", "failed_requests"]
DEATH_GRACE_S = 1.0  # a request cut by the death ends before the router logs the exit, or just after


def child_deaths(requests: pd.DataFrame, events: pd.DataFrame, until_s: float | None = None) -> pd.DataFrame:
    """Router children that exited without being told to (``instance name=X exited with status N``
    with no stop, eviction or force-kill of X since its spawn), up to ``until_s`` (the storm's end:
    the router stops every child when it shuts down).  ``failed_requests``: requests for that model
    that failed between the child's spawn and ``DEATH_GRACE_S`` after its exit was logged.  The
    router reaps its children, so a signal is not known: it reports a child killed by one as 1."""
    if events.empty:
        return pd.DataFrame(columns=DEATH_COLUMNS)
    events = events.sort_values("t_s", kind="stable")
    if until_s is not None:
        events = events[events["t_s"] <= until_s]
    rows: list[dict[str, Any]] = []
    spawned: dict[str, float] = {}
    loaded: set[str] = set()
    ordered: set[str] = set()
    for _, e in events.iterrows():
        model, kind = e["model"], e["kind"]
        if not isinstance(model, str):
            continue
        if kind == "spawn":
            spawned[model] = e["t_s"]
            ordered.discard(model)
            loaded.discard(model)
        elif kind in ("status:loaded", "child_loaded"):
            loaded.add(model)
        elif kind in ORDERED_EXIT_KINDS:
            ordered.add(model)
        elif kind == "exited":
            if model not in ordered:
                try:
                    status = int(json.loads(e["detail"]).get("status"))
                except (TypeError, ValueError, AttributeError):
                    status = None
                rows.append({"model": model, "t_s": float(e["t_s"]), "exit_status": status,
                             "t_spawn_s": spawned.get(model, math.nan),
                             "state": "loaded" if model in loaded else "loading"})
            ordered.discard(model)
            loaded.discard(model)
    for row in rows:
        failed = requests[requests["error"].notna() & (requests["model"] == row["model"])] \
            if not requests.empty else requests
        if not failed.empty:
            start = row["t_spawn_s"] if math.isfinite(row["t_spawn_s"]) else -math.inf
            done = failed["t_done_s"].fillna(math.inf)
            failed = failed[(done >= start) & (done <= row["t_s"] + DEATH_GRACE_S)]
        row["failed_requests"] = int(len(failed))
    return pd.DataFrame(rows, columns=DEATH_COLUMNS)


def death_findings(deaths: pd.DataFrame) -> list[str]:
    out = []
    for d in deaths.to_dict("records"):
        status = "exit status unknown" if d["exit_status"] is None or pd.isna(d["exit_status"]) else \
            f"exit status {int(d['exit_status'])} as the router logged it; a signal shows as 1"
        out.append(f"CHILD DIED: the router child of model {d['model']} died while {d['state']} at "
                   f"t={d['t_s']:.3f} s ({status}); {d['failed_requests']} request(s) failed with it")
    return out


def deadline_findings(requests: pd.DataFrame) -> list[str]:
    late = requests[requests["error_kind"] == "deadline"] if not requests.empty else requests
    if late.empty:
        return []
    by_model = ", ".join(f"{m} x{n}" for m, n in late["model"].value_counts().items())
    first = late.sort_values("t_send_s").iloc[0]
    return [f"DEADLINE: {len(late)} request(s) got no full answer within the request deadline ({by_model}); "
            f"the first, #{int(first['index'])}, sent at t={first['t_send_s']:.3f} s: {first['error']}"]


def failure_reason(requests: pd.DataFrame, events: pd.DataFrame, until_s: float | None) -> str | None:
    """Why a storm whose router lived is still a failed run: children that died, requests past their
    deadline, not one request answered (every one an HTTP error, e.g. a 400 for every request,
    or an empty or cut-off answer).  None when none of these happened (some request errors are
    findings, not failures)."""
    parts = []
    if not requests.empty and requests["error"].notna().all():
        kinds = requests["error_kind"].fillna("error").value_counts()
        parts.append(f"all {len(requests)} requests failed ("
                     + ", ".join(f"{n} {k}" for k, n in kinds.head(3).items()) + "); nothing was measured")
    deaths = child_deaths(requests, events, until_s)
    if not deaths.empty:
        models = ", ".join(dict.fromkeys(deaths["model"]))
        parts.append(f"{len(deaths)} router child death(s) ({models}; {int(deaths['failed_requests'].sum())} "
                     f"request(s) failed with them)")
    late = int((requests["error_kind"] == "deadline").sum()) if not requests.empty else 0
    if late:
        parts.append(f"{late} request(s) past the request deadline")
    return "; ".join(parts) or None


def _first(events: pd.DataFrame, after: float, before: float = math.inf, **match: object) -> pd.Series | None:
    sel = events[(events["t_s"] >= after) & (events["t_s"] <= before)]
    for key, value in match.items():
        sel = sel[sel[key] == value]
    return None if sel.empty else sel.iloc[0]


def swap_phases(requests: pd.DataFrame, events: pd.DataFrame, models_max: int = 0) -> pd.DataFrame:
    """One row per spawned child: which request caused it, how many waited for it, whose slot it
    took (``load_slots``: each eviction's slot goes to one spawn) and how long each phase took."""
    cols = PHASE_COLUMNS
    if events.empty or requests.empty:
        return pd.DataFrame(columns=cols)
    events = events.sort_values("t_s", kind="stable")
    _, slots = load_slots(events, models_max)
    rows = []
    used_requests: set[int] = set()
    classified = "t_spawn_waited_s" in requests and requests["t_spawn_waited_s"].notna().any()
    for slot in slots:
        model, t_spawn = slot["model"], slot["t_spawn_s"]
        loaded = _first(events, t_spawn, kind="status:loaded", model=model)
        if classified:  # the requests the router log says waited for this load; the one that caused it first
            waiting = requests[(requests["model"] == model) & (requests["t_spawn_waited_s"] == t_spawn)]
            n_waiters = len(waiting)
            causes = waiting[waiting["served_as"].isin(["own_load", "behind_eviction"])]
            pick = causes if not causes.empty else waiting
            req = pick.sort_values("t_router_s").iloc[0] if not pick.empty else None
        else:  # runs logged before the router's wait lines were kept: the first not-resident request sent
            waiting = requests[(requests["model"] == model) & (requests["t_send_s"] <= t_spawn)
                               & ~warm_mask(requests)
                               & ~requests["index"].isin(used_requests)
                               & ((requests["t_done_s"].isna()) | (requests["t_done_s"] >= t_spawn))]
            n_waiters = None
            req = waiting.sort_values("t_send_s").iloc[0] if not waiting.empty else None
        row = {"model": model, "t_spawn_s": t_spawn, "request_index": None, "waiters": n_waiters,
               "victim": slot["victim"], **{p: math.nan for p in PHASES}, "total_ms": math.nan}
        if slot["victim"] is not None and pd.notna(slot["t_exit_s"]):
            if pd.notna(slot["t_stop_s"]):
                row["victim_stop_ms"] = (slot["t_exit_s"] - slot["t_stop_s"]) * 1000
            row["exit_to_spawn_ms"] = (t_spawn - slot["t_exit_s"]) * 1000  # < 0: exit line logged after the spawn
        if loaded is not None:
            row["spawn_to_loaded_ms"] = (loaded["t_s"] - t_spawn) * 1000
        if req is not None:
            used_requests.add(int(req["index"]))
            row["request_index"] = int(req["index"])
            t_send = req["t_send_s"]
            told = slot["t_stop_s"]
            first_step = told if slot["victim"] is not None and pd.notna(told) and told >= t_send else t_spawn
            row["queue_wait_ms"] = max(first_step - t_send, 0.0) * 1000
            if loaded is not None and pd.notna(req["t_first_byte_s"]):
                row["loaded_to_first_byte_ms"] = (req["t_first_byte_s"] - loaded["t_s"]) * 1000
            if pd.notna(req["latency_ms"]):
                row["total_ms"] = req["latency_ms"]
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


ROUTER_DONE_LEAD_S = 0.025
LRU_COLUMNS = ["t_s", "victim", "expected", "match", "candidates", "explanation"]


def lru_check(requests: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Replay the run: at each eviction, which idle running model was least recently used?

    Recency is what the router itself stamps (server-models.cpp): ``last_used`` is set
    when a child is spawned and when a request starts being proxied to it, i.e. the
    ``spawn`` and ``proxy`` log lines.  A candidate is a model whose child is up (loaded or
    sleeping) and not already being stopped, with no request of its own at the router
    (one being served, or one waiting for it): the router skips those.  A request is at the
    router from its ``wait`` line (or its send, when served at once) to 25 ms before the harness
    read its end (``ROUTER_DONE_LEAD_S``: the router is done when the answer has passed through
    it, the client reads it a little later).  Every
    eviction gets a row; ``match`` is null when the replay cannot judge it (the victim was
    not an idle candidate by the replay), and ``explanation`` says why in words.
    """
    if events.empty:
        return pd.DataFrame(columns=LRU_COLUMNS)
    events = events.sort_values("t_s", kind="stable")
    arrival = (requests["t_router_s"].fillna(requests["t_send_s"]) if "t_router_s" in requests else
               requests["t_send_s"]).to_numpy(dtype=float)
    # the router is done with a request when the child's answer has passed through it; the harness stamps
    # the end when its client has read it, a little later (ms, tens of ms on a busy host): a request that
    # ended within ROUTER_DONE_LEAD_S of the eviction may or may not still have counted as busy
    done = requests["t_done_s"].fillna(math.inf).to_numpy(dtype=float)
    req_model = requests["model"].to_numpy(dtype=object)
    state: dict[str, str] = {}
    last_used: dict[str, float] = {}
    rows = []
    for e in events.itertuples(index=False):  # one pass: the replay's state is the state just before each line
        if not isinstance(e.model, str):
            continue
        if e.kind != "evict":
            state[e.model] = next_state(state.get(e.model, "unloaded"), e.kind)
            if e.kind in ("spawn", "proxy"):
                last_used[e.model] = e.t_s
            continue
        t, victim = e.t_s, e.model
        at_router = arrival <= t
        busy = set(req_model[at_router & (done > t + ROUTER_DONE_LEAD_S)])
        unsure = set(req_model[at_router & (done > t - ROUTER_DONE_LEAD_S)]) - busy
        candidates = sorted(m for m, st in state.items() if st == "ready" and m not in busy)
        used = ", ".join(f"{m} {last_used[m]:.3f} s" for m in candidates if m in last_used)
        row = {"t_s": t, "victim": victim, "expected": None, "match": None, "candidates": ",".join(candidates)}
        if victim not in candidates:
            why = ("its child was still loading" if state.get(victim) == "loading" else
                   "a request for it was at the router" if victim in busy else
                   f"its child was {state.get(victim, 'not running')}")
            row["explanation"] = f"not judged: by the replay {victim} was no idle candidate ({why})"
        else:
            expected = min(candidates, key=lambda m: last_used.get(m, -math.inf))
            row["expected"] = expected
            if expected == victim:
                row["match"] = True
                row["explanation"] = (f"{victim} was the idle model used longest ago (last used: {used})"
                                      if len(candidates) > 1 else f"{victim} was the only idle model")
            elif expected in unsure:
                row["explanation"] = (f"not judged: {expected} was used longer ago than {victim}, but its last "
                                      f"request ended within {ROUTER_DONE_LEAD_S * 1000:.0f} ms of the eviction, "
                                      "so the router may still have counted it busy")
            else:
                row["match"] = False
                row["explanation"] = (f"{victim} was last used at {last_used.get(victim, math.nan):.3f} s, but "
                                      f"{expected} was idle too and used longer ago "
                                      f"({last_used.get(expected, math.nan):.3f} s): a least-recently-used rule "
                                      f"would have evicted {expected}")
        rows.append(row)
        state[victim] = next_state(state.get(victim, "unloaded"), "evict")
    return pd.DataFrame(rows, columns=LRU_COLUMNS)


def time_above_cap_s(memory: pd.DataFrame, models_max: int) -> float:
    if memory.empty or models_max <= 0:
        return 0.0
    m = memory.sort_values("t_s")
    dt = m["t_s"].diff().shift(-1).fillna(0.0)
    return float(dt[m["children_alive"] > models_max].sum())


def summarize_run(run: Run) -> dict:
    """The swap part of analysis.json (see harness/analysis/persisted.py)."""

    s = summarize_swap(run)
    return {"latency": frame_json(s.latency), "swaps": frame_json(s.swaps), "lru": frame_json(s.lru),
            "served": frame_json(s.served), "findings": s.findings, "figures": s.figures,
            "first": frame_json(s.first), "first_summary": frame_json(s.first_summary)}


def summary_from_analysis(analysis: dict) -> SwapSummary:
    """The SwapSummary kept in a swap run's analysis.json."""

    return SwapSummary(json_frame(analysis["latency"]), json_frame(analysis["swaps"]), json_frame(analysis["lru"]),
                       list(analysis.get("findings", [])), dict(analysis.get("figures", {})),
                       json_frame(analysis.get("served", {})), json_frame(analysis.get("first", {})),
                       json_frame(analysis.get("first_summary", {})))


def summarize_swap(run: Run) -> SwapSummary:
    cfg = run.record.config
    if cfg.get("first_request"):  # the first request after each starting state, several routers: not a storm
        return summarize_first(run.table("requests"), run.table("events"),
                               list(run.record.section("read_floor").get("rows") or []),
                               status=run.record.status, error=run.record.error or "")
    return summarize_frames(run.table("requests"), run.table("events"), run.table("memory"),
                            models_max=int(cfg.get("models_max", 0)),
                            model_sizes=[m.get("bytes", 0) for m in run.record.models],
                            client=run.record.section("client"), sampler=run.record.section("sampler"),
                            status=run.record.status, error=(run.record.error or ""),
                            engine=cfg.get("engine", "llama-server"),
                            storm_end_s=run.record.section("client").get("storm_end_t_s"),
                            concurrency=int(cfg.get("concurrency") or 1))


def summarize_frames(requests: pd.DataFrame, events: pd.DataFrame, memory: pd.DataFrame, *, models_max: int,
                     model_sizes: list[int], client: Mapping[str, Any] | None = None, sampler: Mapping[str, Any] | None = None,
                     status: str | None = "complete", error: str = "", engine: str = "llama-server",
                     storm_end_s: float | None = None, concurrency: int = 1) -> SwapSummary:
    requests, events, memory = (apply_schema(requests, "requests"), apply_schema(events, "events"),
                                apply_schema(memory, "memory"))  # frames built outside the store too
    kind = registry.get(engine)
    if not kind.can("router_events"):  # no load/unload timeline: loads inferred from the request order
        return _summarize_by_request_order(requests, memory, model_sizes, client or {}, sampler or {}, status,
                                           error, kind)
    events = storm_events(events)  # router lines on the router's own clock, older builds' evictions recognised
    requests = with_served_as(requests, events)  # what the router did for each request, from its log
    latency = latency_table(requests)
    swaps = swap_phases(requests, events, models_max)
    lru = lru_check(requests, events)
    served = requests[["index", "model", "served_as", "t_router_s", "t_spawn_waited_s"]]
    findings: list[str] = []
    figures: dict = {}

    n_req = len(requests)
    peak_children = int(memory["children_alive"].max()) if not memory.empty else 0
    figures.update(n_requests=n_req, n_failed_requests=n_failed(requests), peak_children=peak_children,
                   n_memory_samples=len(memory))
    if memory.empty:
        findings.append("no memory samples were taken")
    elif models_max > 0:
        above = time_above_cap_s(memory, models_max)
        figures["time_above_cap_s"] = above
        if peak_children <= models_max:
            findings.append(f"children alive never exceeded models_max={models_max} "
                            f"(peak {peak_children} over {len(memory)} samples)")
        else:
            findings.append(f"children alive EXCEEDED models_max={models_max}: peak {peak_children}, "
                            f"{above * 1000:.0f} ms above the cap")
    else:
        findings.append(f"no cap (models_max=0): peak {peak_children} children alive")

    sizes = sorted(model_sizes, reverse=True)
    if not memory.empty:
        peak_rss = float(memory["rss_total_bytes"].max())
        allowed = sum(sizes[:models_max]) if models_max > 0 else sum(sizes)
        figures.update(peak_rss_bytes=peak_rss, largest_allowed_bytes=allowed)
        findings.append(f"peak tree RSS {peak_rss / 1e6:.1f} MB; the {min(models_max or len(sizes), len(sizes))} "
                        f"largest model files the cap allows sum to {allowed / 1e6:.1f} MB")

    acc = load_accounting(events, models_max)
    figures["swaps"] = acc["loads"]
    figures["accounting"] = acc
    if n_req:
        findings.append(accounting_sentence(acc, models_max, n_req))

    if not lru.empty:
        judged = lru[lru["match"].notna()]
        matches = int(judged["match"].astype(bool).sum())
        not_judged = len(lru) - len(judged)
        figures.update(evictions=len(lru), lru_matches=matches, lru_judged=len(judged), lru_not_judged=not_judged)
        text = f"of the {len(lru)} evictions, {matches} took the least recently used idle model"
        if len(judged) > matches:
            bad = judged[~judged["match"].astype(bool)].iloc[0]
            text += (f", {len(judged) - matches} did not (first at t={bad['t_s']:.3f} s: evicted {bad['victim']} "
                     f"while {bad['expected']} was idle and used longer ago)")
        if not_judged:
            text += (f", {not_judged} could not be judged (the replay could not tell which models the router "
                     "counted busy at that moment; the report lists each with the reason)")
        findings.append(text)

    found = races(requests, events)
    figures["races"] = {r: int((found["race"] == r).sum()) for r in ("evicted_with_waiter", "proxied_to_stopping")}
    figures["errors_by_kind"] = errors_by_kind(requests)
    figures["router_proxy_error_lines"] = int(events["kind"].eq("proxy_error").sum()) if not events.empty else 0
    if not lru.empty and not found.empty:  # an eviction the replay could not judge as LRU, explained as a race
        waited = found[found["race"] == "evicted_with_waiter"]
        for i, row in lru.iterrows():
            hit = waited[(waited["model"] == row["victim"]) & ((waited["t_s"] - row["t_s"]).abs() < 1e-9)]
            if row["match"] is None or pd.isna(row["match"]):
                if len(hit):
                    lru.at[i, "explanation"] = f"EVICTED WHILE WAITED FOR: {hit.iloc[0]['detail']}"
    findings += race_findings(found, requests, events)
    findings += served_findings(requests, latency, concurrency)
    figures["served_as"] = {c: int((requests["served_as"] == c).sum()) for c in SERVED_AS} if n_req else {}
    deaths = child_deaths(requests, events, storm_end_s)
    figures["child_deaths"] = len(deaths)
    findings[:0] = death_findings(deaths) + deadline_findings(requests)  # faults first
    findings += closing_findings(requests, client or {}, sampler or {}, status, error)
    figures["phases_median_ms"] = {p: _pct(swaps[p], 50) for p in PHASES} if not swaps.empty else {}
    return SwapSummary(latency, swaps, lru, findings, json.loads(json.dumps(figures, default=float)), served)


def summarize_first(requests: pd.DataFrame, events: pd.DataFrame, floors: list[dict], *,
                    status: str | None = "complete", error: str = "") -> SwapSummary:
    """A first-request run (``lbench swap --first-request``): the phases of every measured first
    request and their medians per state and model (harness/analysis/swap_first.py)."""
    # harness receive times, not the router's clock: each router of the run restarts its clock (storm_events
    # aligns one router's lines)
    requests, events = apply_schema(requests, "requests"), apply_schema(events, "events")
    table = first_request_table(requests, events, floors)
    summary = first_request_summary(table)
    findings = first_findings(table, summary) + closing_findings(requests, {}, {}, status, error)
    figures = {"n_requests": len(requests), "n_failed_requests": n_failed(requests),
               "n_first_requests": len(table), "errors_by_kind": errors_by_kind(requests),
               "first_ttfb_median_ms": {f"{r.state}/{r.model}": r.median for r in summary.itertuples()
                                        if r.phase == "ttfb_ms"}}
    return SwapSummary(latency_table(requests), pd.DataFrame(columns=PHASE_COLUMNS), pd.DataFrame(columns=LRU_COLUMNS),
                       findings, json.loads(json.dumps(figures, default=float)), first=table, first_summary=summary)


def served_findings(requests: pd.DataFrame, latency: pd.DataFrame, concurrency: int = 1) -> list[str]:
    """Latency by what the router did, and how often /models/sse at send told another story."""
    out: list[str] = []
    if requests.empty or requests["served_as"].eq("unknown").all():
        cold, warm = _latency_row(latency, SENT_NOT_RESIDENT), _latency_row(latency, SENT_RESIDENT)
        if cold is not None and cold["n"]:
            out.append(f"requests are not classed by what the router did (this run's events hold no router "
                       f"wait lines: another engine, or recorded before lbench kept them); by residency at send: "
                       f"not resident p50 {cold['p50_ms']:.1f} ms (n={cold['n']}), resident "
                       + (f"p50 {warm['p50_ms']:.1f} ms (n={warm['n']})" if warm is not None and warm["n"] else "none"))
        return out
    parts = []
    for cls in SERVED_AS:
        r = _latency_row(latency, SERVED_LABELS[cls])
        if r is not None and r["n"]:
            parts.append(f"{SERVED_LABELS[cls]} p50 {r['p50_ms']:.1f} / p99 {r['p99_ms']:.1f} ms (n={r['n']})")
    if parts:
        out.append("answered requests by what the router did: " + "; ".join(parts))
    resident = _latency_row(latency, SERVED_LABELS["resident"])
    loads = [r for c in ("own_load", "joined_load", "behind_eviction")
             if (r := _latency_row(latency, SERVED_LABELS[c])) is not None and r["n"]]
    if concurrency > 1 and resident is not None and resident["n"] and loads \
            and resident["p50_ms"] > min(r["p50_ms"] for r in loads):
        out.append(f"requests served by a resident child were not the fastest (p50 {resident['p50_ms']:.1f} ms): "
                   f"with {concurrency} requests in flight and one slot per child (np = 1 in the preset), requests "
                   "to a loaded model wait for each other; a storm with -c 1 shows the cost of a swap alone")
    sent_warm = requests[warm_mask(requests)]
    moved = sent_warm[sent_warm["served_as"] != "resident"]
    if len(moved):
        counts = moved["served_as"].value_counts()
        out.append(f"{len(moved)} of {len(sent_warm)} request(s) sent while /models/sse said their model was "
                   "loaded were not served by a resident child ("
                   + ", ".join(f"{SERVED_LABELS[c]} x{counts[c]}" for c in SERVED_AS if c in counts)
                   + "): the router had decided or done an eviction the harness had not seen yet")
    return out


def closing_findings(requests: pd.DataFrame, client: Mapping[str, Any], sampler: Mapping[str, Any],
                     status: str | None, error: str) -> list[str]:
    """Errors by kind, the harness's own cost, and how the run ended: the same for every engine."""
    out = []
    errors = requests[requests["error"].notna()] if not requests.empty else requests
    out.append("errors: " + ", ".join(f"{k} x{v}" for k, v in errors["error_kind"].fillna("error").value_counts().items())
               if len(errors) else "no request failed")
    if client.get("cpu_share_of_one_core") is not None:
        out.append(f"client: {client['requests_per_s']:.0f} requests/s using "
                   f"{100 * client['cpu_share_of_one_core']:.0f}% of one core; sampler "
                   f"{sampler.get('achieved_hz') or 0:.0f} Hz using "
                   f"{100 * (sampler.get('cpu_share_of_one_core') or 0):.2f}% of one core")
    if status != "complete":
        out.append(f"the run ended {status}: {error}")
    return out


def _summarize_by_request_order(requests: pd.DataFrame, memory: pd.DataFrame, model_sizes: list[int],
                                client: Mapping[str, Any], sampler: Mapping[str, Any], status: str | None, error: str,
                                kind: registry.EngineKind) -> SwapSummary:
    """A swap server without a router log: the loads are inferred from the order of the answered
    requests and the number of models the engine declares it holds (``EngineKind.models_held``;
    with one, a request naming another model than the last one loads it)."""
    latency = latency_table(requests)
    findings: list[str] = deadline_findings(requests)
    ok = requests[requests["error"].isna()].sort_values("t_done_s") if not requests.empty else requests
    held = kind.models_held
    if held == 1:
        previous = ok["model"].shift(1)
        reloads = int((ok["model"] != previous).sum()) if not ok.empty else 0
        findings.append(f"{kind.display_name} keeps one model: {reloads} loads over {len(requests)} requests "
                        f"({reloads / max(len(requests), 1):.2f} per request)")
    else:
        reloads = 0
        findings.append(f"{kind.display_name} logs no loads and does not say how many models it holds: loads are "
                        "not counted; the latency classes below are by residency at send")
    if not memory.empty:
        findings.append(f"peak server RSS {memory['rss_total_bytes'].max() / 1e6:.1f} MB; largest model "
                        f"{max(model_sizes or [0]) / 1e6:.1f} MB")
    cold, warm = _latency_row(latency, SENT_NOT_RESIDENT), _latency_row(latency, SENT_RESIDENT)
    if cold is not None and cold["n"]:  # latency_table always has both rows: the checks narrow the type
        findings.append(f"requests for another model: p50 {cold['p50_ms']:.1f} ms (n={cold['n']}); same model: "
                        + (f"p50 {warm['p50_ms']:.1f} ms (n={warm['n']})" if warm is not None and warm["n"] else "none"))
    findings += closing_findings(requests, client, sampler, status, error)
    return SwapSummary(latency, pd.DataFrame(columns=PHASE_COLUMNS), pd.DataFrame(columns=LRU_COLUMNS), findings,
                       {"swaps": reloads if held == 1 else None, "n_requests": len(requests),
                        "n_failed_requests": n_failed(requests)})
