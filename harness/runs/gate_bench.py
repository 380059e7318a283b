"""The gate benchmark on real runs (``lbench gate-bench``): how often does the gate cry wolf,
and how often does it catch a slowdown of known mechanism?

Design (docs/statistics.md, "Measured error rates"):

- Three sides run on fresh servers, interleaved in rotated order within every round so a slow
  drift of the machine hits all of them alike: ``A`` and ``A2`` (the same model, the same
  binary: any "slower" between them is a false alarm) and ``B`` (a model with the same tensors
  and a few more transformer blocks: a real slowdown, whose true size is measured from all
  rounds pooled rather than assumed).
- One trial = ``runs_per_side`` rounds; it yields two gate decisions with the runs as units,
  exactly as ``lbench gate`` decides: A vs A2 (the A/A condition) and A vs B (the slowed
  condition; B's samples are labelled with A's model so the groups pair up).
- Trials are independent: no run is shared between trials, so the counts over trials are
  binomial and their Clopper-Pearson intervals are honest.

Every mode is one run of the kind ``gate-bench`` (``harness/runs/session.py``: a run id, its
manifest, a journal, ``analysis.json``; ``lbench runs`` lists it).  On real runs its table is
``decisions`` (one row per decision, journaled as it is made: an interrupted benchmark keeps the
trials it finished), its manifest section ``gate_bench`` the design, then the slowdown's pooled
size; every idle run it measured is a run of its own whose manifest names the bench's run id.
With ``--simulate`` its table is ``simulated`` (one row per figure of a simulated cell,
``harness.analysis.gate_sim``).  Runs and decisions come from the gate's campaign core
(``harness.runs.campaign.idle_campaign``); ``execute(prep, reporter, extra_manifest)`` and
``judge(a_runs, b_runs, cfg, gate_on=...)`` are injectable for tests.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import paths
from harness.analysis.campaign import Execute, Judge
from harness.analysis.compare import judge_runs
from harness.analysis.gate import GateConfig, GateOutcome
from harness.analysis.gate_bench import simulated_rows, slowdown_size
from harness.analysis.gate_sim import RoundsNoise, RunModel, run_model, simulate_gate, simulate_rounds
from harness.analysis.gate_config import RoundsConfig, budget_seconds, parse_gate_on, parse_margins
from harness.errors import BadInput
from harness.models import presets
from scipy import stats
from harness.runs.ab import GateJob, GateJobSpec, PreparedGateJob, execute_gate_job
from harness.runs.campaign import idle_campaign
from harness.runs.idle import prepare_idle
from harness.runs.session import RunSession
from harness.spec import IdleSpec
from harness.store import Run

if TYPE_CHECKING:
    import pandas as pd

    from harness.analysis.gate_config import GateOn
    from harness.analysis.verdicts import Verdict
    from harness.runkind import RunOptions
    from harness.runs.idle import PreparedIdle, Reporter
    from harness.store import Run

SIDES = ("A", "A2", "B")
ORDERS = (("A", "A2", "B"), ("B", "A", "A2"), ("A2", "B", "A"))  # rotated: each side in each position
KIND = "gate-bench"


class Relabeled:
    """A run whose samples carry another model label (B's deeper model stands in for A's)."""

    def __init__(self, run: Run, model: str) -> None:
        self._run = run
        self._model = model

    def table(self, name: str = "samples") -> pd.DataFrame:
        frame = self._run.table(name)
        if "model" in frame:
            frame = frame.assign(model=self._model)
        return frame

    def __getattr__(self, attr: str) -> Any:  # the run's own attributes
        return getattr(self._run, attr)


@dataclass
class Trial:
    number: int
    runs: dict[str, list] = field(default_factory=lambda: {s: [] for s in SIDES})
    wall_s: float = 0.0


def decision_row(trial: Trial, condition: str, a_runs: list, b_runs: list, verdicts: Sequence[Verdict],
                 outcome: GateOutcome) -> dict:
    """One gate decision as a tidy row (the ``decisions`` table, harness/schema.py)."""
    gating = [v for v in verdicts if v.primary]
    worst = max(gating, key=lambda v: v.ratio_ci[0], default=None)
    return {
        "trial": trial.number,
        "condition": condition,
        "gate_status": outcome.status,  # pass | fail | inconclusive | refuse
        "gating_groups": len(gating),
        "groups_slower": sum(v.verdict == "slower" for v in gating),
        "groups_inconclusive": sum(v.verdict == "inconclusive" for v in gating),
        "worst_group": worst.key() if worst else "",
        "worst_ratio": worst.ratio if worst else float("nan"),
        "worst_ratio_ci_low": worst.ratio_ci[0] if worst else float("nan"),
        "worst_ratio_ci_high": worst.ratio_ci[1] if worst else float("nan"),
        "runs_per_side": len(a_runs),
        "a_run_ids": " ".join(r.run_id for r in a_runs),
        "b_run_ids": " ".join(r.run_id for r in b_runs),
        "trial_wall_s": round(trial.wall_s, 1),
    }


def run_gate_bench(preps: dict[str, PreparedIdle], cfg: GateConfig, *, bench_id: str, trials: int, runs_per_side: int,
                   model_label: str, reporter: Reporter, on_decision: Callable[[dict], None],
                   execute: Execute | None = None, judge: Judge | None = None, gate_on: GateOn = None) -> list[Trial]:
    """Run ``trials`` trials of ``runs_per_side`` rotated rounds over the sides in ``preps``
    (keys A, A2, B) and hand every decision row to ``on_decision``.  ``gate_on``: which groups vote
    (harness.analysis.gate_config.parse_gate_on; the warm regime by default), as in ``lbench gate``.
    Each run's manifest names the bench (``bench_id``), its trial and side."""
    judge = judge if judge is not None else judge_runs
    campaign = idle_campaign(reporter, execute=execute, judge=functools.partial(judge, gate_on=gate_on))
    done: list[Trial] = []
    round_no = 0
    for number in range(1, trials + 1):
        trial = Trial(number)
        start = time.monotonic()
        for _ in range(runs_per_side):
            for side in ORDERS[round_no % len(ORDERS)]:
                reporter.message(f"trial {number}/{trials}, round {round_no % runs_per_side + 1}/{runs_per_side}: {side}")
                run = campaign.measure(preps[side], extra_manifest={"gate_bench": {"bench_id": bench_id,
                                                                                     "trial": number, "side": side}})
                trial.runs[side].append(run)
            round_no += 1
        trial.wall_s = time.monotonic() - start
        a, a2 = trial.runs["A"], trial.runs["A2"]
        b = [Relabeled(r, model_label) for r in trial.runs["B"]]
        for condition, other in (("A/A", a2), ("slowed", b)):
            verdicts, _, outcome = campaign.look(a, other, cfg)
            on_decision(decision_row(trial, condition, a, other, verdicts, outcome))
        done.append(trial)
    return done


