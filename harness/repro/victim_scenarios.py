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
The figures are computed from the router's timeline by pure functions (``wanted_figures``,
``lru_round``, ``loading_lru_figures``, ``tick_evictions``), which tests run on constructed
timelines of the negated rule to show that the checks can come out "contradicted".
"""

from __future__ import annotations

import random
import re
import shlex
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.engines.router import TimelineEvent
from harness.repro.base import (Context, Evidence, Inconclusive, ModelsParams, RouterParams, found_child,
                                freeze_while_loading, long_request_busy, measure, router_scenario, scenario)
from harness.repro.figures import Figure, Given, Measured, OkCount, answered
from harness.repro.lab import Lab, Reply, log_ere


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


def _first(events: list[TimelineEvent], kind: str, model: str | None = None,
           after: float | None = None) -> TimelineEvent | None:
    return next((e for e in events if e.kind == kind and (model is None or e.model == model)
                 and (after is None or e.t >= after)), None)


def fast_child_pid(lab: Lab, model: str, timeout: float = 10.0) -> int | None:
    """PID of the router child serving ``model``, found within a millisecond of its spawn: reads
    only the router's ``/proc/<pid>/task/*/children`` lists (``Lab.child_pid`` scans every
    process, too slow to stop a child before its first status message)."""
    root = lab.router.pid
    if not Path(f"/proc/{root}/task").is_dir():
        return lab.child_pid(model, timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for children in Path(f"/proc/{root}/task").glob("*/children"):
            try:
                pids = children.read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"--alias" in argv[:-1] and argv[argv.index(b"--alias") + 1].decode(errors="replace") == model:
                    lab.__dict__.setdefault("_pid_model", {})[int(pid)] = model
                    return int(pid)
        time.sleep(0.0002)
    return None


# ---- wanted-victim ---------------------------------------------------------------------

def wanted_figures(events: list[TimelineEvent], a: str, c: str, t_thaw: float) -> dict:
    """Figures of ``wanted-victim`` from the timeline (times: perf_counter, as the events).

    A came up after ``t_thaw`` with its own request still queued; C was queued and needed a
    slot.  The rule: A is not evicted before its request has been proxied (the waiter leaves
    the queue right before the proxy), and A is served by the spawn that was frozen (one spawn
    of A before its first proxy).  The negation evicts A at the tick of its status change, so
    the router logs 'evicting idle LRU name=A' before 'proxying request to model A'."""
    loaded = _first(events, "status:loaded", a, t_thaw)
    proxy_a = _first(events, "proxy", a, t_thaw)
    evict_a = _first(events, "evict", a, t_thaw)
    spawn_c = _first(events, "spawn", c)
    first = _first(events, "evict", None, t_thaw)
    spawns_a = [e for e in events if e.kind == "spawn" and e.model == a]
    before_proxy = [e for e in spawns_a if proxy_a is None or e.t <= proxy_a.t]
    return {
        "a_came_up": loaded is not None,
        "a_evicted_while_wanted": bool(evict_a and (proxy_a is None or evict_a.t < proxy_a.t)),
        "a_spawns_before_served": len(before_proxy),
        "a_evicted_after_served": bool(evict_a and proxy_a and evict_a.t > proxy_a.t),
        "first_victim": first.model if first else None,
        "c_spawned_after_a_evicted": bool(spawn_c and evict_a and spawn_c.t > evict_a.t),
    }


def _wanted_shell(lab: Lab, a: str) -> dict[str, tuple[str, str]]:
    """``wanted_figures`` in shell (figure -> command, what it is): the router log's line order
    after the thaw (lbench orders the same lines by the time it read them, in the same order), A's
    coming up from /models/sse."""
    proxy = f"p=$({lab.sh_log_line_of('proxy', a, 'thaw')}); "
    evict = f"e=$({lab.sh_log_line_of('evict', a, 'thaw')}); "
    spawn = log_ere("spawn", a)
    return {
        "a_came_up": (lab.sh_flag(f'[ -n "$({lab.sh_sse_first(a, "loaded", "thaw")})" ]'),
                      f"/models/sse sent {a} loaded after the thaw"),
        "a_evicted_while_wanted": (lab.sh_flag(proxy + evict + '[ -n "$e" ] && { [ -z "$p" ] || [ "$e" -lt "$p" ]; }'),
                                   f"an eviction line for {a} after the thaw, before its request's proxy line "
                                   "(or with none)"),
        "a_spawns_before_served": (proxy + f"RE={shlex.quote(str(spawn))} awk -v p=\"${{p:-0}}\" '$0 ~ ENVIRON[\"RE\"] "
                                   "&& (p == 0 || NR <= p) {n++} END {print n + 0}' \"$WORK/router.stderr.log\"",
                                   f"spawn lines for {a} before its request's proxy line after the thaw"),
        "a_evicted_after_served": (lab.sh_flag(proxy + evict + '[ -n "$e" ] && [ -n "$p" ] && [ "$e" -gt "$p" ]'),
                                   f"{a}'s first eviction line after the thaw comes after its request's proxy line")}


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
        queued_c = lab.wait_for("queued", c, timeout=10, after=after)
        lab.sleep(0.2)
        premature = [e for e in lab.events if e.kind in ("evict", "stop_sent", "kill_loading")]
        t_thaw = time.perf_counter()
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
    values = wanted_figures(lab.events, a, c, t_thaw)
    measure(ev, lab, **{name: Measured(values.pop(name), *shell) for name, shell in _wanted_shell(lab, a).items()},
            c_ok=answered(c))
    ev.figures.update(values, expected_victim=a, b_busy_throughout=b_busy, a_ok=answered(a).value(lab))
    ev.lines = lab.lines("queued", "status:loaded", "proxy", "evict", "stop_sent", "exited", "spawn")[:20]
    ev.notes = [f"{b}'s child was frozen (SIGSTOP) with one request in flight from before A was spawned until "
                f"C's request was answered, so at the tick of A's status change A was the only idle model and "
                f"{c} was queued for a slot"]


# ---- lru-order -------------------------------------------------------------------------

def lru_round(touch_order: list[str], resident_since: dict[str, int], victim: str | None) -> dict:
    """One round of ``lru-order``: the residents were used in ``touch_order`` (oldest first),
    ``resident_since`` numbers them by load; what LRU and two wrong rules predict, and the victim."""
    lru = touch_order[0]
    by_name = sorted(touch_order)[0]
    oldest_load = min(touch_order, key=lambda m: resident_since[m])
    mru = touch_order[-1]
    return {"expected": lru, "victim": victim, "lru": victim == lru,
            "distinguishing": lru not in (by_name, oldest_load, mru)}


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


def _lru_shell(rounds: list[dict[str, object]]) -> dict[str, tuple[str, str]]:
    """``lru-order``'s figures in shell (figure -> command, what it is) from the model each round's
    eviction line named (``V_i``): the least recently used model of each round is the plan's (its
    use order), set when written."""
    victims = " ".join(f'"$V_{i}"' for i in range(1, len(rounds) + 1))
    expected = " ".join(shlex.quote(str(r["expected"])) for r in rounds)
    telling = " ".join("1" if r["distinguishing"] else "0" for r in rounds)
    pairs = f"set -- {victims}; e=({expected}); d=({telling}); i=0; n=0; bad=0; dist=0; for v in \"$@\"; do "
    count = pairs + ('[ -n "$v" ] && { n=$((n + 1)); dist=$((dist + d[i])); }; [ "$v" = "${e[i]}" ] || '
                     'bad=$((bad + 1)); i=$((i + 1)); done; ')
    return {"round_victims": (f"echo {' '.join(f'$V_{i}' for i in range(1, len(rounds) + 1))} | tr ' ' ,",
                              "the model each round's first eviction line named"),
            "rounds": (count + "echo $n", "rounds that ended in an eviction"),
            "non_lru_victims": (count + "echo $bad",
                                "rounds whose victim was not the least recently used model of the round's use order"),
            "distinguishing_rounds": (count + "echo $dist", "rounds that evicted, whose LRU model is neither first by "
                                      "name, nor longest resident, nor most recent (a property of the plan)")}


def lru_figures(rounds: list[dict[str, object]]) -> dict[str, object]:
    """``lru-order``'s figures from its rounds (``lru_round``)."""
    n = len(rounds)
    return {"round_victims": ",".join(str(r["victim"]) for r in rounds if r["victim"]), "rounds": n,
            "lru_victims": sum(bool(r["lru"]) for r in rounds), "non_lru_victims": n - sum(bool(r["lru"]) for r in rounds),
            "distinguishing_rounds": sum(bool(r["distinguishing"]) for r in rounds),
            "evictions": sum(1 for r in rounds if r["victim"])}


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
    rounds = []
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
        evict = lab.wait_for("evict", timeout=10, after=after)
        lab.act(f"V_{i}=$({lab.sh_log_first_evicted(after=f'round{i}')})  # the model evicted in round {i}")
        rounds.append(lru_round(order, since, evict.model if evict else None))
        if evict is None or reply.status != 200:
            break
        resident = [m for m in resident if m != evict.model] + [outside]
        since[outside] = load_no
        load_no += 1
        outside = str(evict.model)
    yield
    values = lru_figures(rounds)
    measure(ev, lab, **{name: Measured(values.pop(name), *shell) for name, shell in _lru_shell(rounds).items()},
            rounds_wanted=Given(p.rounds))
    ev.figures.update(values, path="POST /models/load (unload_lru)" if via_load else "request (tick)")
    ev.lines = [f"round {i + 1}: least recently used {r['expected']}, evicted {r['victim']}"
                for i, r in enumerate(rounds)] + lab.lines("evict")[:8]


