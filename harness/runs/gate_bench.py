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

Runs and decisions come from the gate's campaign core (``harness.runs.campaign.idle_campaign``);
``execute(prep, reporter, extra_manifest)`` and ``judge(a_runs, b_runs, cfg, gate_on=...)`` are
injectable for tests.  Every decision is handed to ``on_decision`` as soon as it is made, so an interrupted
benchmark keeps the trials it finished.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.compare import judge_runs
from harness.analysis.gate_bench import error_rates, sentences, slowdown_size
from harness.atomic import atomic_write_text
from harness.runs.campaign import idle_campaign
from harness.store import benchmark_dir, new_run_id

if TYPE_CHECKING:
    from harness.analysis.campaign import Execute, Judge
    from harness.analysis.gate import GateOutcome
    from harness.analysis.gate_config import GateConfig, GateOn
    from harness.analysis.verdicts import Verdict
    from harness.runs.idle import PreparedIdle, Reporter
    from harness.store import Run

SIDES = ("A", "A2", "B")
ORDERS = (("A", "A2", "B"), ("B", "A", "A2"), ("A2", "B", "A"))  # rotated: each side in each position


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


def decision_row(bench_id: str, trial: Trial, condition: str, a_runs: list, b_runs: list, verdicts: Sequence[Verdict],
                 outcome: GateOutcome) -> dict:
    """One gate decision as a tidy row (decisions.csv)."""
    gating = [v for v in verdicts if v.primary]
    worst = max(gating, key=lambda v: v.ratio_ci[0], default=None)
    return {
        "bench_id": bench_id,
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
                   model_label: str, reporter: Reporter, on_decision: Callable[[dict], None], execute: Execute | None = None,
                   judge: Judge | None = None, gate_on: GateOn = None) -> list[Trial]:
    """Run ``trials`` trials of ``runs_per_side`` rotated rounds over the sides in ``preps``
    (keys A, A2, B) and hand every decision row to ``on_decision``.  ``gate_on``: which groups vote
    (harness.analysis.gate_config.parse_gate_on; the warm regime by default), as in ``lbench gate``."""
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
            on_decision(decision_row(bench_id, trial, condition, a, other, verdicts, outcome))
        done.append(trial)
    return done


@dataclass
class GateBench:
    """A finished gate benchmark: its id and folder (``<results>/benchmarks/<bench id>/``), the trials,
    the error rates per condition (rows of ``harness.analysis.gate_bench.error_rates``), the slowdown's
    pooled size and the findings; ``summary`` is what ``summary.json`` holds."""

    bench_id: str
    out_dir: Path
    trials: list[Trial]
    rates: list[dict]
    findings: list[str]
    summary: dict


def measure_gate_bench(preps: dict[str, PreparedIdle], cfg: GateConfig, design: dict, *, results_root: Path, trials: int,
                       runs_per_side: int, reporter: Reporter, on_decision: Callable[[dict], None] | None = None,
                       gate_on: GateOn = None, execute: Execute | None = None, judge: Judge | None = None) -> GateBench:
    """``lbench gate-bench`` on real runs: the trials (``run_gate_bench``; each run through its own
    ``RunSession`` into the store), ``decisions.csv`` rewritten whole after every decision (an
    interrupted benchmark keeps the trials it finished), then the rates, the slowdown's size measured
    from all runs pooled, and ``summary.json``.  ``design``: what the command was asked (kept in the
    summary); ``on_decision(row)``: called after each decision is on disk (the CLI prints it)."""
    bench_id = new_run_id("gate-bench")
    out_dir = benchmark_dir(results_root, bench_id)
    decisions: list[dict] = []

    def keep(row: dict) -> None:  # every finished decision is on disk at once
        decisions.append(row)
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / "decisions.csv", pd.DataFrame(decisions).to_csv(index=False))
        if on_decision is not None:
            on_decision(row)

    label = preps["A"].models[0].label
    done = run_gate_bench(preps, cfg, bench_id=bench_id, trials=trials, runs_per_side=runs_per_side,
                          model_label=label, reporter=reporter, on_decision=keep, gate_on=gate_on, execute=execute,
                          judge=judge)
    a_all = [r for t in done for r in t.runs["A"] + t.runs["A2"]]
    b_all = [Relabeled(r, label) for t in done for r in t.runs["B"]]
    judge = judge if judge is not None else judge_runs
    campaign = idle_campaign(reporter, execute=execute, judge=functools.partial(judge, gate_on=gate_on))
    size_verdicts, _, size_outcome = campaign.look(a_all, b_all, cfg)
    rates = error_rates(pd.DataFrame(decisions))
    size = slowdown_size(size_verdicts)
    findings = sentences(rates, size)
    summary = {"schema_version": 1, "bench_id": bench_id,
               "design": {**design, "gate_outcome_of_pooled_size": size_outcome.status},
               "rates": rates.to_dict("records"), "slowdown_size": size, "findings": findings,
               "run_ids": {side: [r.run_id for t in done for r in t.runs[side]] for side in SIDES}}
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    return GateBench(bench_id, out_dir, done, rates.to_dict("records"), findings, summary)
