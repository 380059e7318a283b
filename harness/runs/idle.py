"""One idle-wake run, top-down: spec -> engine -> workload -> samples -> store -> report.

``prepare_idle`` does everything that can fail on bad input (spec checks, model
resolution and generation, engine lookup) before any run directory exists.
``execute_idle`` then starts a fresh server per (model, setting) cell, sweeps it,
and appends each observation to the run as it is measured.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack

from harness import paths
from harness.runkind import get_kind
from harness.engines import devices, llama_idle, server_policy
from harness.engines import registry
from harness.engines.base import Engine, Setting
from harness.engines.registry import EngineOptions
from harness.errors import EngineError
from harness.models.gguf_info import file_sha256
from harness.models.resolve import ResolvedModel, local_file, resolve_for_engine
from harness.probes import engine_log, pagecache
from harness.runs import device_sampling
from harness.spec import IdleSpec
from harness.runs.session import RunSession
from harness.store import Run, RunWriter
from harness.workloads.idle import (CellFailed, DeadlineExceeded, Deadlines, run_floor_block, run_idle_sweep,
                                    run_self_check, set_request_timeout)
from harness.runs import preflight
from harness.store import read_journal
from harness.runs.preflight import available_cpus, cpu_list
from harness.analysis.stats import measured
from harness.engines.llama_server import openmp_build

if TYPE_CHECKING:
    import pandas as pd

    from harness.engines.base import RunningServer


class Reporter(Protocol):
    def message(self, text: str) -> None: ...

    def model_progress(self, done: int, total: int) -> None: ...

    def cell(self, label: str, total: int) -> None: ...

    def advance(self) -> None: ...


class QuietReporter:
    def message(self, text: str) -> None: pass

    def model_progress(self, done: int, total: int) -> None: pass

    def cell(self, label: str, total: int) -> None: pass

    def advance(self) -> None: pass


@dataclass
class PreparedIdle:
    spec: IdleSpec
    models: list[ResolvedModel]
    engine: Engine
    results_root: Path
    kind: str = "idle"
    cells: list[tuple[ResolvedModel, Setting, str]] = field(default_factory=list)
    llama_idle: Path | None = None
    device_probes: list[str] = field(default_factory=list)  # sources sampled through the pauses
    device_status: dict[str, str] = field(default_factory=dict)  # every source: available (...) / not available: why


def fit_default_ctx(spec: IdleSpec, engine: Engine, models: list[ResolvedModel], reporter: Reporter) -> None:
    """A default the user never set must fit the model: the default context (2048) becomes the
    smallest trained context among the models when that is less (a context given is checked, not changed)."""
    trained: list[int] = [n for m in models if (n := m.info.n_ctx_train)]
    if spec.ctx_size_given or not trained or min(trained) >= spec.ctx_size:
        return
    spec.ctx_size = min(trained)
    engine.set_context_size(spec.ctx_size)
    reporter.message(f"context size {spec.ctx_size}: the trained context of the model (the default 2048 does not fit)")


def make_engine(spec: IdleSpec, llama_server: str | None, options: dict) -> tuple[str, Engine]:
    """The server engine of the run (from the registry), built with the run's options."""
    kind = registry.require(spec.server_engine, "idle")
    assert kind.make_server is not None  # the registry refuses an 'idle' engine without one
    engine_options = EngineOptions(llama_server=llama_server, ctx_size=spec.ctx_size,
                                   server_args=list(spec.server_args), unsafe_server_args=list(spec.unsafe_server_args),
                                   unsafe_server_env=server_policy.parse_unsafe_env(spec.unsafe_server_env),
                                   match=spec.match,
                                   client_spin=spec.client_spin,
                                   **{k: v for k, v in options.items() if v is not None})
    return kind.name, kind.make_server(engine_options)