# ---- the kind's spec, prepare and execute (harness/kinds/gate_bench.py) ---------------------------

@dataclass(frozen=True)
class GateBenchSpec:
    """A gate benchmark on real runs: side A's idle spec (A2 the same), B's model, the gate's
    config, the trials; ``design``: what the command was asked, kept in the manifest.  With ``job``
    (``--ab``) every decision is one whole ``lbench ab`` gate job of that design instead."""

    idle: IdleSpec
    slow_model: str
    cfg: GateConfig
    trials: int = 10
    runs_per_side: int = 2
    gate_on: Any = "warm"  # harness.analysis.gate_config.parse_gate_on
    design: dict[str, Any] = field(default_factory=dict)
    job: RoundsConfig | None = None


@dataclass(frozen=True)
class SimulatedGateBenchSpec:
    """``--simulate``: the gate's and ab's error rates on simulated runs (harness.analysis.gate_sim).
    ``spreads``: between-run spreads to simulate (None: those of earlier sessions); ``within_sd``,
    ``stall_p``: the within-run shape (None: assumed)."""

    cfg: GateConfig
    trials: int = 400
    seed: int = 0
    spreads: tuple[float, ...] | None = None
    reps: int = 5
    within_sd: float | None = None
    stall_p: float | None = None
    job: RoundsConfig = field(default_factory=RoundsConfig)  # the ab cells: lbench ab's design
    round_s: float = 30.0  # the ab cells: seconds one round of the job takes (the budget's clock)
    woken_sd: float | None = None  # the ab cells: a second gated group (pause 1 s) with this run spread


