"""The router scenarios: scripted situations that put the real llama-server router where a
claim about it can be seen (the swap storm, the queue, the victim rules' simple cases, the
cap and its env/INI forms, stop-timeout, startup models, cancellation).

Each is ``(Context, <its Params>) -> Evidence`` (harness.repro.base); ``SCENARIOS`` below maps
the names the specs use to (function, parameter class) for harness.repro.registry.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field

import pandas as pd

from harness.analysis.swap import summarize_frames
from harness.errors import EngineError
from harness.repro.base import (Context, Evidence, Inconclusive, Params, RouterParams, children_from_log,
                                loaded_and_busy, long_request_busy, save_evidence, scheduler_evictions,
                                spawns_over_cap, write_evidence_table)
from harness.engines.prompts import SWAP_PROMPT
from harness.repro.lab import Lab
from harness.workloads.swap import Pattern, waves

STORM_PROMPT = SWAP_PROMPT  # the storm driver's prompt (harness/engines/prompts.py)

_save = save_evidence
_long_request_busy = long_request_busy
_loaded_and_busy = loaded_and_busy


# ---- scenarios ------------------------------------------------------------------

def wave_line(lab: Lab, wave: list[str]) -> str:
    """One storm wave for ``recipe.sh``: its requests sent together, every body a quoted word; the
    next wave starts when they are done (``wait_jobs``: every job but the router's)."""
    return " & ".join(
        f"curl -sS -o /dev/null -H 'Content-Type: application/json' -d "
        f"{shlex.quote(json.dumps(lab.router.request_body(m, STORM_PROMPT, 1)))} "
        f"\"http://127.0.0.1:$PORT\"{shlex.quote(lab.router.request_path)}" for m in wave) + " & wait_jobs"


def storm(ctx: Context, p: StormParams) -> Evidence:
    """A swap storm (pattern over models under a cap); figures from the swap analysis."""
    models = ctx.router_models(p.models)
    names = [m.name for m in models]
    pattern = Pattern(p.pattern, p.zipf_s, p.burst_k).validate(len(names))
    plan = waves(pattern, names, int(p.requests), int(p.seed))
    rows: list[dict] = []
    ev = Evidence()
    with ctx.lab(models, models_max=p.models_max, sleep_idle_seconds=p.sleep_idle_seconds, evidence=ev) as lab:
        lab.note(f"the request plan: {len(plan)} waves, at most {int(p.concurrency)} in flight; "
                "each wave's requests are sent together")
        for wave in plan:
            lab.actions.append(wave_line(lab, wave))
        # the storm driver and request rows of `lbench swap`: resident_at_send comes from /models/sse
        lab.session.drive(plan, concurrency=int(p.concurrency), n_predict=1, prompt=STORM_PROMPT,
                          emit=rows.append)
        time.sleep(0.2)
        events = lab.event_frame()
        memory = lab.memory_frame()
    lab.given_figure("models_max", int(p.models_max))
    lab.given_figure("n_models", len(models))
    # lbench never unloads a model in a storm, so every child that exits before the router stops was evicted
    if int(p.models_max) > 0:
        lab.figure("peak_rss_over_cap_children",
                   f"awk -v c={int(p.models_max)} '$2 > t {{t = $2}} $3 > r {{r = $3}} $4 > m {{m = $4}} "
                   "END {if (m > 0) printf \"%.3f\\n\", t / (c * m + r)}' \"$WORK/children.txt\"",
                   "the tree's peak RSS over (models_max x the largest child RSS seen + the router's), from ps "
                   "every 20 ms (lbench reads /proc/<pid>/statm at 100 Hz: the same resident pages, sampled "
                   "half as often, so a short peak can be missed)")
    lab.figure("evictions", lab.sh_log_count("exited"), "children that exited before the script stopped the "
               "router (the script never unloads one, so each was evicted)")
    requests = pd.DataFrame(rows)
    write_evidence_table(requests, lab.run_dir, "requests")
    summary = summarize_frames(requests, events, memory, models_max=int(p.models_max),
                               model_sizes=[m.path.stat().st_size for m in models])
    f = summary.figures
    ev.figures.update(models_max=int(p.models_max), n_models=len(models), requests=len(rows),
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


def same_model_burst(ctx: Context, p: BurstParams) -> Evidence:
    """models_max 1: load A, then K concurrent requests for B: one queue entry, one spawn of B."""
    models = ctx.router_models(p.models)
    a, b = models[0].name, models[1].name
    k = int(p.k)
    ev = Evidence()
    with ctx.lab(models, models_max=1, evidence=ev) as lab:
        lab.request(a)
        threads = [lab.request_in_background(b) for _ in range(k)]
        for t in threads:
            t.join(60)
        time.sleep(0.2)
        evs = lab.event_frame()
    lab.given_figure("k", k)
    for figure, kind in (("spawns_b", "spawn"), ("queued_b", "queued"), ("joined_b", "joined"), ("proxied_b", "proxy")):
        lab.figure(figure, lab.sh_log_count(kind, b), f"router log lines: {kind} for {b}")
    lab.figure("queue_hits_b_minus_1", f"echo $(( $({lab.sh_log_count('queued', b)}) + "
               f"$({lab.sh_log_count('joined', b)}) - 1 ))", "queued + joined lines for B, minus one")
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


def busy_victim(ctx: Context, p: BusyParams) -> Evidence:
    """models_max 2: A busy with a long request that started before B's last use, so A is the
    least recently used; C then needs a slot.  The router must skip busy A and evict B."""
    models = ctx.router_models(p.models)
    a, b, c = (m.name for m in models[:3])
    ev = Evidence()
    with ctx.lab(models, models_max=2, ctx_size=int(p.ctx_size), evidence=ev) as lab:
        lab.request(a)
        lab.request(b)
        long_thread = _long_request_busy(lab, a, int(p.get("n_predict", 4000)))
        lab.request(b)  # B is now the most recently used
        lab.request(c)
        a_still_busy = long_thread.is_alive()
        long_thread.join(120)
        evict = lab.wait_for("evict", timeout=1)
    if not a_still_busy:
        raise Inconclusive("the long request to A finished before C was sent; raise n_predict")
    lab.figure("victim", lab.sh_log_first_evicted(), "the model the router log's first eviction line names")
    lab.given_figure("expected", b)
    ev.figures.update(victim=evict.model if evict else None, busy_model=a, lru_if_busy_ignored=a, expected=b,
                      a_busy_when_c_sent=a_still_busy)
    ev.lines = lab.lines("proxy", "evict", "spawn")[:12]
    return ev


def limit_reached(ctx: Context, p: BusyParams) -> Evidence:
    """models_max 1, the only resident model busy: POST /models/load of another model."""
    models = ctx.router_models(p.models)
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.ctx_size), evidence=ev) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 4000)
        reply = lab.post("/models/load", b)
        busy = long_thread.is_alive()
        long_thread.join(120)
    if not busy:
        raise Inconclusive("A's long request ended before the load was answered")
    lab.figure("says_limit_reached", lab.sh_reply_has(reply, "model limit reached"),
               "the answer to POST /models/load says 'model limit reached'")
    lab.figure("load_status", f"cat \"$WORK/reply-{reply.sh_n}.status\"", "HTTP status of POST /models/load")
    ev.figures.update(load_status=reply.status, load_body=reply.body[:200],
                      says_limit_reached="model limit reached" in reply.body, load_ms=round(reply.latency_ms, 1))
    ev.lines = [f"POST /models/load {b} -> {reply.status} {reply.body[:160]}"]
    return ev


