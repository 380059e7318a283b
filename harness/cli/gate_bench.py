"""``lbench gate-bench``: the gate's false-alarm and detection rates, measured on real runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from harness.cli.options import Alpha, LlamaServer, Margin, ResultsDir, shown
from harness.cli.ui import RichReporter, console, out
from harness.errors import BadInput

if TYPE_CHECKING:
    from harness.store import Run

DEFAULT_MODEL = "llama3.2-1b-q4"
AB_MODEL = "llama3.2-1b-q8"  # --ab: the model of lbench ab's default spec


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
    seed: int = typer.Option(0, "--seed", help="Seed of --simulate; with --ab, trial n's round orders use seed + n."),
    sd: list[float] = typer.Option(None, "--sd", help="With --simulate: a between-run spread to simulate (sd of "
                                   "the per-run log median, e.g. from scripts/variance_sources.py); repeat. "
                                   + shown("the spreads of earlier sessions")),
    within_sd: float = typer.Option(None, "--within-sd", help="With --simulate: within-run log sd of the samples "
                                    "(measured: scripts/variance_sources.py). " + shown("0.05, assumed")),
    stall_p: float = typer.Option(None, "--stall-p", help="With --simulate: fraction of samples that stall "
                                  "(measured: scripts/variance_sources.py). " + shown("0.10, assumed")),
    runs_per_side: int = typer.Option(2, "--runs-per-side", help="Runs per side in each decision (the gate's design)."),
    pauses: str = typer.Option(None, "--pauses", help="Pause grid of every run, seconds. "
                               + shown("0,1.5; with --ab the gate spec's 0,1")),
    reps: int = typer.Option(None, "--reps", help="Repetitions per pause in every run. "
                             + shown("5; with --ab the gate spec's 8")),
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
    ab: bool = typer.Option(False, "--ab", help="Each decision is one whole lbench ab gate job (A, B and the A/A "
                                                "arm interleaved until decided or --budget is spent), per trial one "
                                                "with B = A (A/A) and one with B the deeper twin (slowed); the design "
                                                "is lbench ab's default spec unless --pauses/--reps are given."),
    budget: str = typer.Option("15m", "--budget", show_default=False, metavar="DURATION",
                               help="With --ab: each job's wall-clock budget. "
                               + shown("15m")),
    ab_margin: str = typer.Option(None, "--ab-margin", metavar="M", help="With --ab: the jobs' margin, as lbench ab's "
                                  "--margin (e.g. 0=0.03,1=0.10). " + shown("lbench ab's default")),
    round_s: float = typer.Option(30.0, "--round-s", show_default=False,
                                  help="With --simulate: seconds one round of lbench ab takes "
                                  "(its budget's clock; a job's rounds table shows it), e.g. --round-s 8. "
                                  + shown("30")),
    woken_sd: float = typer.Option(None, "--woken-sd", help="With --simulate: each lbench ab job also gates a woken "
                                   "pause (pause 1 s) whose runs spread this much, in the same rounds and with "
                                   "its own margin (--ab-margin 0=0.03,1=0.10), e.g. --woken-sd 0.052. "
                                   + shown("one gated group")),
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
      lbench gate-bench --ab --trials 10 --budget 15m   # lbench ab's own design
      lbench gate-bench --simulate --trials 400 --seed 0
      lbench gate-bench --simulate --sd 0.013 --sd 0.05 --round-s 8 \\
          --ab-margin 0.03
      lbench gate-bench --simulate --sd 0.2 --sd 0.38 --within-sd 0.08 \\
          --stall-p 0.05 --reps 8
    """
    from harness.analysis.gate import load_config
    from harness.kinds import get
    from harness.runkind import RunOptions
    from harness.runs import gate_bench as bench

    cfg = load_config(None, alpha=alpha, threshold=margin)
    options = RunOptions(llama_server=llama_server, results=results)
    executor = get("gate-bench")
    if simulate:
        sim = bench.simulation_spec(cfg, trials=trials, seed=seed, spreads=sd, reps=reps, within_sd=within_sd,
                                    stall_p=stall_p, budget=budget, ab_margin=ab_margin, round_s=round_s,
                                    woken_sd=woken_sd)
        with RichReporter() as rep:
            run = executor.execute(executor.prepare(sim, options, rep), rep)
        return print_simulation(run)
    if sd or within_sd is not None or stall_p is not None:
        raise BadInput("--sd, --within-sd and --stall-p describe simulated runs", where="gate-bench",
                       hint="add --simulate, or leave them out to measure real runs")
    trials = trials or 10
    from harness.cli.idle import build_spec
    from harness.spec import parse_pauses

    if ab and model == DEFAULT_MODEL:
        model = AB_MODEL
    slow_model = slow_model or bench.slowed_alias(model, extra_layers)
    job = bench.job_config(budget, ab_margin, seed) if ab else None
    spec_a = build_spec(Path("gate") if ab else None, models=[model],
                        pauses_s=parse_pauses(pauses) if pauses else None if ab else parse_pauses("0,1.5"),
                        reps=reps if reps else None if ab else 5, warmup=warmup,
                        threads=_one(threads), cpus=_one(cpus), omp_wait=_one(omp_wait), client_cpus=client_cpus)
    spec = bench.bench_spec(spec_a, cfg, model=model, slow_model=slow_model, trials=trials,
                            runs_per_side=runs_per_side, gate_on=gate_on, job=job, budget=budget,
                            knobs={"threads": threads, "cpus": cpus, "client_cpus": client_cpus,
                                   "omp_wait_policy": omp_wait})
    pauses = ",".join(f"{p:g}" for p in spec_a.pauses_s)

    def show(row: dict) -> None:
        console.print(f"trial {row['trial']}: {row['condition']} -> gate {row['gate_status']} "
                      f"(worst {row['worst_ratio']:.3f}x [{row['worst_ratio_ci_low']:.3f}, "
                      f"{row['worst_ratio_ci_high']:.3f}])", markup=False, highlight=False)

    with RichReporter() as rep:
        prepared = bench.with_printer(executor.prepare(spec, options, rep), show)
        run = executor.execute(prepared, rep)
    analysis = _analysis(run)
    design_words = (f"each an A/A and a slowed lbench ab job (budget {budget}, margin {job.margin:.0%}"
                    + "".join(f", {g} {m:.0%}" for g, m in job.margins.items()) + ")" if job is not None
                    else f"{runs_per_side} runs per side, margin {cfg.threshold:.0%}")
    out.print(f"gate-bench {run.run_id}: {trials} trials, {design_words}, {model} vs {slow_model}, "
              f"pauses {pauses} s, {spec_a.reps} reps", markup=False, soft_wrap=True)
    for r in analysis.get("rates", []):
        out.print(f"  {r['measures']}: {r['failed']}/{r['decisions']} = {_pct0(r['rate'])} "
                  f"[{_pct0(r['rate_ci_low'])}, {_pct0(r['rate_ci_high'])}]  (pass {r['passed']}, inconclusive "
                  f"{r['inconclusive']}, unproven {r.get('unproven', 0)}, refused {r['refused']}; "
                  f"{_min(r['minutes_per_decision'])} min per decision)",
                  markup=False, soft_wrap=True)
    for line in analysis.get("findings", []):
        out.print(line, markup=False, soft_wrap=True)
    out.print(f"saved: {run.dir} (decisions table; lbench report {run.run_id})", markup=False, soft_wrap=True)


