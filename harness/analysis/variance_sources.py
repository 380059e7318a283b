"""Where a design's between-run spread comes from (issue 22, item 5): the gate's unit is the run,
so what limits it is the sd of the per-run log median, and this module measures that sd per design
and per factor that can be varied after the fact, on the runs' own samples:

- ``design``: the knobs a run was measured with (threads, CPU placement, OMP wait policy,
  warm-up length, seeds, model): one folder of runs per design, compared as measured;
- ``metric``: the same runs gated on the client's ``latency_ms`` or on the server's own timings
  (``server_ms``, ``server_prompt_ms``);
- ``reps``: the same runs cut to their first k repetitions (fewer samples per run);
- ``process``: fresh process vs the same process: each run's repetitions split into two halves;
  the spread between the halves of one server process (pooled over runs) against the spread of
  the first half between fresh server starts, both at the same number of samples.

Every sd comes with its 95% chi-square interval (normal per-run levels assumed; with 6 runs the
interval spans about 0.6x-2.5x the estimate, so only large differences between designs show).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.gate_plan import sd_interval

METRICS = ("latency_ms", "server_ms", "server_prompt_ms")


@dataclass(frozen=True)
class Spread:
    design: str
    factor: str  # what varies: design | metric | reps | process
    variant: str  # e.g. "latency_ms", "reps 1-4", "between fresh starts"
    pause_s: float
    runs: int
    sd: float  # sd of the per-run log median
    ci: tuple[float, float]
    median_ms: float  # median over runs of the per-run median (for scale)

    def row(self) -> dict:
        return {"design": self.design, "factor": self.factor, "variant": self.variant, "pause_s": self.pause_s,
                "runs": self.runs, "sd_log": self.sd, "sd_ci_low": self.ci[0], "sd_ci_high": self.ci[1],
                "median_ms": self.median_ms}


def measured(samples: pd.DataFrame) -> pd.DataFrame:
    """The analysed rows: phase 'measure', a response that arrived."""
    ok = samples["phase"].eq("measure")
    if "error" in samples:
        ok &= samples["error"].isna()
    return samples[ok]


def run_level(samples: pd.DataFrame, pause_s: float, metric: str = "latency_ms",
              reps: tuple[int, int] | None = None) -> float:
    """log of the run's median ``metric`` at ``pause_s`` (nan when nothing is left), over the
    repetitions ``reps`` = (first, last), 1-based and inclusive, when given."""
    rows = measured(samples)
    rows = rows[np.isclose(rows["pause_requested_s"].astype(float), pause_s)]
    if reps is not None:
        rank = rows["rep"].rank(method="dense")  # reps numbered 1.. whatever the run's base
        rows = rows[(rank >= reps[0]) & (rank <= reps[1])]
    values = rows[metric].dropna().astype(float).to_numpy() if metric in rows else np.array([])
    values = values[values > 0]
    return float(np.log(np.median(values))) if values.size else math.nan


def reps_at(samples: pd.DataFrame, pause_s: float) -> int:
    rows = measured(samples)
    return int(rows.loc[np.isclose(rows["pause_requested_s"].astype(float), pause_s), "rep"].nunique())


def spread(design: str, factor: str, variant: str, pause_s: float, levels: Iterable[float]) -> Spread:
    levels = np.asarray([x for x in levels if math.isfinite(x)], dtype=float)
    n = int(levels.size)
    sd = float(np.std(levels, ddof=1)) if n >= 2 else math.nan
    return Spread(design, factor, variant, pause_s, n, sd, sd_interval(sd, n),
                  float(np.exp(np.median(levels))) if n else math.nan)


def paired_halves_sd(first: npt.ArrayLike, second: npt.ArrayLike) -> tuple[float, tuple[float, float], int]:
    """The within-process spread of a half-run's level: sd = sqrt(mean(d^2) / 2) over the runs'
    differences d between their two halves (each half one draw around the run's own level), with
    its chi-square interval on n df (the halves' levels' shared mean per run is not estimated)."""
    d = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    d = d[np.isfinite(d)]
    n = int(d.size)
    if n < 1:
        return math.nan, (math.nan, math.nan), 0
    sd = float(math.sqrt(np.mean(d ** 2) / 2))
    lo, hi = sd_interval(sd, n + 1)  # sd_interval takes the sample size; n differences give n df
    return sd, (lo, hi), n


def design_spreads(design: str, runs: list[pd.DataFrame], pauses: list[float]) -> list[Spread]:
    """Every factor's spreads for one design's runs (a list of their samples tables)."""
    out: list[Spread] = []
    for pause in pauses:
        for metric in METRICS:
            out.append(spread(design, "metric", metric, pause, [run_level(s, pause, metric) for s in runs]))
        reps = [reps_at(s, pause) for s in runs]
        full = min(reps) if reps else 0
        for k in sorted({max(full // 4, 1), max(full // 2, 1), full} - {0}):
            out.append(spread(design, "reps", f"reps 1-{k}", pause,
                              [run_level(s, pause, reps=(1, k)) for s in runs]))
        if full >= 2:
            half = full // 2
            first = [run_level(s, pause, reps=(1, half)) for s in runs]
            second = [run_level(s, pause, reps=(half + 1, 2 * half)) for s in runs]
            out.append(spread(design, "process", f"between fresh starts (reps 1-{half})", pause, first))
            sd, ci, n = paired_halves_sd(first, second)
            med = float(np.exp(np.nanmedian(first))) if any(map(math.isfinite, first)) else math.nan
            out.append(Spread(design, "process", f"within one process (reps 1-{half} vs {half + 1}-{2 * half})",
                              pause, n, sd, ci, med))
    return out


@dataclass(frozen=True)
class WithinRun:
    """The within-run components the simulation needs (harness/analysis/gate_sim.RunModel): the
    robust log sd of a run's samples around its own median (1.4826 x MAD, the median over runs)
    and the fraction of samples that stall, above ``stall_factor`` x their run's median."""
    design: str
    pause_s: float
    runs: int
    within_sd: float
    stall_p: float
    stall_factor: float = 1.5


def within_run(design: str, runs: list[pd.DataFrame], pause_s: float, metric: str = "latency_ms",
               stall_factor: float = 1.5) -> WithinRun:
    sds, stalls, total = [], 0, 0
    for s in runs:
        rows = measured(s)
        x = rows.loc[np.isclose(rows["pause_requested_s"].astype(float), pause_s), metric].dropna()
        x = x[x > 0].astype(float).to_numpy()
        if x.size < 2:
            continue
        logs = np.log(x) - np.log(np.median(x))
        sds.append(1.4826 * float(np.median(np.abs(logs))))
        stalls += int(np.sum(x > stall_factor * np.median(x)))
        total += int(x.size)
    return WithinRun(design, pause_s, len(sds), float(np.median(sds)) if sds else math.nan,
                     stalls / total if total else math.nan, stall_factor)


def table(designs: dict[str, list[pd.DataFrame]], pauses: list[float]) -> pd.DataFrame:
    rows = [s.row() for name, runs in designs.items() for s in design_spreads(name, runs, pauses)]
    return pd.DataFrame(rows)
