"""Whether llama.cpp's Metal residency sets are in effect for a cell, from what the machine shows.

The log lines ``use residency sets = true`` and ``creating a residency set collection
(keep_alive = 180 s)`` are printed before any runtime check (pinned source, sdist 11434,
``ggml/src/ggml-metal/ggml-metal-device.m``):

- sets exist only when compiled in: ``GGML_METAL_HAS_RESIDENCY_SETS`` needs an SDK >= 15 and
  a target that is not x86_64 (lines 19-25); without it ``GGML_METAL_NO_RESIDENCY`` is not
  even read (1265-1268), so a ``none`` cell is the ``default`` cell;
- per-buffer sets are made only ``if (@available(macOS 15.0, ...))`` (2040-2061): on macOS 14
  no set is ever created, whatever the log says;
- ``GGML_METAL_NO_RESIDENCY`` is tested with ``getenv(...) == nil`` (any value disables them);
  ``GGML_METAL_RESIDENCY_KEEP_ALIVE_S`` is read with ``atoi``, and a value <= 0 gives 180 s
  (976-985).

So the decision needs the macOS version, the SDK the engine was linked against (Mach-O
``LC_BUILD_VERSION``, read with ``otool -l``), the engine's architecture and the cell's
``--keep-alive`` setting; never the log line.  ``decide`` is pure (unit-tested); ``sdk_of``
runs ``otool`` on a Mac only.

This module is the one place every command asks (``lbench idle`` and what runs idle cells: ``ab``,
``gate``; the cells' records that ``evidence`` reads; ``repro``'s Metal claims through
``claim_gate``):

- ``apple_silicon``: the hardware, also under Rosetta (``sysctl.proc_translated`` = 1: an x86_64
  Python says ``x86_64`` on an M-series Mac, whose engine may well be arm64);
- ``metal_library``: whose SDK counts.  lbench's build links Metal into the executable; Homebrew's
  ggml (``GGML_BACKEND_DL=ON``) loads it from ``libexec/libggml-metal.so``, so that library's
  ``LC_BUILD_VERSION`` decides;
- ``macos_version``: ``sw_vers -productVersion`` (``platform.mac_ver()`` can say 16.0 on macOS 26
  for a Python built with an older SDK: python/cpython#135675).
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from harness.probes.macos import _run, parse_sysctl
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

DEFAULT_KEEP_ALIVE_S = 180  # ggml-metal-device.m: the keep-alive when the variable is unset, <= 0 or not a number
_BUILD_VERSION = re.compile(r"cmd LC_BUILD_VERSION\b(.*?)(?=^Load command|\Z)", re.S | re.M)
_FIELD = re.compile(r"^\s*(platform|minos|sdk)\s+(\S+)", re.M)


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'15.2' -> (15, 2); None for an unknown or malformed version."""
    if not text:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)*)", text)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def parse_build_version(otool_l: str) -> dict[str, str]:
    """``otool -l BINARY`` -> the last LC_BUILD_VERSION's platform, minos and sdk ({} when absent).
    (A fat binary lists one command per architecture; the caller asks for one with ``-arch``.)"""
    blocks = _BUILD_VERSION.findall(otool_l)
    return dict(_FIELD.findall(blocks[-1])) if blocks else {}


def keep_alive_seconds(setting: str) -> int | None:
    """The keep-alive ggml uses for a ``--keep-alive`` setting (None for 'none')."""
    if setting == "none":
        return None
    if setting == "default":
        return DEFAULT_KEEP_ALIVE_S
    try:
        value = int(setting)  # atoi: "30" -> 30; lbench's spec already refuses non-numbers
    except ValueError:
        return DEFAULT_KEEP_ALIVE_S
    return value if value > 0 else DEFAULT_KEEP_ALIVE_S


@dataclass(frozen=True)
class Residency:
    """What a cell's residency setting does on this machine.

    ``compiled_in``/``in_effect`` are None when a fact needed to decide is unknown (then
    ``applies`` is None too: the cell is not compared as if its setting applied)."""

    setting: str
    compiled_in: bool | None
    in_effect: bool | None  # residency sets are created while this cell's server runs
    keep_alive_s: int | None  # the keep-alive in effect (None when no sets)
    applies: bool | None  # the setting changes anything compared with 'default'
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def _no_sets(setting: str, compiled_in: bool, reason: str) -> Residency:
    """A machine where no set is ever created: 'default' is what it says (the engine's own behaviour,
    no sets), every other setting changes nothing."""
    return Residency(setting, compiled_in, False, None, setting == "default", reason)


def decide(setting: str, *, macos: str | None, sdk: str | None, arch: str | None) -> Residency:
    """Residency sets for one cell: ``setting`` is the cell's --keep-alive ('default', 'none' or
    seconds), ``macos`` the ProductVersion, ``sdk`` the engine's LC_BUILD_VERSION sdk, ``arch``
    the engine binary's architecture ('arm64', 'x86_64')."""
    if arch is not None and arch.lower() in ("x86_64", "amd64", "i386"):
        return _no_sets(setting, False, f"the engine is an {arch} build: residency sets are compiled out "
                        "(!TARGET_CPU_X86_64)")
    sdk_v, macos_v = version_tuple(sdk), version_tuple(macos)
    if sdk_v is None:
        return Residency(setting, None, None, None, None,
                         "the SDK the engine was built with is unknown (no LC_BUILD_VERSION read): "
                         "whether residency sets exist cannot be decided")
    if sdk_v < (15,):
        return _no_sets(setting, False, f"the engine was built with SDK {sdk} (< 15): residency sets are "
                        "compiled out and GGML_METAL_NO_RESIDENCY / GGML_METAL_RESIDENCY_KEEP_ALIVE_S are never "
                        "read, although the log says 'use residency sets = true'")
    if macos_v is None:
        return Residency(setting, True, None, None, None,
                         "the macOS version is unknown: residency sets are created only on macOS >= 15")
    if macos_v < (15,):
        return _no_sets(setting, True, f"macOS {macos} (< 15): no residency set is ever created "
                        "(@available(macOS 15.0)), although the log says 'use residency sets = true' "
                        "and a keep-alive")
    keep = keep_alive_seconds(setting)
    if keep is None:
        return Residency(setting, True, False, None, True, "GGML_METAL_NO_RESIDENCY=1: no residency sets")
    return Residency(setting, True, True, keep, True,
                     f"residency sets in effect, keep-alive {keep} s (SDK {sdk}, macOS {macos})")


