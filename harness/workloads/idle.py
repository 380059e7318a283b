"""The idle-wake sweep: llama-idle's method, through a server.

Warm up, then for each pause of the grid (order shuffled per repetition with a
seeded RNG, so drift cannot masquerade as an effect): wait exactly that long after
the previous response ended, then decode one token with the prompt cached.
Nothing touches the server during a pause.  Works with any ``Server``.

Nothing is read or forked on the sweep's own thread around a request.  Every reading (page
cache, vm_stat/ioreg on a Mac, NVML, ...) is a device probe: an optional ``device_sampler``
(``PauseSampler``: device probes on a thread) is given each pause as a window that ends a guard
interval before the request; ``sampling_on(rep)`` says whether a repetition samples (the on/off
interleaving that measures the sampler's own effect); each measured row says so in
``device_sampling`` and carries the pause's last reading of each probe (``*_before`` columns).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.engines.base import Completion, Server
from harness.probes.sleepwatch import SleepWatch, slept_s

SPIN_S = 0.002  # sleep coarsely, then spin the last 2 ms for sub-ms pause accuracy


def pause_schedule(pauses_s: list[float], reps: int, seed: int, shuffle: bool = True) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    schedule: list[tuple[int, float]] = []
    for rep in range(reps):
        order = list(pauses_s)
        if shuffle:
            rng.shuffle(order)
        schedule += [(rep, p) for p in order]
    return schedule


def sleep_until(deadline: float) -> None:
    """Wait until ``time.perf_counter() >= deadline``."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if left > SPIN_S:
            time.sleep(left - SPIN_S)


def sample_row(c: Completion, *, phase: str, rep: int | None, seq: int, pause_requested_s: float,
               pause_actual_s: float | None) -> dict:
    t = c.timings or {}
    prompt_ms = t.get("prompt_ms")
    predicted_ms = t.get("predicted_ms")
    server_ms = prompt_ms + predicted_ms if prompt_ms is not None and predicted_ms is not None else None
    return {
        "phase": phase,
        "rep": rep,
        "seq": seq,
        "pause_requested_s": pause_requested_s,
        "pause_actual_s": pause_actual_s,
        "latency_ms": c.latency_ms,
        "server_prompt_ms": prompt_ms,
        "server_prompt_n": t.get("prompt_n"),
        "server_prompt_per_second": t.get("prompt_per_second"),
        "server_cache_n": t.get("cache_n"),
        "server_predicted_ms": predicted_ms,
        "server_predicted_n": t.get("predicted_n"),
        "server_ms": server_ms,
        "overhead_ms": c.latency_ms - server_ms if server_ms is not None else None,
        "client_ms": c.client_ms,
        "http_status": c.http_status,
        "error": c.error,
        "sent_at_unix_s": time.time() - (time.perf_counter() - c.t_send),
    }


class PauseSampler(Protocol):
    """Samples something on its own thread while a pause is waited out (harness/probes/devices/sampler.py)."""

    def window(self, meta: dict, start: float, send_at: float) -> bool: ...

    def stop(self) -> None: ...

    def before_request(self) -> dict: ...


class CellFailed(Exception):
    """The sweep cannot go on: the cell is failed with this cause (not a result)."""


class ServerGone(CellFailed):
    """The server under test exited mid-sweep."""


class DeadlineExceeded(CellFailed):
    """A request or the whole cell ran past its deadline (a frozen or stalled server)."""


# Deadlines (docs/reliability.md).  Before the warm-up has shown how fast this server answers, a
# request may take WARMUP_DEADLINE_S (or 3x the server's start-up time, for a model that reloads).
# After it: max(REQUEST_DEADLINE_FLOOR_S, 20x the slowest warm-up request, 3x the start-up time).
# The whole sweep (warm-up included) gets CELL_DEADLINE_FLOOR_S + 2x (the pauses + one request
# budget per request), the budget being max(1 s, 10x the slowest warm-up request, the start-up time).
WARMUP_DEADLINE_S = 120.0
REQUEST_DEADLINE_FLOOR_S = 30.0
REQUEST_DEADLINE_WARMUP_FACTOR = 20.0
CELL_DEADLINE_FLOOR_S = 60.0


