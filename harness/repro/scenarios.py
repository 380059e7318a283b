"""Scripted scenarios that put the real router (or server) where a claim can be seen.

Each scenario takes a ``Context`` and the spec's ``params`` and returns ``Evidence``:
named figures (what the claim's check compares), the log lines that show them,
and notes.  A scenario that cannot set up the situation it needs (say, a model
that finished loading before it could be frozen) raises ``Inconclusive``.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.analysis.swap import summarize_frames
from harness.engines.llama_server import Binary
from harness.engines.router import RouterModel
from harness.errors import EngineError
from harness.models.resolve import ResolvedModel
from harness.repro.lab import Lab
from harness.workloads.swap import Pattern, waves

STORM_PROMPT = "Hello world, this is a swap probe."  # the storm driver's prompt (as before the router session)


class Inconclusive(Exception):
    """The scenario could not create the situation the claim is about."""


@dataclass
class Evidence:
    figures: dict = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Context:
    binary: Binary
    claim_dir: Path
    resolve: Callable[[str], ResolvedModel]

    def router_models(self, refs: list[str], **per_model) -> list[RouterModel]:
        names: dict[str, int] = {}
        out = []
        for i, ref in enumerate(refs):
            m = self.resolve(ref)
            names[m.label] = names.get(m.label, 0) + 1
            name = m.label if names[m.label] == 1 else f"{m.label}-{names[m.label]}"
            extra = per_model.get(name, per_model.get(str(i), {}))
            out.append(RouterModel(name, m.path, extra.get("stop_timeout_s"),
                                   tuple((k, str(v)) for k, v in extra.get("preset", {}).items())))
        return out

    def lab(self, models: list[RouterModel], **kw) -> Lab:
        return Lab(self.binary, models, self.claim_dir, **kw)


def _save(lab: Lab, ev: Evidence) -> None:
    lab.event_frame().to_csv(lab.run_dir / "events.csv", index=False)
    lab.memory_frame().to_csv(lab.run_dir / "memory.csv", index=False)
    ev.figures.setdefault("peak_children", lab.peak_children())


def children_from_log(events: list) -> dict:
    """Children count by the router log's line order: +1 at each ``spawn``, -1 at each ``exited``.
    Not exact: the ``exited`` line is written by the child's monitor thread and can follow the spawn
    line of the model that was waiting for that exit (seen on build 11434)."""
    alive, peak, order = 0, 0, []
    for e in events:
        if e.source != "router" or e.kind not in ("spawn", "exited"):
            continue
        alive += 1 if e.kind == "spawn" else -1
        peak = max(peak, alive)
        order.append((e.kind, e.model, alive))
    return {"peak_children_log": peak, "log_order": order}


def spawns_over_cap(order: list[tuple[str, str, int]], models_max: int) -> int:
    """Spawns that made more than ``models_max`` children alive by the log's own order."""
    return sum(1 for kind, _, alive in order if kind == "spawn" and models_max > 0 and alive > models_max)


def _long_request_busy(lab: Lab, model: str, n_predict: int):
    """Start a long generation on ``model``; return its thread once the router has proxied it."""
    after = lab.now()
    thread = lab.request_in_background(model, n_predict, ignore_eos=True)
    if lab.wait_for("proxy", model, timeout=30, after=after) is None:
        raise Inconclusive(f"the long request to {model} was never proxied")
    return thread


def _loaded_and_busy(lab: Lab, model: str, p: dict, default_n: int = 4000):
    """Load ``model`` with one request, then keep it busy with a long generation."""
    lab.request(model)
    return _long_request_busy(lab, model, int(p.get("n_predict", default_n)))


# ---- scenarios ------------------------------------------------------------------

def wave_line(lab: Lab, wave: list[str]) -> str:
    """One storm wave for ``recipe.sh``: its requests sent together, every body a quoted word; the
    next wave starts when they are done (``wait_jobs``: every job but the router's)."""
    return " & ".join(
        f"curl -sS -o /dev/null -H 'Content-Type: application/json' -d "
        f"{shlex.quote(json.dumps(lab.router.request_body(m, STORM_PROMPT, 1)))} "
        f"\"http://127.0.0.1:$PORT\"{shlex.quote(lab.router.request_path)}" for m in wave) + " & wait_jobs"


