"""``lbench gate``: the CI regression gate (its error rates: ``lbench gate-bench --simulate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.history.gate_hook import WINDOW

from harness.cli.options import Alpha, GateOn, History, InconclusiveOk, Margin, MinN, ResultsDir, SlowerRule, shown
from harness.cli.ui import console, out, print_wrapped
from harness.cli.verdicts import group_name, next_step_lines, print_verdicts


def gate(
    baseline: list[str] = typer.Option(None, "--baseline", metavar="RUN", help="Baseline run(s); repeat: pooled as "
                                       "runs. Or history:<series>: a window of the history archive's runs."),
    candidate: list[str] = typer.Option(None, "--candidate", metavar="RUN", help="Candidate run(s); repeat: pooled as runs."),
    threshold: Margin = None,
    alpha: Alpha = None,
    min_n: MinN = None,
    gate_on: GateOn = None,
    slower_rule: SlowerRule = None,
    history: History = None,
    inconclusive_ok: InconclusiveOk = False,
    config: Path = typer.Option(None, "--config", help="TOML with [gate] and per-metric [thresholds]."),
    junit_path: Path = typer.Option(None, "--junit", help="Write JUnit XML here."),
    json_path: Path = typer.Option(None, "--json", help="Write the JSON verdict here."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
    results: ResultsDir = None,
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home paths, user and host names in "
                                                                   "the Markdown, JSON and JUnit written."),
    archive: Optional[str] = typer.Option(None, "--archive", metavar="DIR", help="With history:<series>: the history "
                                          "archive. " + shown("$LBENCH_HISTORY_DIR, else history/ next to the results "
                                                              "directory")),
    window: Optional[int] = typer.Option(None, "--window", metavar="N", help="With history:<series>: the newest N "
                                         "runs of the baseline build, shrunk to those after a change point inside "
                                         f"it. {shown(WINDOW)}"),
    build: Optional[int] = typer.Option(None, "--build", metavar="N", help="With history:<series>: the baseline's "
                                        "engine build. " + shown("the newest build before the candidate's")),
    machine: Optional[str] = typer.Option(None, "--machine", metavar="ID", help="With history:<series>: machine id "
                                          "or part of its label. " + shown("the candidate's machine")),
    model: Optional[str] = typer.Option(None, "--model", metavar="LABEL", help="With history:<series>: model label. "
                                        + shown("the candidate's, when it has one")),
    setting: Optional[str] = typer.Option(None, "--setting", metavar="LABEL", help="With history:<series>: setting label. "
                                          + shown("the candidate's, when it has one")),
    backend: Optional[str] = typer.Option(None, "--backend", metavar="NAME", help="Every run must have used "
                                          "this backend (cpu, vulkan, cuda, ...); others are refused, e.g. "
                                          "--backend vulkan. " + shown("any, one per side (runs of different "
                                          "backends are never pooled)")),
) -> None:
    """Regression gate for CI on latency_ms over one pre-registered group (A's warm regime, its
    pauses pooled; --gate-on names others); other groups and metrics are reported, not voting.

    The run is the unit: a t interval on per-run log medians. One run per side without --history
    is inconclusive, never a pass or a fail. Exit 0 pass (every gating group no change or faster),
    1 regression (a gating group slower after Holm), 2 bad input or too few samples (a regression
    still exits 1), 3 inconclusive (the runs that would decide it are printed; --inconclusive-ok
    maps it to 0, which passes most true slowdowns at small designs). See docs/statistics.md;
    lbench gate-plan sizes the design first.

    \b
    Examples:
      lbench gate --baseline A1 --baseline A2 --baseline A3 \\
          --candidate B1 --candidate B2 --candidate B3 --junit gate.xml
      lbench gate --baseline baseline:main --candidate latest \\
          --history H1 --history H2 --history H3 --history H4
      lbench gate --baseline history:idle_warm_p50 --candidate latest \\
          --window 10 --json gate.json

    With history:<series> (docs/history.md) the baseline is the newest --window runs of one
    machine, model and setting on one build in the archive (the candidate's own runs left out),
    shrunk to the runs after the newest change point inside the window; those runs give both the
    baseline's level and, with the candidate's, the pooled between-run spread, each run once.
    """
    from harness.analysis.gate import load_config
    from harness.analysis.gate_config import parse_gate_on
    from harness.analysis.verdicts import ratio_words
    from harness.runs.gate import GateRequest, decide_gate
    from harness.runs.gate_output import write_gate_outputs

    cfg = load_config(config, alpha=alpha, min_n=min_n, threshold=threshold, slower_rule=slower_rule)
    filters = {"--archive": archive, "--window": window, "--build": build, "--machine": machine, "--model": model,
               "--setting": setting}
    d = decide_gate(GateRequest(list(baseline or []), list(candidate or []), cfg, history=list(history or []),
                                results=results, gate_on=parse_gate_on(gate_on), backend=backend, filters=filters,
                                redact=redact, inconclusive_ok=inconclusive_ok))
    for line in d.warnings:
        print_wrapped(console, f"warning: {line}", style="yellow")
    write_gate_outputs({md_path: d.markdown, junit_path: d.junit if junit_path else "",
                        json_path: d.json if json_path else ""}, d.markdown)
    outcome, res, context, ra, rb, info = d.outcome, d.verdicts, d.context, d.baseline_runs, d.candidate_runs, d.info
    for line in context:
        print_wrapped(out, line)
    print_verdicts(res, info, ra, rb)
    for r in outcome.missing:
        print_wrapped(console, f"not enough data for {group_name(r)}: n {r.n_a} vs {r.n_b} samples, need {cfg.min_n} "
                               "each; run more repetitions (--reps) or add runs")
    for r in outcome.failures:
        print_wrapped(console, f"REGRESSION {group_name(r)}: {ratio_words(r.ratio, *r.ratio_ci)}, Holm p={r.p_value:.3g}")
    if outcome.status == "inconclusive":
        print_wrapped(console, f"inconclusive: {len(outcome.inconclusive)} gating group(s) undecided against the "
                               f"±{cfg.threshold:.0%} band" + (" (--inconclusive-ok: exit 0, which is not evidence "
                                                               "of no slowdown)" if inconclusive_ok else " (exit 3)"))
        for line in next_step_lines(outcome):
            print_wrapped(console, "next step: " + line)
    out.print(f"gate: {outcome.status}", markup=False)
    raise typer.Exit(outcome.exit_code)
