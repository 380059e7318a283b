"""One swap storm, top-down: spec -> router -> sampler + timeline -> workload -> store -> findings.

Times in every table are seconds since the run's t0 (``t_s``, harness clock);
``manifest.t0_unix`` anchors them to wall time.  Faults are rows, not exceptions:
the storm ends on the request budget, the duration, the user's stop, or a dead
router (status ``failed``, reason in the manifest).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.analysis.swap import summarize_swap
from harness.engines.llama_server import Binary, locate
from harness.engines.router import RouterModel, RouterProcess, TimelineEvent
from harness.models.gguf_info import file_sha256
from harness.models.resolve import ResolvedModel, local_file, resolve, resolve_for_engine
from harness.probes import pagecache
from harness.probes.host import host_facts
from harness.probes.process_tree import TreeSample, TreeSampler
from harness.runs.idle import QuietReporter, Reporter
from harness.spec import SwapSpec
from harness.store import Run, RunWriter, open_run
from harness.workloads.swap import Pattern, RequestRecord, drive, waves


@dataclass
class PreparedSwap:
    spec: SwapSpec
    models: list[ResolvedModel]
    names: list[str]  # router model names, unique
    binary: Binary | None
    results_root: Path
    plan: list[list[str]]


PROMPT = "Hello world , this is a swap probe ."


class MlxSwapBackend:
    """One mlx_lm.server for the storm: a request naming another model makes it reload."""

    def __init__(self, prep: "PreparedSwap", log_path: Path):
        from harness.engines.http_engines import MlxServerEngine
        from harness.engines.base import Setting

        self.handle = MlxServerEngine(extra_args=prep.spec.server_args).start(prep.models[0].path, Setting(),
                                                                               log_path)
        self.proc = self.handle.proc
        self.pid, self.port, self.argv = self.proc.pid, self.handle.port, self.handle.argv
        self.base_url = self.handle.base_url

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.handle.close()


def unique_names(models: list[ResolvedModel]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for m in models:
        seen[m.label] = seen.get(m.label, 0) + 1
        names.append(m.label if seen[m.label] == 1 else f"{m.label}-{seen[m.label]}")
    return names


def prepare_swap(spec: SwapSpec, *, llama_server: str | None = None, results: str | None = None,
                 reporter: Reporter = QuietReporter()) -> PreparedSwap:
    spec.validate()
    pattern = Pattern(spec.pattern, spec.zipf_s, spec.burst_k).validate(len(spec.models))
    if spec.engine == "mlx":
        seen: dict[str, int] = {}
        models = []
        for ref in spec.models:  # a repeated preset gets its own seed: a distinct directory to reload
            seen[ref] = seen.get(ref, -1) + 1
            models.append(resolve_for_engine(ref, "mlx", seed=seen[ref], announce=reporter.message))
    else:
        models = [resolve(ref, progress=reporter.model_progress, announce=reporter.message) for ref in spec.models]
    names = unique_names(models)
    for m in models:
        if m.source == "synthetic":
            reporter.message(f"{m.ref}: SYNTHETIC model (random weights, shape of preset {m.info.preset})")
    binary = locate(llama_server) if spec.engine == "llama-server" else None
    if binary is not None:
        reporter.message(f"engine: {binary.path} (build {binary.build_number}, chosen from {binary.source})")
    else:
        reporter.message("engine: mlx_lm.server")
    plan = waves(pattern, names, spec.requests, spec.seed)
    prepared = PreparedSwap(spec, models, names, binary, paths.results_dir(results), plan)
    from harness.runs import preflight

    preflight.check_swap(prepared)  # names and paths the router preset cannot hold: before any run directory
    return prepared


class ModelStates:
    """Each model's last status as told by /models/sse (thread-safe)."""

    def __init__(self, names: list[str]):
        self._lock = threading.Lock()
        self._status = {n: "unloaded" for n in names}

    def update(self, model: str | None, status: str | None) -> None:
        if model and status:
            with self._lock:
                self._status[model] = status

    def get(self, model: str) -> str | None:
        with self._lock:
            return self._status.get(model)