def storm(ctx: Context, p: dict) -> Evidence:
    """A swap storm (pattern over models under a cap); figures from the swap analysis."""
    models = ctx.router_models(p["models"])
    names = [m.name for m in models]
    pattern = Pattern(p.get("pattern", "round-robin"), p.get("zipf_s", 1.1), p.get("burst_k", 3)).validate(len(names))
    plan = waves(pattern, names, int(p.get("requests", 30)), int(p.get("seed", 0)))
    rows: list[dict] = []
    ev = Evidence()
    with ctx.lab(models, models_max=p.get("models_max", 2), sleep_idle_seconds=p.get("sleep_idle_seconds")) as lab:
        lab.note(f"the request plan: {len(plan)} waves, at most {int(p.get('concurrency', 1))} in flight; "
                "each wave's requests are sent together")
        for wave in plan:
            lab.actions.append(wave_line(lab, wave))
        # the storm driver and request rows of `lbench swap`: resident_at_send comes from /models/sse
        lab.session.drive(plan, concurrency=int(p.get("concurrency", 1)), n_predict=1, prompt=STORM_PROMPT,
                          emit=rows.append)
        time.sleep(0.2)
        events = lab.event_frame()
        memory = lab.memory_frame()
        _save(lab, ev)
    requests = pd.DataFrame(rows)
    requests.to_csv(lab.run_dir / "requests.csv", index=False)
    summary = summarize_frames(requests, events, memory, models_max=int(p.get("models_max", 2)),
                               model_sizes=[m.path.stat().st_size for m in models])
    f = summary.figures
    ev.figures.update(models_max=int(p.get("models_max", 2)), n_models=len(models), requests=len(rows),
                      spawns=f.get("swaps", 0), evictions=scheduler_evictions(events),
                      lru_matches=f.get("lru_matches", 0), lru_judged=f.get("lru_judged", 0),
                      time_above_cap_ms=1000 * f.get("time_above_cap_s", 0.0), samples=len(memory),
                      errors=int(requests["error"].notna().sum()) if not requests.empty else 0)
    ev.figures["lru_mismatches"] = ev.figures["lru_judged"] - ev.figures["lru_matches"]
    max_model = max(m.path.stat().st_size for m in models)
    peak_rss = int(memory["rss_total_bytes"].max()) if not memory.empty else 0
    per_child = max((rss for smp in list(lab.samples) for rss in smp.children.values()), default=0)
    root_peak = max((smp.root_rss for smp in list(lab.samples)), default=0)
    cap = ev.figures["models_max"]
    ev.figures.update(max_model_bytes=max_model, peak_rss_total_bytes=peak_rss, peak_child_rss_bytes=per_child,
                      peak_rss_over_cap_models=round(peak_rss / (cap * max_model), 3) if cap > 0 else None,
                      peak_rss_over_cap_children=round(peak_rss / (cap * per_child + root_peak), 3)
                      if cap > 0 and per_child else None)
    log = children_from_log(lab.events)
    ev.figures.update(peak_children_log=log["peak_children_log"],
                      spawns_over_cap=spawns_over_cap(log["log_order"], ev.figures["models_max"]))
    ev.lines = [x for x in lab.lines("evict", "spawn", "exited")][:16]
    ev.notes = summary.findings + [
        f"children alive by the router log's line order (spawn +1, exited -1): peak {log['peak_children_log']}, "
        f"{ev.figures['spawns_over_cap']} spawn line(s) logged before the victim's 'exited' line. That line comes "
        "from the child's monitor thread (`run:`) and can be written after the loader thread was already woken "
        "by the status change, so line order is not proof of spawn order (the router's own timestamps put the "
        "victim's exit line within a millisecond after the spawn line); the /proc sampling (peak_children) "
        "is the process count",
        f"LRU replay: {ev.figures['lru_mismatches']} of {ev.figures['lru_judged']} judged evictions did not pick "
        "the model the harness's replay of the router's own last_used stamps (its spawn and proxy lines, on the "
        "router's clock) expected; evictions it cannot judge (a request ending within 25 ms of the eviction) are "
        "left out. Which models the router counted busy is inferred from client times, so this figure is not a "
        "check of the victim rule (router-busy-not-evicted and router-victim-lru are)"]
    return ev


