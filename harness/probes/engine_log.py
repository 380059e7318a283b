"""Engine facts from llama-server's startup log and ``--list-devices``.

At the default verbosity the log has threads, slots and load timing; the Metal
lines (``use residency sets``, the residency keep-alive, ``recommendedMaxWorkingSetSize``)
need ``-lv 4``.  The measured server stays at the default verbosity (more logging
would add work during measurement); on a Metal host a separate short start at
``-lv 4`` captures those lines (``LlamaServerEngine.verbose_startup_log``; the cell's
``startup_metal`` facts).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

STAMP = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+)\s")
PATTERNS = {
    "use_residency_sets": (re.compile(r"use residency sets\s*=\s*(true|false)"), lambda m: m.group(1) == "true"),
    "residency_keep_alive_s": (re.compile(r"creating a residency set collection \(keep_alive = (-?\d+) s\)"),
                               lambda m: int(m.group(1))),
    "recommended_max_working_set_mb": (re.compile(r"recommendedMaxWorkingSetSize\s*=\s*([\d.]+) MB"),
                                       lambda m: float(m.group(1))),
    "offloaded_layers": (re.compile(r"offloaded (\d+/\d+) layers to GPU"), lambda m: m.group(1)),
    "n_threads": (re.compile(r"threadpool init, n_threads = (\d+)"), lambda m: int(m.group(1))),
    "n_slots": (re.compile(r"n_slots = (\d+)"), lambda m: int(m.group(1))),
    "n_ctx_slot": (re.compile(r"n_ctx_slot = (\d+)"), lambda m: int(m.group(1))),
    "gpu_name": (re.compile(r"GPU name:\s*(.+)$"), lambda m: m.group(1).strip()),
}


def stamp_s(line: str) -> float | None:
    """The log's own time of ``line`` (``M.SS.mmm.uuu`` since the process started) in seconds, or None."""
    m = STAMP.match(line.strip())
    if not m:
        return None
    minutes, seconds, millis, micros = (int(x) for x in m.groups())  # M.SS.mmm.uuu since process start
    return minutes * 60 + seconds + millis / 1e3 + micros / 1e6


def parse_startup(text: str) -> dict:
    """Facts found in a llama-server log (keys absent when the log does not say)."""
    facts: dict = {}
    t_load = t_loaded = None
    for line in text.splitlines():
        for key, (pattern, convert) in PATTERNS.items():
            if key not in facts:
                m = pattern.search(line)
                if m:
                    facts[key] = convert(m)
        if "load_model: loading model" in line and t_load is None:
            t_load = stamp_s(line)
        if "model loaded" in line and t_loaded is None:
            t_loaded = stamp_s(line)
    if t_load is not None and t_loaded is not None:
        facts["server_load_ms"] = round((t_loaded - t_load) * 1000, 3)
    return facts


def fit(facts: dict, model_label: str) -> dict | None:
    """Whether the model fit on the GPU, from what llama-server reported (``offloaded A/B layers to GPU``;
    llama.cpp's ``--fit``, on by default, moves layers to the CPU when the device's working set is too small:
    common/common.h ``fit_params``; on Metal the device's free memory is ``recommendedMaxWorkingSetSize``,
    ggml-metal-device.m:1502).  None when the log does not say; ``warning`` is None when every layer is on
    the GPU."""
    m = re.fullmatch(r"(\d+)/(\d+)", str(facts.get("offloaded_layers") or ""))
    if m is None or int(m.group(2)) == 0:
        return None
    on_gpu, total = int(m.group(1)), int(m.group(2))
    share = on_gpu / total
    out: dict = {"offloaded_layers": f"{on_gpu}/{total}", "gpu_share": round(share, 4), "warning": None}
    if on_gpu < total:
        working_set = facts.get("recommended_max_working_set_mb")
        where = f" (working set {working_set:g} MB)" if isinstance(working_set, (int, float)) else ""
        out["warning"] = (f"{model_label} does not fit this device{where}: llama-server put {on_gpu} of {total} "
                          f"layers on the GPU ({100 * share:.0f}%) and {total - on_gpu} on the CPU, so this cell "
                          "measures a CPU/GPU split (a smaller model or quantization fits)")
    return out


DEVICE_LINE = re.compile(r"^\s+(\S+): (.+\(\d+ MiB, \d+ MiB free\))\s*$")  # common/arg.cpp: "  %s: %s (%zu MiB, %zu MiB free)"


def parse_devices(text: str) -> list[str]:
    """``--list-devices`` output -> device lines such as 'MTL0: Apple M1 Max (25559 MiB, 25558 MiB free)'.
    Only lines of the device format count: a warning printed after the list is not a device."""
    out = []
    take = False
    for line in text.splitlines():
        if line.strip().startswith("Available devices"):
            take = True
            continue
        if take and line.strip():
            m = DEVICE_LINE.match(line)
            if m:
                out.append(f"{m.group(1)}: {m.group(2)}")
            elif line.strip() == "(none)":
                out.append("(none)")
    return out


def list_devices(binary: Path) -> list[str]:
    try:
        p = subprocess.run([str(binary), "--list-devices"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_devices(p.stdout)
