"""Smaller hostile values (issue 47): a 300-character model file name is a clear error (exit 2,
``file name too long``), never a traceback; a 60 MB string in a manifest comes out of
``lbench evidence`` and ``lbench compare`` cut, with a marker, not three times whole."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from harness.store import RunWriter

BIG = 60_000_000


@pytest.mark.parametrize("args", [["model", "info"], ["idle", "-m"], ["swap", "-m", "tiny-q8", "-m"]])
def test_a_300_character_model_file_name_is_a_clear_error(lbench_env, args):
    r = run_cli(*args, "a" * 300 + ".gguf", env=lbench_env, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "file name too long" in r.stderr.replace("\n", " ") and "Traceback" not in r.stderr, r.stderr


def _run(root: Path, big: str, seed: int) -> str:
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": seed}, "command": "lbench idle -m m", "models": [{"label": "m", "synthetic": True}],
        "host": {"cpu_model": big, "os": "Linux", "hostname": socket.gethostname()},
        "engine": {"build_number": 11434, "sha256": "ab" * 32}, "cells": []})
    for pause in (0.0, 1.5):
        for rep in range(6):
            v = 20.0 * rng.lognormal(0, 0.02)
            w.append({"model": "m", "setting": "s", "phase": "measure", "rep": rep, "pause_requested_s": pause,
                      "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1, "server_ms": v - 1,
                      "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    return w.run_id


def test_a_60_mb_manifest_string_comes_out_cut(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    big = "Q" * BIG
    a, b = _run(root, big, 0), _run(root, big, 1)
    del big
    r = run_cli("evidence", a, "-o", str(tmp_path / "ev"), env=lbench_env)
    assert r.returncode == 0, r.stderr[-2000:]
    text = (tmp_path / "ev" / "evidence.md").read_text()
    runs = [len(m) for m in re.findall("Q{100,}", text)]
    assert runs and max(runs) <= 2000 and len(text) < 200_000, (len(text), runs)
    assert "more characters)" in text
    r = run_cli("compare", a, b, env=lbench_env)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and len(out) < 200_000, len(out)
