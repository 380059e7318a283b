"""Shared fixtures.

The real llama-server is built once into the user's lbench cache (``lbench engine
install``; several minutes the first time, see docs/builds.md; reused afterwards) and handed to every
test through ``LBENCH_LLAMA_SERVER``.  Everything else a test touches (model cache,
catalog, results) lives in its own temporary directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness import kinds
from harness.engines import provision

kinds.install()  # the kinds of run (harness/kinds/), as the lbench command installs them when a command runs

# A suite started as a background job of a non-interactive shell (nohup ... &) inherits SIGINT
# ignored, and so would every lbench it starts: the Ctrl-C tests would then test nothing. A
# handler here (not an ignore) makes the children start with the default disposition after exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]

# Every process this test session starts inherits this token, so the leftover checks below
# see only our own servers, not those of another run on the same host (a bisect, a second
# checkout's tests).  lbench passes its environment on to llama-server and router children.
SESSION_TOKEN = f"{os.getpid()}-{time.time_ns()}"
os.environ["LBENCH_TEST_SESSION"] = SESSION_TOKEN
# the test session is one runner: its signing key (harness/attest.py) lives with the session, never in ~/.config
os.environ["LBENCH_RUNNER_KEY"] = str(Path(tempfile.mkdtemp(prefix="lbench-test-key-")) / "runner-key.pem")


@pytest.fixture(scope="session")
def engine_binary() -> Path:
    plan = provision.install(log=lambda s: print(f"[engine] {s}", file=sys.stderr, flush=True))
    return plan.binary("llama-server")


@pytest.fixture
def lbench_env(tmp_path, monkeypatch) -> dict[str, str]:
    """Isolated cache, catalog and results for one test (env vars, also for subprocesses)."""
    env = {
        "LBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "LBENCH_CATALOG": str(tmp_path / "catalog.toml"),
        "LBENCH_RESULTS_DIR": str(tmp_path / "results"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LBENCH_LLAMA_SERVER", raising=False)
    return env


@pytest.fixture
def engine_env(lbench_env, engine_binary, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("LBENCH_LLAMA_SERVER", str(engine_binary))
    return {**lbench_env, "LBENCH_LLAMA_SERVER": str(engine_binary)}


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: Path | None = None, columns: int = 200) -> subprocess.CompletedProcess:
    """``lbench ARGS`` in a subprocess, output piped (no TTY), ``$COLUMNS`` wide."""
    full_env = {**os.environ, **(env or {}), "COLUMNS": str(columns), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd or REPO)


def _ours(p: psutil.Process) -> bool:
    try:
        return p.environ().get("LBENCH_TEST_SESSION") == SESSION_TOKEN
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return True  # cannot tell: count it (stricter)


def llama_server_processes(binary: Path | None = None, any_session: bool = False) -> list[psutil.Process]:
    """llama-server processes started by this test session (all of them with ``any_session``)."""
    found = []
    for p in psutil.process_iter(["name", "exe", "cmdline"]):
        try:
            name = p.info["name"] or ""
            exe = p.info["exe"] or ""
            if name == "llama-server" or exe.endswith("/llama-server"):
                if binary is None or Path(exe) == Path(binary).resolve():
                    if any_session or _ours(p):
                        found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


WAIT_GONE_S = 120.0
"""How long a process may take to be gone after lbench (or a test) ended it: ``processes.stop`` sends
SIGKILL 10 s after SIGTERM, and the watchdog repeats its sweep until three passes find nothing; on a
loaded 2-core machine a SIGKILLed process can still take seconds to be reaped.  The wait ends as soon
as the processes are gone, so the bound costs nothing when they go."""


def wait_gone(pids: list[int], timeout: float = WAIT_GONE_S) -> list[int]:
    """The pids still alive (not zombies) once all are gone or ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:  # gone between the scan and this look
            return False

    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if running(pid)]
        if alive:
            time.sleep(0.1)
    return alive


@pytest.fixture(autouse=True)
def no_leftover_servers(request):
    """Every test must leave no llama-server behind that it started."""
    before = {p.pid for p in llama_server_processes()}
    yield
    after = [p.pid for p in llama_server_processes() if p.pid not in before]
    leftover = wait_gone(after)
    assert not leftover, f"test left llama-server processes running: {leftover}"


def make_history_run(root: Path, n: int, *, build: int = 11434, scale: float = 1.0, seed: int = 0,
                     sd: float = 0.02, reps: int = 10, cpu_model: str = "TestCPU") -> Path:
    """One small idle run directory in the store's real format (harness.store.RunWriter), run
    number ``n`` of a history (its start time n minutes into 2026), on ``build``, its latencies
    ``scale`` times a fixed level with per-run noise (log sd ``sd``): input for the history-gate
    tests (tests/history/test_gate_hook.py, tests/cli/test_gate_history_cli.py), never a figure."""
    import numpy as np

    from harness.store import RunWriter

    rng = np.random.default_rng(seed * 1000 + n)
    level = scale * float(np.exp(rng.normal(0, sd)))  # the run's own level: the between-run spread
    w = RunWriter(root, "idle", {
        "started_at": f"2026-01-01T{n // 60:02d}:{n % 60:02d}:00.000+00:00", "config": {"seed": 0},
        "models": [{"label": "m", "synthetic": True, "path": "/models/m.gguf", "sha256": "cd" * 32}],
        "host": {"cpu_model": cpu_model, "os": "Linux", "os_release": "6.1", "cpu_logical": 2, "hostname": "h"},
        "engine": {"name": "llama.cpp", "build_number": build, "sha256": "ab" * 32}, "cells": []})
    for pause in (0.0, 0.5):
        for rep in range(reps):
            v = 20.0 * level * float(rng.lognormal(0, 0.01))
            w.append({"model": "m", "setting": "keep-alive=default", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1,
                      "server_ms": v - 1, "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    from harness.attest import sign_run

    sign_run(w.dir)  # the test session is the runner that made it (a forged-run test removes this)
    return w.dir


def trusted(archive: Path) -> Path:
    """The archive, with this test session's runner key on its allow-list (harness/history/trust.py)."""
    from harness.attest import key_id, runner_key
    from harness.history.trust import trust_key

    trust_key(archive, key_id(runner_key()), "test session")
    return archive