def waiter_recheck(ctx: Context, p: BusyParams) -> Evidence:
    """models_max 1: B waits while A is busy; how long after A goes idle does B's swap start?"""
    models = ctx.router_models(p.models)
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.ctx_size), evidence=ev) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 4000)
        lab.watch("evict_a", ("evict", "stop_sent"), a, 180)
        b_thread = lab.request_in_background(b)
        queued = lab.wait_for("queued", b, timeout=10)
        long_thread.join(120)
        b_thread.join(120)
    long_n = int(p.get("n_predict", 4000))
    a_reply = next((r for r in lab.replies if r.model == a and r.n_predict == long_n), None)
    if a_reply is None:
        raise Inconclusive("the long request to A left no reply")
    t_a_done = lab.rel(a_reply.t_done)
    evict = next((e for e in lab.events if e.kind in ("evict", "stop_sent") and e.model == a), None)
    if queued is None or evict is None:
        raise Inconclusive("B never queued or A was never evicted")
    lab.figure("evict_after_a_idle_ms", lab.sh_ms_from_reply_end(a_reply, "evict_a"),
               f"from the end of {a}'s long request (curl returned) to {a}'s eviction line (the log polled every 20 ms)")
    lab.figure("b_ok", lab.sh_flag(f'[ "$({lab.sh_ok(b)})" -gt 0 ]'), f"a request for {b} got HTTP 200")
    ev.figures.update(b_queued=True, a_busy_s=round(a_reply.latency_ms / 1000, 3),
                      evict_after_a_idle_ms=round((lab.rel(evict.t) - t_a_done) * 1000, 1),
                      b_ok=any(r.model == b and r.status == 200 for r in lab.replies))
    ev.lines = lab.lines("queued", "evict", "spawn")[:10]
    return ev


