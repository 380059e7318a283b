"""``lbench runs`` and ``lbench report``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from harness import paths
from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out, print_wrapped

if TYPE_CHECKING:
    from harness.runindex import IndexCache, IndexEntry


def runs(results: ResultsDir = None,
         kind: str = typer.Option(None, "--kind", help="Only runs of this kind (idle, calibrate, swap, repro, gate-bench). "
                                                      + shown("every kind")),
         model: str = typer.Option(None, "--model", "-m", help="Only runs of this model label. " + shown("any")),
         status: str = typer.Option(None, "--status", help="Only runs with this status (complete, failed, "
                                                           "interrupted, running, abandoned). " + shown("any")),
         limit: int = typer.Option(50, "--limit", "-n", min=0, show_default=False,
                                   help="Show the newest N runs that match (0: all); "
                                                                   "a line says how many older ones are not shown. "
                                                                   + shown("50"))) -> None:
    """List runs, oldest first: status, what was measured (warm-ups apart), duration and whether
    the report was rendered (html: yes = <run dir>/report.html exists).

    A run whose process is gone without ending it (killed, or the machine rebooted) is
    'abandoned': its journal (*.jsonl) holds everything measured before that. An older
    lbench recorded no process: its runs left 'running' read 'abandoned' when the manifest
    predates this machine's boot, else 'running (unverifiable: written by an older lbench)'.
    A run directory lbench cannot read is skipped with one line saying why.

    \b
    Examples:
      lbench runs
      lbench runs --kind idle --model tiny-q8
      lbench runs --limit 0           # every run
      lbench runs --results /data/lbench-results
    """
    from harness.errors import BadInput
    from harness.runindex import IndexCache, Skipped, iter_records

    root = paths.results_dir(results)
    if not root.is_dir():
        raise BadInput(f"no results directory {root}", where="--results / $LBENCH_RESULTS_DIR / ./results",
                       hint="run a benchmark first (lbench idle), or point --results at the folder holding runs")
    from rich import box

    from rich.table import Table
    from rich.text import Text

    from harness.terminal import printable
    skipped: list[Skipped] = []
    cache = IndexCache(root)
    entries = list(iter_records(root, kind=kind, model=model, status=status, quiet=True, skipped=skipped, cache=cache))
    older = max(0, len(entries) - limit) if limit else 0
    entries = entries[older:]
    table = Table(title=f"runs in {root}", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    # the run id is what users type: never cut; models may wrap between names, never inside one
    table.add_column("run id", no_wrap=True, min_width=26)
    table.add_column("status", min_width=8)
    table.add_column("measured", min_width=10)
    table.add_column("duration", min_width=6, no_wrap=True)
    table.add_column("models", overflow="fold", min_width=8)
    table.add_column("html", min_width=4, no_wrap=True)
    rows = []
    for entry in entries:
        r = entry.summary
        status_text = (entry.record.status_shown if entry.record.unverifiable else "running/incomplete") \
            if r.status == "running" else r.status
        rows.append(tuple(printable(c) for c in (
            r.run_id, status_text, measured_text(entry, cache), duration_text(r.duration_s), ", ".join(r.models),
            "yes" if (entry.dir / "report.html").exists() else "-")))
    if len(rows) <= PLAIN_OVER:
        for row in rows:
            table.add_row(*(Text(c) for c in row))  # data, never rich markup
        out.print(table)
    else:  # a rich table measures every cell: 5,000 rows took ~50 s; plain columns take milliseconds
        print_plain(rows, f"runs in {root}")
    cache.save(cache.seen)
    if older:
        print_wrapped(out, f"{older:,} older run{'s' if older != 1 else ''} not shown (--limit 0 shows all, "
                           "--kind/--model/--status filter)")
    for note in skipped:
        print_wrapped(out, note.line())


PLAIN_OVER = 200  # more rows than this are printed as plain columns (ids whole, models last)
HEADERS = ("run id", "status", "measured", "duration", "html", "models")


def print_plain(rows: Sequence[tuple[str, ...]], title: str) -> None:
    """One line per run, fixed columns, the models last and whole."""
    order = (0, 1, 2, 3, 5, 4)  # models last: the only column of unbounded width
    cols = [[row[i] for i in order] for row in rows]
    widths = [max(len(HEADERS[j]), *(len(c[j]) for c in cols)) for j in range(5)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(HEADERS, widths)) + "  " + HEADERS[5]]
    lines += ["  ".join(c[j].ljust(widths[j]) for j in range(5)) + "  " + c[5] for c in cols]
    sys.stdout.write("\n".join(lines) + "\n")


def _sample_counts(entry: IndexEntry) -> dict:
    from harness.store import Run

    frame = Run(entry.dir, entry.record).table("samples")
    if frame.empty or "phase" not in frame:
        return {"measure": 0, "warmup": 0, "failed": 0}
    ok = frame["error"].isna() if "error" in frame else True
    return {"measure": int(((frame["phase"] == "measure") & ok).sum()),
            "warmup": int((frame["phase"] == "warmup").sum()),
            "failed": int(((frame["phase"] == "measure") & ~ok).sum()) if "error" in frame else 0}


def measured_text(entry: IndexEntry, cache: IndexCache | None = None) -> str:
    """"40 samples (+12 warm-up)" for sample tables; "N requests" etc. for the others."""
    from harness.errors import BadInput
    from harness.runkind import find_kind

    kind = find_kind(entry.summary.kind)
    name = kind.primary_table if kind is not None else "samples"
    rows = entry.summary.rows
    if name not in rows and len(rows) == 1:  # the kind's other table in this mode (gate-bench --simulate)
        (name,) = rows
    if name != "samples":
        n = rows.get(name)
        if n is None:
            from harness.store import Run

            try:
                n = len(Run(entry.dir, entry.record).table(name))
            except BadInput:
                return "unreadable"
        return f"{n} {name}"
    try:
        c = entry.summary.sample_counts or (cache.counts(entry, "samples", _sample_counts) if cache is not None
                                            else _sample_counts(entry))
    except BadInput:
        return "unreadable"
    text = f"{c['measure']} samples" + (f" (+{c['warmup']} warm-up)" if c["warmup"] else "")
    return text + (f", {c['failed']} failed" if c["failed"] else "")


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
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
