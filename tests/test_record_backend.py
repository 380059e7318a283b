"""The comparability rule and backends: runs of different backends are never pooled."""

import pytest
from test_record import HOST, record

from harness.errors import BadInput
from harness.record import backend_of, check_comparable

LINUX = {**HOST, "os": "Linux", "os_release": "6.1", "macos_version": None, "cpu_model": "Xeon"}
ENGINE = {"engine": "llama-server", "path": "/x/llama-server", "build_number": 11434, "sha256": "ab" * 32}


def test_a_side_mixing_backends_is_refused_even_with_one_binary_hash():
    cpu = record(run_id="a", host=LINUX, engine={**ENGINE, "backend": "cpu"})
    vulkan = record(run_id="b", host=LINUX, engine={**ENGINE, "backend": "vulkan"})
    result = check_comparable([cpu, vulkan])
    assert result.refused == ("baseline runs a and b differ in backend",)
    with pytest.raises(BadInput, match="cannot be pooled"):
        result.raise_if_refused("--baseline")


def test_between_sides_a_backend_change_is_flagged():
    cpu = record(run_id="a", host=LINUX, engine={**ENGINE, "backend": "cpu"})
    vulkan = record(run_id="b", host=LINUX, engine={**ENGINE, "backend": "vulkan"})
    assert "backend: cpu vs vulkan" in check_comparable([cpu], [vulkan]).flags


def test_runs_before_backends_were_recorded_read_as_what_lbench_built_then():
    old_linux = record(run_id="a", host=LINUX, engine=ENGINE)
    assert backend_of(old_linux) == "cpu" and backend_of(record(run_id="m")) == "metal"
    new_cpu = record(run_id="b", host=LINUX, engine={**ENGINE, "backend": "cpu"})
    assert check_comparable([old_linux, new_cpu]).refused == ()  # an old CPU run pools with a new one
