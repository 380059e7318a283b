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

import json
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
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
SLACK_S = 0.005  # router lines are on the router's clock (aligned_events): a line lands at most ~1 ms late
READY_KINDS = ("child_loaded", "status:loaded", "status:sleeping", "proxy")  # the router proxies only to a ready child


@dataclass
class WaitLine:
    t_s: float
    model: str
    served_as: str
    t_spawn_s: float | None = None  # the spawn of the load it waited for (None: none seen)


ROUTER_CLOCK = r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) "  # llama.cpp's log prefix: minutes.seconds.ms.us since start


def aligned_events(events: pd.DataFrame) -> pd.DataFrame:
    """The events with each router log line's ``t_s`` taken from the router's own timestamp.

    The harness stamps a line when its reader thread reads it; on a busy host lines arrive in
    bursts, tens of ms late, so a line can look later than the response it preceded.  The
    router writes its own clock at the start of every line (since its start).  Every line's
    lag (harness stamp - router clock) is the clock offset plus a reading delay >= 0, so the
    smallest lag is the best offset: router clock + that offset puts each line on the harness
    clock, in the router's order, at most that smallest delay late.  ``t_read_s`` keeps the
    harness's stamp.  Lines without the prefix keep their stamp."""
    if events.empty or "text" not in events:
        return events
    out = events.copy()
    out["t_read_s"] = out["t_s"]
    router = out["source"].eq("router") & out["text"].notna()
    if not router.any():
        return out
    parts = out.loc[router, "text"].astype(str).str.extract(ROUTER_CLOCK).astype(float)
    own = parts[0] * 60 + parts[1] + parts[2] / 1e3 + parts[3] / 1e6
    own = own.dropna()
    if own.empty:
        return out
    offset = float((out.loc[own.index, "t_s"] - own).min())
    out.loc[own.index, "t_s"] = own + offset
    return out.sort_values("t_s", kind="stable")


def next_state(now: str, kind: str) -> str:
    """A model's state after one event: unloaded -> loading (spawn) -> ready (loaded, or proxied to)
    -> stopping (evicted, stopped, killed) -> unloaded (the router's exit line; /models/sse comes on
    another connection, in its own time, so its "unloaded" is not used)."""
    if kind == "spawn":
        return "loading"
    if kind in READY_KINDS and now == "loading":
        return "ready"
    if kind in STOPPING and now != "unloaded":
        return "stopping"
    if kind == "exited":
        return "unloaded"
    return now


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
        state[model] = next_state(now, kind)
        if kind == "spawn":
            last_spawn[model] = e.t_s
            for w in waiting_for_spawn.pop(model, []):
                w.t_spawn_s = e.t_s
            stop_waiters[model] = 0
            queue_lines[model] = []
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
        # requests in send order take the first free wait line between their send and their end; a line
        # older than a request's send can serve no later request either, so it is dropped
        free = deque(by_model.get(model, []))
        model_proxies: np.ndarray | list = np.sort(proxies.loc[proxies["model"] == model, "t_s"].to_numpy()) if has_log else []
        for r in group.itertuples(index=False):
            end = r.t_done_s if pd.notna(r.t_done_s) else math.inf
            while free and free[0].t_s < r.t_send_s:
                free.popleft()
            row = {"index": int(r.index), "served_as": "unknown", "t_router_s": math.nan,
                   "t_spawn_waited_s": math.nan}
            if free and free[0].t_s <= end + SLACK_S:
                match = free.popleft()
                row.update(served_as=match.served_as, t_router_s=match.t_s,
                           t_spawn_waited_s=math.nan if match.t_spawn_s is None else match.t_spawn_s)
            elif has_log and (_answered(r) or _any_between(model_proxies, r.t_send_s, end + SLACK_S)):
                row.update(served_as="resident", t_router_s=r.t_send_s)
            rows.append(row)
    return pd.DataFrame(rows, columns=cols).sort_values("index").reset_index(drop=True)


def _any_between(sorted_times: np.ndarray | list, lo: float, hi: float) -> bool:
    i = int(np.searchsorted(sorted_times, lo, side="left"))
    return i < len(sorted_times) and sorted_times[i] <= hi


