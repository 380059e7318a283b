"""Make sure no process lbench started outlives it, whatever state it is in.

``processes`` covers the clean paths (stop, atexit, SIGINT/SIGTERM) and gives each
direct child ``PR_SET_PDEATHSIG=SIGKILL``.  That does not reach processes lbench did
not fork itself: llama-server's router starts its children, which exit only when their
stdin closes, and a SIGSTOPped child cannot read it.  Two more layers close that gap:

1. a **watchdog**: a small process in its own session (so a signal to lbench's group
   does not reach it) that holds the read end of a pipe from lbench.  lbench tells it
   every process group it starts (``add PGID START EXE``) and ends (``del PGID``).  When
   the pipe reaches end of file, lbench is gone (even ``kill -9``); the watchdog then
   SIGKILLs (and SIGCONTs) every member of every group still registered, and repeats
   the sweep until a few passes find nothing (a router may be mid-fork);
2. a **ledger**: ``<cache>/live/<pid>.json`` per lbench process, naming its own start
   time and each live group (leader pid, start time, executable).  On its first spawn
   lbench reads the ledgers of dead lbench processes and ends the leftovers it can prove
   are its own: same process group, same executable, started no earlier than the
   recorded leader.  Anything else is left alone.

A process is identified by (pid, start time); start times come from psutil.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO
from pathlib import Path

import psutil

from harness.atomic import atomic_write_json
from harness import paths

SWEEP_QUIET_PASSES = 3  # consecutive empty sweeps before the watchdog stops looking
SWEEP_LIMIT_S = 20.0
START_SLACK_S = 0.05  # psutil start times are rounded; a member starts after its leader


def start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def alive(pid: int, started: float) -> bool:
    """The process (pid, start time) still exists (and is not a zombie)."""
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - started) < 0.01 and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def group_members(pgid: int, started: float, exe: str) -> list[int]:
    """Live processes provably from the group lbench recorded: same group, same executable,
    started no earlier than its leader."""
    out: list[int] = []
    if sys.platform == "win32":
        return _windows_members(pgid, started, exe)
    for p in psutil.process_iter(["pid", "create_time", "exe"]):
        try:
            if p.pid == os.getpid() or os.getpgid(p.pid) != pgid:
                continue
            if p.info["create_time"] is None or p.info["create_time"] < started - START_SLACK_S:
                continue
            if exe and p.info["exe"] and os.path.realpath(p.info["exe"]) != os.path.realpath(exe):
                continue
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            out.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def _windows_members(leader: int, started: float, exe: str) -> list[int]:
    """Windows has no process groups: the recorded leader (same start time and executable) and its
    live descendants.  Children whose leader is gone cannot be proved ours (no group): left alone."""
    try:
        p = psutil.Process(leader)
        if abs(p.create_time() - started) > START_SLACK_S:
            return []
        if exe and os.path.realpath(p.exe()) != os.path.realpath(exe):
            return []
        return [leader] + [c.pid for c in p.children(recursive=True)]
    except (psutil.Error, OSError):
        return []


def kill_group(pgid: int, started: float, exe: str) -> list[int]:
    """SIGKILL (then SIGCONT, harmless) every provable member; return the pids signalled."""
    victims = group_members(pgid, started, exe)
    for pid in victims:
        if sys.platform == "win32":
            try:
                psutil.Process(pid).kill()  # TerminateProcess
            except (psutil.Error, OSError):
                pass
            continue
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return victims


def sweep(groups: dict[int, tuple[float, str]], limit_s: float = SWEEP_LIMIT_S) -> list[int]:
    """Kill the groups until a few consecutive passes find no member."""
    killed: list[int] = []
    quiet = 0
    deadline = time.monotonic() + limit_s
    while quiet < SWEEP_QUIET_PASSES and time.monotonic() < deadline:
        found = [pid for pgid, (started, exe) in groups.items() for pid in kill_group(pgid, started, exe)]
        killed += found
        quiet = 0 if found else quiet + 1
        time.sleep(0.1)
    return killed


# ---- ledger ------------------------------------------------------------------------------------

def ledger_dir() -> Path:
    return paths.cache_dir() / "live"


class Ledger:
    """This lbench process's record of its live process groups, rewritten atomically."""

    def __init__(self, directory: Path | None = None):
        self.dir = directory or ledger_dir()
        self.pid = os.getpid()
        self.started = start_time(self.pid) or 0.0
        self.groups: dict[int, dict] = {}
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self.dir / f"{self.pid}.json"

    def _write(self) -> None:
        try:
            if not self.groups:
                self.path.unlink(missing_ok=True)
                return
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"pid": self.pid, "start": self.started, "argv": sys.argv[:4],
                                          "groups": list(self.groups.values())}, indent=None)
        except OSError:
            pass  # a full or read-only cache must not stop a run; the watchdog still covers it

    def add(self, pgid: int, started: float, exe: str) -> None:
        with self._lock:
            self.groups[pgid] = {"pgid": pgid, "start": started, "exe": exe}
            self._write()

    def remove(self, pgid: int) -> None:
        with self._lock:
            self.groups.pop(pgid, None)
            self._write()


def cleanup_leftovers(directory: Path | None = None) -> list[str]:
    """End what dead lbench processes left behind (only what their ledgers prove is theirs)."""
    directory = directory or ledger_dir()
    notes: list[str] = []
    if not directory.is_dir():
        return notes
    for path in directory.glob("*.json"):
        try:
            record = json.loads(path.read_text())
            owner, owner_start = int(record["pid"]), float(record["start"])
            groups = {int(g["pgid"]): (float(g["start"]), str(g.get("exe", ""))) for g in record["groups"]}
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # unreadable: nothing in it can be proved
            continue
        if owner == os.getpid() or alive(owner, owner_start):
            continue
        killed = sweep(groups, limit_s=5.0)
        if killed:
            notes.append(f"ended {len(killed)} process(es) left by lbench pid {owner}: {sorted(set(killed))}")
        path.unlink(missing_ok=True)
    return notes


# ---- watchdog ----------------------------------------------------------------------------------

class Watchdog:
    """lbench's side: start the watchdog once, tell it about groups."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> subprocess.Popen | None:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.engines.reaper", "watch", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True, cwd=os.path.abspath(os.sep),
                # Windows: outside lbench's console group, so a Ctrl-C/Ctrl-Break to lbench does not end it
                creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])})
        except OSError:
            self.proc = None
        return self.proc

    def tell(self, line: str) -> None:
        with self._lock:
            proc = self._ensure()
            if proc is None or proc.stdin is None:
                return
            try:
                proc.stdin.write((line + "\n").encode())
                proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """At a clean exit: everything was stopped; the watchdog ends on end of file."""
        with self._lock:
            if self.proc is not None and self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass


def watch(owner: int, stream: IO[bytes] | None = None) -> None:
    """The watchdog process: follow lbench's messages; at end of file, kill what is left."""
    for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE", "SIGBREAK"):  # those this platform has
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    stream = stream or sys.stdin.buffer
    groups: dict[int, tuple[float, str]] = {}
    for raw in iter(stream.readline, b""):
        parts = raw.decode(errors="replace").split(maxsplit=3)
        try:
            if parts[0] == "add":
                groups[int(parts[1])] = (float(parts[2]), parts[3].strip() if len(parts) > 3 else "")
            elif parts[0] == "del":
                groups.pop(int(parts[1]), None)
        except (IndexError, ValueError):
            continue
    if groups:
        sweep(groups)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "watch":
        watch(int(sys.argv[2]))
