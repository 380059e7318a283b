"""How often does the gate cry wolf, and how often does it catch a real slowdown?

From one real idle run's measured samples (the empirical distribution per
model / setting / pause), draw pseudo-runs of ``n`` samples per pause for each
side: A/A (both from the same data: any failure is a false alarm) and A vs a
copy slowed by +10% / +25% (a failure is a detection).  The full gate (regime
fit on the baseline, bootstrap ratio interval, Mann-Whitney) runs on each pair.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.compare import compare_idle_frames
from harness.analysis.gate import GateConfig, decide

SLOWED = ("latency_ms", "server_prompt_ms")


def _draw(groups: list[pd.DataFrame], n: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.concat([g.iloc[rng.integers(0, len(g), n)] for g in groups], ignore_index=True)


def simulate(samples: pd.DataFrame, *, ns: list[int], trials: int, slowdowns: list[float], cfg: GateConfig,
             seed: int = 0, on_trial=lambda: None) -> pd.DataFrame:
    groups = [g for _, g in samples.groupby(["model", "setting", "pause_requested_s"])]
    rng = np.random.default_rng(seed)
    rows = []
    for n in ns:
        for condition in [0.0, *slowdowns]:
            fails = refusals = 0
            for _ in range(trials):
                a = _draw(groups, n, rng)
                b = _draw(groups, n, rng)
                if condition:
                    b = b.assign(**{c: b[c] * (1 + condition) for c in SLOWED if c in b})
                results, _ = compare_idle_frames(a, b, alpha=cfg.alpha, min_n=cfg.min_n, n_boot=400, fit_boot=100)
                outcome = decide(results, cfg)
                fails += outcome.status == "fail"
                refusals += outcome.status == "refuse"
                on_trial()
            rows.append({"n_per_pause": n, "condition": "A/A" if not condition else f"+{condition:.0%}",
                         "trials": trials, "gate_failed": fails, "refused": refusals,
                         "rate": fails / trials})
    return pd.DataFrame(rows)


def recommend(table: pd.DataFrame, *, max_false_alarm: float = 0.05, min_detection: float = 0.8,
              detect: str = "+25%") -> int | None:
    for n in sorted(table["n_per_pause"].unique()):
        sub = table[table["n_per_pause"] == n].set_index("condition")
        t = sub["rate"]
        if (t.get("A/A", 1) <= max_false_alarm and t.get(detect, 0) >= min_detection
                and int(sub["refused"].sum()) == 0):  # a gate that refuses is no gate
            return int(n)
    return None