def slowed_alias(model: str, extra_layers: int) -> str:
    """``llama3.2-1b-q4`` -> ``llama3.2-1b+2l-q4`` (the same tensors, ``extra_layers`` more blocks)."""
    parsed = presets.parse_synthetic_alias(model)
    if parsed is None:
        raise BadInput(f"--model {model!r} is not a synthetic preset alias, so lbench cannot build a deeper twin",
                       where="--model", hint="use a preset such as llama3.2-1b-q4, or give the slowed model with "
                                             "--slow-model")
    shape, quant = parsed
    if not 1 <= extra_layers <= presets.MAX_EXTRA_LAYERS:
        raise BadInput(f"--extra-layers must be 1..{presets.MAX_EXTRA_LAYERS}, got {extra_layers}")
    return f"{shape.name}+{extra_layers}l-{quant.name}"


def job_config(budget: str, margin: str | None, seed: int = 0) -> RoundsConfig:
    """``--ab``: lbench ab's design with this budget and margin (parsed as lbench ab parses them); trial n's
    jobs draw their round orders from ``seed`` + n (``run_job_trials``)."""
    default_margin, woken_margin, per = parse_margins(margin)
    cfg = RoundsConfig(margin=default_margin, woken_margin=woken_margin,
                       margins={f"pause {p:g} s": m for p, m in per.items()}, budget_s=budget_seconds(budget), seed=seed)
    cfg.check()
    return cfg


def simulation_spec(cfg: GateConfig, *, trials: int | None, seed: int, spreads: Sequence[float] | None,
                    reps: int | None, within_sd: float | None, stall_p: float | None, budget: str,
                    ab_margin: str | None, round_s: float, woken_sd: float | None = None) -> SimulatedGateBenchSpec:
    """``--simulate``: the design of a simulated bench (400 trials per cell and runs of 5 reps unless given);
    ``woken_sd``: each ab job also gates pause 1 s, whose runs spread this much."""
    if round_s <= 0:
        raise BadInput(f"--round-s must be > 0 seconds, got {round_s}", where="--round-s")
    if woken_sd is not None and not (math.isfinite(woken_sd) and woken_sd > 0):
        raise BadInput(f"--woken-sd must be a spread > 0, got {woken_sd}", where="--woken-sd", hint="e.g. --woken-sd 0.052")
    return SimulatedGateBenchSpec(cfg, trials=trials or 400, seed=seed, spreads=tuple(spreads) if spreads else None,
                                  reps=reps or 5, within_sd=within_sd, stall_p=stall_p,
                                  job=job_config(budget, ab_margin, seed), round_s=round_s, woken_sd=woken_sd)


def bench_spec(spec_a: IdleSpec, cfg: GateConfig, *, model: str, slow_model: str, trials: int, runs_per_side: int,
               gate_on: str | None, knobs: dict[str, str | None], job: RoundsConfig | None, budget: str
               ) -> GateBenchSpec:
    """A bench on real runs: side A's idle spec, B's model, and the design kept in the manifest (``knobs``:
    threads, cpus, client_cpus, omp_wait_policy as given); ``job`` (``--ab``): each decision one ab job."""
    design: dict[str, Any] = {"model": model, "slow_model": slow_model, "trials": trials, "runs_per_side": runs_per_side,
                              "pauses_s": spec_a.pauses_s, "reps": spec_a.reps, "warmup": spec_a.warmup, **knobs,
                              "gate_on": gate_on or "warm", "margin": cfg.threshold, "alpha": cfg.alpha}
    if job is not None:
        design.update({"ab": True, "budget": budget, "ab_margin": job.margin, "ab_margins": dict(job.margins),
                       "ab_alpha": job.alpha, "ab_arms": ",".join(job.arms)})
    return GateBenchSpec(spec_a, slow_model, cfg, trials=trials, runs_per_side=runs_per_side,
                         gate_on=parse_gate_on(gate_on), design=design, job=job)