def scheduler_evictions(events: pd.DataFrame) -> int:
    """Children the router's scheduler stopped to make room.  Builds log it differently: 11434
    "evicting idle LRU ... for a queued request" (``evict``); 10327 "went idle, giving up its slot"
    and "evicting idle LRU ... to make room", several lines for one child, or only "unload: stopping
    model instance"; 9093 "removing LRU" then "unload: stopping".  With the timeline (``model``,
    ``t_s``) each evicted child counts once (the swap analysis's rules); without it, the larger of
    the eviction lines and the "unload: stopping" lines.  Only for scenarios where lbench never
    unloads a model itself."""
    if events.empty:
        return 0
    if {"model", "t_s"} <= set(events.columns):
        from harness.analysis.swap_served import with_inferred_evictions, with_repeated_evictions_marked

        return int(with_repeated_evictions_marked(with_inferred_evictions(events))["kind"].eq("evict").sum())
    evict_lines = int((events["kind"] == "evict").sum())
    unload_stops = int(((events["kind"] == "stop_sent")
                        & events["text"].astype(str).str.contains("unload: stopping model instance")).sum())
    return max(evict_lines, unload_stops)


def same_model_burst(ctx: Context, p: dict) -> Evidence:
    """models_max 1: load A, then K concurrent requests for B: one queue entry, one spawn of B."""
    models = ctx.router_models(p["models"])
    a, b = models[0].name, models[1].name
    k = int(p.get("k", 4))
    ev = Evidence()
    with ctx.lab(models, models_max=1) as lab:
        lab.request(a)
        threads = [lab.request_in_background(b) for _ in range(k)]
        for t in threads:
            t.join(60)
        time.sleep(0.2)
        evs = lab.event_frame()
        _save(lab, ev)
    b_events = evs[evs["model"] == b]
    queued_b, joined_b = int((b_events["kind"] == "queued").sum()), int((b_events["kind"] == "joined").sum())
    ev.figures.update(k=k, spawns_b=int((b_events["kind"] == "spawn").sum()), queued_b=queued_b, joined_b=joined_b,
                      proxied_b=int((b_events["kind"] == "proxy").sum()),
                      ok_b=sum(1 for r in lab.replies if r.model == b and r.status == 200))
    # "one load for all of them" is about routing: every request reached B's one child (proxied_b == k).
    # What the child answered is its own business: build 10729's child failed one raw /completion of the
    # random-weight model with 500 "output does not match the expected Content-only format".
    failed = [r for r in lab.replies if r.model == b and r.status != 200]
    if failed:
        ev.notes.append(f"{len(failed)} of {k} requests for {b} got no 200 (status {failed[0].status}: "
                        f"{(failed[0].body or failed[0].error or '')[:160]}); not a routing figure")
    ev.figures["entries_for_b"] = queued_b
    # Requests that reach the router after B's load has begun wait for the loading model, not
    # in the queue: only those that found B queued ("queued" or "joined" lines) test the sharing.
    ev.figures["queue_hits_b"] = queued_b + joined_b
    ev.figures["queue_hits_b_minus_1"] = queued_b + joined_b - 1
    ev.figures["after_load_began_b"] = k - queued_b - joined_b
    ev.lines = [x for x in lab.lines("queued", "joined", "spawn") if f"name={b}" in x or f"model {b}" in x][:10]
    # queued_b == 0: no queue entry at all (older routers have no queue): the checks say contradicted
    if queued_b >= 1 and queued_b + joined_b < 2:
        raise Inconclusive(f"only {queued_b + joined_b} of the {k} requests for {b} reached the router while its "
                           "entry was queued (the others came after its load began), so no two could share an "
                           "entry; rerun on a quieter machine or raise k")
    return ev


