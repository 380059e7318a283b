"""Any knob as an axis: env variables, server-argument sets and prompt lengths expand into cells."""

import pytest

from harness import knob_axes
from harness.engines.base import Setting
from harness.errors import BadInput
from harness.spec import IdleSpec, SwapSpec


def test_env_axis_parses_values_and_unset():
    assert knob_axes.parse_env_axis("GGML_VK_KEEPALIVE_MS=unset,30000") == ("GGML_VK_KEEPALIVE_MS", [None, "30000"])
    assert knob_axes.parse_env_axis("GGML_X=1,1,2") == ("GGML_X", ["1", "2"])  # duplicates once


@pytest.mark.parametrize("item, words", [
    ("LLAMA_ARG_HOST=0.0.0.0", "reserved"),
    ("llama_arg_port=80", "reserved"),
    ("LLAMA_ARG_HF_REPO=x/y", "reserved"),
    ("OMP_WAIT_POLICY=active,passive", "--omp-wait-policy"),
    ("GGML_METAL_NO_RESIDENCY=1", "--keep-alive"),
    ("NOEQUALS", "bad env axis"),
    ("1BAD=2", "bad env axis"),
    ("GGML_X=a,,b", "empty value"),
])
def test_env_axis_refusals(item, words):
    with pytest.raises(BadInput) as e:
        knob_axes.parse_env_axis(item)
    assert words in str(e.value) + str(e.value.hint or "")
    assert e.value.exit_code == 2


def test_server_args_axis_values_and_loopback_rule():
    assert knob_axes.parse_server_args_value("none") == ("none",)
    assert knob_axes.parse_server_args_value("--cache-reuse 30") == ("--cache-reuse", "30")
    for bad in ("--host 0.0.0.0", "--port=80", "-hf x/y", "--ho 0.0.0.0"):
        with pytest.raises(BadInput, match="reserved"):
            knob_axes.parse_server_args_value(bad)
    with pytest.raises(BadInput, match="bad server arguments"):
        knob_axes.parse_server_args_value("--x 'unclosed")


def test_idle_spec_expands_every_axis_into_cells():
    spec = IdleSpec(models=["tiny-q8"], env_axis=["GGML_VK_KEEPALIVE_MS=unset,30000"],
                    server_args_axis=["none", "--cache-reuse 30"], prompt_tokens=[0, 512]).validate()
    settings = spec.settings()
    assert len(settings) == 2 * 2 * 2
    labels = [s.label for s in settings]
    assert len(set(labels)) == 8  # every cell its own group
    assert "keep-alive=default,GGML_VK_KEEPALIVE_MS=unset,args=none" in labels
    assert "keep-alive=default,GGML_VK_KEEPALIVE_MS=30000,args=--cache-reuse 30,prompt=512" in labels
    s = next(s for s in settings if s.label.endswith("args=--cache-reuse 30,prompt=512"))
    assert s.extra_args() == ["--cache-reuse", "30"] and s.prompt_tokens == 512
    assert s.axis_knobs() == {"env": {"GGML_VK_KEEPALIVE_MS": s.env[0][1]}, "server_args": ["--cache-reuse", "30"],
                              "prompt_tokens": 512}
    assert Setting().axis_knobs() == {} and Setting().label == "keep-alive=default"  # old labels unchanged


def test_env_values_reach_the_server_environment_and_unset_removes(monkeypatch):
    from harness.engines.binary import Binary
    from harness.engines.llama_server import LlamaServerEngine

    monkeypatch.setenv("GGML_VK_KEEPALIVE_MS", "5")  # the user's own value: 'unset' removes it
    engine = LlamaServerEngine(Binary(__import__("pathlib").Path("/bin/true"), "test", "v", 1, "c", "0" * 64))
    env, overrides = engine.environment(Setting(env=(("GGML_VK_KEEPALIVE_MS", None),)))
    assert "GGML_VK_KEEPALIVE_MS" not in env and overrides == {}
    env, overrides = engine.environment(Setting(env=(("GGML_VK_KEEPALIVE_MS", "30000"),)))
    assert env["GGML_VK_KEEPALIVE_MS"] == "30000" and overrides == {"GGML_VK_KEEPALIVE_MS": "30000"}


