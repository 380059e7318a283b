"""Which process, host and boot a run ran in, and whether that process is gone.

A run's manifest says ``running`` from its start until the run ends.  A run whose process was
SIGKILLed (or whose machine lost power) never ends, so the manifest also records the process that
wrote it (``this_process()``: pid, start time, host name, boot id, pid namespace).  ``gone(...)``
tells, on the machine reading it, whether that process is provably gone:

- same host name, another boot (``/proc/sys/kernel/random/boot_id`` on Linux; ``kern.boottime``,
  as psutil reads it, elsewhere): gone, the machine rebooted;
- same host, boot and pid namespace: gone when no process has that pid, or the one that has it
  started at another time (a pid reused);
- another host, or a process recorded without these facts: unknown (``None``), never guessed.

A manifest of an older lbench (schema 1 and 2) records no process.  ``written_before_boot`` tells
what can still be proved for it: a manifest of this host last written before this machine booted
was written by a process that started before the boot, and no process outlives a boot, so that
run is over; anything else cannot be told from a live run.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

import psutil

START_SLACK_S = 1.0  # a start time read as boot time + ticks may move by up to a second between reads


def boot_id() -> str | None:
    """This boot's identity: Linux's random boot id; elsewhere the boot time (seconds since the epoch)."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/sys/kernel/random/boot_id") as fh:
                return fh.read().strip() or None
        except OSError:
            return None
    try:
        return f"boottime:{int(psutil.boot_time())}"  # macOS: sysctl kern.boottime
    except (OSError, RuntimeError, AttributeError):
        return None


def _start_ticks(pid: int) -> int | None:
    """Linux: the process's start time in clock ticks since boot (/proc/<pid>/stat field 22), exact."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    try:
        return int(text[text.rindex(")") + 2:].split()[19])  # fields after the name start at field 3
    except (ValueError, IndexError):
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_process() -> dict[str, Any]:
    """The facts ``gone`` needs, for the manifest."""
    pid = os.getpid()
    try:
        started: float | None = psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        started = None
    return {"pid": pid, "started": started, "start_ticks": _start_ticks(pid), "hostname": socket.gethostname(),
            "boot_id": boot_id(), "pid_namespace": _pid_namespace()}


def gone(process: Mapping[str, Any]) -> str | None:
    """Why the recorded process is provably gone (one phrase), or None when it lives or this machine
    cannot tell (another host, facts missing)."""
    pid, host, boot = process.get("pid"), process.get("hostname"), process.get("boot_id")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid >= 2 ** 31 \
            or not isinstance(host, str) \
            or host != socket.gethostname():
        return None
    if isinstance(boot, str) and boot_id() is not None and boot != boot_id():
        return f"its process (pid {pid}) ran before this machine last booted"
    namespace = process.get("pid_namespace")
    if isinstance(namespace, str) and _pid_namespace() is not None and namespace != _pid_namespace():
        return None  # another container on this kernel: its pids are not ours to look up
    try:
        proc = psutil.Process(pid)
        status = proc.status()
    except psutil.NoSuchProcess:
        return f"its process (pid {pid}) is gone"
    except (psutil.Error, OSError):
        return None
    if status == psutil.STATUS_ZOMBIE:
        return f"its process (pid {pid}) is gone"
    ticks = process.get("start_ticks")
    if isinstance(ticks, int) and not isinstance(ticks, bool):
        now = _start_ticks(pid)
        if now is not None and now != ticks:
            return f"its process (pid {pid}) is gone (the pid now belongs to another process)"
        if now is not None:
            return None
    started = process.get("started")
    if isinstance(started, (int, float)) and not isinstance(started, bool):
        try:
            if abs(proc.create_time() - float(started)) > START_SLACK_S:
                return f"its process (pid {pid}) is gone (the pid now belongs to another process)"
        except (psutil.Error, OSError):
            return None
    return None


def written_before_boot(hostname: object, mtime: float | None) -> str | None:
    """Why a run whose manifest records no process (an older lbench) is provably over, or None: its
    manifest names this host and was last modified (``mtime``, seconds since the epoch) before this
    machine last booted (``psutil.boot_time()``), so the process that wrote it is gone."""
    if not isinstance(hostname, str) or hostname != socket.gethostname() or mtime is None:
        return None
    try:
        booted = psutil.boot_time()
    except (OSError, RuntimeError, AttributeError):
        return None
    if mtime >= booted - START_SLACK_S:
        return None
    return "its manifest (an older lbench's, which records no process) was last written before this machine last booted"
