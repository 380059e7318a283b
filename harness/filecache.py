"""A small JSON cache in lbench's cache dir, keyed by a file's (path, size, mtime).

Used for facts that are slow to compute from big files (sha256, GGUF metadata):
an edited or replaced file gets a new key, so entries never go stale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness import paths
from harness.atomic import atomic_write_json


class FileKeyedCache:
    def __init__(self, name: str):
        self.name = name

    @property
    def file(self) -> Path:
        return paths.cache_dir() / f"{self.name}.json"

    @staticmethod
    def key(path: str | os.PathLike[str]) -> str:
        p = Path(path).resolve()
        st = p.stat()
        return f"{p}|{st.st_size}|{st.st_mtime_ns}"

    def _load(self) -> dict:
        try:
            return json.loads(self.file.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, path: str | os.PathLike[str]) -> Any:  # any JSON value put there
        return self._load().get(self.key(path))

    def put(self, path: str | os.PathLike[str], value: object) -> None:
        data = self._load()
        data[self.key(path)] = value
        self.file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.file, data, indent=None)