@dataclass(frozen=True)
class PreparedGateBench:
    spec: GateBenchSpec
    preps: dict[str, Any]  # A, A2 (the same prepared idle run) and B
    results_root: Path
    on_decision: Callable[[dict], None] | None = None  # the command prints each decision


@dataclass(frozen=True)
class PreparedSimulation:
    spec: SimulatedGateBenchSpec
    model: RunModel
    results_root: Path


def _check_simulation(spec: SimulatedGateBenchSpec) -> None:
    if spec.trials < 10:
        raise BadInput(f"--trials must be >= 10 with --simulate, got {spec.trials}", where="--trials")
    for name, value, low_open, top in (("--sd", min(spec.spreads or [0.1]), True, 3.0),
                                       ("--within-sd", spec.within_sd, False, 3.0),
                                       ("--stall-p", spec.stall_p, False, 1.0)):
        if value is None:
            continue
        if not ((value > 0 if low_open else value >= 0) and value <= top):
            raise BadInput(f"{name} must be in {'(' if low_open else '['}0, {top:g}], got {value}", where=name)


def prepare_gate_bench(spec: GateBenchSpec | SimulatedGateBenchSpec, options: RunOptions, reporter: Reporter
                       ) -> PreparedGateBench | PreparedSimulation:
    """Every bad-input check before a run directory exists: the design, and (on real runs) both
    sides' idle runs prepared (models resolved, the engine found)."""
    root = paths.results_dir(options.results)
    if isinstance(spec, SimulatedGateBenchSpec):
        _check_simulation(spec)
        base = RunModel(0.0, reps=spec.reps)
        model = RunModel(0.0, reps=spec.reps, within_sd=base.within_sd if spec.within_sd is None else spec.within_sd,
                         stall_p=base.stall_p if spec.stall_p is None else spec.stall_p)
        return PreparedSimulation(spec, model, root)
    if spec.trials < 1 or spec.runs_per_side < 1:
        raise BadInput("--trials and --runs-per-side must be >= 1", where=f"{spec.trials} / {spec.runs_per_side}")
    spec_b = copy.deepcopy(spec.idle)
    spec_b.models = [spec.slow_model]
    spec_b.validate()
    prep_a = prepare_idle(spec.idle, llama_server=options.llama_server, results=options.results, reporter=reporter)
    prep_b = prepare_idle(spec_b, llama_server=options.llama_server, results=options.results, reporter=reporter)
    return PreparedGateBench(spec, {"A": prep_a, "A2": prep_a, "B": prep_b}, root)


def with_printer(prepared: PreparedGateBench | PreparedSimulation, on_decision: Callable[[dict], None]
                 ) -> PreparedGateBench | PreparedSimulation:
    """The prepared bench with ``on_decision(row)`` called after each decision is journaled."""
    return replace(prepared, on_decision=on_decision) if isinstance(prepared, PreparedGateBench) else prepared


