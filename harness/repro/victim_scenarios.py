"""Victim rules of the router's LRU scheduler (``server_lru_sched::pick_victim``), each in a
situation where the rule and its negation lead to different, logged evictions.

- ``wanted-victim``: a model that has just come up while its own request is still queued is
  "wanted by a queued request" and must not be evicted, even when it is the only idle model
  and another queued request needs a slot.
- ``lru-order``: with several idle candidates, the victim is the least recently used one
  (last use = the last POST proxied to it), never the first by name or the longest resident.
- ``loading-lru``: a model still loading is skipped even when it is the least recently used.
- ``multi-evict``: one ``tick()`` evicts as many idle models as the queue is short of slots.

``lru-order`` and ``loading-lru`` take ``via = "load"`` to need the slot through
POST /models/load (``unload_lru()`` picks the victim) instead of a request (``tick()``).
Each figure is an object of harness/repro/figures.py (``wanted_figures``, ``lru_rounds``,
``loading_lru_figures``, ``lru_get_figures``, ``tick_figures`` declare them), computed from the
router's timeline and rendered as the recipe's shell; tests run them on constructed timelines of
the negated rule to show that the checks can come out "contradicted".
"""

from __future__ import annotations

import random
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.probes.engine_log import stamp_s
from harness.repro.base import (ChildGone, Context, Evidence, Inconclusive, ModelsParams, RouterParams, found_child,
                                freeze_while_loading, long_request_busy, measure, router_scenario, scenario)
from harness.repro.figures import (AnyOf, Figure, FirstEvicted, Given, LogBefore, LogBetween, LogCountBefore, LruRounds,
                                   OkCount, ReplyStatus, SseSent, TickEvictions, answered, tick_lines)
from harness.repro.lab import EVENT_WAIT_S, Lab, Reply, line_ere


# ---- parameters (the spec's [params]) -------------------------------------------------------

@dataclass(frozen=True)
class WantedParams(RouterParams):
    models: list[str] = field(default_factory=lambda: ["llama3.2-1b-q4", "tiny-q8", "tiny-f16"])


@dataclass(frozen=True)
class LruParams(ModelsParams):
    models_max: int | None = None  # default: one fewer than the models
    rounds: int = 4
    seed: int = 0
    via: str = "request"  # or "load": POST /models/load (unload_lru) instead of a request (tick)


@dataclass(frozen=True)
class LoadingLruParams(ModelsParams):
    hold_s: float = 2.0
    via: str = "request"


@dataclass(frozen=True)
class MultiEvictParams(ModelsParams):
    attempts: int = 3


# ---- wanted-victim ---------------------------------------------------------------------

def wanted_figures(a: str, c: str) -> dict[str, Figure]:
    """Figures of ``wanted-victim`` after log and time mark ``thaw``.

    A came up after the thaw with its own request still queued; C was queued and needed a slot.
    The rule: A is not evicted before its request has been proxied (the waiter leaves the queue
    right before the proxy), and A is served by the spawn that was frozen (one spawn of A before
    its first proxy).  The negation evicts A at the tick of its status change, so the router logs
    'evicting idle LRU name=A' before 'proxying request to model A'."""
    return {"a_came_up": SseSent(a, "loaded", "thaw", f"/models/sse sent {a} loaded after the thaw"),
            "a_evicted_while_wanted": LogBefore(("evict", a), ("proxy", a), f"an eviction line for {a} after the "
                                                "thaw, before its request's proxy line (or with none)", "thaw", False),
            "a_spawns_before_served": LogCountBefore("spawn", a, ("proxy", a), "thaw", f"spawn lines for {a} before "
                                                     "its request's proxy line after the thaw"),
            "a_evicted_after_served": LogBefore(("proxy", a), ("evict", a), f"{a}'s first eviction line after the "
                                                "thaw comes after its request's proxy line", "thaw"),
            "first_victim": FirstEvicted("thaw", how="the model the first eviction line after the thaw names"),
            "c_spawned_after_a_evicted": LogBefore(("evict", a), ("spawn", c), f"{c}'s spawn line comes after "
                                                   f"{a}'s eviction line, after the thaw", "thaw"),
            "c_ok": answered(c)}


