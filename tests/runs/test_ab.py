"""harness.runs.ab.gate_job_spec: lbench ab's job from its options as given (what the command only parses)."""

import pytest

from harness.errors import BadInput
from harness.runs.ab import gate_job_spec
from harness.spec import IdleSpec

OPTIONS = dict(margin=None, arms="a,b,aa", alpha=0.02, slower_rule="zero", seed=3, min_rounds=None, max_rounds=200,
               budget="15m", spending="obf", gate_on=None, llama_server_a="a/llama-server",
               llama_server_b="b/llama-server", a_args=[], b_args=["--threads", "1"])


def spec() -> IdleSpec:
    return IdleSpec(name="gate", models=["tiny-q8"], pauses_s=[0.0, 1.0], reps=8, warmup=2, self_check=0)


def test_the_job_holds_both_sides_and_the_rounds_design():
    job = gate_job_spec(spec(), **{**OPTIONS, "margin": "0=0.03,1=0.1", "gate_on": "1"})
    assert job.rounds.budget_s == 900 and job.rounds.seed == 3 and job.rounds.arms == ("a", "b", "aa")
    assert job.rounds.margin_of("pause 0 s") == 0.03 and job.rounds.margin_of("pause 1 s") == 0.1
    assert job.gate_pauses == (1.0,) and job.design == {"spec": "gate", "budget": "15m"}
    assert job.spec_a.server_args == [] and job.spec_b.server_args == ["--threads", "1"]
    assert job.spec_a is not job.spec_b and (job.llama_server_a, job.llama_server_b) == ("a/llama-server", "b/llama-server")


@pytest.mark.parametrize("change,said", [
    ({"margin": "7=0.1"}, "--margin names pauses the spec does not have"),
    ({"spending": "bonferroni"}, "--spending must be one of"),
    ({"arms": "a,c"}, "unknown arm"),
    ({"budget": "soon"}, "--budget must be a duration"),
    ({"b_args": ["--rpc", "10.0.0.2:50052"]}, "--rpc"),
])
def test_bad_options_are_refused_before_anything_runs(change, said):
    with pytest.raises(BadInput, match=said):
        gate_job_spec(spec(), **{**OPTIONS, **change})
