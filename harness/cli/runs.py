"""``lbench runs`` and ``lbench report``."""

from __future__ import annotations

from pathlib import Path

import typer

from harness import paths
from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out, print_wrapped


def runs(results: ResultsDir = None) -> None:
    """List runs, oldest first: status, what was measured (warm-ups apart), duration and whether
    the report was rendered (report: yes = <run dir>/report.html exists).

    A run that says 'running' but has no live process was killed: its journal (*.jsonl)
    holds everything measured before that.

    \b
    Examples:
      lbench runs
      lbench runs --results /data/lbench-results
    """
    from harness.errors import BadInput
    from harness.store import list_runs

    root = paths.results_dir(results)
    if not root.is_dir():
        raise BadInput(f"no results directory {root}", where="--results / $LBENCH_RESULTS_DIR / ./results",
                       hint="run a benchmark first (lbench idle), or point --results at the folder holding runs")
    from rich import box

    from rich.table import Table
    table = Table(title=f"runs in {root}", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run id (time-kind-tag)", "status", "measured", "duration", "models", "report"):
        table.add_column(col, no_wrap=col.startswith("run id"), overflow="fold",
                         min_width={"status": 8, "measured": 12, "duration": 8, "report": 6}.get(col))
    for run in list_runs(root):
        m = run.manifest
        status = m.get("status", "?")
        if status == "running":
            status = "running/incomplete"
        models = ", ".join(x.get("label", "?") for x in m.get("models", []))
        report = run.dir / "report.html"
        table.add_row(run.run_id, status, measured_text(run), duration_text(m), models,
                      "yes" if report.exists() else "-")
    out.print(table)


def measured_text(run) -> str:
    """"40 samples (+12 warm-up)" for sample tables; "N requests" etc. for the others."""
    from harness.kinds import find_kind

    kind = find_kind(run.manifest.get("kind"))
    name = kind.primary_table if kind is not None else "samples"
    if name != "samples":
        n = (run.manifest.get("rows") or {}).get(name)
        return f"{n if n is not None else len(run.table(name))} {name}"
    frame = run.table("samples")
    if frame.empty or "phase" not in frame:
        return "0 samples"
    ok = frame["error"].isna() if "error" in frame else True
    measure = int(((frame["phase"] == "measure") & ok).sum())
    warm = int((frame["phase"] == "warmup").sum())
    failed = int(((frame["phase"] == "measure") & ~ok).sum()) if "error" in frame else 0
    text = f"{measure} samples" + (f" (+{warm} warm-up)" if warm else "")
    return text + (f", {failed} failed" if failed else "")


def duration_text(manifest: dict) -> str:
    from datetime import datetime

    try:
        start = datetime.fromisoformat(manifest["started_at"])
        end = datetime.fromisoformat(manifest["ended_at"])
    except (KeyError, TypeError, ValueError):
        return "-"
    seconds = (end - start).total_seconds()
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def report(
    run: str = typer.Argument("latest", metavar="RUN", help="Run id (or unique prefix/suffix), run directory, or 'latest'."),
    output: Path = typer.Option(None, "--out", "-o", help="Where to write the HTML. "
                                                                 + shown("<run>/report.html")),
    results: ResultsDir = None,
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Recompute the run's analysis.json from its tables "
                                                             "first (otherwise it is reused when current)."),
) -> None:
    """Render a run's self-contained HTML report (plots inline).

    Works on incomplete runs too (reads the journal of a killed run). Figures come from the
    run's analysis.json, recomputed when missing or written by an older lbench.

    \b
    Examples:
      lbench report latest
      lbench report 20261130T120000Z-idle-1a2b --out /tmp/idle.html
    """
    from harness.baselines import check_ref
    from harness.report.render import render_report
    from harness.store import open_run

    r = open_run(check_ref(run), paths.results_dir(results))  # a 300-character ref: bad input, not ENAMETOOLONG
    path = render_report(r, output, reanalyze=reanalyze)
    print_wrapped(out, f"report: {path}")
