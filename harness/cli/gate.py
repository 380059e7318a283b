"""``lbench gate`` (the CI regression gate) and ``lbench gate-bench`` (the gate's error rates)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from harness.cli.options import Alpha, InconclusiveOk, Margin, MinN, ResultsDir
from harness.cli.ui import RichReporter, console, out
from harness.cli.verdicts import print_verdicts, resolve_runs, warn_fingerprints
from harness.errors import BadInput


def gate(
    baseline: list[str] = typer.Option(None, "--baseline", help="Baseline run(s); repeat: pooled as runs."),
    candidate: list[str] = typer.Option(None, "--candidate", help="Candidate run(s); repeat: pooled as runs."),
    threshold: Margin = None,
    alpha: Alpha = None,
    min_n: MinN = None,
    inconclusive_ok: InconclusiveOk = False,
    config: Path = typer.Option(None, "--config", help="TOML with \\[gate] and per-metric \\[thresholds]."),
    junit_path: Path = typer.Option(None, "--junit", help="Write JUnit XML here."),
    json_path: Path = typer.Option(None, "--json", help="Write the JSON verdict here."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
    results: ResultsDir = None,
) -> None:
    """Regression gate for CI on latency_ms (the primary metric; others are reported, not voting).

    Exit 0 pass (every gating group no change or faster), 1 regression (a group's interval lies above
    the band after Holm correction, including a new or earlier wake step in the candidate), 2 bad
    input or too few samples (a regression elsewhere still exits 1), 3 inconclusive (an interval
    straddles the band; --inconclusive-ok maps it to 0). See docs/statistics.md.

    Examples:
      lbench gate --baseline baseline:main --candidate latest
      lbench gate --baseline A1 --baseline A2 --candidate B1 --candidate B2 --junit gate.xml --json gate.json
    """
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import decide, junit, load_config, markdown, verdict_config, verdict_json

    cfg = load_config(config, alpha=alpha, min_n=min_n, threshold=threshold)
    ra, rb = resolve_runs(baseline, results, "baseline"), resolve_runs(candidate, results, "candidate")
    warn_fingerprints(ra, rb)
    res, info = judge_runs(ra, rb, verdict_config(cfg))
    outcome = decide(res, cfg, inconclusive_ok=inconclusive_ok)
    names_a, names_b = [r.run_id for r in ra], [r.run_id for r in rb]
    md = markdown(outcome, ", ".join(names_a), ", ".join(names_b))
    if md_path:
        md_path.write_text(md)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as fh:
            fh.write(md)
    if junit_path:
        junit_path.write_text(junit(outcome))
    if json_path:
        json_path.write_text(verdict_json(outcome, names_a, names_b, info))
    print_verdicts(res, info, ra, rb)
    for r in outcome.missing:
        console.print(f"not enough data: {r.key()}: n={r.n_a} baseline / {r.n_b} candidate, need "
                      f"{cfg.min_n} each; run more repetitions (--reps)", markup=False)
    for r in outcome.failures:
        console.print(f"REGRESSION {r.key()}: {r.ratio:.3f}x [{r.ratio_ci[0]:.3f}, {r.ratio_ci[1]:.3f}], "
                      f"Holm p={r.p_value:.3g}", markup=False)
    if outcome.status == "inconclusive":
        console.print(f"inconclusive: {len(outcome.inconclusive)} group(s) straddle the ±{cfg.threshold:.0%} band; "
                      "add runs (--baseline/--candidate) or reps" + (" (--inconclusive-ok: exit 0)"
                                                                      if inconclusive_ok else " (exit 3)"),
                      markup=False)
    out.print(f"gate: {outcome.status}", markup=False)
    raise typer.Exit(outcome.exit_code)


def gate_bench(
    run: str = typer.Argument("latest", help="A real idle run whose samples are resampled."),
    ns: str = typer.Option("3,5,10,20", "--n", help="Samples per pause per side to try."),
    trials: int = typer.Option(60, "--trials", help="Pseudo-run pairs per (n, condition)."),
    slowdowns: str = typer.Option("0.10,0.25", "--slowdowns", help="Injected slowdowns."),
    aa: str = typer.Option(None, "--aa", help="A second real run of the same setup: also gate the real A/A pair."),
    results: ResultsDir = None,
) -> None:
    """Benchmark the gate (not a test): false-alarm rate on A/A pairs and detection rate on injected
    slowdowns, per sample size, from a real run's measured samples.

    Examples:
      lbench gate-bench latest
      lbench gate-bench RUN1 --aa RUN2 --n 3,5,10 --trials 100
    """
    from harness import baselines, paths
    from harness.analysis.compare import compare_runs
    from harness.analysis.gate import GateConfig, decide
    from harness.analysis.gate_bench import recommend, simulate
    from harness.analysis.stats import measured

    try:
        n_list = [int(x) for x in ns.split(",") if x.strip()]
        slow = [float(x) for x in slowdowns.split(",") if x.strip()]
    except ValueError:
        raise BadInput("--n takes integers and --slowdowns numbers, comma-separated", where=f"{ns} / {slowdowns}") \
            from None
    if not n_list or min(n_list) < 1 or trials < 1:
        raise BadInput("--n values and --trials must be >= 1")
    r = baselines.resolve_run(run, paths.results_dir(results))
    samples = measured(r.table("samples"))
    if samples.empty:
        raise BadInput(f"run {r.run_id} has no measured idle samples")
    cfg = GateConfig()
    with RichReporter() as rep:
        rep.cell("gate trials", len(n_list) * (1 + len(slow)) * trials)
        table = simulate(samples, ns=n_list, trials=trials, slowdowns=slow, cfg=cfg, on_trial=rep.advance)
    t = Table(title=f"gate on resampled run {r.run_id} (threshold {cfg.threshold:.0%}, alpha {cfg.alpha})")
    for col in ("samples per pause per side", "condition", "trials", "gate failed", "refused", "rate"):
        t.add_column(col, justify="right")
    for row in table.to_dict("records"):
        label = "false alarms" if row["condition"] == "A/A" else f"detected {row['condition']}"
        t.add_row(str(row["n_per_pause"]), label, str(row["trials"]), str(row["gate_failed"]), str(row["refused"]),
                  f"{row['rate']:.1%}")
    out.print(t)
    rec = recommend(table)
    out.print(f"recommended repetitions: {rec if rec else 'none of those tried'} "
              "(false alarms <= 5%, +25% detected >= 80%, never refused)", markup=False)
    out_path = r.dir / "gate-bench.csv"
    table.to_csv(out_path, index=False)
    out.print(f"figures saved to {out_path}", markup=False)
    if aa:
        r2 = baselines.resolve_run(aa, paths.results_dir(results))
        res, _ = compare_runs([r], [r2], alpha=cfg.alpha, min_n=cfg.min_n)
        outcome = decide(res, cfg)
        out.print(f"real A/A pair {r.run_id} vs {r2.run_id}: gate {outcome.status} "
                  f"({len(outcome.failures)} failing groups of {len(res)})", markup=False)
