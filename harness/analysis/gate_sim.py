"""The gate's error rates by simulation (``lbench gate-bench --simulate``), calling lbench's own
verdict functions (``decide_groups``, ``decide``, ``run_ab``) on simulated runs.

Calibration.  A run's samples are ``exp(level) * lognormal(0, within_sd) * (stall_factor with
probability stall_p)``; the run level is the group's log centre plus a between-run effect
N(0, sd_b^2).  ``sd_b`` is set so that the sd of the per-run log median (the spread the gate sees)
equals ``run_sd``, the figure measured in earlier sessions (SPREADS; docs/statistics.md names the
runs).  The within-run shape (sd 0.05, 10% stalls of 1.5x) is an assumption, stated as such.

One trial = one gate decision on fresh simulated runs: ``slower`` -> fail, the rest as the gate
maps them.  Figures per design (runs per side) and rule: the fail rate at a true ratio of 1 and at
the band edge 1+m (false alarms), at +10% and +20% (detection), the fraction inconclusive and
passed at 1, the coverage of the 95% interval, and how many true +10% slowdowns
``--inconclusive-ok`` would pass.  Rates carry exact (Clopper-Pearson) 95% intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from harness.analysis.verdicts import decide_groups, GroupData, RunSamples, Verdict, VerdictConfig
from harness.analysis.gate import decide, verdict_config
from harness.analysis.campaign import Campaign, sequential_ab
from harness.analysis.intervals import clopper_pearson
from harness.analysis.gate_config import GateConfig

# per-run log sd of the per-run median, measured in earlier sessions on this 2-core VM (issue 22,
# docs/statistics.md): gate-bench 20261201T054030Z-gate-bench-4371 (pause 0 and 1.5 s, default
# threads) and the pinned design --threads 1 --cpus 1 --client-cpus 0 under a competing process.
SPREADS = {"pinned (--threads 1 --cpus 1 --client-cpus 0)": 0.043, "pause 0, default threads": 0.095,
           "pause 1.5 s, default threads": 0.22}
RATIOS = {"A/A (ratio 1)": 1.0, "band edge (1+m)": None, "+10%": 1.10, "+20%": 1.20}
DESIGNS = (2, 3, 5, 10, 20, (1, 10), (3, 10))  # runs per side, or (runs per side, history runs of the baseline)


@dataclass
class RunModel:
    run_sd: float  # sd of the per-run log median (what is measured)
    reps: int = 5
    within_sd: float = 0.05
    stall_p: float = 0.10
    stall_factor: float = 1.5
    level: float = 100.0  # ms

    def within_median_var(self, rng: np.random.Generator, n: int = 20000) -> float:
        x = self._within(rng, (n, self.reps))
        return float(np.var(np.log(np.median(x, axis=1))))

    def _within(self, rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
        x = rng.lognormal(0.0, self.within_sd, shape)
        return x * np.where(rng.random(shape) < self.stall_p, self.stall_factor, 1.0)

    def between_sd(self, rng: np.random.Generator) -> float:
        return math.sqrt(max(self.run_sd ** 2 - self.within_median_var(rng), 0.0))

    def runs(self, rng: np.random.Generator, n_runs: int, ratio: float, sd_b: float) -> list[np.ndarray]:
        levels = self.level * ratio * np.exp(rng.normal(0.0, sd_b, n_runs))
        return [lv * self._within(rng, self.reps) for lv in levels]


def _group(a: Sequence[RunSamples], b: Sequence[RunSamples], history: Sequence[RunSamples] = ()) -> list[GroupData]:
    return [GroupData("sim", "s", "warm", "latency_ms", a, b, history_runs=list(history))]


def gate_trials(model: RunModel, n_runs: int, ratio: float, cfg: GateConfig, trials: int, rng: np.random.Generator, *,
                history_runs: int = 0) -> tuple[list[str], float]:
    """Statuses and interval coverage of ``trials`` gate decisions (lbench's decide_groups + decide)."""

    vcfg = verdict_config(cfg)
    sd_b = model.between_sd(rng)
    statuses, covered = [], 0
    for _ in range(trials):
        a, b = model.runs(rng, n_runs, 1.0, sd_b), model.runs(rng, n_runs, ratio, sd_b)
        hist = model.runs(rng, history_runs, 1.0, sd_b) if history_runs else ()
        (v,) = decide_groups(_group(a, b, hist), vcfg)
        statuses.append(decide([v], cfg).status)
        lo, hi = v.ratio_ci
        covered += bool(lo <= ratio <= hi)
    return statuses, covered / trials


def ab_trials(model: RunModel, ratio: float, cfg: GateConfig, trials: int, rng: np.random.Generator, *,
              min_rounds: int = 3, max_rounds: int = 10, spending: str = "obf") -> list[tuple[str, int]]:
    """Outcomes and rounds of ``trials`` simulated ``lbench ab`` sessions (the rounds of lbench's
    ``ab``, ``harness.analysis.campaign.sequential_ab``, with simulated runs)."""

    sd_b = model.between_sd(rng)

    def execute(side: str, reporter: object) -> np.ndarray:
        return model.runs(rng, 1, ratio if side == "B" else 1.0, sd_b)[0]

    def judge(a_runs: Sequence[RunSamples], b_runs: Sequence[RunSamples], vcfg: VerdictConfig
              ) -> tuple[list[Verdict], dict]:
        return decide_groups(_group(a_runs, b_runs), vcfg), {}

    class Quiet:
        def message(self, text: str) -> None:
            pass
    out = []
    for _ in range(trials):
        res = sequential_ab(Campaign(execute, Quiet(), judge), "A", "B", cfg, min_rounds=min_rounds,
                            max_rounds=max_rounds, spending=spending)
        assert res.outcome is not None  # max_rounds >= min_rounds: at least one look
        out.append((res.outcome.status, len(res.a_runs)))
    return out


def _rate(k: int, n: int) -> dict:
    lo, hi = clopper_pearson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else math.nan, "ci": [lo, hi]}