# ---- loading-lru -----------------------------------------------------------------------

def loading_lru_figures(events: list[TimelineEvent], a: str, b: str, t_c: float) -> dict:
    """A (loading, least recently used: stamped at its spawn) and B (idle, used after A's spawn)
    are the candidates when C is requested at ``t_c``: the rule evicts B; the negation evicts A
    (the router logs 'is still loading, force-killing')."""
    first = _first(events, "evict", None, t_c)
    killed = _first(events, "kill_loading", a, t_c)
    return {"victim": first.model if first else None,
            "a_killed_while_loading": killed is not None,
            "a_evicted_while_loading": bool(killed or (first and first.model == a))}


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
    t_c = lab.t0 + lab.now()
    load_reply: list[Reply] = []
    if via_load:
        c_thread = threading.Thread(target=lambda: load_reply.append(lab.post("/models/load", c)), daemon=True)
        c_thread.start()
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
    values = loading_lru_figures(lab.events, a, b, t_c)
    if not via_load:
        c_ok: Figure = answered(c)
    else:  # POST /models/load answers once C is spawned
        c_ok = Measured(bool(load_reply) and load_reply[0].status == 200, lab.sh_flag(
            f"grep -qx 200 \"$WORK/reply-{load_reply[0].sh_n}.status\"") if load_reply else "echo false",
            f"POST /models/load for {c} got HTTP 200")
    first_evicted = lab.sh_log_first_evicted(after="c")
    measure(ev, lab, victim=Measured(values.pop("victim"), first_evicted,
                                     f"the model the first eviction line after {c}'s request names"),
            a_evicted_while_loading=Measured(
                values.pop("a_evicted_while_loading"),
                lab.sh_flag(f'[ "$({lab.sh_log_count_between("c", None, "kill_loading", a)})" -gt 0 ] || '
                            f'[ "$({first_evicted})" = {shlex.quote(a)} ]'),
                f"after {c}'s request the router force-killed loading {a} or named it in its first eviction line"),
            expected_victim=Given(b), c_ok=c_ok)
    ev.figures.update(values)
    ev.lines = lab.lines("queued", "evict", "stop_sent", "kill_loading", "exited", "spawn")[:14]