@router_scenario("wanted-victim", WantedParams, models_max=2)
def wanted_victim(lab: Lab, p: WantedParams, ev: Evidence) -> Iterator[None]:
    """models_max 2: B busy with a long request whose child is frozen (SIGSTOP), so the request
    stays in flight; a request for A spawns A (frozen while loading); a request for C queues (no
    victim: A loading, B busy).  A is thawed: at the tick of A's status change, A is idle and the
    only candidate, but its own request is still queued.  B is thawed at the end."""
    a, b, c = lab.names[:3]
    lab.request(b)
    long_b = long_request_busy(lab, b, p.long_n())
    pid_b = found_child(lab, b)
    lab.freeze(pid_b)  # B's request stays in flight until the end
    try:
        a_thread = lab.request_in_background(a, timeout=180)
        pid = freeze_while_loading(lab, a)
        after = lab.now()
        c_thread = lab.request_in_background(c, timeout=180)
        queued_c = lab.wait_for("queued", c, timeout=EVENT_WAIT_S, after=after)
        lab.sleep(0.2)
        premature = [e for e in lab.events if e.kind in ("evict", "stop_sent", "kill_loading")]
        lab.mark("thaw")
        lab.log_mark("thaw")
        lab.thaw(pid)
        a_thread.join(180)
        c_thread.join(60)
        b_busy = long_b.is_alive()
    finally:
        lab.thaw(pid_b)
    long_b.join(180)
    lab.sleep(0.2)
    yield
    if queued_c is None:
        raise Inconclusive(f"the request for {c} was never queued")
    if premature:
        raise Inconclusive(f"the router evicted or stopped {premature[0].model} before A came up "
                           f"({premature[0].text.strip()}), so no tick saw A wanted")
    if not b_busy:
        raise Inconclusive(f"the long request to {b} ended before C's request was answered")
    measure(ev, lab, **wanted_figures(a, c))
    ev.figures.update(expected_victim=a, b_busy_throughout=b_busy, a_ok=answered(a).value(lab))
    ev.lines = lab.lines("queued", "status:loaded", "proxy", "evict", "stop_sent", "exited", "spawn")[:20]
    ev.notes = [f"{b}'s child was frozen (SIGSTOP) with one request in flight from before A was spawned until "
                f"C's request was answered, so at the tick of A's status change A was the only idle model and "
                f"{c} was queued for a slot"]


# ---- lru-order -------------------------------------------------------------------------

def lru_plan(touch_order: list[str], resident_since: dict[str, int]) -> tuple[str, bool]:
    """One round of ``lru-order``: the residents were used in ``touch_order`` (oldest first),
    ``resident_since`` numbers them by load: the model LRU evicts, and whether no wrong rule (first
    by name, longest resident, most recent) would evict it too."""
    lru = touch_order[0]
    wrong = (sorted(touch_order)[0], min(touch_order, key=lambda m: resident_since[m]), touch_order[-1])
    return lru, lru not in wrong


def lru_rounds(plan: list[tuple[str, str, bool]]) -> dict[str, Figure]:
    """``lru-order``'s figures over its rounds' plan (log mark, LRU model, distinguishing)."""
    p = tuple(plan)
    return {"round_victims": LruRounds(p, "victims", "the model each round's first eviction line named"),
            "rounds": LruRounds(p, "rounds", "rounds that ended in an eviction"),
            "non_lru_victims": LruRounds(p, "non_lru", "rounds whose victim was not the least recently used model "
                                         "of the round's use order"),
            "distinguishing_rounds": LruRounds(p, "distinguishing", "rounds that evicted, whose LRU model is neither "
                                               "first by name, nor longest resident, nor most recent (the plan's)")}


def _touch_order(resident: list[str], since: dict[str, int], rng: random.Random) -> list[str]:
    """A use order whose least recently used model is neither first by name, nor loaded
    earliest, nor (being first) the most recent: then only the LRU rule predicts the victim."""
    firsts = {sorted(resident)[0], min(resident, key=lambda m: since[m])}
    lru = rng.choice([m for m in resident if m not in firsts] or resident)
    rest = [m for m in resident if m != lru]
    rng.shuffle(rest)
    return [lru, *rest]


def _via_load(via: str) -> bool:
    """``via = "load"``: the model that needs a slot is loaded by POST /models/load (the
    router's ``unload_lru()`` picks the victim); default ``"request"`` (its ``tick()`` does)."""
    if via not in ("request", "load"):
        raise ValueError(f"via must be 'request' or 'load', not {via!r}")
    return via == "load"


def _lru_cap(p: LruParams) -> int:
    cap = len(p.models) - 1 if p.models_max is None else p.models_max
    if cap < 3 or len(p.models) != cap + 1:
        raise Inconclusive("lru-order needs models_max >= 3 and exactly models_max + 1 models")
    return cap


