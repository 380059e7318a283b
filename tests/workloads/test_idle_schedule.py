"""Scheduling logic of the idle sweep, with a scripted in-process server.

This does not test the engine path (tests/cli/test_idle_run.py does, on the real
llama-server); it checks pause order, accounting and emission.
"""

import time
from collections import Counter

from harness.engines.base import Completion, ServerDefaults
from harness.workloads.idle import pause_schedule, run_idle_sweep, sleep_until


def test_schedule_shuffles_each_rep_reproducibly():
    pauses = [0.0, 0.5, 1.0, 1.5, 2.0]
    a = pause_schedule(pauses, 4, seed=1)
    assert a == pause_schedule(pauses, 4, seed=1)
    assert a != pause_schedule(pauses, 4, seed=2)
    assert Counter(p for _, p in a) == Counter({p: 4 for p in pauses})
    orders = [[p for r, p in a if r == rep] for rep in range(4)]
    assert len({tuple(o) for o in orders}) > 1  # not the same order every repetition


def test_sleep_until_never_wakes_early():
    for delay in (0.0, 0.003, 0.02):
        deadline = time.perf_counter() + delay
        sleep_until(deadline)
        assert time.perf_counter() >= deadline


class ScriptedServer(ServerDefaults):  # no client to bound, no HTTP floor
    base_url = "scripted://"

    def __init__(self):
        self.sent = []

    def complete_one_token(self):
        t = time.perf_counter()
        self.sent.append(t)
        if len(self.sent) == 4:
            return Completion(t, time.perf_counter(), 500, "boom")
        return Completion(t, time.perf_counter(), 200, None, {"prompt_ms": 0.5, "predicted_ms": 0.0,
                                                               "prompt_n": 1, "cache_n": 9})

    def close(self):
        pass


def test_sweep_emits_every_observation_with_measured_pauses():
    rows = []
    server = ScriptedServer()
    totals = run_idle_sweep(server, [0.0, 0.01, 0.02], reps=2, seed=0, warmup=2, emit=rows.append)
    assert [r["phase"] for r in rows] == ["warmup"] * 2 + ["measure"] * 6
    measured = rows[2:]
    assert totals.n == 6 and totals.n_errors == 1
    assert sum(r["error"] == "boom" for r in rows) == 1
    for r in measured:
        assert r["pause_actual_s"] >= r["pause_requested_s"]
        assert r["pause_actual_s"] - r["pause_requested_s"] < 0.05
    ok = [r for r in measured if r["error"] is None]
    assert all(r["server_ms"] == 0.5 and r["overhead_ms"] == r["latency_ms"] - 0.5 for r in ok)
    assert abs(totals.sum_pause_requested_s - 0.06) < 1e-9


class RecordingProbe:
    """A device probe that notes when each reading started (perf_counter), and reads nothing."""

    name, device = "recorder", "none"

    def __init__(self):
        self.started: list[float] = []

    def power_state(self):
        return None

    def read(self):
        self.started.append(time.perf_counter())
        return {}


def test_nothing_is_read_in_the_guard_before_a_timed_request(tmp_path):
    """docs/mac.md finding 15: every reading (page cache here; vm_stat/ioreg on a Mac, NVML) is a device probe
    sampled in the pause, and none starts within the guard before the request; each measured row carries the
    pause's last reading as its *_before column."""
    from harness.probes import pagecache
    from harness.probes.devices.pagecache import PageCacheProbe
    from harness.probes.devices.sampler import DeviceSampler

    model = tmp_path / "model.gguf"
    model.write_bytes(b"\0" * 65536)
    recorder = RecordingProbe()
    device_rows: list[dict] = []
    sampler = DeviceSampler([recorder, PageCacheProbe(model)], device_rows.append, interval_s=0.1, guard_s=0.2)
    rows: list[dict] = []
    server = ScriptedServer()
    run_idle_sweep(server, [0.0, 0.5], reps=1, seed=0, warmup=1, emit=rows.append, device_sampler=sampler)
    sampler.join()
    measured = rows[1:]
    assert recorder.started, "the 0.5 s pause has room for readings"
    for sent in server.sent:
        assert not any(sent - 0.2 < t <= sent for t in recorder.started)
    paused = next(r for r in measured if r["pause_requested_s"] == 0.5)
    unpaused = next(r for r in measured if r["pause_requested_s"] == 0.0)
    assert "file_resident_pct_before" not in unpaused  # a zero pause has no room: null, never a stale reading
    if pagecache.available():
        last = [r for r in device_rows if r["probe"] == "pagecache"][-1]
        assert paused["file_resident_pct_before"] == last["file_resident_pct"]
        assert paused["readings_before_send_s"] >= 0.2
