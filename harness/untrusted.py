"""Reading files that came from elsewhere (a CI artefact, a colleague's run directory).

Every file lbench reads back from a run directory, a baseline or a history archive goes
through here: it must be a regular file (no FIFO that blocks, no device that never ends,
no symlink pointing out of the run), no larger than a limit, and a JSON document no deeper
than a limit.  What fails is a ``BadInput`` naming the file and what to do; nothing is
half-read.  The limits are far above what lbench writes (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from harness.errors import BadInput

MAX_JSON_BYTES = 64 * 1024 * 1024  # a manifest of a long repro run is well under 1 MiB
MAX_JSON_DEPTH = 64  # lbench nests at most ~8 levels
MAX_TABLE_BYTES = 4 * 1024 * 1024 * 1024  # a journal; 10 million samples are ~3 GiB of JSON lines


RUN_HINT = "lbench reads only regular files inside a run directory; copy the run again"


def open_regular(path: Path, *, max_bytes: int, what: str = "file", hint: str = RUN_HINT) -> tuple[int, int]:
    """Open ``path`` for reading without following a final symlink or blocking on a FIFO.
    Returns (fd, size); the caller closes fd.  Refuses what is not a regular file, or too large
    (``hint``: what to do, for a file that is not part of a run: a key, a trust list)."""
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = "is a symbolic link" if path.is_symlink() else (exc.strerror or str(exc))
        raise BadInput(f"cannot read the {what}: it {reason}" if path.is_symlink() else
                       f"cannot read the {what}: {reason}", where=str(path),
                       hint=hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"the {what} is not a regular file (a FIFO, device or directory)", where=str(path),
                           hint=hint)
        if st.st_size > max_bytes:
            raise BadInput(f"the {what} is {st.st_size:,} bytes, over lbench's limit of {max_bytes:,}",
                           where=str(path), hint="this is not a file lbench wrote; copy the run again")
        if sys.platform != "win32":  # a FIFO opened non-blocking; Windows has none
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_bytes(path: Path, *, max_bytes: int, what: str = "file", hint: str = RUN_HINT) -> bytes:
    fd, size = open_regular(path, max_bytes=max_bytes, what=what, hint=hint)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while read
        raise BadInput(f"the {what} is over lbench's limit of {max_bytes:,} bytes", where=str(path),
                       hint="this is not a file lbench wrote; copy the run again")
    return data


def depth(value: Any, limit: int) -> int:
    """The nesting depth of a JSON value, stopping once ``limit`` is passed (no recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: Path, *, what: str = "file", max_bytes: int | None = None,
              max_depth: int | None = None, hint: str = RUN_HINT) -> Any:
    """A JSON document from an untrusted file: regular, bounded in size and depth, valid UTF-8.
    NaN and Infinity are read as they were written by older lbench versions (Python's json)."""
    max_bytes = MAX_JSON_BYTES if max_bytes is None else max_bytes
    max_depth = MAX_JSON_DEPTH if max_depth is None else max_depth
    data = read_bytes(path, max_bytes=max_bytes, what=what, hint=hint)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"the {what} is not UTF-8 text ({exc.reason} at byte {exc.start})", where=str(path),
                       hint="the file is damaged; copy the run again") from None
    except RecursionError:
        raise BadInput(f"the {what} nests deeper than lbench reads ({max_depth} levels)", where=str(path),
                       hint="this is not a file lbench wrote; copy the run again") from None
    except ValueError as exc:
        raise BadInput(f"the {what} is not valid JSON ({exc})", where=str(path),
                       hint="the file is damaged or cut short; copy the run again") from None
    if depth(value, max_depth) > max_depth:
        raise BadInput(f"the {what} nests deeper than lbench reads ({max_depth} levels)", where=str(path),
                       hint="this is not a file lbench wrote; copy the run again")
    return value


def inside(base: Path, candidate: Path) -> bool:
    """Whether ``candidate`` (resolved, symlinks followed) lies inside ``base``."""
    try:
        candidate.resolve().relative_to(base.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True