@router_scenario("lru-order", LruParams, models_max=_lru_cap)
def lru_order(lab: Lab, p: LruParams, ev: Evidence) -> Iterator[None]:
    """models_max N with N+1 models: each round uses the N residents one after the other in a
    chosen order, then requests (or POSTs /models/load for) the one outside: the router must
    evict the first one used."""
    names = lab.names
    cap = _lru_cap(p)
    rng = random.Random(p.seed)
    via_load = _via_load(p.via)
    plan: list[tuple[str, str, bool]] = []
    resident, outside = names[:cap], names[cap]
    since = {}
    for i, n in enumerate(resident):
        lab.request(n)
        since[n] = i
    load_no = cap
    for i in range(1, p.rounds + 1):
        order = _touch_order(resident, since, rng)
        lab.note(f"use order (oldest first): {', '.join(order)}")
        for n in order:
            lab.request(n)
        after = lab.now()
        lab.log_mark(f"round{i}")
        reply = lab.post("/models/load", outside) if via_load else lab.request(outside)
        # at the cap, a load answered 200 evicted one: its line is certain (a failed load: none to wait for)
        evict = lab.wait_for("evict", timeout=EVENT_WAIT_S, after=after) if reply.status == 200 else None
        plan.append((f"round{i}", *lru_plan(order, since)))
        if evict is None or reply.status != 200:
            break
        resident = [m for m in resident if m != evict.model] + [outside]
        since[outside] = load_no
        load_no += 1
        outside = str(evict.model)
    yield
    figures = lru_rounds(plan)
    measure(ev, lab, **figures, rounds_wanted=Given(p.rounds))
    ev.figures["path"] = "POST /models/load (unload_lru)" if via_load else "request (tick)"
    victims = LruRounds(tuple(plan), "victims").victims(lab)
    ev.lines = [f"round {i + 1}: least recently used {lru}, evicted {v}"
                for i, ((_, lru, _), v) in enumerate(zip(plan, victims))] + lab.lines("evict")[:8]


# ---- loading-lru -----------------------------------------------------------------------

def loading_lru_figures(a: str, c: str) -> dict[str, Figure]:
    """A (loading, least recently used: stamped at its spawn) and B (idle, used after A's spawn)
    are the candidates when C is requested at log mark ``c``: the rule evicts B; the negation
    evicts A (the router logs 'is still loading, force-killing')."""
    killed = LogBetween("kill_loading", a, "c", how=f"the router force-killed loading {a} after {c}'s request")
    return {"victim": FirstEvicted("c", how=f"the model the first eviction line after {c}'s request names"),
            "a_killed_while_loading": killed,
            "a_evicted_while_loading": AnyOf((killed, FirstEvicted("c", a)), f"after {c}'s request the router "
                                             f"force-killed loading {a} or named it in its first eviction line")}


@router_scenario("loading-lru", LoadingLruParams, models_max=2)
def loading_lru(lab: Lab, p: LoadingLruParams, ev: Evidence) -> Iterator[None]:
    """models_max 2: B loaded; POST /models/load A (no queue entry protects it) and freeze A's
    child while loading; use B (now A is the least recently used); request C.  A is thawed
    after ``hold_s``."""
    a, b, c = lab.names[:3]
    hold_s = p.hold_s
    via_load = _via_load(p.via)
    lab.request(b)
    lab.post("/models/load", a)
    pid = freeze_while_loading(lab, a)
    lab.request(b)  # B's last use is now later than A's spawn stamp
    lab.settle()  # B still in flight: no victim, and POST /models/load is refused at once
    lab.log_mark("c")
    load_reply: list[Reply] = []
    if via_load:
        c_thread = lab.post_in_background("/models/load", c, into=load_reply)
    else:
        c_thread = lab.request_in_background(c, timeout=hold_s + 120)
    lab.sleep(hold_s)
    still_loading = not any(e.kind == "status:loaded" and e.model == a for e in lab.events)
    lab.thaw(pid)
    c_thread.join(hold_s + 120)
    lab.sleep(0.2)
    yield
    if not still_loading:
        raise Inconclusive(f"{a} came up while frozen")
    c_ok = ReplyStatus(load_reply[0] if load_reply else None, 200, f"POST /models/load for {c} got HTTP 200") \
        if via_load else answered(c)  # POST /models/load answers once C is spawned
    measure(ev, lab, **loading_lru_figures(a, c), expected_victim=Given(b), c_ok=c_ok)
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_loading", "exited", "spawn")[:14]


# ---- lru-get: is a GET a use? ---------------------------------------------------------

@dataclass(frozen=True)
class LruGetParams(ModelsParams):
    get_path: str = "/props"  # a GET the router proxies to the model's child (proxy_get)


