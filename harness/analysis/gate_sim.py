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
from dataclasses import dataclass, replace

import numpy as np
from harness.analysis.verdicts import decide_groups, GroupData, RunSamples
from harness.analysis.gate import decide, verdict_config
from harness.analysis.campaign import Campaign, interleaved_rounds
from harness.analysis.intervals import clopper_pearson
from harness.analysis.gate_config import GateConfig, RoundsConfig
from harness.analysis.rounds import order_of_round

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


# ---- lbench ab: the gate job's rounds (harness/analysis/rounds.py) on simulated runs --------------

@dataclass(frozen=True)
class RoundsNoise:
    """What moves a run's log level in the gate job: ``run_sd``, the sd of a run's own level (a fresh
    server's start and its samples' median: the residual of the rounds' fit), ``woken_sd``, when set, the
    same for a second gated group (a woken pause, ``pause 1 s``, decided in the same job with its own margin;
    the true ratio applies to both groups), ``round_sd``, what a
    round shares (the machine's state then: removed by the fit's round effect), ``position``, the
    extra log level of the 2nd, 3rd, ... run of a round (removed by the position effect), and
    ``round_s``, the wall time of one round (the budget's clock)."""

    run_sd: float
    round_sd: float = 0.0
    position: tuple[float, ...] = ()
    round_s: float = 30.0
    woken_sd: float | None = None


def rounds_trials(noise: RoundsNoise, ratio: float, cfg: RoundsConfig, trials: int, rng: np.random.Generator
                  ) -> list[tuple[str, int]]:
    """Outcomes and rounds of ``trials`` simulated gate jobs: lbench's own ``interleaved_rounds`` and
    ``judge_look`` on runs whose level is drawn from ``noise`` (B's shifted by ``log(ratio)``); the clock
    advances by ``round_s / arms`` per run, so ``cfg.budget_s`` bounds the rounds as it would."""
    clock = [0.0]
    per_run = noise.round_s / len(cfg.arms)
    state: dict[str, float] = {}

    def execute(arm: str, reporter: object, extra_manifest: dict | None = None) -> dict[str, float]:
        assert extra_manifest is not None
        rnd, pos = extra_manifest["round"], extra_manifest["position"]
        if state.get("round") != rnd:
            state.update(round=rnd, shared=float(rng.normal(0.0, noise.round_sd)) if noise.round_sd else 0.0)
        clock[0] += per_run
        shift = (math.log(ratio) if arm == "b" else 0.0) + (noise.position[pos - 1] if pos <= len(noise.position) else 0.0)
        levels = {"pause 0 s": state["shared"] + shift + float(rng.normal(0.0, noise.run_sd))}  # the warm margin
        if noise.woken_sd is not None:
            levels["pause 1 s"] = state["shared"] + shift + float(rng.normal(0.0, noise.woken_sd))  # the woken one
        return levels

    class Quiet:
        def message(self, text: str) -> None:
            pass
    def where(c: RoundsConfig) -> Callable[[int, str], dict]:
        def manifest(rnd: int, arm: str) -> dict:
            return {"round": rnd, "position": order_of_round(c.arms, rnd, c.seed).index(arm) + 1}
        return manifest

    out = []
    for t in range(trials):
        c = replace(cfg, seed=cfg.seed + t)
        res = interleaved_rounds(Campaign(execute, Quiet()), {a: a for a in cfg.arms}, c, clock=lambda: clock[0],
                                 levels_of=lambda levels: levels, manifest=where(c))
        out.append((res.status, len(res.orders)))
    return out


ROUNDS_RATIOS = {"A/A (ratio 1)": 1.0, "+3%": 1.03, "+5%": 1.05, "+10%": 1.10}


def simulate_rounds(cfg: RoundsConfig, *, trials: int = 200, seed: int = 0,
                    noises: Mapping[str, RoundsNoise] | None = None, ratios: Mapping[str, float] = ROUNDS_RATIOS,
                    on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per noise: for each true ratio, how often the gate job fails, passes, ends unproven or
    inconclusive, its mean rounds and minutes (rates with exact intervals)."""
    rng = np.random.default_rng(seed + 1)
    rows = []
    for name, noise in (noises or ROUNDS_NOISES).items():
        planned = cfg.max_rounds if cfg.budget_s is None else max(1, min(cfg.max_rounds, int(cfg.budget_s // noise.round_s)))
        row = {"spread": name, "run_sd": noise.run_sd, "spending": cfg.spending, "min_rounds": cfg.min_rounds,
               "max_rounds": planned, "trials": trials}
        for label, ratio in ratios.items():
            res = rounds_trials(noise, ratio, cfg, trials, rng)
            st = [s for s, _ in res]
            for status in ("fail", "pass", "unproven", "inconclusive"):
                row[f"{status} {label}"] = _rate(st.count(status), trials)
            row[f"mean rounds {label}"] = float(np.mean([n for _, n in res]))
            row[f"mean minutes {label}"] = float(np.mean([n for _, n in res])) * noise.round_s / 60
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


# the gate job's noise on this 2-core VM, the residual sd of the rounds' fit in real gate jobs
# (docs/statistics.md, "The gate job", names the runs)
ROUNDS_NOISES = {"warm, 1B Q8 (pause 0)": RoundsNoise(0.013, 0.0, (), 25.0),
                 "woken, 1B Q8 (pause 1 s)": RoundsNoise(0.05, 0.0, (), 25.0)}


def design_label(row: dict) -> str:
    return f"{row['runs_per_side']}" + (f"+h{row['history_runs']}" if row.get("history_runs") else "")
