"""Engine facts from llama-server's startup log and ``--list-devices``.

Which facts the default verbosity prints, read from the pinned source (sdist 11434): llama-server's
threshold is 3 (common/log.h ``LOG_DEFAULT_LLAMA``), and every message of the llama/ggml libraries at
INFO is verbosity 4 (common/log.cpp ``common_log_get_verbosity``: ``GGML_LOG_LEVEL_INFO`` ->
``LOG_LEVEL_TRACE``).  So the server's own lines (threads, slots, the load timing) are in every log
(``n_threads``, ``n_slots``, ``n_ctx_slot``, ``server_load_ms``), while ``offloaded A/B layers to
GPU`` (src/llama-model.cpp), ``--fit``'s decisions (common/fit.cpp, ``LOG_TRC``) and Metal's device
lines (``GPU name``, ``use residency sets``, the keep-alive, ``recommendedMaxWorkingSetSize``:
ggml-metal-device.m) need ``-lv 4``
(``offloaded_layers``, ``gpu_name``, ``use_residency_sets``, ``residency_keep_alive_s``,
``recommended_max_working_set_mb``).

The measured server runs at the default verbosity, and is the cell's one start, because ``-lv 4``
also turns on the server's per-request trace lines, formatted on its thread and written by the log
worker while the request is timed: slot selection and ``new prompt`` (tools/server/server-context.cpp
``SLT_TRC``), ``sampler chain`` and the multi-line ``sampler params``, the prompt-cache lookup
(server-task.cpp ``SRV_TRC``) and the stream's ``conv_id`` (server-stream.cpp), each once per request
at ``-lv 4`` and never at the default (tests/engines/test_llama_server.py, on the real server).
Where a fact printed only at ``-lv 4`` matters on the host (the fit on Metal, where an 8 GB Mac cannot hold an 8B model), the cell
has a short separate ``-lv 4`` start before it (``LlamaServerEngine.startup_facts_log``; the cell's
``startup_metal`` facts and ``server_starts`` = 2); everywhere else the cell starts once and its facts
come from that start's log (the cell's ``startup``).  A Linux GPU build (Vulkan, CUDA) could offload
partly too; its offload line is not read (it would cost the second start): the device probes' memory
in the pause shows where the weights are (docs/probes.md).
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
