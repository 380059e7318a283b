"""A server killed mid-sweep makes a failed cell and a failed run, not medians (issue 12, class 3)."""

import os
import signal

import pytest

import harness.runs.idle as idle_run
from harness.runs.idle import run_idle
from harness.spec import IdleSpec
from harness.workloads.idle import run_idle_sweep

pytestmark = pytest.mark.engine


def test_server_killed_mid_sweep_fails_the_cell_and_the_run(engine_env, monkeypatch):
    def sweep_that_kills_the_server(server, *args, emit, **kwargs):
        measured = []

        def emit_and_kill(row):
            emit(row)
            if row["phase"] == "measure":
                measured.append(row)
                if len(measured) == 3:  # the real server dies after the third sample
                    os.kill(server.pid, signal.SIGKILL)
        return run_idle_sweep(server, *args, emit=emit_and_kill, **kwargs)

    monkeypatch.setattr(idle_run, "run_idle_sweep", sweep_that_kills_the_server)
    spec = IdleSpec(models=["tiny-q8"], pauses_s=[0.05], reps=20, warmup=1, ctx_size=256)
    run = run_idle(spec)
    assert run.record.status == "failed"
    cell = run.record.cells[0]
    assert "died during the sweep" in cell["error"] and "exit status" in cell["error"]
    samples = run.table("samples")  # what was measured before the death is kept
    assert len(samples[samples["phase"] == "measure"]) >= 3
