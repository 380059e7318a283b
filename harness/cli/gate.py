"""``lbench gate``: the CI regression gate (its error rates are measured by ``lbench gate-bench``)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from harness.cli.options import Alpha, InconclusiveOk, Margin, MinN, ResultsDir
from harness.cli.ui import console, out, print_wrapped
from harness.cli.verdicts import group_name, print_verdicts, resolve_sides, warn_fingerprints


def gate(
    baseline: list[str] = typer.Option(None, "--baseline", metavar="RUN", help="Baseline run(s); repeat: pooled as runs."),
    candidate: list[str] = typer.Option(None, "--candidate", metavar="RUN", help="Candidate run(s); repeat: pooled as runs."),
    threshold: Margin = None,
    alpha: Alpha = None,
    min_n: MinN = None,
    inconclusive_ok: InconclusiveOk = False,
    config: Path = typer.Option(None, "--config", help="TOML with [gate] and per-metric [thresholds]."),
    junit_path: Path = typer.Option(None, "--junit", help="Write JUnit XML here."),
    json_path: Path = typer.Option(None, "--json", help="Write the JSON verdict here."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
    results: ResultsDir = None,
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home paths, user and host names in "
                                                                   "the Markdown, JSON and JUnit written."),
) -> None:
    """Regression gate for CI on latency_ms (the primary metric; others are reported, not voting).

    Exit 0 pass (every gating group no change or faster), 1 regression (a group's interval lies above
    the band after Holm correction, including a new or earlier wake step in the candidate), 2 bad
    input or too few samples (a regression elsewhere still exits 1), 3 inconclusive (an interval
    straddles the band; --inconclusive-ok maps it to 0). See docs/statistics.md.

    \b
    Examples:
      lbench gate --baseline baseline:main --candidate latest
      lbench gate --baseline A1 --baseline A2 --candidate B1 --candidate B2 \\
          --junit gate.xml --json gate.json
    """
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import decide, junit, load_config, markdown, verdict_config, verdict_json

    cfg = load_config(config, alpha=alpha, min_n=min_n, threshold=threshold)
    ra, rb = resolve_sides(baseline, candidate, results)
    from harness.baselines import refuse_same_runs

    refuse_same_runs(ra, rb)  # a run against itself: exit 2, not a verdict
    warn_fingerprints(ra, rb)
    res, info = judge_runs(ra, rb, verdict_config(cfg))
    outcome = decide(res, cfg, inconclusive_ok=inconclusive_ok)
    names_a, names_b = [r.run_id for r in ra], [r.run_id for r in rb]
    from harness.report.redact import Redactor

    red, red_xml = Redactor(redact, runs=ra + rb), Redactor(redact, runs=ra + rb, xml=True)
    md = red(markdown(outcome, ", ".join(names_a), ", ".join(names_b)))
    if md_path:
        md_path.write_text(md)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as fh:
            fh.write(md)
    if junit_path:
        junit_path.write_text(red_xml(junit(outcome)))
    if json_path:
        json_path.write_text(red(verdict_json(outcome, names_a, names_b, info)))
    print_verdicts(res, info, ra, rb)
    for r in outcome.missing:
        print_wrapped(console, f"not enough data for {group_name(r)}: n {r.n_a} vs {r.n_b} samples, need {cfg.min_n} "
                               "each; run more repetitions (--reps) or add runs")
    for r in outcome.failures:
        print_wrapped(console, f"REGRESSION {group_name(r)}: B is {r.ratio:.3g}x [{r.ratio_ci[0]:.3g}, "
                               f"{r.ratio_ci[1]:.3g}] slower than A, Holm p={r.p_value:.3g}")
    if outcome.status == "inconclusive":
        print_wrapped(console, f"inconclusive: {len(outcome.inconclusive)} group(s) straddle the "
                               f"±{cfg.threshold:.0%} band; add runs (--baseline/--candidate) or reps"
                      + (" (--inconclusive-ok: exit 0)" if inconclusive_ok else " (exit 3)"))
    out.print(f"gate: {outcome.status}", markup=False)
    raise typer.Exit(outcome.exit_code)