@dataclass
class Deadlines:
    """Per-request and per-cell deadlines of one sweep.  ``request_s``/``cell_s`` given = fixed
    (spec/CLI); None = derived by the sweep from its warm-up (the values used are filled in)."""

    request_s: float | None = None
    cell_s: float | None = None
    startup_s: float | None = None  # how long the server took to become ready (a reload costs about this)
    derived_from: str | None = None

    def initial_request_s(self) -> float:
        if self.request_s is not None:
            return self.request_s
        return max(WARMUP_DEADLINE_S, 3 * (self.startup_s or 0.0))

    def derive(self, warmup_latencies_s: list[float], n_requests: int, sum_pauses_s: float) -> None:
        slowest = max(warmup_latencies_s, default=0.0)
        startup = self.startup_s or 0.0
        how = ["request: given"] if self.request_s is not None else []
        if self.request_s is None:
            self.request_s = round(max(REQUEST_DEADLINE_FLOOR_S, REQUEST_DEADLINE_WARMUP_FACTOR * slowest,
                                       3 * startup), 3)
            how.append(f"request: max({REQUEST_DEADLINE_FLOOR_S:g} s, {REQUEST_DEADLINE_WARMUP_FACTOR:g}x the "
                       f"slowest warm-up request {slowest:.3f} s, 3x start-up {startup:.2f} s)")
        if self.cell_s is None:
            budget = max(1.0, 10 * slowest, startup)
            self.cell_s = round(CELL_DEADLINE_FLOOR_S + 2 * (sum_pauses_s + n_requests * budget), 1)
            how.append(f"cell: {CELL_DEADLINE_FLOOR_S:g} s + 2x (pauses {sum_pauses_s:.1f} s + {n_requests} "
                       f"requests x {budget:.2f} s)")
        else:
            how.append("cell: given")
        self.derived_from = "; ".join(how)

    def as_dict(self) -> dict:
        return {"request_s": self.request_s, "cell_s": self.cell_s, "startup_s": self.startup_s,
                "derived_from": self.derived_from}


def set_request_timeout(server: Server, timeout_s: float) -> None:
    """Bound every request of ``server`` by ``timeout_s`` where its client allows (socket timeout)."""
    if server.client is not None:
        server.client.set_timeout(timeout_s)


def _past_deadline(c: Completion, deadline_s: float) -> bool:
    """A request that hit its deadline: the socket timed out, or (a client that cannot be
    bounded) the answer came after it.  Either way it is not a sample."""
    if c.error is not None:
        return "timed out" in c.error.lower()
    return c.latency_ms / 1000.0 > deadline_s


@dataclass
class SweepTotals:
    wall_s: float = 0.0  # first measured send .. last measured response
    sum_pause_requested_s: float = 0.0
    sum_server_ms: float = 0.0
    n: int = 0
    n_errors: int = 0


def run_idle_sweep(
    server: Server,
    pauses_s: list[float],
    *,
    reps: int,
    seed: int,
    warmup: int = 3,
    shuffle: bool = True,
    emit: Callable[[dict], None],
    on_progress: Callable[[], None] = lambda: None,
    alive: Callable[[], str | None] | None = None,
    deadlines: Deadlines | None = None,
    device_sampler: PauseSampler | None = None,
    sampling_on: Callable[[int], bool] | None = None,
) -> SweepTotals:
    """Measure; every observation goes to ``emit`` the moment it is taken.

    ``alive`` (optional) returns None while the server lives, else why it is gone: after a
    failed request a dead server ends the sweep with ``ServerGone`` (a failed cell, not a result).
    ``deadlines`` (default: derived) bound each request and the whole sweep: a request past its
    deadline, or a sweep past the cell's, ends it with ``DeadlineExceeded``; the values used are
    filled into ``deadlines``."""
    deadlines = deadlines if deadlines is not None else Deadlines()
    schedule = pause_schedule(pauses_s, reps, seed, shuffle)
    seq = 0
    last_done = None
    t_cell = time.perf_counter()
    request_s = deadlines.initial_request_s()
    set_request_timeout(server, request_s)
    warm_latencies: list[float] = []
    for _ in range(warmup):  # loads weights into caches and primes the prompt cache
        c = server.complete_one_token()
        emit(sample_row(c, phase="warmup", rep=None, seq=seq, pause_requested_s=0.0,
                        pause_actual_s=None if last_done is None else c.t_send - last_done))
        last_done = c.t_done
        seq += 1
        if c.error is None:
            warm_latencies.append(c.latency_ms / 1000.0)
        _check_request(c, request_s, alive, deadlines, what=f"warm-up request {seq} of {warmup}")
    deadlines.derive(warm_latencies, len(schedule), sum(p for _, p in schedule))
    assert deadlines.request_s is not None and deadlines.cell_s is not None
    cell_end = t_cell + deadlines.cell_s

    totals = SweepTotals()
    start = time.perf_counter() if last_done is None else last_done
    watch = SleepWatch()  # a sleep inside a pause: perf_counter stops, the sleep-counting clock does not
    done_stamp = watch.stamp()
    for rep, pause in schedule:
        if time.perf_counter() + pause > cell_end:
            raise DeadlineExceeded(f"the sweep passed its cell deadline of {deadlines.cell_s:g} s "
                                   f"({deadlines.derived_from}); {totals.n - totals.n_errors} of {len(schedule)} "
                                   "samples were measured")
        # a request gets its own deadline, never more than what is left of the cell's
        this_deadline = max(0.001, min(deadlines.request_s, cell_end - time.perf_counter() - pause))
        set_request_timeout(server, this_deadline)
        base = last_done if last_done is not None else time.perf_counter()
        arm = None
        if device_sampler is not None:  # the window ends a guard interval before the request
            arm = "on" if sampling_on is None or sampling_on(rep) else "off"
            if arm == "on":
                device_sampler.window({"rep": rep, "seq": seq, "pause_requested_s": pause}, base, base + pause)
        sleep_until(base + pause)
        if device_sampler is not None:
            device_sampler.stop()
        send_stamp = watch.stamp()
        c = server.complete_one_token()
        actual = c.t_send - base
        row = sample_row(c, phase="measure", rep=rep, seq=seq, pause_requested_s=pause, pause_actual_s=actual)
        row["slept_s"] = round(slept_s(done_stamp, send_stamp), 6)
        if arm is not None:
            row["device_sampling"] = arm
        if arm == "on" and device_sampler is not None:  # read after the request: the sampler stopped before it
            row.update(device_sampler.before_request())
        late = _past_deadline(c, this_deadline)
        if late and c.error is None:  # a client that could not be bounded: too late is not a sample
            row["error"] = f"answered after the request deadline of {this_deadline:g} s"
        emit(row)
        last_done = c.t_done
        done_stamp = watch.stamp()
        seq += 1
        totals.n += 1
        totals.sum_pause_requested_s += pause
        if row["server_ms"] is not None:
            totals.sum_server_ms += row["server_ms"]
        if row["error"]:
            totals.n_errors += 1
            _check_request(c, this_deadline, alive, deadlines,
                           what=f"measured request {totals.n} of {len(schedule)} (pause {pause:g} s)",
                           measured=f"; {totals.n - totals.n_errors} of {len(schedule)} samples were measured")
        on_progress()
    if last_done is not None:
        totals.wall_s = last_done - start
    return totals