def startup_exceeds(ctx: Context, p: StartupExceedsParams) -> Evidence:
    """More load-on-startup models than models_max: the router must refuse to start."""
    n = int(p.n_models)
    cap = int(p.models_max)
    refs = list(p.get("models", ["tiny-q8"] * n))
    models = ctx.router_models(refs, **{str(i): {"preset": {"load-on-startup": "true"}} for i in range(len(refs))})
    ev = Evidence()
    try:
        with ctx.lab(models, models_max=cap, start_may_fail=True):
            started = True
    except EngineError as exc:
        started = False
        ev.lines = [line for line in str(exc).splitlines() if "exceeds" in line or "error" in line.lower()][:6]
    log = (ctx.claim_dir / "logs" / "router.stderr.log")
    text = log.read_text(errors="replace") if log.exists() else ""
    expected = f"number of models to load on startup ({len(refs)}) exceeds models_max ({cap})"
    lab = ctx.labs[-1]
    lab.figure("router_started", 'echo "$STARTED"', "the router answered GET /health (polled for up to 2 minutes "
               "while its process lived)")
    lab.figure("message_found", lab.sh_flag(f"grep -qF -- {shlex.quote(expected)} \"$WORK/router.stderr.log\""),
               f"the router log says: {expected}")
    ev.figures.update(router_started=started, message_found=expected in text, expected_message=expected)
    if expected in text:
        ev.lines = [line.strip() for line in text.splitlines() if "exceeds models_max" in line][:3]
    return ev


def _loaded_count(lab: Lab, names: list[str], timeout: float) -> int:
    """How many of ``names`` GET /models lists as loaded, polled until all are or ``timeout``
    (a startup load can finish before /models/sse is subscribed, so its event may be missed)."""
    deadline = time.monotonic() + timeout
    lab.act(_poll_loaded_sh(names, timeout))
    while True:
        data = lab.http.get("/models").json().get("data", [])
        n = sum(1 for m in data if m.get("id") in names and (m.get("status") or {}).get("value") == "loaded")
        if n == len(names) or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def _poll_loaded_sh(names: list[str], timeout: float) -> str:
    """The recipe's poll of GET /models (into ``$WORK/models.json``) until every one of ``names``
    is listed as loaded or ``timeout`` seconds have passed."""
    words = " ".join(shlex.quote(n) for n in names)
    return (f"for _ in $(seq {max(1, int(timeout * 10))}); do curl -sS \"http://127.0.0.1:$PORT/models\" > "
            f"\"$WORK/models.json\"; [ \"$(models_loaded {words})\" -ge {len(names)} ] && break; sleep 0.1; done")


def startup_load(ctx: Context, p: StartupLoadParams) -> Evidence:
    """Load-on-startup models under a cap that fits them (the control: the router starts and
    loads them, through load_startup_models) and under ``models_max`` (0 = no cap by the
    documents): does the router start, and does it load them?"""
    refs = list(p.models)
    presets = {str(i): {"preset": {"load-on-startup": "true"}} for i in range(len(refs))}
    ev = Evidence()

    def attempt(cap: int, tag: str) -> tuple[bool, int, str]:
        models = ctx.router_models(refs, **presets)
        run_dir = ctx.claim_dir / tag
        names = [m.name for m in models]
        try:
            with ctx.lab(models, run_dir=run_dir, models_max=cap, start_may_fail=True) as lab:
                loaded = _loaded_count(lab, names, float(p.load_timeout_s))
                _save(lab, Evidence())
            started = True
        except EngineError:
            started, loaded = False, 0
            lab = ctx.labs[-1]
            lab.act(_poll_loaded_sh(names, float(p.load_timeout_s)))  # a router that starts after all is polled
        words = " ".join(shlex.quote(n) for n in names)
        what = "the control" if tag == "control" else f"models_max {cap}"
        lab.figure("control_started" if tag == "control" else "router_started", 'echo "$STARTED"',
                   f"the router answered GET /health ({what})")
        lab.figure("control_loaded" if tag == "control" else "startup_loaded", f"models_loaded {words}",
                   f"startup models GET /models lists as loaded ({what})")
        if tag == "case":
            lab.given_figure("n_startup", len(refs))
        log = run_dir / "logs" / "router.stderr.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        refused = next((line.strip() for line in text.splitlines() if "exceeds models_max" in line), "")
        return started, loaded, refused

    control_cap = int(p.get("control_models_max", len(refs)))
    c_started, c_loaded, _ = attempt(control_cap, "control")
    started, loaded, refused = attempt(int(p.models_max), "case")
    ev.figures.update(n_startup=len(refs), control_models_max=control_cap, control_started=c_started,
                      control_loaded=c_loaded, models_max=int(p.models_max), router_started=started,
                      startup_loaded=loaded, refused=bool(refused))
    ev.lines = [f"control (models_max {control_cap}): started {c_started}, {c_loaded} of {len(refs)} loaded at startup",
                f"models_max {p.models_max}: started {started}, {loaded} loaded"
                + (f"; router log: {refused}" if refused else "")]
    return ev


