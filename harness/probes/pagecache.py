"""How much of a file is in the page cache, and making it cold or warm.

- ``resident_fraction``: ``mincore(2)`` over a fresh read-only ``mmap(2)`` of the
  file (libc via ctypes: Python's mmap object does not expose its address for a
  read-only map).  Mapping and asking reads no data and touches no server.
- ``evict``: ``posix_fadvise(POSIX_FADV_DONTNEED)``, no root needed.  The kernel
  keeps pages that some process still maps, so a model must be evicted before a
  server maps it (a cold start), not while it runs.
- ``warm``: read the file through once.
On macOS these are "not available" (``None``); ``purge`` needs root there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
import time
from pathlib import Path

import numpy as np

LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if LINUX else None
if _libc is not None:
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE


def available() -> bool:
    return _libc is not None and hasattr(os, "posix_fadvise")


def _c() -> ctypes.CDLL:
    """libc, for the calls below (reached only where ``available()`` holds)."""
    if _libc is None:
        raise RuntimeError("the page-cache probe needs Linux libc (check pagecache.available() first)")
    return _libc


def resident_fraction(path: str | os.PathLike[str]) -> float | None:
    """Fraction (0-1) of the file's pages in the page cache; None when not available."""
    if not available() or sys.platform == "win32":  # available() is Linux only; the check tells mypy
        return None
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _c().mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, MAP_FAILED):
            return None
        try:
            n_pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(n_pages)
            if _c().mincore(addr, size, vec) != 0:
                return None
            resident = int(np.count_nonzero(np.frombuffer(memoryview(vec), dtype=np.uint8) & 1))
        finally:
            _c().munmap(addr, size)
    finally:
        os.close(fd)
    return resident / n_pages


class ResidencyProbe:
    """``resident_fraction`` for one file, with the mapping kept between readings.

    Mapping and unmapping the model file on every reading made one-tick (~4 ms) stalls
    of the measured requests far more frequent (8 of 500 requests over 2 ms, against 0
    without the probe); one mapping for the whole sweep, only ``mincore`` per reading,
    removes that.  The mapping is never touched, so it faults nothing in and does not
    keep pages from being evicted.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.size = os.path.getsize(path)
        self.n_pages = max((self.size + PAGE - 1) // PAGE, 1)
        self.vec = ctypes.create_string_buffer(self.n_pages)
        self.view = np.frombuffer(memoryview(self.vec), dtype=np.uint8)  # shares vec's memory
        self.fd: int | None = os.open(path, os.O_RDONLY)
        self.addr: int | None = None
        if self.size and sys.platform != "win32":  # callers check available() (Linux only); this tells mypy
            self.addr = _c().mmap(None, self.size, mmap.PROT_READ, mmap.MAP_SHARED, self.fd, 0)
        if self.addr == MAP_FAILED:
            self.addr = None

    def __call__(self) -> float | None:
        if self.size == 0:
            return 1.0
        if self.addr is None or _c().mincore(self.addr, self.size, self.vec) != 0:
            return None
        return int(np.count_nonzero(self.view & 1)) / self.n_pages

    def close(self) -> None:
        if self.addr is not None:
            _c().munmap(self.addr, self.size)
            self.addr = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.close()


def evict(path: str | os.PathLike[str]) -> None:
    if not available() or not sys.platform.startswith("linux"):  # available() is Linux only; this tells mypy
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path: str | os.PathLike[str], chunk: int = 16 << 20) -> None:
    timed_read(path, chunk)


def timed_read(path: str | os.PathLike[str], chunk: int = 16 << 20) -> float:
    """Read the file through once (it ends up in the page cache); the seconds it took."""
    t = time.perf_counter()
    with Path(path).open("rb", buffering=0) as fh:
        while fh.read(chunk):
            pass
    return time.perf_counter() - t