def execute_gate_bench(prepared: PreparedGateBench | PreparedSimulation, reporter: Reporter, *,
                       execute: Execute | None = None, judge: Judge | None = None) -> Run:
    """One ``gate-bench`` run (module doc); returns the finished run (its ``analysis.json``:
    harness.analysis.gate_bench.summarize_run).  ``execute``/``judge``: injected by tests."""
    if isinstance(prepared, PreparedSimulation):
        return _simulate(prepared, reporter)
    spec = prepared.spec
    mode = "gate jobs" if spec.job is not None else "measured"
    with RunSession(prepared.results_root, KIND, {"gate_bench": {"mode": mode, **spec.design}},
                    reporter) as session:
        def keep(row: dict) -> None:  # journaled at once, then printed
            session.writer.append(row, table="decisions")
            if prepared.on_decision is not None:
                prepared.on_decision(row)

        if spec.job is not None:
            jobs = run_job_trials(prepared, spec.job, bench_id=session.run_id, reporter=reporter, on_decision=keep,
                                  execute=execute)
            session.update(gate_bench={**session.writer.manifest["gate_bench"],
                                       "slowdown_size": pooled_job_size([j for c, j in jobs if c == "slowed"]),
                                       "job_run_ids": {c: [j.run.run_id for cc, j in jobs if cc == c]
                                                       for c in ("A/A", "slowed")}})
        else:
            label = prepared.preps["A"].models[0].label
            done = run_gate_bench(prepared.preps, spec.cfg, bench_id=session.run_id, trials=spec.trials,
                                  runs_per_side=spec.runs_per_side, model_label=label, reporter=reporter,
                                  on_decision=keep, gate_on=spec.gate_on, execute=execute, judge=judge)
            a_all = [r for t in done for r in t.runs["A"] + t.runs["A2"]]
            b_all = [Relabeled(r, label) for t in done for r in t.runs["B"]]
            campaign = idle_campaign(reporter, execute=execute,
                                     judge=functools.partial(judge or judge_runs, gate_on=spec.gate_on))
            size_verdicts, _, size_outcome = campaign.look(a_all, b_all, spec.cfg)
            session.update(gate_bench={**session.writer.manifest["gate_bench"],
                                       "gate_outcome_of_pooled_size": size_outcome.status,
                                       "slowdown_size": slowdown_size(size_verdicts),
                                       "run_ids": {side: [r.run_id for t in done for r in t.runs[side]] for side in SIDES}})
    assert session.run is not None
    return session.run


def job_decision_row(number: int, condition: str, job: GateJob, wall_s: float) -> dict:
    """One gate job as a ``decisions`` row (its status is the job's: pass, fail, inconclusive, unproven)."""
    final = job.result.final
    gating = [c for c in (final.contrasts if final else []) if c.name == "B vs A"]
    worst = max(gating, key=lambda c: c.ratio_lo, default=None)
    runs = job.result.runs
    return {"trial": number, "condition": condition, "gate_status": job.status, "gating_groups": len(gating),
            "groups_slower": sum(c.verdict == "slower" for c in gating),
            "groups_inconclusive": sum(c.verdict == "inconclusive" for c in gating),
            "worst_group": worst.group if worst else "", "worst_ratio": worst.ratio if worst else float("nan"),
            "worst_ratio_ci_low": worst.ratio_lo if worst else float("nan"),
            "worst_ratio_ci_high": worst.ratio_hi if worst else float("nan"),
            "runs_per_side": len(job.result.orders), "a_run_ids": " ".join(r.run_id for r in runs.get("a", [])),
            "b_run_ids": " ".join(r.run_id for r in runs.get("b", [])), "trial_wall_s": round(wall_s, 1),
            "job_run_id": job.run.run_id}


