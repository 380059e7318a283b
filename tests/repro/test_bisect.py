"""The bisect algorithm, on a predicate over build numbers."""

import pytest

from harness.repro.bisect import bisect_builds


def test_finds_the_first_changed_build_in_log_steps():
    builds = list(range(9093, 11435, 7))
    calls = []

    def outcome(b):
        calls.append(b)
        return "contradicted" if b < 10005 else "holds"

    r = bisect_builds(builds, outcome)
    first = min(b for b in builds if b >= 10005)
    assert r.first_bad == first and r.last_good == builds[builds.index(first) - 1]
    assert (r.start_outcome, r.end_outcome) == ("contradicted", "holds")
    assert len(calls) <= 2 + 10 + 1  # log2(335) ~ 8.4 steps plus the ends


def test_no_change_and_undecided_ends():
    assert bisect_builds([1, 2, 3], lambda b: "holds").first_bad is None
    r = bisect_builds([1, 2, 3], lambda b: "inconclusive" if b == 1 else "holds", retries=1)
    assert r.first_bad is None and "undecided" in r.message
    assert sum(1 for s in r.steps if s.build == 1) == 2  # retried once


def test_inconclusive_steps_are_retried_then_skipped():
    attempts = {}

    def outcome(b):
        attempts[b] = attempts.get(b, 0) + 1
        if b == 50 and attempts[b] < 2:
            return "inconclusive"  # decides on the retry
        if b in (60, 61):
            return "not checkable here"  # never decides: skipped
        return "old" if b < 61 else "new"

    r = bisect_builds(list(range(0, 101)), outcome, retries=2)
    assert attempts[50] == 2
    assert (r.last_good, r.first_bad) == (59, 62)
    assert set(r.skipped) == {60, 61}
    assert "undecided builds in between: 60, 61" in r.message
    assert sum(1 for s in r.steps if s.build == 60) == 3  # tried retries + 1 times


def test_needs_two_builds():
    with pytest.raises(ValueError):
        bisect_builds([5], lambda b: "holds")
