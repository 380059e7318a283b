"""``lbench compare --html``: the verdicts, what differs between A's and B's environment, and one
log-scale plot per metric (A and B side by side)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis.compare import SWAP_FAMILY, compare_family
from harness.analysis.stats import measured
from harness.analysis.swap import compare_classes, warm_mask
from harness.analysis.verdicts import Verdict, both_sides, detectable_words, factor, summary_counts
from harness.report.html import data_uri, write_page
from harness.report.plots import figure_png, plain, plt
from harness.report.redact import Redactor, redact_html
from harness.store import Run
from harness.analysis.verdict_labels import regime_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLOURS = {"A": "#3a7dc9", "B": "#c94a3a"}
# manifest sections whose differing keys the report lists (nested dicts are flattened a.b.c)
ENV_SECTIONS = ("host", "engine", "config", "client", "models")
# readings that differ between any two runs, not part of the environment (load is in the quality warnings)
SKIPPED_KEYS = ("started_at", "ended_at", "run_id", "load_avg_1m")


def _flat(value: object, prefix: str) -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value if isinstance(value, str) else json.dumps(value, default=str)}


def _environment_section(run: Run, section: str) -> Mapping[str, Any] | list[dict[str, Any]] | None:
    """One part of the environment a comparison shows (``ENV_SECTIONS``), from the run record."""
    r = run.record
    sections: dict[str, Mapping[str, Any] | list[dict[str, Any]]] = {
        "host": r.host.facts, "engine": r.engine.facts, "config": r.config, "models": [dict(m.facts) for m in r.models]}
    return sections.get(section) or r.sections.get(section)


def _side_values(runs: list[Run]) -> dict[str, str]:
    """key -> value for a side; keys whose value differs between the side's own runs show all values."""
    seen: dict[str, list[str]] = {}
    for r in runs:
        flat: dict[str, str] = {}
        for section in ENV_SECTIONS:
            value = _environment_section(r, section)
            if value:
                flat.update(_flat(dict(value) if hasattr(value, 'keys') else value, section))
        for k, v in flat.items():
            if v not in seen.setdefault(k, []):
                seen[k].append(v)
    return {k: " | ".join(v) for k, v in seen.items()}


def environment_differences(a_runs: list[Run], b_runs: list[Run]) -> list[dict]:
    """Only the keys whose value differs between A and B (missing on one side counts), sorted."""
    a, b = _side_values(a_runs), _side_values(b_runs)
    rows = []
    for key in sorted(set(a) | set(b)):
        if key.rsplit(".", 1)[-1] in SKIPPED_KEYS or a.get(key) == b.get(key):
            continue
        rows.append({"key": key, "a": a.get(key, "none"), "b": b.get(key, "none")})
    return rows


def _idle_frames(runs: list[Run]) -> pd.DataFrame:
    frames = [measured(r.table("samples")) for r in runs]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def metric_png(a_runs: list[Run], b_runs: list[Run], metric: str) -> bytes | None:
    fig = metric_figure(a_runs, b_runs, metric)
    return None if fig is None else figure_png(fig)