def prepare_idle(spec: IdleSpec, *, llama_server: str | None = None, results: str | None = None,
                 reporter: Reporter = QuietReporter(), kind: str = "idle",
                 llama_idle_path: str | None = None, engine_options: dict | None = None) -> PreparedIdle:
    spec.validate()
    warning = server_policy.unsafe_warning(spec.unsafe_server_args, spec.unsafe_server_env)
    if warning:
        reporter.message(warning)
    device_status, device_names = device_sampling.choose(spec)  # a probe asked for must exist here (exit 2)
    cross_check = spec.cross_check_engine  # an in-process reference joining the server engine (llama-idle)
    if cross_check is not None and spec.server_engine_named:
        merged = sorted(set(spec.pauses_s) | set(llama_idle.PAUSES_S))
        if merged != sorted(set(spec.pauses_s)):
            reporter.message("added llama-idle's pauses (0-4 s in 0.8 s steps) to the grid for the cross-check")
        spec.pauses_s = merged
    server_name, engine = make_engine(spec, llama_server, engine_options or {})
    models = [resolve_for_engine(ref, server_name, progress=reporter.model_progress, announce=reporter.message)
              for ref in spec.models]
    for m in models:
        if m.source == "synthetic":
            reporter.message(f"{m.ref}: SYNTHETIC model (random weights, shape of preset {m.info.preset}) "
                             f"at {m.path}")
    fit_default_ctx(spec, engine, models, reporter)
    if engine.binary is not None:
        reporter.message(f"engine: {engine.binary.path} (build {engine.binary.build_number}, "
                         f"chosen from {engine.binary.source})")
        choice = engine.device_choice()  # a GPU build that sees no device: refused here, exit 2
        if choice is not None:
            reporter.message(f"device: {choice.summary}")
            if choice.devices and choice.backend != "cpu" and spec.warmup == 0:
                reporter.message("warning: --warmup 0 on a GPU backend: the first measured request of each cell also "
                                 "compiles the device's pipelines (seconds on Vulkan), which is not wake")
    else:
        reporter.message(f"engine: {engine.name}")
    prepared = PreparedIdle(spec, models, engine, paths.results_dir(results), kind)
    if cross_check is not None and spec.server_engine_named and not spec.match:
        reporter.message("note: the cross-check compares different work unless --match llama-idle is given "
                         "(threads, context, prompt, sampling; see docs/instrument.md)")
    if cross_check is not None:
        prepared.llama_idle = llama_idle.locate(llama_idle_path, engine.binary.path if engine.binary else None)
        reporter.message(f"llama-idle: {prepared.llama_idle}")
    prepared.cells = [(m, s, e) for m in models for s in spec.settings() for e in spec.engines]
    prepared.device_status, prepared.device_probes = device_status, device_names

    preflight.check_idle(prepared)  # the last bad-input checks, still before any run directory
    return prepared


def model_entry(m: ResolvedModel) -> dict:
    f = local_file(m)
    return {"label": m.label, "ref": m.ref, "source": m.source, "sha256": file_sha256(f) if f else None,
            **m.info.as_dict(), **({"origin": m.origin} if m.origin else {})}


def place_client(spec: IdleSpec) -> tuple[dict, Callable[[], None]]:
    """Apply the opt-in client placement (CPU affinity, nice) to lbench itself.
    Returns (what was applied, for the manifest; a function that undoes it)."""
    import os

    applied: dict = {"cpus": None, "nice": None, "spin": spec.client_spin}
    undo: list[Callable[[], None]] = []
    if spec.client_cpus is not None and sys.platform.startswith("linux"):  # the one with sched_setaffinity
        before = os.sched_getaffinity(0)

        os.sched_setaffinity(0, cpu_list(spec.client_cpus))
        applied["cpus"] = sorted(os.sched_getaffinity(0))
        undo.append(lambda: os.sched_setaffinity(0, before))
    elif spec.client_cpus is not None:  # macOS, Windows: no sched_setaffinity; said, not implied
        applied["cpus"] = f"not applied (no CPU affinity for a process on {sys.platform})"
    if spec.client_nice is not None and sys.platform != "win32":
        before_nice = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, spec.client_nice)
            applied["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
            undo.append(lambda: _restore_nice(before_nice))
        except PermissionError:
            applied["nice"] = f"not applied (no permission for nice {spec.client_nice})"
    elif spec.client_nice is not None:  # Windows: no setpriority; said, not implied
        applied["nice"] = f"not applied (no process nice value on {sys.platform})"

    def restore() -> None:
        for fn in reversed(undo):
            fn()
    return applied, restore


def _restore_nice(value: int) -> None:
    import os

    if sys.platform == "win32":  # never reached: place_client sets no nice there
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, value)
    except PermissionError:
        pass