# ---- lru-get: is a GET a use? ---------------------------------------------------------

def lru_get_figures(events: list[TimelineEvent], a: str, b: str, t_c: float) -> dict:
    """A and B resident (A requested first, then B, both by POST), then a GET for A, then C
    requested at ``t_c``: if every request is a use, B is the least recently used and goes; if
    only POSTs stamp ``last_used``, A goes."""
    first = _first(events, "evict", None, t_c)
    return {"victim": first.model if first else None, "lru_by_use": b, "lru_by_post_only": a}


@dataclass(frozen=True)
class LruGetParams(ModelsParams):
    get_path: str = "/props"  # a GET the router proxies to the model's child (proxy_get)


@router_scenario("lru-get", LruGetParams, models_max=2)
def lru_get(lab: Lab, p: LruGetParams, ev: Evidence) -> Iterator[None]:
    """models_max 2: POST A, POST B, GET <get_path>?model=A, POST C: which model is evicted."""
    a, b, c = lab.names[:3]
    lab.request(a)
    lab.request(b)
    got = lab.get(p.get_path, a)
    lab.settle()  # A still in flight would be skipped: B evicted, as if the GET were a use
    t_c = lab.t0 + lab.now()
    lab.log_mark("c")
    lab.request(c)
    lab.wait_for("evict", timeout=5, after=t_c - lab.t0)
    lab.sleep(0.2)
    yield
    proxied_get = any(e.kind == "proxy" and e.model == a and e.t >= got.t_send for e in lab.events
                      if e.t <= t_c)
    if got.status != 200 or not proxied_get:
        raise Inconclusive(f"GET {p.get_path}?model={a} was not proxied to {a} (status {got.status}); "
                           "choose a GET the router proxies")
    values = lru_get_figures(lab.events, a, b, t_c)
    measure(ev, lab, victim=Measured(values.pop("victim"), lab.sh_log_first_evicted(after="c"),
                                     f"the model the first eviction line after {c}'s request names"),
            lru_by_use=Given(values.pop("lru_by_use")), c_ok=answered(c))
    ev.figures.update(values, get_status=got.status)
    ev.lines = [f"POST {a}, POST {b}, GET {p.get_path}?model={a} ({got.status}), POST {c}: "
                f"evicted {ev.figures['victim']}"] + lab.lines("proxy", "evict", "spawn")[:10]


