"""The bisect workflow called as a script would (``harness.runs.bisect``): the candidate builds of
a range, and a range whose builds are not built with --no-install (nothing compiled, no step judged)."""

import pytest

from harness.errors import BadInput
from harness.runs.bisect import bisect_range, candidate_builds


def test_candidates_are_the_given_builds_inside_the_range_with_both_ends():
    assert candidate_builds([9000, 9093, 9500, 10000, 12000], 9093, 10000) == [9093, 9500, 10000]
    with pytest.raises(BadInput, match="build 9100 is not among the candidate builds"):
        candidate_builds([9093, 9500], 9100, 9500)


def test_unbuilt_builds_without_install_are_not_checkable_and_never_judged(lbench_env):
    said, judged = [], []
    report = bisect_range([9093, 9500, 10000], lambda build, binary: judged.append(build) or "holds", {},
                          backend=None, install=False, retries=0, say=said.append)
    assert judged == [] and report.compiled == []
    assert {s.outcome for s in report.result.steps} == {"not checkable here"}
    assert report.result.first_bad is None and report.candidates == [9093, 9500, 10000]
    assert said and all(line.startswith("step: build ") and line.endswith("run -)") for line in said)