def execute_idle(prep: PreparedIdle, reporter: Reporter = QuietReporter(), *, extra_manifest: dict | None = None
                 ) -> Run:
    spec = prep.spec
    client, restore_client = place_client(spec)
    like = prep.engine.like_for_like()
    session = RunSession(prep.results_root, prep.kind, {
        "config": spec.as_dict(),
        "engine": {**prep.engine.facts(), "llama_idle": str(prep.llama_idle) if prep.llama_idle else None},
        "models": [model_entry(m) for m in prep.models],
        "cells": [],
        "client": client,
        "like_for_like": like,
        "device_probes": {"sampled": prep.device_probes, "status": prep.device_status,
                          "interval_s": spec.device_interval_s, "interleave": spec.device_interleave},
        **(extra_manifest or {}),
    }, reporter, quality_samples=writer_samples)
    try:
        with session:
            if any(v is not None for v in (client["cpus"], client["nice"])) or client["spin"]:
                reporter.message(f"client placement (changes what is measured): {client}")
            if client["spin"]:
                reporter.message("warning: --client-spin keeps one CPU busy while a request runs; when the server's "
                                 "compute threads need every CPU (default -t on a small host) its spinning barrier "
                                 "then waits for preemption (measured here: server time 0.5 -> 128 ms on 2 vCPUs). "
                                 "Pair it with --cpus / --threads that leave the client a CPU.")
            for index, (model, setting, engine_name) in enumerate(prep.cells):
                cell = _run_cell(prep, session.writer, index, model, setting, engine_name, reporter)
                if cell.error:
                    session.fail(f"{model.label} / {setting.label}: {cell.error.splitlines()[0]}")
    finally:
        restore_client()
    assert session.run is not None
    return session.run


def writer_samples(writer: RunWriter) -> pd.DataFrame | None:
    try:
        journal = writer.dir / "samples.jsonl"
        return measured(read_journal(journal)) if journal.exists() else None
    except Exception:  # quality checks never sink a run
        return None


def prepare_cache(path: Path, state: str) -> dict:
    """Put the model file in the asked page-cache state before a server maps it; verify.

    Linux: posix_fadvise, verified with mincore.  macOS: ``purge`` (flushes the whole file
    cache) when lbench runs as root; there is no residency probe there, so it is unverified.
    """
    before = pagecache.resident_fraction(path)
    if state == "cold" and not pagecache.available():
        import os
        import subprocess

        purged = sys.platform == "darwin" and os.geteuid() == 0 and \
            subprocess.run(["purge"], capture_output=True).returncode == 0
        return {"state": state, "resident_pct_found": None, "resident_pct_at_start": None,
                "verified": None, "method": "purge (unverified)" if purged else
                "not available: needs Linux, or root for purge on macOS"}
    if state == "cold":
        pagecache.evict(path)
    elif state == "warm":
        pagecache.warm(path)
    after = pagecache.resident_fraction(path)
    return {"state": state, "resident_pct_found": None if before is None else round(100 * before, 2),
            "resident_pct_at_start": None if after is None else round(100 * after, 2),
            "verified": None if after is None else (after < 0.05 if state == "cold" else after > 0.95
                                                    if state == "warm" else True)}


def oversubscribed(setting: Setting, threads: int | None) -> str | None:
    """Why a cell's overhead is noisy by construction: more compute ``threads`` than CPUs it may use."""

    cpus = len(available_cpus())
    if setting.cpus:  # checked against this machine's CPUs before the run
        cpus = min(cpus, len(cpu_list(setting.cpus)))
    if threads is not None and cpus and threads > cpus:
        return f"{threads} compute threads on {cpus} CPUs: oversubscribed, so its timings are noisy"
    return None