def execute_swap(prep: PreparedSwap, reporter: Reporter = QuietReporter()) -> Run:
    spec = prep.spec
    t0 = time.perf_counter()
    t0_unix = time.time()
    writer = RunWriter(prep.results_root, "swap", {
        "config": spec.as_dict(),
        "t0_unix": t0_unix,
        "host": host_facts(),
        "engine": {"engine": "llama-server (router)", **prep.binary.as_dict()} if prep.binary else
                  {"engine": "mlx_lm.server"},
        "models": [{"label": name, "ref": m.ref, "source": m.source,
                    "sha256": file_sha256(m.path) if m.path.is_file() else None,
                    **m.info.as_dict()} for name, m in zip(prep.names, prep.models)],
        "plan_waves": len(prep.plan),
    })
    reporter.message(f"run {writer.run_id} -> {writer.dir}")
    states = ModelStates(prep.names)

    def rel(t: float | None) -> float | None:
        return None if t is None else t - t0

    def on_event(e: TimelineEvent) -> None:
        if e.source == "sse":
            states.update(e.model, e.detail.get("status"))
        writer.append({"t_s": rel(e.t), "source": e.source, "kind": e.kind, "model": e.model,
                       "detail": json.dumps(e.detail), "text": e.text}, table="events")

    def on_sample(s: TreeSample) -> None:
        writer.append({"t_s": rel(s.t), "children_alive": s.n_children, "rss_total_bytes": s.total_rss,
                       "rss_router_bytes": s.root_rss, "rss_children_bytes": s.total_rss - s.root_rss,
                       "mem_available_bytes": s.mem_available,
                       "children": ";".join(f"{pid}:{rss}" for pid, rss in sorted(s.children.items()))},
                      table="memory")

    def on_request(r: RequestRecord) -> None:
        if spec.engine == "mlx" and r.error is None and r.http_status == 200:
            for name in prep.names:  # mlx_lm.server holds exactly the model it last served
                states.update(name, "loaded" if name == r.model else "unloaded")
        latency = (r.t_done - r.t_send) * 1000 if r.t_done is not None else None
        writer.append({
            "index": r.index, "wave": r.wave, "model": r.model, "status_at_send": r.status_at_send,
            "resident_at_send": r.status_at_send == "loaded", "t_send_s": rel(r.t_send),
            "t_first_byte_s": rel(r.t_first_byte), "t_done_s": rel(r.t_done), "latency_ms": latency,
            "ttfb_ms": (r.t_first_byte - r.t_send) * 1000 if r.t_first_byte is not None else None,
            "http_status": r.http_status, "error": r.error, "error_kind": r.error_kind,
            "server_prompt_ms": r.server_prompt_ms, **(r.extra or {}),
        }, table="requests")
        reporter.advance()

    router_models = [RouterModel(n, m.path, spec.stop_timeout_s) for n, m in zip(prep.names, prep.models)]
    path_of = {n: m.path for n, m in zip(prep.names, prep.models)}
    weights_of = {n: local_file(m) for n, m in zip(prep.names, prep.models)}
    if spec.cache_state == "warm":
        for p in set(weights_of.values()):
            pagecache.warm(p)

    def cold_swap_in(model: str) -> dict:
        """Evict a model's file before a request that will load it (a running child maps it: keep)."""
        if states.get(model) in ("loaded", "loading", "sleeping"):
            return {"file_resident_pct_at_send": None}
        pagecache.evict(weights_of[model])
        frac = pagecache.resident_fraction(weights_of[model])
        return {"file_resident_pct_at_send": None if frac is None else round(100 * frac, 2)}
    router = sampler = None
    ended = "complete"
    reason = None
    path, body_for = "/completion", None
    try:
        if spec.engine == "mlx":
            router = MlxSwapBackend(prep, writer.log_path("mlx_server.log"))
            path = "/v1/completions"

            def body_for(model: str) -> dict:
                return {"model": str(path_of[model]), "prompt": PROMPT, "max_tokens": spec.n_predict,
                        "temperature": 0}
            writer.manifest["router"] = {"argv": router.argv, "pid": router.pid, "port": router.port,
                                         "preset": "(mlx_lm.server keeps one model; a request naming another "
                                                   "reloads it)", "started_t_s": 0.0}
        else:
            router = RouterProcess(prep.binary, router_models, models_max=spec.models_max, run_dir=writer.dir,
                                   sleep_idle_seconds=spec.sleep_idle_seconds, ctx_size=spec.ctx_size,
                                   parallel=spec.parallel, extra_args=spec.server_args, on_event=on_event)
            writer.manifest["router"] = {"argv": router.argv, "pid": router.pid, "port": router.port,
                                         "preset": router.preset_path.read_text(),
                                         "started_t_s": router.t_start - t0}
        writer.save_manifest()
        sampler = TreeSampler(router.pid, on_sample, spec.sample_hz).start()
        reporter.cell(f"{spec.engine} · {spec.pattern} · {len(prep.names)} models · models_max={spec.models_max}",
                      sum(map(len, prep.plan)))
        deadline = time.perf_counter() + spec.duration_s if spec.duration_s else None
        cpu0, wall0 = time.process_time(), time.perf_counter()
        sent = asyncio.run(drive(router.base_url, prep.plan, concurrency=spec.concurrency,
                                 n_predict=spec.n_predict, deadline=deadline, status_of=states.get,
                                 emit=on_request, should_stop=lambda: not router.alive(),
                                 reuse_connections=spec.reuse_connections,
                                 before_send=cold_swap_in if spec.cache_state == "cold" else None,
                                 path=path, body_for=body_for))
        writer.manifest["requests_sent"] = sent
        storm_wall = time.perf_counter() - wall0
        writer.manifest["client"] = {"storm_wall_s": storm_wall, "cpu_s": time.process_time() - cpu0,
                                     "cpu_share_of_one_core": (time.process_time() - cpu0) / storm_wall,
                                     "requests_per_s": sent / storm_wall if storm_wall else None}
        if not router.alive():
            ended, reason = "failed", f"the server died (exit status {router.proc.returncode})"
    except KeyboardInterrupt:
        ended, reason = "interrupted", "stopped by the user (SIGINT/SIGTERM)"
        raise
    except BaseException as exc:
        ended, reason = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if sampler is not None:
            sampler.stop()
            span = time.perf_counter() - sampler.started
            writer.manifest["sampler"] = {"samples": sampler.n, "rate_hz": spec.sample_hz,
                                          "achieved_hz": sampler.n / span if span else None,
                                          "cpu_s": round(sampler.cpu_s, 4),
                                          "cpu_share_of_one_core": sampler.cpu_s / span if span else None}
        if router is not None:
            router.close()
        writer.finish(ended, reason)
        run = open_run(writer.dir, prep.results_root)
        try:
            run.manifest["findings"] = summarize_swap(run).findings
            writer.manifest["findings"] = run.manifest["findings"]
            writer.save_manifest()
        except Exception as exc:  # analysis must never lose the data
            writer.manifest["analysis_error"] = f"{type(exc).__name__}: {exc}"
            writer.save_manifest()
    return open_run(writer.dir, prep.results_root)
