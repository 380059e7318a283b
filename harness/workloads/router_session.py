"""One swap backend under observation: the server, its memory sampler and its timeline.

A ``RouterSession`` starts a ``SwapBackend`` (llama-server's router, mlx_lm.server ...),
samples its process tree, keeps the load/unload timeline and each model's last known
state, and sends request plans through the swap driver.  Swap storms
(``runs.swap.execute_swap``) and claim scenarios (``repro.lab.Lab``) both use it, so a
storm and a claim see the same rows: ``request_row`` / ``event_row`` / ``memory_row``.

Every time in a row is seconds since the session's ``t0`` (``time.perf_counter()``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

import pandas as pd

from harness.probes.process_tree import TreeSample, TreeSampler
from harness.workloads.swap import RequestRecord, drive

if TYPE_CHECKING:
    from harness.engines.router import TimelineEvent

EVENT_COLUMNS = ["t_s", "source", "kind", "model", "detail", "text"]
MEMORY_COLUMNS = ["t_s", "children_alive", "rss_total_bytes", "rss_router_bytes", "rss_children_bytes",
                  "mem_available_bytes", "children"]


class ModelStates:
    """Each model's last status as the backend told it (/models/sse, or after a response); thread-safe."""

    def __init__(self, names: list[str]):
        self._lock = threading.Lock()
        self._status = {n: "unloaded" for n in names}

    def update(self, model: str | None, status: str | None) -> None:
        if model and status:
            with self._lock:
                self._status[model] = status

    def get(self, model: str) -> str | None:
        with self._lock:
            return self._status.get(model)


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def request_row(r: RequestRecord, t0: float) -> dict:
    """One row of the ``requests`` table (swap storms and claim scenarios alike)."""
    return {
        "index": r.index, "wave": r.wave, "model": r.model, "status_at_send": r.status_at_send,
        "resident_at_send": None if r.status_at_send is None else r.status_at_send == "loaded",
        "t_send_s": _rel(r.t_send, t0), "t_first_byte_s": _rel(r.t_first_byte, t0), "t_done_s": _rel(r.t_done, t0),
        "latency_ms": (r.t_done - r.t_send) * 1000 if r.t_done is not None else None,
        "ttfb_ms": (r.t_first_byte - r.t_send) * 1000 if r.t_first_byte is not None else None,
        "http_status": r.http_status, "error": r.error, "error_kind": r.error_kind,
        "server_prompt_ms": r.server_prompt_ms, **(r.extra or {}),
    }


def event_row(e: Any, t0: float) -> dict:
    """One row of the ``events`` table from a ``TimelineEvent``."""
    return {"t_s": _rel(e.t, t0), "source": e.source, "kind": e.kind, "model": e.model,
            "detail": json.dumps(e.detail), "text": e.text}


def memory_row(s: TreeSample, t0: float) -> dict:
    """One row of the ``memory`` table from a process-tree sample."""
    return {"t_s": _rel(s.t, t0), "children_alive": s.n_children, "rss_total_bytes": s.total_rss,
            "rss_router_bytes": s.root_rss, "rss_children_bytes": s.total_rss - s.root_rss,
            "mem_available_bytes": s.mem_available,
            "children": ";".join(f"{pid}:{rss}" for pid, rss in sorted(s.children.items()))}


class DriveOptions(TypedDict, total=False):
    """``harness.workloads.swap.drive``'s options that ``RouterSession.drive`` passes on."""

    concurrency: Required[int]
    n_predict: int
    prompt: str
    deadline: float | None
    timeout_s: float
    reuse_connections: bool
    before_send: Callable[[str], dict] | None
    stop_on_deadline: bool
    offsets: list[float] | None


