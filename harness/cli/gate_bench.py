"""``lbench gate-bench``: the gate's false-alarm and detection rates, measured on real runs."""

from __future__ import annotations

import copy
import json

import typer

from harness.cli.options import Alpha, LlamaServer, Margin, ResultsDir, shown
from harness.cli.ui import RichReporter, console, out
from harness.errors import BadInput

DEFAULT_MODEL = "llama3.2-1b-q4"


def slowed_alias(model: str, extra_layers: int) -> str:
    """``llama3.2-1b-q4`` -> ``llama3.2-1b+2l-q4`` (the same tensors, ``extra_layers`` more blocks)."""
    from harness.models import presets

    parsed = presets.parse_synthetic_alias(model)
    if parsed is None:
        raise BadInput(f"--model {model!r} is not a synthetic preset alias, so lbench cannot build a deeper twin",
                       where="--model", hint="use a preset such as llama3.2-1b-q4, or give the slowed model with "
                                             "--slow-model")
    shape, quant = parsed
    if not 1 <= extra_layers <= presets.MAX_EXTRA_LAYERS:
        raise BadInput(f"--extra-layers must be 1..{presets.MAX_EXTRA_LAYERS}, got {extra_layers}")
    return f"{shape.name}+{extra_layers}l-{quant.name}"


def gate_bench(
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="Model of sides A and A2 (GGUF path or alias)."),
    slow_model: str = typer.Option(None, "--slow-model", help="Model of side B. "
                                   + shown("--model with --extra-layers more transformer blocks")),
    extra_layers: int = typer.Option(2, "--extra-layers", help="Blocks added to --model for side B when --slow-model is not given."),
    trials: int = typer.Option(10, "--trials", help="Independent trials; each gives one A/A and one slowed decision."),
    runs_per_side: int = typer.Option(2, "--runs-per-side", help="Runs per side in each decision (the gate's design)."),
    pauses: str = typer.Option("0,1.5", "--pauses", help="Pause grid of every run, seconds."),
    reps: int = typer.Option(5, "--reps", help="Repetitions per pause in every run."),
    margin: Margin = None,
    alpha: Alpha = None,
    llama_server: LlamaServer = None,
    results: ResultsDir = None,
) -> None:
    """Measure the gate's error rates on REAL runs (a benchmark, not a test): per trial, sides A and
    A2 (same model, same binary) and B (a deeper twin of the model: a real slowdown whose size is
    measured, not assumed) run on fresh servers in rotated order; the gate then decides A vs A2
    (a "slower" is a false alarm) and A vs B (a "slower" is a detection). Trials share no runs,
    so the rates get exact (Clopper-Pearson) 95% intervals. Every run keeps its own run id.

    \b
    Examples:
      lbench gate-bench
      lbench gate-bench -m tiny-q8 --trials 3 --reps 5
      lbench gate-bench -m my.gguf --slow-model my-deeper.gguf --runs-per-side 3
    """
    import pandas as pd

    from harness import paths
    from harness.analysis.compare import judge_runs
    from harness.analysis.gate import decide, load_config, verdict_config
    from harness.analysis.gate_bench import error_rates, sentences, slowdown_size
    from harness.cli.idle import build_spec
    from harness.runs.gate_bench import Relabeled, run_gate_bench
    from harness.kinds import RunOptions, get_kind
    from harness.spec import parse_pauses
    from harness.atomic import atomic_write_text
    from harness.store import new_run_id

    if trials < 1 or runs_per_side < 1:
        raise BadInput("--trials and --runs-per-side must be >= 1", where=f"{trials} / {runs_per_side}")
    slow_model = slow_model or slowed_alias(model, extra_layers)
    cfg = load_config(None, alpha=alpha, threshold=margin)
    spec_a = build_spec(None, models=[model], pauses_s=parse_pauses(pauses), reps=reps)
    spec_b = copy.deepcopy(spec_a)
    spec_b.models = [slow_model]
    spec_b.validate()
    root = paths.results_dir(results)
    bench_id = new_run_id("gate-bench")
    out_dir = root / "benchmarks" / bench_id
    decisions: list[dict] = []

    def keep(row: dict) -> None:  # every finished decision is on disk at once
        decisions.append(row)
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / "decisions.csv", pd.DataFrame(decisions).to_csv(index=False))
        console.print(f"trial {row['trial']}: {row['condition']} -> gate {row['gate_status']} "
                      f"(worst {row['worst_ratio']:.3f}x [{row['worst_ratio_ci_low']:.3f}, "
                      f"{row['worst_ratio_ci_high']:.3f}])", markup=False, highlight=False)

    with RichReporter() as rep:
        prep_a = get_kind("idle").prepare(spec_a, RunOptions(llama_server=llama_server, results=results), rep)
        prep_b = get_kind("idle").prepare(spec_b, RunOptions(llama_server=llama_server, results=results), rep)
        label = prep_a.models[0].label
        done = run_gate_bench({"A": prep_a, "A2": prep_a, "B": prep_b}, cfg, bench_id=bench_id, trials=trials,
                              runs_per_side=runs_per_side, model_label=label, reporter=rep, on_decision=keep)
    a_all = [r for t in done for r in t.runs["A"] + t.runs["A2"]]
    b_all = [Relabeled(r, label) for t in done for r in t.runs["B"]]
    size_verdicts, _ = judge_runs(a_all, b_all, verdict_config(cfg))
    rates = error_rates(pd.DataFrame(decisions))
    size = slowdown_size(size_verdicts)
    findings = sentences(rates, size)
    design = {"model": model, "slow_model": slow_model, "trials": trials, "runs_per_side": runs_per_side,
              "pauses_s": spec_a.pauses_s, "reps": spec_a.reps, "margin": cfg.threshold, "alpha": cfg.alpha,
              "gate_outcome_of_pooled_size": decide(size_verdicts, cfg).status}
    summary = {"schema_version": 1, "bench_id": bench_id, "design": design,
               "rates": rates.to_dict("records"), "slowdown_size": size, "findings": findings,
               "run_ids": {side: [r.run_id for t in done for r in t.runs[side]] for side in ("A", "A2", "B")}}
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    out.print(f"gate-bench {bench_id}: {trials} trials x {runs_per_side} runs per side, {model} vs {slow_model}, "
              f"pauses {pauses} s, {spec_a.reps} reps, margin {cfg.threshold:.0%}", markup=False, soft_wrap=True)
    for r in rates.to_dict("records"):
        out.print(f"  {r['measures']}: {r['failed']}/{r['decisions']} = {r['rate']:.0%} "
                  f"[{r['rate_ci_low']:.0%}, {r['rate_ci_high']:.0%}]  (pass {r['passed']}, inconclusive "
                  f"{r['inconclusive']}, refused {r['refused']}; {r['minutes_per_decision']:.1f} min per decision)",
                  markup=False, soft_wrap=True)
    for line in findings:
        out.print(line, markup=False, soft_wrap=True)
    out.print(f"saved: {out_dir}/decisions.csv, summary.json", markup=False, soft_wrap=True)
