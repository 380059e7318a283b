"""One idle-wake run, top-down: spec -> engine -> workload -> samples -> store -> report.

``prepare_idle`` does everything that can fail on bad input (spec checks, model
resolution and generation, engine lookup) before any run directory exists.
``execute_idle`` then starts a fresh server per (model, setting) cell, sweeps it,
and appends each observation to the run as it is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness import paths
from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine, locate
from harness.errors import EngineError, LbenchError
from harness.models.gguf_info import file_sha256
from harness.models.resolve import ResolvedModel, resolve
from harness.probes.host import host_facts
from harness.spec import IdleSpec
from harness.store import Run, RunWriter, open_run
from harness.workloads.idle import run_idle_sweep


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
    engine: LlamaServerEngine
    results_root: Path
    kind: str = "idle"
    cells: list[tuple[ResolvedModel, Setting]] = field(default_factory=list)


def prepare_idle(spec: IdleSpec, *, llama_server: str | None = None, results: str | None = None,
                 reporter: Reporter = QuietReporter(), kind: str = "idle") -> PreparedIdle:
    spec.validate()
    models = [resolve(ref, progress=reporter.model_progress, announce=reporter.message) for ref in spec.models]
    for m in models:
        if m.source == "synthetic":
            reporter.message(f"{m.ref}: SYNTHETIC model (random weights, shape of preset {m.info.preset}) "
                             f"at {m.path}")
    engine = LlamaServerEngine(locate(llama_server), ctx_size=spec.ctx_size, extra_args=spec.server_args)
    reporter.message(f"engine: {engine.binary.path} (build {engine.binary.build_number}, "
                     f"chosen from {engine.binary.source})")
    prepared = PreparedIdle(spec, models, engine, paths.results_dir(results), kind)
    prepared.cells = [(m, s) for m in models for s in spec.settings()]
    return prepared


def _model_entry(m: ResolvedModel) -> dict:
    return {"label": m.label, "ref": m.ref, "source": m.source, "sha256": file_sha256(m.path), **m.info.as_dict()}


def execute_idle(prep: PreparedIdle, reporter: Reporter = QuietReporter(), *, extra_manifest: dict | None = None
                 ) -> Run:
    spec = prep.spec
    writer = RunWriter(prep.results_root, prep.kind, {
        "config": spec.as_dict(),
        "host": host_facts(),
        "engine": prep.engine.facts(),
        "models": [_model_entry(m) for m in prep.models],
        "cells": [],
        **(extra_manifest or {}),
    })
    reporter.message(f"run {writer.run_id} -> {writer.dir}")
    failures: list[str] = []
    try:
        for index, (model, setting) in enumerate(prep.cells):
            cell = _run_cell(prep, writer, index, model, setting, reporter)
            if cell.get("error"):
                failures.append(f"{model.label} / {setting.label}: {cell['error'].splitlines()[0]}")
    except KeyboardInterrupt:
        writer.finish("interrupted", "stopped by the user (SIGINT/SIGTERM)")
        raise
    except BaseException as exc:
        writer.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    writer.finish("failed" if failures else "complete", "; ".join(failures) or None)
    return open_run(writer.dir, prep.results_root)


def _run_cell(prep: PreparedIdle, writer: RunWriter, index: int, model: ResolvedModel, setting: Setting,
              reporter: Reporter) -> dict:
    spec = prep.spec
    log_name = f"cell{index:02d}-{model.label}-{setting.label}.log".replace("/", "_").replace(",", "_")
    notes = prep.engine.setting_notes(setting)
    env, overrides = prep.engine.environment(setting)
    cell = {
        "index": index, "model": model.label, "setting": setting.label, "keep_alive": setting.keep_alive,
        "sleep_idle_seconds": setting.sleep_idle_seconds, "notes": notes, "applicable": not notes,
        "env_overrides": overrides, "log": f"logs/{log_name}", "argv": [], "n_samples": 0,
        "sweep_wall_s": None, "efficiency": None, "error": None,
    }
    writer.manifest["cells"].append(cell)
    writer.save_manifest()
    for note in notes:
        reporter.message(f"note: {note} (running it anyway)")
    reporter.cell(f"{model.label} · {setting.label}", len(spec.pauses_s) * spec.reps)
    common = {"cell": index, "model": model.label, "model_quant": model.info.quant, "setting": setting.label,
              "keep_alive": setting.keep_alive, "sleep_idle_s": setting.sleep_idle_seconds,
              "setting_applicable": not notes}

    def emit(row: dict) -> None:
        writer.append({**common, **row})
        if row["phase"] == "measure":
            cell["n_samples"] += 1

    try:
        with prep.engine.start(model.path, setting, writer.log_path(log_name)) as server:
            cell["argv"], cell["port"] = server.argv, server.port
            writer.save_manifest()
            totals = run_idle_sweep(server, spec.pauses_s, reps=spec.reps, seed=spec.seed, warmup=spec.warmup,
                                    shuffle=spec.shuffle, emit=emit, on_progress=reporter.advance)
    except EngineError as exc:
        cell["error"] = str(exc)
        reporter.message(f"cell failed: {model.label} / {setting.label}: {exc.what}")
    else:
        cell["sweep_wall_s"] = totals.wall_s
        denominator = totals.sum_pause_requested_s + totals.sum_server_ms / 1000.0
        cell["efficiency"] = totals.wall_s / denominator if denominator > 0 else None
        cell["n_errors"] = totals.n_errors
    writer.save_manifest()
    return cell


def run_idle(spec: IdleSpec, **kwargs) -> Run:
    """Prepare and execute in one call (library use and tests)."""
    reporter = kwargs.pop("reporter", QuietReporter())
    prep = prepare_idle(spec, reporter=reporter, **kwargs)
    return execute_idle(prep, reporter)


__all__ = ["prepare_idle", "execute_idle", "run_idle", "PreparedIdle", "LbenchError"]
