"""Child processes that must never outlive lbench.

Three layers, so no llama-server is left behind whatever happens to the harness:
1. every child runs in its own process group, is registered here, and is stopped
   (SIGTERM to the group, then SIGKILL) by ``stop()``, by ``stop_all()`` at
   interpreter exit, and by the CLI's SIGINT/SIGTERM handling;
2. on Linux the child gets ``PR_SET_PDEATHSIG=SIGKILL``: if the harness itself is
   killed (even with SIGKILL) the kernel kills the child;
3. llama-server's router children exit when their stdin closes, which happens when
   the router dies.
Children must be spawned from the main thread (PDEATHSIG fires when the spawning
*thread* exits).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen:
    proc = subprocess.Popen(
        list(argv),
        env=dict(env) if env is not None else None,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        cwd=cwd,
        start_new_session=True,  # own process group: we can signal the whole tree
        preexec_fn=_die_with_parent,
    )
    with _LOCK:
        _LIVE.add(proc)
    return proc


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> int | None:
    """SIGTERM the child's process group, SIGKILL it after ``timeout_s``; reap it."""
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        # grandchildren (router mode) share the group: make sure none is left
        _signal_group(proc, signal.SIGKILL)
        return proc.returncode
    finally:
        with _LOCK:
            _LIVE.discard(proc)


def stop_all(timeout_s: float = 5.0) -> None:
    with _LOCK:
        live = list(_LIVE)
    for proc in live:
        stop(proc, timeout_s)


atexit.register(stop_all)
