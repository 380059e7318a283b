"""Find the first engine build in a range where an outcome changes (``lbench bisect``).

The outcome of a build is a verdict string (``holds``, ``contradicted``, ...), from
a claim's repro or a gate over a metric.  Outcomes that decide nothing
(``inconclusive``, ``not checkable here``, ``error``) are retried, then the build
is skipped, as ``git bisect skip`` does: the search goes on over the remaining
builds, and the answer becomes a range when skipped builds sit at the boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

UNDECIDED = ("inconclusive", "not checkable here", "error")


@dataclass
class Step:
    build: int
    outcome: str
    attempt: int


@dataclass
class BisectResult:
    first_bad: int | None  # first build with the end outcome (None: the ends agree or nothing decided)
    last_good: int | None  # last build with the start outcome before it
    start_outcome: str
    end_outcome: str
    steps: list[Step] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    message: str = ""

    @property
    def builds_run(self) -> int:
        return len({s.build for s in self.steps})


def bisect_builds(builds: list[int], outcome_of: Callable[[int], str], *, retries: int = 2,
                  on_step: Callable[[Step], None] = lambda s: None) -> BisectResult:
    """First build in ``builds`` (ascending) whose outcome equals the last build's, when the first
    build's differs.  Assumes one change in the range (as git bisect does); ``outcome_of`` is
    called at most ``retries + 1`` times per build when it returns an undecided outcome."""
    builds = sorted(set(builds))
    if len(builds) < 2:
        raise ValueError("a bisect needs at least two builds")
    steps: list[Step] = []
    skipped: list[int] = []
    cache: dict[int, str] = {}

    def decide(b: int) -> str:
        if b in cache:
            return cache[b]
        out = "inconclusive"
        for attempt in range(1, retries + 2):
            out = outcome_of(b)
            step = Step(b, out, attempt)
            steps.append(step)
            on_step(step)
            if out not in UNDECIDED:
                break
        cache[b] = out
        return out

    start, end = decide(builds[0]), decide(builds[-1])
    if start in UNDECIDED or end in UNDECIDED:
        return BisectResult(None, None, start, end, steps, skipped,
                            f"an end of the range is undecided ({builds[0]}: {start}, {builds[-1]}: {end})")
    if start == end:
        return BisectResult(None, None, start, end, steps, skipped,
                            f"no change: both ends are {start!r}")
    lo, hi = 0, len(builds) - 1  # outcome(lo) == start, outcome(hi) == end
    candidates = list(range(lo + 1, hi))
    while hi - lo > 1:
        inner = [i for i in candidates if lo < i < hi]
        if not inner:  # only skipped builds between lo and hi
            break
        mid_target = (lo + hi) // 2
        mid = min(inner, key=lambda i: (abs(i - mid_target), i))
        out = decide(builds[mid])
        if out == start:
            lo = mid
        elif out == end:
            hi = mid
        else:  # undecided after retries, or a third outcome: skip it
            skipped.append(builds[mid])
            candidates.remove(mid)
    between = [b for b in skipped if builds[lo] < b < builds[hi]]
    msg = f"first {end!r} build: {builds[hi]} (last {start!r}: {builds[lo]})"
    if between:
        msg += f"; undecided builds in between: {', '.join(map(str, between))}, so the change is in that range"
    return BisectResult(builds[hi], builds[lo], start, end, steps, skipped, msg)
