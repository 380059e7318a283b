"""``lbench bisect --gate``: the per-build outcome (reference first, gate verdicts after, alpha split
over the retries), the bisect over it, and one real-engine pass on the cached build."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_cli

from harness.analysis.gate import GateConfig
from harness.repro.bisect import bisect_builds
from harness.runs.bisect_gate import NOT_SLOWER, SLOWER, GateBisectOutcome


class Quiet:
    def message(self, text):
        pass


def world(first_slow_build: int, inconclusive: set[int] = frozenset()):
    """Stand-ins for the idle executor and the gate's judge: builds >= first_slow_build are slower."""
    seen: list[tuple[int, float]] = []

    def execute(prep, reporter):
        return SimpleNamespace(run_id=f"run-{prep}-{len(seen)}", build=prep)

    def judge(a_runs, b_runs, vcfg):
        build = b_runs[0].build
        seen.append((build, vcfg.alpha))
        verdict = "inconclusive" if build in inconclusive else "slower" if build >= first_slow_build else "no change"
        return [SimpleNamespace(verdict=verdict, primary=True)], {}

    return execute, judge, seen


def test_reference_is_measured_three_times_and_not_judged():
    execute, judge, seen = world(first_slow_build=5)
    outcome = GateBisectOutcome(lambda b: b, GateConfig(), looks_per_build=3, reporter=Quiet(),
                                execute=execute, judge=judge)
    assert outcome(1) == NOT_SLOWER
    assert outcome.reference_build == 1 and outcome.statuses[1] == ["reference"] and len(outcome.runs[1]) == 3
    assert seen == []  # nothing to judge against yet
    assert outcome(7) == SLOWER
    assert outcome(3) == NOT_SLOWER
    assert [b for b, _ in seen] == [7, 3]
    assert outcome.runs[7] and outcome.runs[3] and outcome.statuses[7] == ["fail"]


def test_alpha_is_split_over_the_looks_at_one_build():
    execute, judge, seen = world(first_slow_build=5)
    outcome = GateBisectOutcome(lambda b: b, GateConfig(alpha=0.05), looks_per_build=3, reporter=Quiet(),
                                execute=execute, judge=judge)
    outcome(1)
    outcome(6)
    assert seen[0][1] == pytest.approx(0.05 / 3)


def test_bisect_finds_the_first_slower_build_and_skips_undecided_ones():
    execute, judge, seen = world(first_slow_build=40, inconclusive={30})
    outcome = GateBisectOutcome(lambda b: b, GateConfig(), looks_per_build=2, reporter=Quiet(),
                                execute=execute, judge=judge)
    builds = [10, 20, 30, 40, 50, 60]
    result = bisect_builds(builds, outcome, retries=1)
    assert result.start_outcome == NOT_SLOWER and result.end_outcome == SLOWER
    assert result.first_bad == 40
    assert 30 in result.skipped  # inconclusive twice (1 retry): skipped
    assert len(outcome.runs[30]) == 2  # a fresh run per look
    assert "30" in result.message  # the skipped build at the boundary widens the answer to a range


def test_cli_refuses_a_claim_and_gate_together_and_sweep_options_without_gate(lbench_env):
    both = run_cli("bisect", "router-cap", "--gate", "--from", "11434", "--to", "11434", "--builds", "11434",
                   env=lbench_env)
    assert both.returncode == 2 and "not both" in both.stderr
    stray = run_cli("bisect", "router-cap", "--reps", "3", "--from", "11434", "--to", "11434", "--builds", "11434",
                    env=lbench_env)
    assert stray.returncode == 2 and "go with --gate" in stray.stderr
    assert not Path(lbench_env["LBENCH_RESULTS_DIR"]).exists() or not any(Path(lbench_env["LBENCH_RESULTS_DIR"]).iterdir())


def test_real_engine_both_ends_on_one_binary(engine_env, engine_binary):
    """Two 'builds' that are the same cached binary: real sweeps, the gate judges the second against the
    first. An A/A comparison must never come out 'slower' at alpha/2 often; here we check the path:
    both ends measured with real run ids, the end judged by the gate (any of its outcomes)."""
    from harness.cli.idle import build_spec
    from harness.kinds import get
    from harness.runkind import RunOptions
    from harness.runs.idle import QuietReporter

    spec = build_spec(None, models=["tiny-q8"], pauses_s=[0.0, 0.05], reps=6)

    def prepare(build: int):
        import copy

        options = RunOptions(llama_server=str(engine_binary), results=engine_env["LBENCH_RESULTS_DIR"])
        return get("idle").prepare(copy.deepcopy(spec), options, QuietReporter())

    outcome = GateBisectOutcome(prepare, GateConfig(), looks_per_build=1, reporter=QuietReporter())
    result = bisect_builds([1, 2], outcome, retries=0)
    assert result.start_outcome == NOT_SLOWER
    assert outcome.statuses[2][0] in ("pass", "fail", "inconclusive", "refuse")
    assert len(outcome.runs[1]) == outcome.reference_runs == 3 and len(outcome.runs[2]) == 1
    for build in (1, 2):
        for run_id in outcome.runs[build]:
            assert (Path(engine_env["LBENCH_RESULTS_DIR"]) / run_id / "manifest.json").is_file()
    assert result.message  # "no change: both ends ..." or "an end of the range is undecided ..."
