"""HTML section for ``lbench compare --html``: the table and paired plots per group."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.analysis.compare import SWAP_FAMILY, GroupResult, compare_family, pooled
from harness.analysis.regimes import classify, fit_all
from harness.analysis.stats import measured
from harness.analysis.swap import warm_mask
from harness.report.html import data_uri, write_page
from harness.report.plots import figure_png, plt
from harness.report.redact import Redactor, redact_html
from harness.store import Run


def paired_png(a_runs: list[Run], b_runs: list[Run], results: list[GroupResult]) -> bytes:
    groups = [r for r in results if r.metric == "latency_ms"]
    idle_like = compare_family(a_runs) != SWAP_FAMILY
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(2.6 * max(len(groups), 1) + 1, 3.4), squeeze=False)
    if idle_like:
        a, b = measured(pooled(a_runs, "samples")), measured(pooled(b_runs, "samples"))
        thresholds = {k: f.threshold_s for k, f in fit_all(a, n_boot=200).items()}
        a, b = a.assign(regime=classify(a, thresholds)), b.assign(regime=classify(b, thresholds))
    else:
        a, b = pooled(a_runs, "requests"), pooled(b_runs, "requests")
        for f in (a, b):
            f["regime"] = np.where(warm_mask(f), "warm", "cold")
            f["setting"] = "router"
            f["model"] = groups[0].model if groups else ""
    rng = np.random.default_rng(0)
    for ax, g in zip(axes[0], groups):
        for i, (frame, colour) in enumerate(((a, "#3a7dc9"), (b, "#c94a3a"))):
            sel = frame[(frame["regime"] == g.regime) & (frame["setting"] == g.setting)]
            if idle_like:
                sel = sel[sel["model"] == g.model]
            x = sel["latency_ms"].dropna().to_numpy(dtype=float)
            ax.scatter(i + rng.uniform(-0.15, 0.15, x.size), x, s=8, alpha=0.5, color=colour, linewidths=0)
            if x.size:
                ax.hlines(np.median(x), i - 0.3, i + 0.3, color="k", lw=2)
        ax.set_xticks([0, 1], ["A", "B"])
        ax.set_title(f"{g.model}\n{g.setting} · {g.regime}\n{g.ratio:.3f}x · {g.verdict}", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("latency (ms)")
    fig.text(0.99, 0.005, f"A {', '.join(r.run_id for r in a_runs)} · B {', '.join(r.run_id for r in b_runs)}",
             ha="right", va="bottom", fontsize=6, color="0.4")
    return figure_png(fig)


def write_compare_html(a_runs: list[Run], b_runs: list[Run], results: list[GroupResult], out: Path, *,
                       redact: bool = True) -> Path:
    """The compare page; home paths, user and host names redacted as in evidence and gate output
    (it is made to be shared), unless ``redact`` is False."""
    red = Redactor(redact, runs=[*a_runs, *b_runs], xml=True)
    return write_page("compare.html.j2", dict(
        run_id=f"{a_runs[0].run_id} vs {b_runs[0].run_id}", a=[r.run_id for r in a_runs],
        b=[r.run_id for r in b_runs],
        results=[{**r.as_dict(), "hl_shift": r.hl_shift, "p_value": r.p_value} for r in results],  # properties
        plot=data_uri(paired_png(a_runs, b_runs, results)), run=b_runs[0].manifest,
        host=b_runs[0].manifest.get("host", {}), engine=b_runs[0].manifest.get("engine", {})), out,
        post=lambda html: redact_html(red, html))
