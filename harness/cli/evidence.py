"""``lbench evidence``: a Markdown bundle of runs for a GitHub issue."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.options import ResultsDir
from harness.cli.ui import out, print_wrapped


def evidence(
    runs: list[str] = typer.Argument(..., metavar="RUN...", help="Runs to bundle."),
    output: Path = typer.Option(Path("evidence"), "--out", "-o",
                                help="Directory for evidence.md and PNGs (new, empty or an earlier bundle: it is "
                                     "replaced whole)."),
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home path, user and host names."),
    results: ResultsDir = None,
) -> None:
    """Write a Markdown bundle for a GitHub issue: summary, exact command, table, key plot (PNG),
    environment in a collapsed block. Home paths, user and host names are redacted by default.

    \b
    Examples:
      lbench evidence latest -o /tmp/ev
      lbench evidence RUN_A RUN_B --no-redact
    """
    from harness import baselines, paths
    from harness.report.evidence import write_evidence

    rs = [baselines.resolve_run(r, paths.results_dir(results)) for r in runs]
    path = write_evidence(rs, output, redact=redact)
    pngs = sorted(p.name for p in path.parent.glob("*.png"))
    out.print(f"evidence: {path}", markup=False, soft_wrap=True)
    scripts = sorted(p.name for p in path.parent.glob("rerun-*.sh"))
    reports = sorted(p.name for p in path.parent.glob("*-report.html"))
    print_wrapped(out, "to attach it: paste evidence.md into the GitHub issue"
                  + (f"; then drag {', '.join(pngs)} from {path.parent} into the comment box (a pasted "
                     "relative image link is not uploaded: GitHub uploads only what is dropped or picked, and "
                     "inserts its own link)" if pngs else "")
                  + (f"; the redacted report copies ({', '.join(reports)}) can be attached the same way"
                     if reports else "")
                  + (f"; rerun scripts (no lbench needed): {', '.join(scripts)}" if scripts else ""), rest="  ")