def busy_victim(ctx: Context, p: dict) -> Evidence:
    """models_max 2: A busy with a long request that started before B's last use, so A is the
    least recently used; C then needs a slot.  The router must skip busy A and evict B."""
    models = ctx.router_models(p["models"])
    a, b, c = (m.name for m in models[:3])
    ev = Evidence()
    with ctx.lab(models, models_max=2, ctx_size=int(p.get("ctx_size", 4096))) as lab:
        lab.request(a)
        lab.request(b)
        long_thread = _long_request_busy(lab, a, int(p.get("n_predict", 4000)))
        lab.request(b)  # B is now the most recently used
        lab.request(c)
        a_still_busy = long_thread.is_alive()
        long_thread.join(120)
        evict = lab.wait_for("evict", timeout=1)
        _save(lab, ev)
    if not a_still_busy:
        raise Inconclusive("the long request to A finished before C was sent; raise n_predict")
    ev.figures.update(victim=evict.model if evict else None, busy_model=a, lru_if_busy_ignored=a, expected=b,
                      a_busy_when_c_sent=a_still_busy)
    ev.lines = lab.lines("proxy", "evict", "spawn")[:12]
    return ev


def limit_reached(ctx: Context, p: dict) -> Evidence:
    """models_max 1, the only resident model busy: POST /models/load of another model."""
    models = ctx.router_models(p["models"])
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.get("ctx_size", 4096))) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 4000)
        reply = lab.post("/models/load", b)
        busy = long_thread.is_alive()
        long_thread.join(120)
        _save(lab, ev)
    if not busy:
        raise Inconclusive("A's long request ended before the load was answered")
    ev.figures.update(load_status=reply.status, load_body=reply.body[:200],
                      says_limit_reached="model limit reached" in reply.body, load_ms=round(reply.latency_ms, 1))
    ev.lines = [f"POST /models/load {b} -> {reply.status} {reply.body[:160]}"]
    return ev


def waiter_recheck(ctx: Context, p: dict) -> Evidence:
    """models_max 1: B waits while A is busy; how long after A goes idle does B's swap start?"""
    models = ctx.router_models(p["models"])
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.get("ctx_size", 4096))) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 4000)
        b_thread = lab.request_in_background(b)
        queued = lab.wait_for("queued", b, timeout=10)
        long_thread.join(120)
        b_thread.join(120)
        _save(lab, ev)
    long_n = int(p.get("n_predict", 4000))
    a_reply = next((r for r in lab.replies if r.model == a and r.n_predict == long_n), None)
    if a_reply is None:
        raise Inconclusive("the long request to A left no reply")
    t_a_done = lab.rel(a_reply.t_done)
    evict = next((e for e in lab.events if e.kind in ("evict", "stop_sent") and e.model == a), None)
    if queued is None or evict is None:
        raise Inconclusive("B never queued or A was never evicted")
    ev.figures.update(b_queued=True, a_busy_s=round(a_reply.latency_ms / 1000, 3),
                      evict_after_a_idle_ms=round((lab.rel(evict.t) - t_a_done) * 1000, 1),
                      b_ok=any(r.model == b and r.status == 200 for r in lab.replies))
    ev.lines = lab.lines("queued", "evict", "spawn")[:10]
    return ev


def startup_exceeds(ctx: Context, p: dict) -> Evidence:
    """More load-on-startup models than models_max: the router must refuse to start."""
    n = int(p.get("n_models", 3))
    cap = int(p.get("models_max", 2))
    refs = list(p.get("models", ["tiny-q8"] * n))
    models = ctx.router_models(refs, **{str(i): {"preset": {"load-on-startup": "true"}} for i in range(len(refs))})
    ev = Evidence()
    try:
        with ctx.lab(models, models_max=cap):
            started = True
    except EngineError as exc:
        started = False
        ev.lines = [line for line in str(exc).splitlines() if "exceeds" in line or "error" in line.lower()][:6]
    log = (ctx.claim_dir / "logs" / "router.stderr.log")
    text = log.read_text(errors="replace") if log.exists() else ""
    expected = f"number of models to load on startup ({len(refs)}) exceeds models_max ({cap})"
    ev.figures.update(router_started=started, message_found=expected in text, expected_message=expected)
    if expected in text:
        ev.lines = [line.strip() for line in text.splitlines() if "exceeds models_max" in line][:3]
    return ev