def lru_get_figures(a: str, b: str, c: str) -> dict[str, Figure]:
    """A and B resident (A requested first, then B, both by POST), then a GET for A, then C
    requested at log mark ``c``: if every request is a use, B is the least recently used and goes;
    if only POSTs stamp ``last_used``, A goes."""
    return {"victim": FirstEvicted("c", how=f"the model the first eviction line after {c}'s request names"),
            "lru_by_use": Given(b), "c_ok": answered(c)}


@router_scenario("lru-get", LruGetParams, models_max=2)
def lru_get(lab: Lab, p: LruGetParams, ev: Evidence) -> Iterator[None]:
    """models_max 2: POST A, POST B, GET <get_path>?model=A, POST C: which model is evicted."""
    a, b, c = lab.names[:3]
    lab.request(a)
    lab.request(b)
    got = lab.get(p.get_path, a)
    lab.settle()  # A still in flight would be skipped: B evicted, as if the GET were a use
    lab.log_mark("c")
    t_c = lab.t0 + lab.log_marks["c"]
    lab.request(c)
    lab.wait_for("evict", timeout=EVENT_WAIT_S, after=lab.log_marks["c"])  # C loaded at the cap: one is evicted
    lab.sleep(0.2)
    yield
    proxied_get = any(e.kind == "proxy" and e.model == a and e.t >= got.t_send for e in lab.events
                      if e.t <= t_c)
    if got.status != 200 or not proxied_get:
        raise Inconclusive(f"GET {p.get_path}?model={a} was not proxied to {a} (status {got.status}); "
                           "choose a GET the router proxies")
    measure(ev, lab, **lru_get_figures(a, b, c))
    ev.figures.update(lru_by_post_only=a, get_status=got.status)
    ev.lines = [f"POST {a}, POST {b}, GET {p.get_path}?model={a} ({got.status}), POST {c}: "
                f"evicted {ev.figures['victim']}"] + lab.lines("proxy", "evict", "spawn")[:10]


# ---- multi-evict: several evictions in one tick -----------------------------------------

def tick_figures(h: str, x: str, y: str) -> dict[str, Figure]:
    """The 'evicting idle LRU ... for a queued request' lines (``tick()``) between log marks ``y``
    and ``thaw``: while every child is frozen, nothing can exit, so no second tick can find a slot
    short and a victim: all of them come from the tick of Y's request.  The negated rule (one
    eviction per tick) logs one line there and the next only after the first victim has exited."""
    return {"tick_evictions": TickEvictions("y", "thaw", how="'evicting idle LRU ... for a queued request' lines "
                                            "between Y's request and the thaw, before the first exit line there"),
            "tick_victims": TickEvictions("y", "thaw", True, "the models those lines name, in order"),
            "ok": OkCount((h, x, y), "requests for H, X and Y answered with HTTP 200")}


def tick_timing(lab: Lab) -> dict[str, object]:
    """Exit lines between Y's request and the thaw, and the router's own time from the first to the
    last tick line (its log stamps; None without them): lbench's, for the reader."""
    lines, exits = tick_lines(lab, "y", "thaw")
    stamps = [s for s in (stamp_s(e.text) for e in lines) if s is not None]
    return {"exits_in_window": len(exits), "tick_span_ms": round((stamps[-1] - stamps[0]) * 1000, 3)
            if len(stamps) > 1 and len(stamps) == len(lines) else None}


