"""Which llama-server lbench picks (docs/mac.md finding 13): the pinned build in lbench's cache comes
before a llama-server on PATH, so a package manager's build (Homebrew's on a Mac runner) cannot replace
the build a gate or bisect is about.  Only the choice is tested: nothing here is started."""

from __future__ import annotations

import stat

import pytest

from harness.engines import binary, provision


def _on_path(tmp_path, monkeypatch):
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv("LBENCH_LLAMA_SERVER", raising=False)
    return exe


def test_the_pinned_cached_build_comes_before_path(tmp_path, monkeypatch):
    exe = _on_path(tmp_path, monkeypatch)
    order = [source for source, _ in binary.candidates()]
    assert order.index("PATH") == len(order) - 1, order
    assert order[2].startswith("lbench cache"), order
    if not provision.plan_build().is_built():
        pytest.skip("no pinned build in this machine's lbench cache (lbench engine install): only the order was checked")
    chosen = next((source, path) for source, path in binary.candidates() if path is not None)
    assert chosen[0].startswith("lbench cache") and chosen[1] != exe


def test_path_is_used_where_lbench_built_nothing(tmp_path, monkeypatch):
    exe = _on_path(tmp_path, monkeypatch)
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path / "empty-cache"))  # nothing built there
    chosen = next((source, path) for source, path in binary.candidates() if path is not None)
    assert chosen == ("PATH", exe)


def test_an_explicit_binary_still_wins(tmp_path, monkeypatch):
    _on_path(tmp_path, monkeypatch)
    given = tmp_path / "mine"
    chosen = next((source, path) for source, path in binary.candidates(str(given)) if path is not None)
    assert chosen == ("--llama-server", given)
