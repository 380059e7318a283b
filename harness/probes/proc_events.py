"""Exact fork and exit order of a process's children, from the Linux kernel's process events
connector (``cn_proc``, a netlink socket).

Sampling ``/proc`` can miss an overlap shorter than its period, and the router's own log is
written by several threads (its ``exited`` line comes after the status change that wakes
the next load), so neither orders a victim's exit against the next spawn exactly.  The
kernel sends a fork event from inside ``fork()`` and an exit event from inside ``exit()``
(before the parent can reap the child), each with its own monotonic timestamp: an exit
event stamped before a fork event happened before it.

Listening needs CAP_NET_ADMIN (root) on most kernels, and the initial network namespace;
``available()`` says whether events really arrive here (it forks ``true`` and waits for
the event), with the reason when not.
"""

from __future__ import annotations

import functools
import os
import select
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
PROC_EVENT_FORK, PROC_EVENT_EXIT = 0x00000001, 0x80000000
NLMSG_DONE = 3
_HDR = 16 + 20  # nlmsghdr + cn_msg
_EVENT = _HDR + 16  # proc_event: what (u32), cpu (u32), timestamp_ns (u64), then the event


@dataclass(frozen=True)
class ProcEvent:
    kind: str  # "fork" | "exit"
    t_ns: int  # the kernel's monotonic clock (CLOCK_MONOTONIC), nanoseconds
    pid: int  # the process that was created or exited
    parent: int | None = None  # fork: the parent's process id (tgid)
    exit_code: int | None = None


def parse(data: bytes) -> ProcEvent | None:
    """One netlink message of the connector: a fork of a new process (not a thread) or the exit
    of a whole process (its main thread), else None."""
    if len(data) < _EVENT + 8:
        return None
    what, _cpu, t_ns = struct.unpack_from("=IIQ", data, _HDR)
    if what == PROC_EVENT_FORK and len(data) >= _EVENT + 16:
        _ppid, ptgid, cpid, ctgid = struct.unpack_from("=IIII", data, _EVENT)
        return ProcEvent("fork", t_ns, cpid, parent=ptgid) if cpid == ctgid else None
    if what == PROC_EVENT_EXIT and len(data) >= _EVENT + 16:
        pid, tgid, code, _sig = struct.unpack_from("=IIII", data, _EVENT)
        return ProcEvent("exit", t_ns, pid, exit_code=code) if pid == tgid else None
    return None


def _control(op: int) -> bytes:
    cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 0, 0, 4, 0) + struct.pack("=I", op)
    return struct.pack("=IHHII", 16 + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn


def _open() -> socket.socket:
    if sys.platform != "linux":
        raise OSError("the proc connector is Linux's (netlink)")
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((0, CN_IDX_PROC))
    s.send(_control(PROC_CN_MCAST_LISTEN))
    return s


class ChildEvents:
    """Listen in a thread; keep the fork events whose parent is ``root`` (set it with
    ``watch`` once the process exists) and the exit events of those children."""

    def __init__(self) -> None:
        self.sock = _open()
        self.root: int | None = None
        self.events: list[ProcEvent] = []
        self.lost = 0  # messages dropped by a full receive buffer (ENOBUFS)
        self._children: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-events", daemon=True)
        self._thread.start()

    def watch(self, root: int) -> None:
        self.root = root

    def _loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.1)
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError:  # ENOBUFS: the kernel dropped events; say so in the figures
                self.lost += 1
                continue
            e = parse(data)
            if e is None or self.root is None:
                continue
            if e.kind == "fork" and e.parent == self.root:
                self._children.add(e.pid)
                self.events.append(e)
            elif e.kind == "exit" and e.pid in self._children:
                self._children.discard(e.pid)
                self.events.append(e)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        try:
            self.sock.send(_control(PROC_CN_MCAST_IGNORE))
        except OSError:
            pass
        self.sock.close()


@functools.cache
def available(timeout: float = 30.0) -> tuple[bool, str]:
    """(True, "") when fork events of this process's children arrive, else (False, why).  The wait
    ends at the event (milliseconds on a quiet machine); ``timeout`` only bounds a kernel that sends
    none, long enough that a loaded machine's late event is not taken for a missing one.  Asked
    once per process (the kernel's answer does not change)."""
    if not sys.platform.startswith("linux"):
        return False, f"the kernel's process events connector is Linux only; this host: {sys.platform}"
    try:
        listener = ChildEvents()
    except OSError as exc:
        return False, f"cannot open the kernel's process events connector (netlink): {exc}"
    try:
        listener.watch(os.getpid())
        proc = subprocess.Popen(["true"])
        proc.wait()
        deadline = timeout
        while deadline > 0 and not any(e.kind == "exit" and e.pid == proc.pid for e in listener.events):
            select.select([], [], [], 0.05)
            deadline -= 0.05
        if any(e.pid == proc.pid for e in listener.events):
            return True, ""
        return False, ("no process events arrived from the kernel's connector (needs CAP_NET_ADMIN, usually "
                       "root, in the initial network namespace)")
    finally:
        listener.close()
