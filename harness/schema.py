"""The columns of every table a run writes, one schema per table.

Each table maps a column name to ``(dtype, meaning)``; units are in the names
(``_ms``, ``_s``, ``_bytes``, ``_pct``).  The store (``harness/store.py``) applies
the schema when a run is finalized and when a table is read back: known columns
are cast to their dtype, a known column an older run lacks is added with its
default (null unless ``DEFAULTS`` says otherwise), and unknown columns are kept
after the known ones.  ``docs/schema.md`` is generated from these tables by the docs tool
``harness/schema_doc.py`` (``python -m harness.schema_doc > docs/schema.md``), checked by ``tests/test_schema.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    "slept_s": ("float64", "seconds the machine slept inside this pause: the sleep-counting clock (CLOCK_BOOTTIME on "
                           "Linux, CLOCK_MONOTONIC on macOS) minus perf_counter; > 0.5 flags a sleep (null: not read)"),
    "latency_ms": ("float64", "client wall time of the request (send -> full response)"),
    "server_prompt_ms": ("float64", "server timings.prompt_ms: time to evaluate the uncached prompt tokens"),
    "server_prompt_n": ("Int64", "server timings.prompt_n: prompt tokens evaluated (1 when cached)"),
    "server_cache_n": ("Int64", "server timings.cache_n: prompt tokens reused from the cache"),
    "server_predicted_ms": ("float64", "server timings.predicted_ms"),
    "server_predicted_n": ("Int64", "server timings.predicted_n"),
    "server_ms": ("float64", "server_prompt_ms + server_predicted_ms"),
    "overhead_ms": ("float64", "latency_ms - server_ms: HTTP, queueing and harness time"),
    "client_ms": ("float64", "lbench's own part of latency_ms, wall time: writing the request, then framing the "
                             "response after its first byte (includes any time the client was preempted meanwhile; "
                             "null for clients that cannot split it)"),
    "http_status": ("Int64", "HTTP status, null when the connection failed"),
    "error": ("string", "error text (transport error or non-200 body), null when ok"),
    "sent_at_unix_s": ("float64", "wall-clock send time, Unix seconds"),
    "engine": ("string", "llama-server (through HTTP) or llama-idle (in-process reference)"),
    "cache_state": ("string", "page-cache state of the model file at server start: as-is, warm or cold"),
    # the pause's last device-probe reading (--device-probes; harness/probes/devices/sampler.py BEFORE_COLUMNS),
    # taken at least the guard (0.25 s) before the request; null when sampling was off or the pause too short
    "file_resident_pct_before": ("float64", "percent of the model file in the page cache: the pause's last "
                                            "reading (device probe pagecache, Linux; null where not sampled)"),
    "wired_bytes_before": ("Int64", "macOS wired memory (vm_stat): the pause's last reading (device probe apple)"),
    "apple_gpu_in_use_bytes_before": ("Int64", "macOS ioreg 'In use system memory': the pause's last reading "
                                               "(device probe apple)"),
    "apple_gpu_alloc_bytes_before": ("Int64", "macOS ioreg 'Alloc system memory': the pause's last reading "
                                              "(device probe apple)"),
    "gpu_used_bytes_before": ("Int64", "NVIDIA GPU memory used (NVML, first device): the pause's last reading "
                                       "(device probe nvml)"),
    "readings_before_send_s": ("float64", "how long before the request the earliest of the *_before readings "
                                          "started (>= the guard; device_samples has every reading)"),
    "floor_path": ("string", "floor-* rows: the endpoint timed (/health: HTTP only; /slots: HTTP + task queue)"),
    "knob_threads": ("Int64", "llama-server -t/-tb of the cell (null: server default)"),
    "knob_poll": ("Int64", "llama-server --poll of the cell"),
    "knob_cpu_strict": ("boolean", "llama-server --cpu-strict of the cell"),
    "knob_prio": ("Int64", "llama-server --prio of the cell"),
    "knob_cpu_mask": ("string", "llama-server --cpu-mask of the cell"),
    "knob_cpus": ("string", "CPU list the whole server ran on (taskset -c)"),
    "knob_omp_wait": ("string", "OMP_WAIT_POLICY of the server (active/passive)"),
    "knob_omp_spincount": ("Int64", "GOMP_SPINCOUNT of the server"),
    "knob_env": ("string", "env axis of the cell: NAME=value pairs joined by ';' (unset: removed from the "
                           "server's environment); null without --env-axis"),
    "knob_server_args": ("string", "server-args axis of the cell (none: no extra argument); null without "
                                   "--server-args-axis"),
    "prompt_tokens": ("Int64", "new prompt tokens each request of the cell carried (0: one-token cached decode; "
                               "N: N tokens evaluated, cache_prompt false); latency_ms is then the time to first "
                               "token"),
    "server_prompt_per_second": ("float64", "server timings.prompt_per_second: prompt evaluation rate the server "
                                            "reported for the request"),
    "device_sampling": ("string", "on: device probes sampled through this repetition's pauses (device_samples); "
                                  "off: not (--device-interleave alternates the two per repetition); null: no "
                                  "device probes in the run"),
}


REQUEST_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run the row belongs to"),
    "index": ("Int64", "request number in the plan, from 0"),
    "wave": ("Int64", "wave the request was sent in (bursts send a wave at once)"),
    "model": ("str", "model name sent in the request's model field"),
    "status_at_send": ("str", "the model's router status when the request was sent (loaded, loading, "
                                 "sleeping, unloaded; null when unknown)"),
    "resident_at_send": ("boolean", "true when /models/sse last said the model was loaded when the request was "
                                    "sent; null when not observed. A child being evicted still says loaded: "
                                    "served_as says what the router did"),
    "served_as": ("str", "what the router did for the request, from its own log: resident (served at once by a "
                         "running child), own_load (waited for a load it caused), joined_load (waited for a load "
                         "another request caused), behind_eviction (its model was being evicted: waited for the "
                         "exit and a reload), unknown (the log does not say: a failed request, another engine, or "
                         "a run from before this column); filled when the run ends, see docs/workloads.md"),
    "t_send_s": ("float64", "send time, seconds since the run's start (harness clock)"),
    "t_first_byte_s": ("float64", "first response byte, seconds since the run's start"),
    "t_done_s": ("float64", "response end (or failure), seconds since the run's start"),
    "latency_ms": ("float64", "send -> response end"),
    "ttfb_ms": ("float64", "send -> first response byte"),
    "http_status": ("Int64", "HTTP status, null when the connection failed"),
    "error": ("str", "error text (transport error or non-200 body), null when ok"),
    "error_kind": ("str", "error class: deadline (no full answer within the request deadline), truncated "
                             "(a 200 whose answer stopped short), disconnected, timeout, connect, limit_reached, "
                             "load_failed, cancelled, http_<status>"),
    "server_prompt_ms": ("float64", "server timings.prompt_ms of the response, when the engine reports it"),
    "first_state": ("str", "first-request runs: the starting state (cold, warm, evicted, slept)"),
    "first_rep": ("Int64", "first-request runs: the repetition, from 0"),
    "first_measured": ("boolean", "first-request runs: true for the measured request, false for the state's set-up"),
    "first_victim": ("str", "first-request runs, state evicted: the model loaded first and evicted for it"),
    "first_setup_error": ("str", "first-request runs: why the state could not be set up (e.g. never slept)"),
    "t_planned_s": ("float64", "timed sequence: when the step was planned, seconds after the sequence's start "
                               "(null in a pattern storm)"),
    "send_late_ms": ("float64", "timed sequence: how much later than planned the request was sent, ms"),
    "file_resident_pct_at_send": ("float64", "cold cache state: percent of the model file in the page cache "
                                             "just before send (null when the model was already running)"),
}

EVENT_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run the row belongs to"),
    "t_s": ("float64", "when the event was seen, seconds since the run's start"),
    "source": ("str", "where it came from: router (log line), child (a child's log line), sse (/models/sse)"),
    "kind": ("str", "event kind: spawn, proxy, evict, stop_sent, status:<status>, ..."),
    "model": ("str", "model the event concerns, null when none"),
    "detail": ("str", "the parsed fields, as a JSON object"),
    "text": ("str", "the raw log line or SSE payload"),
}

MEMORY_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run the row belongs to"),
    "t_s": ("float64", "sample time, seconds since the run's start"),
    "children_alive": ("Int64", "model children of the router alive at the sample"),
    "rss_total_bytes": ("Int64", "resident memory of the whole process tree (router + children)"),
    "rss_router_bytes": ("Int64", "resident memory of the router (or single server) process"),
    "rss_children_bytes": ("Int64", "rss_total_bytes - rss_router_bytes"),
    "mem_available_bytes": ("Int64", "host memory available (MemAvailable), null where not read"),
    "children": ("str", "pid:rss_bytes of each child, ';'-separated"),
}

DEVICE_SAMPLE_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run the row belongs to"),
    "cell": ("Int64", "index of the cell in manifest.cells"),
    "model": ("str", "model label of the cell"),
    "setting": ("str", "setting label of the cell"),
    "rep": ("Int64", "repetition of the pause grid"),
    "seq": ("Int64", "the request (samples.seq) whose pause this reading was taken in"),
    "pause_requested_s": ("float64", "that request's pause"),
    "probe": ("str", "source: nvml, drm, fdinfo, vulkan, apple, process, pagecache (docs/probes.md)"),
    "device": ("str", "the device read: PCI address, nvml:N, vulkan:N, apple-gpu or cpu (the server process)"),
    "t_since_pause_start_s": ("float64", "when the reading started, seconds after the previous response ended"),
    "t_before_send_s": ("float64", "when the reading started, seconds before the request was due (>= the guard)"),
    "sampled_at_unix_s": ("float64", "wall-clock time of the reading, Unix seconds"),
    "read_ms": ("float64", "how long the reading took (runtime status included)"),
    "ended_after_send": ("boolean", "the reading ended after the request was due (it overlapped the request)"),
    "runtime_status": ("str", "power/runtime_status read first (active, suspended, ...); null: the source has "
                              "none or it is unreadable (treated as active)"),
    "left_alone": ("boolean", "the device was not active, so nothing else was read (reading it could wake it)"),
    "error": ("str", "why the reading failed, null when it did not"),
    "mem_used_bytes": ("Int64", "device memory used, whole device (NVML used, amdgpu mem_info_vram_used, Apple "
                                "ioreg In use system memory)"),
    "mem_total_bytes": ("Int64", "device memory size (NVML total, mem_info_vram_total, Vulkan device-local heaps)"),
    "gtt_used_bytes": ("Int64", "amdgpu mem_info_gtt_used: host memory mapped for the GPU (may miss hipMalloc)"),
    "budget_bytes": ("Int64", "Vulkan VK_EXT_memory_budget heap budget, device-local heaps summed"),
    "wired_bytes": ("Int64", "macOS wired memory (vm_stat)"),
    "gpu_alloc_bytes": ("Int64", "Apple GPU: ioreg 'Alloc system memory' (AGXAccelerator PerformanceStatistics)"),
    "file_resident_pct": ("float64", "probe pagecache: percent of the model file in the page cache (mincore)"),
    "process_mem_bytes": ("Int64", "the server process's device memory (NVML per process, fdinfo VRAM); probe "
                                   "process: its resident host memory (VmRSS)"),
    "process_anon_bytes": ("Int64", "probe process: the server's anonymous resident memory (RssAnon)"),
    "process_gtt_bytes": ("Int64", "fdinfo: the server's GTT memory"),
    "process_evicted_bytes": ("Int64", "fdinfo amd-evicted-vram: the server's VRAM evicted to system memory"),
    "process_engine_ns": ("Int64", "fdinfo: the server's engine time so far, all engines, ns"),
    "sm_clock_mhz": ("Int64", "core clock: NVML SM clock, amdgpu pp_dpm_sclk current level, Intel act_freq"),
    "mem_clock_mhz": ("Int64", "memory clock: NVML memory clock, amdgpu pp_dpm_mclk current level"),
    "pstate": ("str", "NVIDIA performance state (P0 .. P15)"),
    "power_w": ("float64", "board power, W (NVML; hwmon power1_input/power1_average)"),
}

VERDICT_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "run the row belongs to"),
    "claim_id": ("str", "claim id (experiments/claims/<id>.toml)"),
    "claim": ("str", "the claim, in one sentence"),
    "seed": ("str", "source the claim came from (seed or document)"),
    "statement": ("str", "the source's own statement"),
    "verdict": ("str", "holds, contradicted, inconclusive, not checkable here, or error"),
    "cause": ("str", "why a claim was not checkable: platform, scenario (missing) or setup (failed); empty otherwise"),
    "reason": ("str", "the verdict's reason in plain words"),
    "checks": ("str", "JSON list of {check, expected, observed, met, sentence}"),
    "repeats": ("Int64", "repetitions of the scenario"),
    "source_ref": ("str", "code reference for the claimed behaviour"),
    "models": ("str", "JSON list of the models used, with provenance"),
    "figures": ("str", "JSON object of the measured figures (summarized over repetitions)"),
    "evidence": ("str", "JSON list of evidence lines"),
    "notes": ("str", "JSON list of notes"),
    "seconds": ("float64", "wall time spent on the claim, seconds"),
    "evidence_dir": ("str", "folder of the claim's raw evidence, relative to the run"),
}


DECISION_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "the gate-bench run the row belongs to"),
    "trial": ("Int64", "trial number, from 1 (trials share no runs)"),
    "condition": ("str", "A/A (A vs A2: a fail is a false alarm) or slowed (A vs B: a fail is a detection)"),
    "gate_status": ("str", "the gate's outcome: pass, fail, inconclusive or refuse (gate jobs: unproven too)"),
    "gating_groups": ("Int64", "groups that voted"),
    "groups_slower": ("Int64", "voting groups judged slower"),
    "groups_inconclusive": ("Int64", "voting groups judged inconclusive"),
    "worst_group": ("str", "the voting group with the highest lower bound of the ratio"),
    "worst_ratio": ("float64", "that group's B/A ratio of run medians"),
    "worst_ratio_ci_low": ("float64", "its 95% interval, low end"),
    "worst_ratio_ci_high": ("float64", "its 95% interval, high end"),
    "runs_per_side": ("Int64", "runs per side in the decision"),
    "a_run_ids": ("str", "run ids of side A, space-separated"),
    "b_run_ids": ("str", "run ids of the other side (A2 or B), space-separated"),
    "trial_wall_s": ("float64", "wall time of the trial's runs, seconds"),
    "job_run_id": ("str", "gate-bench --ab: the lbench ab gate job that made the decision (null otherwise)"),
}

SIMULATED_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "the gate-bench run the row belongs to"),
    "campaign": ("str", "gate (one decision on fresh simulated runs) or ab (a simulated lbench ab session)"),
    "spread": ("str", "the between-run spread simulated, by name"),
    "run_sd": ("float64", "its sd of the per-run log median"),
    "rule": ("str", "gate: the slower rule (margin or zero); null for ab"),
    "runs_per_side": ("Int64", "gate: runs per side; null for ab"),
    "history_runs": ("Int64", "gate: history runs of the baseline; null for ab"),
    "spending": ("str", "ab: the alpha spending (obf or pocock); null for gate"),
    "min_rounds": ("Int64", "ab: rounds before the first look; null for gate"),
    "max_rounds": ("Int64", "ab: most rounds; null for gate"),
    "trials": ("Int64", "simulated trials of the cell"),
    "figure": ("str", "what the row measures, e.g. 'fail A/A (ratio 1)', 'coverage +10%', 'mean rounds +10%'"),
    "count": ("Int64", "trials with that outcome (null for a coverage or a mean)"),
    "value": ("float64", "the rate (count / trials), the coverage, or the mean rounds"),
    "value_ci_low": ("float64", "exact (Clopper-Pearson) 95% interval of a rate, low end (null otherwise)"),
    "value_ci_high": ("float64", "its high end"),
}


ROUND_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "the ab gate job the row belongs to"),
    "round": ("Int64", "round number, from 1 (each round runs every arm once)"),
    "position": ("Int64", "the arm's place in its round, from 1 (the order is randomised and balanced)"),
    "arm": ("str", "a (base), b (head) or aa (a second copy of a: the A/A floor)"),
    "idle_run_id": ("str", "the idle run the arm made in this round (its own run directory)"),
    "group": ("str", "the gated group: a pause (and setting)"),
    "level_log": ("float64", "log of the run's median latency in the group (ms)"),
    "median_ms": ("float64", "the run's median latency in the group, ms"),
    "round_wall_s": ("float64", "seconds from the round's start to the end of this run"),
}

LOOK_COLUMNS: dict[str, tuple[str, str]] = {
    "run_id": ("str", "the ab gate job the row belongs to"),
    "round": ("Int64", "the round after which the look was made"),
    "final": ("boolean", "the last look the budget allowed"),
    "level_one_sided": ("float64", "the look's nominal one-sided level per group (alpha spending, Bonferroni)"),
    "status": ("str", "the job's status at the look: continue, pass, fail, inconclusive or unproven"),
    "reason": ("str", "why, in words"),
    "group": ("str", "the gated group"),
    "contrast": ("str", "B vs A (b against the mean of a and aa) or A/A (aa against a)"),
    "ratio": ("float64", "the contrast as a ratio of medians, round and position effects removed"),
    "ratio_ci_low": ("float64", "its interval at the look's level, low end"),
    "ratio_ci_high": ("float64", "its high end"),
    "verdict": ("str", "B vs A: slower, faster, no change or inconclusive; A/A: differs, inside the band or "
                       "wider than the margin"),
    "margin": ("float64", "the group's equivalence margin (relative)"),
    "df": ("Int64", "residual degrees of freedom of the fit"),
    "residual_sd": ("float64", "the fit's residual sd of a run's log level (the noise a contrast sees)"),
}


@dataclass(frozen=True)
class TableSchema:
    name: str
    doc: str
    columns: dict[str, tuple[str, str]]
    defaults: dict[str, object] = field(default_factory=dict)  # missing columns get these; null otherwise

    def apply(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Cast known columns to their dtypes, add missing ones with their default, keep unknown ones last."""
        frame = frame.copy()
        for name, (dtype, _) in self.columns.items():
            if name not in frame:
                frame[name] = pd.Series([self.defaults.get(name)] * len(frame), index=frame.index, dtype="object")
            frame[name] = frame[name].astype(dtype)
        ordered = list(self.columns) + [c for c in frame.columns if c not in self.columns]
        return frame[ordered]

    def empty(self) -> pd.DataFrame:
        return self.apply(pd.DataFrame())

    def markdown(self) -> str:
        lines = ["| column | type | meaning |", "|---|---|---|"]
        for name, (dtype, doc) in self.columns.items():
            default = f" (default when absent: `{self.defaults[name]!r}`)" if name in self.defaults else ""
            lines.append(f"| `{name}` | {dtype} | {doc}{default} |")
        return "\n".join(lines)