def sleeping_slot(ctx: Context, p: dict) -> Evidence:
    """models_max 1 and --sleep-idle-seconds: a sleeping A still holds the only slot."""
    models = ctx.router_models(p["models"])
    a, b = models[0].name, models[1].name
    sleep_s = int(p.get("sleep_idle_seconds", 1))
    ev = Evidence()
    with ctx.lab(models, models_max=1, sleep_idle_seconds=sleep_s) as lab:
        lab.request(a)
        slept = lab.wait_for("status:sleeping", a, timeout=sleep_s + 10)
        if slept is None:
            raise Inconclusive(f"{a} never reported sleeping within {sleep_s + 10} s")
        t_b = lab.now()
        lab.request(b)
        time.sleep(0.2)
        evs = lab.event_frame()
        _save(lab, ev)
    after = evs[evs["t_s"] >= t_b]
    evict_a = after[(after["kind"].isin(["evict", "stop_sent"])) & (after["model"] == a)]
    spawn_b = after[(after["kind"] == "spawn") & (after["model"] == b)]
    exit_a = after[(after["kind"] == "status:unloaded") & (after["model"] == a)]
    ev.figures.update(a_slept=True, a_evicted_for_b=not evict_a.empty,
                      b_spawned_after_a_exited=bool(not spawn_b.empty and not exit_a.empty
                                                    and spawn_b["t_s"].iloc[0] >= exit_a["t_s"].iloc[0]),
                      models_max=1)
    ev.lines = lab.lines("status:sleeping", "evict", "stop_sent", "status:unloaded", "spawn")[:10]
    return ev


def unload_while_loading(ctx: Context, p: dict) -> Evidence:
    """Freeze a child while it is LOADING, then unload it: the router must SIGKILL it at once."""
    models = ctx.router_models(p["models"])
    a = models[0].name
    ev = Evidence()
    with ctx.lab(models, models_max=2) as lab:
        lab.post("/models/load", a)
        pid = lab.child_pid(a, timeout=10)
        if pid is None:
            raise Inconclusive("the child never appeared")
        lab.freeze(pid)
        lab.sleep(0.3)
        loaded = [e for e in lab.events if e.kind == "status:loaded" and e.model == a]
        if loaded:
            lab.thaw(pid)
            raise Inconclusive(f"{a} finished loading before it could be frozen; use a bigger model")
        t_unload = lab.now()
        lab.post("/models/unload", a)
        exited = lab.wait_for("exited", a, timeout=30, after=t_unload)
        lab.thaw(pid)
        _save(lab, ev)
    kill_line = any(e.kind == "kill_loading" and e.model == a for e in lab.events)
    ev.figures.update(force_kill_logged=kill_line,
                      unload_to_exit_ms=round((lab.rel(exited.t) - t_unload) * 1000, 1) if exited else None,
                      exit_status=int(exited.detail["status"]) if exited else None)
    ev.lines = lab.lines("stop_sent", "kill_loading", "exited")[:6]
    return ev


