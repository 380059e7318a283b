"""macOS facts and memory readings: parsers (pure, tested on verbatim fixtures in
tests/fixtures/macos/) and thin readers that run the commands on a Mac.

Parsers tolerate extra lines, reordered keys and missing keys; a reading that
cannot be taken is ``None`` ("not available"), never 0.
"""

from __future__ import annotations

import platform
import re
import subprocess

VM_STAT_HEADER = re.compile(r"page size of (\d+) bytes")
VM_STAT_LINE = re.compile(r'^"?([^":]+)"?:\s+(\d+)\.?\s*$')
SYSCTL_LINE = re.compile(r"^([A-Za-z0-9_.]+):\s*(.*)$")
IOREG_PERF = re.compile(r'"PerformanceStatistics"\s*=\s*\{(.*)\}')
IOREG_PAIR = re.compile(r'"([^"]+)"=(-?\d+)')


def parse_vm_stat(text: str) -> dict | None:
    """Pages by name, the page size from the header, and wired bytes."""
    m = VM_STAT_HEADER.search(text)
    if not m:
        return None
    page = int(m.group(1))
    pages = {}
    for line in text.splitlines()[1:]:
        lm = VM_STAT_LINE.match(line.strip())
        if lm:
            pages[lm.group(1).strip()] = int(lm.group(2))
    wired = pages.get("Pages wired down")
    return {"page_size": page, "pages": pages, "wired_bytes": wired * page if wired is not None else None}