TABLES: dict[str, TableSchema] = {t.name: t for t in (
    TableSchema("samples", "idle and calibrate runs: one row per request (or harness self-check)", SAMPLE_COLUMNS),
    TableSchema("requests", "swap runs: one row per request", REQUEST_COLUMNS),
    TableSchema("events", "swap runs: router log lines, child lines and /models/sse events", EVENT_COLUMNS),
    TableSchema("memory", "swap runs: process-tree memory samples", MEMORY_COLUMNS),
    TableSchema("device_samples", "idle runs: one row per device-probe reading taken during a pause",
                DEVICE_SAMPLE_COLUMNS),
    TableSchema("verdicts", "repro runs: one row per claim checked", VERDICT_COLUMNS),
    TableSchema("decisions", "gate-bench runs: one row per gate decision on real runs", DECISION_COLUMNS),
    TableSchema("simulated", "gate-bench --simulate runs: one row per figure of a simulated cell", SIMULATED_COLUMNS),
    TableSchema("rounds", "ab gate jobs: one row per idle run and gated group", ROUND_COLUMNS),
    TableSchema("looks", "ab gate jobs: one row per contrast, group and look", LOOK_COLUMNS),
)}


def table_schema(name: str) -> TableSchema | None:
    return TABLES.get(name)


def apply_schema(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    """The frame with ``table``'s schema applied (unchanged for a table without a schema)."""
    schema = TABLES.get(table)
    return schema.apply(frame) if schema is not None else frame


def records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts with every missing value (NaN, NA, NaT) as None, for templates and text."""
    return [{k: (None if _missing(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists, dicts, arrays
        return False