def _cross_check_threads(prep: PreparedIdle, setting: Setting, engine_name: str, env: dict, overrides: dict
                         ) -> list[str]:
    """llama-idle's thread count is fixed (4) in its source; in an OpenMP build ``--threads N`` caps its
    team with OMP_THREAD_LIMIT=N (ggml takes the team size OpenMP grants), so both sides of the
    cross-check can run N threads.  The other CPU knobs are llama-server options: a note says so."""

    notes = []
    others = {k for k in setting.cpu_knobs() if k not in ("threads", "omp_wait", "omp_spincount")}
    if others:
        notes.append(f"{', '.join(sorted(others))}: llama-server options; {engine_name} runs without them")
    if setting.threads is not None:
        binary = prep.engine.binary
        if binary is not None and openmp_build(binary.path) is False:
            notes.append(f"{engine_name} always runs 4 threads in a build without OpenMP; --threads "
                         f"{setting.threads} applies to llama-server only")
        else:
            env["OMP_THREAD_LIMIT"] = overrides["OMP_THREAD_LIMIT"] = str(setting.threads)
    return notes


def _run_cell(prep: PreparedIdle, writer: RunWriter, index: int, model: ResolvedModel, setting: Setting,
              engine_name: str, reporter: Reporter) -> IdleCell:
    spec = prep.spec
    cross = registry.get(engine_name).can("cross_check")  # the in-process reference (llama-idle), not the server
    tag = f"-{engine_name}" if cross else ""
    log_name = f"cell{index:02d}-{model.label}-{setting.label}{tag}.log".replace("/", "_").replace(",", "_")
    notes = prep.engine.setting_notes(setting)
    if cross and setting.sleep_idle_seconds is not None:
        notes.append(f"sleep-idle is a llama-server option; {engine_name} has no idle sleep")
    env, overrides = prep.engine.environment(setting)
    if cross:
        notes += _cross_check_threads(prep, setting, engine_name, env, overrides)
    label = f"{setting.label} ({engine_name})" if cross else setting.label
    cell = IdleCell(index=index, model=model.label, setting=label, engine=engine_name, keep_alive=setting.keep_alive,
                    sleep_idle_seconds=setting.sleep_idle_seconds, notes=notes, cpu_knobs=setting.cpu_knobs(),
                    applicable=not notes, env_overrides=overrides, log=f"logs/{log_name}",
                    axis_knobs=setting.axis_knobs())
    writer.manifest["cells"].append(cell)
    writer.save_manifest()
    for note in notes:
        reporter.message(f"note: {note} (running it anyway)")
    n_planned = len(llama_idle.PAUSES_S) * llama_idle.ITERS if cross else \
        len(spec.pauses_s) * spec.reps
    reporter.cell(f"{model.label} · {label}", n_planned)
    common = {"cell": index, "model": model.label, "model_quant": model.info.quant, "setting": label,
              "keep_alive": setting.keep_alive, "sleep_idle_s": setting.sleep_idle_seconds,
              "setting_applicable": not notes, "engine": engine_name, "cache_state": setting.cache_state,
              **{f"knob_{k}": v for k, v in setting.cpu_knobs().items()}, "prompt_tokens": setting.prompt_tokens,
              "knob_env": ";".join(f"{k}={'unset' if v is None else v}" for k, v in setting.env) or None,
              "knob_server_args": " ".join(setting.server_args) or None}

    def emit(row: dict) -> None:
        writer.append({**common, **row})
        if row["phase"] == "measure":
            cell.n_samples += 1

    weights = local_file(model)
    if setting.cache_state != "as-is":
        if weights is None:
            notes.append("cache state needs a local model file; this model lives on the server")
        else:
            cell.cache = prepare_cache(weights, setting.cache_state)
            if cell.cache["verified"] is False:
                reporter.message(f"warning: could not make {model.path.name} {setting.cache_state}: {cell.cache}")
    try:
        if cross:
            def emit_idle(r: tuple[float, int, float]) -> None:
                emit({"phase": "measure", "rep": r[1], "seq": cell.n_samples, "pause_requested_s": r[0],
                      "pause_actual_s": None, "latency_ms": r[2], "http_status": None, "error": None})
                reporter.advance()

            t0 = time.perf_counter()
            assert prep.llama_idle is not None  # prepare() locates it whenever the run has a cross-check engine
            cell.argv = [str(prep.llama_idle), "-m", str(model.path)]
            cell.llama_idle_summaries = llama_idle.run(prep.llama_idle, model.path, env, writer.log_path(log_name),
                                                          emit_idle)
            cell.sweep_wall_s = time.perf_counter() - t0
        else:
            # one start per cell, except where a fact that matters here is printed only at -lv 4 (on Metal:
            # the fit, engines/llama_server.py startup_facts_log); the measured server never runs at -lv 4
            verbose = prep.engine.startup_facts_log(model.path, setting,
                                                    writer.log_path(log_name.replace(".log", "-lv4.log")))
            facts_starts = 0 if verbose is None else 1
            if verbose is not None:
                cell.startup_metal = engine_log.parse_startup(verbose)
                cell.fit = engine_log.fit(cell.startup_metal, model.label)
                if cell.fit is not None and cell.fit["warning"]:  # said before the measured server starts
                    reporter.message(f"warning: {label}: {cell.fit['warning']}")
                residency = prep.engine.residency(setting)  # in effect or not: from the machine, not the log
                if residency is not None:
                    cell.startup_metal["residency"] = residency
                if cell.cache is not None and weights is not None:  # that start read the model: purge again
                    cell.cache = prepare_cache(weights, setting.cache_state)
            t_start = time.perf_counter()
            with prep.engine.start(model.path, setting, writer.log_path(log_name)) as server:
                cell.ready_s = round(time.perf_counter() - t_start, 4)
                cell.server_starts = facts_starts + 1  # counted once the measured server is up
                deadlines = Deadlines(spec.request_timeout_s, spec.cell_timeout_s, startup_s=cell.ready_s)
                cell.deadlines = deadlines.as_dict()
                set_request_timeout(server, deadlines.initial_request_s())  # the self-check runs under it too
                cell.argv, cell.port = server.argv, server.port
                if cell.cache is not None and weights is not None:  # a cache state was set: weights is local
                    after = pagecache.resident_fraction(weights)
                    cell.cache["resident_pct_when_ready"] = None if after is None else round(100 * after, 2)
                cell.startup = engine_log.parse_startup(server.log_tail(400))
                libs = devices.driver_libs(None if server.proc is None else server.proc.pid)
                if libs:  # the device driver the server loaded (lavapipe: libvulkan_lvp.so)
                    cell.startup["driver_libs"] = libs
                client = server.client
                if client is not None and client.body:
                    cell.request_body = client.body.decode(errors="replace")
                writer.save_manifest()
                if spec.self_check:
                    cell.self_check = run_self_check(server, spec.self_check, emit)
                    threads = prep.engine.compute_threads(setting)
                    why = oversubscribed(setting, threads) if cell.self_check["warnings"] else None
                    if why:
                        cell.self_check["oversubscribed"] = why
                    for warning in cell.self_check["warnings"]:
                        reporter.message(f"warning: {model.label} / {label}: {warning} "
                                         + (f"({why}; see docs/instrument.md)" if why else
                                            "(see docs/instrument.md)" if warning.endswith("not noise") else
                                            "(a busy host, or the server's own threads taking the CPUs? "
                                            "see docs/instrument.md)"))
                    writer.save_manifest()
                sampler, sampling_on = device_sampling.for_cell(prep, server, writer, common, cell, weights)
                try:
                    totals = run_idle_sweep(server, spec.pauses_s, reps=spec.reps, seed=spec.seed,
                                            warmup=spec.warmup, shuffle=spec.shuffle, emit=emit,
                                            on_progress=reporter.advance,
                                            alive=_death_of(server), deadlines=deadlines,
                                            device_sampler=sampler, sampling_on=sampling_on)
                except DeadlineExceeded as exc:  # say what the server was doing, while it still exists
                    state = _process_state(server)
                    raise DeadlineExceeded(f"{exc}; server process state: {state}" if state else str(exc)) from None
                finally:
                    cell.deadlines = deadlines.as_dict()
                    device_sampling.finish(sampler, cell)
                if "http_floor" in get_kind(prep.kind).features:  # the floor after the same pauses (calibrate)
                    run_floor_block(server, sorted(set(spec.pauses_s)), spec.reps, emit)
                if client is not None:  # the server closed the idle connection: reopened before the clock
                    cell.reconnects = client.connection.reconnects
                # what the log says only once a model has loaded (Ollama: the llama-server build it runs)
                cell.startup.update(prep.engine.served_facts(server))
            cell.sweep_wall_s = totals.wall_s
            denominator = totals.sum_pause_requested_s + totals.sum_server_ms / 1000.0
            cell.efficiency = totals.wall_s / denominator if denominator > 0 else None
            cell.n_errors = totals.n_errors
            if totals.n_errors:  # a failed request is not a sample: the cell failed
                raise EngineError(f"{totals.n_errors} of {totals.n} measured requests failed "
                                  f"(see the error column of the samples)")
    except CellFailed as exc:
        cell.error = str(exc)
        reporter.message(f"cell failed: {model.label} / {label}: {exc}")
    except EngineError as exc:
        cell.error = str(exc)
        reporter.message(f"cell failed: {model.label} / {label}: {exc.what}")
    writer.save_manifest()
    return cell


