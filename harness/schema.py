"""Columns of ``samples.parquet`` (schema version 1): one row per request.

Units are in the names.  ``SAMPLE_COLUMNS`` is both the documentation (README's
column table is ``schema_markdown()``, checked by a test) and the dtype map
applied when a run is finalized or a journal is read.
"""

from __future__ import annotations

import pandas as pd

SAMPLE_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("string", "run the row belongs to"),
    "cell": ("Int64", "index of the (model, setting) cell in manifest.cells"),
    "model": ("string", "model label (alias or file stem)"),
    "model_quant": ("string", "quantization read from the GGUF (e.g. Q8_0)"),
    "setting": ("string", "setting label, e.g. keep-alive=default,sleep-idle=2s"),
    "keep_alive": ("string", "default | none | seconds (Metal residency keep-alive)"),
    "sleep_idle_s": ("Int64", "llama-server --sleep-idle-seconds, null when off"),
    "setting_applicable": ("boolean", "false when the setting has no effect on this host (Metal knobs off macOS)"),
    "phase": ("string", "measure (analysed); warmup; selfcheck-warmup, selfcheck, floor-http, floor-queue "
                        "(the harness checking itself, never analysed as measurements)"),
    "rep": ("Int64", "repetition of the pause grid (null for warm-up)"),
    "seq": ("Int64", "request number within the cell, from 0"),
    "pause_requested_s": ("float64", "pause asked for before this request"),
    "pause_actual_s": ("float64", "previous response end -> this request's send, measured"),
    "latency_ms": ("float64", "client wall time of the request (send -> full response)"),
    "server_prompt_ms": ("float64", "server timings.prompt_ms: time to evaluate the uncached prompt tokens"),
    "server_prompt_n": ("Int64", "server timings.prompt_n: prompt tokens evaluated (1 when cached)"),
    "server_cache_n": ("Int64", "server timings.cache_n: prompt tokens reused from the cache"),
    "server_predicted_ms": ("float64", "server timings.predicted_ms"),
    "server_predicted_n": ("Int64", "server timings.predicted_n"),
    "server_ms": ("float64", "server_prompt_ms + server_predicted_ms"),
    "overhead_ms": ("float64", "latency_ms - server_ms: HTTP, queueing and harness time"),
    "http_status": ("Int64", "HTTP status, null when the connection failed"),
    "error": ("string", "error text (transport error or non-200 body), null when ok"),
    "sent_at_unix_s": ("float64", "wall-clock send time, Unix seconds"),
    "engine": ("string", "llama-server (through HTTP) or llama-idle (in-process reference)"),
    "cache_state": ("string", "page-cache state of the model file at server start: as-is, warm or cold"),
    "file_resident_pct_before": ("float64", "percent of the model file in the page cache just before the request "
                                            "(Linux; null where not available)"),
    "file_resident_pct_after": ("float64", "the same, just after the response"),
    "wired_bytes_before": ("Int64", "macOS wired memory just before the request (null elsewhere)"),
    "wired_bytes_after": ("Int64", "macOS wired memory just after the response"),
    "apple_gpu_in_use_bytes_before": ("Int64", "macOS ioreg 'In use system memory' just before the request"),
    "apple_gpu_in_use_bytes_after": ("Int64", "the same, just after the response"),
    "apple_gpu_alloc_bytes_before": ("Int64", "macOS ioreg 'Alloc system memory' just before the request"),
    "apple_gpu_alloc_bytes_after": ("Int64", "the same, just after the response"),
    "gpu_used_bytes_before": ("Int64", "NVIDIA GPU memory used just before the request (NVML; null elsewhere)"),
    "gpu_used_bytes_after": ("Int64", "NVIDIA GPU memory used just after the response"),
    "floor_path": ("string", "floor-* rows: the endpoint timed (/health: HTTP only; /slots: HTTP + task queue)"),
    "knob_threads": ("Int64", "llama-server -t/-tb of the cell (null: server default)"),
    "knob_poll": ("Int64", "llama-server --poll of the cell"),
    "knob_cpu_strict": ("boolean", "llama-server --cpu-strict of the cell"),
    "knob_prio": ("Int64", "llama-server --prio of the cell"),
    "knob_cpu_mask": ("string", "llama-server --cpu-mask of the cell"),
    "knob_cpus": ("string", "CPU list the whole server ran on (taskset -c)"),
    "knob_omp_wait": ("string", "OMP_WAIT_POLICY of the server (active/passive)"),
    "knob_omp_spincount": ("Int64", "GOMP_SPINCOUNT of the server"),
}


def apply_sample_schema(frame: pd.DataFrame) -> pd.DataFrame:
    """Cast known columns to their documented dtypes (missing ones are added as nulls)."""
    frame = frame.copy()
    for name, (dtype, _) in SAMPLE_COLUMNS.items():
        if name not in frame:
            frame[name] = pd.Series([None] * len(frame), dtype="object")
        frame[name] = frame[name].astype(dtype)
    ordered = list(SAMPLE_COLUMNS) + [c for c in frame.columns if c not in SAMPLE_COLUMNS]
    return frame[ordered]


def schema_markdown() -> str:
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {dtype} | {doc} |" for name, (dtype, doc) in SAMPLE_COLUMNS.items()]
    return "\n".join(lines)
