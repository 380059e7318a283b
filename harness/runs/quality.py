"""Run quality as data (pyperf-style checks): facts about the machine around a run, and
warnings in plain sentences stored in the run's manifest under ``quality``.

``snapshot`` reads load average, the busiest other processes (psutil cpu_percent over a short
interval), where readable under /sys the CPU frequency governor and current frequency, and on
macOS the thermal state (``pmset -g therm``: speed limit, warning levels) and power source.
``assess`` turns two snapshots and the measured samples into warnings.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from harness.probes.macos import blind_spots, read_thermal_state, thermal_warnings
from harness.probes.windows import read_gpu_memory
from harness.probes.sleepwatch import SLEEP_FLAG_S, sleep_warning

BUSY_PCT = 20.0  # another process using more than this share of one core is worth a warning
MIN_REPS = 6  # fewer reps per pause: no 95% order-statistic interval for a median
WIDE_RATIO = 3.0  # p90 / p10 within one pause
CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def snapshot(interval_s: float = 0.2, top: int = 3) -> dict:
    import psutil

    facts: dict = {"cpus": os.cpu_count()}
    facts["loadavg_1m"] = None  # Windows has no load average
    if sys.platform != "win32":
        try:
            facts["loadavg_1m"] = round(os.getloadavg()[0], 2)
        except OSError:
            pass
    me = os.getpid()
    procs = []
    unreadable_first = 0
    for p in psutil.process_iter(["pid", "name"]):
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.AccessDenied:
            unreadable_first += 1
        except (psutil.Error, OSError):
            pass
    psutil.cpu_percent(interval_s)
    busy = []
    denied = 0
    for p in procs:
        try:
            if p.pid in (me, os.getppid()):
                continue
            pct = p.cpu_percent(None)
            if pct > 0:
                busy.append({"pid": p.pid, "name": p.info.get("name"), "cpu_pct": round(pct, 1)})
        except psutil.AccessDenied:
            denied += 1
        except (psutil.Error, OSError):
            pass
    facts["busy_processes"] = sorted(busy, key=lambda b: -b["cpu_pct"])[:top]
    facts["unreadable_processes"] = denied + unreadable_first  # psutil on macOS cannot read other users' (root) processes
    facts["governor"] = _read(CPUFREQ / "scaling_governor")
    freq = _read(CPUFREQ / "scaling_cur_freq")
    facts["cpu0_mhz"] = round(int(freq) / 1000) if freq and freq.isdigit() else None

    facts["thermal"] = read_thermal_state()  # macOS: throttling, warning levels, power source; None elsewhere

    windows_gpu = read_gpu_memory()  # Windows: the PDH adapter counters (typeperf); None elsewhere
    if windows_gpu is not None:
        facts["windows_gpu_memory"] = windows_gpu
    return facts


def assess(before: dict, after: dict, samples: pd.DataFrame, value: str = "latency_ms") -> list[str]:
    warnings = []
    cpus = before.get("cpus") or 1
    for label, s in (("before", before), ("after", after)):
        load = s.get("loadavg_1m")
        if load is not None and load > 0.5 * cpus:
            warnings.append(f"load average {load} {label} the run on {cpus} CPUs: other work competes "
                            "for the CPU; timings are noisy")
        busy = [b for b in s.get("busy_processes", []) if b["cpu_pct"] > BUSY_PCT]
        if busy:  # one sentence per moment, busiest first, not one line per process
            shown = ", ".join(f"{b['name']} (pid {b['pid']}) {b['cpu_pct']}%" for b in busy[:3])
            more = f" and {len(busy) - 3} more" if len(busy) > 3 else ""
            warnings.append(f"{len(busy)} other process{'es were' if len(busy) > 1 else ' was'} busy {label} the "
                            f"run (CPU share of one core): {shown}{more}")
    gov = before.get("governor")
    if gov and gov not in ("performance",):
        warnings.append(f"CPU frequency governor is {gov!r} (not 'performance'): clock speed can change "
                        "during the run")

    warnings += thermal_warnings(before.get("thermal"), after.get("thermal"))

    warnings += blind_spots(before)
    if before.get("governor") != after.get("governor") and after.get("governor"):
        warnings.append(f"CPU governor changed during the run: {before.get('governor')} -> {after.get('governor')}")
    if samples is not None and not samples.empty and "slept_s" in samples:
        slept = sleep_warning(samples["slept_s"].tolist(), "the sleep-counting clock")
        if slept:
            warnings.append(slept.replace("see the slept_s column", f"see the slept_s column (> {SLEEP_FLAG_S:g} s)"))
    if samples is not None and not samples.empty and value in samples:
        for (model, setting), cell in samples.groupby(["model", "setting"], sort=False):
            few: dict[int, list[float]] = {}  # reps -> pauses: one sentence per cell, not one per pause
            wide = []
            for pause, g in cell.groupby("pause_requested_s"):
                x = g[value].dropna().to_numpy(dtype=float)
                if x.size < MIN_REPS:
                    few.setdefault(int(x.size), []).append(float(pause))
                    continue
                p10, p90 = np.percentile(x, [10, 90])
                if p10 > 0 and p90 / p10 > WIDE_RATIO:
                    wide.append(f"{pause:g} s (p90/p10 = {p90 / p10:.1f})")
            for n, pauses in sorted(few.items()):
                warnings.append(f"{model} · {setting}: only {n} reps (< {MIN_REPS}) at {_pauses_text(pauses)}: "
                                "no 95% interval for those medians")
            if wide:
                warnings.append(f"{model} · {setting}: very wide distribution at {', '.join(wide)}; possibly bimodal")
    return list(dict.fromkeys(warnings))


def _pauses_text(pauses: list[float]) -> str:
    if len(pauses) == 1:
        return f"pause {pauses[0]:g} s"
    return f"{len(pauses)} pauses ({', '.join(f'{p:g}' for p in pauses)} s)"
