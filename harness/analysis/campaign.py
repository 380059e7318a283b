"""The gate's campaigns: runs measured by an injected executor, judged as ``lbench gate`` judges.

One core serves ``lbench ab`` (interleaved A/B rounds with a sequential stop), ``lbench
gate-bench`` (trials of rotated rounds, ``harness/runs/gate_bench.py``) and ``lbench bisect
--gate`` (a reference build, then runs of each build, ``harness/runs/bisect_gate.py``):

- ``Campaign.measure(prep)`` is one run, made by the injected ``execute(prep, reporter, ...)``:
  real idle runs through ``RunSession`` and the store (``harness.runs.campaign.idle_campaign``,
  the one place the default executor is chosen), or simulated runs (``harness/analysis/gate_sim.py``);
- ``Campaign.look(a_runs, b_runs, cfg)`` is one gate decision: the verdicts with the runs as units
  (``judge``: ``harness.analysis.compare.judge_runs`` unless injected) at the look's level, and the
  gate's outcome of them.

``interleaved_rounds`` (the ``ab`` gate job's rounds, harness/analysis/rounds.py) lives here because
the simulation of ``ab`` runs it with simulated runs; it measures nothing itself.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.compare import judge_runs
from harness.analysis.gate import GateConfig, GateOutcome, decide, verdict_config
from harness.analysis.gate_config import ARM_TITLES
from harness.analysis.rounds import Look, RoundsConfig, judge_look, look_level, order_of_round

Execute = Callable[..., Any]  # execute(prep, reporter[, extra_manifest=...]) -> a finished run
Judge = Callable[..., tuple[list, dict]]  # judge(a_runs, b_runs, verdict_config) -> (verdicts, info)


@dataclass
class Campaign:
    """Runs made by ``execute`` and decisions made by ``judge`` (see the module's docstring)."""

    execute: Execute
    reporter: Any  # message(text); executors of real runs also call model_progress, cell, advance
    judge: Judge = judge_runs

    def measure(self, prep: Any, *, reporter: Any = None, extra_manifest: dict | None = None) -> Any:
        reporter = self.reporter if reporter is None else reporter
        if extra_manifest is None:
            return self.execute(prep, reporter)
        return self.execute(prep, reporter, extra_manifest=extra_manifest)

    def look(self, a_runs: list, b_runs: list, cfg: GateConfig, *, alpha: float | None = None
             ) -> tuple[list, dict, GateOutcome]:
        """The verdicts of one look (at two-sided level ``alpha``, else ``cfg.alpha``), their info and the
        gate's outcome of them."""
        look_cfg = copy.copy(cfg)
        if alpha is not None:
            look_cfg.alpha = alpha
        verdicts, info = self.judge(a_runs, b_runs, verdict_config(look_cfg))
        return verdicts, info, decide(verdicts, look_cfg)


class SideReporter:
    """The run's reporter with each progress bar labelled by its side (A or B): both sides measure the
    same model and setting, so without it the two bars read the same."""

    def __init__(self, inner: Any, side: str):
        self.inner, self.side = inner, side

    def message(self, text: str) -> None:
        self.inner.message(text)

    def model_progress(self, done: int, total: int) -> None:
        self.inner.model_progress(done, total)

    def cell(self, label: str, total: int) -> None:
        self.inner.cell(f"{self.side}: {label}", total)

    def advance(self) -> None:
        self.inner.advance()




Levels = Callable[[Any], dict[str, float]]  # levels_of(run) -> {gated group: log level}


@dataclass
class RoundsResult:
    """What the gate job's rounds made: the runs of each arm in round order, one row per run (round,
    position, arm, its levels), the looks, the rounds the budget was planned for and the time spent."""

    runs: dict[str, list] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    orders: list[tuple[str, ...]] = field(default_factory=list)
    looks: list[Look] = field(default_factory=list)
    planned_rounds: int = 0
    elapsed_s: float = 0.0

    @property
    def final(self) -> Look | None:
        return self.looks[-1] if self.looks else None

    @property
    def status(self) -> str:
        look = self.final
        return "inconclusive" if look is None or look.status == "continue" else look.status

    def levels(self) -> dict[str, list[dict[str, float]]]:
        """Per gated group, per round, the arms' log levels (what ``judge_look`` reads)."""
        out: dict[str, list[dict[str, float]]] = {}
        for row in self.rows:
            for group, value in row["levels"].items():
                rounds = out.setdefault(group, [])
                while len(rounds) < row["round"]:
                    rounds.append({})
                rounds[row["round"] - 1][row["arm"]] = value
        return out


def interleaved_rounds(campaign: Campaign, preps: Mapping[str, Any], cfg: RoundsConfig, *, levels_of: Levels,
                       clock: Callable[[], float] = time.monotonic, manifest: Callable[[int, str], dict] | None = None,
                       on_run: Callable[[dict], None] | None = None, on_look: Callable[[Look], None] | None = None
                       ) -> RoundsResult:
    """Rounds of every arm in ``cfg.arms`` (``preps[arm]``: what ``campaign.measure`` runs), in the
    balanced random order of harness/analysis/rounds.py, until a look decides, ``cfg.max_rounds`` are
    run or the next round would end past ``cfg.budget_s`` (judged from the mean round so far).  The
    budget fixes the planned rounds after the first round (the information fraction of a look is
    rounds / planned; the final look spends what is left).  ``manifest(round, arm)``: what each run's
    manifest records of the job; ``on_run(row)``/``on_look(look)``: told as each is made."""
    cfg.check()
    res = RoundsResult(runs={arm: [] for arm in cfg.arms}, planned_rounds=cfg.max_rounds)
    reporter = campaign.reporter
    start = clock()
    fractions: list[float] = []
    for round_no in range(1, cfg.max_rounds + 1):
        t0 = clock()
        order = order_of_round(cfg.arms, round_no, cfg.seed)
        res.orders.append(order)
        for pos, arm in enumerate(order):
            reporter.message(f"round {round_no}: {ARM_TITLES[arm]} ({pos + 1} of {len(order)})")
            run = campaign.measure(preps[arm], reporter=SideReporter(reporter, ARM_TITLES[arm]),
                                   extra_manifest=manifest(round_no, arm) if manifest else None)
            res.runs[arm].append(run)
            row = {"round": round_no, "position": pos + 1, "arm": arm, "run": run, "levels": levels_of(run),
                   "wall_s": clock() - t0}
            res.rows.append(row)
            if on_run:
                on_run(row)
        now = clock()
        res.elapsed_s = now - start
        if round_no == 1 and cfg.budget_s is not None:
            res.planned_rounds = max(1, min(cfg.max_rounds, int(cfg.budget_s // max(now - t0, 1e-9))))
        mean_round = res.elapsed_s / round_no
        final = (round_no >= res.planned_rounds
                 or (cfg.budget_s is not None and res.elapsed_s + mean_round > cfg.budget_s))
        if round_no < cfg.min_rounds and not final:
            continue
        levels = res.levels()
        fractions.append(1.0 if final else round_no / res.planned_rounds)
        level = look_level(fractions, cfg.alpha / 2 / max(len(levels), 1), cfg.spending)
        look = judge_look(levels, res.orders, cfg, round_no=round_no, level_one_sided=level, final=final)
        res.looks.append(look)
        reporter.message(f"look after round {round_no}: {look.status} ({look.reason})")
        if on_look:
            on_look(look)
        if look.status != "continue" or final:
            break
    return res
