"""compare and gate in a CI log: piped (no TTY) at 80 columns, one sentence per group with units,
identifying strings whole and distinguishable, paths unbroken, a missing value said as 'none'."""

import re
import socket
from pathlib import Path

import numpy as np
from conftest import run_cli

from harness.store import RunWriter

MODEL = "llama3.2-1b-q8-synthetic-checkpoint"
SETTINGS = ("keep-alive=default", "keep-alive=none")


def make_run(root: Path, *, scale: float = 1.0, seed: int = 0, pauses=(0.0, 0.5, 1.5, 2.0), reps: int = 8,
             build: int = 11434, ctx_size: int = 2048) -> str:
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": seed, "ctx_size": ctx_size}, "models": [{"label": MODEL, "synthetic": True}],
        "host": {"cpu_model": "TestCPU", "os": "Linux", "hostname": socket.gethostname(), "load_avg_1m": 0.1 + seed},
        "engine": {"build_number": build, "sha256": "ab" * 32 if build == 11434 else "cd" * 32}, "cells": []})
    for setting in SETTINGS:
        for pause in pauses:
            for rep in range(reps):
                v = (20.0 if pause < 1 else 1200.0) * scale * rng.lognormal(0, 0.02)
                w.append({"model": MODEL, "setting": setting, "phase": "measure", "rep": rep,
                          "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": v,
                          "server_prompt_ms": v - 1, "server_ms": v - 1, "overhead_ms": 1.0, "http_status": 200,
                          "error": None})
    w.finish("complete")
    return w.run_id


def test_compare_fits_80_columns_without_a_tty_and_keeps_names_whole(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_run(root)
    b = make_run(root, scale=1.3, seed=1, pauses=(0.0, 0.5, 1.5))  # B never paused 2 s
    html = tmp_path / ("a-directory-name-long-enough-to-push-the-path-past-eighty-columns" * 2) / "compare.html"
    html.parent.mkdir(parents=True)
    r = run_cli("compare", a, b, "--html", str(html), env=lbench_env, columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    html_lines = [line for line in lines if line.startswith("html: ")]
    assert html_lines == [f"html: {html}"]  # the path is printed whole, on one line
    too_wide = [line for line in lines if len(line) > 80 and line not in html_lines]
    assert not too_wide, "\n".join(too_wide)
    # each setting has its own heading, whole: never cut to the same 'keep-aliv...'
    headings = [line for line in lines if line.startswith(MODEL)]
    assert f"{MODEL} · keep-alive=default" in headings and f"{MODEL} · keep-alive=none" in headings
    text = " ".join(r.stdout.split())
    # hyperfine style, with units; 1200 ms is said in seconds
    # one ratio convention (B/A); one run per side has no between-run spread: no interval, inconclusive
    assert re.search(r"pause 0.5 s: B/A 1\.[23]\d \[no interval\], B slower by [23]\d% "
                     r"\(p50 latency_ms 2\d.\d vs 2\d.\d ms\): inconclusive;", text), r.stdout
    assert re.search(r"pause 1.5 s: B/A 1.\d+ \[no interval\], B slower by \d+% \(p50 latency_ms 1.\d\d vs 1.\d\d s\)",
                     text), r.stdout
    # a side without a value reads as a sentence: "A 1.20 s, B none", never "none s"
    assert "pause 2 s: refused, too few samples (n 8 vs 0 in 1 vs 0 runs)" in text
    assert re.search(r"\(p50 latency_ms A 1.\d\d s, B none\);", text)
    assert "none s" not in text and "nan" not in text
    assert html.is_file()


def test_gate_lines_fit_80_columns_on_both_streams(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = [make_run(root), make_run(root, seed=2)]
    b = [make_run(root, scale=1.3, seed=s, pauses=(0.0, 0.5, 1.5)) for s in (1, 3)]
    r = run_cli("gate", "--baseline", a[0], "--baseline", a[1], "--candidate", b[0], "--candidate", b[1],
                env=lbench_env, columns=80)
    assert r.returncode == 1, r.stdout + r.stderr
    for stream in (r.stdout, r.stderr):
        too_wide = [line for line in stream.splitlines() if len(line) > 80]
        assert not too_wide, "\n".join(too_wide)
    err = " ".join(r.stderr.split())
    assert f"REGRESSION {MODEL} · keep-alive=none · warm · latency_ms: B/A 1." in err
    out = " ".join(r.stdout.split())  # a reported group without B samples is refused there, and does not vote
    assert "pause 2 s: refused, too few samples (n 16 vs 0 in 2 vs 0 runs)" in out


def test_baseline_save_and_show_keep_names_and_run_ids_whole_at_80_columns(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_run(root)
    name = "main-branch-nightly-keep-alive-none"
    saved = run_cli("baseline", "save", a, "--name", name, env=lbench_env, columns=80)
    shown = run_cli("baseline", "show", env=lbench_env, columns=80)
    assert saved.returncode == 0 and shown.returncode == 0, saved.stderr + shown.stderr
    for r in (saved, shown):
        # a line is longer than 80 only when it is one unbreakable word (a long temporary path)
        assert all(len(line) <= 80 or len(line.split()) == 1 for line in r.stdout.splitlines()), r.stdout
    words = shown.stdout.split()
    assert f"{name}:" in words and f"{a}," in words  # whole, not 'main-branch-…' or '2026…'
    assert "…" not in shown.stdout


def test_an_error_naming_a_long_path_keeps_it_whole_at_80_columns(lbench_env, tmp_path):
    results = tmp_path / ("results-directory-with-a-name-long-enough-to-pass-eighty-columns" * 2)
    r = run_cli("compare", "no-such-run", "latest", "--results", str(results), env=lbench_env, columns=80)
    assert r.returncode == 2
    assert str(results) in r.stderr.split()  # on a line of its own rather than cut mid-word
    assert r.stderr.startswith("lbench: error (bad input): no run 'no-such-run'")
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in r.stderr.splitlines()), r.stderr
