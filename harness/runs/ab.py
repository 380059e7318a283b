"""The gate job (``lbench ab``): A, B and an A/A copy of A interleaved in one job, until decided.

Each round runs every arm once, each a real idle run on a fresh server (``idle_campaign``), in the
balanced random order of ``harness/analysis/rounds.py``; after ``min_rounds`` every round is a look
at the level an alpha-spending boundary gives it (the budget fixes the planned rounds after the
first round), split over the gated groups.  The job is itself a run of the kind ``ab``
(``RunSession``): its table ``rounds`` has one row per idle run and gated group (journaled as each
run ends: an interrupted job keeps its rounds), ``looks`` one row per contrast per look, and its
manifest's ``ab`` section the design and the outcome.  Every idle run's manifest names the job, its
round and its arm.  ``lbench evidence`` on the job writes the rounds, the A/A floor, the verdict
and a rerun script.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import paths
from harness.analysis.campaign import Execute, RoundsResult, interleaved_rounds
from harness.analysis.gate_config import ARM_TITLES, budget_seconds, parse_arms, parse_margins
from harness.analysis.rounds import Look, RoundsConfig, idle_levels
from harness.analysis.sequential import SPENDING
from harness.errors import BadInput
from harness.runs.campaign import idle_campaign
from harness.runs.idle import PreparedIdle, Reporter, model_entry, prepare_idle
from harness.runs.session import RunSession
from harness.spec import IdleSpec, parse_pauses
from harness.store import Run

KIND = "ab"


@dataclass(frozen=True)
class GateJobSpec:
    """Both sides' idle specs (the same design; binaries and extra arguments differ), the rounds'
    config, the gated pauses (None: every pause of the spec) and what the command was asked."""

    spec_a: IdleSpec
    spec_b: IdleSpec
    rounds: RoundsConfig
    llama_server_a: str | None = None
    llama_server_b: str | None = None
    gate_pauses: tuple[float, ...] | None = None
    design: dict[str, Any] = field(default_factory=dict)


def gate_job_spec(spec: IdleSpec, *, margin: str | None, arms: str, alpha: float, slower_rule: str, seed: int,
                  min_rounds: int | None, max_rounds: int, budget: str, spending: str, gate_on: str | None,
                  llama_server_a: str | None, llama_server_b: str | None, a_args: list[str], b_args: list[str]
                  ) -> GateJobSpec:
    """``lbench ab``'s job from its options as given (the design spec already loaded): the rounds' config
    (margins per pause, arms, budget, spending), both sides' copies of the spec with their extra server
    arguments, the gated pauses. Every bad input is refused here, before anything runs (exit 2)."""
    budget_s = budget_seconds(budget)
    if spending not in SPENDING:
        raise BadInput(f"--spending must be one of {', '.join(SPENDING)}, got {spending!r}", where="--spending")
    gate_pauses = tuple(sorted(set(parse_pauses(gate_on, "--gate-on")))) if gate_on else None
    default_margin, woken_margin, margins = parse_margins(margin)
    cfg = RoundsConfig(arms=parse_arms(arms), margin=default_margin, woken_margin=woken_margin, alpha=alpha,
                       slower_rule=slower_rule, seed=seed,
                       min_rounds=min_rounds if min_rounds is not None else RoundsConfig.min_rounds,
                       max_rounds=max_rounds, budget_s=budget_s, spending=spending,
                       margins={f"pause {p:g} s": m for p, m in margins.items()})
    cfg.check()
    unknown = [p for p in margins if not any(abs(p - q) < 1e-9 for q in spec.pauses_s)]
    if unknown:
        raise BadInput(f"--margin names pauses the spec does not have: {', '.join(f'{p:g}' for p in unknown)}",
                       where="--margin", hint=f"the spec's pauses: {', '.join(f'{p:g}' for p in spec.pauses_s)}")
    spec_a, spec_b = copy.deepcopy(spec), copy.deepcopy(spec)
    spec_a.server_args = list(spec.server_args) + list(a_args)
    spec_b.server_args = list(spec.server_args) + list(b_args)
    spec_a.validate("--a-arg"), spec_b.validate("--b-arg")  # both sides' bad input before either side starts
    return GateJobSpec(spec_a, spec_b, cfg, llama_server_a=llama_server_a, llama_server_b=llama_server_b,
                       gate_pauses=gate_pauses, design={"spec": spec.name, "budget": budget})


@dataclass(frozen=True)
class PreparedGateJob:
    spec: GateJobSpec
    preps: dict[str, PreparedIdle]  # a, b, and aa (the same prepared run as a)
    pauses: tuple[float, ...]
    results_root: Path
    on_look: Callable[[Look], None] | None = None


def round_floor_s(spec: IdleSpec, arms: int) -> float:
    """The least one round can take: every arm's pauses, slept (server starts and requests come on top)."""
    cells = max(len(spec.models), 1)
    return arms * cells * spec.reps * float(sum(spec.pauses_s))