def sleeping_slot(ctx: Context, p: SleepParams) -> Evidence:
    """models_max 1 and --sleep-idle-seconds: a sleeping A still holds the only slot."""
    models = ctx.router_models(p.models)
    a, b = models[0].name, models[1].name
    sleep_s = int(p.sleep_idle_seconds)
    ev = Evidence()
    with ctx.lab(models, models_max=1, sleep_idle_seconds=sleep_s, evidence=ev) as lab:
        lab.request(a)
        slept = lab.wait_for("status:sleeping", a, timeout=sleep_s + 10)
        if slept is None:
            raise Inconclusive(f"{a} never reported sleeping within {sleep_s + 10} s")
        t_b = lab.now()
        lab.mark("b")
        lab.log_mark("b")
        lab.request(b)
        lab.sleep(0.2)
        evs = lab.event_frame()
    lab.figure("a_evicted_for_b",
               lab.sh_flag(f'[ "$({lab.sh_log_count_between("b", None, ("evict", "stop_sent"), a)})" -gt 0 ]'),
               f"an eviction or stop line for {a} after the request for {b}")
    lab.figure("b_spawned_after_a_exited",
               lab.sh_flag(f'u=$({lab.sh_sse_first(a, "unloaded", "b")}); l=$({lab.sh_sse_first(b, "loading", "b")}); '
                           '[ -n "$u" ] && [ -n "$l" ] && awk -v u="$u" -v l="$l" \'BEGIN {exit !(u <= l)}\''),
               f"/models/sse sent {a} unloaded before {b} loading (after the request for {b}), as lbench judges it")
    after = evs[evs["t_s"] >= t_b]
    evict_a = after[(after["kind"].isin(["evict", "stop_sent"])) & (after["model"] == a)]
    # both from /models/sse, one stream in the router's order: A's "unloaded" against B's "loading"
    # (B's spawn line against A's event compared two streams: the event can arrive after the line)
    loading_b = after[(after["kind"] == "status:loading") & (after["model"] == b)]
    exit_a = after[(after["kind"] == "status:unloaded") & (after["model"] == a)]
    ev.figures.update(a_slept=True, a_evicted_for_b=not evict_a.empty,
                      b_spawned_after_a_exited=bool(not loading_b.empty and not exit_a.empty
                                                    and loading_b["t_s"].iloc[0] >= exit_a["t_s"].iloc[0]),
                      models_max=1)
    ev.lines = lab.lines("status:sleeping", "evict", "stop_sent", "status:unloaded", "spawn")[:10]
    return ev


def unload_while_loading(ctx: Context, p: ModelsParams) -> Evidence:
    """Freeze a child while it is LOADING, then unload it: the router must SIGKILL it at once."""
    models = ctx.router_models(p.models)
    a = models[0].name
    ev = Evidence()
    with ctx.lab(models, models_max=2, evidence=ev) as lab:
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
        lab.mark("unload")
        lab.post("/models/unload", a)
        exited = lab.wait_for("exited", a, timeout=30, after=t_unload)
        lab.mark("exited")
        lab.thaw(pid)
    lab.figure("force_kill_logged", lab.sh_log_has("kill_loading", a), "the router logged the force-kill of a loading model")
    lab.figure("unload_to_exit_ms", "awk -v a=\"$T_unload\" -v b=\"$T_exited\" 'BEGIN {printf \"%.1f\\n\", (b - a) * 1000}'",
               "from the unload request to the exit line, seen by polling the log every 20 ms")
    kill_line = any(e.kind == "kill_loading" and e.model == a for e in lab.events)
    ev.figures.update(force_kill_logged=kill_line,
                      unload_to_exit_ms=round((lab.rel(exited.t) - t_unload) * 1000, 1) if exited else None,
                      exit_status=int(exited.detail["status"]) if exited else None)
    ev.lines = lab.lines("stop_sent", "kill_loading", "exited")[:6]
    return ev


