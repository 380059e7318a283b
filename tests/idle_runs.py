"""Idle runs written by the store (``RunWriter``), without a server: the input of the tests of
what reads finished runs (gate, compare, evidence, wake-bench)."""

import socket
from pathlib import Path

import numpy as np

from harness.store import RunWriter


def make_idle_run(root: Path, scale=1.0, reps=8, seed=0, host=None, sd=0.05, slow_pauses=()):
    rng = np.random.default_rng(seed)
    w = RunWriter(root, "idle", {
        "config": {"seed": 0}, "models": [{"label": "m", "synthetic": True, "path": str(Path.home() / "m.gguf")}],
        "host": {"cpu_model": "TestCPU", "os": "Linux", "hostname": host or socket.gethostname(),
                 "home": str(Path.home())},
        "engine": {"build_number": 11434, "sha256": "ab" * 32}, "cells": []})
    for pause in (0.0, 0.5, 1.5, 2.0):
        for rep in range(reps):
            v = (20.0 if pause < 1 else 60.0) * (scale if not slow_pauses or pause in slow_pauses else 1.0) \
                * rng.lognormal(0, sd)
            w.append({"model": "m", "setting": "keep-alive=default", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": v, "server_prompt_ms": v - 1,
                      "server_ms": v - 1, "overhead_ms": 1.0, "http_status": 200, "error": None})
    w.finish("complete")
    return w.run_id