def _analysis(run: Run) -> dict:
    """The finished run's analysis.json (harness.analysis.gate_bench.summarize_run)."""
    from harness.analysis.persisted import load_analysis

    return load_analysis(run)


def _pct0(value: float | None) -> str:
    return "nan%" if value is None else f"{value:.0%}"


def _min(value: float | None) -> str:
    return "nan" if value is None else f"{value:.1f}"


def _pct(r: dict, upper: bool = False) -> str:
    text = f"{r['rate']:.1%}"
    return text + (f" (<={r['ci'][1]:.1%})" if upper else "")


def _spread(r: dict) -> str:
    name = r["spread"]
    return name if name.startswith("given sd") else f"{name[:33]} {r['run_sd']:.3g}"


def print_simulation(run: Run) -> None:
    """``--simulate``: the figures of the finished run (harness.analysis.gate_sim, read back from its
    ``simulated`` table), as tables."""
    from harness.analysis.gate_sim import design_label

    section = run.record.section("gate_bench")
    analysis = _analysis(run)
    model = section["run_model"]
    trials = section["trials"]
    out.print(f"gate-bench --simulate {run.run_id}: {trials} trials per cell, seed {section['seed']}, margin "
              f"{section['margin']:.0%}, alpha {section['alpha']}; runs of {model['reps']} reps, within-run sd "
              f"{model['within_sd']} with {model['stall_p']:.0%} stalls of {model['stall_factor']}x "
              f"({'given' if section['within_given'] else 'assumed'}), between-run spread "
              f"{'given' if section['spreads_given'] else 'from earlier sessions measurements'} "
              "(simulated runs, not timings).", markup=False, soft_wrap=True)
    out.print("gate (one gating group): fail = a slower verdict; runs per side, +hN: with N history runs of the "
              "baseline (--history); (<=x%): the exact 95% upper bound", markup=False, soft_wrap=True)
    head = (f"{'spread (sd of log run median)':<40} {'rule':<6} {'runs':>5} {'fail@1':>15} {'fail@edge':>15} "
            f"{'fail+10%':>8} {'fail+20%':>8} {'incon@1':>7} {'pass@1':>6} {'cover':>5} {'ok-pass+10%':>11}")
    out.print(head, markup=False, soft_wrap=True)
    for r in analysis.get("gate", []):
        out.print(f"{_spread(r):<40} {r['rule']:<6} {design_label(r):>5} "
                  f"{_pct(r['fail A/A (ratio 1)'], True):>15} {_pct(r['fail band edge (1+m)'], True):>15} "
                  f"{_pct(r['fail +10%']):>8} {_pct(r['fail +20%']):>8} {_pct(r['inconclusive at 1']):>7} "
                  f"{_pct(r['pass at 1']):>6} {r['coverage A/A (ratio 1)']:>5.1%} "
                  f"{_pct(r['passed with --inconclusive-ok at +10%']):>11}", markup=False, soft_wrap=True)
    ab = section.get("ab") or {}
    margins = ab.get("margins") or {}
    margin = (f"margins {margins.get('pause 0 s', 0):.0%} (pause 0) and {margins.get('pause 1 s', 0):.0%} (pause 1 s, "
              f"woken sd {ab['woken_sd']:g})" if ab.get("woken_sd") is not None else f"margin {ab.get('margin', 0):.0%}")
    out.print(f"ab, the gate job ({max(trials // 4, 10)} trials per cell; arms {','.join(ab.get('arms', []))}, "
              f"{margin}, alpha {ab.get('alpha')}, budget {ab.get('budget_s')} s, {ab.get('round_s')} s "
              "per round): fail / pass / unproven rates, mean rounds and minutes", markup=False, soft_wrap=True)
    out.print(f"{'noise (run sd)':<40} {'rounds':>6} {'fail@1':>15} {'pass@1':>6} {'unprov@1':>8} {'fail+3%':>7} "
              f"{'fail+10%':>8} {'min@1':>6} {'min+10%':>7}", markup=False, soft_wrap=True)
    for r in analysis.get("ab", []):
        out.print(f"{_spread(r):<40} {r['max_rounds']:>6} {_pct(r['fail A/A (ratio 1)'], True):>15} "
                  f"{_pct(r['pass A/A (ratio 1)']):>6} {_pct(r['unproven A/A (ratio 1)']):>8} {_pct(r['fail +3%']):>7} "
                  f"{_pct(r['fail +10%']):>8} {r['mean minutes A/A (ratio 1)']:>6.1f} {r['mean minutes +10%']:>7.1f}",
                  markup=False, soft_wrap=True)
    out.print(f"saved: {run.dir} (simulated table; lbench report {run.run_id})", markup=False, soft_wrap=True)
