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


def test_interrupt_says_how_many_samples_were_kept_and_where(monkeypatch, tmp_path, capsys):
    from harness import store

    writer = store.RunWriter(tmp_path, "idle", {"cells": []})
    for i in range(3):
        writer.append({"model": "m", "setting": "s", "phase": "measure", "latency_ms": 1.0 + i})
    monkeypatch.setattr(store, "STARTED", [writer])

    def interrupted(**kwargs):
        writer.finish("interrupted", "stopped by the user (SIGINT/SIGTERM)")
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "app", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130
    err = capsys.readouterr().err
    assert f"3 samples kept in {writer.dir}" in err and f"lbench report {writer.run_id}" in err
