"""No process lbench starts outlives it, whatever state the process is in (issue 12, class 1).

A driver process (standing in for lbench, using lbench's own spawn path) starts a real
router on tiny models, brings a child into a state, and is then killed with SIGKILL:
stopped (SIGSTOP), loading (its model is a FIFO that never delivers), stopping (told to
unload while decoding a long answer, preset stop-timeout 120 s), and lbench itself
mid-spawn (its child between fork and exec; the router exec'd but not yet registered with
the watchdog).  The watchdog (or PR_SET_PDEATHSIG, for a direct child) must end everything.
If the watchdog is killed too, the next lbench's first spawn ends the leftovers from the ledger.
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
    from harness.engines.binary import locate
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
    deadline = time.monotonic() + 120  # SIGSTOP lands asynchronously: wait for the state, however loaded the box
    def stopped(pid):
        try:
            return psutil.Process(pid).status() == "stopped"
        except psutil.Error:
            return True
    while not all(stopped(p) for p in children):
        assert time.monotonic() < deadline, "the router's child never showed as stopped"
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



def _run_cleanup(engine_env) -> None:
    """A fresh lbench start's cleanup of leftovers from dead runs; it must say it ended something."""
    out = subprocess.run([sys.executable, "-c", "from harness.engines import reaper; print(reaper.cleanup_leftovers())"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **engine_env, "PYTHONPATH": str(REPO)})
    assert "ended" in out.stdout, out.stdout + out.stderr

def test_kill_9_with_a_stopped_router_child_leaves_nothing(engine_env, tmp_path):
    proc, pids = _start_driver(tmp_path, engine_env)
    try:
        assert pids["children"], "the router started no child"
        assert psutil.Process(pids["children"][0]).status() == psutil.STATUS_STOPPED
    finally:
        proc.kill()
        proc.wait()
    assert not wait_gone([pids["router"], *pids["children"]])


def test_leftovers_of_a_dead_lbench_and_watchdog_are_ended_on_next_start(engine_env, tmp_path):
    proc, pids = _start_driver(tmp_path, engine_env)
    os.kill(pids["watchdog"], signal.SIGKILL)
    proc.kill()
    proc.wait()
    assert not wait_gone([pids["router"]])  # PR_SET_PDEATHSIG: the router dies with lbench; its child stays
    assert _alive(pids["children"]), "without the watchdog the stopped child is orphaned (the case cleanup is for)"
    # an unrelated process must survive the cleanup
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        _run_cleanup(engine_env)
        assert not wait_gone(pids["children"])
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


# ---- the other states: a child loading, a child being stopped, lbench mid-spawn ------------------

STATE_DRIVER = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    from pathlib import Path
    import httpx, psutil
    from harness.engines.binary import locate
    from harness.engines.router import RouterModel, RouterProcess
    from harness.engines import processes
    from harness.models.resolve import resolve
    state, run = sys.argv[1], Path(sys.argv[2])
    (run / "logs").mkdir(parents=True, exist_ok=True)
    model = resolve("tiny-q8")

    def report(**pids):
        print(json.dumps({**pids, "watchdog": processes._WATCHDOG.proc.pid if processes._WATCHDOG.proc else None}),
              flush=True)
        time.sleep(600)

    def child(router, name):
        deadline = time.monotonic() + 120  # the request that spawns it has this long too
        while time.monotonic() < deadline:
            for c in psutil.Process(router.pid).children():
                argv = c.cmdline()
                if "--alias" in argv and argv[argv.index("--alias") + 1] == name:
                    return c.pid
            time.sleep(0.005)
        raise SystemExit(f"no child for {name}")

    def wait_event(events, kind, name, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.kind == kind and e.model == name for e in list(events)):
                return
            time.sleep(0.01)
        raise SystemExit(f"no {kind} for {name}")

    if state == "loading":
        # the child's model is a FIFO fed once (the router reads it at start-up): the child opens
        # it and waits for bytes forever, a model that never finishes loading, and it reads no stdin
        fifo = run / "never-loads.gguf"
        os.mkfifo(fifo)
        data = model.path.read_bytes()
        def feed_once():
            with open(fifo, "wb") as f:
                f.write(data)
        threading.Thread(target=feed_once, daemon=True).start()
        events = []
        router = RouterProcess(locate(), [RouterModel("slow", fifo)], models_max=1, run_dir=run,
                               on_event=events.append)
        httpx.post(router.base_url + "/models/load", json={"model": "slow"}, timeout=30, trust_env=False)
        pid = child(router, "slow")
        wait_event(events, "status:loading", "slow")
        time.sleep(0.5)
        assert not any(e.kind == "status:loaded" for e in events)
        report(router=router.pid, children=[pid])
    elif state == "stopping":
        # a child busy decoding a long answer is told to unload: it stays "stopping" until its
        # preset stop-timeout (120 s) ends it
        events = []
        router = RouterProcess(locate(), [RouterModel("busy", model.path, 120)], models_max=1, run_dir=run,
                               ctx_size=10000, on_event=events.append)
        # ignore_eos: a random-weight model may sample EOS early, end the answer and let the child exit
        body = {"model": "busy", "prompt": "hi", "n_predict": 9000, "ignore_eos": True}
        threading.Thread(target=lambda: httpx.post(router.base_url + "/completion", json=body, timeout=300,
                                                   trust_env=False), daemon=True).start()
        wait_event(events, "proxy", "busy")
        pid = child(router, "busy")
        time.sleep(0.3)
        httpx.post(router.base_url + "/models/unload", json={"model": "busy"}, timeout=30, trust_env=False)
        wait_event(events, "stop_sent", "busy")
        time.sleep(0.3)
        assert not any(e.kind == "exited" for e in events), "the child exited before lbench could be killed"
        report(router=router.pid, children=[pid])
    elif state == "before-exec":
        # lbench dies while its child is between fork and exec (in the pre-exec hook)
        original = processes._die_with_parent
        def slow_hook(parent):
            (run / "child.pid").write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while os.getppid() == parent and time.monotonic() < deadline:  # held here until lbench is killed
                time.sleep(0.01)
            original(parent)
        processes._die_with_parent = slow_hook
        RouterProcess(locate(), [RouterModel("m", model.path)], models_max=1, run_dir=run)
    elif state == "before-register":
        # lbench dies after the router exec'd, before the watchdog and the ledger heard of it
        def stall(proc, exe):
            report(router=proc.pid, children=[])
        processes._register = stall
        RouterProcess(locate(), [RouterModel("m", model.path)], models_max=1, run_dir=run)