def note(decision: Residency) -> str | None:
    """The cell note when the setting cannot apply (None when it does; 'default' always applies:
    it is the engine's own behaviour, recorded in the cell's ``residency``)."""
    if decision.setting == "default":
        return None
    if decision.applies is None:
        return f"keep-alive={decision.setting}: not decided ({decision.reason}); not compared as applied"
    if not decision.applies:
        return f"keep-alive={decision.setting} has no effect here: {decision.reason}"
    return None


@lru_cache(maxsize=32)
def sdk_of(binary: Path) -> dict[str, str]:
    """The engine binary's LC_BUILD_VERSION (platform, minos, sdk) and ``arch`` (the slice read:
    arm64 first, then x86_64), from ``otool -l -arch``; {} without otool or the load command."""
    otool = shutil.which("otool")
    if otool is None:
        return {}
    for arch in ("arm64", "x86_64"):
        try:
            out = subprocess.run([otool, "-l", "-arch", arch, str(binary)], capture_output=True, text=True,
                                 timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return {}
        found = parse_build_version(out)
        if found:
            return {**found, "arch": arch}
    return {}


METAL_LIBRARY_NAMES = ("libggml-metal.so", "libggml-metal.dylib")  # GGML_BACKEND_DL: one library per backend
BREW_PREFIXES = (Path("/opt/homebrew"), Path("/usr/local"))


def metal_library(binary: Path, brew_prefixes: Sequence[Path] = BREW_PREFIXES) -> Path:
    """The file whose SDK decides: ggml's Metal backend library where the engine loads it at run time
    (beside the binary, its ``../libexec`` or ``../lib``, Homebrew's ``opt/ggml/libexec``: where
    ``GGML_BACKEND_DL`` builds put it), else the engine binary itself (a static build, lbench's)."""
    real = binary.resolve() if binary.exists() else binary
    places = [real.parent, real.parent.parent / "libexec", real.parent.parent / "lib"]
    places += [prefix / "opt" / "ggml" / "libexec" for prefix in brew_prefixes
               if prefix in real.parents or (prefix / "bin") == binary.parent]
    for place in places:
        for name in METAL_LIBRARY_NAMES:
            if (place / name).is_file():
                return place / name
    return binary


@lru_cache(maxsize=1)
def macos_version() -> str | None:
    """The macOS ProductVersion from ``sw_vers`` (platform.mac_ver() as a fallback); None off macOS."""
    if platform.system() != "Darwin":
        return None
    return _run(["sw_vers", "-productVersion"]).strip() or platform.mac_ver()[0] or None


def apple_silicon(machine: str | None = None, translated: str | None = None) -> bool:
    """An Apple Silicon Mac, also when this Python runs under Rosetta (``machine()`` then says x86_64)."""
    if platform.system() != "Darwin" and machine is None:
        return False
    machine = platform.machine() if machine is None else machine
    if machine == "arm64":
        return True
    if translated is None:
        translated = parse_sysctl(_run(["sysctl", "sysctl.proc_translated"])).get("sysctl.proc_translated")
    return (translated or "").strip() == "1"


def decide_for(binary: Path, setting: str) -> dict:
    """The cell's residency record on this Mac: the decision (``decide``) from ``macos_version``, the SDK
    and architecture of ``metal_library(binary)``, and the facts it came from."""
    library = metal_library(binary)
    build = sdk_of(library)
    macos = macos_version()
    decision = decide(setting, macos=macos, sdk=build.get("sdk"), arch=build.get("arch"))
    return {**decision.as_dict(), "engine_sdk": build.get("sdk"), "engine_minos": build.get("minos"),
            "engine_arch": build.get("arch"), "macos": macos,
            "metal_library": None if library == binary else str(library), "note": note(decision)}


def claim_gate(macos: str | None, sdk: str | None, arch: str | None) -> tuple[bool, str]:
    """Whether a claim about llama.cpp's residency sets can be checked on this machine: only where sets
    are created (SDK >= 15, not x86_64, macOS >= 15).  Elsewhere the claim is "not checkable here", never
    "contradicted": the log still says 'use residency sets = true' and a keep-alive there."""
    d = decide("default", macos=macos, sdk=sdk, arch=arch)
    if d.in_effect:
        return True, d.reason
    return False, f"llama.cpp's Metal residency sets do not exist here: {d.reason}"


def claim_gate_here(binary: Path) -> tuple[bool, str]:
    """``claim_gate`` for ``binary`` on this machine."""
    build = sdk_of(metal_library(binary))
    return claim_gate(macos_version(), build.get("sdk"), build.get("arch"))