def _multi_evict_once(ctx: Context, p: MultiEvictParams) -> Evidence:
    """models_max 4: A and B loaded and idle; H requested, its child held at start-up (``Lab.held``:
    it waits for its UI config file, a FIFO, before it reports anything to the router), so H heads
    the queue, loading; X queues behind H (a slot is free, so no eviction); Z loaded by POST
    /models/load (no queue entry, no tick) and held the same way: now the 4 slots are taken while X
    still needs one, and no child can send the status message whose tick would evict A alone.  A
    and B are frozen (idle, but unable to exit).  A request for Y then finds two queued requests
    short of slots and two idle models: its tick should evict both.  (Two requests sent at once
    cannot show this: each request's own tick evicts one.)"""
    models = ctx.router_models(p.models)
    a, b, h, z, x, y = (m.name for m in models[:6])
    ev = Evidence()
    with ctx.lab(models, models_max=4, evidence=ev, held=(h, z)) as lab:
        lab.request(a)
        lab.request(b)
        lab.note("H's and Z's children wait at start-up until the script writes their UI config file (a FIFO): "
                 "until then they send the router no status message, and no tick can run on one")
        after = lab.now()
        threads = [lab.request_in_background(h, timeout=180)]
        if lab.wait_for("spawn", h, timeout=EVENT_WAIT_S, after=after) is None:
            raise Inconclusive(f"the router never spawned {h}")
        pids: list[int] = []
        try:
            after = lab.now()
            threads.append(lab.request_in_background(x, timeout=180))
            queued_x = lab.wait_for("queued", x, timeout=EVENT_WAIT_S, after=after)
            after = lab.now()
            threads.append(lab.post_in_background("/models/load", z))
            if lab.wait_for("spawn", z, timeout=EVENT_WAIT_S, after=after) is None:
                raise Inconclusive(f"the router never spawned {z} for POST /models/load")
            for m in (a, b):  # idle victims that cannot exit: only Y's own tick can evict them
                try:  # spawned and loaded at the start: an eviction since then is the early one
                    pid = found_child(lab, m, gone_after=0.0)
                except ChildGone as exc:
                    raise EarlyEviction(f"{exc}: {EARLY_TICK}") from None
                lab.freeze(pid)
                pids.append(pid)
            early = [e for e in lab.events if e.kind == "evict"]
            lab.log_mark("y")
            after = lab.now()
            threads.append(lab.request_in_background(y, timeout=180))
            queued_y = lab.wait_for("queued", y, timeout=EVENT_WAIT_S, after=after)
            # Y's request thread logs "waiting until ... fully loaded" right after its join's tick: once
            # that line is in, every eviction line of the tick is too
            lab.wait_for("wait", y, timeout=EVENT_WAIT_S, after=after)
            lab.log_mark("thaw")
        finally:
            for pid in pids:
                lab.thaw(pid)
        for m in (h, z):
            lab.release(m)
        for t in threads:
            t.join(180)
        lab.sleep(0.2)
    if queued_x is None or queued_y is None:
        raise Inconclusive("the request for X or Y was never queued")
    if early:
        raise EarlyEviction(f"the router evicted {early[0].model} before Y was requested: {EARLY_TICK}")
    measure(ev, lab, **tick_figures(h, x, y), expected_victims=Given(f"{a},{b}"))
    ev.figures.update(tick_timing(lab))
    lab.retry_when(f'[ "$({lab.sh_log_lines(None, "y")} | grep -cE -- {shlex.quote(line_ere("evict", None))})" -gt 0 ]',
                   f"the router evicted a model before Y's request ({EARLY_TICK}): this attempt cannot show the "
                   "situation", p.attempts)
    ev.lines = [f"t={lab.rel(e.t):.4f}s {e.source}: {e.text.strip()}" for e in lab.events
                if e.source == "router" and lab.rel(e.t) >= lab.log_marks["y"]][:12]
    ev.notes = ["H's and Z's children waited at start-up (their UI config file was a FIFO lbench wrote after the "
                "thaw), so neither sent a status message; A and B were frozen (SIGSTOP) from before Y was requested "
                "until Y's request thread had logged 'waiting until ... fully loaded' (the line after its tick), so "
                "neither could exit: every eviction line in that window comes from the tick of Y's request"]
    return ev


EARLY_TICK = ("a tick ran while X was one slot short: the end of A's or B's first request, which the router "
              "counts after their replies were read")


class EarlyEviction(Inconclusive):
    """Z's first status message beat the freeze: the attempt cannot show the situation."""


@scenario("multi-evict", MultiEvictParams)
def multi_evict(ctx: Context, p: MultiEvictParams) -> Evidence:
    """``_multi_evict_once``, tried up to ``attempts`` times (default 3): freezing Z before its
    first status message is a race.  Failed attempts keep their files in ``failed-attempt-N/``."""
    attempts = p.attempts
    for n in range(1, attempts + 1):
        try:
            ev = _multi_evict_once(ctx, p)
        except EarlyEviction as exc:
            keep = ctx.claim_dir / f"failed-attempt-{n}"
            keep.mkdir(exist_ok=True)
            for name in ("logs", "events.parquet", "memory.parquet", "recipe.sh"):
                if (ctx.claim_dir / name).exists():
                    shutil.move(str(ctx.claim_dir / name), str(keep / name))
            if n == attempts:
                raise Inconclusive(f"{exc}, in all {attempts} attempts") from None
            continue
        ev.figures["attempts"] = n
        if n > 1:
            ev.notes.append(f"{n - 1} earlier attempt(s) failed to freeze Z before its first status message "
                            "(files in failed-attempt-N/)")
        return ev
    raise AssertionError("unreachable")