def _answered(r: Any) -> bool:  # a row of DataFrame.itertuples (pandas ships no types here)
    return (pd.isna(r.error) or r.error is None) and pd.notna(r.http_status) and int(r.http_status) == 200


def with_served_as(requests: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The requests with ``served_as`` (and the router times it came from) filled from the events."""
    out = requests.drop(columns=[c for c in ("served_as", "t_router_s", "t_spawn_waited_s") if c in requests])
    if out.empty:
        return out.assign(served_as=pd.Series(dtype="object"), t_router_s=pd.Series(dtype=float),
                          t_spawn_waited_s=pd.Series(dtype=float))
    classes = classify_requests(out, events)
    return out.merge(classes, on="index", how="left").fillna({"served_as": "unknown"})


OLD_EVICTION_TEXT = "unload: stopping model instance"  # build 10327's only line for a scheduler eviction
EVICTION_WINDOW_S = 0.5


def with_inferred_evictions(events: pd.DataFrame, window_s: float = EVICTION_WINDOW_S) -> pd.DataFrame:
    """Evictions of builds that do not say "evicting"/"removing LRU" (10327 logs a scheduler
    eviction only as ``unload: stopping model instance name=X``): such a stop with no eviction
    line for X in the ``window_s`` before it becomes an ``evict`` row (its detail says it was
    inferred).  9093 logs both lines for one eviction, 11434 only the eviction line; neither
    changes.  For swap storms only: lbench never unloads a model itself there, so every such
    stop before the router's shutdown (``unload_all``, another text) is the scheduler's."""
    if events.empty or "text" not in events or "kind" not in events:
        return events
    old = events["kind"].eq("stop_sent") & events["text"].astype(str).str.contains(OLD_EVICTION_TEXT, regex=False)
    if not old.any():
        return events
    last_evict: dict[str, float] = {}
    inferred = []
    ordered = events.sort_values("t_s", kind="stable")
    for idx, kind, model, t in zip(ordered.index, ordered["kind"], ordered["model"], ordered["t_s"]):
        if kind == "evict":
            last_evict[model] = t
        elif old[idx] and t - last_evict.get(model, -math.inf) > window_s:
            inferred.append(idx)
    if not inferred:
        return events
    out = events.copy()
    out.loc[inferred, "kind"] = "evict"
    if "detail" in out:
        out.loc[inferred, "detail"] = [json.dumps({"model": m, "inferred_from": OLD_EVICTION_TEXT})
                                       for m in out.loc[inferred, "model"]]
    return out


def with_repeated_evictions_marked(events: pd.DataFrame) -> pd.DataFrame:
    """An eviction line for a child the router is already evicting (build 10327 logs up to three
    for one child: "went idle, giving up its slot", then "evicting idle LRU" once per queued
    request) becomes ``evict_repeat``: one child, one eviction.  A model's next spawn or exit
    ends its eviction."""
    if events.empty or "kind" not in events or not events["kind"].eq("evict").any():
        return events
    evicting: set[str] = set()
    repeats = []
    ordered = events.sort_values("t_s", kind="stable")
    for idx, kind, model in zip(ordered.index, ordered["kind"], ordered["model"]):
        if kind == "evict":
            if model in evicting:
                repeats.append(idx)
            evicting.add(model)
        elif kind in ("spawn", "exited"):
            evicting.discard(model)
    if not repeats:
        return events
    out = events.copy()
    out.loc[repeats, "kind"] = "evict_repeat"
    return out


def storm_events(events: pd.DataFrame) -> pd.DataFrame:
    """A swap storm's events as the analysis reads them: router lines on the router's own clock,
    evictions of older builds recognised, one eviction per evicted child."""
    return with_repeated_evictions_marked(with_inferred_evictions(aligned_events(events)))


def derive_tables(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """A swap run's tables as written when it ends: ``requests.served_as`` filled from ``events``."""
    if "requests" in tables:
        events = tables.get("events", pd.DataFrame(columns=["t_s", "source", "kind", "model"]))
        tables["requests"] = tables["requests"].assign(
            served_as=with_served_as(tables["requests"], storm_events(events))["served_as"].to_numpy())
    return tables


ACCOUNT_KEYS = ["loads", "loads_free_slot", "loads_after_eviction", "loads_after_other_exit", "evictions",
                "eviction_lines_repeated", "stops",
                "exits", "exits_evicted", "exits_stopped", "exits_other", "alive_at_end", "evicted_not_reused"]


def load_slots(events: pd.DataFrame, models_max: int) -> tuple[dict, list[dict]]:
    """Replay the router log's spawns, evictions, stops and exits under ``models_max``.

    Returns the counts (``ACCOUNT_KEYS``) and, per spawn, the slot it went into: ``free`` (under
    the cap) or the slot a child's exit freed (``evicted``, ``stopped``, ``other``), with that
    child's model, when it was told to go (``t_stop_s``) and when it exited (``t_exit_s``).  Each
    exit frees one slot and each slot is taken by one spawn, so no eviction is counted twice.
    The victim's exit line can come after the spawn that takes its slot (the router's monitor
    thread writes it); such a spawn takes the slot of a child already told to go."""
    acc = dict.fromkeys(ACCOUNT_KEYS, 0)
    slots: list[dict] = []
    going: dict[str, dict] = {}  # model -> its child told to go: why, t_stop_s
    freed: list[dict] = []  # slots freed by exits, not yet taken (oldest first)
    owed: dict[str, dict] = {}  # model told to go -> the spawn that took its slot before its exit line
    running = 0
    for e in _ordered(events).itertuples(index=False):
        if not isinstance(e.model, str) or e.source != "router":
            continue
        if e.kind == "spawn":
            acc["loads"] += 1
            slot = {"model": e.model, "t_spawn_s": e.t_s, "slot": "free", "victim": None, "t_stop_s": math.nan,
                    "t_exit_s": math.nan}
            if models_max <= 0 or (running < models_max and not freed):
                pass
            elif freed:
                slot.update(freed.pop(0))
            else:  # the cap is full by line order: take the slot of a child told to go, its exit still to come
                waiting = [m for m in going if m not in owed]
                pick = next((m for m in waiting if going[m]["slot"] == "evicted"), waiting[0] if waiting else None)
                if pick is not None:
                    slot.update(slot=going[pick]["slot"], victim=pick, t_stop_s=going[pick]["t_stop_s"])
                    owed[pick] = slot
            acc["loads_free_slot" if slot["slot"] == "free" else
                "loads_after_eviction" if slot["slot"] == "evicted" else "loads_after_other_exit"] += 1
            slots.append(slot)
            running += 1
        elif e.kind == "evict_repeat":
            acc["eviction_lines_repeated"] += 1
        elif e.kind == "evict":
            acc["evictions"] += 1
            going[e.model] = {"slot": "evicted", "t_stop_s": e.t_s}
        elif e.kind in ("stop_sent", "kill_loading", "kill_timeout") and e.model not in going:
            acc["stops"] += 1
            going[e.model] = {"slot": "stopped", "t_stop_s": e.t_s}
        elif e.kind == "exited":
            acc["exits"] += 1
            told = going.pop(e.model, {"slot": "other", "t_stop_s": math.nan})
            acc[f"exits_{told['slot']}"] += 1
            running = max(running - 1, 0)
            if e.model in owed:
                owed.pop(e.model)["t_exit_s"] = e.t_s  # its slot was taken by a spawn logged before this line
            elif models_max > 0:
                freed.append({"slot": told["slot"], "victim": e.model, "t_stop_s": told["t_stop_s"],
                              "t_exit_s": e.t_s})
    acc["alive_at_end"] = acc["loads"] - acc["exits"]
    acc["evicted_not_reused"] = sum(1 for f in freed if f["slot"] == "evicted")
    return acc, slots


def load_accounting(events: pd.DataFrame, models_max: int) -> dict:
    """Loads, evictions and exits from the router log (see ``load_slots``): loads = loads into a free
    slot + loads into a slot an eviction freed + loads into a slot another exit freed."""
    return load_slots(events, models_max)[0]


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
    if acc.get("eviction_lines_repeated"):
        text += (f"; it logged {acc['eviction_lines_repeated']} more eviction line(s) for children it was "
                 "already evicting (counted once)")
    if acc["exits_stopped"] or acc["stops"]:
        text += f"; {acc['stops']} child(ren) stopped outside the scheduler (e.g. at the end of the run)"
    if acc["exits_other"]:
        text += f"; {acc['exits_other']} child(ren) exited without being told to"
    return text