def test_spec_refusals_before_any_run():
    with pytest.raises(BadInput, match="does not fit the context"):
        IdleSpec(models=["tiny-q8"], prompt_tokens=[4096], ctx_size=2048).validate()
    with pytest.raises(BadInput, match="prompt length"):
        IdleSpec(models=["tiny-q8"], prompt_tokens=["-1"]).validate()  # type: ignore[list-item]
    with pytest.raises(BadInput, match="given twice"):
        IdleSpec(models=["tiny-q8"], env_axis=["GGML_A=1", "GGML_A=2"]).validate()
    with pytest.raises(BadInput, match="cannot take --env-axis"):
        IdleSpec(models=["m"], engines=["ollama"], prompt_tokens=[0, 16]).validate()
    with pytest.raises(BadInput, match="cells"):
        IdleSpec(models=["tiny-q8"], env_axis=[f"GGML_V{i}=" + ",".join(str(j) for j in range(10)) for i in range(5)]
                 ).validate()


def test_swap_spec_takes_one_value_per_storm():
    assert SwapSpec(env=["GGML_VK_KEEPALIVE_MS=unset"]).validate().env_pairs() == (("GGML_VK_KEEPALIVE_MS", None),)
    with pytest.raises(BadInput, match="one value per storm"):
        SwapSpec(env=["GGML_A=1,2"]).validate()
    with pytest.raises(BadInput, match="reserved"):
        SwapSpec(env=["LLAMA_ARG_HOST=0.0.0.0"]).validate()


def test_keep_alive_is_an_env_axis_instance():
    """--keep-alive expands with the env axes, each value becomes the Metal residency variables it sets
    (applied by the env axes' loop, recorded in axis_knobs); its label and field stay as they were."""
    spec = IdleSpec(models=["tiny-q8"], keep_alive=["default", "none", "30s"], env_axis=["GGML_X=1,unset"]).validate()
    settings = spec.settings()
    assert [s.label for s in settings] == [f"keep-alive={k},GGML_X={x}" for k in ("default", "none", "30s")
                                           for x in ("1", "unset")]
    assert [s.keep_alive for s in settings] == ["default"] * 2 + ["none"] * 2 + ["30"] * 2
    none, thirty = settings[2], settings[5]
    assert none.knob_env() == (("GGML_METAL_NO_RESIDENCY", "1"), ("GGML_X", "1"))
    assert thirty.knob_env() == (("GGML_METAL_RESIDENCY_KEEP_ALIVE_S", "30"), ("GGML_X", None))
    assert none.axis_knobs() == {"keep_alive": {"GGML_METAL_NO_RESIDENCY": "1"}, "env": {"GGML_X": "1"}}
    assert settings[0].axis_knobs() == {"env": {"GGML_X": "1"}} and Setting().knob_env() == ()
    assert knob_axes.n_env_settings(spec.env_axis, spec.keep_alive) == 6
    with pytest.raises(BadInput, match="bad keep-alive value"):
        knob_axes.keep_alive_axis(["-5"])


def test_keep_alive_reaches_the_server_through_the_env_axis_loop(monkeypatch):
    from harness.engines.binary import Binary
    from harness.engines.llama_server import LlamaServerEngine

    monkeypatch.setenv("GGML_METAL_RESIDENCY_KEEP_ALIVE_S", "5")  # the user's own: never reaches the server
    engine = LlamaServerEngine(Binary(__import__("pathlib").Path("/bin/true"), "test", "v", 1, "c", "0" * 64))
    env, overrides = engine.environment(Setting())
    assert overrides == {} and not any(k.startswith("GGML_METAL_") for k in env)
    env, overrides = engine.environment(Setting(keep_alive="none", env=(("GGML_VK_KEEPALIVE_MS", "30000"),)))
    assert overrides == {"GGML_METAL_NO_RESIDENCY": "1", "GGML_VK_KEEPALIVE_MS": "30000"}
    assert env["GGML_METAL_NO_RESIDENCY"] == "1" and "GGML_METAL_RESIDENCY_KEEP_ALIVE_S" not in env
    _, overrides = engine.environment(Setting(keep_alive="30"))
    assert overrides == {"GGML_METAL_RESIDENCY_KEEP_ALIVE_S": "30"}
