"""The router scenarios: scripted situations that put the real llama-server router where a
claim about it can be seen (the swap storm, the queue, the victim rules' simple cases, the
cap and its env/INI forms, stop-timeout, startup models, cancellation).

Each is declared with ``@router_scenario`` (harness.repro.base: the lab over the spec's models,
the steps up to ``yield`` with the router up, then the figures) or ``@scenario`` (its own
skeleton: several routers, a router that may not start).  Figures are declared once each with
``measure`` (harness/repro/figures.py): the value lbench judges and the recipe's shell for it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd

from harness.analysis.swap import summarize_frames
from harness.engines.prompts import SWAP_PROMPT
from harness.engines.router import TimelineEvent
from harness.errors import EngineError
from harness.repro.base import (Context, Evidence, Inconclusive, ModelsParams, Params, RouterParams,
                                children_from_log, found_child, freeze_while_loading, loaded_and_busy,
                                long_request_busy, measure, router_scenario, save_evidence, scenario,
                                scheduler_evictions, spawns_over_cap, write_evidence_table)
from harness.repro.figures import (PS_VS_PROC, ChildEnv, FirstEvicted, GaveUp, Given, LogBefore, LogBetween, LogCount,
                                   LogHas, Measured, OkCount, ReplyHas, ReplyStatus, SseBefore, TimeToLine, answered)
from harness.repro.lab import EVENT_WAIT_S, Lab
from harness.analysis.swap_races import ERROR_WORDS
from harness.workloads import sequence
from harness.workloads.swap import Pattern, waves

STORM_PROMPT = SWAP_PROMPT  # the storm driver's prompt (harness/engines/prompts.py)


# ---- parameters (the spec's [params]) -------------------------------------------------------

@dataclass(frozen=True)
class StormParams(ModelsParams):
    models_max: int = 2
    pattern: str = "round-robin"
    zipf_s: float = 1.1
    burst_k: int = 3
    requests: int = 30
    seed: int = 0
    concurrency: int = 1
    sleep_idle_seconds: int | None = None
    sequence: str | None = None  # a timed sequence instead of the pattern, e.g. "A@0,B@0.1" (workloads/sequence.py)


@dataclass(frozen=True)
class BurstParams(ModelsParams):
    k: int = 4


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
class SleepParams(ModelsParams):
    sleep_idle_seconds: int = 1


@dataclass(frozen=True)
class StopTimeoutParams(ModelsParams):
    stop_timeout_s: int | None = None  # None: the preset key is not set (the router's default)


@dataclass(frozen=True)
class CancelParams(RouterParams):
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4", "tiny-f16"])
    client_timeout_s: float = 0.3
    conversation_id: str | None = None  # sent as X-Conversation-Id with the request that gives up
    waiting_get: str | None = None  # e.g. "/props": the request that gives up is GET <path>?model=B


@dataclass(frozen=True)
class EnvCapParams(ModelsParams):
    value: int = 1
    reserved: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IniCapParams(ModelsParams):
    value: int = 1


@dataclass(frozen=True)
class DefaultCapParams(ModelsParams):
    env_value: int | None = None  # LLAMA_ARG_MODELS_MAX, unset when absent


@dataclass(frozen=True)
class StoppingParams(ModelsParams):
    stop_timeout_s: float = 3.0


@dataclass(frozen=True)
class HoldParams(ModelsParams):
    hold_s: float = 3.0


# ---- scenarios ------------------------------------------------------------------

@scenario("storm", StormParams)
def storm(ctx: Context, p: StormParams) -> Evidence:
    """A swap storm (pattern over models under a cap); figures from the swap analysis."""
    models = ctx.router_models(p.models)
    names = [m.name for m in models]
    offsets = None
    if p.sequence is not None:  # a timed sequence: each request at its time, as `lbench swap --sequence`
        steps = sequence.resolve(sequence.parse(p.sequence, "params.sequence"), names, "params.sequence")
        plan, offsets = [[s.model] for s in steps], [s.at_s for s in steps]
    else:
        plan = waves(Pattern(p.pattern, p.zipf_s, p.burst_k).validate(len(names)), names, p.requests, p.seed)
    rows: list[dict[str, object]] = []
    ev = Evidence()
    with ctx.lab(models, models_max=p.models_max, sleep_idle_seconds=p.sleep_idle_seconds, evidence=ev,
                 extra_env=dict(p.env)) as lab:
        if offsets is None:
            lab.note(f"the request plan: {len(plan)} waves, at most {p.concurrency} in flight; "
                     "each wave's requests are sent together")
            for wave in plan:
                lab.wave(wave, STORM_PROMPT)
        else:
            lab.note("the timed sequence: " + ", ".join(f"{w[0]}@{at:g}" for w, at in zip(plan, offsets))
                     + " (seconds after the first send; the script sends each in the background at its time)")
            lab.timed(plan, offsets, STORM_PROMPT)
        # the storm driver and request rows of `lbench swap`: resident_at_send comes from /models/sse
        lab.session.drive(plan, concurrency=p.concurrency, n_predict=1, prompt=STORM_PROMPT, emit=rows.append,
                          offsets=offsets)
        time.sleep(0.2)
        events = lab.event_frame()
        memory = lab.memory_frame()
    cap = p.models_max
    requests = pd.DataFrame(rows)
    write_evidence_table(requests, lab.run_dir, "requests")
    summary = summarize_frames(requests, events, memory, models_max=cap,
                               model_sizes=[m.path.stat().st_size for m in models])
    f = summary.figures
    max_model = max(m.path.stat().st_size for m in models)
    peak_rss = int(memory["rss_total_bytes"].max()) if not memory.empty else 0
    per_child = max((rss for smp in list(lab.samples) for rss in smp.children.values()), default=0)
    root_peak = max((smp.root_rss for smp in list(lab.samples)), default=0)
    # lbench never unloads a model in a storm, so every child that exits before the router stops was evicted
    measure(ev, lab, models_max=Given(cap), n_models=Given(len(models)),
            evictions=Measured(scheduler_evictions(events), lab.sh_log_count("exited"),
                               "children that exited before the script stopped the router (the script never "
                               "unloads one, so each was evicted)",
                               differs="lbench counts the scheduler's evictions (each evicted child once, "
                               "scheduler_evictions); the script counts the children's exit lines"))
    if cap > 0:
        measure(ev, lab, peak_rss_over_cap_children=Measured(
            round(peak_rss / (cap * per_child + root_peak), 3) if per_child else None,
            f"awk -v c={cap} '$2 > t {{t = $2}} $3 > r {{r = $3}} $4 > m {{m = $4}} "
            "END {if (m > 0) printf \"%.3f\\n\", t / (c * m + r)}' \"$WORK/children.txt\"",
            "the tree's peak RSS over (models_max x the largest child RSS seen + the router's)", differs=PS_VS_PROC))
    ev.figures.update(requests=len(rows), spawns=f.get("swaps", 0), lru_matches=f.get("lru_matches", 0),
                      lru_judged=f.get("lru_judged", 0), time_above_cap_ms=1000 * f.get("time_above_cap_s", 0.0),
                      samples=len(memory),
                      errors=int(requests["error"].notna().sum()) if not requests.empty else 0,
                      max_model_bytes=max_model, peak_rss_total_bytes=peak_rss, peak_child_rss_bytes=per_child,
                      peak_rss_over_cap_models=round(peak_rss / (cap * max_model), 3) if cap > 0 else None)
    ev.figures.setdefault("peak_rss_over_cap_children", None)
    # every request's fate by kind, and the races (harness/analysis/swap_races.py): each a figure a check can name
    by_kind = f.get("errors_by_kind", {})
    ev.figures.update({f"errors_{k}": int(by_kind.get(k, 0)) for k in ERROR_WORDS},
                      errors_other=sum(n for k, n in by_kind.items() if k not in ERROR_WORDS),
                      **{f"races_{k}": int(n) for k, n in f.get("races", {}).items()},
                      router_proxy_error_lines=int(f.get("router_proxy_error_lines", 0)))
    ev.figures["lru_mismatches"] = ev.figures["lru_judged"] - ev.figures["lru_matches"]
    log = children_from_log(lab.events)
    ev.figures.update(peak_children_log=log["peak_children_log"], spawns_over_cap=spawns_over_cap(log["log_order"], cap))
    ev.lines = lab.lines("evict", "spawn", "exited")[:16]
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


@router_scenario("same-model-burst", BurstParams, models_max=1)
def same_model_burst(lab: Lab, p: BurstParams, ev: Evidence) -> Iterator[None]:
    """models_max 1: load A, then K concurrent requests for B: one queue entry, one spawn of B."""
    a, b = lab.names[:2]
    lab.request(a)
    threads = [lab.request_in_background(b) for _ in range(p.k)]
    for t in threads:
        t.join(60)
    time.sleep(0.2)
    yield
    measure(ev, lab, k=Given(p.k), **{figure: LogCount(kind, b, f"router log lines: {kind} for {b}") for figure, kind
                                      in (("spawns_b", "spawn"), ("queued_b", "queued"), ("joined_b", "joined"),
                                          ("proxied_b", "proxy"))})
    queued_b, joined_b = ev.figures["queued_b"], ev.figures["joined_b"]
    # Requests that reach the router after B's load has begun wait for the loading model, not
    # in the queue: only those that found B queued ("queued" or "joined" lines) test the sharing.
    measure(ev, lab, queue_hits_b_minus_1=LogCount(("queued", "joined"), b, "queued + joined lines for B, minus one", 1))
    ev.figures.update(ok_b=OkCount((b,)).value(lab), entries_for_b=queued_b, queue_hits_b=queued_b + joined_b,
                      after_load_began_b=p.k - queued_b - joined_b)
    # "one load for all of them" is about routing: every request reached B's one child (proxied_b == k).
    # What the child answered is its own business: build 10729's child failed one raw /completion of the
    # random-weight model with 500 "output does not match the expected Content-only format".
    failed = [r for r in lab.replies if r.model == b and r.status != 200]
    if failed:
        ev.notes.append(f"{len(failed)} of {p.k} requests for {b} got no 200 (status {failed[0].status}: "
                        f"{(failed[0].body or failed[0].error or '')[:160]}); not a routing figure")
    ev.lines = [x for x in lab.lines("queued", "joined", "spawn") if f"name={b}" in x or f"model {b}" in x][:10]
    # queued_b == 0: no queue entry at all (older routers have no queue): the checks say contradicted
    if queued_b >= 1 and queued_b + joined_b < 2:
        raise Inconclusive(f"only {queued_b + joined_b} of the {p.k} requests for {b} reached the router while its "
                           "entry was queued (the others came after its load began), so no two could share an "
                           "entry; rerun on a quieter machine or raise k")


@router_scenario("busy-victim", RouterParams, models_max=2)
def busy_victim(lab: Lab, p: RouterParams, ev: Evidence) -> Iterator[None]:
    """models_max 2: A busy with a long request that started before B's last use, so A is the
    least recently used; C then needs a slot.  The router must skip busy A and evict B."""
    a, b, c = lab.names[:3]
    lab.request(a)
    lab.request(b)
    long_thread = long_request_busy(lab, a, p.long_n())
    lab.request(b)  # B is now the most recently used
    lab.request(c)
    a_still_busy = long_thread.is_alive()
    long_thread.join(120)
    lab.wait_for("evict", timeout=EVENT_WAIT_S)  # C was answered at the cap: its eviction line is certain
    yield
    long_n = p.long_n()
    a_reply = next((r for r in lab.replies if r.model == a and r.n_predict == long_n), None)
    # A's reply cut (no 200, or the connection dropped) is the router evicting the busy model: contradicted,
    # whenever C was sent, so it is judged before "A finished too early" makes the run inconclusive
    cut = a_reply is not None and a_reply.status != 200
    if not a_still_busy and not cut:
        raise Inconclusive("the long request to A finished before C was sent; raise n_predict")
    measure(ev, lab, victim=FirstEvicted(how="the model the router log's first eviction line names"), expected=Given(b),
            a_reply_cut=Measured(cut, Lab.sh_flag(f"! grep -qx 200 \"$WORK/reply-{a_reply.sh_n}.status\"")
                                 if a_reply is not None and a_reply.sh_n is not None else "echo false",
                                 f"the long request to {a} got no HTTP 200 (cut by its eviction)"))
    if cut and a_reply is not None:
        ev.notes.append(f"{a}'s long request was cut: status {a_reply.status}, {(a_reply.error or a_reply.body)[:200]}")
    ev.figures.update(busy_model=a, lru_if_busy_ignored=a, a_busy_when_c_sent=a_still_busy)
    ev.lines = lab.lines("proxy", "evict", "spawn")[:12]


@dataclass(frozen=True)
class TwoWaitersParams(RouterParams):
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4", "tiny-f16"])
    ctx_size: int = 512


@router_scenario("two-waiters", TwoWaitersParams, models_max=1)
def two_waiters(lab: Lab, p: TwoWaitersParams, ev: Evidence) -> Iterator[None]:
    """models_max 1, A loaded and idle: requests for B and C sent together both want A's one slot
    (upstream's test_router_queue_two_waiters_share_one_eviction): both must be answered, A evicted
    once.  Under LLAMA_SERVER_DEBUG_FAKE_TIMING=1 (params.env) each load waits 2 s before it starts
    and each proxy 2 s after counting its request, so both requests are at the router together."""
    a, b, c = lab.names[:3]
    first = lab.request(a)
    if first.status != 200:
        raise Inconclusive(f"the request that loads {a} got {first.status}: {(first.error or first.body)[:160]}")
    threads = [lab.request_in_background(b, timeout=p.long_n(180)), lab.request_in_background(c, timeout=p.long_n(180))]
    for t in threads:
        t.join(200)
    lab.wait_for("exited", a, timeout=30)
    yield
    measure(ev, lab, b_ok=answered(b), c_ok=answered(c),
            a_stops=LogCount(("evict",), a, f"eviction lines for {a} (one eviction for both waiters)"),
            spawns_a=LogCount("spawn", a, f"spawn lines for {a} (1: it was never loaded again)"))
    failed = [r for r in lab.replies if r.model in (b, c) and r.status != 200]
    ev.figures["failed_waiters"] = len(failed)
    for r in failed:
        ev.notes.append(f"the request for {r.model} got {r.status}: {(r.error or r.body)[:200]}")
    ev.lines = lab.lines("queued", "joined", "evict", "spawn", "exited", "proxy", "proxy_error")[:16]


@router_scenario("limit-reached", RouterParams, models_max=1)
def limit_reached(lab: Lab, p: RouterParams, ev: Evidence) -> Iterator[None]:
    """models_max 1, the only resident model busy: POST /models/load of another model."""
    a, b = lab.names[:2]
    long_thread = loaded_and_busy(lab, a, p.long_n())
    reply = lab.post("/models/load", b)
    busy = long_thread.is_alive()
    long_thread.join(120)
    yield
    if not busy:
        raise Inconclusive("A's long request ended before the load was answered")
    measure(ev, lab, says_limit_reached=ReplyHas(reply, "model limit reached",
                                                 "the answer to POST /models/load says 'model limit reached'"),
            load_status=ReplyStatus(reply, how="HTTP status of POST /models/load"))
    ev.figures.update(load_body=reply.body[:200], load_ms=round(reply.latency_ms, 1))
    ev.lines = [f"POST /models/load {b} -> {reply.status} {reply.body[:160]}"]


@router_scenario("waiter-recheck", RouterParams, models_max=1)
def waiter_recheck(lab: Lab, p: RouterParams, ev: Evidence) -> Iterator[None]:
    """models_max 1: B waits while A is busy; how long after A goes idle does B's swap start?"""
    a, b = lab.names[:2]
    long_n = p.long_n()
    long_thread = loaded_and_busy(lab, a, long_n)
    lab.watch("evict_a", ("evict", "stop_sent"), a, 180)
    b_thread = lab.request_in_background(b)
    queued = lab.wait_for("queued", b, timeout=EVENT_WAIT_S)
    long_thread.join(120)
    b_thread.join(120)
    yield
    a_reply = next((r for r in lab.replies if r.model == a and r.n_predict == long_n), None)
    if a_reply is None:
        raise Inconclusive("the long request to A left no reply")
    if queued is None or not any(e.kind in ("evict", "stop_sent") and e.model == a for e in lab.events):
        raise Inconclusive("B never queued or A was never evicted")
    measure(ev, lab, evict_after_a_idle_ms=TimeToLine(a_reply, "evict_a", (
        f"from the end of {a}'s long request (curl returned) to {a}'s eviction line (the log polled every 20 ms)")),
        b_ok=answered(b))
    ev.figures.update(b_queued=True, a_busy_s=round(a_reply.latency_ms / 1000, 3))
    ev.lines = lab.lines("queued", "evict", "spawn")[:10]


@scenario("startup-exceeds", StartupExceedsParams)
def startup_exceeds(ctx: Context, p: StartupExceedsParams) -> Evidence:
    """More load-on-startup models than models_max: the router must refuse to start."""
    refs = list(p.models) if p.models is not None else ["tiny-q8"] * p.n_models
    models = ctx.router_models(refs, **{str(i): {"preset": {"load-on-startup": "true"}} for i in range(len(refs))})
    ev = Evidence()
    try:
        with ctx.lab(models, models_max=p.models_max, start_may_fail=True):
            started = True
    except EngineError as exc:
        started = False
        ev.lines = [line for line in str(exc).splitlines() if "exceeds" in line or "error" in line.lower()][:6]
    log = (ctx.claim_dir / "logs" / "router.stderr.log")
    text = log.read_text(errors="replace") if log.exists() else ""
    expected = f"number of models to load on startup ({len(refs)}) exceeds models_max ({p.models_max})"
    measure(ev, ctx.labs[-1], router_started=Measured(started, 'echo "$STARTED"', "the router answered GET /health "
                                                      "(polled for up to 2 minutes while its process lived)"),
            message_found=Measured(expected in text, Lab.sh_flag(f"grep -qF -- {shlex.quote(expected)} "
                                                                 "\"$WORK/router.stderr.log\""),
                                   f"the router log says: {expected}"))
    ev.figures["expected_message"] = expected
    if expected in text:
        ev.lines = [line.strip() for line in text.splitlines() if "exceeds models_max" in line][:3]
    return ev


@scenario("startup-load", StartupLoadParams)
def startup_load(ctx: Context, p: StartupLoadParams) -> Evidence:
    """Load-on-startup models under a cap that fits them (the control: the router starts and
    loads them, through load_startup_models) and under ``models_max`` (0 = no cap by the
    documents): does the router start, and does it load them?"""
    refs = list(p.models)
    presets = {str(i): {"preset": {"load-on-startup": "true"}} for i in range(len(refs))}
    ev = Evidence()

    def attempt(cap: int, tag: str) -> str:
        models = ctx.router_models(refs, **presets)
        run_dir = ctx.claim_dir / tag
        names = [m.name for m in models]
        try:
            with ctx.lab(models, run_dir=run_dir, models_max=cap, start_may_fail=True) as lab:
                loaded = lab.models_loaded(names, p.load_timeout_s)
                save_evidence(lab, Evidence())
            started = True
        except EngineError:
            started, loaded = False, 0
            lab = ctx.labs[-1]
            lab.models_loaded(names, p.load_timeout_s)  # recorded: a router that starts after all is polled
        words = " ".join(shlex.quote(n) for n in names)
        what = "the control" if tag == "control" else f"models_max {cap}"
        measure(ev, lab, **{"control_started" if tag == "control" else "router_started": Measured(
            started, 'echo "$STARTED"', f"the router answered GET /health ({what})"),
            "control_loaded" if tag == "control" else "startup_loaded": Measured(
            loaded, f"models_loaded {words}", f"startup models GET /models lists as loaded ({what})")})
        if tag == "case":
            measure(ev, lab, n_startup=Given(len(refs)))
        log = run_dir / "logs" / "router.stderr.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return next((line.strip() for line in text.splitlines() if "exceeds models_max" in line), "")

    control_cap = len(refs) if p.control_models_max is None else p.control_models_max
    attempt(control_cap, "control")
    refused = attempt(p.models_max, "case")
    f = ev.figures
    ev.figures.update(control_models_max=control_cap, models_max=p.models_max, refused=bool(refused))
    ev.lines = [f"control (models_max {control_cap}): started {f['control_started']}, {f['control_loaded']} of "
                f"{len(refs)} loaded at startup",
                f"models_max {p.models_max}: started {f['router_started']}, {f['startup_loaded']} loaded"
                + (f"; router log: {refused}" if refused else "")]
    return ev


@router_scenario("sleeping-slot", SleepParams, models_max=1, sleep_idle_seconds=lambda p: p.sleep_idle_seconds)
def sleeping_slot(lab: Lab, p: SleepParams, ev: Evidence) -> Iterator[None]:
    """models_max 1 and --sleep-idle-seconds: a sleeping A still holds the only slot."""
    a, b = lab.names[:2]
    sleep_s = p.sleep_idle_seconds
    lab.request(a)
    if lab.wait_for("status:sleeping", a, timeout=sleep_s + 10) is None:
        raise Inconclusive(f"{a} never reported sleeping within {sleep_s + 10} s")
    lab.mark("b")
    lab.log_mark("b")
    lab.request(b)
    lab.sleep(0.2)
    yield
    # both from /models/sse, one stream in the router's order: A's "unloaded" against B's "loading"
    # (B's spawn line against A's event compared two streams: the event can arrive after the line)
    measure(ev, lab, a_evicted_for_b=LogBetween(("evict", "stop_sent"), a, "b", None,
                                                f"an eviction or stop line for {a} after the request for {b}"),
            b_spawned_after_a_exited=SseBefore((a, "unloaded"), (b, "loading"), "b", f"/models/sse sent {a} "
                                               f"unloaded before {b} loading (after the request for {b})"))
    ev.figures.update(a_slept=True, models_max=1)
    ev.lines = lab.lines("status:sleeping", "evict", "stop_sent", "status:unloaded", "spawn")[:10]


def _unload_frozen(lab: Lab, model: str, pid: int, timeout: float) -> tuple[float, TimelineEvent | None]:
    """Unload frozen ``model`` (time marks ``unload`` and ``exited``), wait up to ``timeout`` s for its
    exit line, thaw it: when the unload was sent (lab time) and the exit line (None: none came)."""
    t_unload = lab.now()
    lab.mark("unload")
    lab.post("/models/unload", model)
    exited = lab.wait_for("exited", model, timeout=timeout, after=t_unload)
    lab.mark("exited")
    lab.thaw(pid)
    return t_unload, exited


def _sh_unload_to_exit(expr: str, fmt: str = "%.3f", setup: str = "", c: str = "") -> str:
    """awk printing ``expr`` of ``a`` and ``b``, the script's time marks of the unload and the exit line."""
    return f"awk -v a=\"$T_unload\" -v b=\"$T_exited\" {c}'BEGIN {{{setup}printf \"{fmt}\\n\", {expr}}}'"


UNLOAD_TO_EXIT = "from the unload request to the exit line, seen by polling the log every 20 ms"


@router_scenario("unload-while-loading", ModelsParams, models_max=2)
def unload_while_loading(lab: Lab, p: ModelsParams, ev: Evidence) -> Iterator[None]:
    """Freeze a child while it is LOADING, then unload it: the router must SIGKILL it at once."""
    a = lab.names[0]
    lab.post("/models/load", a)
    t_unload, exited = _unload_frozen(lab, a, freeze_while_loading(lab, a), 30)
    yield
    measure(ev, lab, force_kill_logged=LogHas("kill_loading", a, "the router logged the force-kill of a loading model"),
            unload_to_exit_ms=Measured(round((lab.rel(exited.t) - t_unload) * 1000, 1) if exited else None,
                                       _sh_unload_to_exit("(b - a) * 1000", "%.1f"), UNLOAD_TO_EXIT))
    ev.figures["exit_status"] = int(exited.detail["status"]) if exited else None
    ev.lines = lab.lines("stop_sent", "kill_loading", "exited")[:6]


def _stop_timeout_preset(p: StopTimeoutParams) -> dict[str, dict[str, object]]:
    return {"0": {"stop_timeout_s": p.stop_timeout_s}} if p.stop_timeout_s else {}


@router_scenario("stop-timeout", StopTimeoutParams, per_model=_stop_timeout_preset, models_max=2)
def stop_timeout(lab: Lab, p: StopTimeoutParams, ev: Evidence) -> Iterator[None]:
    """Freeze a loaded child (SIGSTOP), unload it: force-kill after the stop-timeout."""
    a = lab.names[0]
    configured = p.stop_timeout_s if p.stop_timeout_s else 10
    lab.request(a)
    pid = found_child(lab, a)
    lab.freeze(pid)
    t_unload, exited = _unload_frozen(lab, a, pid, configured + 20)
    yield
    took = round(lab.rel(exited.t) - t_unload, 3) if exited else None
    measure(ev, lab, configured_s=Given(configured),
            timeout_kill_logged=LogHas("kill_timeout", a, "the router logged the force-kill after timeout"),
            unload_to_exit_s=Measured(took, _sh_unload_to_exit("b - a"), UNLOAD_TO_EXIT))
    error = Measured(round(abs(took - configured), 3) if took is not None else None,
                     _sh_unload_to_exit("d", setup="d = b - a - c; if (d < 0) d = -d; ", c=f"-v c={float(configured):g} "),
                     "how far the unload-to-exit time is from the configured stop timeout")
    measure(ev, lab, error_s=error)
    if took is None:
        del ev.figures["error_s"]
    ev.figures["preset_key_set"] = bool(p.stop_timeout_s)
    ev.lines = lab.lines("stop_sent", "kill_timeout", "exited")[:6]


@router_scenario("cancel-waiting", CancelParams, models_max=1)
def cancel_waiting(lab: Lab, p: CancelParams, ev: Evidence) -> Iterator[None]:
    """models_max 1, A busy: B's client gives up while waiting; then C waits.  B must never be
    loaded and C must get the slot when A goes idle."""
    a, b, c = lab.names[:3]
    long_thread = loaded_and_busy(lab, a, p.long_n(6000))
    session = p.conversation_id  # X-Conversation-Id: the router's resumable-stream sessions
    if p.waiting_get:  # B's waiting request is a GET the router proxies (proxy_get)
        b_reply = lab.get(p.waiting_get, b, timeout=p.client_timeout_s)
    else:
        b_reply = lab.request(b, timeout=p.client_timeout_s,
                              headers={"X-Conversation-Id": str(session)} if session else None)
    c_thread = lab.request_in_background(c)
    busy = long_thread.is_alive()
    long_thread.join(120)
    a_went_idle = not long_thread.is_alive()
    c_thread.join(120)
    time.sleep(0.5)
    yield
    if not busy:
        raise Inconclusive("A finished before B gave up; raise n_predict")
    if not a_went_idle:  # C can only get the slot once A is idle: a slow machine, not the rule
        raise Inconclusive(f"{a} was still generating 120 s after B gave up, so {c} could not get the slot yet; "
                           "lower n_predict or rerun on a quieter machine")
    cancel = next((e for e in lab.events if e.kind == "cancelled" and e.model == b), None)
    measure(ev, lab, c_took_a_slot=LogBefore((("evict", "stop_sent"), a), ("spawn", c),
                                             f"{a}'s stop line comes before {c}'s spawn line in the router log"),
            b_client_gave_up=GaveUp(b_reply, "curl got no answer for B in time (status 000)"),
            b_spawned=LogHas("spawn", b, f"the router log has a spawn line for {b}"),
            c_spawned=LogHas("spawn", c, f"the router log has a spawn line for {c}"), c_ok=answered(c),
            cancel_logged=LogHas("cancelled", b, f"the router logged {b}'s cancelled wait"))
    if cancel is not None and b_reply.error is not None:
        # the router notices the client left on its next poll (the seed: every 200 ms)
        ev.figures["cancel_after_client_left_ms"] = round((cancel.t - b_reply.t_done) * 1000, 1)
    ev.lines = lab.lines("queued", "cancelled", "evict", "spawn")[:10]


def _cap_env(p: EnvCapParams) -> dict[str, str]:
    return {"LLAMA_ARG_MODELS_MAX": str(p.value), **{k: str(v) for k, v in p.reserved.items()}}


@router_scenario("env-models-max", EnvCapParams, models_max=None, extra_env=_cap_env)
def env_models_max(lab: Lab, p: EnvCapParams, ev: Evidence) -> Iterator[None]:
    """Cap from LLAMA_ARG_MODELS_MAX only; what the children's environment holds."""
    names = lab.names
    lab.request(names[0])
    env = lab.environ(found_child(lab, names[0]))
    for name in names[1:] + names[:1]:
        lab.request(name)
    time.sleep(0.2)
    yield
    measure(ev, lab, env_value=Given(p.value),
            child_sees_models_max_var=ChildEnv(env, (("LLAMA_ARG_MODELS_MAX", None),),
                                               "the first child's environment holds LLAMA_ARG_MODELS_MAX"),
            child_sees_router_port=ChildEnv(env, (("LLAMA_SERVER_ROUTER_PORT", None),),
                                            "the first child's environment holds LLAMA_SERVER_ROUTER_PORT"),
            router_port_matches=Measured(env.get("LLAMA_SERVER_ROUTER_PORT") == str(lab.router.port),
                                         lab.sh_flag('grep -qx "LLAMA_SERVER_ROUTER_PORT=$PORT" "$WORK/child-env.txt"'),
                                         "LLAMA_SERVER_ROUTER_PORT is the router's port"),
            reserved_inherited=ChildEnv(env, tuple((k, str(v)) for k, v in p.reserved.items()),
                                        "the child holds every variable set for the router"))
    ev.figures["peak_children_log"] = children_from_log(lab.events)["peak_children_log"]
    ev.lines = [f"child environment: LLAMA_ARG_MODELS_MAX={env.get('LLAMA_ARG_MODELS_MAX', '(absent)')}, "
                f"LLAMA_SERVER_ROUTER_PORT={env.get('LLAMA_SERVER_ROUTER_PORT', '(absent)')}"]


@scenario("ini-models-max", IniCapParams)
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
            measure(ev, lab, ini_value=Given(p.value), n_models=Given(len(models)))
        ev.figures["router_started"] = True
    except EngineError as exc:
        ev.figures.update(router_started=False, peak_children=None, ini_value=p.value, n_models=len(models))
        ev.lines = str(exc).splitlines()[-5:]
    return ev


@router_scenario("default-cap", DefaultCapParams, models_max=None,
                 extra_env=lambda p: {"LLAMA_ARG_MODELS_MAX": str(p.env_value)} if p.env_value is not None else {})
def default_cap(lab: Lab, p: DefaultCapParams, ev: Evidence) -> Iterator[None]:
    """No --models-max on the command line, optionally LLAMA_ARG_MODELS_MAX: load every model one
    after the other and count the children from the router log (exact) and /proc."""
    for name in lab.names:
        lab.request(name)
    lab.sleep(0.3)
    yield
    measure(ev, lab, n_models=Given(len(lab.names)), evictions=LogCount("evict", None, "the router's eviction lines"),
            ok=OkCount())
    ev.figures["peak_children_log"] = children_from_log(lab.events)["peak_children_log"]
    ev.lines = lab.lines("spawn", "evict", "exited")[:16]


@router_scenario("fifo-order", RouterParams, models_max=1)
def fifo_order(lab: Lab, p: RouterParams, ev: Evidence) -> Iterator[None]:
    """models_max 1, A busy: requests for B, C, D queue in that order (one after the other);
    when A goes idle they must be loaded in arrival order."""
    a, *rest = lab.names
    long_thread = loaded_and_busy(lab, a, p.long_n())
    threads = []
    for name in rest:
        after = lab.now()
        threads.append(lab.request_in_background(name))
        if lab.wait_for("queued", name, timeout=EVENT_WAIT_S, after=after) is None:
            raise Inconclusive(f"the request for {name} was never queued")
    busy = long_thread.is_alive()
    long_thread.join(180)
    for t in threads:
        t.join(180)
    yield
    if not busy:
        raise Inconclusive("A finished before every request was queued; raise n_predict")
    queued = [e.model for e in lab.events if e.kind == "queued" and e.model in rest]
    spawned = [e.model for e in lab.events if e.kind == "spawn" and e.model in rest]
    order = f"q=$({lab.sh_log_order('queued', rest)}); s=$({lab.sh_log_order('spawn', rest)}); "
    measure(ev, lab, n_waiting=Given(len(rest)),
            ok=OkCount(tuple(rest), "requests for the waiting models answered with HTTP 200"),
            fifo=Measured(queued == spawned and len(spawned) == len(rest),
                          lab.sh_flag(order + f'[ -n "$s" ] && [ "$q" = "$s" ] && '
                                      f'[ "$(echo "$s" | tr , "\\n" | wc -l)" -eq {len(rest)} ]'),
                          "the waiting models' spawn lines come in the order of their queued lines"))
    ev.figures.update(queue_order=",".join(queued), spawn_order=",".join(spawned))
    ev.lines = lab.lines("queued", "claim", "evict", "spawn", "exited")[:20]


@router_scenario("stopping-counts", StoppingParams, per_model=lambda p: {"0": {"stop_timeout_s": int(p.stop_timeout_s)}},
                 models_max=1)
def stopping_counts(lab: Lab, p: StoppingParams, ev: Evidence) -> Iterator[None]:
    """models_max 1: A loaded and frozen (SIGSTOP) so it cannot exit; a request for B must wait
    until A exits (force-killed after stop-timeout): a stopping model still counts as running, and
    a hung child blocks every load until the stop timeout."""
    st = p.stop_timeout_s
    a, b = lab.names[:2]
    lab.request(a)
    pid = found_child(lab, a)
    lab.freeze(pid)
    lab.mark("b")
    lab.watch("spawn_b", "spawn", b, st + 60)
    reply = lab.request(b, timeout=st + 60)
    lab.thaw(pid)
    yield
    exit_a = next((e for e in lab.events if e.kind == "exited" and e.model == a and lab.rel(e.t) >= lab.marks["b"]), None)
    spawn_b = next((e for e in lab.events if e.kind == "spawn" and e.model == b), None)
    if exit_a is None or spawn_b is None:
        raise Inconclusive("A never exited or B never spawned")
    # A's exit against B's load on the one /models/sse stream, in the router's order: the log's "exited" line
    # comes from the child's monitor thread and can follow B's spawn line (seen 1 in 3 on build 11434)
    measure(ev, lab, b_wait_s=TimeToLine("b", "spawn_b", f"seconds from the request for {b} to its spawn line "
                                         "(the log polled every 20 ms)"),
            b_ok=ReplyStatus(reply, 200, f"the request for {b} got HTTP 200"),
            b_spawn_after_a_exit=SseBefore((a, "unloaded"), (b, "loading"), "b", f"/models/sse sent {a} unloaded (its "
                                           f"process exited) before {b} loading, after the request for {b}"),
            kill_timeout_logged=LogHas("kill_timeout", a, "the router logged the force-kill after timeout"))
    ev.figures.update(stop_timeout_s=st, b_spawn_line_after_a_exit_line=spawn_b.t >= exit_a.t,
                      peak_children_log=children_from_log(lab.events)["peak_children_log"])
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_timeout", "exited", "spawn")[:12]


@router_scenario("loading-counts", HoldParams, models_max=1)
def loading_counts(lab: Lab, p: HoldParams, ev: Evidence) -> Iterator[None]:
    """models_max 1: A's child frozen (SIGSTOP) while LOADING; a request for B must neither spawn B
    nor evict A while A is loading (LOADING counts as running, a loading model is never a victim).
    Then A is thawed: B is served after A finishes loading and is evicted."""
    a, b = lab.names[:2]
    hold_s = p.hold_s
    lab.post("/models/load", a)
    pid = freeze_while_loading(lab, a)
    lab.log_mark("b")
    b_thread = lab.request_in_background(b, timeout=hold_s + 120)
    lab.sleep(hold_s)
    lab.log_mark("thaw")
    lab.thaw(pid)
    b_thread.join(hold_s + 120)
    yield
    acts = ("spawn", "evict", "stop_sent", "kill_loading")
    measure(ev, lab, b_ok=answered(b),
            b_spawned_while_a_loading=LogBetween("spawn", b, "b", "thaw", f"a spawn line for {b} between the request "
                                                 f"for {b} and the thaw of {a}"),
            a_evicted_while_loading=LogBetween(acts, a, "b", "thaw", f"a spawn, eviction, stop or force-kill line for "
                                               f"{a} in that time"),
            b_spawned_after_thaw=LogBetween("spawn", b, "thaw", None, f"a spawn line for {b} after the thaw"))
    during = [e for e in lab.events if e.source == "router" and e.model in (a, b) and e.kind in acts
              and lab.log_marks["b"] <= lab.rel(e.t) < lab.log_marks["thaw"]]
    ev.figures.update(hold_s=hold_s, actions_while_a_loading=len(during))
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_loading", "status:loaded", "exited", "spawn")[:14]