def run_job_trials(prepared: PreparedGateBench, cfg: RoundsConfig, *, bench_id: str, reporter: Reporter,
                   on_decision: Callable[[dict], None], execute: Execute | None = None) -> list[tuple[str, GateJob]]:
    """Per trial, two whole gate jobs (``lbench ab``'s own code path): A/A (b is a third copy of A: any
    verdict but pass is noise) and slowed (b runs the deeper model), alternating which goes first. Trial
    n's jobs draw their round orders from seed ``cfg.seed + n``, so no two trials share an order."""
    spec = prepared.spec
    pauses = tuple(sorted(set(spec.idle.pauses_s)))
    done: list[tuple[str, GateJob]] = []
    for number in range(1, spec.trials + 1):
        conditions = (("A/A", "A2"), ("slowed", "B"))
        for condition, side in conditions if number % 2 else conditions[::-1]:
            reporter.message(f"trial {number}/{spec.trials}: {condition} gate job")
            preps = {"a": prepared.preps["A"], "aa": prepared.preps["A"], "b": prepared.preps[side]}
            design = {"gate_bench": bench_id, "trial": number, "condition": condition}
            trial_cfg = replace(cfg, seed=cfg.seed + number)
            job_prep = PreparedGateJob(GateJobSpec(spec.idle, prepared.preps[side].spec, trial_cfg, design=design), preps,
                                       pauses, prepared.results_root)
            start = time.monotonic()
            job = execute_gate_job(job_prep, reporter, execute=execute)
            done.append((condition, job))
            on_decision(job_decision_row(number, condition, job, time.monotonic() - start))
    return done


def pooled_job_size(jobs: list[GateJob]) -> list[dict]:
    """The slowed condition's true size per group: the mean of the jobs' final B-vs-A log contrasts with a
    t interval across jobs (each job an independent estimate)."""
    by: dict[str, list[float]] = {}
    rounds: dict[str, int] = {}
    for job in jobs:
        final = job.result.final
        for c in final.contrasts if final else []:
            if c.name == "B vs A" and c.ratio > 0:
                by.setdefault(c.group, []).append(math.log(c.ratio))
                rounds[c.group] = rounds.get(c.group, 0) + len(job.result.orders)
    out = []
    for group, logs in by.items():
        n = len(logs)
        mean = sum(logs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1)) if n > 1 else float("nan")
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 else float("nan")
        out.append({"group": group, "ratio": math.exp(mean), "ratio_ci_low": math.exp(mean - half),
                    "ratio_ci_high": math.exp(mean + half), "runs_a": rounds[group], "runs_b": rounds[group]})
    return out


def _simulate(prepared: PreparedSimulation, reporter: Reporter) -> Run:
    spec, model = prepared.spec, prepared.model
    table = ({f"given sd {v:g}": RunModel(v, reps=spec.reps, within_sd=model.within_sd, stall_p=model.stall_p)
              for v in spec.spreads} if spec.spreads else None)
    section = {"mode": "simulated", "trials": spec.trials, "seed": spec.seed, "margin": spec.cfg.threshold,
               "alpha": spec.cfg.alpha, "run_model": dict(model.__dict__),
               "within_given": spec.within_sd is not None and spec.stall_p is not None,
               "spreads_given": bool(spec.spreads),
               "ab": {"margin": spec.job.margin, "alpha": spec.job.alpha, "budget_s": spec.job.budget_s,
                      "arms": list(spec.job.arms), "round_s": spec.round_s, "woken_sd": spec.woken_sd,
                      "margins": {g: spec.job.margin_of(g) for g in ("pause 0 s", "pause 1 s")}}}
    with RunSession(prepared.results_root, KIND, {"gate_bench": section}, reporter) as session:
        def keep(campaign: str) -> Callable[[dict], None]:
            def one(row: dict) -> None:  # each cell's figures journaled as the cell ends
                for figure in simulated_rows(row, campaign):
                    session.writer.append(figure, table="simulated")
            return one

        simulate_gate(spec.cfg, trials=spec.trials, seed=spec.seed, spreads=table, reps=spec.reps,
                      on_row=keep("gate"))
        woken = run_model(spec.woken_sd, spec.reps).run_sd if spec.woken_sd is not None else None
        noises = ({name + (f" + woken sd {spec.woken_sd:g}" if woken is not None else ""):
                   RoundsNoise(run_model(v, spec.reps).run_sd, round_s=spec.round_s, woken_sd=woken)
                   for name, v in table.items()} if table else None)
        simulate_rounds(spec.job, trials=max(spec.trials // 4, 10), seed=spec.seed, noises=noises, on_row=keep("ab"))
    assert session.run is not None
    return session.run
