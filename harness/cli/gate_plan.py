"""``lbench gate-plan``: how many runs per side a gate needs on this machine, before measuring B."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from harness.analysis.gate_config import GateConfig
from harness.cli.options import Alpha, GateOn, Margin, ResultsDir, default, shown
from harness.cli.ui import out, print_wrapped
from harness.errors import BadInput


def _n(x: int | None) -> str:
    return "not detectable under this rule" if x is None else (f"{x}" if x <= 1000 else "> 1000")


def gate_plan(
    runs: list[str] = typer.Option(None, "--runs", metavar="RUN",
                                   help="Runs of one design (the baseline measured several times, or its history); "
                                        "repeat. At least 2."),
    sd: float = typer.Option(None, "--sd", help="A between-run sd of the per-run log median to plan for, instead "
                                                "of measuring it from --runs."),
    target: float = typer.Option(None, "--target", help="Slowdown to detect, as a fraction. "
                                                        + shown(default(GateConfig, "target"))),
    power: float = typer.Option(0.90, "--power", help="Probability of detecting it."),
    margin: Margin = None,
    alpha: Alpha = None,
    gate_on: GateOn = None,
    json_path: Path = typer.Option(None, "--json", help="Write the plan as JSON here."),
    results: ResultsDir = None,
) -> None:
    """Runs per side a gate needs to detect the --target slowdown with --power, from the
    between-run spread of earlier runs of the same design (or a given --sd): per gating group the
    sd of the per-run log median with its 95% interval, the runs per side for both slower rules
    (at the sd and at its upper bound), fewer when the runs are kept as --history, and the
    minutes a decision takes at the runs' own duration. Measures nothing.

    \b
    Examples:
      lbench gate-plan --runs R1 --runs R2 --runs R3 --runs R4 --runs R5
      lbench gate-plan --sd 0.043 --target 0.10
    """
    from harness import baselines, paths
    from harness.analysis.compare import build_groups
    from harness.analysis.gate import load_config
    from harness.analysis.gate_config import parse_gate_on
    from harness.analysis.gate_plan import plan_from_sd, plan_groups, run_minutes

    cfg = load_config(None, alpha=alpha, threshold=margin, target=target)
    if not 0 < power < 1:
        raise BadInput(f"--power must be between 0 and 1, got {power}", where="--power")
    minutes = math.nan
    if sd is not None:
        if sd < 0:
            raise BadInput(f"--sd must be >= 0, got {sd}", where="--sd")
        plans = [plan_from_sd("given --sd", sd, 0, margin=cfg.threshold, alpha=cfg.alpha, target=cfg.target,
                              power=power)]
    else:
        if not runs or len(runs) < 2:
            raise BadInput("need at least 2 runs of one design to measure the between-run spread",
                           where="--runs", hint="repeat --runs (5 or more give a usable estimate), or give --sd")
        root = paths.results_dir(results)
        resolved = [baselines.resolve_run(ref, root) for ref in runs]
        groups, _ = build_groups(resolved, resolved, gate_on=parse_gate_on(gate_on))
        plans = plan_groups(groups, margin=cfg.threshold, alpha=cfg.alpha, target=cfg.target, power=power)
        minutes = run_minutes([r.record for r in resolved])
    out.print(f"gate-plan: detect +{cfg.target:.0%} with {power:.0%} power, margin ±{cfg.threshold:.0%}, "
              f"alpha {cfg.alpha} ({len(plans)} gating group(s), Holm)", markup=False, soft_wrap=True)
    for p in plans:
        spread = (f"sd {p.sd_run:.3g}" + (f" [{p.sd_ci[0]:.3g}, {p.sd_ci[1]:.3g}] from {p.runs} runs"
                                            if p.runs else ""))
        print_wrapped(out, f"{p.group}: between-run {spread}.")
        indent = {"first": "  ", "rest": "    "}
        print_wrapped(out, f"runs per side, slower rule margin (default): {_n(p.runs_margin)}"
                           + (f" (at the sd's upper bound: {_n(p.runs_margin_upper)})" if p.runs else ""), **indent)
        print_wrapped(out, f"runs per side, slower rule zero: {_n(p.runs_zero)}"
                           + (f" (at the upper bound: {_n(p.runs_zero_upper)})" if p.runs else ""), **indent)
        if p.runs:
            print_wrapped(out, f"with these {p.runs} runs as --history: {_n(p.runs_margin_with_history)} new runs "
                               "per side (rule margin)", **indent)
        if math.isfinite(minutes) and p.runs_margin is not None and p.runs_margin <= 1000:
            print_wrapped(out, f"one run took {minutes:.1f} min here: {2 * p.runs_margin * minutes:.0f} min per "
                               "decision at the margin rule's design", **indent)
    if json_path:
        from harness.analysis.gate import _finite

        json_path.write_text(json.dumps(_finite({"target": cfg.target, "power": power, "margin": cfg.threshold,
                                                 "alpha": cfg.alpha, "run_minutes": minutes,
                                                 "groups": [p.__dict__ for p in plans]}), indent=2, default=str))
