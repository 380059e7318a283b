"""A router child that dies or freezes during a swap storm is a fault, not a result (issue 12, class 3).

The real router on two tiny models; the test SIGSTOPs / SIGKILLs one of its children while
``lbench swap`` runs, then checks the finding, the failed rows, the exit code and that no
process is left.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from conftest import REPO, wait_gone

pytestmark = pytest.mark.engine

TWO = ["-m", "tiny-q8", "-m", "tiny-q4", "--models-max", "2", "--pattern", "round-robin"]


def _start(env, *args):
    return subprocess.Popen([sys.executable, "-m", "harness", "swap", *TWO, *args], cwd=REPO,
                            env={**os.environ, **env, "COLUMNS": "200"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _rows(env) -> int:
    journals = list(Path(env["LBENCH_RESULTS_DIR"]).glob("*/requests.jsonl"))
    return len(journals[0].read_text().splitlines()) if journals else 0


def _child_of(proc, env, model: str, timeout: float = 300) -> psutil.Process:
    """The router child serving ``model``, once the storm has sent a few requests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if _rows(env) >= 4:
            for p in psutil.Process(proc.pid).children(recursive=True):
                try:
                    argv = p.cmdline()
                except psutil.Error:
                    continue
                if "--alias" in argv and argv[argv.index("--alias") + 1] == model:
                    return p
        time.sleep(0.05)
    raise AssertionError(f"no router child for {model}")


def _longest_gap_s(env) -> float:
    """The longest time between two requests' ends so far in this storm (a child's load included), as
    measured on this machine, however loaded it is."""
    journals = list(Path(env["LBENCH_RESULTS_DIR"]).glob("*/requests.jsonl"))
    done = sorted(r["t_done_s"] for r in map(json.loads, journals[0].read_text().splitlines() if journals else [])
                  if isinstance(r.get("t_done_s"), (int, float)))
    return max((b - a for a, b in zip(done, done[1:])), default=0.0)


def _wait_stalled(env, timeout: float = 300) -> int:
    """Wait until no request has finished for 4x the longest gap this storm showed before (at least
    3 s): one is hanging on the stopped child (the storm sends one request at a time)."""
    settle = max(3.0, 4 * _longest_gap_s(env))
    deadline = time.monotonic() + timeout
    last, since = _rows(env), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = _rows(env)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle:
            return now
    raise AssertionError("the storm never stalled on the stopped child")


def _manifest(env) -> tuple[Path, dict]:
    (run_dir,) = list(Path(env["LBENCH_RESULTS_DIR"]).iterdir())
    return run_dir, json.loads((run_dir / "manifest.json").read_text())



def _never_left(proc) -> None:
    """Kill lbench if a test failed before it ended (its own cleanup then ends the router)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()

def test_child_killed_mid_request_is_a_finding_and_fails_the_run(engine_env):
    proc = _start(engine_env, "-n", "30")
    try:
        child = _child_of(proc, engine_env, "tiny-q8")
        child.send_signal(signal.SIGSTOP)  # the next request for tiny-q8 hangs in the child
        stalled_at = _wait_stalled(engine_env)
        assert stalled_at < 30
        child.send_signal(signal.SIGKILL)  # ... and is cut when the child dies
        out, err = proc.communicate(timeout=120)
    finally:
        _never_left(proc)
    assert proc.returncode == 1, err + out
    run_dir, m = _manifest(engine_env)
    requests = pd.read_parquet(run_dir / "requests.parquet")
    failed = requests[requests["error"].notna()]
    # the request waiting on the child fails with it (one more may, sent before the router saw the exit)
    assert 1 <= len(failed) <= 2 and set(failed["model"]) == {"tiny-q8"}
    assert m["status"] == "failed"
    assert f"1 router child death(s) (tiny-q8; {len(failed)} request(s) failed with them)" in m["error"]
    death = m["findings"][0]
    assert death.startswith("CHILD DIED: the router child of model tiny-q8 died while loaded")
    assert "exit status 1" in death and f"{len(failed)} request(s) failed with it" in death
    assert len(requests) == 30  # the router respawned the child; the storm went on
    assert requests[requests["index"] > failed["index"].max()]["error"].isna().all()
    assert "CHILD DIED" in out
    html = (run_dir / "report.html").read_text()
    assert "Router children died during the storm" in html
    # the headline comes first and names the death first; the banner with its table follows
    assert html.index("<h2>Findings") < html.index("CHILD DIED") < html.index("Router children died")
    assert not wait_gone([child.pid])


def test_frozen_child_hits_the_request_deadline_and_stops_the_storm(engine_env):
    proc = _start(engine_env, "-n", "500", "--request-timeout", "3", "--no-report")
    try:
        child = _child_of(proc, engine_env, "tiny-q8")
        child.send_signal(signal.SIGSTOP)
        out, err = proc.communicate(timeout=300)  # the 3 s deadline, then the router and its child are stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err + out
    run_dir, m = _manifest(engine_env)
    assert m["status"] == "failed" and m["deadlines"] == {"request_s": 3.0, "derived_from": "--request-timeout"}
    assert "1 request(s) past the request deadline" in m["error"]
    assert f"child tiny-q8 (pid {child.pid}) stopped" in m["error"]
    assert m["findings"][0].startswith("DEADLINE: 1 request(s) got no full answer within the request deadline "
                                       "(tiny-q8 x1)")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    late = requests[requests["error_kind"] == "deadline"]
    assert list(late["model"]) == ["tiny-q8"] and "3 s request deadline" in late.iloc[0]["error"]
    assert len(requests) < 500  # the storm stopped at the first request past its deadline
    assert "DEADLINE" in out
    assert m["findings"][-1].startswith("the run ended failed")
    assert not wait_gone([child.pid])


def test_frozen_router_hits_the_request_deadline(engine_env):
    proc = _start(engine_env, "-n", "500", "--request-timeout", "3", "--no-report")
    try:
        _child_of(proc, engine_env, "tiny-q8")  # the storm is under way
        (router,) = [p for p in psutil.Process(proc.pid).children() if p.name() == "llama-server"]
        tree = [router.pid, *(c.pid for c in router.children())]
        router.send_signal(signal.SIGSTOP)
        out, err = proc.communicate(timeout=120)
    finally:
        _never_left(proc)
    assert proc.returncode == 1, err + out
    run_dir, m = _manifest(engine_env)
    assert m["status"] == "failed" and "1 request(s) past the request deadline" in m["error"]
    assert f"server pid {router.pid} stopped" in m["error"]
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert (requests["error_kind"] == "deadline").sum() == 1 and len(requests) < 500
    assert not wait_gone(tree)