def stop_timeout(ctx: Context, p: dict) -> Evidence:
    """Freeze a loaded child (SIGSTOP), unload it: force-kill after the stop-timeout."""
    configured = p.get("stop_timeout_s")
    models = ctx.router_models(p["models"], **({"0": {"stop_timeout_s": configured}} if configured else {}))
    a = models[0].name
    ev = Evidence()
    with ctx.lab(models, models_max=2) as lab:
        lab.request(a)
        pid = lab.child_pid(a)
        if pid is None:
            raise Inconclusive("could not find the child")
        lab.freeze(pid)
        t_unload = lab.now()
        lab.post("/models/unload", a)
        exited = lab.wait_for("exited", a, timeout=(configured or 10) + 20, after=t_unload)
        lab.thaw(pid)
        _save(lab, ev)
    ev.figures.update(configured_s=configured if configured else 10, preset_key_set=bool(configured),
                      timeout_kill_logged=any(e.kind == "kill_timeout" and e.model == a for e in lab.events),
                      unload_to_exit_s=round(lab.rel(exited.t) - t_unload, 3) if exited else None)
    if ev.figures["unload_to_exit_s"] is not None:
        ev.figures["error_s"] = round(abs(ev.figures["unload_to_exit_s"] - ev.figures["configured_s"]), 3)
    ev.lines = lab.lines("stop_sent", "kill_timeout", "exited")[:6]
    return ev


def cancel_waiting(ctx: Context, p: dict) -> Evidence:
    """models_max 1, A busy: B's client gives up while waiting; then C waits.  B must never be
    loaded and C must get the slot when A goes idle."""
    models = ctx.router_models(p["models"])
    a, b, c = (m.name for m in models[:3])
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.get("ctx_size", 4096))) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 6000)
        b_reply = lab.request(b, timeout=float(p.get("client_timeout_s", 0.3)))
        c_thread = lab.request_in_background(c)
        busy = long_thread.is_alive()
        long_thread.join(120)
        c_thread.join(120)
        time.sleep(0.5)
        _save(lab, ev)
    if not busy:
        raise Inconclusive("A finished before B gave up; raise n_predict")
    spawned = {e.model for e in lab.events if e.kind == "spawn"}
    evict_a = next((e for e in lab.events if e.kind in ("evict", "stop_sent") and e.model == a), None)
    spawn_c = next((e for e in lab.events if e.kind == "spawn" and e.model == c), None)
    ev.figures["c_took_a_slot"] = bool(evict_a and spawn_c and spawn_c.t >= evict_a.t)
    ev.figures.update(b_client_gave_up=b_reply.error is not None, b_spawned=b in spawned, c_spawned=c in spawned,
                      c_ok=any(r.model == c and r.status == 200 for r in lab.replies),
                      cancel_logged=any(f"cancelled while waiting for model name={b}" in e.text for e in lab.events))
    cancel = next((e for e in lab.events if f"cancelled while waiting for model name={b}" in e.text), None)
    if cancel is not None and b_reply.error is not None:
        # the router notices the client left on its next poll (the seed: every 200 ms)
        ev.figures["cancel_after_client_left_ms"] = round((cancel.t - b_reply.t_done) * 1000, 1)
    ev.lines = lab.lines("queued", "cancelled", "evict", "spawn")[:10]
    return ev


def env_models_max(ctx: Context, p: dict) -> Evidence:
    """Cap from LLAMA_ARG_MODELS_MAX only; what the children's environment holds."""
    models = ctx.router_models(p["models"])
    names = [m.name for m in models]
    ev = Evidence()
    env_set = {"LLAMA_ARG_MODELS_MAX": str(p.get("value", 1)), **{k: str(v) for k, v in p.get("reserved", {}).items()}}
    with ctx.lab(models, models_max=None, extra_env=env_set) as lab:
        lab.request(names[0])
        pid = lab.child_pid(names[0])
        if pid is None:
            raise Inconclusive(f"the child serving {names[0]} was not found within 10 s")
        env = lab.environ(pid)
        for name in names[1:] + names[:1]:
            lab.request(name)
        time.sleep(0.2)
        _save(lab, ev)
    ev.figures.update(env_value=int(p.get("value", 1)), child_sees_models_max_var="LLAMA_ARG_MODELS_MAX" in env,
                      child_sees_router_port="LLAMA_SERVER_ROUTER_PORT" in env,
                      router_port_matches=env.get("LLAMA_SERVER_ROUTER_PORT") == str(lab.router.port),
                      reserved_inherited=all(env.get(k) == v for k, v in p.get("reserved", {}).items()),
                      peak_children_log=children_from_log(lab.events)["peak_children_log"])
    ev.lines = [f"child environment: LLAMA_ARG_MODELS_MAX={env.get('LLAMA_ARG_MODELS_MAX', '(absent)')}, "
                f"LLAMA_SERVER_ROUTER_PORT={env.get('LLAMA_SERVER_ROUTER_PORT', '(absent)')}"]
    return ev