class RouterSession:
    """Start a swap backend, sample it, keep its timeline; a context manager that closes both.

    ``start(on_event)`` builds the backend (it must call ``on_event`` with each
    ``TimelineEvent`` it sees).  ``on_event`` / ``on_sample`` / ``on_request`` get each row
    as it happens (a storm streams them to disk); ``keep`` also keeps the raw events and
    samples in memory (a claim scenario waits on them and reads them back).
    """

    def __init__(self, start: Callable[[Callable[[Any], None]], Any], names: list[str], *, sample_hz: float = 100.0,
                 t0: float | None = None, keep: bool = True, on_event: Callable[[dict], None] | None = None,
                 on_sample: Callable[[dict], None] | None = None):
        self._start = start
        self.t0 = time.perf_counter() if t0 is None else t0
        self.sample_hz = sample_hz
        self.keep = keep
        self.states = ModelStates(names)
        self.events: list = []
        self.samples: list[TreeSample] = []
        self._on_event, self._on_sample = on_event, on_sample
        self._cond = threading.Condition()
        self.backend: Any = None
        self.sampler: TreeSampler | None = None
        self.sampler_summary: dict | None = None

    # ---- lifecycle -------------------------------------------------------
    def start(self) -> "RouterSession":
        self.backend = self._start(self._event)
        self.sampler = TreeSampler(self.backend.pid, self._sample, self.sample_hz).start()
        return self

    def __enter__(self) -> "RouterSession":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the sampler (keeping its figures in ``sampler_summary``), then the backend."""
        try:
            if self.sampler is not None and self.sampler_summary is None:
                self.sampler.stop()
                span = time.perf_counter() - self.sampler.started
                self.sampler_summary = {"samples": self.sampler.n, "rate_hz": self.sample_hz,
                                        "achieved_hz": self.sampler.n / span if span else None,
                                        "cpu_s": round(self.sampler.cpu_s, 4),
                                        "cpu_share_of_one_core": self.sampler.cpu_s / span if span else None}
        finally:
            if self.backend is not None:
                self.backend.close()

    # ---- sinks -----------------------------------------------------------
    def _event(self, e: Any) -> None:
        if e.source == "sse":
            self.states.update(e.model, e.detail.get("status"))
        with self._cond:
            if self.keep:
                self.events.append(e)
            self._cond.notify_all()
        if self._on_event is not None:
            self._on_event(event_row(e, self.t0))

    def _sample(self, s: TreeSample) -> None:
        if self.keep:
            self.samples.append(s)
        if self._on_sample is not None:
            self._on_sample(memory_row(s, self.t0))

    def request_row(self, r: RequestRecord) -> dict:
        """The row of a finished request; a good response also updates model states the
        backend does not report itself (mlx_lm.server holds exactly the model it last served)."""
        if r.error is None and r.http_status == 200 and self.backend is not None:
            for name, status in self.backend.after_response(r.model).items():
                self.states.update(name, status)
        return request_row(r, self.t0)

    # ---- driving ---------------------------------------------------------
    def alive(self) -> bool:
        return self.backend is not None and self.backend.alive()

    def drive(self, plan: list[list[str]], *, emit: Callable[[dict], None], **kw: Unpack[DriveOptions]) -> int:
        """Send ``plan`` through the backend (its request path and body); ``emit`` gets each request's row."""
        return asyncio.run(drive(self.backend, plan, status_of=self.states.get, should_stop=lambda: not self.alive(),
                                 emit=lambda r: emit(self.request_row(r)), **kw))

    # ---- time and timeline -----------------------------------------------
    def now(self) -> float:
        return time.perf_counter() - self.t0

    def rel(self, t: float) -> float:
        return t - self.t0

    def wait_for(self, kind: str, model: str | None = None, timeout: float = 30.0, after: float = 0.0
                 ) -> TimelineEvent | None:
        """First event of ``kind`` (for ``model``) received after session time ``after``, or None."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events:
                    if e.kind == kind and (model is None or e.model == model) and self.rel(e.t) >= after:
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _matching(self, kind: str | tuple[str, ...], model: str | None) -> list:
        """The events of ``kind`` (one kind or several; for ``model``) so far; call with ``_cond`` held."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return [e for e in self.events if e.kind in kinds and (model is None or e.model == model)]

    def count(self, kind: str, model: str | None = None) -> int:
        """How many events of ``kind`` (for ``model``) have arrived so far."""
        with self._cond:
            return len(self._matching(kind, model))

    def wait_for_nth(self, kind: str | tuple[str, ...], model: str | None, n: int, timeout: float = 30.0
                     ) -> TimelineEvent | None:
        """The ``n``-th event (from 1) of ``kind`` (one kind or several; for ``model``), waiting until it
        has arrived, or None.
        Counted, not timed: a line the log reader had not yet passed on when a step began is not taken
        for a newer one (``wait_for`` with ``after`` would take it)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = self._matching(kind, model)
                if len(hits) >= n:
                    return hits[n - 1] if n > 0 else None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def event_frame(self) -> pd.DataFrame:
        with self._cond:
            rows = [event_row(e, self.t0) for e in self.events]
        return pd.DataFrame(rows, columns=EVENT_COLUMNS)

    def memory_frame(self) -> pd.DataFrame:
        return pd.DataFrame([memory_row(s, self.t0) for s in list(self.samples)], columns=MEMORY_COLUMNS)

    def peak_children(self) -> int:
        return max((s.n_children for s in list(self.samples)), default=0)
