"""Writes that a reader sees whole or not at all, and that cannot be redirected.

A file goes to a temporary file created exclusively (``O_EXCL``, by ``tempfile``) with an
unpredictable name in the same folder (so the rename stays on one file system), which
``os.replace`` then moves over the target: atomic on POSIX and Windows.  A link planted at a
predictable temporary name cannot redirect the write, and two writers never share a
temporary file.  A failed write removes its temporary file and leaves the target as it was.

A bundle (several files that belong together: an evidence directory, a baseline) is written
into a temporary directory beside its destination and swapped in whole (``atomic_dir``);
``locked`` serialises writers that can meet on one destination.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would have given a new file
_DIR_MODE = 0o777 & ~_umask()


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_many(files: dict[Path, bytes]) -> None:
    """Several files that belong together (the gate's --markdown, --junit, --json): each staged
    in an exclusive temporary file beside its target, then all renamed into place; a failure
    while staging leaves every target as it was."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp")
            staged.append((Path(tmp_name), path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp_name, _FILE_MODE)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data: object, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=indent, default=str))


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if missing, never followed if it
    is a link) for the block: a second writer waits for the first."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        if sys.platform == "win32":  # no flock: msvcrt's byte-range lock (waits, then raises)
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def atomic_dir(dest: Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``dest``; when the block ends without an error
    it replaces ``dest`` whole (a reader sees the old bundle or the new one, never a mix).
    On an error (Ctrl-C included) the temporary directory is removed and ``dest`` is untouched.
    ``dest`` itself, if a symlink, is replaced, never followed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name[:100]}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, _DIR_MODE)
        swap_in(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def swap_in(new: Path, dest: Path) -> None:
    """Move directory ``new`` to ``dest``, replacing whatever ``dest`` was (moved aside first,
    then removed: at no moment does ``dest`` hold a mix of the two)."""
    if not os.path.lexists(dest):
        os.rename(new, dest)
        return
    old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name[:100]}.", suffix=".old"))
    os.rmdir(old)  # only its unpredictable name is needed
    os.rename(dest, old)
    try:
        os.rename(new, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink(missing_ok=True)
