"""``lbench export``: a run's wake figures as BMF or github-action-benchmark JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from harness import paths
from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out, print_wrapped
from harness.errors import BadInput


def export(
    run: str = typer.Argument("latest", metavar="RUN", help="Idle run id (or unique prefix/suffix), run directory, "
                                                          "or 'latest'."),
    fmt: str = typer.Option("bmf", "--format", "-f", help="bmf (Bencher Metric Format) or github-action-benchmark "
                                                         "(its customSmallerIsBetter JSON)."),
    output: Path = typer.Option(None, "--out", "-o", help="Write the JSON to this file (whole or not at all). "
                                + shown("standard output")),
    results: ResultsDir = None,
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Recompute the run's analysis.json from its tables "
                                                             "first. " + shown("off")),
) -> None:
    """Write an idle run's wake figures for a continuous-benchmarking service.

    Per (model, setting): the warm and woken first-token medians and the wake penalty, each with
    its 95% interval, and the wake threshold's pause bracket, from the run's wake model. A figure
    the model did not produce (no step: no penalty) is left out. Smaller is better for all.

    \b
    Examples:
      lbench export latest -o bmf.json    # for: bencher run --adapter json
      lbench export latest --format github-action-benchmark -o bench.json
    """
    from harness.atomic import atomic_write_text
    from harness.baselines import check_ref
    from harness.report.export import FORMATS
    from harness.report.export import export as export_run
    from harness.runkind import find_kind
    from harness.store import open_run

    if fmt not in FORMATS:
        raise BadInput(f"unknown --format {fmt!r}", where="--format", hint="use one of: " + ", ".join(FORMATS))
    r = open_run(check_ref(run), paths.results_dir(results), kinds={"idle"})
    kind = find_kind(r.record.kind)
    if kind is None or "pause_sweep" not in kind.features:  # idle and calibrate runs have wake figures
        raise BadInput(f"run {r.run_id} is a {r.record.kind} run: it has no wake figures", where=str(r.dir),
                       hint="export an idle run (lbench runs --kind idle lists them)")
    doc = export_run(r, fmt, reanalyze=reanalyze)
    if not doc:
        raise BadInput(f"run {r.run_id} has no wake figures (no measured sample)", where=str(r.dir),
                       hint="export a run that measured something (lbench runs shows what each measured)")
    text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if output is None:
        sys.stdout.write(text)  # plain bytes for a pipe: no console markup or wrapping
        return
    if output.parent and not output.parent.is_dir():
        raise BadInput(f"no folder {output.parent} for --out", where="--out", hint="create the folder first")
    atomic_write_text(output, text)
    print_wrapped(out, f"{fmt}: {output}")
