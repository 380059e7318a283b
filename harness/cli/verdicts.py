"""Printing verdicts and resolving run references: shared by compare, gate and ab."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.cli.ui import console, out, print_wrapped
from harness.analysis.verdict_labels import group_label as group_name, regime_label

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.analysis.gate import GateOutcome
    from harness.analysis.verdicts import Verdict
    from harness.store import Run

COLOURS = {"slower": "red", "faster": "green", "no change": "white", "not enough data": "yellow",
           "refused": "yellow", "inconclusive": "yellow"}


def warn_fingerprints(a: list[Run], b: list[Run]) -> None:
    """What ``harness.runs.sides.side_warnings`` finds (after refusing runs that are not comparable), printed."""
    from harness.runs.sides import side_warnings

    for line in side_warnings(a, b):
        print_wrapped(console, f"warning: {line}", style="yellow")


def quality_lines(runs: list[Run], side: str) -> list[str]:
    """One line per distinct warning of a side, naming the runs it came from (not one per run)."""
    by_text: dict[str, list[str]] = {}
    for r in runs:
        for w in r.record.quality.warnings:
            by_text.setdefault(w, []).append(r.run_id)
    lines = []
    for w, ids in by_text.items():
        where = ids[0] if len(ids) == 1 else (f"{len(ids)} of {len(runs)} runs" if len(ids) > 2 else " and ".join(ids))
        lines.append(f"warning ({side} {where}): {w}")
    return lines


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def summary_atoms(v: Verdict) -> list[str]:
    """One group's verdict as phrases: ``pause 1 s: B/A 1.65 [0.190, 28.9], B slower by 65% (p50
    latency_ms 12.1 vs 20.0 ms): inconclusive; ...``, phrases kept whole by ``wrap``.  One ratio
    convention everywhere (B/A; below 1 is faster)."""
    from harness.analysis.verdicts import both_sides, detectable_words, ratio_words, runs_needed_words

    atoms = [f"{regime_label(v.regime)}:"]
    p50 = f"(p50 {v.metric} {both_sides(v.median_a, v.median_b, v.metric)})"
    runs = "" if v.n_runs_a == v.n_runs_b == 1 else f" in {v.n_runs_a} vs {v.n_runs_b} runs"
    if v.verdict == "refused":
        atoms += ["refused, too few samples", f"(n {v.n_a} vs {v.n_b}{runs})", p50 + ";", *v.note.split(" ")]
        return atoms
    lo, hi = v.ratio_ci
    head, _, words = ratio_words(v.ratio, lo, hi).partition(", ")
    atoms += [head + ",", words, p50 + ":", f"{v.verdict};", f"n {v.n_a} vs {v.n_b} samples{runs};",
              detectable_words(getattr(v, "detectable", math.nan))]
    if v.verdict == "inconclusive" and hasattr(v, "runs_needed") and v.primary:
        atoms[-1] += ";"
        atoms += runs_needed_words(v).split(" ")
    if v.note:
        atoms[-1] += ";"
        atoms += v.note.split(" ")
    return atoms


def next_step_lines(outcome: GateOutcome) -> list[str]:
    """What would decide an inconclusive gate: per undecided gating group, the runs needed."""
    from harness.analysis.verdicts import runs_needed_words

    return [f"{group_name(r)}: {runs_needed_words(r)}" for r in outcome.inconclusive if hasattr(r, "runs_needed")]


def print_verdicts(verdicts: Sequence[Verdict], info: dict, ra: list[Run], rb: list[Run]) -> None:
    """Per (model, setting) a heading, then one sentence per group, each at most the console's
    width (80 columns without a TTY) and broken only between whole phrases.  The runs' quality
    warnings (each once, naming its runs) follow the verdicts: the verdict is read first."""
    for side, runs in (("A", ra), ("B", rb)):
        ids = [r.run_id + "," for r in runs]
        ids[-1] = ids[-1].rstrip(",")
        print_wrapped(out, [f"{side}:", *ids, f"({_runs(len(runs))})"])
    margins = {v.metric: v.margin for v in verdicts}
    band = (f"±{next(iter(margins.values())):.0%}" if len(set(margins.values())) == 1
            else ", ".join(f"{m} ±{x:.0%}" for m, x in margins.items()))
    voting = sorted({v.metric for v in verdicts if v.primary})
    units = sorted({v.unit for v in verdicts if v.verdict != "refused"})  # a refused group has no interval
    gate_on = info.get("gate_on")
    levels = sorted({f"{getattr(v, 'confidence', 0.95):.3g}" for v in verdicts})
    level = f"{float(levels[0]):.1%}".replace(".0%", "%") if len(levels) == 1 else "95%"
    print_wrapped(out, f"Ratio B/A of the runs' p50s (B/A < 1: B faster) with its {level} interval; equivalence band "
                       f"{band}; {', '.join(voting) or 'no metric'} votes" + (f" on {gate_on}" if gate_on else "")
                       + "; other groups and metrics are reported, not voting.")
    if len(units) == 1:
        print_wrapped(out, f"Unit: {units[0]}.")
    heading = None
    order = {"gating": 0, "reported": 1, "secondary metric": 2}
    verdicts = sorted(verdicts, key=lambda v: (v.model, v.setting, order.get(getattr(v, "role", ""), 0)))
    for v in verdicts:
        role_of = getattr(v, "role", "gating" if v.primary else "secondary metric")
        if (v.model, v.setting, role_of) != heading:
            heading = (v.model, v.setting, role_of)
            out.print("")
            role = [] if role_of == "gating" else [f"({role_of},", "does not vote)"]
            print_wrapped(out, [v.model, "·", v.setting, *role], style="bold")
        atoms = summary_atoms(v)
        if len(units) > 1 and v.verdict != "refused":
            atoms += ["(unit:", *v.unit.split(" ")]
            atoms[-1] += ")"
        print_wrapped(out, atoms, style=COLOURS.get(v.verdict), first="  ", rest="      ")
    if info.get("shapes_a") or info.get("step_changes"):
        out.print("")
    for side, key in (("A", "shapes_a"), ("B", "shapes_b")):
        for cell, shape in info.get(key, {}).items():
            print_wrapped(out, f"{side}'s shape for {cell}: {shape.shape}, {shape.threshold_text()}.")
    for ch in info.get("step_changes", []):
        print_wrapped(out, f"B has a {ch['change']} wake step for {ch['model']} · {ch['setting']}: "
                           f"A has {ch['a']}, B has {ch['b']}.")
    for line in quality_lines(ra, "A") + quality_lines(rb, "B"):
        print_wrapped(console, line)
