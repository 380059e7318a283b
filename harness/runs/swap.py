"""One swap storm, top-down: spec -> router -> sampler + timeline -> workload -> store -> findings.

Times in every table are seconds since the run's t0 (``t_s``, harness clock);
``manifest.t0_unix`` anchors them to wall time.  Faults are rows, not exceptions:
the storm ends on the request budget, the duration, the user's stop, a dead
router or the first request past its deadline.  A dead router, a router child that
died without being told to (killed, crashed) or a request past its deadline makes
the run ``failed`` (reason in the manifest, the faults first among the findings).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness import paths
from harness.analysis.persisted import load_analysis
from harness.engines import devices, server_policy
from harness.engines.binary import Binary, locate
from harness.engines import registry
from harness.engines.registry import EngineKind, EngineOptions
from harness.engines.prompts import SWAP_PROMPT
from harness.engines.router import RouterModel
from harness.models.gguf_info import file_sha256
from harness.models.resolve import ResolvedModel, local_file, resolve_for_engine
from harness.probes import pagecache
from harness.runs.idle import QuietReporter, Reporter
from harness.spec import SwapSpec
from harness.runs.session import RunSession
from harness.store import Run, open_run
from harness.analysis.swap import ORDERED_EXIT_KINDS, failure_reason
from harness.probes.process_tree import tree_states
from harness.workloads.router_session import EVENT_COLUMNS, RouterSession
from harness.workloads import sequence
from harness.workloads.swap import DEADLINE, Pattern, waves
from harness.runs import preflight
from harness.runs.swap_first import run_first_requests

DEATH_EVENT_KINDS = {"spawn", "exited", "status:loaded", "child_loaded", *ORDERED_EXIT_KINDS}
REQUEST_FAULT_COLUMNS = ["index", "model", "t_send_s", "t_done_s", "error", "error_kind"]


@dataclass
class PreparedSwap:
    spec: SwapSpec
    models: list[ResolvedModel]
    names: list[str]  # router model names, unique
    binary: Binary | None
    results_root: Path
    plan: list[list[str]]
    engine: EngineKind
    options: EngineOptions
    deadline: dict  # {"request_s": seconds, "derived_from": how}, see request_deadline
    device_facts: dict = field(default_factory=dict)  # backend, devices used, driver (engines/devices.py)
    offsets: list[float] | None = None  # a timed sequence: each request's send time after the first


PER_LOAD_S = 60.0  # one model load, before its size: spawn, mmap, warm-up, first decode
PER_LOAD_S_PER_GB = 20.0  # reading the weights from a slow disk (50 MB/s)
BASE_S = 60.0
PER_TOKEN_S = 1.0


def request_deadline(spec: SwapSpec, model_bytes: list[int]) -> dict:
    """One request's deadline: the spec's ``request_timeout_s``, else derived.  A request may wait
    for every distinct model in flight ahead of it to load (the router queues one entry per
    model), then decodes ``n_predict`` tokens:
    60 s + min(in flight, models) x (60 s + 20 s per GB of the largest model) + n_predict x 1 s."""
    if spec.request_timeout_s is not None:
        return {"request_s": float(spec.request_timeout_s), "derived_from": "--request-timeout"}
    in_flight = max(spec.concurrency, spec.burst_k if spec.pattern == "burst" else 1,
                    len(spec.timed_steps() or []))
    loads = min(in_flight, len(model_bytes) or 1)
    largest_gb = max(model_bytes or [0]) / 1e9
    per_load = PER_LOAD_S + PER_LOAD_S_PER_GB * largest_gb
    seconds = BASE_S + loads * per_load + PER_TOKEN_S * spec.n_predict
    return {"request_s": round(seconds, 1),
            "derived_from": f"{BASE_S:g} s + {loads} load(s) x {per_load:.0f} s (largest model "
                            f"{largest_gb:.2f} GB) + {spec.n_predict} token(s) x {PER_TOKEN_S:g} s"}


PROMPT = SWAP_PROMPT


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
    warning = server_policy.unsafe_warning(spec.unsafe_server_args, spec.unsafe_server_env)
    if warning:
        reporter.message(warning)
    engine = registry.require(spec.engine, "swap")
    options = EngineOptions(llama_server=llama_server, ctx_size=spec.ctx_size,
                            server_args=list(spec.server_args), unsafe_server_args=list(spec.unsafe_server_args),
                            unsafe_server_env=server_policy.parse_unsafe_env(spec.unsafe_server_env))
    pattern = Pattern(spec.pattern, spec.zipf_s, spec.burst_k).validate(len(spec.models))
    seen: dict[str, int] = {}
    models = []
    for ref in spec.models:
        # a repeated synthetic MLX preset gets its own seed: a distinct directory to reload
        seen[ref] = seen.get(ref, -1) + 1
        extra = {"seed": seen[ref]} if engine.model_source == "mlx-dir" else {"progress": reporter.model_progress}
        models.append(resolve_for_engine(ref, engine.name, announce=reporter.message, **extra))
    names = unique_names(models)
    for m in models:
        if m.source == "synthetic":
            reporter.message(f"{m.ref}: SYNTHETIC model (random weights, shape of preset {m.info.preset})")
    binary = locate(llama_server) if engine.binary is not None else None  # a llama.cpp program lbench provides
    device_facts: dict = {}
    if binary is not None:
        reporter.message(f"engine: {binary.path} (build {binary.build_number}, chosen from {binary.source})")
        choice = devices.choose(binary.path, binary.backend, where=str(binary.path))  # refused: exit 2, here
        reporter.message(f"device: {choice.summary}")
        device_facts = choice.facts()
    else:
        reporter.message(f"engine: {engine.name} ({engine.summary})")
    steps = spec.timed_steps()
    offsets = None
    if steps is not None:  # a timed sequence replaces the pattern: one request per step, at its time
        steps = sequence.resolve(steps, names, "--sequence")
        plan, offsets = [[s.model] for s in steps], [s.at_s for s in steps]
        reporter.message("sequence: " + ", ".join(f"{s.model}@{s.at_s:g}" for s in steps))
    else:
        plan = waves(pattern, names, spec.requests, spec.seed)
    prepared = PreparedSwap(spec, models, names, binary, paths.results_dir(results), plan, engine, options,
                            request_deadline(spec, [m.info.bytes for m in models]), offsets=offsets)
    prepared.device_facts = device_facts

    preflight.check_swap(prepared)  # names and paths the router preset cannot hold: before any run directory
    return prepared


def execute_swap(prep: PreparedSwap, reporter: Reporter = QuietReporter()) -> Run:
    spec = prep.spec
    t0 = time.perf_counter()
    t0_unix = time.time()
    session = RunSession(prep.results_root, "swap", {
        "config": spec.as_dict(),
        "t0_unix": t0_unix,
        "engine": {"engine": prep.engine.name, "summary": prep.engine.summary,
                   **(prep.binary.as_dict() if prep.binary else {}), **prep.device_facts},
        "models": [{"label": name, "ref": m.ref, "source": m.source,
                    "sha256": file_sha256(m.path) if m.path.is_file() else None,
                    **m.info.as_dict(), **({"origin": m.origin} if m.origin else {})}
                   for name, m in zip(prep.names, prep.models)],
        "plan_waves": len(prep.plan),
        **({"sequence": [{"model": w[0], "at_s": at} for w, at in zip(prep.plan, prep.offsets)]}
           if prep.offsets is not None else {}),
        "deadlines": prep.deadline,
    }, reporter)
    with session:
        if spec.first_request:  # the first request after each starting state, not a storm
            writer = session.writer
            run_first_requests(prep, session, reporter, t0,
                               on_request=lambda row: writer.append(row, table="requests"),
                               on_event=lambda row: writer.append(row, table="events"))
        else:
            _storm(prep, session, reporter, t0)
    run = session.run
    assert run is not None
    if session.analysis_error is None:
        findings = load_analysis(run)["findings"]
        session.writer.manifest["findings"] = findings
    else:
        session.writer.manifest["analysis_error"] = session.analysis_error
    session.writer.save_manifest()
    return open_run(session.dir, prep.results_root)


def _storm(prep: PreparedSwap, run: RunSession, reporter: Reporter, t0: float) -> None:
    """Start the router, drive the plan, judge the storm; the router is closed whatever happens."""
    spec = prep.spec
    writer = run.writer
    fault_rows: list[dict] = []  # every request's outcome, kept to judge the run at its end (all failed,
    failed_rows: list[dict] = []  # child deaths, deadlines); the failed ones again, to find deadlines
    exit_events: list[dict] = []

    def on_request(row: dict) -> None:
        writer.append(row, table="requests")
        fault_rows.append({k: row.get(k) for k in REQUEST_FAULT_COLUMNS})
        if row.get("error") is not None:
            failed_rows.append(row)
        reporter.advance()

    def on_event(row: dict) -> None:
        writer.append(row, table="events")
        if row["kind"] in DEATH_EVENT_KINDS:
            exit_events.append(row)

    router_models = [RouterModel(n, m.path, spec.stop_timeout_s) for n, m in zip(prep.names, prep.models)]
    weights_of = {n: local_file(m) for n, m in zip(prep.names, prep.models)}
    if spec.cache_state == "warm":
        for p in set(weights_of.values()):
            assert p is not None  # a cache state needs a local_model engine (SwapSpec.validate)
            pagecache.warm(p)

    def cold_swap_in(model: str) -> dict:
        """Evict a model's file before a request that will load it (a running child maps it: keep)."""
        if states.get(model) in ("loaded", "loading", "sleeping"):
            return {"file_resident_pct_at_send": None}
        weights = weights_of[model]
        assert weights is not None  # a cache state needs a local_model engine (SwapSpec.validate)
        pagecache.evict(weights)
        frac = pagecache.resident_fraction(weights)
        return {"file_resident_pct_at_send": None if frac is None else round(100 * frac, 2)}

    make_swap = prep.engine.make_swap
    assert make_swap is not None  # the registry refuses a 'swap' engine without one
    session = RouterSession(
        lambda on_event: make_swap(prep.options, binary=prep.binary, models=router_models, spec=spec,
                                   run_dir=writer.dir, on_event=on_event),
        prep.names, sample_hz=spec.sample_hz, t0=t0, keep=False,
        on_event=on_event,
        on_sample=lambda row: writer.append(row, table="memory"))
    states = session.states
    try:
        session.start()
        router = session.backend
        run.update(router={**router.describe(), "started_t_s": router.t_start - t0})
        what = "sequence" if prep.offsets is not None else spec.pattern
        reporter.cell(f"{spec.engine} · {what} · {len(prep.names)} models · models_max={spec.models_max}",
                      sum(map(len, prep.plan)))
        deadline = time.perf_counter() + spec.duration_s if spec.duration_s else None
        cpu0, wall0 = time.process_time(), time.perf_counter()
        sent = session.drive(prep.plan, concurrency=spec.concurrency, n_predict=spec.n_predict, prompt=PROMPT,
                             deadline=deadline, emit=on_request, reuse_connections=spec.reuse_connections,
                             before_send=cold_swap_in if spec.cache_state == "cold" else None,
                             timeout_s=prep.deadline["request_s"], stop_on_deadline=True, offsets=prep.offsets)
        storm_end = time.perf_counter()
        states_now = tree_states(router.pid) if any(r.get("error_kind") == DEADLINE for r in failed_rows) else None
        writer.manifest["requests_sent"] = sent
        storm_wall = storm_end - wall0
        writer.manifest["client"] = {"storm_wall_s": storm_wall, "cpu_s": time.process_time() - cpu0,
                                     "cpu_share_of_one_core": (time.process_time() - cpu0) / storm_wall,
                                     "requests_per_s": sent / storm_wall if storm_wall else None,
                                     "storm_end_t_s": storm_end - t0}
        if not router.alive():
            run.fail(f"the server died (exit status {router.proc.returncode})")
        else:
            # list(...) snapshots: the router's reader threads still append events (the shutdown's exits),
            # and a list growing while pandas reads it failed with "Length of values (17) ... (18)"
            # every request, not only the failed ones: "all N requests failed" must count them all
            fault = failure_reason(pd.DataFrame(list(fault_rows), columns=REQUEST_FAULT_COLUMNS),
                                   pd.DataFrame(list(exit_events), columns=EVENT_COLUMNS), storm_end - t0)
            if fault is not None:
                reason = fault + (f" (request deadline {prep.deadline['request_s']:g} s, "
                                  f"{prep.deadline['derived_from']}; at the deadline: {states_now})"
                                  if states_now else "")
                run.fail(reason)
                reporter.message(f"run failed: {reason}")
    finally:
        try:
            session.close()
        finally:
            if session.sampler_summary is not None:
                writer.manifest["sampler"] = session.sampler_summary
