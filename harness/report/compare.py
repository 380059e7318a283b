"""HTML section for ``lbench compare --html``: the table and paired plots per group."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from harness.analysis.compare import SWAP_FAMILY, compare_family, pooled
from harness.analysis.regimes import classify, fit_all
from harness.analysis.stats import measured
from harness.analysis.swap import warm_mask
from harness.analysis.verdicts import Verdict, summary_counts
from harness.report.html import data_uri, write_page
from harness.report.plots import figure_png, plt
from harness.store import Run


def group_mask(frame, regime: str):
    """The rows of a compare group, from its label (harness.analysis.compare): a regime, ``pause=Xs``,
    or ``new step pauses>=Xs[,<Ys]``."""
    pauses = frame["pause_requested_s"] if "pause_requested_s" in frame else None
    if pauses is not None and (m := re.fullmatch(r"pause=([\d.e+-]+)s", regime)):
        return np.isclose(pauses, float(m.group(1)))
    if pauses is not None and (m := re.fullmatch(r"new step pauses>=([\d.e+-]+)s(?:,<([\d.e+-]+)s)?", regime)):
        return (pauses >= float(m.group(1))) & (pauses < float(m.group(2)) if m.group(2) else True)
    return frame["regime"] == regime


def paired_png(a_runs: list[Run], b_runs: list[Run], results: list[Verdict]) -> bytes:
    groups = [r for r in results if r.metric == "latency_ms"]
    idle_like = compare_family(a_runs) != SWAP_FAMILY
    ncols = min(max(len(groups), 1), 4)  # at most 4 panels a row: each stays readable at the page's width
    nrows = -(-max(len(groups), 1) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols + 1, 3.2 * nrows), squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
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
    for ax, g in zip(axes.flat, groups):
        for i, (frame, colour) in enumerate(((a, "#3a7dc9"), (b, "#c94a3a"))):
            sel = frame[group_mask(frame, g.regime) & (frame["setting"] == g.setting)]
            if idle_like:
                sel = sel[sel["model"] == g.model]
            x = sel["latency_ms"].dropna().to_numpy(dtype=float)
            ax.scatter(i + rng.uniform(-0.15, 0.15, x.size), x, s=8, alpha=0.5, color=colour, linewidths=0)
            if x.size:
                ax.hlines(np.median(x), i - 0.3, i + 0.3, color="k", lw=2)
        ax.set_xticks([0, 1], ["A", "B"])
        ax.set_title(f"{g.model}\n{g.setting} · {g.regime}\n{g.ratio:.3f}x · {g.verdict}", fontsize=8)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("latency (ms)")
    fig.tight_layout(rect=(0, 0.03, 1, 1))  # rows of panels: titles clear the row above's ticks
    fig.text(0.99, 0.005, f"A {', '.join(r.run_id for r in a_runs)} · B {', '.join(r.run_id for r in b_runs)}",
             ha="right", va="bottom", fontsize=6, color="0.4")
    return figure_png(fig)


def compare_findings(results: list[Verdict]) -> list[str]:
    """The headline in sentences: verdicts counted, then one hyperfine-style line per primary group."""
    primary = [r for r in results if r.primary]
    counts = summary_counts(primary)
    lines = [f"{len(primary)} primary group{'s' if len(primary) != 1 else ''} compared: "
             + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) + "."]
    lines += [r.line() for r in primary if r.verdict != "refused"]
    if counts.get("refused"):
        lines.append(f"{counts['refused']} group(s) refused for too few samples; more --reps or runs per side "
                     "would give them a verdict.")
    return lines


def write_compare_html(a_runs: list[Run], b_runs: list[Run], results: list[Verdict], out: Path) -> Path:
    return write_page("compare.html.j2", dict(
        run_id=f"{a_runs[0].run_id} vs {b_runs[0].run_id}", a=[r.run_id for r in a_runs],
        b=[r.run_id for r in b_runs], findings=compare_findings(results),
        results=[{**r.as_dict(), "hl_shift": r.hl_shift, "p_value": r.p_value} for r in results],
        plot=data_uri(paired_png(a_runs, b_runs, results)), run=b_runs[0].manifest,
        host=b_runs[0].manifest.get("host", {}), engine=b_runs[0].manifest.get("engine", {})), out)
