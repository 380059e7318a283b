"""What the router did for each request of a swap storm, from its own log.

``resident_at_send`` says what /models/sse last reported when a request was *sent*; it
cannot see an eviction the router had already decided (the child stays "loaded" on
/models/sse until it exits) nor one that happens while the request is on its way.
``served_as`` says what the router actually did, read from its log lines (harness
receive times, one pipe, so their order is the router's order):

``resident``
    no wait: the router proxied the request straight to a running child (loaded or sleeping).
``own_load``
    the model was not running; this request put it in the router's load queue
    ("request for name=M queued at position N") and waited for the load it caused.
``joined_load``
    the model was already being loaded, or already queued by another request
    ("joined the queue, N waiting"): it waited for a load another request caused.
``behind_eviction``
    the model's child was being stopped (evicted) when the request reached the router: it
    waited for that child to exit and for the model to be loaded again.
``unknown``
    the log does not say: no "waiting until ... loaded" line matched and the request
    failed, or the engine/build logs no such lines.

Every request that waits makes the router log one "waiting until model name=M is fully
loaded" line (kind ``wait``) after it arrives; one that is served at once logs none.  Per
model, requests (in send order) are matched to ``wait`` lines logged between their send
and their end; the router's state of the model at that line gives the class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

SERVED_AS = ("resident", "own_load", "joined_load", "behind_eviction", "unknown")
SERVED_DOC = {
    "resident": "served at once by a running child",
    "own_load": "waited for a load it caused",
    "joined_load": "waited for a load another request caused",
    "behind_eviction": "its model was being evicted: waited for the exit and a reload",
    "unknown": "the router log does not say",
}
STOPPING = ("evict", "stop_sent", "kill_loading", "kill_timeout")
QUEUE_LINES = {"queued": "own_load", "load_asked": "own_load", "joined": "joined_load"}
SLACK_S = 0.05  # a log line is stamped when the harness reads it: allow it to land just after the response


@dataclass
class WaitLine:
    t_s: float
    model: str
    served_as: str
    t_spawn_s: float | None = None  # the spawn of the load it waited for (None: none seen)


def model_states(events: pd.DataFrame) -> pd.DataFrame:
    """Each model's state after every router/child event: unloaded, loading, ready, stopping."""
    state: dict[str, str] = {}
    rows = []
    for e in _ordered(events).itertuples(index=False):
        model, kind = e.model, e.kind
        if not isinstance(model, str):
            continue
        now = state.get(model, "unloaded")
        if kind == "spawn":
            now = "loading"
        elif kind in ("child_loaded", "status:loaded", "status:sleeping") and now == "loading":
            now = "ready"
        elif kind in STOPPING and now != "unloaded":
            now = "stopping"
        elif kind == "exited" or (kind == "status:unloaded" and now != "loading"):
            now = "unloaded"
        state[model] = now
        rows.append({"t_s": e.t_s, "model": model, "kind": kind, "state": now})
    return pd.DataFrame(rows, columns=["t_s", "model", "kind", "state"])


def _ordered(events: pd.DataFrame) -> pd.DataFrame:
    if events.empty:
        return events
    return events.sort_values("t_s", kind="stable")


