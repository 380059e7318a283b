"""Metal residency claims: their figures on synthetic sample tables of each rule and its
negation (no Mac here; the scenarios themselves run where llama-server has Metal)."""

import numpy as np
import pandas as pd
import pytest

from harness.repro.claims import CONTRADICTED, HOLDS, gate_cause, judge, load_claims
from harness.repro.metal_scenarios import no_residency_figures, window_figures

SPECS = {c.id: c for c in load_claims()}
SHORT, INSIDE, OUTSIDE = [0.0, 0.5], [2.0, 3.5], [9.0, 12.0]


def samples(latency_of, *, models=("m",), keep_alive="5", starts=3, reps=4, pauses=SHORT + INSIDE + OUTSIDE, seed=0):
    """A samples table: ``latency_of(model, pause)`` ms plus 1% noise, per start and rep."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for start in range(1, starts + 1):
            for _ in range(reps):
                for pause in pauses:
                    base = latency_of(model, pause)
                    rows.append({"model": model, "start": start, "phase": "measure", "error": None,
                                 "pause_requested_s": pause, "keep_alive": keep_alive,
                                 "latency_ms": base * (1 + 0.01 * rng.standard_normal())})
    return pd.DataFrame(rows)


def window(latency_of):
    figures, _ = window_figures(samples(latency_of), short=SHORT, inside=INSIDE, outside=OUTSIDE, margin=0.10)
    figures.update(keep_alive_set=5, keep_alive_logged=5)
    return figures


def test_keep_alive_window_rule_holds_and_its_negations_are_contradicted():
    spec = SPECS["idle-metal-keepalive-180s"]
    rule = window(lambda m, p: 250.0 if p > 5 else 25.0)  # penalty only past the keep-alive
    assert rule["inside_slower"] == 0 and rule["outside_slower"] == 2
    assert judge(spec, rule)[0] == HOLDS, judge(spec, rule)[1]
    no_keep_alive = window(lambda m, p: 250.0 if p > 1 else 25.0)  # the collector after ~1 s, as without sets
    verdict, reason = judge(spec, no_keep_alive)
    assert verdict == CONTRADICTED and "inside the keep-alive whose decode was slower" in reason
    never = window(lambda m, p: 25.0)  # wired forever: no penalty past the keep-alive either
    assert judge(spec, never)[0] == CONTRADICTED
    ignored_setting = {**rule, "keep_alive_logged": 180}  # the variable did not reach the server
    assert judge(spec, ignored_setting)[0] == CONTRADICTED


def _no_residency(latency_of):
    frame = pd.concat([samples(lambda m, p: latency_of(m, p, "none"), models=("small", "big"), keep_alive="none",
                               starts=2, pauses=SHORT + [1.4, 3.0]),
                       samples(lambda m, p: latency_of(m, p, "default"), models=("small", "big"), keep_alive="default",
                               starts=2, pauses=SHORT + [1.4, 3.0], seed=1)])
    figures, _ = no_residency_figures(frame, short=SHORT, long=[1.4, 3.0], margin=0.10,
                                      sizes={"small": 700, "big": 3000})
    return figures


def test_no_residency_rule_holds_and_its_negations_are_contradicted():
    spec = SPECS["idle-metal-penalty-without-residency"]
    size = {"small": 1.0, "big": 4.0}

    def rule(m, p, keep):
        return 20.0 + (50.0 * size[m] if keep == "none" and p > 1 else 0.0)

    figures = _no_residency(rule)
    assert figures["penalty_grows_with_size"] and figures["no_residency_slower"] == 4
    assert judge(spec, figures)[0] == HOLDS, judge(spec, figures)[1]
    flat = _no_residency(lambda m, p, keep: 20.0 + (80.0 if keep == "none" and p > 1 else 0.0))
    assert not flat["penalty_grows_with_size"] and judge(spec, flat)[0] == CONTRADICTED  # no growth with size
    both = _no_residency(lambda m, p, keep: 20.0 + (50.0 * size[m] if p > 1 else 0.0))  # sets do not help
    assert judge(spec, both)[0] == CONTRADICTED
    none = _no_residency(lambda m, p, keep: 20.0)  # no collector at all
    assert judge(spec, none)[0] == CONTRADICTED


@pytest.mark.parametrize("claim_id", ["idle-metal-keepalive-180s", "idle-metal-penalty-without-residency"])
def test_metal_claims_have_scenarios_and_are_not_checkable_on_a_cpu_build(claim_id):
    spec = SPECS[claim_id]
    assert spec.scenario != "none" and spec.check and "metal" in spec.requires
    cause, sentence = gate_cause(spec, "cpu")
    assert cause == "platform" and "needs macOS on Apple Silicon with a Metal build" in sentence