def stop_timeout(ctx: Context, p: StopTimeoutParams) -> Evidence:
    """Freeze a loaded child (SIGSTOP), unload it: force-kill after the stop-timeout."""
    configured = p.stop_timeout_s
    models = ctx.router_models(p.models, **({"0": {"stop_timeout_s": configured}} if configured else {}))
    a = models[0].name
    ev = Evidence()
    with ctx.lab(models, models_max=2, evidence=ev) as lab:
        lab.request(a)
        pid = lab.child_pid(a)
        if pid is None:
            raise Inconclusive("could not find the child")
        lab.freeze(pid)
        t_unload = lab.now()
        lab.mark("unload")
        lab.post("/models/unload", a)
        exited = lab.wait_for("exited", a, timeout=(configured or 10) + 20, after=t_unload)
        lab.mark("exited")
        lab.thaw(pid)
    lab.given_figure("configured_s", configured if configured else 10)
    lab.figure("timeout_kill_logged", lab.sh_log_has("kill_timeout", a), "the router logged the force-kill after timeout")
    lab.figure("unload_to_exit_s", "awk -v a=\"$T_unload\" -v b=\"$T_exited\" 'BEGIN {printf \"%.3f\\n\", b - a}'",
               "from the unload request to the exit line, seen by polling the log every 20 ms")
    lab.figure("error_s", f"awk -v a=\"$T_unload\" -v b=\"$T_exited\" -v c={float(configured or 10):g} "
               "'BEGIN {d = b - a - c; if (d < 0) d = -d; printf \"%.3f\\n\", d}'",
               "how far the unload-to-exit time is from the configured stop timeout")
    ev.figures.update(configured_s=configured if configured else 10, preset_key_set=bool(configured),
                      timeout_kill_logged=any(e.kind == "kill_timeout" and e.model == a for e in lab.events),
                      unload_to_exit_s=round(lab.rel(exited.t) - t_unload, 3) if exited else None)
    if ev.figures["unload_to_exit_s"] is not None:
        ev.figures["error_s"] = round(abs(ev.figures["unload_to_exit_s"] - ev.figures["configured_s"]), 3)
    ev.lines = lab.lines("stop_sent", "kill_timeout", "exited")[:6]
    return ev


def cancel_waiting(ctx: Context, p: CancelParams) -> Evidence:
    """models_max 1, A busy: B's client gives up while waiting; then C waits.  B must never be
    loaded and C must get the slot when A goes idle."""
    models = ctx.router_models(p.models)
    a, b, c = (m.name for m in models[:3])
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.ctx_size), evidence=ev) as lab:
        long_thread = _loaded_and_busy(lab, a, p, 6000)
        session = p.conversation_id  # X-Conversation-Id: the router's resumable-stream sessions
        if p.waiting_get:  # B's waiting request is a GET the router proxies (proxy_get)
            b_reply = lab.get(p.waiting_get, b, timeout=float(p.client_timeout_s))
        else:
            b_reply = lab.request(b, timeout=float(p.client_timeout_s),
                                  headers={"X-Conversation-Id": str(session)} if session else None)
        c_thread = lab.request_in_background(c)
        busy = long_thread.is_alive()
        long_thread.join(120)
        c_thread.join(120)
        time.sleep(0.5)
    if not busy:
        raise Inconclusive("A finished before B gave up; raise n_predict")
    lab.figure("b_client_gave_up", lab.sh_gave_up(b_reply), "curl got no answer for B in time (status 000)")
    lab.figure("b_spawned", lab.sh_log_has("spawn", b), f"the router log has a spawn line for {b}")
    lab.figure("c_spawned", lab.sh_log_has("spawn", c), f"the router log has a spawn line for {c}")
    lab.figure("c_ok", lab.sh_flag(f'[ "$({lab.sh_ok(c)})" -gt 0 ]'), f"a request for {c} got HTTP 200")
    lab.figure("cancel_logged", lab.sh_log_has("cancelled", b), f"the router logged {b}'s cancelled wait")
    lab.figure("c_took_a_slot", lab.sh_log_before((("evict", "stop_sent"), a), ("spawn", c)),
               f"{a}'s stop line comes before {c}'s spawn line in the router log")
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


def env_models_max(ctx: Context, p: EnvCapParams) -> Evidence:
    """Cap from LLAMA_ARG_MODELS_MAX only; what the children's environment holds."""
    models = ctx.router_models(p.models)
    names = [m.name for m in models]
    ev = Evidence()
    env_set = {"LLAMA_ARG_MODELS_MAX": str(p.value), **{k: str(v) for k, v in p.reserved.items()}}
    with ctx.lab(models, models_max=None, extra_env=env_set, evidence=ev) as lab:
        lab.request(names[0])
        pid = lab.child_pid(names[0])
        if pid is None:
            raise Inconclusive(f"the child serving {names[0]} was not found within 10 s")
        env = lab.environ(pid)
        for name in names[1:] + names[:1]:
            lab.request(name)
        time.sleep(0.2)
    lab.given_figure("env_value", int(p.value))
    lab.figure("child_sees_models_max_var", lab.sh_child_env_has("^LLAMA_ARG_MODELS_MAX="),
               "the first child's environment holds LLAMA_ARG_MODELS_MAX")
    lab.figure("child_sees_router_port", lab.sh_child_env_has("^LLAMA_SERVER_ROUTER_PORT="),
               "the first child's environment holds LLAMA_SERVER_ROUTER_PORT")
    lab.figure("router_port_matches", lab.sh_flag('grep -qx "LLAMA_SERVER_ROUTER_PORT=$PORT" "$WORK/child-env.txt"'),
               "LLAMA_SERVER_ROUTER_PORT is the router's port")
    inherited = " && ".join(f"grep -qxF -- {shlex.quote(f'{k}={v}')} \"$WORK/child-env.txt\"" for k, v in p.reserved.items())
    lab.figure("reserved_inherited", lab.sh_flag(inherited or "true"), "the child holds every variable set for the router")
    ev.figures.update(env_value=int(p.value), child_sees_models_max_var="LLAMA_ARG_MODELS_MAX" in env,
                      child_sees_router_port="LLAMA_SERVER_ROUTER_PORT" in env,
                      router_port_matches=env.get("LLAMA_SERVER_ROUTER_PORT") == str(lab.router.port),
                      reserved_inherited=all(env.get(k) == v for k, v in p.reserved.items()),
                      peak_children_log=children_from_log(lab.events)["peak_children_log"])
    ev.lines = [f"child environment: LLAMA_ARG_MODELS_MAX={env.get('LLAMA_ARG_MODELS_MAX', '(absent)')}, "
                f"LLAMA_SERVER_ROUTER_PORT={env.get('LLAMA_SERVER_ROUTER_PORT', '(absent)')}"]
    return ev