def wait_lines(events: pd.DataFrame) -> list[WaitLine]:
    """Every ``wait`` line with the class the router's state of its model at that moment gives it."""
    out: list[WaitLine] = []
    state: dict[str, str] = {}
    queue_lines: dict[str, list[str]] = {}  # per model: queue lines not yet owned by a wait line
    stop_waiters: dict[str, int] = {}  # waits that saw the model stopping: their queue line comes after them
    waiting_for_spawn: dict[str, list[WaitLine]] = {}
    last_spawn: dict[str, float] = {}
    for e in _ordered(events).itertuples(index=False):
        model, kind = e.model, e.kind
        if not isinstance(model, str):
            continue
        now = state.get(model, "unloaded")
        if kind == "spawn":
            state[model] = "loading"
            last_spawn[model] = e.t_s
            for w in waiting_for_spawn.pop(model, []):
                w.t_spawn_s = e.t_s
            stop_waiters[model] = 0
            queue_lines[model] = []
        elif kind in ("child_loaded", "status:loaded", "status:sleeping") and now == "loading":
            state[model] = "ready"
        elif kind in STOPPING and now != "unloaded":
            state[model] = "stopping"
        elif kind == "exited" or (kind == "status:unloaded" and now != "loading"):
            state[model] = "unloaded"
        elif kind in QUEUE_LINES:
            if stop_waiters.get(model, 0) > 0:  # the queue line of a request that arrived while it stopped
                stop_waiters[model] -= 1
            else:
                queue_lines.setdefault(model, []).append(kind)
        elif kind == "wait":
            if now == "stopping":
                w = WaitLine(e.t_s, model, "behind_eviction")
                stop_waiters[model] = stop_waiters.get(model, 0) + 1
                waiting_for_spawn.setdefault(model, []).append(w)
            elif now == "unloaded":
                pending = queue_lines.get(model) or []
                line = pending.pop(0) if pending else None
                if line is None:  # no queue line (an older build): the first one waiting since the exit loads
                    line = "joined" if waiting_for_spawn.get(model) else "queued"
                w = WaitLine(e.t_s, model, QUEUE_LINES[line])
                waiting_for_spawn.setdefault(model, []).append(w)
            else:  # loading (or just loaded): a load already under way
                w = WaitLine(e.t_s, model, "joined_load", last_spawn.get(model))
            out.append(w)
    return out


