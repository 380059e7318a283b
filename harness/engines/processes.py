"""Child processes that must never outlive lbench.

Three layers, so no llama-server is left behind whatever happens to the harness:
1. every child runs in its own process group, is registered here, and is stopped
   (SIGTERM to the group, then SIGKILL) by ``stop()``, by ``stop_all()`` at
   interpreter exit, and by the CLI's SIGINT/SIGTERM handling;
2. on Linux the child gets ``PR_SET_PDEATHSIG=SIGKILL``: if the harness itself is
   killed (even with SIGKILL) the kernel kills the child;
3. llama-server's router children exit when their stdin closes, which happens when
   the router dies;
4. a watchdog outside lbench's process group kills every registered group when lbench
   dies in any way, and a ledger of live groups lets the next lbench end what a dead
   one (and its watchdog) left behind (see ``reaper``).
Children must be spawned from the main thread (PDEATHSIG fires when the spawning
*thread* exits).

On Windows (never run here; docs/windows.md) there are no process groups, signals or preexec_fn:
a child gets ``CREATE_NEW_PROCESS_GROUP`` and ``stop_windows`` ends its tree (CTRL_BREAK_EVENT,
TerminateProcess, then psutil for what is left); the watchdog and the ledger follow descendants
by parent instead of by group.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from harness.engines import reaper

_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
PR_SET_PDEATHSIG = 1


_WATCHDOG = reaper.Watchdog()
_LEDGER: reaper.Ledger | None = None
LEFTOVER_NOTES: list[str] = []  # what the first spawn's cleanup ended (for people)


def _die_with_parent(parent: int) -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect (mid-spawn)
            os._exit(1)


def _register(proc: subprocess.Popen, exe: str) -> None:
    global _LEDGER
    started = reaper.start_time(proc.pid) or time.time()
    _WATCHDOG.tell(f"add {proc.pid} {started} {exe}")
    if _LEDGER is not None:
        _LEDGER.add(proc.pid, started, exe)


def _unregister(proc: subprocess.Popen) -> None:
    _WATCHDOG.tell(f"del {proc.pid}")
    if _LEDGER is not None:
        _LEDGER.remove(proc.pid)


def _first_spawn() -> None:
    global _LEDGER
    if _LEDGER is None:
        LEFTOVER_NOTES.extend(reaper.cleanup_leftovers())
        for note in LEFTOVER_NOTES:
            print(f"lbench: {note}", file=sys.stderr)
        _LEDGER = reaper.Ledger()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen:
    _first_spawn()
    parent = os.getpid()
    if sys.platform == "win32":  # no sessions, groups or preexec_fn: a console process group of its own
        proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, stdout=stdout,
                                stderr=stderr, stdin=stdin, cwd=cwd,
                                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
    else:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            stdout=stdout,
            stderr=stderr,
            stdin=stdin,
            cwd=cwd,
            start_new_session=True,  # own process group: we can signal the whole tree
            preexec_fn=lambda: _die_with_parent(parent),
        )
    with _LOCK:
        _LIVE.add(proc)
    _register(proc, shutil.which(argv[0]) or str(argv[0]))
    return proc


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    if sys.platform == "win32":
        return  # no process groups to signal (stop_windows ends the tree)
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(pid: int) -> list[Any]:
    """The live descendants of ``pid`` (psutil processes; [] when it is gone or unreadable)."""
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except (psutil.Error, OSError):
        return []


def stop_windows(proc: subprocess.Popen, timeout_s: float, *, interrupt: Callable[[], None] | None = None) -> None:
    """Windows has no process groups to SIGTERM/SIGKILL.  The tree is read first (a router's children
    lose their parent once it exits), then CTRL_BREAK_EVENT goes to the child's console group
    (``CREATE_NEW_PROCESS_GROUP``; llama-server handles only CTRL_C_EVENT, which Windows disables for a
    new group, so the default handler ends it), ``terminate()`` (TerminateProcess) after ``timeout_s``,
    and every descendant still alive is killed (psutil).  Never run here: docs/windows.md."""
    import psutil

    tree = descendants(proc.pid)
    if proc.poll() is None:
        try:
            (interrupt or (lambda: proc.send_signal(getattr(signal, "CTRL_BREAK_EVENT", signal.SIGTERM))))()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
    for child in tree:
        try:
            child.kill()
        except (psutil.Error, OSError):
            pass
    psutil.wait_procs(tree, timeout=timeout_s)


def stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> int | None:
    """SIGTERM the child's process group, SIGKILL it after ``timeout_s``; reap it (Windows: ``stop_windows``)."""
    try:
        if sys.platform == "win32":
            stop_windows(proc, timeout_s)
            return proc.returncode
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            _signal_group(proc, signal.SIGCONT)  # a stopped child handles SIGTERM only once continued
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        # grandchildren (router mode) share the group: make sure none is left
        _signal_group(proc, signal.SIGKILL)
        _signal_group(proc, signal.SIGCONT)
        return proc.returncode
    finally:
        with _LOCK:
            was_live = proc in _LIVE
            _LIVE.discard(proc)
        if was_live:
            _unregister(proc)


def stop_all(timeout_s: float = 5.0) -> None:
    with _LOCK:
        live = list(_LIVE)
    for proc in live:
        stop(proc, timeout_s)


def _at_exit() -> None:
    stop_all()
    _WATCHDOG.close()


atexit.register(_at_exit)