def ini_models_max(ctx: Context, p: IniCapParams) -> Evidence:
    """Cap given only in the preset's [*] section."""
    models = ctx.router_models(p.models)
    names = [m.name for m in models]
    ev = Evidence()
    try:
        with ctx.lab(models, models_max=None, preset_global={"models-max": str(p.value)}, evidence=ev) as lab:
            for name in names + names[:1]:
                lab.request(name)
            time.sleep(0.2)
            lab.given_figure("ini_value", int(p.value))
            lab.given_figure("n_models", len(models))
        ev.figures["router_started"] = True
    except EngineError as exc:
        ev.figures.update(router_started=False, peak_children=None)
        ev.lines = str(exc).splitlines()[-5:]
    ev.figures.update(ini_value=int(p.value), n_models=len(models))
    return ev


def default_cap(ctx: Context, p: DefaultCapParams) -> Evidence:
    """No --models-max on the command line, optionally LLAMA_ARG_MODELS_MAX: load every model one
    after the other and count the children from the router log (exact) and /proc."""
    models = ctx.router_models(p.models)
    env = {"LLAMA_ARG_MODELS_MAX": str(p.env_value)} if p.env_value is not None else {}
    ev = Evidence()
    with ctx.lab(models, models_max=None, extra_env=env, evidence=ev) as lab:
        for m in models:
            lab.request(m.name)
        lab.sleep(0.3)
    lab.given_figure("n_models", len(models))
    lab.figure("evictions", lab.sh_log_count("evict"), "the router's eviction lines")
    lab.figure("ok", lab.sh_ok(), "requests answered with HTTP 200")
    log = children_from_log(lab.events)
    ev.figures.update(n_models=len(models), peak_children_log=log["peak_children_log"],
                      evictions=sum(1 for e in lab.events if e.kind == "evict"),
                      ok=sum(1 for r in lab.replies if r.status == 200))
    ev.lines = lab.lines("spawn", "evict", "exited")[:16]
    return ev


def fifo_order(ctx: Context, p: BusyParams) -> Evidence:
    """models_max 1, A busy: requests for B, C, D queue in that order (one after the other);
    when A goes idle they must be loaded in arrival order."""
    models = ctx.router_models(p.models)
    a, *rest = (m.name for m in models)
    ev = Evidence()
    with ctx.lab(models, models_max=1, ctx_size=int(p.ctx_size), evidence=ev) as lab:
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
    if not busy:
        raise Inconclusive("A finished before every request was queued; raise n_predict")
    lab.given_figure("n_waiting", len(rest))
    lab.figure("ok", lab.sh_ok(rest), "requests for the waiting models answered with HTTP 200")
    order = f"q=$({lab.sh_log_order('queued', rest)}); s=$({lab.sh_log_order('spawn', rest)}); "
    lab.figure("fifo", lab.sh_flag(order + f'[ -n "$s" ] && [ "$q" = "$s" ] && '
                                   f'[ "$(echo "$s" | tr , "\\n" | wc -l)" -eq {len(rest)} ]'),
               "the waiting models' spawn lines come in the order of their queued lines")
    queued = [e.model for e in lab.events if e.kind == "queued" and e.model in rest]
    spawned = [e.model for e in lab.events if e.kind == "spawn" and e.model in rest]
    ev.figures.update(queue_order=",".join(queued), spawn_order=",".join(spawned),
                      fifo=queued == spawned and len(spawned) == len(rest),
                      ok=sum(1 for r in lab.replies if r.model in rest and r.status == 200), n_waiting=len(rest))
    ev.lines = lab.lines("queued", "claim", "evict", "spawn", "exited")[:20]
    return ev


