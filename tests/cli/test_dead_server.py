"""A server killed mid-sweep makes a failed cell and a failed run, not medians (issue 12, class 3)."""

import os
import signal
import threading
import time

import psutil
import pytest

from conftest import run_cli
from harness.runs.idle import run_idle
from harness.spec import IdleSpec

pytestmark = pytest.mark.engine


def _kill_server_after(delay_s: float, done: threading.Event) -> None:
    me = psutil.Process()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not done.is_set():
        servers = [c for c in me.children() if c.name() == "llama-server"]
        if servers:
            time.sleep(delay_s)
            os.kill(servers[0].pid, signal.SIGKILL)
            return
        time.sleep(0.05)


def test_server_killed_mid_sweep_fails_the_cell_and_the_run(engine_env):
    spec = IdleSpec(models=["tiny-q8"], pauses_s=[0.2], reps=40, warmup=1, ctx_size=256)
    done = threading.Event()
    killer = threading.Thread(target=_kill_server_after, args=(2.0, done), daemon=True)
    killer.start()
    try:
        run = run_idle(spec)
    finally:
        done.set()
    assert run.manifest["status"] == "failed"
    cell = run.manifest["cells"][0]
    assert "died during the sweep" in cell["error"] and "exit status" in cell["error"]
    assert "died during the sweep" in (run.manifest.get("error") or run.manifest.get("status_detail") or
                                       str(run.manifest))
    samples = run.table("samples")  # what was measured before the death is kept
    assert len(samples[samples["phase"] == "measure"]) >= 1
