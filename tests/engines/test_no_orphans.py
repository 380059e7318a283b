"""No process lbench starts outlives it, whatever state the process is in (issue 12, class 1).

A driver process (standing in for lbench, using lbench's own spawn path) starts a real
router on tiny models, loads a child, SIGSTOPs it, and is then killed with SIGKILL.
The watchdog must end the router and the stopped child.  If the watchdog is killed too,
the next lbench's first spawn ends the leftovers from the ledger.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import REPO, wait_gone

pytestmark = pytest.mark.engine

DRIVER = textwrap.dedent("""
    import json, os, signal, sys, time
    from pathlib import Path
    import httpx
    from harness.engines.llama_server import locate
    from harness.engines.router import RouterModel, RouterProcess
    from harness.engines import processes
    from harness.models.resolve import resolve
    run = Path(sys.argv[1]); (run / "logs").mkdir(parents=True, exist_ok=True)
    model = resolve("tiny-q8")
    router = RouterProcess(locate(), [RouterModel("tiny a", model.path)], models_max=1, run_dir=run)
    r = httpx.post(router.base_url + "/completion", json={"model": "tiny a", "prompt": "hi", "n_predict": 1},
                   timeout=120, trust_env=False)
    children = [c.pid for c in psutil.Process(router.pid).children()] if (psutil := __import__("psutil")) else []
    for pid in children:
        os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10  # SIGSTOP lands asynchronously
    def stopped(pid):
        try:
            return psutil.Process(pid).status() == "stopped"
        except psutil.Error:
            return True
    while time.monotonic() < deadline and not all(stopped(p) for p in children):
        time.sleep(0.05)
    print(json.dumps({"router": router.pid, "children": children,
                      "watchdog": processes._WATCHDOG.proc.pid}), flush=True)
    time.sleep(600)
""")


def _start_driver(tmp_path, env):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "run")], stdout=subprocess.PIPE,
                            env={**os.environ, **env, "PYTHONPATH": str(REPO)}, text=True)
    line = proc.stdout.readline()
    assert line, "driver did not start the router"
    return proc, json.loads(line)


def _alive(pids):
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_kill_9_with_a_stopped_router_child_leaves_nothing(engine_env, tmp_path):
    proc, pids = _start_driver(tmp_path, engine_env)
    try:
        assert pids["children"], "the router started no child"
        assert psutil.Process(pids["children"][0]).status() == psutil.STATUS_STOPPED
    finally:
        proc.kill()
        proc.wait()
    assert not wait_gone([pids["router"], *pids["children"]], timeout=30)


def test_leftovers_of_a_dead_lbench_and_watchdog_are_ended_on_next_start(engine_env, tmp_path):
    proc, pids = _start_driver(tmp_path, engine_env)
    os.kill(pids["watchdog"], signal.SIGKILL)
    proc.kill()
    proc.wait()
    time.sleep(1)
    assert _alive(pids["children"]), "without the watchdog the stopped child is orphaned (the case cleanup is for)"
    # an unrelated process must survive the cleanup
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        out = subprocess.run([sys.executable, "-c",
                              "from harness.engines import reaper; print(reaper.cleanup_leftovers())"],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, **engine_env, "PYTHONPATH": str(REPO)})
        assert "ended" in out.stdout, out.stdout + out.stderr
        assert not wait_gone(pids["children"], timeout=15)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
