"""CPU wake knobs as sweep axes: parsing, the settings matrix, labels."""

import pytest

from harness.engines.base import Setting
from harness.errors import BadInput
from harness.spec import IdleSpec, parse_cpu_knob


def test_knob_values_parse_and_default_means_none():
    assert parse_cpu_knob("threads", "2", "x") == 2 and parse_cpu_knob("threads", "default", "x") is None
    assert parse_cpu_knob("poll", "100", "x") == 100 and parse_cpu_knob("prio", "-1", "x") == -1
    assert parse_cpu_knob("cpu_strict", "1", "x") is True and parse_cpu_knob("cpu_strict", "off", "x") is False
    assert parse_cpu_knob("cpu_mask", "3", "x") == "0x3" and parse_cpu_knob("cpu_mask", "0xF", "x") == "0xf"
    assert parse_cpu_knob("cpus", "0+1", "x") == "0,1" and parse_cpu_knob("cpus", "0-1", "x") == "0-1"
    assert parse_cpu_knob("omp_wait", "ACTIVE", "x") == "active"
    assert parse_cpu_knob("omp_spincount", "0", "x") == 0


@pytest.mark.parametrize("key,value,fragment", [
    ("threads", "0", "1..512"), ("threads", "two", "bad threads"), ("poll", "101", "0..100"),
    ("prio", "4", "-1..3"), ("cpu_strict", "maybe", "cpu-strict"), ("cpu_mask", "0xZZ", "cpu-mask"),
    ("cpus", "a-b", "CPU list"), ("omp_wait", "spin", "OMP_WAIT_POLICY"), ("omp_spincount", "-5", "GOMP_SPINCOUNT"),
])
def test_bad_knob_values_are_clear_errors(key, value, fragment):
    with pytest.raises(BadInput) as err:
        parse_cpu_knob(key, value, "--x")
    assert fragment in str(err.value) and err.value.exit_code == 2


def test_settings_cross_the_cpu_axes_with_labels():
    spec = IdleSpec(threads=["1", "2"], omp_wait=["default", "active"], cpu_strict=["1"]).validate()
    settings = spec.settings()
    assert len(settings) == 4
    labels = {s.label for s in settings}
    assert "keep-alive=default,threads=1,cpu-strict" in labels
    assert "keep-alive=default,threads=2,cpu-strict,omp-wait=active" in labels
    assert Setting(threads=2, cpu_strict=False).label == "keep-alive=default,threads=2,cpu-strict=0"
    assert Setting().cpu_knobs() == {} and Setting().label == "keep-alive=default"


def test_match_self_check_and_client_options_are_validated():
    assert IdleSpec(match="llama-idle", self_check=0, client_cpus="0+1").validate().client_cpus == "0,1"
    with pytest.raises(BadInput, match="match mode"):
        IdleSpec(match="llama-bench").validate()
    with pytest.raises(BadInput, match="self_check"):
        IdleSpec(self_check=-1).validate()
    with pytest.raises(BadInput, match="client nice"):
        IdleSpec(client_nice=40).validate()


def test_spec_file_accepts_knob_axes(tmp_path):
    from harness.spec import load_spec

    f = tmp_path / "s.toml"
    f.write_text('[idle]\nthreads = [1, 2]\nomp_wait = "active"\nmatch = "llama-idle"\n')
    spec = load_spec(f)
    assert spec.threads == [1, 2] and spec.omp_wait == ["active"] and spec.match == "llama-idle"
