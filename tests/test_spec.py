import pytest

from harness.errors import BadInput
from harness.spec import IdleSpec, load_spec, parse_keep_alive, parse_pauses, parse_sleep_idle


def test_parse_pauses_list_and_range():
    assert parse_pauses("0,0.5, 1.2") == [0.0, 0.5, 1.2]
    assert parse_pauses("0:4:0.8") == [0.0, 0.8, 1.6, 2.4, 3.2, 4.0]
    assert parse_pauses("0:1:0.5,2") == [0.0, 0.5, 1.0, 2.0]


@pytest.mark.parametrize("text,fragment", [
    ("-1", "negative"), ("0,abc", "not a number"), ("", "no pauses"), ("0:1", "start:stop:step"),
    ("0:1:0", "step must be > 0"), ("nan", "finite"), ("99999", "over"),
])
def test_parse_pauses_rejects(text, fragment):
    with pytest.raises(BadInput) as err:
        parse_pauses(text)
    assert fragment in str(err.value)
    assert err.value.exit_code == 2


def test_keep_alive_values():
    assert parse_keep_alive("default") == "default"
    assert parse_keep_alive("NONE") == "none"
    assert parse_keep_alive("30s") == "30"
    for bad in ("0", "-5", "forever"):
        with pytest.raises(BadInput):
            parse_keep_alive(bad)


def test_sleep_idle_values():
    assert parse_sleep_idle(None) is None and parse_sleep_idle("off") is None and parse_sleep_idle(-1) is None
    assert parse_sleep_idle("2") == 2
    with pytest.raises(BadInput):
        parse_sleep_idle(0)


def test_settings_matrix():
    spec = IdleSpec(keep_alive=["default", "none"], sleep_idle_seconds=[None, 2]).validate()
    assert [s.label for s in spec.settings()] == [
        "keep-alive=default", "keep-alive=default,sleep-idle=2s", "keep-alive=none", "keep-alive=none,sleep-idle=2s"]


def test_validate_rejects_bad_numbers():
    with pytest.raises(BadInput, match="reps"):
        IdleSpec(reps=0).validate()
    with pytest.raises(BadInput, match="no models"):
        IdleSpec(models=[]).validate()


def test_load_spec(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[idle]\nmodels = "tiny-q8"\npauses_s = "0:1:0.5"\nreps = 2\nkeep_alive = ["default", "none"]\n')
    spec = load_spec(f)
    assert spec.models == ["tiny-q8"] and spec.pauses_s == [0.0, 0.5, 1.0] and spec.reps == 2
    f.write_text("[idle]\nbogus = 1\n")
    with pytest.raises(BadInput, match="unknown keys in idle spec: bogus"):
        load_spec(f)
    f.write_text("[idle\n")
    with pytest.raises(BadInput, match="not valid TOML"):
        load_spec(f)


def test_shipped_experiment_specs_load():
    from pathlib import Path

    specs = sorted((Path(__file__).parents[1] / "experiments" / "idle").glob("*.toml"))
    assert specs, "experiments/idle/ should ship example specs"
    for f in specs:
        assert load_spec(f).pauses_s


def test_swap_spec_validation():
    from harness.spec import SwapSpec

    with pytest.raises(BadInput, match="at least two models, got 0"):
        SwapSpec(models=[]).validate()
    with pytest.raises(BadInput, match="at least two models, got 1"):  # one model never swaps
        SwapSpec(models=["tiny-q8"]).validate()
    with pytest.raises(BadInput, match="models_max"):
        SwapSpec(models_max=-1).validate()
    with pytest.raises(BadInput, match="unknown pattern"):
        SwapSpec(pattern="nope").validate()
    assert SwapSpec(sleep_idle_seconds="3").validate().sleep_idle_seconds == 3


@pytest.mark.parametrize("text", ["0:3600:1e-9", "0:1:1e-320", "0:1:0.0001,0:1:0.0001"])
def test_pause_range_is_bounded_before_it_is_expanded(text):
    """Issue 12, class 2: a range of 3.6e12 pauses (or an infinite count) is refused, not expanded."""
    from harness.spec import MAX_PAUSES

    with pytest.raises(BadInput, match=f"more than {MAX_PAUSES} pauses"):
        parse_pauses(text)
