"""engines/server_policy.py: the knowing overrides (``--unsafe-server-arg``, ``--unsafe-server-env``)
under the loopback rule, the line a run prints when one is used, and the check where a server starts
(``check_start``).  The verdicts of single flags and variables are tests/security/test_server_allow_list.py."""

from __future__ import annotations

import pytest

from harness.engines import server_policy
from harness.errors import BadInput
from harness.spec import IdleSpec, SwapSpec


def test_unsafe_env_is_name_equals_value():
    assert server_policy.parse_unsafe_env(["LD_PRELOAD=libm.so.6", "MY_TRACE=a=b", "EMPTY="]) == {
        "LD_PRELOAD": "libm.so.6", "MY_TRACE": "a=b", "EMPTY": ""}
    for bad in ("LD_PRELOAD", "1X=2", "A B=1", "=x", "A;touch pwned=1"):
        with pytest.raises(BadInput, match="NAME=VALUE"):
            server_policy.parse_unsafe_env([bad])
    with pytest.raises(BadInput, match="given twice"):
        server_policy.parse_unsafe_env(["A=1", "A=2"])
    with pytest.raises(BadInput, match="bad value for A"):
        server_policy.parse_unsafe_env(["A=x\ny"])  # a control character (a terminal or a script line)


@pytest.mark.parametrize("name", ["LLAMA_ARG_HOST", "LLAMA_ARG_PORT", "llama_arg_port", "LLAMA_ARG_HOST_X",
                                  "LLAMA_ARG_MODEL", "LLAMA_ARG_MODEL_URL", "LLAMA_ARG_HF_REPO",
                                  "LLAMA_ARG_MODELS_PRESET", "LLAMA_SERVER_ROUTER_PORT", "LLAMA_ARG_REUSE_PORT"])
def test_the_loopback_rule_wins_over_the_override(name):
    """A variable that sets the address, port or model is refused even passed knowingly: the loopback
    rule (engines/reserved.py) has no override."""
    with pytest.raises(BadInput, match="reserved") as exc:
        server_policy.parse_unsafe_env([f"{name}=0.0.0.0"])
    assert "no option passes it" in str(exc.value.hint)
    with pytest.raises(BadInput, match="reserved"):
        server_policy.check_start([], [], unsafe_env={name: "80"})


def test_refused_env_hint_names_the_override():
    with pytest.raises(BadInput) as exc:
        server_policy.check_env({"LD_PRELOAD": "x"}, "--env-axis")
    assert "--unsafe-server-env NAME=VALUE" in str(exc.value.hint)


def test_the_warning_names_each_override_and_what_it_does():
    line = server_policy.unsafe_warning(["--rpc", "10.0.0.2:50052", "-t", "2"], ["LD_PRELOAD=libm.so.6", "MY_TAG=x y"])
    assert line is not None and line.startswith("warning: passed knowingly past lbench's server allow-list")
    assert "server arguments --rpc 10.0.0.2:50052 -t 2 (--rpc: connects the server to another machine" in line
    assert "LD_PRELOAD=libm.so.6 (loads code into the server)" in line
    assert "MY_TAG='x y' (not on lbench's list" in line
    assert server_policy.unsafe_warning([], []) is None and server_policy.unsafe_warning(None, None) is None


def test_check_start_passes_the_allow_list_and_the_recorded_overrides():
    server_policy.check_start(["-t", "2", "--cache-reuse", "256"], ["GGML_VK_KEEPALIVE_MS", "OMP_WAIT_POLICY"])
    server_policy.check_start(["-t", "2"], ["LD_PRELOAD"], unsafe_args=["--rpc", "h:1"],
                              unsafe_env={"LD_PRELOAD": "libm.so.6"})
    for args, env, why in ((["--rpc", "h:1"], [], "another machine"), (["--tools", "all"], [], "runs commands"),
                           ([], ["LD_PRELOAD"], "loads code"), ([], ["HOME"], "not on lbench's list")):
        with pytest.raises(BadInput, match=why) as exc:
            server_policy.check_start(args, env, what="router")
        assert "router start: the allow-list, applied again where the server starts" in str(exc.value.where)
    with pytest.raises(BadInput, match="reserved"):
        server_policy.check_start([], [], unsafe_args=["--host", "0.0.0.0"])


def test_specs_take_unsafe_env_with_the_same_rules_as_unsafe_args():
    spec = IdleSpec(models=["tiny-q8"], unsafe_server_env=["LD_PRELOAD=libm.so.6"]).validate()
    assert spec.as_dict()["unsafe_server_env"] == ["LD_PRELOAD=libm.so.6"]  # the manifest's config
    swap = SwapSpec(models=["tiny-q8", "tiny-q4"], unsafe_server_env=["MY_TAG=1"]).validate()
    assert swap.as_dict()["unsafe_server_env"] == ["MY_TAG=1"]
    with pytest.raises(BadInput, match="reserved"):
        IdleSpec(models=["tiny-q8"], unsafe_server_env=["LLAMA_ARG_PORT=80"]).validate()
    with pytest.raises(BadInput, match="both --unsafe-server-env and --env-axis"):
        IdleSpec(models=["tiny-q8"], env_axis=["GGML_VK_KEEPALIVE_MS=unset,1"],
                 unsafe_server_env=["GGML_VK_KEEPALIVE_MS=5"]).validate()
    with pytest.raises(BadInput, match="both --unsafe-server-env and --omp-wait-policy"):
        IdleSpec(models=["tiny-q8"], unsafe_server_env=["OMP_WAIT_POLICY=active"]).validate()
    with pytest.raises(BadInput, match="both --unsafe-server-env and --env-axis"):
        SwapSpec(models=["tiny-q8", "tiny-q4"], env=["GGML_VK_KEEPALIVE_MS=2"],
                 unsafe_server_env=["GGML_VK_KEEPALIVE_MS=1"]).validate()
    with pytest.raises(BadInput, match="cannot take --unsafe-server-env"):  # lbench does not set its environment
        IdleSpec(models=["m"], engines=["openai"], unsafe_server_env=["MY_TAG=1"]).validate()
