"""Exit-before-spawn: the order of a victim's exit and the replacement's spawn, exactly.

The router's log cannot order them (its ``exited`` line is written after the status change
that wakes the next load, see docs/claims.md), and /proc sampling can miss a short overlap.
The kernel's process events (``harness.probes.proc_events``) can: each fork and exit of the
router's children with the kernel's own timestamp.  A spawn while ``models_max`` children are
alive (exited = gone, even before the router reaps it) is a spawn before the victim's exit.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.probes.proc_events import ChildEvents, ProcEvent
from harness.repro.base import Context, Evidence, ModelsParams, children_from_log, measure, scenario, spawns_over_cap
from harness.repro.figures import OkCount, Unmeasured


@dataclass(frozen=True)
class ExitOrderParams(ModelsParams):
    models_max: int = 2
    rounds: int = 3
    waves: int = 3


def fork_exit_order(events: list[ProcEvent], models_max: int) -> dict:
    """Replay the router's children by the kernel's timestamps: spawns made while
    ``models_max`` were alive, the peak alive, and for each spawn that needed a slot
    (the cap was full before the latest exit) the gap from that exit to the spawn."""
    alive: set[int] = set()
    peak = spawns = over = 0
    full_before_exit = False
    last_exit: int | None = None
    gaps_us: list[float] = []
    for e in sorted(events, key=lambda e: e.t_ns):
        if e.kind == "exit":
            if e.pid in alive:
                full_before_exit = len(alive) >= models_max > 0
                alive.discard(e.pid)
                last_exit = e.t_ns
            continue
        spawns += 1
        if models_max > 0 and len(alive) >= models_max:
            over += 1
        elif full_before_exit and last_exit is not None:
            gaps_us.append((e.t_ns - last_exit) / 1000)
            full_before_exit = False
        alive.add(e.pid)
        peak = max(peak, len(alive))
    return {"spawns_seen": spawns, "spawns_while_full": over, "peak_children_exact": peak,
            "swaps_timed": len(gaps_us),
            "min_exit_to_spawn_us": round(min(gaps_us), 1) if gaps_us else None,
            "median_exit_to_spawn_us": round(sorted(gaps_us)[len(gaps_us) // 2], 1) if gaps_us else None}


@scenario("exit-before-spawn", ExitOrderParams)
def exit_before_spawn(ctx: Context, p: ExitOrderParams) -> Evidence:
    """models_max N over more models: ``rounds`` of one request per model in turn, then ``waves``
    of one request per model sent at once, with the kernel's fork and exit events recorded."""
    models = ctx.router_models(p.models)
    names = [m.name for m in models]
    cap = p.models_max
    ev = Evidence()
    listener = ChildEvents()
    try:
        with ctx.lab(models, models_max=cap, evidence=ev) as lab:
            listener.watch(lab.router.pid)
            for _ in range(p.rounds):
                for n in names:
                    lab.request(n)
            for _ in range(p.waves):
                threads = [lab.request_in_background(n) for n in names]
                for t in threads:
                    t.join(120)
            lab.sleep(0.3)
            events = list(listener.events)  # before the router's shutdown stops its children
    finally:
        listener.close()
    why = ("read from the kernel's process events connector (a netlink socket, root only), which no portable shell "
           "tool reads; `strace -f -e trace=process -ttt -p <router pid>` shows the same forks and exits, by ptrace")
    kernel = {**fork_exit_order(events, cap), "lost_messages": listener.lost}
    measure(ev, lab, **{name: Unmeasured(kernel.pop(name), why)
                        for name in ("spawns_seen", "spawns_while_full", "peak_children_exact", "lost_messages")})
    ev.figures.update(kernel, models_max=cap, router_spawn_lines=sum(1 for e in lab.events if e.kind == "spawn"),
                      ok=OkCount().value(lab), requests=len(lab.replies))
    log = children_from_log(lab.events)
    ev.figures.update(peak_children_log=log["peak_children_log"],
                      spawn_lines_before_victim_exit_line=spawns_over_cap(log["log_order"], cap))
    t0 = events[0].t_ns if events else 0
    ev.lines = [f"+{(e.t_ns - t0) / 1e6:.3f} ms kernel: {e.kind} pid {e.pid}" for e in events][:24]
    failed = [r for r in lab.replies if r.status != 200]
    ev.notes = ["times are the kernel's own stamps (CLOCK_MONOTONIC) of fork() and exit() of the router's children; "
                "an exited child counts as gone even before the router reaps it, and the router reaps the victim "
                "before it marks it unloaded, so 'exit before spawn' is the weakest order the seed's claim implies",
                f"the router log's line order (spawn +1, exited -1) put {ev.figures['spawn_lines_before_victim_exit_line']} "
                "spawn line(s) before the victim's 'exited' line (peak "
                f"{ev.figures['peak_children_log']}): that line is written after the status change that wakes the "
                "next load, so the log cannot order the two; the kernel's events can"]
    ev.notes += [f"request for {r.model} got {r.status}: {(r.body or r.error or '')[:200]}" for r in failed[:3]]
    return ev

