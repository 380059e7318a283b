"""A frozen server is a failed cell, not a long sample (issue 12, class 3: deadlines)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO

from harness.engines.base import Completion, ServerDefaults
from harness.errors import BadInput
from harness.spec import IdleSpec
from harness.workloads.idle import (REQUEST_DEADLINE_FLOOR_S, WARMUP_DEADLINE_S, DeadlineExceeded, Deadlines,
                                    run_idle_sweep)

REQUEST_TIMEOUT_S = 3.0


def _measured_rows(journal: Path) -> int:
    try:
        return sum(1 for line in journal.read_text().splitlines() if '"phase": "measure"' in line)
    except OSError:
        return 0


@pytest.mark.engine
def test_server_stopped_past_the_deadline_fails_the_cell_the_run_and_the_exit(engine_env):
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    cli = subprocess.Popen(
        [sys.executable, "-m", "harness", "idle", "-m", "tiny-q8", "--pauses", "0.1", "--reps", "200",
         "--warmup", "1", "--ctx-size", "256", "--self-check", "0", "--request-timeout", str(REQUEST_TIMEOUT_S)],
        cwd=REPO, env={**os.environ, **engine_env, "COLUMNS": "200"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    stopped: list[int] = []
    resume = None
    try:
        give_up = time.monotonic() + 300
        while not stopped and cli.poll() is None and time.monotonic() < give_up:
            journals = list(results.glob("*/samples.jsonl"))
            if journals and _measured_rows(journals[0]) >= 3:
                servers = [p for p in psutil.Process(cli.pid).children(recursive=True)
                           if p.name() == "llama-server"]
                for p in servers:
                    p.send_signal(signal.SIGSTOP)
                    stopped.append(p.pid)
                # frozen for longer than the deadline; then continued (if lbench has not ended it by then)
                resume = threading.Timer(4 * REQUEST_TIMEOUT_S, lambda: [_cont(pid) for pid in stopped])
                resume.start()
            time.sleep(0.05)
        assert stopped, "the sweep ended before the server could be stopped"
        stdout, stderr = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
        if resume is not None:
            resume.join()
    assert cli.returncode == 1, stderr
    assert "no answer" in stdout + stderr and "deadline" in stdout + stderr
    assert "Traceback" not in stderr
    run_dir = next(results.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    cell = manifest["cells"][0]
    assert f"within {REQUEST_TIMEOUT_S:g} s" in cell["error"] and "request deadline" in cell["error"]
    assert "server process state: stopped" in cell["error"]
    assert cell["deadlines"]["request_s"] == REQUEST_TIMEOUT_S
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    measured = [r for r in rows if r["phase"] == "measure"]
    assert measured[-1]["error"] and "timed out" in measured[-1]["error"]  # the frozen request: not a sample
    assert len(measured) < 200
    html = (run_dir / "report.html").read_text()
    banner = html.index("Cell failed")
    assert banner < html.index("<img"), "the failure is shown before any figure"
    assert "no answer" in html[banner:banner + 2000]


def _cont(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


class ScriptedServer(ServerDefaults):  # no client to bound, no HTTP floor
    """Answers from a script of latencies (seconds), with a client that cannot be bounded:
    the sweep must still refuse an answer that came after the deadline.  (Unit test of the
    sweep's bookkeeping; the real engine is frozen in the test above.)"""

    def __init__(self, latencies_s):
        self.latencies_s = list(latencies_s)
        self.now = 1000.0

    def complete_one_token(self) -> Completion:
        latency = self.latencies_s.pop(0) if self.latencies_s else 0.001
        t_send = time.perf_counter()
        return Completion(t_send, t_send + latency, 200, None, {"prompt_ms": 1.0, "predicted_ms": 0.0})

    def close(self) -> None:
        pass


def test_a_late_answer_is_not_a_sample_and_ends_the_sweep():
    rows = []
    server = ScriptedServer([0.01, 0.01, 0.01, 0.01, 50.0])
    with pytest.raises(DeadlineExceeded, match=r"within 5 s \(the request deadline"):
        run_idle_sweep(server, [0.0], reps=10, seed=0, warmup=1, emit=rows.append,
                       deadlines=Deadlines(request_s=5.0))
    measured = [r for r in rows if r["phase"] == "measure"]
    assert len(measured) == 4 and measured[-1]["error"].startswith("answered after the request deadline")
    assert all(r["error"] is None for r in measured[:-1])


def test_the_cell_deadline_ends_a_sweep_that_would_overrun_it():
    rows = []
    with pytest.raises(DeadlineExceeded, match="cell deadline of 0.5 s"):
        run_idle_sweep(ScriptedServer([]), [0.2], reps=50, seed=0, warmup=1, emit=rows.append,
                       deadlines=Deadlines(request_s=5.0, cell_s=0.5))
    assert 0 < len([r for r in rows if r["phase"] == "measure"]) < 50


def test_derived_deadlines_are_generous_but_far_below_the_old_600_s():
    d = Deadlines(startup_s=0.8)
    assert d.initial_request_s() == WARMUP_DEADLINE_S
    d.derive([0.004, 0.006], n_requests=90, sum_pauses_s=150.0)
    assert d.request_s == REQUEST_DEADLINE_FLOOR_S and d.request_s < 600
    assert d.cell_s > 2 * 150.0 and "warm-up" in d.derived_from
    slow = Deadlines(startup_s=40.0)  # a big model: a reload after sleep-idle costs about the start-up time
    slow.derive([2.5], n_requests=10, sum_pauses_s=10.0)
    assert slow.request_s == 120.0 and slow.cell_s >= 10 * 40.0


@pytest.mark.parametrize("value", [0, -1, float("nan"), "soon", True])
def test_bad_timeouts_are_bad_input(value):
    with pytest.raises(BadInput, match="request_timeout_s"):
        IdleSpec(models=["tiny-q8"], request_timeout_s=value).validate()
    with pytest.raises(BadInput, match="cell_timeout_s"):
        IdleSpec(models=["tiny-q8"], cell_timeout_s=value).validate()