def run_model(spread: float | RunModel, reps: int) -> RunModel:
    """A spread given as a number (sd of the per-run log median, the assumed within-run shape) or as
    a RunModel whose within-run components were measured (``--within-sd``, ``--stall-p``)."""
    return spread if isinstance(spread, RunModel) else RunModel(float(spread), reps=reps)


def simulate_gate(cfg: GateConfig, *, trials: int = 200, seed: int = 0, spreads: Mapping[str, float | RunModel] | None = None,
                  designs: Sequence[int | tuple[int, int]] = DESIGNS, rules: Sequence[str] = ("margin", "zero"),
                  reps: int = 5, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (spread, rule, runs per side): the figures named in the module doc; each row is
    also handed to ``on_row`` as soon as it is done (a gate-bench run journals it)."""
    import copy

    rng = np.random.default_rng(seed)
    rows = []
    for name, spread in (spreads or SPREADS).items():
        model = run_model(spread, reps)
        sd = model.run_sd
        for rule in rules:
            rcfg = copy.copy(cfg)
            rcfg.slower_rule = rule
            for design in designs:
                n, h = design if isinstance(design, tuple) else (design, 0)
                row = {"spread": name, "run_sd": sd, "rule": rule, "runs_per_side": n, "history_runs": h,
                       "trials": trials}
                for label, ratio in RATIOS.items():
                    r = 1 + cfg.threshold if ratio is None else ratio
                    st, cov = gate_trials(model, n, r, rcfg, trials, rng, history_runs=h)
                    row[f"fail {label}"] = _rate(st.count("fail"), trials)
                    row[f"coverage {label}"] = cov
                    if ratio == 1.0:
                        row["inconclusive at 1"] = _rate(st.count("inconclusive"), trials)
                        row["pass at 1"] = _rate(st.count("pass"), trials)
                    if ratio == 1.10:
                        row["passed with --inconclusive-ok at +10%"] = _rate(
                            st.count("pass") + st.count("inconclusive"), trials)
                rows.append(row)
                if on_row is not None:
                    on_row(row)
    return rows


AB_DESIGNS = ((3, 10, "obf"), (3, 10, "pocock"), (3, 20, "obf"))  # (min rounds, max rounds, spending)


def simulate_ab(cfg: GateConfig, *, trials: int = 200, seed: int = 0, spreads: Mapping[str, float | RunModel] | None = None,
                designs: Sequence[tuple[int, int, str]] = AB_DESIGNS, reps: int = 5,
                on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (spread, ab design), as ``simulate_gate``."""
    rng = np.random.default_rng(seed + 1)
    rows = []
    for name, spread in (spreads or SPREADS).items():
        model = run_model(spread, reps)
        sd = model.run_sd
        for min_rounds, max_rounds, spending in designs:
            row = {"spread": name, "run_sd": sd, "spending": spending, "min_rounds": min_rounds,
                   "max_rounds": max_rounds, "trials": trials}
            for label, ratio in RATIOS.items():
                r = 1 + cfg.threshold if ratio is None else ratio
                res = ab_trials(model, r, cfg, trials, rng, min_rounds=min_rounds, max_rounds=max_rounds,
                                spending=spending)
                st = [s for s, _ in res]
                row[f"fail {label}"] = _rate(st.count("fail"), trials)
                row[f"pass {label}"] = _rate(st.count("pass"), trials)
                row[f"mean rounds {label}"] = float(np.mean([n for _, n in res]))
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows


def design_label(row: dict) -> str:
    return f"{row['runs_per_side']}" + (f"+h{row['history_runs']}" if row.get("history_runs") else "")