# ---- multi-evict: several evictions in one tick -----------------------------------------

ROUTER_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


def router_stamp_s(text: str) -> float | None:
    """The router's own log time (``M.SS.mmm.uuu`` since its start) in seconds, or None."""
    m = ROUTER_STAMP.match(text.strip())
    if not m:
        return None
    mins, secs, ms, us = (int(x) for x in m.groups())
    return mins * 60 + secs + ms / 1e3 + us / 1e6


def tick_evictions(events: list[TimelineEvent], after: float, before: float) -> dict:
    """The 'evicting idle LRU ... for a queued request' lines (``tick()``) received in
    [``after``, ``before``): while every child is frozen, nothing can exit, so no second tick
    can find a slot short and a victim: all of them come from the tick of the request sent at
    ``after``.  The negated rule (one eviction per tick) logs one line there and the next only
    after the first victim has exited."""
    window = [e for e in events if e.source == "router" and after <= e.t < before]
    evicts = [e for e in window if e.kind == "evict" and "for a queued request" in e.text]
    exits = [e for e in window if e.kind == "exited"]
    if exits:  # a line after an exit may come from that exit's tick
        evicts = [e for e in evicts if e.t < exits[0].t]
    stamps = [s for s in (router_stamp_s(e.text) for e in evicts) if s is not None]
    return {"tick_evictions": len(evicts), "tick_victims": ",".join(str(e.model) for e in evicts),
            "exits_in_window": len(exits),
            "tick_span_ms": round((stamps[-1] - stamps[0]) * 1000, 3)
            if len(stamps) > 1 and len(stamps) == len(evicts) else None}


def tick_lines_sh(after: str, until: str) -> str:
    """``tick_evictions`` in shell: the router log's 'evicting idle LRU ... for a queued request'
    lines between log marks ``after`` and ``until``, before the first exit line there."""
    return (f"{Lab.sh_log_lines(after, until)} | awk -v x={shlex.quote(str(log_ere('exited', None)))} "
            "'$0 ~ x {exit} {print}' | grep -E -- 'for a queued request' | grep -E -- "
            + shlex.quote(str(log_ere("evict", None))))


