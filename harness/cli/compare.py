"""``lbench compare``, ``lbench gate``, ``lbench baseline``, ``lbench evidence``, ``lbench gate-bench``."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from harness import baselines, paths
from harness.analysis.compare import compare_runs
from harness.analysis.gate import decide, junit, load_config, markdown, verdict_json
from harness.cli.ui import RichReporter, console, out
from harness.errors import BadInput
from harness.report.evidence import write_evidence
from harness.store import Run

COLOURS = {"slower": "red", "faster": "green", "no change": "white", "not enough data": "yellow",
           "refused": "yellow", "inconclusive": "yellow"}


def _runs(refs: list[str], results: str | None, side: str) -> list[Run]:
    if not refs:
        raise BadInput(f"no {side} run given", hint="give run ids, directories, 'latest' or baseline:NAME")
    return [baselines.resolve_run(r, paths.results_dir(results)) for r in refs]


def _warn_fingerprints(a: list[Run], b: list[Run]) -> None:
    fa, fb = baselines.fingerprint(a[0].manifest), baselines.fingerprint(b[0].manifest)
    if fa["id"] != fb["id"]:
        console.print("[yellow]warning: baseline and candidate come from different machines or engines:[/yellow] "
                      + "; ".join(baselines.differences(fa, fb)), highlight=False)


def _quality_lines(runs: list[Run], side: str) -> list[str]:
    lines = []
    for r in runs:
        for w in (r.manifest.get("quality") or {}).get("warnings", []):
            lines.append(f"warning ({side} {r.run_id}): {w}")
    return lines


def _print_verdicts(verdicts, info: dict, ra: list[Run], rb: list[Run]) -> None:
    for line in _quality_lines(ra, "A") + _quality_lines(rb, "B"):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    out.print(f"A = {', '.join(r.run_id for r in ra)} ({len(ra)} run(s)); "
              f"B = {', '.join(r.run_id for r in rb)} ({len(rb)} run(s))", markup=False)
    for v in verdicts:
        c = COLOURS.get(v.verdict, "white")
        out.print(f"[{c}]{escape(v.line())}[/{c}]", highlight=False, soft_wrap=True)
    for side, key in (("A", "shapes_a"), ("B", "shapes_b")):
        for cell, shape in info.get(key, {}).items():
            out.print(f"shape {side} {cell}: {shape.shape} ({shape.threshold_text()}; BIC {shape.bic})",
                      markup=False, highlight=False, soft_wrap=True)
    for ch in info.get("step_changes", []):
        out.print(f"wake step {ch['change']} in B for {ch['model']} · {ch['setting']}: A has {ch['a']}, "
                  f"B has {ch['b']}", markup=False, highlight=False, soft_wrap=True)


def compare(
    a: list[str] = typer.Argument(..., help="Baseline then candidate: A B. Use --baseline/--candidate to pool "
                                            "several runs per side."),
    margin: float = typer.Option(0.05, "--margin", "--threshold", help="Equivalence margin m: band [1/(1+m), 1+m]."),
    alpha: float = typer.Option(0.05, "--alpha", help="Two-sided level of the intervals (Holm across groups)."),
    min_n: int = typer.Option(5, "--min-n", help="Fewest samples per side for a verdict."),
    baseline: list[str] = typer.Option(None, "--baseline", help="More baseline runs (pooled as runs)."),
    candidate: list[str] = typer.Option(None, "--candidate", help="More candidate runs (pooled as runs)."),
    results: str = typer.Option(None, "--results", help="Results directory."),
    html: Path = typer.Option(None, "--html", help="Also write an HTML section with paired plots here."),
) -> None:
    """Compare runs per (model, setting, regime or pause, metric): one line per group, hyperfine style,
    with the ratio B/A, its 95% interval (two-level bootstrap, runs then samples), n per side, the
    smallest slowdown the data could detect, and a verdict against the equivalence band
    (slower / no change / faster / inconclusive / refused). See docs/statistics.md.

    Examples:
      lbench compare 20261130T0101Z-idle-aaaa 20261130T0202Z-idle-bbbb
      lbench compare A1 B1 --baseline A2 --candidate B2
      lbench compare baseline:main latest --html /tmp/compare.html
    """
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import GateConfig, verdict_config

    if len(a) != 2:
        raise BadInput(f"compare takes two runs (A B), got {len(a)}", hint="pool more with --baseline/--candidate")
    cfg = load_config(None, **GateConfig(alpha, min_n, margin).__dict__)
    ra = _runs([a[0], *(baseline or [])], results, "baseline")
    rb = _runs([a[1], *(candidate or [])], results, "candidate")
    _warn_fingerprints(ra, rb)
    res, info = judge_runs(ra, rb, verdict_config(cfg))
    _print_verdicts(res, info, ra, rb)
    if html:
        from harness.report.compare import write_compare_html

        out.print(f"html: {write_compare_html(ra, rb, res, html)}", markup=False)


def gate(
    baseline: list[str] = typer.Option(None, "--baseline", help="Baseline run(s); repeat: pooled as runs."),
    candidate: list[str] = typer.Option(None, "--candidate", help="Candidate run(s); repeat: pooled as runs."),
    threshold: float = typer.Option(None, "--margin", "--threshold",
                                    help="Equivalence margin m (default 0.05): band [1/(1+m), 1+m]."),
    alpha: float = typer.Option(None, "--alpha", help="Two-sided level (default 0.05); Holm across groups."),
    min_n: int = typer.Option(None, "--min-n", help="Fewest samples per side and group (default 5)."),
    inconclusive_ok: bool = typer.Option(False, "--inconclusive-ok", help="Exit 0 instead of 3 when inconclusive."),
    config: Path = typer.Option(None, "--config", help="TOML with [gate] and per-metric [thresholds]."),
    junit_path: Path = typer.Option(None, "--junit", help="Write JUnit XML here."),
    json_path: Path = typer.Option(None, "--json", help="Write the JSON verdict here."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
    results: str = typer.Option(None, "--results", help="Results directory."),
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home paths, user and host names in "
                                                                   "the Markdown, JSON and JUnit written."),
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
    from harness.analysis.gate import verdict_config

    cfg = load_config(config, alpha=alpha, min_n=min_n, threshold=threshold)
    ra, rb = _runs(baseline, results, "baseline"), _runs(candidate, results, "candidate")
    _warn_fingerprints(ra, rb)
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
    _print_verdicts(res, info, ra, rb)
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


baseline_app = typer.Typer(help="Save and list baselines (keyed by machine fingerprint).", no_args_is_help=True)


@baseline_app.command("save")
def baseline_save(
    run: str = typer.Argument("latest", help="Run to keep as the baseline."),
    name: str = typer.Option("main", "--name", help="Baseline name (use as baseline:NAME)."),
    results: str = typer.Option(None, "--results", help="Results directory."),
) -> None:
    """Keep a run as a named baseline in the lbench cache.

    Examples:
      lbench baseline save latest --name main
    """
    r = baselines.resolve_run(run, paths.results_dir(results))
    dest = baselines.save(r, name)
    fp = baselines.fingerprint(r.manifest)
    out.print(f"baseline {name!r} = run {r.run_id} -> {dest} (fingerprint {fp['id']})", markup=False)


@baseline_app.command("show")
def baseline_show() -> None:
    """List baselines with their fingerprints.

    Examples:
      lbench baseline show
    """
    t = Table(title=f"baselines in {baselines.root()}")
    for col in ("name", "run", "saved", "fingerprint", "chip", "engine build"):
        t.add_column(col)
    for b in baselines.list_baselines():
        fp = b["fingerprint"]
        t.add_row(b["name"], b["run_id"], b["saved_at"], fp["id"], str(fp.get("chip")), str(fp.get("engine_build")))
    out.print(t)


def evidence(
    runs: list[str] = typer.Argument(..., help="Runs to bundle."),
    output: Path = typer.Option(Path("evidence"), "--out", "-o", help="Directory for evidence.md and PNGs."),
    redact: bool = typer.Option(True, "--redact/--no-redact", help="Replace home path, user and host names."),
    results: str = typer.Option(None, "--results", help="Results directory."),
) -> None:
    """Write a Markdown bundle for a GitHub issue: summary, exact command, table, key plot (PNG),
    environment in a collapsed block. Home paths, user and host names are redacted by default.

    Examples:
      lbench evidence latest -o /tmp/ev
      lbench evidence RUN_A RUN_B --no-redact
    """
    rs = [baselines.resolve_run(r, paths.results_dir(results)) for r in runs]
    out.print(f"evidence: {write_evidence(rs, output, redact=redact)}", markup=False)


def gate_bench(
    run: str = typer.Argument("latest", help="A real idle run whose samples are resampled."),
    ns: str = typer.Option("3,5,10,20", "--n", help="Samples per pause per side to try."),
    trials: int = typer.Option(60, "--trials", help="Pseudo-run pairs per (n, condition)."),
    slowdowns: str = typer.Option("0.10,0.25", "--slowdowns", help="Injected slowdowns."),
    aa: str = typer.Option(None, "--aa", help="A second real run of the same setup: also gate the real A/A pair."),
    results: str = typer.Option(None, "--results", help="Results directory."),
) -> None:
    """Benchmark the gate (not a test): false-alarm rate on A/A pairs and detection rate on injected
    slowdowns, per sample size, from a real run's measured samples.

    Examples:
      lbench gate-bench latest
      lbench gate-bench RUN1 --aa RUN2 --n 3,5,10 --trials 100
    """
    from harness.analysis.gate import GateConfig
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