def metric_figure(a_runs: list[Run], b_runs: list[Run], metric: str) -> Figure | None:
    """Idle: per (model, setting) a panel of the metric against pause, A and B, log y axis.
    Swap: the two request groups the verdicts use (served resident / waited for a load, else warm / cold),
    A and B, log y axis.  None when neither side has the metric."""
    rng = np.random.default_rng(0)
    if compare_family(a_runs) == SWAP_FAMILY:
        sides = {}
        for side, runs in (("A", a_runs), ("B", b_runs)):
            frames = [r.table("requests") for r in runs]
            f = pd.concat([x for x in frames if not x.empty], ignore_index=True) if any(
                not x.empty for x in frames) else pd.DataFrame()
            sides[side] = f[f["error"].isna()] if not f.empty else f
        fig, ax = plt.subplots(figsize=(8, 3.6))
        names = {compare_classes(f)[1] for f in sides.values() if not f.empty}
        classes = next(iter(names)) if len(names) == 1 else ("warm", "cold")  # as the verdicts group them
        for i, _cls in enumerate(classes):
            for j, side in enumerate(("A", "B")):
                f = sides[side]
                if f.empty or metric not in f:
                    continue
                first = compare_classes(f)[0] if len(names) == 1 else warm_mask(f)
                x = f.loc[first == (i == 0), metric].dropna().to_numpy(dtype=float)
                x = x[x > 0]
                pos = i * 3 + j
                ax.scatter(pos + rng.uniform(-0.2, 0.2, x.size), x, s=8, alpha=0.5, color=COLOURS[side],
                           linewidths=0)
                if x.size:
                    ax.hlines(np.median(x), pos - 0.35, pos + 0.35, color="k", lw=2)
        ax.set_xticks([0, 1, 3, 4], [f"{c}\n{side}" for c in classes for side in ("A", "B")])
        ax.set_yscale("log")
        ax.set_ylabel(plain(metric) + " (log scale)")
        ax.grid(alpha=0.3, which="both")
        return fig
    a, b = _idle_frames(a_runs), _idle_frames(b_runs)
    if (a.empty or metric not in a) and (b.empty or metric not in b):
        return None
    cells = sorted({(m, s) for f in (a, b) if not f.empty for m, s in zip(f["model"], f["setting"])})
    ncol = min(len(cells), 3)
    nrow = math.ceil(len(cells) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol + 0.6, 3.0 * nrow + 0.4), squeeze=False, sharey=True)
    for ax, (model, setting) in zip(axes.flat, cells):
        for k, (side, f) in enumerate((("A", a), ("B", b))):
            if f.empty or metric not in f:
                continue
            sel = f[(f["model"] == model) & (f["setting"] == setting)]
            x = sel["pause_requested_s"].to_numpy(dtype=float)
            y = sel[metric].to_numpy(dtype=float)
            ok = np.isfinite(y) & (y > 0)
            offset = (k - 0.5) * 0.03 * max(float(np.nanmax(x)) if x.size else 1.0, 1.0)
            ax.scatter(x[ok] + offset, y[ok], s=7, alpha=0.45, color=COLOURS[side], linewidths=0, label=side)
            med = sel[ok].groupby("pause_requested_s")[metric].median()
            ax.plot(med.index + offset, med.to_numpy(), color=COLOURS[side], lw=1.5)
        ax.set_yscale("log")
        ax.set_title(plain(f"{model}\n{setting}"), fontsize=8)
        ax.set_xlabel("pause (s)")
        ax.grid(alpha=0.3, which="both")
    for ax in axes.flat[len(cells):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel(plain(metric) + " (log scale)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles[:2], ["A (baseline)", "B (candidate)"][:len(handles[:2])], loc="upper center",
               ncol=2, frameon=False, bbox_to_anchor=(0.5, 1.04), markerscale=3)
    fig.tight_layout()
    return fig


def compare_findings(results: list[Verdict]) -> list[str]:
    """The headline in sentences: verdicts counted, then one line per primary group."""
    primary = [r for r in results if r.primary]
    counts = summary_counts(primary)
    lines = [f"{len(primary)} gating group{'s' if len(primary) != 1 else ''} compared: "
             + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) + "."]
    lines += [r.line() for r in primary if r.verdict != "refused"]
    if counts.get("refused"):
        lines.append(f"{counts['refused']} group(s) refused for too few samples; more --reps or runs per side "
                     "would give them a verdict.")
    return lines


def _row(v: Verdict) -> dict:
    d = v.as_dict()
    d["group"] = regime_label(v.regime)
    lo, hi = v.ratio_ci
    d["centres"] = both_sides(v.median_a, v.median_b, v.metric)
    d["ratio_text"] = "–" if not math.isfinite(v.ratio) else (
        factor(v.ratio) + (f" [{factor(lo)}, {factor(hi)}]" if math.isfinite(lo) and math.isfinite(hi)
                           else " [no interval]"))
    d["detects"] = "–" if v.verdict == "refused" else detectable_words(getattr(v, "detectable", math.nan)).replace(
        "detects >= ", "")
    return d


def write_compare_html(a_runs: list[Run], b_runs: list[Run], results: list, out: Path, *,
                       redact: bool = True) -> Path:
    """The compare page; home paths, user and host names redacted as in evidence and gate output
    (it is made to be shared), unless ``redact`` is False."""
    red = Redactor(redact, runs=[*a_runs, *b_runs], xml=True)
    metrics = list(dict.fromkeys(v.metric for v in results))
    caption = ("Dots are requests, bars the p50 of each group of requests." if compare_family(a_runs) == SWAP_FAMILY
               else "Dots are samples, lines the p50 per pause; one panel per model and setting.")
    plots = []
    for metric in metrics:
        png = metric_png(a_runs, b_runs, metric)
        if png is not None:
            plots.append({"metric": metric, "src": data_uri(png), "caption": caption})
    return write_page("compare.html.j2", dict(
        run_id=f"{a_runs[0].run_id} vs {b_runs[0].run_id}", a=[r.run_id for r in a_runs],
        b=[r.run_id for r in b_runs], findings=compare_findings(results), results=[_row(v) for v in results], plots=plots,
        any_secondary=any(not v.primary for v in results),
        differences=environment_differences(a_runs, b_runs), run=b_runs[0].record,
        host=b_runs[0].record.host.facts, engine=b_runs[0].record.engine.facts,
        virtual_hosts=[r.record.host.facts for r in (*a_runs, *b_runs)]), out,
        post=lambda html: redact_html(red, html))
