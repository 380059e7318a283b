"""The first request after a cold start, an eviction or a sleep, measured on its own
(``lbench swap --first-request``): per repetition, starting state and model, a fresh router,
the state set up, then one request timed end to end.  Its phases come from the router's
timeline (harness/analysis/swap_first.py); this module only sets up the states and sends.

States (``harness.spec.FIRST_STATES``):

``cold``
    a fresh router, the model file dropped from the page cache (``posix_fadvise(DONTNEED)``,
    harness/probes/pagecache.py) just before the request.
``warm``
    a fresh router, the model file read through first (in the page cache).
``evicted``
    a fresh router under ``--models-max 1``: another model is loaded first (one request), so
    the measured request makes the router evict it (an LRU eviction) before the load.
``slept``
    a fresh router with ``--sleep-idle-seconds`` (the spec's, else 1): the model is loaded
    (one request), lbench waits for /models/sse to say it is sleeping, then sends the request.

Before each repetition lbench times its own read of every model file, cold (after eviction)
and warm (right after), the floor the load's bytes per second is compared with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.engines.router import RouterModel, TimelineEvent
from harness.models.resolve import local_file
from harness.probes import pagecache
from harness.runs.idle import Reporter
from harness.runs.session import RunSession
from harness.workloads.router_session import RouterSession

if TYPE_CHECKING:
    from harness.runs.swap import PreparedSwap

SLEEP_WAIT_S = 120.0  # longest wait for /models/sse to report a model sleeping (the state's set-up)


def read_floor(path: Path) -> dict[str, float | None]:
    """This host's own read of ``path``: bytes/s cold (after eviction from the page cache) and warm."""
    pagecache.evict(path)
    cold = pagecache.timed_read(path)
    warm = pagecache.timed_read(path)
    size = path.stat().st_size
    return {"bytes": float(size), "cold_bytes_per_s": size / cold if cold > 0 else None,
            "warm_bytes_per_s": size / warm if warm > 0 else None}


def run_first_requests(prep: "PreparedSwap", run: RunSession, reporter: Reporter, t0: float,
                       on_request: Callable[[dict], None], on_event: Callable[[dict], None]) -> None:
    """Every (repetition, state, model): a fresh router, the state, one measured request."""
    spec = prep.spec
    writer = run.writer
    names = prep.names
    files = {n: local_file(m) for n, m in zip(names, prep.models)}
    router_models = [RouterModel(n, m.path, spec.stop_timeout_s) for n, m in zip(names, prep.models)]
    floors: list[dict] = []
    reporter.cell(f"{spec.engine} · first request · {', '.join(spec.first_request)} · {len(names)} models",
                  spec.first_reps * len(spec.first_request) * len(names))
    for rep in range(spec.first_reps):
        for name in names:
            path = files[name]
            if path is not None:
                floors.append({"rep": rep, "model": name, **read_floor(path)})
        run.update(read_floor={"rows": floors})  # kept as measured: a run stopped later still has them
        for state in spec.first_request:
            for i, name in enumerate(names):
                router = _measure_one(prep, router_models, names, files, t0, rep, state, name,
                                      names[(i + 1) % len(names)], on_request, on_event, writer.dir)
                if router is not None:  # the last router's command line and preset (each state sets its own)
                    run.update(router={**router, "started_t_s": None})
                reporter.advance()


def _measure_one(prep: "PreparedSwap", router_models: list[RouterModel], names: list[str],
                 files: dict[str, Path | None], t0: float, rep: int, state: str, name: str, other: str,
                 on_request: Callable[[dict], None], on_event: Callable[[dict], None], run_dir: Path) -> dict | None:
    """One first request: a fresh router with the state's settings, the state, the request, the router closed.
    Returns the router's description (None: it never came up)."""
    spec = prep.spec
    make_swap = prep.engine.make_swap
    assert make_swap is not None  # the registry refuses a 'swap' engine without one
    settings = dataclasses.replace(spec, models_max=1 if state == "evicted" else spec.models_max,
                                   sleep_idle_seconds=(spec.sleep_idle_seconds or 1) if state == "slept" else None)

    def start(on: Callable[[TimelineEvent], None]) -> object:
        return make_swap(prep.options, binary=prep.binary, models=router_models, spec=settings, run_dir=run_dir,
                         on_event=on)

    session = RouterSession(start, names, sample_hz=spec.sample_hz, t0=t0, keep=True, on_event=on_event)
    extra: dict[str, object] = {"first_state": state, "first_rep": rep}
    described = None
    try:
        session.start()
        described = session.backend.describe()
        _set_up(session, state, name, other, files, extra,
                lambda row: on_request({**row, **extra, "first_measured": False}))
        loaded_before = session.count("status:loaded", name)
        answered: list[bool] = []

        def emit(row: dict) -> None:
            answered.append(row.get("error") is None)
            on_request({**row, **extra, "first_measured": True})

        session.drive([[name]], concurrency=1, n_predict=spec.n_predict, timeout_s=prep.deadline["request_s"],
                      emit=emit)
        if any(answered) and session.backend.reports_states:
            # The answer can reach lbench before /models/sse's events of the same load (two streams; seen
            # under two CPU hogs). The router sends them in order, ending with "loaded": wait for this
            # load's "loaded" so its events are in the timeline before the router closes. The analysis
            # still places a marker only between the send and the answer.
            session.wait_for_nth("status:loaded", name, loaded_before + 1, timeout=prep.deadline["request_s"])
    finally:
        session.close()
    return dict(described) if described is not None else None


def _set_up(session: RouterSession, state: str, name: str, other: str, files: dict[str, Path | None],
            extra: dict[str, object], emit: Callable[[dict], None]) -> None:
    """Put the router in ``state`` for a first request to ``name`` (``other``: the model evicted)."""
    path = files[name]
    if state == "cold" and path is not None:
        pagecache.evict(path)
        frac = pagecache.resident_fraction(path)
        extra["file_resident_pct_at_send"] = None if frac is None else round(100 * frac, 2)
    elif state == "warm" and path is not None:
        pagecache.warm(path)
    elif state == "evicted":
        if path is not None:
            pagecache.warm(path)
        session.drive([[other]], concurrency=1, n_predict=1, emit=emit)
        extra["first_victim"] = other
    elif state == "slept":
        if path is not None:
            pagecache.warm(path)
        t = session.now()
        session.drive([[name]], concurrency=1, n_predict=1, emit=emit)
        if session.wait_for("status:sleeping", name, timeout=SLEEP_WAIT_S, after=t) is None:
            extra["first_setup_error"] = f"{name} did not report sleeping within {SLEEP_WAIT_S:g} s"