def classify_requests(requests: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Per request (by ``index``): ``served_as``, ``t_router_s`` (when the router took it up: its
    wait line, or its send when served at once) and ``t_spawn_waited_s`` (the spawn it waited for)."""
    cols = ["index", "served_as", "t_router_s", "t_spawn_waited_s"]
    if requests.empty:
        return pd.DataFrame(columns=cols)
    # a run that loaded a model logged a wait line for the first request (no wait lines: an older run)
    has_log = not events.empty and (events["kind"].eq("wait").any() or not events["kind"].eq("spawn").any())
    waits = wait_lines(events) if has_log else []
    by_model: dict[str, list[WaitLine]] = {}
    for w in waits:
        by_model.setdefault(w.model, []).append(w)
    proxies = events[events["kind"] == "proxy"] if has_log else events
    rows = []
    for model, group in requests.sort_values(["t_send_s", "index"]).groupby("model", sort=False):
        free = list(by_model.get(model, []))
        model_proxies = proxies[proxies["model"] == model]["t_s"].to_numpy() if has_log else []
        for r in group.itertuples(index=False):
            end = r.t_done_s if pd.notna(r.t_done_s) else math.inf
            match = next((w for w in free if r.t_send_s <= w.t_s <= end + SLACK_S), None)
            row = {"index": int(r.index), "served_as": "unknown", "t_router_s": math.nan,
                   "t_spawn_waited_s": math.nan}
            if match is not None:
                free.remove(match)
                row.update(served_as=match.served_as, t_router_s=match.t_s,
                           t_spawn_waited_s=math.nan if match.t_spawn_s is None else match.t_spawn_s)
            elif has_log and (_answered(r) or any(r.t_send_s <= t <= end + SLACK_S for t in model_proxies)):
                row.update(served_as="resident", t_router_s=r.t_send_s)
            rows.append(row)
    return pd.DataFrame(rows, columns=cols).sort_values("index").reset_index(drop=True)


def _answered(r) -> bool:
    return (pd.isna(r.error) or r.error is None) and pd.notna(r.http_status) and int(r.http_status) == 200


def with_served_as(requests: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The requests with ``served_as`` (and the router times it came from) filled from the events."""
    out = requests.drop(columns=[c for c in ("served_as", "t_router_s", "t_spawn_waited_s") if c in requests])
    if out.empty:
        return out.assign(served_as=pd.Series(dtype="object"), t_router_s=pd.Series(dtype=float),
                          t_spawn_waited_s=pd.Series(dtype=float))
    classes = classify_requests(out, events)
    return out.merge(classes, on="index", how="left").fillna({"served_as": "unknown"})


def derive_tables(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """A swap run's tables as written when it ends: ``requests.served_as`` filled from ``events``."""
    if "requests" in tables:
        events = tables.get("events", pd.DataFrame(columns=["t_s", "source", "kind", "model"]))
        tables["requests"] = tables["requests"].assign(
            served_as=with_served_as(tables["requests"], events)["served_as"].to_numpy())
    return tables


def load_accounting(events: pd.DataFrame, models_max: int) -> dict:
    """Loads, evictions and exits from the router log, with the identity that ties them:
    every load goes into a slot that was free (under models_max) or freed by an exit."""
    ev = _ordered(events)
    if ev.empty:
        return {"loads": 0, "loads_free_slot": 0, "loads_after_eviction": 0, "loads_after_other_exit": 0,
                "evictions": 0, "stops": 0, "exits": 0, "exits_evicted": 0, "exits_stopped": 0,
                "exits_other": 0, "alive_at_end": 0, "evicted_not_reused": 0}
    reason: dict[str, str] = {}  # model -> why its child is going (evicted / stopped)
    running = 0
    freed = {"evicted": 0, "stopped": 0, "other": 0}  # slots freed by exits, not yet taken
    owed = {"evicted": 0, "stopped": 0, "other": 0}  # slots taken by spawns before the exit that frees them
    acc = dict.fromkeys(["loads", "loads_free_slot", "loads_after_eviction", "loads_after_other_exit",
                         "evictions", "stops", "exits", "exits_evicted", "exits_stopped", "exits_other"], 0)
    for e in ev.itertuples(index=False):
        if not isinstance(e.model, str) or e.source != "router":
            continue
        if e.kind == "spawn":
            acc["loads"] += 1
            if models_max <= 0 or running < models_max and not any(freed.values()):
                acc["loads_free_slot"] += 1
            elif freed["evicted"]:
                freed["evicted"] -= 1
                acc["loads_after_eviction"] += 1
            elif freed["stopped"] or freed["other"]:
                freed["stopped" if freed["stopped"] else "other"] -= 1
                acc["loads_after_other_exit"] += 1
            else:  # the cap is full by the log's line order: the victim's exit line can follow the spawn
                why = "evicted" if "evicted" in reason.values() else "stopped" if reason else "other"
                owed[why] += 1
                acc["loads_after_eviction" if why == "evicted" else "loads_after_other_exit"] += 1
            running += 1
            reason.pop(e.model, None)
        elif e.kind == "evict":
            acc["evictions"] += 1
            reason[e.model] = "evicted"
        elif e.kind in ("stop_sent", "kill_loading", "kill_timeout") and e.model not in reason:
            acc["stops"] += 1
            reason[e.model] = "stopped"
        elif e.kind == "exited":
            acc["exits"] += 1
            why = reason.pop(e.model, "other")
            acc[f"exits_{why}"] += 1
            running = max(running - 1, 0)
            if owed[why]:
                owed[why] -= 1  # its slot was already taken by a spawn logged before this exit
            elif models_max > 0:
                freed[why] += 1
    acc["alive_at_end"] = acc["loads"] - acc["exits"]
    acc["evicted_not_reused"] = freed["evicted"]
    return acc


def accounting_sentence(acc: dict, models_max: int, n_requests: int) -> str:
    """The loads and evictions of a run in one sentence whose numbers add up."""
    parts = [f"{acc['loads']} model loads over {n_requests} requests"]
    split = []
    if acc["loads_free_slot"]:
        split.append(f"{acc['loads_free_slot']} into a free slot" + (f" (models_max={models_max} starts empty)"
                                                                     if models_max > 0 else " (no cap)"))
    if acc["loads_after_eviction"]:
        split.append(f"{acc['loads_after_eviction']} into a slot an eviction freed")
    if acc["loads_after_other_exit"]:
        split.append(f"{acc['loads_after_other_exit']} into a slot a stopped or exited child freed")
    if split:
        parts.append(" = " + " + ".join(split))
    text = "".join(parts) + f"; the router evicted {acc['evictions']} time(s)"
    if acc["evicted_not_reused"]:
        text += f" ({acc['evicted_not_reused']} freed slot(s) not reused before the run ended)"
    if acc["exits_stopped"] or acc["stops"]:
        text += f"; {acc['stops']} child(ren) stopped outside the scheduler (e.g. at the end of the run)"
    if acc["exits_other"]:
        text += f"; {acc['exits_other']} child(ren) exited without being told to"
    return text
