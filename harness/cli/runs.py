"""``lbench runs`` and ``lbench report``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from harness import paths
from harness.cli.options import ResultsDir
from harness.cli.ui import out


def runs(results: ResultsDir = None) -> None:
    """List runs, oldest first, with their status and sample counts.

    A run that says 'running' but has no live process was killed: its samples.jsonl
    holds everything measured before that.

    Examples:
      lbench runs
      lbench runs --results /data/lbench-results
    """
    from harness.kinds import find_kind
    from harness.store import list_runs

    root = paths.results_dir(results)
    table = Table(title=f"runs in {root}")
    for col in ("run id", "kind", "status", "rows", "models", "started"):
        table.add_column(col, no_wrap=col == "run id")
    for run in list_runs(root):
        m = run.manifest
        kind = find_kind(m.get("kind"))
        name = kind.primary_table if kind is not None else "samples"
        n = (m.get("rows") or {}).get(name) or (m.get("n_samples") if name == "samples" else None) \
            or len(run.table(name))
        n = f"{n} {name}"
        models = ", ".join(x.get("label", "?") for x in m.get("models", []))
        status = m.get("status", "?")
        if status == "running":
            status = "running/incomplete"
        table.add_row(run.run_id, m.get("kind", "?"), status, str(n), models, str(m.get("started_at", "")))
    out.print(table)


def report(
    run: str = typer.Argument("latest", help="Run id (or unique prefix/suffix), run directory, or 'latest'."),
    output: Path = typer.Option(None, "--out", "-o", help="Where to write the HTML (default: <run>/report.html)."),
    results: ResultsDir = None,
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Recompute the run's analysis.json from its tables "
                                                             "first (otherwise it is reused when current)."),
) -> None:
    """Render a run's self-contained HTML report (plots inline).

    Works on incomplete runs too (reads the journal of a killed run). Figures come from the
    run's analysis.json, recomputed when missing or written by an older lbench.

    Examples:
      lbench report latest
      lbench report 20261130T120000Z-idle-1a2b --out /tmp/idle.html
    """
    from harness.report.render import render_report
    from harness.store import open_run

    r = open_run(run, paths.results_dir(results))
    path = render_report(r, output, reanalyze=reanalyze)
    out.print(f"report: {path}", markup=False)