def _check_request(c: Completion, deadline_s: float, alive: Callable[[], str | None] | None, deadlines: Deadlines,
                   *, what: str, measured: str = "") -> None:
    """After a failed or late request: end the sweep when the server is gone or past a deadline.
    Other failures (an HTTP error from a live server) are counted and fail the cell at its end."""
    if c.error is None and not _past_deadline(c, deadline_s):
        return
    gone = alive() if alive is not None else None
    if gone:
        raise ServerGone(f"the server died during the sweep ({gone}){measured}")
    if _past_deadline(c, deadline_s):
        which = "request" if deadlines.request_s is None or deadline_s >= deadlines.request_s else "cell"
        how = deadlines.derived_from or ("given" if deadlines.request_s is not None else
                                         f"warm-up: max({WARMUP_DEADLINE_S:g} s, 3x start-up)")
        raise DeadlineExceeded(f"no answer to {what} within {deadline_s:g} s (the {which} deadline; {how}): "
                               f"the server is alive but not answering (frozen?){measured}")


# --- the harness checking itself at the start of every cell (rows never mix with measured ones) ---
SELF_CHECK_TARGETS = {"overhead_p50_ms": 0.5, "overhead_p99_ms": 2.0, "harness_p50_ms": 0.2}
FLOOR_PATHS = {"floor-http": "/health", "floor-queue": "/slots"}  # HTTP only; HTTP + the server's task queue


def floor_row(c: Completion, *, phase: str, seq: int, pause_requested_s: float, pause_actual_s: float | None,
              path: str) -> dict:
    return {"phase": phase, "rep": None, "seq": seq, "pause_requested_s": pause_requested_s,
            "pause_actual_s": pause_actual_s, "latency_ms": c.latency_ms, "client_ms": c.client_ms,
            "floor_path": path,
            "http_status": c.http_status, "error": c.error,
            "sent_at_unix_s": time.time() - (time.perf_counter() - c.t_send)}


