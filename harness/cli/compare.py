"""``lbench compare``: verdicts per group between two sides of runs."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.options import Alpha, GateOn, History, Margin, MinN, ResultsDir, SlowerRule
from harness.cli.ui import out
from harness.cli.verdicts import print_verdicts, warn_fingerprints
from harness.errors import BadInput


def compare(
    a: list[str] = typer.Argument(..., metavar="A B", help="Baseline then candidate: A B. Use --baseline/--candidate to pool "
                                            "several runs per side."),
    margin: Margin = None,
    alpha: Alpha = None,
    min_n: MinN = None,
    gate_on: GateOn = None,
    slower_rule: SlowerRule = None,
    history: History = None,
    baseline: list[str] = typer.Option(None, "--baseline", metavar="RUN", help="More baseline runs (pooled as runs)."),
    candidate: list[str] = typer.Option(None, "--candidate", metavar="RUN", help="More candidate runs (pooled as runs)."),
    results: ResultsDir = None,
    html: Path = typer.Option(None, "--html", help="Also write an HTML section with paired plots here."),
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home paths, user and host names in "
                                                                   "the --html page."),
) -> None:
    """Compare runs per (model, setting, regime or pause, metric): one sentence per group, hyperfine
    style, with the ratio B/A, its 95% interval (a t interval on per-run log medians), both p50s
    with units, n per side, the smallest slowdown the data could detect, and a verdict against the
    equivalence band (slower / no change / faster / inconclusive / refused). 'latest' is the newest
    run of the other side's kind. --html adds the environment differences and log-scale plots.
    See docs/compare.md and docs/statistics.md.

    \b
    Examples:
      lbench compare 20261201T054030Z-idle-3f9c 20261201T061512Z-idle-a07e
      lbench compare A1 B1 --baseline A2 --candidate B2
      lbench compare baseline:main latest --html /tmp/compare.html
    """
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import load_config, verdict_config

    if len(a) != 2:
        raise BadInput(f"compare takes two runs (A B), got {len(a)}", hint="pool more with --baseline/--candidate")
    from harness.analysis.gate_config import parse_gate_on

    cfg = load_config(None, alpha=alpha, min_n=min_n, threshold=margin, slower_rule=slower_rule)
    groups_on = parse_gate_on(gate_on)
    from harness.runs.sides import resolve_runs, resolve_sides

    ra, rb = resolve_sides([a[0], *(baseline or [])], [a[1], *(candidate or [])], results)
    from harness.baselines import refuse_same_runs

    refuse_same_runs(ra, rb)  # a run against itself: exit 2, not a verdict
    warn_fingerprints(ra, rb)
    res, info = judge_runs(ra, rb, verdict_config(cfg), gate_on=groups_on, history=resolve_runs(history, results))
    print_verdicts(res, info, ra, rb)
    if html:
        from harness.report.compare import write_compare_html

        out.print(f"html: {write_compare_html(ra, rb, res, html, redact=redact)}", markup=False,
                  soft_wrap=True)  # a path: never cut
