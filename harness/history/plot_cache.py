"""The trend site's plots, kept between builds of the site: a series whose points did not change
is not drawn again.

A plot is stored as ``<archive>/.catalog/plots/<key>.png``, the key a SHA-256 of everything the
plot shows (the points with their builds, run ids, values and intervals, the change points, the
title, unit and footnote, and ``PLOT_VERSION``), so a cached PNG is the one the same inputs would draw.
After each site build the files it did not use are removed: the cache holds one site's plots at
most.  A read-only archive (or any error writing) just draws every plot; the cache is only an
accelerator, and deleting it loses nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

PLOT_VERSION = 3  # bump when plot_series draws differently: every cached plot is drawn again (3: build slots)
PLOT_DIR = "plots"


def plot_key(points: pd.DataFrame, changes: list, title: str, unit: str, note: str = "") -> str:
    h = hashlib.sha256(f"v{PLOT_VERSION}\0{title}\0{unit}\0{note}\0{len(points)}\0".encode())
    cols = [c for c in ("build", "started_at", "run_id", "value", "lo", "hi") if c in points]
    # a 64-bit hash per row, column by column in pandas' own code (a CSV of every point cost more
    # than the rest of a warm build on long series)
    h.update(pd.util.hash_pandas_object(points[cols], index=False).to_numpy().tobytes())
    for c in changes:
        h.update(f"\0{c.index}:{c.ratio!r}".encode())
    return h.hexdigest()


class PlotCache:
    def __init__(self, folder: Path | None):
        self.folder = folder
        self.used: set[str] = set()
        self.hits = 0
        self.drawn = 0

    def lookup(self, key: str) -> bytes | None:
        """The cached PNG of ``key`` (counted as used), or None when it must be drawn."""
        self.used.add(key)
        path = self.folder / f"{key}.png" if self.folder is not None else None
        try:
            if path is not None and path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                if data.startswith(b"\x89PNG"):
                    self.hits += 1
                    return data
        except OSError:  # unreadable: drawn again
            pass
        return None

    def store(self, key: str, data: bytes) -> None:
        """Keep a plot just drawn (nothing happens where the cache cannot be written)."""
        self.used.add(key)
        self.drawn += 1
        path = self.folder / f"{key}.png" if self.folder is not None else None
        if path is None:
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:  # a read-only archive: drawn every time
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass

    def get(self, key: str, draw: Callable[[], bytes]) -> bytes:
        data = self.lookup(key)
        if data is None:
            data = draw()
            self.store(key, data)
        return data

    def prune(self) -> None:
        """Remove the cached plots this build did not use (one site's plots at most stay)."""
        if self.folder is None or not self.folder.is_dir():
            return
        for path in self.folder.glob("*.png"):
            if path.stem not in self.used:
                try:
                    path.unlink()
                except OSError:
                    pass