def ini_models_max(ctx: Context, p: dict) -> Evidence:
    """Cap given only in the preset's [*] section."""
    models = ctx.router_models(p["models"])
    names = [m.name for m in models]
    ev = Evidence()
    try:
        with ctx.lab(models, models_max=None, preset_global={"models-max": str(p.get("value", 1))}) as lab:
            for name in names + names[:1]:
                lab.request(name)
            time.sleep(0.2)
            _save(lab, ev)
        ev.figures["router_started"] = True
    except EngineError as exc:
        ev.figures.update(router_started=False, peak_children=None)
        ev.lines = str(exc).splitlines()[-5:]
    ev.figures.update(ini_value=int(p.get("value", 1)), n_models=len(models))
    return ev


def default_cap(ctx: Context, p: dict) -> Evidence:
    """No --models-max on the command line, optionally LLAMA_ARG_MODELS_MAX: load every model one
    after the other and count the children from the router log (exact) and /proc."""
    models = ctx.router_models(p["models"])
    env = {"LLAMA_ARG_MODELS_MAX": str(p["env_value"])} if "env_value" in p else {}
    ev = Evidence()
    with ctx.lab(models, models_max=None, extra_env=env) as lab:
        for m in models:
            lab.request(m.name)
        lab.sleep(0.3)
        _save(lab, ev)
    log = children_from_log(lab.events)
    ev.figures.update(n_models=len(models), peak_children_log=log["peak_children_log"],
                      evictions=sum(1 for e in lab.events if e.kind == "evict"),
                      ok=sum(1 for r in lab.replies if r.status == 200))
    ev.lines = lab.lines("spawn", "evict", "exited")[:16]
    return ev


def fifo_order(ctx: Context, p: dict) -> Evidence:
    """models_max 1, A busy: requests for B, C, D queue in that order (one after the other);
    when A goes idle they must be loaded in arrival order."""
    models = ctx.router_models(p["models"])
    a, *rest = (m.name for m in models)
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.get("ctx_size", 4096))) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 4000)
        threads = []
        for name in rest:
            after = lab.now()
            threads.append(lab.request_in_background(name))
            if lab.wait_for("queued", name, timeout=10, after=after) is None:
                raise Inconclusive(f"the request for {name} was never queued")
        busy = long_thread.is_alive()
        long_thread.join(180)
        for t in threads:
            t.join(180)
        _save(lab, ev)
    if not busy:
        raise Inconclusive("A finished before every request was queued; raise n_predict")
    queued = [e.model for e in lab.events if e.kind == "queued" and e.model in rest]
    spawned = [e.model for e in lab.events if e.kind == "spawn" and e.model in rest]
    ev.figures.update(queue_order=",".join(queued), spawn_order=",".join(spawned),
                      fifo=queued == spawned and len(spawned) == len(rest),
                      ok=sum(1 for r in lab.replies if r.model in rest and r.status == 200), n_waiting=len(rest))
    ev.lines = lab.lines("queued", "claim", "evict", "spawn", "exited")[:20]
    return ev


