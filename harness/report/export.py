"""A run's wake figures in the formats continuous-benchmarking services read.

- **BMF** (Bencher Metric Format, https://bencher.dev/docs/reference/bencher-metric-format/):
  ``{benchmark: {measure: {"value": v, "lower_value": lo, "upper_value": hi}}}``; ``value``
  required, the bounds optional.
- **github-action-benchmark** ``customSmallerIsBetter`` (README of
  benchmark-action/github-action-benchmark, "customBiggerIsBetter and customSmallerIsBetter";
  ``BenchmarkResult`` in its src/extract.ts): a JSON array of ``{"name", "unit", "value"}``, with
  optional ``range`` and ``extra`` strings.

One benchmark per (model, setting) of an idle run.  The figures are the run's wake model as
its analysis keeps it (``analysis["wake"]`` rows, read through ``harness.analysis.persisted``):
the warm and woken first-token medians and the wake penalty, each with its 95% interval, and
the wake threshold's bracket (the pause interval the grid supports).  A figure the model did
not produce (no step: no woken level, no penalty) is left out, never written as 0 or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.analysis.persisted import with_analysis
from harness.store import Run

FORMATS = ("bmf", "github-action-benchmark")

# (measure slug, row key of the value, row key of its interval, unit, words)
MEASURES: tuple[tuple[str, str, str | None, str, str], ...] = (
    ("warm-first-token-ms", "warm_median_ms", "warm_ci", "ms", "first token, warm (median)"),
    ("woken-first-token-ms", "woken_median_ms", "woken_ci", "ms", "first token after the wake threshold (median)"),
    ("wake-penalty-ms", "penalty_ms", "penalty_ci", "ms", "wake penalty (woken - warm median)"),
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _bounds(ci: Any) -> tuple[float, float] | None:
    if not isinstance(ci, Sequence) or isinstance(ci, str) or len(ci) != 2:
        return None
    lo, hi = _number(ci[0]), _number(ci[1])
    return (lo, hi) if lo is not None and hi is not None else None


def benchmark_name(row: Mapping[str, Any]) -> str:
    return f"lbench-idle/{row.get('model', '?')}/{row.get('setting', '?')}"


def wake_rows(run: Run, *, reanalyze: bool = False) -> list[dict[str, Any]]:
    """The run's wake model rows (one per model and setting), from its analysis."""
    rows = with_analysis(run, lambda a: [dict(r) for r in a.get("wake") or []], reanalyze=reanalyze)
    return list(rows)


def figures(row: Mapping[str, Any]) -> list[tuple[str, float, tuple[float, float] | None, str, str]]:
    """(measure, value, interval or None, unit, words) for every figure the row has."""
    out = []
    for slug, key, ci_key, unit, words in MEASURES:
        value = _number(row.get(key))
        if value is None:
            continue
        out.append((slug, value, _bounds(row.get(ci_key)) if ci_key else None, unit, words))
    last, first = _number(row.get("last_warm_s")), _number(row.get("first_woken_s"))
    if row.get("has_step") and last is not None and first is not None:
        # the threshold lies in (last_warm_s, first_woken_s]: the grid supports no finer answer
        out.append(("wake-threshold-s", first, (last, first), "s", "wake threshold (pause bracket the grid supports)"))
    return out


def to_bmf(run: Run, rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    doc: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        measures: dict[str, dict[str, float]] = {}
        for slug, value, ci, _unit, _words in figures(row):
            metric = {"value": value}
            if ci is not None:
                metric["lower_value"], metric["upper_value"] = ci
            measures[slug] = metric
        if measures:
            doc[benchmark_name(row)] = measures
    return doc


def _g(x: float) -> str:
    return f"{x:.4g}"


def to_github_action_benchmark(run: Run, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for row in rows:
        shape = str(row.get("text") or row.get("shape") or "")
        for slug, value, ci, unit, words in figures(row):
            entry: dict[str, Any] = {"name": f"{benchmark_name(row)}/{slug}", "unit": unit, "value": value}
            if ci is not None:
                entry["range"] = (f"pause in ({_g(ci[0])}, {_g(ci[1])}] s" if slug == "wake-threshold-s"
                                  else f"95% CI [{_g(ci[0])}, {_g(ci[1])}]")
            entry["extra"] = (f"{words}\nrun {run.run_id}\nwake model: {shape}\n"
                              f"n warm {row.get('n_warm', '?')}, n woken {row.get('n_woken', '?')}")
            entries.append(entry)
    return entries


def export(run: Run, fmt: str, *, reanalyze: bool = False) -> dict | list:
    rows = wake_rows(run, reanalyze=reanalyze)
    return to_bmf(run, rows) if fmt == "bmf" else to_github_action_benchmark(run, rows)
