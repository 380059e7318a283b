"""``lbench gate``: the CI regression gate (its error rates: ``lbench gate-bench --simulate``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from harness.errors import BadInput
from harness.history.gate_hook import WINDOW, is_history_ref

from harness.cli.options import Alpha, GateOn, History, InconclusiveOk, Margin, MinN, ResultsDir, SlowerRule, shown
from harness.cli.ui import console, out, print_wrapped
from harness.cli.verdicts import group_name, next_step_lines, print_verdicts, resolve_sides, warn_fingerprints


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
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import decide, junit, load_config, markdown, verdict_config, verdict_json
    from harness.analysis.gate_config import parse_gate_on
    from harness.analysis.verdicts import ratio_words

    cfg = load_config(config, alpha=alpha, min_n=min_n, threshold=threshold, slower_rule=slower_rule)
    groups_on = parse_gate_on(gate_on)
    filters = {"--archive": archive, "--window": window, "--build": build, "--machine": machine, "--model": model,
               "--setting": setting}
    hb = None
    if any(is_history_ref(b) for b in baseline or []):
        from harness.cli.gate_history import history_sides

        ra, rb, hb = history_sides(baseline, candidate, results, history=history, archive=archive, window=window,
                                   build=build, machine=machine, model=model, setting=setting)
    else:
        given = [k for k, v in filters.items() if v is not None]
        if given:
            raise BadInput(f"{', '.join(given)} only apply to a history baseline", where=given[0],
                           hint="give --baseline history:<series> (docs/history.md), or leave them out")
        ra, rb = resolve_sides(baseline, candidate, results)
    rh = resolve_history(history, results)
    if backend is not None:  # every run must have used that backend: exit 2 naming the others
        from harness.engines import backends
        from harness.record import backend_of

        backends.get(backend)
        other = [f"{r.run_id} ({backend_of(r.record)})" for r in [*ra, *rb, *rh] if backend_of(r.record) != backend]
        if other:
            raise BadInput(f"runs of another backend than {backend}: {', '.join(other)}", where="--backend",
                           hint="give runs of one backend (lbench runs shows each run's engine), or drop --backend")
    from harness.baselines import refuse_same_runs

    refuse_same_runs(ra, rb)  # a run against itself: exit 2, not a verdict
    warn_fingerprints(ra, rb)
    vcfg = verdict_config(cfg)
    vcfg.pool_spread = hb is not None  # the window is the baseline and its spread: each run counted once
    res, info = judge_runs(ra, rb, vcfg, gate_on=groups_on, history=rh)
    outcome = decide(res, cfg, inconclusive_ok=inconclusive_ok)
    names_a, names_b = [r.run_id for r in ra], [r.run_id for r in rb]
    context: list[str] = []
    if hb is not None:
        from harness.cli.gate_history import pooled_lines

        context = hb.lines() + pooled_lines(res)
        info["history_baseline"] = hb.as_dict()
    from harness.probes.host import virtual_status

    info["virtual"] = virtual_status([r.record.host.facts for r in ra + rb])  # on every verdict, virtual or not
    if info["virtual"]["note"]:
        context = [info["virtual"]["note"], *context]
    from harness.report.redact import Redactor

    red, red_xml = Redactor(redact, runs=ra + rb), Redactor(redact, runs=ra + rb, xml=True)
    label_a = f"history:{hb.series} ({', '.join(names_a)})" if hb is not None else ", ".join(names_a)
    md = red(markdown(outcome, label_a, ", ".join(names_b), context=context))
    from harness.atomic import atomic_write_many

    props = {"history_baseline": f"history:{hb.series}", "history_runs": ",".join(names_a),
             "history_build": str(hb.build), "history_window": str(hb.window),
             "history_dropped_for_drift": ",".join(hb.dropped)} if hb is not None else {}
    outputs = {md_path: md, junit_path: red_xml(junit(outcome, properties=props, context=context))
               if junit_path else "",
               json_path: red(verdict_json(outcome, names_a, names_b, info)) if json_path else ""}
    # all three staged first, then renamed into place together: never one new beside two old
    try:
        atomic_write_many({Path(p): text.encode() for p, text in outputs.items() if p})
    except OSError as exc:
        raise BadInput(f"cannot write the gate's output: {exc.strerror or exc}", where=str(exc.filename or ""),
                       hint="give --markdown/--junit/--json paths in a folder that exists and is writable") from None
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as fh:
            fh.write(md)
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


def resolve_history(refs: list[str] | None, results: str | None) -> list:
    from harness import baselines, paths

    root = paths.results_dir(results)
    return [baselines.resolve_run(ref, root) for ref in refs or []]
