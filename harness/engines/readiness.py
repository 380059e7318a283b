"""Waiting for a server lbench started (or was pointed at) to answer: one loop for every engine.

``wait_until_ready`` polls ``url`` on loopback until ``ready(response)`` holds, the process exits
(an ``EngineError`` with the log's tail, so the cause is on screen) or ``timeout_s`` passes.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from harness.errors import EngineError


def log_tail(path: Path | None, chars: int = 3000) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def wait_until_ready(url: str, *, what: str, timeout_s: float, proc: subprocess.Popen | None = None,
                     log_path: Path | None = None, ready: Callable[[httpx.Response], bool] | None = None,
                     poll_s: float = 0.05) -> None:
    """Return once ``GET url`` answers as ``ready`` says (default: HTTP 200)."""
    check = ready or (lambda r: r.status_code == 200)
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=5.0, trust_env=False) as probe:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise EngineError(f"{what} exited with status {proc.returncode} while starting",
                                  where=f"{log_path}\n{log_tail(log_path)}" if log_path else None,
                                  hint="read the server log above")
            try:
                if check(probe.get(url)):
                    return
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(poll_s)
    raise EngineError(f"{what} did not become ready within {timeout_s:.0f} s ({url})",
                      where=f"{log_path}\n{log_tail(log_path)}" if log_path else None)