def stopping_counts(ctx: Context, p: StoppingParams) -> Evidence:
    """models_max 1: A loaded and frozen (SIGSTOP) so it cannot exit; a request for B must wait
    until A exits (force-killed after stop-timeout): a stopping model still counts as running, and
    a hung child blocks every load until the stop timeout."""
    st = float(p.stop_timeout_s)
    models = ctx.router_models(p.models, **{"0": {"stop_timeout_s": int(st)}})
    a, b = models[0].name, models[1].name
    ev = Evidence()
    with ctx.lab(models, models_max=1, evidence=ev) as lab:
        lab.request(a)
        pid = lab.child_pid(a)
        if pid is None:
            raise Inconclusive("could not find A's child")
        lab.freeze(pid)
        t_b = lab.now()
        lab.mark("b")
        lab.watch("spawn_b", "spawn", b, st + 60)
        reply = lab.request(b, timeout=st + 60)
        lab.thaw(pid)
    lab.figure("b_wait_s", lab.sh_seconds_between("b", "spawn_b"),
               f"seconds from the request for {b} to its spawn line (the log polled every 20 ms)")
    exit_a = next((e for e in lab.events if e.kind == "exited" and e.model == a and lab.rel(e.t) >= t_b), None)
    spawn_b = next((e for e in lab.events if e.kind == "spawn" and e.model == b), None)
    if exit_a is None or spawn_b is None:
        raise Inconclusive("A never exited or B never spawned")
    lab.figure("b_ok", lab.sh_flag(f"grep -qx 200 \"$WORK/reply-{reply.sh_n}.status\""), f"the request for {b} got HTTP 200")
    lab.figure("b_spawn_after_a_exit",
               lab.sh_flag(f'u=$({lab.sh_sse_first(a, "unloaded", "b")}); l=$({lab.sh_sse_first(b, "loading", "b")}); '
                           '[ -n "$u" ] && [ -n "$l" ] && awk -v u="$u" -v l="$l" \'BEGIN {exit !(u <= l)}\''),
               f"/models/sse sent {a} unloaded (its process exited) before {b} loading, after the request for {b}")
    lab.figure("kill_timeout_logged", lab.sh_log_has("kill_timeout", a), "the router logged the force-kill after timeout")
    # A's exit against B's load on the one /models/sse stream, in the router's order: the log's "exited" line
    # comes from the child's monitor thread and can follow B's spawn line (seen 1 in 3 on build 11434)
    unloaded_a = next((e for e in lab.events if e.kind == "status:unloaded" and e.model == a and lab.rel(e.t) >= t_b),
                      None)
    loading_b = next((e for e in lab.events if e.kind == "status:loading" and e.model == b and lab.rel(e.t) >= t_b),
                     None)
    ev.figures.update(stop_timeout_s=st, b_ok=reply.status == 200,
                      b_spawn_after_a_exit=bool(unloaded_a and loading_b and loading_b.t >= unloaded_a.t),
                      b_spawn_line_after_a_exit_line=spawn_b.t >= exit_a.t,
                      b_wait_s=round(lab.rel(spawn_b.t) - t_b, 3),
                      kill_timeout_logged=any(e.kind == "kill_timeout" and e.model == a for e in lab.events),
                      peak_children_log=children_from_log(lab.events)["peak_children_log"])
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_timeout", "exited", "spawn")[:12]
    return ev