@dataclass
class IdleCell:
    """One (model, setting, engine) cell as the manifest records it, filled in while it runs
    (read back as ``harness.record.Cell``)."""

    index: int
    model: str
    setting: str
    engine: str
    keep_alive: str
    sleep_idle_seconds: int | None
    notes: list[str]
    cpu_knobs: dict
    env_overrides: dict[str, str]
    log: str
    applicable: bool = True
    self_check: dict | None = None
    argv: list[str] = field(default_factory=list)
    n_samples: int = 0
    sweep_wall_s: float | None = None
    efficiency: float | None = None
    error: str | None = None
    cache: dict | None = None
    startup: dict = field(default_factory=dict)
    # set only on the paths that measure them (absent from the manifest otherwise)
    ready_s: float | None = None
    deadlines: dict | None = None
    port: int | None = None
    request_body: str | None = None
    startup_metal: dict | None = None
    fit: dict | None = None  # offloaded layers / total from the facts start, and the warning when not all fit
    llama_idle_summaries: list | None = None
    axis_knobs: dict = field(default_factory=dict)  # env / server-args / prompt-tokens axes of the cell
    n_errors: int | None = None
    device_sampling: dict | None = None  # the device probes of the cell, their devices and what sampling cost
    reconnects: int | None = None  # times the one-token client reopened a connection the server had closed
    server_starts: int | None = None  # model loads of the cell: 1, or 2 with a -lv 4 facts start (Metal)

    OPTIONAL = ("ready_s", "deadlines", "port", "request_body", "startup_metal", "llama_idle_summaries", "n_errors",
                "device_sampling", "reconnects", "fit", "server_starts")

    def as_manifest(self) -> dict:
        out = asdict(self)
        return {k: v for k, v in out.items() if not (k in self.OPTIONAL and v is None)}


def _death_of(server: RunningServer) -> Callable[[], str | None] | None:
    proc = server.proc
    if proc is None:
        return None
    return lambda: None if proc.poll() is None else f"exit status {proc.returncode}"


def _process_state(server: RunningServer) -> str | None:
    """The server process's scheduler state ("stopped" for a SIGSTOPped one), when it can be read."""
    proc = server.proc
    if proc is None:
        return None
    import psutil

    try:
        return psutil.Process(proc.pid).status()
    except psutil.Error:
        return None


class PrepareOptions(TypedDict, total=False):
    """``prepare_idle``'s options that ``run_idle`` passes on."""

    llama_server: str | None
    results: str | None
    kind: str
    llama_idle_path: str | None
    engine_options: dict | None


def run_idle(spec: IdleSpec, *, reporter: Reporter = QuietReporter(), **kwargs: Unpack[PrepareOptions]) -> Run:
    """Prepare and execute in one call (library use and tests)."""
    prep = prepare_idle(spec, reporter=reporter, **kwargs)
    return execute_idle(prep, reporter)


__all__ = ["prepare_idle", "execute_idle", "run_idle", "PreparedIdle"]
