"""``lbench ab``: the CI gate job (A, B and an A/A arm interleaved, a fresh server each run, a sequential stop);
the workflow lives in harness/runs/ab.py and harness/runs/ab_output.py, this module parses and prints."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from harness.analysis.gate_config import RoundsConfig
from harness.cli.idle import build_spec
from harness.cli.options import BackendOpt, DeviceOpt, ResultsDir, select_device, shown
from harness.cli.ui import RichReporter, console, out, print_wrapped
from harness.spec import parse_pauses


def ab(
    spec_file: Path = typer.Option(None, "--spec", help="Idle spec of both sides (a TOML path or a bundled spec's "
                                   "name, e.g. ci-gate-mac); options below override it. " + shown("gate")),
    model: list[str] = typer.Option(None, "--model", "-m", metavar="MODEL", help="GGUF path or alias (both sides)."),
    pauses: str = typer.Option(None, "--pauses", help="Pause grid, as for lbench idle. " + shown("the spec's: 0,1")),
    reps: int = typer.Option(None, "--reps", help="Repetitions per run. " + shown("the spec's: 8")),
    a_server: str = typer.Option(None, "--a-llama-server", help="llama-server binary of side A. "
                                 + shown("$LBENCH_LLAMA_SERVER, then PATH, then lbench's cached build")),
    b_server: str = typer.Option(None, "--b-llama-server", help="llama-server binary of side B. "
                                 + shown("$LBENCH_LLAMA_SERVER, then PATH, then lbench's cached build")),
    a_arg: list[str] = typer.Option(None, "--a-arg", metavar="ARG", help="Extra llama-server argument for A; repeat."),
    b_arg: list[str] = typer.Option(None, "--b-arg", metavar="ARG", help="Extra llama-server argument for B; repeat."),
    backend: BackendOpt = None,
    a_backend: str = typer.Option(None, "--a-backend", metavar="NAME", help="Side A's cached build of this backend "
                                  "(beats --backend), e.g. --a-backend cpu. " + shown("--backend")),
    b_backend: str = typer.Option(None, "--b-backend", metavar="NAME", help="Side B's cached build of this backend, "
                                  "e.g. --b-backend vulkan. " + shown("--backend")),
    device: DeviceOpt = None,
    env_axis: list[str] = typer.Option(None, "--env-axis", metavar="NAME=V1,V2",
                                       help="Env axis of both sides' cells, as for lbench idle, e.g. "
                                            "--env-axis GGML_VK_KEEPALIVE_MS=unset,30000. " + shown("none")),
    server_args_axis: list[str] = typer.Option(None, "--server-args-axis", metavar="ARGS",
                                               help="Server-args axis of both sides' cells, as for lbench idle, "
                                                    "e.g. --server-args-axis='--cache-reuse 256'. " + shown("none")),
    prompt_tokens: str = typer.Option(None, "--prompt-tokens", metavar="N",
                                      help="New prompt tokens per request, as for lbench idle, e.g. 0,512. "
                                           + shown("0")),
    arms: str = typer.Option(None, "--arms", metavar="ARMS",
                             help="Arms of every round: a (base), b (head), aa (a second copy of a: the A/A floor "
                                  "that decides whether a verdict counts), e.g. --arms a,b. " + shown("a,b,aa")),
    budget: str = typer.Option("15m", "--budget", show_default=False, metavar="DURATION",
                               help="Wall-clock budget of the rounds, e.g. 15m, 900s, 1h; the stop rule ends "
                                    "sooner when it can. " + shown("15m")),
    seed: int = typer.Option(0, "--seed", show_default=False, help="Seed of the arms' randomised, balanced order in the rounds. "
                             + shown("0")),
    min_rounds: int = typer.Option(None, "--min-rounds", help="Rounds before the first look. "
                                   + shown(f"{RoundsConfig.min_rounds} (the fit needs them to estimate its noise)")),
    max_rounds: int = typer.Option(RoundsConfig.max_rounds, "--max-rounds", show_default=False,
                                   help="Most rounds, whatever the budget. " + shown(RoundsConfig.max_rounds)),
    margin: str = typer.Option(None, "--margin", "--threshold", metavar="M",
                               help="Equivalence margin m of every gated pause (band [1/(1+m), 1+m]), or per pause, "
                                    "e.g. --margin 0=0.03,1=0.10. "
                                    + shown(f"{RoundsConfig.margin} at pause 0, {RoundsConfig.woken_margin} at the others")),
    alpha: float = typer.Option(RoundsConfig.alpha, "--alpha", show_default=False,
                                help="Overall two-sided level, spent over the looks and split over the gated "
                                     "groups: a false 'slower' has chance alpha/2. " + shown(RoundsConfig.alpha)),
    spending: str = typer.Option(RoundsConfig.spending, "--spending", show_default=False,
                                 help="Alpha-spending function over the looks: 'obf' (Lan-DeMets O'Brien-Fleming-like) "
                                      "or 'pocock'. " + shown(RoundsConfig.spending)),
    slower_rule: str = typer.Option(RoundsConfig.slower_rule, "--slower-rule", show_default=False, metavar="RULE",
                                    help="'zero': slower when the interval lies above 1; 'margin': above 1+m. "
                                         + shown(RoundsConfig.slower_rule)),
    gate_on: str = typer.Option(None, "--gate-on", metavar="PAUSES",
                                help="Pauses that vote, e.g. 0,1 (each its own group). " + shown("every pause of the spec")),
    inconclusive_ok: bool = typer.Option(False, "--inconclusive-ok",
                                         help="Exit 0 when inconclusive or unproven (not evidence of no slowdown)."),
    results: ResultsDir = None,
    junit_path: Path = typer.Option(None, "--junit", help="Write the verdict as JUnit XML here."),
    json_path: Path = typer.Option(None, "--json", help="Write the JSON verdict here: status, contrasts, rounds, "
                                                        "every run id."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
) -> None:
    """The CI gate job: A (base), B (head) and A/A (a second copy of A) in interleaved rounds, each run
    on a fresh server, the order inside each round randomised and balanced, until the sequential stop
    rule decides or the --budget is spent. Per gated pause, a fit of every round (round and position
    effects removed) gives B against A and the A/A floor; a verdict counts only when the A/A contrast
    shows no difference and lies inside the band. Exit 0 no slowdown, 1 slower, 2 bad input,
    3 inconclusive, 4 unproven on this machine (the A/A floor moved or is wider than the margin).
    The job is a run of its own (lbench evidence JOB_ID). docs/statistics.md, "The gate job".

    \b
    Examples:
      lbench ab -m tiny-q8 --b-arg --threads --b-arg 1 --budget 5m
      lbench ab --spec ci-gate-mac --a-llama-server base/bin/llama-server \\
          --b-llama-server head/bin/llama-server --budget 15m \\
          --json gate.json --junit gate.xml
      lbench ab --margin 0=0.03,1=0.10 --budget 15m
      lbench ab -m tiny-q8 --a-backend cpu --b-backend vulkan --device 0 \\
          --arms a,b
    """
    from harness.analysis.gate_config import EXIT_CODES
    from harness.engines.builds import server_path
    from harness.kinds import get
    from harness.runkind import RunOptions
    from harness.runs.ab import gate_job_spec

    spec = build_spec(spec_file or Path("gate"), models=model or None, pauses_s=parse_pauses(pauses) if pauses else None,
                      reps=reps, env_axis=env_axis or None, server_args_axis=server_args_axis or None,
                      prompt_tokens=[p for p in prompt_tokens.split(",") if p.strip()] if prompt_tokens else None)
    a_path = server_path(a_backend or backend, a_server)
    b_path = server_path(b_backend or backend, b_server)
    job = gate_job_spec(spec, margin=margin, arms=arms, alpha=alpha, slower_rule=slower_rule, seed=seed,
                        min_rounds=min_rounds, max_rounds=max_rounds, budget=budget, spending=spending,
                        gate_on=gate_on, llama_server_a=a_path, llama_server_b=b_path, a_args=list(a_arg or []),
                        b_args=list(b_arg or []))
    select_device(a_backend or backend, device, a_path, (b_backend or backend, b_path))  # each side that takes one
    executor = get("ab")
    with RichReporter() as rep:
        for side, server, extra in (("A", a_path, a_arg), ("B", b_path, b_arg)):
            rep.message(f"side {side}: " + (f"llama-server {server}" if server else "the default llama-server")
                        + (f", extra server arguments: {shlex.join(extra)}" if extra else ", no extra server arguments"))
        prepared = executor.prepare(job, RunOptions(results=results), rep)
        run = executor.execute(prepared, rep)
    from harness.analysis.persisted import load_analysis
    from harness.runs.ab_output import gate_job_outputs

    analysis = load_analysis(run)
    texts = gate_job_outputs(run, analysis)
    from harness.runs.gate_output import write_gate_outputs

    write_gate_outputs({md_path: texts.markdown, junit_path: texts.junit, json_path: texts.json}, texts.markdown)
    for line in texts.lines:
        print_wrapped(out, line)
    status = str(analysis.get("status") or "inconclusive")
    code = EXIT_CODES.get(status, 3)
    if inconclusive_ok and status in ("inconclusive", "unproven"):
        code = 0
    console.print(f"ab: {status} (run {run.run_id}; lbench evidence {run.run_id} -o evidence/)", markup=False,
                  soft_wrap=True)
    raise typer.Exit(code)