def loading_counts(ctx: Context, p: HoldParams) -> Evidence:
    """models_max 1: A's child frozen (SIGSTOP) while LOADING; a request for B must neither spawn B
    nor evict A while A is loading (LOADING counts as running, a loading model is never a victim).
    Then A is thawed: B is served after A finishes loading and is evicted."""
    models = ctx.router_models(p.models)
    a, b = models[0].name, models[1].name
    hold_s = float(p.hold_s)
    ev = Evidence()
    with ctx.lab(models, models_max=1, evidence=ev) as lab:
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
        lab.log_mark("b")
        b_thread = lab.request_in_background(b, timeout=hold_s + 120)
        lab.sleep(hold_s)
        during = [e for e in lab.events if lab.rel(e.t) >= t_b and e.model in (a, b)
                  and e.kind in ("spawn", "evict", "stop_sent", "kill_loading")]
        t_thaw = lab.now()
        lab.log_mark("thaw")
        lab.thaw(pid)
        b_thread.join(hold_s + 120)
    spawn_b = next((e for e in lab.events if e.kind == "spawn" and e.model == b), None)
    lab.figure("b_ok", lab.sh_flag(f'[ "$({lab.sh_ok(b)})" -gt 0 ]'), f"a request for {b} got HTTP 200")
    lab.figure("b_spawned_while_a_loading",
               lab.sh_flag(f'[ "$({lab.sh_log_count_between("b", "thaw", "spawn", b)})" -gt 0 ]'),
               f"a spawn line for {b} between the request for {b} and the thaw of {a}")
    lab.figure("a_evicted_while_loading",
               lab.sh_flag(f'[ "$({lab.sh_log_count_between("b", "thaw", ("spawn", "evict", "stop_sent", "kill_loading"), a)})"'
                           ' -gt 0 ]'),
               f"a spawn, eviction, stop or force-kill line for {a} in that time")
    lab.figure("b_spawned_after_thaw",
               lab.sh_flag(f'[ "$({lab.sh_log_count_between("thaw", None, "spawn", b)})" -gt 0 ]'),
               f"a spawn line for {b} after the thaw")
    ev.figures.update(hold_s=hold_s, actions_while_a_loading=len(during),
                      b_spawned_while_a_loading=any(e.kind == "spawn" and e.model == b for e in during),
                      a_evicted_while_loading=any(e.model == a for e in during),
                      b_spawned_after_thaw=bool(spawn_b and lab.rel(spawn_b.t) >= t_thaw),
                      b_ok=any(r.model == b and r.status == 200 for r in lab.replies))
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_loading", "status:loaded", "exited", "spawn")[:14]
    return ev


# ---- parameters (the spec's [params]; defaults as the scenario bodies read them) ------------

@dataclass(frozen=True)
class StormParams(Params):
    models: list[str]
    models_max: int = 2
    pattern: str = "round-robin"
    zipf_s: float = 1.1
    burst_k: int = 3
    requests: int = 30
    seed: int = 0
    concurrency: int = 1
    sleep_idle_seconds: int | None = None


@dataclass(frozen=True)
class BurstParams(Params):
    models: list[str]
    k: int = 4


@dataclass(frozen=True)
class BusyParams(RouterParams):
    """A scenario that keeps a model busy with one long generation (``n_predict`` tokens)."""
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4"])


@dataclass(frozen=True)
class StartupExceedsParams(Params):
    n_models: int = 3
    models_max: int = 2
    models: list[str] | None = None  # default: n_models copies of tiny-q8


@dataclass(frozen=True)
class StartupLoadParams(Params):
    models: list[str] = field(default_factory=lambda: ["tiny-q8"])
    models_max: int = 0
    control_models_max: int | None = None  # default: one slot per startup model
    load_timeout_s: float = 60.0


@dataclass(frozen=True)
class SleepParams(Params):
    models: list[str]
    sleep_idle_seconds: int = 1


@dataclass(frozen=True)
class ModelsParams(Params):
    models: list[str]


@dataclass(frozen=True)
class StopTimeoutParams(Params):
    models: list[str]
    stop_timeout_s: int | None = None  # None: the preset key is not set (the router's default)


@dataclass(frozen=True)
class CancelParams(RouterParams):
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4", "tiny-f16"])
    client_timeout_s: float = 0.3
    conversation_id: str | None = None  # sent as X-Conversation-Id with the request that gives up
    waiting_get: str | None = None  # e.g. "/props": the request that gives up is GET <path>?model=B


@dataclass(frozen=True)
class EnvCapParams(Params):
    models: list[str]
    value: int = 1
    reserved: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IniCapParams(Params):
    models: list[str]
    value: int = 1


@dataclass(frozen=True)
class DefaultCapParams(Params):
    models: list[str]
    env_value: int | None = None  # LLAMA_ARG_MODELS_MAX, unset when absent


@dataclass(frozen=True)
class StoppingParams(Params):
    models: list[str]
    stop_timeout_s: float = 3.0


@dataclass(frozen=True)
class HoldParams(Params):
    models: list[str]
    hold_s: float = 3.0


SCENARIOS = {
    "storm": (storm, StormParams), "same-model-burst": (same_model_burst, BurstParams),
    "busy-victim": (busy_victim, BusyParams), "limit-reached": (limit_reached, BusyParams),
    "waiter-recheck": (waiter_recheck, BusyParams), "startup-exceeds": (startup_exceeds, StartupExceedsParams),
    "startup-load": (startup_load, StartupLoadParams), "sleeping-slot": (sleeping_slot, SleepParams),
    "unload-while-loading": (unload_while_loading, ModelsParams), "stop-timeout": (stop_timeout, StopTimeoutParams),
    "cancel-waiting": (cancel_waiting, CancelParams), "env-models-max": (env_models_max, EnvCapParams),
    "ini-models-max": (ini_models_max, IniCapParams), "default-cap": (default_cap, DefaultCapParams),
    "fifo-order": (fifo_order, BusyParams), "stopping-counts": (stopping_counts, StoppingParams),
    "loading-counts": (loading_counts, HoldParams),
}
