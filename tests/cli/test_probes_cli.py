"""``lbench probes``: every source with its status, and --check on an absent probe (exit 2)."""

import pytest
from conftest import run_cli

from harness.probes.devices import registry


def test_lists_every_source_with_a_reason():
    r = run_cli("probes")
    assert r.returncode == 0, r.stderr
    for name in registry.SOURCES:
        assert name in r.stdout
    assert "not available:" in r.stdout or "available (" in r.stdout
    assert "sampled with --device-probes auto:" in r.stdout


def test_check_of_an_absent_probe_exits_2_naming_what_is_available():
    status = registry.describe()
    absent = [s for s in registry.SOURCES if not status[s].startswith("available")]
    if not absent:
        pytest.skip("every device probe is available on this machine: none absent to ask for")
    r = run_cli("probes", "--check", absent[0])
    assert r.returncode == 2
    assert "is not available here" in r.stderr and "available here:" in r.stderr
