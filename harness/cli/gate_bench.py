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


def _one(value: str | None) -> list[str] | None:
    """A design knob is one level for every run (not an axis: the sides must differ only in B's model)."""
    if value is None:
        return None
    if "," in value:
        raise BadInput(f"{value!r} is a list; gate-bench runs one design", where="design knob",
                       hint="give one value (compare designs with scripts/design_spread.sh)")
    return [value]


def gate_bench(
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="Model of sides A and A2 (GGUF path or alias)."),
    slow_model: str = typer.Option(None, "--slow-model", help="Model of side B. "
                                   + shown("--model with --extra-layers more transformer blocks")),
    extra_layers: int = typer.Option(2, "--extra-layers", help="Blocks added to --model for side B when "
                                                                       "--slow-model is not given."),
    trials: int = typer.Option(None, "--trials", help="Independent trials; each gives one A/A and one slowed decision. "
                                                      + shown("10; with --simulate 400 per cell")),
    simulate: bool = typer.Option(False, "--simulate", help="Measure nothing: simulate runs with the between-run "
                                                            "spreads measured in earlier sessions and print the "
                                                            "gate's and ab's error rates per design."),
    seed: int = typer.Option(0, "--seed", help="Seed of --simulate."),
    sd: list[float] = typer.Option(None, "--sd", help="With --simulate: a between-run spread to simulate (sd of "
                                   "the per-run log median, e.g. from scripts/variance_sources.py); repeat. "
                                   + shown("the spreads of earlier sessions")),
    within_sd: float = typer.Option(None, "--within-sd", help="With --simulate: within-run log sd of the samples "
                                    "(measured: scripts/variance_sources.py). " + shown("0.05, assumed")),
    stall_p: float = typer.Option(None, "--stall-p", help="With --simulate: fraction of samples that stall "
                                  "(measured: scripts/variance_sources.py). " + shown("0.10, assumed")),
    runs_per_side: int = typer.Option(2, "--runs-per-side", help="Runs per side in each decision (the gate's design)."),
    pauses: str = typer.Option("0,1.5", "--pauses", help="Pause grid of every run, seconds."),
    reps: int = typer.Option(5, "--reps", help="Repetitions per pause in every run."),
    warmup: int = typer.Option(None, "--warmup", help="Unmeasured warm-up requests per run. " + shown("3, as idle")),
    threads: str = typer.Option(None, "--threads", help="Design knob: llama-server -t/-tb in every run. "
                                + shown("not passed")),
    cpus: str = typer.Option(None, "--cpus", help="Design knob: every server under taskset -c (e.g. 1). "
                             + shown("not pinned")),
    client_cpus: str = typer.Option(None, "--client-cpus", help="Design knob: pin lbench itself to these CPUs "
                                    "(e.g. 0). " + shown("not pinned")),
    omp_wait: str = typer.Option(None, "--omp-wait-policy", help="Design knob: OMP_WAIT_POLICY of every server "
                                 "(active, passive). " + shown("not set")),
    gate_on: str = typer.Option(None, "--gate-on", help="Which groups vote, as in lbench gate ('warm', 'regimes' "
                                "or pauses). " + shown("warm")),
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
      # the pinned design of docs/statistics.md:
      lbench gate-bench -m tiny-q8 --threads 1 --cpus 1 --client-cpus 0 \\
          --runs-per-side 3
      lbench gate-bench --simulate --trials 400 --seed 0
      lbench gate-bench --simulate --sd 0.2 --sd 0.38 --within-sd 0.08 \\
          --stall-p 0.05 --reps 8
    """
    if simulate:
        return simulate_gate_bench(trials or 400, seed, margin, alpha, results, spreads=sd or None, reps=reps,
                                   within_sd=within_sd, stall_p=stall_p)
    if sd or within_sd is not None or stall_p is not None:
        raise BadInput("--sd, --within-sd and --stall-p describe simulated runs", where="gate-bench",
                       hint="add --simulate, or leave them out to measure real runs")
    trials = trials or 10
    from harness import paths
    from harness.analysis.gate import load_config
    from harness.cli.idle import build_spec
    from harness.runs.gate_bench import measure_gate_bench
    from harness.runs.executors import RunOptions, get_executor
    from harness.spec import parse_pauses

    if trials < 1 or runs_per_side < 1:
        raise BadInput("--trials and --runs-per-side must be >= 1", where=f"{trials} / {runs_per_side}")
    slow_model = slow_model or slowed_alias(model, extra_layers)
    cfg = load_config(None, alpha=alpha, threshold=margin)
    from harness.analysis.gate_config import parse_gate_on

    groups_on = parse_gate_on(gate_on)
    spec_a = build_spec(None, models=[model], pauses_s=parse_pauses(pauses), reps=reps, warmup=warmup,
                        threads=_one(threads), cpus=_one(cpus), omp_wait=_one(omp_wait), client_cpus=client_cpus)
    spec_b = copy.deepcopy(spec_a)
    spec_b.models = [slow_model]
    spec_b.validate()
    design = {"model": model, "slow_model": slow_model, "trials": trials, "runs_per_side": runs_per_side,
              "pauses_s": spec_a.pauses_s, "reps": spec_a.reps, "warmup": spec_a.warmup, "threads": threads,
              "cpus": cpus, "client_cpus": client_cpus, "omp_wait_policy": omp_wait, "gate_on": gate_on or "warm",
              "margin": cfg.threshold, "alpha": cfg.alpha}

    def show(row: dict) -> None:
        console.print(f"trial {row['trial']}: {row['condition']} -> gate {row['gate_status']} "
                      f"(worst {row['worst_ratio']:.3f}x [{row['worst_ratio_ci_low']:.3f}, "
                      f"{row['worst_ratio_ci_high']:.3f}])", markup=False, highlight=False)

    with RichReporter() as rep:
        prep_a = get_executor("idle").prepare(spec_a, RunOptions(llama_server=llama_server, results=results), rep)
        prep_b = get_executor("idle").prepare(spec_b, RunOptions(llama_server=llama_server, results=results), rep)
        bench = measure_gate_bench({"A": prep_a, "A2": prep_a, "B": prep_b}, cfg, design,
                                   results_root=paths.results_dir(results), trials=trials,
                                   runs_per_side=runs_per_side, reporter=rep, on_decision=show, gate_on=groups_on)
    bench_id, out_dir, rates, findings = bench.bench_id, bench.out_dir, bench.rates, bench.findings
    out.print(f"gate-bench {bench_id}: {trials} trials x {runs_per_side} runs per side, {model} vs {slow_model}, "
              f"pauses {pauses} s, {spec_a.reps} reps, margin {cfg.threshold:.0%}", markup=False, soft_wrap=True)
    for r in rates:
        out.print(f"  {r['measures']}: {r['failed']}/{r['decisions']} = {r['rate']:.0%} "
                  f"[{r['rate_ci_low']:.0%}, {r['rate_ci_high']:.0%}]  (pass {r['passed']}, inconclusive "
                  f"{r['inconclusive']}, refused {r['refused']}; {r['minutes_per_decision']:.1f} min per decision)",
                  markup=False, soft_wrap=True)
    for line in findings:
        out.print(line, markup=False, soft_wrap=True)
    out.print(f"saved: {out_dir}/decisions.csv, summary.json", markup=False, soft_wrap=True)


def _pct(r: dict, upper: bool = False) -> str:
    text = f"{r['rate']:.1%}"
    return text + (f" (<={r['ci'][1]:.1%})" if upper else "")


def _spread(r: dict) -> str:
    name = r["spread"]
    return name if name.startswith("given sd") else f"{name[:33]} {r['run_sd']:.3g}"


def simulate_gate_bench(trials: int, seed: int, margin: float | None, alpha: float | None, results: str | None, *,
                        spreads: list[float] | None = None, reps: int = 5, within_sd: float | None = None,
                        stall_p: float | None = None) -> None:
    """``--simulate``: the figures of harness.analysis.gate_sim, printed and saved with a bench id.
    ``spreads``/``within_sd``/``stall_p``: the variance components to simulate (measured ones,
    from scripts/variance_sources.py); by default the spreads of earlier sessions."""
    from harness import paths
    from harness.analysis.gate import load_config
    from harness.analysis.gate_sim import RunModel, design_label, simulate_ab, simulate_gate
    from harness.atomic import atomic_write_text
    from harness.store import benchmark_dir, new_run_id

    if trials < 10:
        raise BadInput(f"--trials must be >= 10 with --simulate, got {trials}", where="--trials")
    for name, value, low_open, top in (("--sd", min(spreads or [0.1]), True, 3.0),
                                       ("--within-sd", within_sd, False, 3.0), ("--stall-p", stall_p, False, 1.0)):
        if value is None:
            continue
        if not ((value > 0 if low_open else value >= 0) and value <= top):
            raise BadInput(f"{name} must be in {'(' if low_open else '['}0, {top:g}], got {value}", where=name)
    cfg = load_config(None, alpha=alpha, threshold=margin)
    bench_id = new_run_id("gate-bench")  # the run-id kinds the docs may cite (tests/test_readme.py)
    base = RunModel(0.0, reps=reps)
    model = RunModel(0.0, reps=reps, within_sd=base.within_sd if within_sd is None else within_sd,
                     stall_p=base.stall_p if stall_p is None else stall_p)
    measured = within_sd is not None and stall_p is not None
    out.print(f"gate-bench --simulate {bench_id}: {trials} trials per cell, seed {seed}, margin {cfg.threshold:.0%}, "
              f"alpha {cfg.alpha}; runs of {model.reps} reps, within-run sd {model.within_sd} with "
              f"{model.stall_p:.0%} stalls of {model.stall_factor}x ({'given' if measured else 'assumed'}), "
              f"between-run spread {'given' if spreads else 'from earlier sessions measurements'} "
              "(simulated runs, not timings).", markup=False, soft_wrap=True)
    table = ({f"given sd {v:g}": RunModel(v, reps=reps, within_sd=model.within_sd, stall_p=model.stall_p)
              for v in spreads} if spreads else None)
    rows = simulate_gate(cfg, trials=trials, seed=seed, spreads=table, reps=reps)
    out.print("gate (one gating group): fail = a slower verdict; runs per side, +hN: with N history runs of the "
              "baseline (--history); (<=x%): the exact 95% upper bound", markup=False, soft_wrap=True)
    head = (f"{'spread (sd of log run median)':<40} {'rule':<6} {'runs':>5} {'fail@1':>15} {'fail@edge':>15} "
            f"{'fail+10%':>8} {'fail+20%':>8} {'incon@1':>7} {'pass@1':>6} {'cover':>5} {'ok-pass+10%':>11}")
    out.print(head, markup=False, soft_wrap=True)
    for r in rows:
        out.print(f"{_spread(r):<40} {r['rule']:<6} {design_label(r):>5} "
                  f"{_pct(r['fail A/A (ratio 1)'], True):>15} {_pct(r['fail band edge (1+m)'], True):>15} "
                  f"{_pct(r['fail +10%']):>8} {_pct(r['fail +20%']):>8} {_pct(r['inconclusive at 1']):>7} "
                  f"{_pct(r['pass at 1']):>6} {r['coverage A/A (ratio 1)']:>5.1%} "
                  f"{_pct(r['passed with --inconclusive-ok at +10%']):>11}", markup=False, soft_wrap=True)
    out_dir = benchmark_dir(paths.results_dir(results), bench_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = {"schema_version": 1, "bench_id": bench_id, "trials": trials, "seed": seed, "margin": cfg.threshold,
             "alpha": cfg.alpha, "run_model": model.__dict__, "gate": rows, "ab": []}
    atomic_write_text(out_dir / "simulation.json", json.dumps(saved, indent=2, default=str))  # kept if ab fails
    ab_rows = simulate_ab(cfg, trials=max(trials // 2, 10), seed=seed, spreads=table, reps=reps)
    out.print(f"ab ({max(trials // 2, 10)} trials per cell): fail / pass rates and mean rounds; design = min-max "
              "rounds and spending", markup=False, soft_wrap=True)
    out.print(f"{'spread':<40} {'design':<10} {'fail@1':>15} {'fail@edge':>15} {'pass@edge':>15} {'pass@1':>6} "
              f"{'fail+10%':>8} {'fail+20%':>8} {'rounds@1':>8} {'rounds+10%':>10}", markup=False, soft_wrap=True)
    for r in ab_rows:
        design = f"{r['min_rounds']}-{r['max_rounds']} {r['spending']}"
        out.print(f"{_spread(r):<40} {design:<10} "
                  f"{_pct(r['fail A/A (ratio 1)'], True):>15} {_pct(r['fail band edge (1+m)'], True):>15} "
                  f"{_pct(r['pass band edge (1+m)'], True):>15} {_pct(r['pass A/A (ratio 1)']):>6} "
                  f"{_pct(r['fail +10%']):>8} {_pct(r['fail +20%']):>8} "
                  f"{r['mean rounds A/A (ratio 1)']:>8.2f} {r['mean rounds +10%']:>10.2f}", markup=False, soft_wrap=True)
    atomic_write_text(out_dir / "simulation.json", json.dumps({**saved, "ab": ab_rows}, indent=2, default=str))
    out.print(f"saved: {out_dir}/simulation.json", markup=False, soft_wrap=True)
