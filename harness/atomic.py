"""Write a file so a reader sees the old content or the new one, never half of either.

The text goes to a temporary file in the same folder (so the rename stays on one file
system), which ``os.replace`` then moves over the target: atomic on POSIX and Windows.
A failed write removes its temporary file and leaves the target as it was.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=indent, default=str))
