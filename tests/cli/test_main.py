"""harness.cli.main's clean stop: children are stopped only through processes, which --help never imports."""

from __future__ import annotations

import sys
import types

import pytest

import harness.cli as cli


@pytest.fixture(autouse=True)
def _keep_sigterm(monkeypatch):
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)  # main() must not rewire pytest's SIGTERM


def test_interrupt_stops_children_through_processes(monkeypatch):
    calls = []
    fake = types.SimpleNamespace(stop_all=lambda: calls.append("stop_all"))
    monkeypatch.setitem(sys.modules, "harness.engines.processes", fake)

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "app", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130
    assert calls == ["stop_all"]


def test_interrupt_before_any_child_imports_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "harness.engines.processes", raising=False)
    monkeypatch.setattr(cli, "app", lambda **kwargs: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130
    assert "harness.engines.processes" not in sys.modules
