"""Data printed on a terminal is shown, never obeyed (issue 47, class 3): a label, a CPU model or
a trust label holding ANSI escapes, carriage returns, newlines or bidi overrides comes out of
``lbench runs``, ``history list``, ``history trust list`` and ``compare`` escaped, so it can neither
drive the terminal nor draw a line of its own (a fake "trusted" key)."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from conftest import make_history_run, run_cli
from harness.store import RunWriter
from harness.terminal import printable

FAKE = "ed25519:FAKEKEYFAKEKEY  label \"ci\"  trusted 2026-01-01"
HOSTILE = f"m\x1b[2J\x1b]0;title\x07\r\n{FAKE}\u202egpj.exe\x9b31m"


def _clean(text: str) -> None:
    """No escape, C1 control, bidi override or carriage return reached the output, and no line
    starts with the fake key."""
    assert not any(c in text for c in "\x1b\x07\x9b\r\u202e"), repr(text[:3000])
    assert not any(line.startswith("ed25519:FAKEKEY") for line in text.splitlines()), text


@pytest.mark.parametrize("text,want", [
    ("a\x1b[31mb", "a\\x1b[31mb"), ("a\nb\rc", "a\\nb\\rc"), ("\u202eabc", "\\u202eabc"), ("\x9b1m", "\\x9b1m"),
    ("tab\tok", "tab\tok"), ("naïve · ok", "naïve · ok"), ("\u200bzero", "\\u200bzero"),
])
def test_printable_escapes_what_a_terminal_would_obey(text, want):
    assert printable(text) == want


def test_printable_cuts_a_huge_value_with_a_marker():
    text = printable("x" * 60_000_000)
    assert len(text) < 2100 and text.endswith("… (59,998,000 more characters)")


def _run(root: Path, label: str, cpu: str, scale: float = 1.0, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": seed}, "models": [{"label": label, "synthetic": True}],
        "host": {"cpu_model": cpu, "os": "Linux", "hostname": socket.gethostname()},
        "engine": {"build_number": 11434, "sha256": "ab" * 32}, "cells": []})
    for pause in (0.0, 1.5):
        for rep in range(6):
            v = 20.0 * scale * rng.lognormal(0, 0.02)
            w.append({"model": label, "setting": label, "phase": "measure", "rep": rep, "pause_requested_s": pause,
                      "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1, "server_ms": v - 1,
                      "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    return w.run_id


def test_runs_and_compare_escape_labels(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = _run(root, HOSTILE, HOSTILE)
    b = _run(root, HOSTILE, HOSTILE, scale=1.3, seed=1)
    r = run_cli("runs", env=lbench_env)
    assert r.returncode == 0, r.stderr
    _clean(r.stdout + r.stderr)
    assert "\\x1b[2J" in r.stdout
    r = run_cli("compare", a, b, env=lbench_env)
    assert r.returncode in (0, 1, 2), r.stderr
    _clean(r.stdout + r.stderr)
    assert "\\x1b[2J" in r.stdout


def test_trust_list_and_history_list_escape_labels(lbench_env, tmp_path):
    archive = tmp_path / "archive"
    key = run_cli("history", "key", env=lbench_env).stdout.strip()
    assert run_cli("history", "trust", "add", key, "--label", HOSTILE, "--archive", str(archive),
                   env=lbench_env).returncode == 0
    r = run_cli("history", "trust", "list", "--archive", str(archive), env=lbench_env, columns=200)
    assert r.returncode == 0, r.stderr
    _clean(r.stdout + r.stderr)
    assert len([line for line in r.stdout.splitlines() if line.startswith(key)]) == 1, r.stdout
    assert [line for line in r.stdout.splitlines() if "trusted 20" in line and not line.startswith(key)] == [], r.stdout
    run = make_history_run(tmp_path / "made", 0, cpu_model=HOSTILE)
    added = run_cli("history", "add", str(run), "--archive", str(archive), env=lbench_env)
    assert added.returncode == 0, added.stderr
    r = run_cli("history", "list", "--archive", str(archive), env=lbench_env)
    assert r.returncode == 0, r.stderr
    _clean(r.stdout + r.stderr)
