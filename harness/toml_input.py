"""TOML files people exchange (claim specs, run specs, gate configs), read as untrusted input:
every way the file can be wrong is bad input (exit 2) with what and where, never a traceback."""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.errors import BadInput

MAX_SPEC_BYTES = 1 << 20  # a claim or run spec is a few hundred bytes; more is not a spec


def read_toml(path: Path, what: str) -> dict:
    """A TOML file people exchange (claim spec, run spec), parsed with every failure bad input:
    missing, not a regular file, too large, not UTF-8, not TOML, nested past Python's limit."""
    import os
    import stat

    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO cannot block the open
    except OSError as exc:
        raise BadInput(f"cannot read {what}: {exc.strerror or exc}", where=where) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{what} is not a regular file", where=where, hint="give a .toml file")
        raw = fh.read(MAX_SPEC_BYTES + 1)
    if len(raw) > MAX_SPEC_BYTES:
        raise BadInput(f"{what} is larger than {MAX_SPEC_BYTES} bytes", where=where, hint="a spec is a short TOML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{what} is not UTF-8 text (byte {exc.start})", where=where, hint="save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{what} is not valid TOML: {exc}", where=where) from None
    except RecursionError:
        raise BadInput(f"{what} is nested too deeply", where=where, hint="a spec has a few levels of tables") from None
