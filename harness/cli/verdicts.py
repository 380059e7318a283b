"""Printing verdicts and resolving run references: shared by compare, gate and ab."""

from __future__ import annotations

from typing import TYPE_CHECKING


from harness.cli.ui import console, out
from harness.errors import BadInput

if TYPE_CHECKING:
    from harness.store import Run

COLOURS = {"slower": "red", "faster": "green", "no change": "white", "not enough data": "yellow",
           "refused": "yellow", "inconclusive": "yellow"}


def resolve_runs(refs: list[str] | None, results: str | None, side: str) -> list[Run]:
    from harness import baselines, paths

    if not refs:
        raise BadInput(f"no {side} run given", hint="give run ids, directories, 'latest' or baseline:NAME")
    return [baselines.resolve_run(r, paths.results_dir(results)) for r in refs]


def warn_fingerprints(a: list[Run], b: list[Run]) -> None:
    from harness import baselines

    fa, fb = baselines.fingerprint(a[0].manifest), baselines.fingerprint(b[0].manifest)
    if fa["id"] != fb["id"]:
        console.print("[yellow]warning: baseline and candidate come from different machines or engines:[/yellow] "
                      + "; ".join(baselines.differences(fa, fb)), highlight=False)


def quality_lines(runs: list[Run], side: str) -> list[str]:
    """One line per distinct warning of a side, naming the runs it came from (not one per run)."""
    by_text: dict[str, list[str]] = {}
    for r in runs:
        for w in (r.manifest.get("quality") or {}).get("warnings", []):
            by_text.setdefault(w, []).append(r.run_id)
    lines = []
    for w, ids in by_text.items():
        where = ids[0] if len(ids) == 1 else (f"{len(ids)} of {len(runs)} runs" if len(ids) > 2 else " and ".join(ids))
        lines.append(f"warning ({side} {where}): {w}")
    return lines


def print_verdicts(verdicts, info: dict, ra: list[Run], rb: list[Run]) -> None:
    for line in quality_lines(ra, "A") + quality_lines(rb, "B"):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    out.print(f"A = {', '.join(r.run_id for r in ra)} ({len(ra)} run(s)); "
              f"B = {', '.join(r.run_id for r in rb)} ({len(rb)} run(s))", markup=False)
    for v in verdicts:
        c = COLOURS.get(v.verdict, "white")
        from rich.markup import escape

        out.print(f"[{c}]{escape(v.line())}[/{c}]", highlight=False, soft_wrap=True)
    for side, key in (("A", "shapes_a"), ("B", "shapes_b")):
        for cell, shape in info.get(key, {}).items():
            out.print(f"shape {side} {cell}: {shape.shape} ({shape.threshold_text()}; BIC {shape.bic})",
                      markup=False, highlight=False, soft_wrap=True)
    for ch in info.get("step_changes", []):
        out.print(f"wake step {ch['change']} in B for {ch['model']} · {ch['setting']}: A has {ch['a']}, "
                  f"B has {ch['b']}", markup=False, highlight=False, soft_wrap=True)