def stopping_counts(ctx: Context, p: dict) -> Evidence:
    """models_max 1: A loaded and frozen (SIGSTOP) so it cannot exit; a request for B must wait
    until A exits (force-killed after stop-timeout): a stopping model still counts as running, and
    a hung child blocks every load until the stop timeout."""
    st = float(p.get("stop_timeout_s", 3))
    models = ctx.router_models(p["models"], **{"0": {"stop_timeout_s": int(st)}})
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1) as lab:
        lab.request(a)
        pid = lab.child_pid(a)
        if pid is None:
            raise Inconclusive("could not find A's child")
        lab.freeze(pid)
        t_b = lab.now()
        reply = lab.request(b, timeout=st + 60)
        lab.thaw(pid)
        _save(lab, ev)
    exit_a = next((e for e in lab.events if e.kind == "exited" and e.model == a and lab.rel(e.t) >= t_b), None)
    spawn_b = next((e for e in lab.events if e.kind == "spawn" and e.model == b), None)
    if exit_a is None or spawn_b is None:
        raise Inconclusive("A never exited or B never spawned")
    ev.figures.update(stop_timeout_s=st, b_ok=reply.status == 200,
                      b_spawn_after_a_exit=spawn_b.t >= exit_a.t,
                      b_wait_s=round(lab.rel(spawn_b.t) - t_b, 3),
                      kill_timeout_logged=any(e.kind == "kill_timeout" and e.model == a for e in lab.events),
                      peak_children_log=children_from_log(lab.events)["peak_children_log"])
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_timeout", "exited", "spawn")[:12]
    return ev


def loading_counts(ctx: Context, p: dict) -> Evidence:
    """models_max 1: A's child frozen (SIGSTOP) while LOADING; a request for B must neither spawn B
    nor evict A while A is loading (LOADING counts as running, a loading model is never a victim).
    Then A is thawed: B is served after A finishes loading and is evicted."""
    models = ctx.router_models(p["models"])
    a, b = models[0].name, models[1].name
    hold_s = float(p.get("hold_s", 3))
    ev = Evidence()
    with ctx.lab(models, models_max=1) as lab:
        lab.post("/models/load", a)
        pid = lab.child_pid(a, timeout=10)
        if pid is None:
            raise Inconclusive("A's child never appeared")
        lab.freeze(pid)
        lab.sleep(0.3)
        if any(e.kind == "status:loaded" and e.model == a for e in lab.events):
            lab.thaw(pid)
            raise Inconclusive(f"{a} finished loading before it could be frozen; use a bigger model")
        t_b = lab.now()
        b_thread = lab.request_in_background(b, timeout=hold_s + 120)
        lab.sleep(hold_s)
        during = [e for e in lab.events if lab.rel(e.t) >= t_b and e.model in (a, b)
                  and e.kind in ("spawn", "evict", "stop_sent", "kill_loading")]
        t_thaw = lab.now()
        lab.thaw(pid)
        b_thread.join(hold_s + 120)
        _save(lab, ev)
    spawn_b = next((e for e in lab.events if e.kind == "spawn" and e.model == b), None)
    ev.figures.update(hold_s=hold_s, actions_while_a_loading=len(during),
                      b_spawned_while_a_loading=any(e.kind == "spawn" and e.model == b for e in during),
                      a_evicted_while_loading=any(e.model == a for e in during),
                      b_spawned_after_thaw=bool(spawn_b and lab.rel(spawn_b.t) >= t_thaw),
                      b_ok=any(r.model == b and r.status == 200 for r in lab.replies))
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_loading", "status:loaded", "exited", "spawn")[:14]
    return ev


SCENARIOS: dict[str, Callable[[Context, dict], Evidence]] = {
    "storm": storm, "same-model-burst": same_model_burst, "busy-victim": busy_victim,
    "limit-reached": limit_reached, "waiter-recheck": waiter_recheck, "startup-exceeds": startup_exceeds,
    "sleeping-slot": sleeping_slot, "unload-while-loading": unload_while_loading, "stop-timeout": stop_timeout,
    "cancel-waiting": cancel_waiting, "env-models-max": env_models_max, "ini-models-max": ini_models_max,
    "default-cap": default_cap, "fifo-order": fifo_order, "stopping-counts": stopping_counts,
    "loading-counts": loading_counts,
}

import harness.repro.idle_scenarios  # noqa: E402,F401  (registers the idle equivalence scenario)
import harness.repro.ollama_scenarios  # noqa: E402,F401  (registers the Ollama and Metal scenarios)
import harness.repro.victim_scenarios  # noqa: E402,F401  (registers the scheduler's victim-rule scenarios)
import harness.repro.order_scenarios  # noqa: E402,F401  (registers the exit-before-spawn scenario)

__all__ = ["SCENARIOS", "Context", "Evidence", "Inconclusive"]