def _multi_evict_once(ctx: Context, p: MultiEvictParams) -> Evidence:
    """models_max 4: A and B loaded and idle; H's load (a request) frozen, so H heads the queue;
    X queues behind H (a slot is free, so no eviction); Z loaded by POST /models/load (no queue
    entry, no tick) and frozen: now the 4 slots are taken while X still needs one.  A and B are
    frozen too (idle, but unable to exit).  A request for Y then finds two queued requests short
    of slots and two idle models: its tick should evict both.  (Two requests sent at once cannot show this: each
    request's own tick evicts one.)"""
    models = ctx.router_models(p.models)
    a, b, h, z, x, y = (m.name for m in models[:6])
    ev = Evidence()
    with ctx.lab(models, models_max=4, evidence=ev) as lab:
        lab.request(a)
        lab.request(b)
        threads = [lab.request_in_background(h, timeout=180)]
        pids = [freeze_while_loading(lab, h)]
        try:
            after = lab.now()
            threads.append(lab.request_in_background(x, timeout=180))
            queued_x = lab.wait_for("queued", x, timeout=10, after=after)
            # Z is frozen within a millisecond of its spawn: its first status message would run a
            # tick while X is one slot short, and that tick would evict A alone
            lab.note("lbench sends this POST in the background and stops Z within a millisecond of its spawn; the "
                    "script stops the first new child of the router (new_child polls /proc with shell builtins); "
                    "when the router still logs an eviction before Y's request, the script runs again")
            lab.act("KNOWN=$(children_now)")
            poster = threading.Thread(target=lab.post, args=("/models/load", z), daemon=True)
            poster.start()
            pid_z = fast_child_pid(lab, z)
            if pid_z is None:
                raise Inconclusive(f"{z}'s child never appeared")
            lab.freeze_new_child(pid_z)  # (the POST's curl line was recorded before the request, so before this)
            pids.append(pid_z)
            poster.join(30)
            for m in (a, b):  # idle victims that cannot exit: only Y's own tick can evict them
                pid = found_child(lab, m)
                lab.freeze(pid)
                pids.append(pid)
            early = [e for e in lab.events if e.kind == "evict"]
            t_y = time.perf_counter()
            lab.log_mark("y")
            after = lab.now()
            threads.append(lab.request_in_background(y, timeout=180))
            queued_y = lab.wait_for("queued", y, timeout=10, after=after)
            lab.sleep(0.5)
            t_thaw = time.perf_counter()
            lab.log_mark("thaw")
        finally:
            for pid in pids:
                lab.thaw(pid)
        for t in threads:
            t.join(180)
        lab.sleep(0.2)
    if queued_x is None or queued_y is None:
        raise Inconclusive("the request for X or Y was never queued")
    if early:
        raise EarlyEviction(f"the router evicted {early[0].model} before Y was requested (a status message of "
                            "Z reached the router before Z was frozen, and its tick found X one slot short)")
    values = tick_evictions(lab.events, t_y, t_thaw)
    window = tick_lines_sh("y", "thaw")
    measure(ev, lab, tick_evictions=Measured(values.pop("tick_evictions"), f"{window} | wc -l | tr -d ' '",
                                             "'evicting idle LRU ... for a queued request' lines between Y's request "
                                             "and the thaw, before the first exit line there"),
            tick_victims=Measured(values.pop("tick_victims"), f"{window} | sed -E 's/.*evicting idle LRU name=(.*) for "
                                  "a queued request.*$/\\1/' | paste -sd, -", "the models those lines name, in order"),
            expected_victims=Given(f"{a},{b}"), ok=OkCount((h, x, y), "requests for H, X and Y answered with HTTP 200"))
    ev.figures.update(values)
    lab.retry_when(f'[ "$({lab.sh_log_lines(None, "y")} | grep -cE -- {shlex.quote(str(log_ere("evict", None)))})" -gt 0 ]',
                   "the router evicted a model before Y's request (a status message of Z reached it before Z was "
                   "stopped): this attempt cannot show the situation", p.attempts)
    ev.lines = [f"t={lab.rel(e.t):.4f}s {e.source}: {e.text.strip()}" for e in lab.events
                if e.source == "router" and e.t >= t_y][:12]
    ev.notes = ["A and B were frozen (SIGSTOP) from before Y was requested until 0.5 s after, so neither could "
                "exit: every eviction line in that window comes from the tick of Y's request"]
    return ev


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