def parse_sysctl(text: str) -> dict[str, str]:
    """``key: value`` lines; skips command echoes, bare values and 'unknown oid' errors."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("$", "sysctl:")):
            continue
        m = SYSCTL_LINE.match(line)
        if m and "." in m.group(1):
            out[m.group(1)] = m.group(2).strip()
    return out


def parse_sw_vers(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def parse_ioreg_perf(text: str) -> dict[str, int]:
    """The PerformanceStatistics dictionary of AGXAccelerator (whole quoted keys)."""
    m = IOREG_PERF.search(text)
    return {k: int(v) for k, v in IOREG_PAIR.findall(m.group(1))} if m else {}


def parse_ioreg_gpu(text: str) -> dict:
    model = re.search(r'"model"\s*=\s*"([^"]+)"', text)
    cores = re.search(r'"gpu-core-count"\s*=\s*(\d+)', text)
    return {"gpu_model": model.group(1) if model else None, "gpu_cores": int(cores.group(1)) if cores else None}


def is_virtual(chip: str | None, gpu_model: str | None, hw_model: str | None = None,
               hv_vmm_present: int | None = None) -> bool:
    """A virtual Mac: "Apple M1 (Virtual)" / "Apple Paravirtual device" (hosted runners), hw.model
    VirtualMac2,1 (Apple's Virtualization framework: Tart, Anka, UTM), or kern.hv_vmm_present = 1."""
    text = f"{chip or ''} {gpu_model or ''}".lower()
    return ("virtual" in text or "paravirtual" in text or (hw_model or "").startswith("VirtualMac")
            or hv_vmm_present == 1)


def macos_facts(sysctl: dict[str, str], sw_vers: dict[str, str], gpu: dict) -> dict:
    """The manifest's macOS section from parsed readings."""
    def num(key: str) -> int | None:
        v = sysctl.get(key)
        return int(v) if v is not None and v.lstrip("-").isdigit() else None

    chip = sysctl.get("machdep.cpu.brand_string")
    return {
        "chip": chip, "hw_model": sysctl.get("hw.model"), "memsize_bytes": num("hw.memsize"),
        "p_cores": num("hw.perflevel0.physicalcpu"), "e_cores": num("hw.perflevel1.physicalcpu"),
        "page_size": num("vm.pagesize"), "iogpu_wired_limit_mb": num("iogpu.wired_limit_mb"),
        # the GPU wired-memory low-water mark, its dynamic switch and the wired collector (macOS 26.1 unwires
        # about 1 s after use unless iogpu.disable_wired_collector=1: llama.cpp PR #17766); None where the oid
        # does not exist on this macOS
        "iogpu_wired_lwm_mb": num("iogpu.wired_lwm_mb"), "iogpu_dynamic_lwm": num("iogpu.dynamic_lwm"),
        "iogpu_disable_wired_collector": num("iogpu.disable_wired_collector"),
        "macos": sw_vers.get("ProductVersion"), "macos_build": sw_vers.get("BuildVersion"),
        "gpu_model": gpu.get("gpu_model"), "gpu_cores": gpu.get("gpu_cores"),
        "virtual": is_virtual(chip, gpu.get("gpu_model"), sysctl.get("hw.model"), num("kern.hv_vmm_present")),
        "rosetta": num("sysctl.proc_translated") == 1,  # an x86_64 Python on Apple Silicon: machine() lies
    }


SYSCTL_KEYS = ["machdep.cpu.brand_string", "hw.model", "hw.memsize", "hw.perflevel0.physicalcpu",
               "hw.perflevel1.physicalcpu", "vm.pagesize", "iogpu.wired_limit_mb", "iogpu.wired_lwm_mb",
               "iogpu.dynamic_lwm", "iogpu.disable_wired_collector", "kern.hv_vmm_present", "sysctl.proc_translated"]


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def on_macos() -> bool:
    return platform.system() == "Darwin"


def read_macos_facts() -> dict | None:
    if not on_macos():
        return None
    sysctl = {}
    for key in SYSCTL_KEYS:  # one key per call: an unknown oid must not hide the others
        sysctl.update(parse_sysctl(_run(["sysctl", key])))
    ioreg = _run(["ioreg", "-r", "-d", "1", "-w", "0", "-c", "AGXAccelerator"])
    return macos_facts(sysctl, parse_sw_vers(_run(["sw_vers"])), parse_ioreg_gpu(ioreg))


def read_wired_bytes() -> int | None:
    if not on_macos():
        return None
    parsed = parse_vm_stat(_run(["vm_stat"]))
    return parsed["wired_bytes"] if parsed else None


def read_gpu_memory() -> dict | None:
    if not on_macos():
        return None
    perf = parse_ioreg_perf(_run(["ioreg", "-r", "-d", "1", "-w", "0", "-c", "AGXAccelerator"]))
    if not perf:
        return None
    return {"in_use_system_memory_bytes": perf.get("In use system memory"),
            "alloc_system_memory_bytes": perf.get("Alloc system memory")}


_THERM_LIMIT = re.compile(r"^\s*(CPU_Speed_Limit|CPU_Scheduler_Limit|CPU_Available_CPUs)\s*=\s*(\d+)", re.M)
_THERM_LEVEL = re.compile(r"(thermal|performance) warning level (?:set to|is|=)\s*(\d+)", re.I)
_POWER = re.compile(r"Now drawing from '([^']+)'")


def parse_pmset_therm(text: str) -> dict:
    """``pmset -g therm``: CPU speed/scheduler limits (percent; 100 = not throttled) and the
    thermal / performance warning levels when recorded ("No ... has been recorded" -> absent)."""
    out: dict = {k.lower(): int(v) for k, v in _THERM_LIMIT.findall(text)}
    for kind, level in _THERM_LEVEL.findall(text):
        out[f"{kind.lower()}_warning_level"] = int(level)
    return out


def parse_pmset_power_source(text: str) -> str | None:
    """``pmset -g batt``: "AC Power" or "Battery Power"."""
    m = _POWER.search(text)
    return m.group(1) if m else None


THERMAL_PRESSURE_KEY = "com.apple.system.thermalpressurelevel"
# the levels of that notification (what powermetrics -s thermal calls "Current pressure level")
THERMAL_PRESSURE_LEVELS = {0: "nominal", 1: "moderate", 2: "heavy", 3: "trapping", 4: "sleeping"}


def parse_notifyutil_level(text: str, key: str = THERMAL_PRESSURE_KEY) -> int | None:
    """``notifyutil -g KEY`` prints the key and its state; the state as an int, None when absent."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return None


def read_thermal_state() -> dict | None:
    """Thermal and power state for run quality (macOS only; None elsewhere): pmset's limits (Intel), the
    thermal pressure level Apple Silicon does report (``notifyutil -g``, base OS, no root, no pyobjc) and
    the power source."""
    if not on_macos():
        return None
    state = parse_pmset_therm(_run(["pmset", "-g", "therm"]))
    level = parse_notifyutil_level(_run(["notifyutil", "-g", THERMAL_PRESSURE_KEY]))
    if level is not None:
        state["thermal_pressure_level"] = level
        state["thermal_pressure"] = THERMAL_PRESSURE_LEVELS.get(level, f"level {level}")
    state["power_source"] = parse_pmset_power_source(_run(["pmset", "-g", "batt"]))
    return state


def thermal_warnings(before: dict | None, after: dict | None) -> list[str]:
    """Sentences for run quality: throttling, a warning level, battery power, or a change."""
    warnings: list[str] = []
    for label, s in (("before", before), ("after", after)):
        if not s:
            continue
        limit = s.get("cpu_speed_limit")
        if limit is not None and limit < 100:
            warnings.append(f"CPU speed limited to {limit}% {label} the run (thermal throttling): timings are slower "
                            "than this Mac's normal")
        for kind in ("thermal", "performance"):
            level = s.get(f"{kind}_warning_level")
            if level:
                warnings.append(f"macOS {kind} warning level {level} {label} the run")
        pressure = s.get("thermal_pressure_level")
        if pressure:  # 0 is nominal
            warnings.append(f"thermal pressure {s.get('thermal_pressure')} {label} the run "
                            f"({THERMAL_PRESSURE_KEY} = {pressure}): macOS slows the CPU and GPU")
    if before and before.get("power_source") == "Battery Power":
        warnings.append("the Mac ran on battery: power management can slow the CPU and GPU")
    if before and after and before.get("power_source") != after.get("power_source") and after.get("power_source"):
        warnings.append(f"power source changed during the run: {before.get('power_source')} -> "
                        f"{after.get('power_source')}")
    return warnings


def blind_spots(snapshot: dict) -> list[str]:
    """What run quality cannot see on this Mac, said once (from a quality snapshot):
    - on Apple Silicon ``pmset -g therm`` prints only its "No ... has been recorded" notes, even while
      throttling (exelban/stats#749; macmade/Hot#80), so no thermal warning means "not known", not "cool";
    - psutil reads other users' processes only as root (psutil/_psosx.py: task info "should work for PIDs
      owned by user only"), so busy root processes (backupd, mds, WindowServer) are not seen."""
    thermal = snapshot.get("thermal")
    if thermal is None:  # not a Mac
        return []
    out = []
    if not any(k in thermal for k in ("cpu_speed_limit", "thermal_warning_level", "performance_warning_level",
                                      "thermal_pressure_level")):
        out.append("thermal state unknown: pmset -g therm reports nothing on Apple Silicon, even while throttling, "
                   f"and notifyutil -g {THERMAL_PRESSURE_KEY} gave no level")
    denied = snapshot.get("unreadable_processes")
    if denied:
        out.append(f"{denied} processes of other users (root) could not be read: a busy system process "
                   "(backupd, mds, WindowServer) would not be named here")
    return out


def paravirtual_reason(facts: dict | None) -> str | None:
    """Why Metal and MLX claims are not checkable on this Mac (``macos_facts``): a virtual Mac's GPU is
    "Apple Paravirtual device" (hosted runners; llama.cpp's own CI: "Metal Paravirtual devices are difficult
    to support -> disable"); None on a real Mac or off macOS."""
    if not facts or not facts.get("virtual"):
        return None
    return (f"not checkable here: a virtual Mac ({facts.get('chip')}, {facts.get('hw_model')}, GPU "
            f"{facts.get('gpu_model')}) has a paravirtual GPU, not Apple Silicon's Metal")


def read_paravirtual_reason() -> str | None:
    return paravirtual_reason(read_macos_facts()) if on_macos() else None
