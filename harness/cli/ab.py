"""``lbench ab``: interleaved A/B rounds (fresh server each run) with a sequential stop."""

from __future__ import annotations

import copy
import shlex
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from harness.analysis.gate_config import GateConfig
from harness.cli.idle import build_spec
from harness.cli.options import (BackendOpt, DeviceOpt, GateOn, InconclusiveOk, Margin, ResultsDir, SlowerRule, default,
                                  select_device, shown)
from harness.cli.ui import RichReporter, console, out, print_wrapped
from harness.errors import BadInput
from harness.spec import IdleSpec, parse_pauses

if TYPE_CHECKING:
    from harness.analysis.campaign import ABResult
    from harness.analysis.gate import GateOutcome
    from harness.analysis.verdicts import Verdict, VerdictConfig
    from harness.store import Run


def ab(
    model: list[str] = typer.Option(None, "--model", "-m", metavar="MODEL", help="GGUF path or alias (both sides)."),
    pauses: str = typer.Option(None, "--pauses", help="Pause grid, as for lbench idle."),
    reps: int = typer.Option(None, "--reps", help=f"Repetitions per run. {shown(default(IdleSpec, 'reps'))}"),
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
    min_rounds: int = typer.Option(3, "--min-rounds", help="Rounds before the first look (>= 2: the run-level t "
                                                           "statistic needs two runs per side)."),
    max_rounds: int = typer.Option(10, "--max-rounds", help="Round budget (the information fraction of a look "
                                                            "is rounds / max rounds)."),
    margin: Margin = None,
    alpha: float = typer.Option(None, "--alpha", help="Overall two-sided level, spent over the looks. "
                                                      f"{shown(default(GateConfig, 'alpha'))}"),
    spending: str = typer.Option("obf", "--spending", help="Alpha-spending function over the looks: 'obf' "
                                                           "(Lan-DeMets O'Brien-Fleming-like) or 'pocock'."),
    slower_rule: SlowerRule = None,
    gate_on: GateOn = None,
    inconclusive_ok: InconclusiveOk = False,
    results: ResultsDir = None,
    junit_path: Path = typer.Option(None, "--junit", help="Write the final look's JUnit XML here (as lbench gate)."),
    json_path: Path = typer.Option(None, "--json", help="Write the final look's JSON verdict here (as lbench "
                                                        "gate: both sides' run ids), with the looks."),
    md_path: Path = typer.Option(None, "--markdown", help="Write the Markdown summary here (also appended to "
                                                          "$GITHUB_STEP_SUMMARY when set)."),
) -> None:
    """Run A and B in alternating rounds (ABBA order, a fresh server per run) until the gate's verdict
    is decided or --max-rounds is spent. From --min-rounds on it looks after every round at the level
    an alpha-spending boundary gives that look (--spending), so the stated error rates hold whatever
    the stopping round (simulated: lbench gate-bench --simulate). Exit codes as for lbench gate.

    \b
    Examples:
      lbench ab -m tiny-q8 --pauses 0,0.5,1 --reps 6 --b-arg --threads --b-arg 1
      lbench ab -m tiny-q8 --a-llama-server /opt/old/llama-server \\
          --b-llama-server ./build/bin/llama-server --json ab.json --junit ab.xml
      lbench ab -m tiny-q8 --backend vulkan --device 0 --b-arg --threads --b-arg 1
      lbench ab -m tiny-q8 --a-backend cpu --b-backend vulkan --device 0
    """
    from harness.analysis.gate import load_config
    from harness.cli.verdicts import print_verdicts
    from harness.runs.ab import run_ab
    from harness.runs.executors import RunOptions, get_executor

    from harness.analysis.gate_config import parse_gate_on
    from harness.analysis.sequential import SPENDING
    from harness.analysis.verdicts import ratio_words
    from harness.analysis.campaign import MIN_LOOK_ROUNDS

    if min_rounds < MIN_LOOK_ROUNDS or max_rounds < min_rounds:
        raise BadInput(f"need {MIN_LOOK_ROUNDS} <= --min-rounds <= --max-rounds", where=f"{min_rounds} / {max_rounds}",
                       hint="the run-level statistic needs two runs per side before its first look")
    if spending not in SPENDING:
        raise BadInput(f"--spending must be one of {', '.join(SPENDING)}, got {spending!r}", where="--spending")
    cfg = load_config(None, alpha=alpha, threshold=margin, slower_rule=slower_rule)
    groups_on = parse_gate_on(gate_on)
    spec = build_spec(None, models=model or None, pauses_s=parse_pauses(pauses) if pauses else None, reps=reps,
                      env_axis=env_axis or None, server_args_axis=server_args_axis or None,
                      prompt_tokens=[p for p in prompt_tokens.split(",") if p.strip()] if prompt_tokens else None)
    from harness.engines.builds import server_path

    a_path = server_path(a_backend or backend, a_server)
    b_path = server_path(b_backend or backend, b_server)
    select_device(a_backend or backend, device, a_path, (b_backend or backend, b_path))  # each side that takes one
    spec_a, spec_b = copy.deepcopy(spec), copy.deepcopy(spec)
    spec_a.server_args = list(spec.server_args) + list(a_arg or [])
    spec_b.server_args = list(spec.server_args) + list(b_arg or [])
    spec_a.validate("--a-arg"), spec_b.validate("--b-arg")  # both sides' bad input before either side starts
    with RichReporter() as rep:
        for side, server, extra in (("A", a_path, a_arg), ("B", b_path, b_arg)):
            rep.message(f"side {side}: " + (f"llama-server {server}" if server else "the default llama-server")
                        + (f", extra server arguments: {shlex.join(extra)}" if extra else ", no extra server arguments"))
        prep_a = get_executor("idle").prepare(spec_a, RunOptions(llama_server=a_path, results=results), rep)
        prep_b = get_executor("idle").prepare(spec_b, RunOptions(llama_server=b_path, results=results), rep)
        from harness.analysis.compare import judge_runs

        def judge(a_runs: list[Run], b_runs: list[Run], vcfg: VerdictConfig) -> tuple[list[Verdict], dict[str, Any]]:
            return judge_runs(a_runs, b_runs, vcfg, gate_on=groups_on)
        res = run_ab(prep_a, prep_b, cfg, min_rounds=min_rounds, max_rounds=max_rounds, reporter=rep, judge=judge,
                     spending=spending)
    from harness.record import check_comparable

    flags = check_comparable([r.record for r in res.a_runs], [r.record for r in res.b_runs]).flags
    if flags:  # what the comparison spans, said once (e.g. backend: cpu vs vulkan)
        print_wrapped(console, "A and B differ in: " + "; ".join(flags), style="yellow")
    print_verdicts(res.verdicts, res.info, res.a_runs, res.b_runs)
    for look in res.looks:
        out.print(f"look after round {look['round']}: {look['status']} (two-sided level at this look "
                  f"{look['alpha_per_look']:.3g}, {spending} spending)", markup=False)
    outcome = res.outcome
    assert outcome is not None  # max_rounds >= min_rounds: at least one look
    outcome.inconclusive_ok = inconclusive_ok
    from harness.cli.verdicts import group_name, next_step_lines

    for line in next_step_lines(outcome) if outcome.status == "inconclusive" else []:
        print_wrapped(console, "next step: " + line)
    _write_artefacts(res, outcome, junit_path, json_path, md_path)
    gating = [v for v in res.verdicts if v.primary]
    why = "; ".join(f"{group_name(v)}: {ratio_words(v.ratio, *v.ratio_ci)}, {v.verdict}" for v in gating)
    console.print(f"ab: {outcome.status} after {len(res.a_runs)} rounds" + (f" ({why})" if why else "")
                  + f" (A: {' '.join(r.run_id for r in res.a_runs)}; B: {' '.join(r.run_id for r in res.b_runs)})",
                  markup=False, soft_wrap=True)
    raise typer.Exit(outcome.exit_code)