def run_self_check(server: Server, n: int, emit: Callable[[dict], None], warm: int = 2) -> dict:
    """``warm`` + ``n`` back-to-back completions, then ``n`` GETs of each floor endpoint on the same
    connection (when the server has ``floor``).  Rows carry phases "selfcheck-warmup", "selfcheck",
    "floor-http", "floor-queue" (never "measure").  Returns the figures (see ``self_check_figures``)."""
    rows: list[dict] = []

    def keep(row: dict) -> None:
        rows.append(row)
        emit(row)

    last = None
    for i in range(warm + n):
        c = server.complete_one_token()
        keep(sample_row(c, phase="selfcheck-warmup" if i < warm else "selfcheck", rep=None, seq=-(warm + n) + i,
                        pause_requested_s=0.0, pause_actual_s=None if last is None else c.t_send - last))
        last = c.t_done
    floor = server.floor
    if floor is not None:
        for phase, path in FLOOR_PATHS.items():
            for _ in range(n):
                c = floor(path)
                keep(floor_row(c, phase=phase, seq=-1, pause_requested_s=0.0,
                               pause_actual_s=None if last is None else c.t_send - last, path=path))
                last = c.t_done
    return self_check_figures(rows)


def run_floor_block(server: Server, pauses_s: list[float], reps: int, emit: Callable[[dict], None],
                    path: str = "/health") -> None:
    """The HTTP floor after pauses: GET ``path`` after each pause, as the sweep does completions."""
    floor = server.floor
    if floor is None:
        return
    last = time.perf_counter()
    for rep in range(reps):
        for pause in pauses_s:
            sleep_until(last + pause)
            c = floor(path)
            emit({**floor_row(c, phase="floor-http", seq=-1, pause_requested_s=pause,
                              pause_actual_s=c.t_send - last, path=path), "rep": rep})
            last = c.t_done


def _pct(values: list[float], q: float) -> float | None:
    values = sorted(v for v in values if v is not None and not math.isnan(v))
    if not values:
        return None
    k = (len(values) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def self_check_figures(rows: list[dict]) -> dict:
    """overhead = client latency - server time; floor = latency of GET /health (and /slots);
    harness = the client's own work on the timed path (``client_ms``, measured per request);
    beyond_floor = overhead - median floor: the server's untimed completion work plus the client's,
    an upper bound on the harness."""
    ok = [r for r in rows if r.get("error") is None]
    overhead = [r["overhead_ms"] for r in ok if r["phase"] == "selfcheck" and r.get("overhead_ms") is not None]
    client = [r["client_ms"] for r in ok if r["phase"] == "selfcheck" and r.get("client_ms") is not None]
    floor_http = [r["latency_ms"] for r in ok if r["phase"] == "floor-http"]
    floor_queue = [r["latency_ms"] for r in ok if r["phase"] == "floor-queue"]
    server = [r["server_ms"] for r in ok if r["phase"] == "selfcheck" and r.get("server_ms") is not None]
    floor_p50 = _pct(floor_http, 50)
    beyond = [o - floor_p50 for o in overhead] if floor_p50 is not None else []
    figures: dict[str, Any] = {  # figures (ms or None), then the warnings and notes about them
        "n": len(overhead),
        "overhead_p50_ms": _pct(overhead, 50), "overhead_p99_ms": _pct(overhead, 99),
        "floor_http_p50_ms": floor_p50, "floor_http_p99_ms": _pct(floor_http, 99),
        "floor_queue_p50_ms": _pct(floor_queue, 50),
        "harness_p50_ms": _pct(client, 50), "harness_p99_ms": _pct(client, 99),
        "beyond_floor_p50_ms": _pct(beyond, 50), "beyond_floor_p99_ms": _pct(beyond, 99),
        "server_ms_p50": _pct(server, 50),
    }
    over = [key for key, target in SELF_CHECK_TARGETS.items() if figures.get(key) is not None and figures[key] > target]
    # the overhead is over but lbench's own part and the HTTP floor are not: the server's untimed
    # work per request (larger for larger vocabularies), a property of this server and model, not noise
    server_side = (figures["harness_p50_ms"] is not None and "harness_p50_ms" not in over
                   and floor_p50 is not None and floor_p50 <= SELF_CHECK_TARGETS["harness_p50_ms"])
    figures["warnings"] = []
    for key in over:
        text = f"self-check {key} {figures[key]:.3f} ms over the target {SELF_CHECK_TARGETS[key]} ms"
        if server_side and key.startswith("overhead"):
            text += (f"; lbench's part ({figures['harness_p50_ms']:.3f} ms) and the HTTP floor ({floor_p50:.3f} ms) "
                     f"are within target, so the rest ({figures['beyond_floor_p50_ms']:.3f} ms p50) is the server's "
                     "untimed work per request, not noise")
        figures["warnings"].append(text)
    if not overhead:
        figures["note"] = "the server reports no timings: overhead and harness cost unknown, latency only"
        figures["latency_p50_ms"] = _pct([r["latency_ms"] for r in ok if r["phase"] == "selfcheck"], 50)
    return figures
