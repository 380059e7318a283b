"""The outcome of one llama.cpp build for ``lbench bisect --gate``: an idle sweep on that build,
judged by the regression gate against the sweep of the range's first build (the reference).

Outcomes: ``not slower`` (the gate passes: no change or faster), ``slower`` (the gate fails),
``inconclusive`` (an interval straddles the band, or too few samples): the bisect retries those
with a fresh run of the same build (judged with the build's earlier runs), then skips the build.  Each look at a build
is a test at
``alpha / looks_per_build`` (Bonferroni over the retries), so the chance that a build is called
``slower`` by noise stays <= alpha/2 however many retries it takes.  The reference is measured
``reference_runs`` (3) times: the gate's unit is the run, and one run against one run has no
between-run spread, so it would never be decided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.gate import GateConfig
from harness.runs.campaign import idle_campaign

NOT_SLOWER = "not slower"
SLOWER = "slower"
STATUS_TO_OUTCOME = {"pass": NOT_SLOWER, "fail": SLOWER, "inconclusive": "inconclusive", "refuse": "inconclusive"}


@dataclass
class GateBisectOutcome:
    """Callable ``build -> outcome`` for :func:`harness.repro.bisect.bisect_builds`.

    Runs and looks come from the gate's campaign core (``harness.runs.campaign.idle_campaign``).
    ``prepare(build) -> prepared run``, ``execute(prepared, reporter) -> Run`` and
    ``judge(a_runs, b_runs, vcfg)`` are injectable (tests use stand-ins for the compiler, not for
    the engine)."""

    prepare: Callable[[int], Any]
    cfg: GateConfig
    looks_per_build: int
    reporter: Any
    execute: Callable[[Any, Any], Any] | None = None
    judge: Callable | None = None
    reference_build: int | None = None
    reference: list = field(default_factory=list)
    runs: dict[int, list[str]] = field(default_factory=dict)
    statuses: dict[int, list[str]] = field(default_factory=dict)
    reference_runs: int = 3
    build_runs: dict[int, list] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.campaign = idle_campaign(self.reporter, execute=self.execute, judge=self.judge)
        self.look_alpha = self.cfg.alpha / max(1, self.looks_per_build)

    def __call__(self, build: int) -> str:
        if self.reference_build is None:
            # the gate's unit is the run: the reference is measured reference_runs times so that its
            # between-run spread exists (one run against one run is never decided)
            prepared = self.prepare(build)
            self.reference = [self.campaign.measure(prepared) for _ in range(max(self.reference_runs, 1))]
            self.runs.setdefault(build, []).extend(r.run_id for r in self.reference)
            self.reference_build = build
            self.statuses.setdefault(build, []).append("reference")
            return NOT_SLOWER
        run = self.campaign.measure(self.prepare(build))
        self.runs.setdefault(build, []).append(run.run_id)
        self.build_runs.setdefault(build, []).append(run)
        # a retry adds a fresh run of the same build: all of them are judged together
        _, _, outcome = self.campaign.look(self.reference, self.build_runs[build], self.cfg, alpha=self.look_alpha)
        status = outcome.status
        self.statuses.setdefault(build, []).append(status)
        return STATUS_TO_OUTCOME[status]