""")


def _start_state(state, tmp_path, env):
    return subprocess.Popen([sys.executable, "-c", STATE_DRIVER, state, str(tmp_path / "run")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env, "PYTHONPATH": str(REPO)})


def _driver_pids(proc) -> dict:
    line = proc.stdout.readline()  # the driver prints once the state is reached
    assert line, "the driver never reached the state: " + proc.stderr.read()
    return json.loads(line)


@pytest.mark.parametrize("state", ["loading", "stopping"])
def test_kill_9_with_a_router_child_loading_or_stopping_leaves_nothing(engine_env, tmp_path, state):
    proc = _start_state(state, tmp_path, engine_env)
    try:
        pids = _driver_pids(proc)
        assert pids["watchdog"] and pids["children"]
        assert _alive(pids["children"]), "the child must be alive when lbench is killed"
        assert psutil.Process(pids["children"][0]).status() != psutil.STATUS_STOPPED  # not the SIGSTOP case
    finally:
        proc.kill()
        proc.communicate()
    # the router dies with lbench (PDEATHSIG); its child reads no stdin: the watchdog ends it
    assert not wait_gone([pids["router"], *pids["children"]])
    assert not wait_gone([pids["watchdog"]])  # its sweep done, the watchdog exits too


def test_a_loading_child_left_by_a_dead_lbench_and_watchdog_is_ended_on_next_start(engine_env, tmp_path):
    proc = _start_state("loading", tmp_path, engine_env)
    try:
        pids = _driver_pids(proc)
        os.kill(pids["watchdog"], signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    try:
        assert not wait_gone([pids["router"]])  # the router dies with lbench; its loading child stays
        assert _alive(pids["children"]), "without the watchdog the loading child is orphaned"
        _run_cleanup(engine_env)
        assert not wait_gone(pids["children"])
    finally:
        for pid in _alive(pids["children"]):  # never leave it, even when an assertion failed
            os.kill(pid, signal.SIGKILL)


def test_kill_9_mid_spawn_before_exec_leaves_nothing(engine_env, tmp_path):
    proc = _start_state("before-exec", tmp_path, engine_env)
    pid_file = tmp_path / "run" / "child.pid"
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        child = int(pid_file.read_text())
        assert _alive([child])
    finally:
        proc.kill()  # while the child sleeps in its pre-exec hook, before PR_SET_PDEATHSIG
        proc.communicate()
    # the hook then sets PDEATHSIG, sees its parent is gone and exits: it never becomes a server
    assert not wait_gone([child])


def test_kill_9_mid_spawn_before_the_watchdog_heard_of_it_leaves_nothing(engine_env, tmp_path):
    proc = _start_state("before-register", tmp_path, engine_env)
    try:
        pids = _driver_pids(proc)
        assert _alive([pids["router"]]) and pids["watchdog"] is None  # nothing registered yet
    finally:
        proc.kill()
        proc.communicate()
    assert not wait_gone([pids["router"]])  # PR_SET_PDEATHSIG: the kernel ends it