def _write_artefacts(res: ABResult, outcome: GateOutcome, junit_path: Path | None, json_path: Path | None,
                     md_path: Path | None) -> None:
    """The gate's JUnit, JSON and Markdown for the final look (redacted as lbench gate's are); the
    JSON's ``baseline``/``candidate`` name both sides' runs (ids under --results), and its looks."""
    from harness.analysis.gate import junit, markdown, verdict_json
    from harness.report.redact import Redactor

    runs = res.a_runs + res.b_runs
    red, red_xml = Redactor(True, runs=runs), Redactor(True, runs=runs, xml=True)
    names_a, names_b = [r.run_id for r in res.a_runs], [r.run_id for r in res.b_runs]
    from harness.probes.host import virtual_status

    virtual = virtual_status([r.record.host.facts for r in runs])  # on every verdict, virtual or not
    context = [virtual["note"]] if virtual["note"] else []
    md = red(markdown(outcome, ", ".join(names_a), ", ".join(names_b), context=context))
    if md_path:
        md_path.write_text(md)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as fh:
            fh.write(md)
    if junit_path:
        junit_path.write_text(red_xml(junit(outcome, context=context)))
    if json_path:
        data = json.loads(verdict_json(outcome, names_a, names_b, res.info))
        data.update({"rounds": len(res.a_runs), "looks": res.looks, "virtual": virtual})
        json_path.write_text(red(json.dumps(data, indent=2, default=str)))
