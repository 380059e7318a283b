from collections import Counter

import pytest

from harness.errors import BadInput
from harness.workloads.swap import Pattern, waves

MODELS = ["a", "b", "c"]


def flat(plan):
    return [m for wave in plan for m in wave]


def test_round_robin_and_ping_pong():
    assert flat(waves(Pattern("round-robin"), MODELS, 7, 0)) == ["a", "b", "c", "a", "b", "c", "a"]
    assert flat(waves(Pattern("ping-pong"), MODELS, 5, 0)) == ["a", "b", "a", "b", "a"]


def test_random_patterns_are_seeded():
    for p in (Pattern("uniform"), Pattern("zipf", zipf_s=1.5)):
        assert waves(p, MODELS, 50, 1) == waves(p, MODELS, 50, 1)
        assert waves(p, MODELS, 50, 1) != waves(p, MODELS, 50, 2)


def test_zipf_is_skewed_towards_the_first_model():
    counts = Counter(flat(waves(Pattern("zipf", zipf_s=2.0), MODELS, 2000, 0)))
    assert counts["a"] > counts["b"] > counts["c"]


def test_bursts_are_distinct_models():
    plan = waves(Pattern("burst", burst_k=3), MODELS, 10, 0)
    assert [len(w) for w in plan] == [3, 3, 3, 1]
    assert all(len(set(w)) == len(w) for w in plan)


@pytest.mark.parametrize("pattern,n,fragment", [
    (Pattern("storm"), 3, "unknown pattern"), (Pattern("ping-pong"), 1, "at least 2"),
    (Pattern("burst", burst_k=4), 3, "burst-k"), (Pattern("zipf", zipf_s=0), 3, "zipf-s"),
])
def test_bad_patterns(pattern, n, fragment):
    with pytest.raises(BadInput, match=fragment):
        pattern.validate(n)
