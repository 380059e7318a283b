"""Sample device probes on a thread while a pause is waited out, and stop before the request.

``window(meta, start, send_at)`` starts a thread that reads every probe every
``interval_s`` (bounded: never more often than ``MIN_INTERVAL_S``; a probe may ask for a
longer ``min_interval_s`` of its own) from ``start`` until ``guard_s`` before ``send_at``: no
reading *starts* later than ``send_at - guard_s - `` the slowest reading so far, so a reading
cannot touch the device the request then measures.  ``stop()`` (called just before the
request) ends the window without waiting.  For each probe the runtime power state is read
first; a device that is not ``active`` is recorded as left alone and nothing else is read.
Each reading is one row (``emit``), so an interrupted run keeps every reading taken.
``cpu_s``/``window_s`` add up the sampler thread's CPU time and the windows' length: the
cost of sampling, as a fraction of one core (docs/probes.md).  ``before_request()`` gives the
pause's last reading of each probe as the request row's ``*_before`` columns (``BEFORE_COLUMNS``):
the reading nearest the request, taken at least the guard before it, never in the window before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from harness.probes.devices.base import DeviceProbe, may_read

DEFAULT_INTERVAL_S = 0.5
MIN_INTERVAL_S = 0.1  # the bounded rate: at most 10 readings a second
DEFAULT_GUARD_S = 0.25  # no reading starts within this of the request
# (probe source, metric) -> the samples column that carries the pause's last reading of it
BEFORE_COLUMNS = {
    ("pagecache", "file_resident_pct"): "file_resident_pct_before",
    ("apple", "wired_bytes"): "wired_bytes_before",
    ("apple", "mem_used_bytes"): "apple_gpu_in_use_bytes_before",
    ("apple", "gpu_alloc_bytes"): "apple_gpu_alloc_bytes_before",
    ("nvml", "mem_used_bytes"): "gpu_used_bytes_before",
}


class DeviceSampler:
    def __init__(self, probes: Sequence[DeviceProbe], emit: Callable[[dict], None], *,
                 interval_s: float = DEFAULT_INTERVAL_S, guard_s: float = DEFAULT_GUARD_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if not interval_s >= MIN_INTERVAL_S:
            raise ValueError(f"device sampling interval {interval_s} s is below the bound of {MIN_INTERVAL_S} s")
        if not guard_s >= 0:
            raise ValueError("the guard interval must be >= 0")
        self.probes = list(probes)
        self.emit = emit
        self.interval_s = interval_s
        self.guard_s = guard_s
        self.clock = clock
        self.read_cost_s = 0.0  # the slowest whole reading (all probes) so far, decayed
        self.cpu_s = 0.0  # the sampler thread's CPU time, all windows
        self.window_s = 0.0  # the windows' wall time, all windows
        self.n_readings = 0
        self.n_left_alone = 0
        self._last: dict[int, float] = {}
        self._latest: dict[str, tuple[object, float]] = {}  # this window: column -> (value, seconds before send)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def room(self, send_at: float) -> bool:
        """Whether one reading fits before the guard."""
        return self.clock() + self.read_cost_s <= send_at - self.guard_s

    def window(self, meta: dict, start: float, send_at: float) -> bool:
        """Sample from now until the guard before ``send_at``; False (nothing started) when no
        reading fits.  ``meta`` (rep, seq, pause) goes into every row."""
        self.join()
        self._latest = {}
        if not self.room(send_at):
            return False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(dict(meta), start, send_at, self._stop),
                                        name="lbench-device-sampler", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """End the window now (the request is next); does not wait for a reading in progress."""
        self._stop.set()

    def join(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self, meta: dict, start: float, send_at: float, stop: threading.Event) -> None:
        cpu0, wall0 = time.thread_time(), self.clock()
        try:
            while not stop.is_set() and self.room(send_at):
                t0 = self.clock()
                for i, probe in enumerate(self.probes):
                    if t0 - self._last.get(i, -1e18) < getattr(probe, "min_interval_s", 0.0):
                        continue
                    self._last[i] = t0
                    self._read_one(probe, meta, start, send_at)
                cost = self.clock() - t0
                self.read_cost_s = max(self.read_cost_s * 0.8, cost)
                wait = t0 + self.interval_s - self.clock()
                if wait > 0 and stop.wait(wait):
                    break
        finally:
            self.cpu_s += time.thread_time() - cpu0
            self.window_s += self.clock() - wall0

    def _read_one(self, probe: DeviceProbe, meta: dict, start: float, send_at: float) -> None:
        t0 = self.clock()
        row: dict = {**meta, "probe": probe.name, "device": probe.device,
                     "t_since_pause_start_s": t0 - start, "t_before_send_s": send_at - t0,
                     "sampled_at_unix_s": time.time(), "runtime_status": None, "left_alone": False, "error": None}
        try:
            state = probe.power_state()
            row["runtime_status"] = state
            if may_read(state):
                values = probe.read()
                row.update(values)
                for metric, value in values.items():
                    column = BEFORE_COLUMNS.get((probe.name, metric))
                    if column is not None and value is not None and column not in self._first_device(probe):
                        self._latest[column] = (value, send_at - t0)
            else:
                row["left_alone"] = True
                self.n_left_alone += 1
        except Exception as exc:  # a probe failing is recorded, never sinks the run
            row["error"] = f"{type(exc).__name__}: {exc}"
        t1 = self.clock()
        row["read_ms"] = (t1 - t0) * 1000.0
        row["ended_after_send"] = t1 > send_at
        self.n_readings += 1
        self.emit(row)

    def _first_device(self, probe: DeviceProbe) -> set[str]:
        """Columns another device of the same source filled in this window (the first device of a source
        fills them: NVML device 0 before device 1)."""
        first = next(p for p in self.probes if p.name == probe.name)
        return set() if first is probe else {c for (name, _), c in BEFORE_COLUMNS.items() if name == probe.name}

    def before_request(self) -> dict:
        """The last reading of this window per ``BEFORE_COLUMNS`` column, and how long before the request
        the earliest of them started (``readings_before_send_s``); {} when nothing was read."""
        latest = dict(self._latest)
        if not latest:
            return {}
        return {**{column: value for column, (value, _) in latest.items()},
                "readings_before_send_s": round(max(ahead for _, ahead in latest.values()), 6)}

    def cost(self) -> dict:
        """What sampling cost so far: CPU seconds of the sampler thread over the windows' wall time."""
        return {"n_readings": self.n_readings, "n_left_alone": self.n_left_alone, "cpu_s": round(self.cpu_s, 6),
                "window_s": round(self.window_s, 3),
                "core_fraction": round(self.cpu_s / self.window_s, 6) if self.window_s > 0 else None,
                "interval_s": self.interval_s, "guard_s": self.guard_s,
                "slowest_reading_ms": round(self.read_cost_s * 1000.0, 3)}
