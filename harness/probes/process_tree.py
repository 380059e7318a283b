"""Sample a process tree's size at a high rate: children alive, RSS of each, system memory.

The reading must be cheap so peaks are not missed between samples and the sampler
does not load the machine.  On Linux it reads ``/proc/<pid>/task/<tid>/children``
(the kernel's own child list), ``/proc/<pid>/statm`` and ``/proc/meminfo`` directly:
a few system calls per sample.  Elsewhere it falls back to psutil.
A zombie (exited, not yet reaped) counts as gone: it holds no memory.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
LINUX = sys.platform.startswith("linux") and os.path.exists("/proc/self/task")


@dataclass
class TreeSample:
    t: float  # perf_counter
    children: dict[int, int]  # pid -> rss bytes, live children only
    root_rss: int
    mem_available: int | None

    @property
    def n_children(self) -> int:
        return len(self.children)

    @property
    def total_rss(self) -> int:
        return self.root_rss + sum(self.children.values())


def _read(path: str) -> str | None:
    # raw descriptors: a Python file object costs several times more, and the router
    # has one children file per thread (its HTTP pool grows under load)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 65536).decode()
    except OSError:
        return None
    finally:
        os.close(fd)


def _linux_children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            out += [int(x) for x in text.split()]
    return out


def _linux_rss(pid: int) -> int | None:
    """RSS in bytes; None for a zombie or a process that is gone."""
    statm = _read(f"/proc/{pid}/statm")
    if not statm:
        return None
    rss_pages = int(statm.split()[1])
    if rss_pages == 0:  # zombies have no mm; a live llama-server always has pages
        return None
    return rss_pages * PAGE


def _linux_mem_available() -> int | None:
    text = _read("/proc/meminfo")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def read_tree(root_pid: int, name_filter: Callable[[int], bool] | None = None) -> TreeSample:
    t = time.perf_counter()
    if LINUX:
        root = _linux_rss(root_pid) or 0
        children = {}
        for child in _linux_children(root_pid):
            if name_filter is not None and not name_filter(child):
                continue
            rss = _linux_rss(child)
            if rss is not None:
                children[child] = rss
        return TreeSample(t, children, root, _linux_mem_available())
    try:
        proc = psutil.Process(root_pid)
        root = proc.memory_info().rss
        children = {}
        for c in proc.children(recursive=False):
            try:
                if c.status() == psutil.STATUS_ZOMBIE:
                    continue
                if name_filter is not None and not name_filter(c.pid):
                    continue
                children[c.pid] = c.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    except psutil.NoSuchProcess:
        root, children = 0, {}
    return TreeSample(t, children, root, psutil.virtual_memory().available)


class TreeSampler:
    """Background thread: ``read_tree`` every ``1/rate_hz`` s, each sample to ``emit``."""

    def __init__(self, root_pid: int, emit: Callable[[TreeSample], None], rate_hz: float = 100.0):
        self.root_pid = root_pid
        self.emit = emit
        self.interval = 1.0 / rate_hz
        self.n = 0
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def _loop(self) -> None:
        next_t = time.perf_counter()
        while not self._stop.is_set():
            c0 = time.thread_time()
            self.emit(read_tree(self.root_pid))
            self.cpu_s += time.thread_time() - c0  # reading and recording, both count
            self.n += 1
            next_t += self.interval
            delay = next_t - time.perf_counter()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_t = time.perf_counter()  # fell behind: do not burst to catch up

    def start(self) -> "TreeSampler":
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def tree_states(root_pid: int, label_flag: str = "--alias") -> str:
    """The scheduler state of a process and of each child ("stopped" for a SIGSTOPped one), in
    one line; a child is named by the argument after ``label_flag`` (a router child's model)."""
    try:
        root = psutil.Process(root_pid)
        parts = [f"server pid {root_pid} {root.status()}"]
        children = root.children()
    except psutil.Error:
        return f"server pid {root_pid} gone"
    for child in children:
        try:
            argv = child.cmdline()
            label = argv[argv.index(label_flag) + 1] if label_flag in argv[:-1] else "?"
            parts.append(f"child {label} (pid {child.pid}) {child.status()}")
        except psutil.Error:
            continue
    return ", ".join(parts)