def prepare_gate_job(job: GateJobSpec, results: str | None, reporter: Reporter) -> PreparedGateJob:
    """Every bad-input check before a run directory exists: the design, the budget against one round's
    pauses, the gated pauses against the spec, and both sides' idle runs prepared."""
    cfg = job.rounds
    cfg.check()
    pauses = tuple(job.gate_pauses) if job.gate_pauses else tuple(sorted(set(job.spec_a.pauses_s)))
    missing = [p for p in pauses if not any(math.isclose(p, q) for q in job.spec_a.pauses_s)]
    if missing:
        raise BadInput(f"--gate-on names pauses the spec does not have: {', '.join(f'{p:g}' for p in missing)}",
                       where="--gate-on", hint=f"the spec's pauses: {', '.join(f'{p:g}' for p in job.spec_a.pauses_s)}")
    floor = round_floor_s(job.spec_a, len(cfg.arms))
    if cfg.budget_s is not None and cfg.budget_s < floor:
        raise BadInput(f"the budget ({cfg.budget_s:g} s) is shorter than one round's pauses alone ({floor:g} s)",
                       where="--budget", hint=f"give at least {math.ceil(floor * 3 * cfg.min_rounds)} s (e.g. --budget 15m), "
                                              "or fewer pauses or repetitions")
    prep_a = prepare_idle(job.spec_a, llama_server=job.llama_server_a, results=results, reporter=reporter)
    prep_b = prepare_idle(job.spec_b, llama_server=job.llama_server_b, results=results, reporter=reporter)
    return PreparedGateJob(job, {"a": prep_a, "b": prep_b, "aa": prep_a}, pauses, paths.results_dir(results))


def round_rows(row: dict, job_id: str) -> list[dict]:
    """One idle run of a round as rows of the ``rounds`` table (one per gated group)."""
    run = row["run"]
    return [{"run_id": job_id, "round": row["round"], "position": row["position"], "arm": row["arm"],
             "idle_run_id": getattr(run, "run_id", ""), "group": group, "level_log": level,
             "median_ms": math.exp(level), "round_wall_s": round(row["wall_s"], 3)}
            for group, level in row["levels"].items()]


def look_rows(look: Look, job_id: str) -> list[dict]:
    """One look as rows of the ``looks`` table (one per contrast and group)."""
    return [{"run_id": job_id, "round": look.round, "final": look.final, "level_one_sided": look.level_one_sided,
             "status": look.status, "reason": look.reason, "group": c.group, "contrast": c.name, "ratio": c.ratio,
             "ratio_ci_low": c.ratio_lo, "ratio_ci_high": c.ratio_hi, "verdict": c.verdict, "margin": c.margin,
             "df": look.fits[c.group].df if c.group in look.fits else None,
             "residual_sd": look.fits[c.group].residual_sd if c.group in look.fits else None}
            for c in look.contrasts]


def _side(prep: PreparedIdle) -> dict[str, Any]:
    binary = prep.engine.binary
    return {"binary": binary.as_dict() if binary is not None else None, "extra_args": list(prep.spec.server_args),
            "models": [model_entry(m) for m in prep.models]}


@dataclass
class GateJob:
    """The finished job: its own run (kind ``ab``) and the rounds' result."""

    run: Run
    result: RoundsResult

    @property
    def status(self) -> str:
        return self.result.status


def execute_gate_job(prepared: PreparedGateJob, reporter: Reporter, *, execute: Execute | None = None,
                     clock: Callable[[], float] = time.monotonic) -> GateJob:
    """The job (module doc); ``execute(prep, reporter, extra_manifest=...)`` is injectable for tests."""
    job, cfg = prepared.spec, prepared.spec.rounds
    section = {"design": {**job.design, "arms": list(cfg.arms), "budget_s": cfg.budget_s, "seed": cfg.seed,
                          "margin": cfg.margin, "margins": dict(cfg.margins), "alpha": cfg.alpha,
                          "slower_rule": cfg.slower_rule, "min_rounds": cfg.min_rounds, "max_rounds": cfg.max_rounds,
                          "position_term": cfg.position, "spending": cfg.spending, "gated_pauses": list(prepared.pauses)},
               "sides": {arm: _side(prepared.preps[arm]) for arm in ("a", "b")}}
    base = prepared.preps["a"]  # the job's engine and models, as a run lists them: side A's (B's are in ``ab.sides``)
    with RunSession(prepared.results_root, KIND, {"ab": section, "engine": base.engine.facts(),
                                                  "models": section["sides"]["a"]["models"]}, reporter) as session:
        job_id = session.run_id

        def on_run(row: dict) -> None:
            for r in round_rows(row, job_id):
                session.writer.append(r, table="rounds")

        def on_look(look: Look) -> None:
            for r in look_rows(look, job_id):
                session.writer.append(r, table="looks")
            if prepared.on_look is not None:
                prepared.on_look(look)

        def manifest(round_no: int, arm: str) -> dict:
            return {"ab": {"job_id": job_id, "round": round_no, "arm": arm, "arm_title": ARM_TITLES[arm]}}

        campaign = idle_campaign(reporter, execute=execute)
        result = interleaved_rounds(campaign, prepared.preps, cfg, clock=clock, manifest=manifest, on_run=on_run,
                                    on_look=on_look, levels_of=lambda run: idle_levels(run, prepared.pauses))
        final = result.final
        session.update(ab={**session.writer.manifest["ab"], "outcome": {
            "status": result.status, "reason": final.reason if final else "no look was made",
            "rounds": len(result.orders), "planned_rounds": result.planned_rounds,
            "elapsed_s": round(result.elapsed_s, 1),
            "run_ids": {arm: [r.run_id for r in runs] for arm, runs in result.runs.items()}}})
    assert session.run is not None
    return GateJob(session.run, result)
