"""MLX wiring claims (seed 002), run where mlx has Metal (Apple Silicon); elsewhere the specs'
``requires = ["mlx"]`` makes them "not checkable here".

- ``mlx-limit-warning``: mlx-lm's ``wired_limit`` prints its ``[WARNING] Generating with a model
  that requires N MB which is close to the maximum recommended size of M MB ...`` only above
  0.9 x ``max_recommended_working_set_size`` (stand-in models at 0.95 and 0.85, lazy arrays:
  nothing is allocated).
- ``mlx-generate-wiring``: a one-shot ``generate()`` leaves the wired limit as it found it (0);
  the server's ``maybe_set_recommended_wired_limit()`` leaves the recommended size behind.
- ``mlx-server-wiring``: ``mlx_lm.server`` started with ``MLX_RESIDENCY_DEBUG=1``: system wired
  memory before, after start and one request, after an idle pause, after exit; its
  ``[residency] created residency set N (max_bytes_per_set=M MB)`` lines.

The parsers of what mlx prints live in harness/engines/mlx_output.py; they and the judges here are
pure functions over recorded text, tested in tests/repro/test_mlx_scenarios.py: the warning parser on
real published mlx-lm output; the
residency-line parser and the probe-record figures have no real output to test on until a Mac
run (docs/mac.md, "MLX parsers"); the scenarios themselves have not run on a Mac yet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.engines.mlx_output import RESIDENCY_LINE, residency_sets, wired_limit_warnings
from harness.repro.base import Context, Evidence, Inconclusive, Params, scenario
from harness.engines.base import Setting
from harness.engines.http_engines import MlxServerEngine
from harness.probes.macos import read_wired_bytes

DEFAULT_SET_PCT = 5  # MLX_RESIDENCY_SET_MAX_PCT default
SET_FLOOR_BYTES = 64 << 20


@dataclass(frozen=True)
class MlxParams(Params):
    model: str = ""  # a local MLX model directory; default $LBENCH_MLX_MODEL
    idle_s: float = 30.0  # mlx-server-wiring: the idle pause after the request


def expected_set_mb(recommended_bytes: int, pct: int = DEFAULT_SET_PCT) -> int:
    """max_bytes_per_set in MB as ResidencySets computes it: pct % of the recommended working set,
    at least 64 MiB; 0 (one set) for pct <= 0 or >= 100."""
    if pct <= 0 or pct >= 100:
        return 0
    return max((recommended_bytes // 100) * pct, SET_FLOOR_BYTES) >> 20


def probe_records(stdout: str) -> list[dict]:
    """The JSON lines of ``harness.repro.mlx_probe``; other lines kept as ``stdout`` records."""
    out = []
    for line in stdout.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if line.strip():
                out.append({"event": "stdout", "text": line})
    return out


def warning_figures(records: list[dict]) -> dict:
    rec = next((r["recommended_bytes"] for r in records if r.get("event") == "device"), None)
    cases = {r["case"]: r for r in records if r.get("event") == "wired_limit"}
    above, below = cases.get("above", {}), cases.get("below", {})
    warned_above = wired_limit_warnings(above.get("printed", ""))
    return {"recommended_mb": rec >> 20 if rec else None,
            "warned_above": bool(warned_above), "warned_below": bool(wired_limit_warnings(below.get("printed", ""))),
            "warning_recommended_mb": warned_above[0][1] if warned_above else None,
            "warning_names_recommended": bool(warned_above) and rec is not None and warned_above[0][1] == rec >> 20,
            "warning_model_mb": warned_above[0][0] if warned_above else None,
            "expected_model_mb": above.get("model_bytes", 0) >> 20 if above else None}


def generate_figures(records: list[dict]) -> dict:
    by = {r.get("event"): r for r in records}
    rec = by.get("loaded", {}).get("recommended_bytes")
    gen, srv = by.get("after_generate", {}), by.get("after_server_call", {})
    return {"recommended_bytes": rec, "limit_after_generate": gen.get("prev_limit"),
            "limit_after_server_call": srv.get("prev_limit"),
            "generate_restored": gen.get("prev_limit") == 0 if gen else None,
            "server_call_kept": (srv.get("prev_limit") == rec) if srv and rec else None,
            "wired_bytes_after_generate": gen.get("wired_bytes"),
            "wired_bytes_after_server_call": srv.get("wired_bytes")}


def server_wiring_figures(wired: dict[str, int | None], model_bytes: int, share: float = 0.5) -> dict:
    """System wired bytes at ``before`` (no server), ``loaded`` (started, one request), ``idle``
    (after the pause) and ``exited``; the claim: the rise of at least ``share`` x the model's size
    is still there after the idle pause and gone after exit."""
    b, idle, gone = wired.get("before"), wired.get("idle"), wired.get("exited")
    if b is None or idle is None or gone is None:
        return {"wired_measured": False}
    return {"wired_measured": True, "model_bytes": model_bytes,
            "rise_after_idle_bytes": idle - b, "drop_at_exit_bytes": idle - gone,
            "wired_while_idle": idle - b >= share * model_bytes,
            "released_at_exit": idle - gone >= share * model_bytes}


def _mlx_model(p: MlxParams) -> str:
    model = p.model or os.environ.get("LBENCH_MLX_MODEL", "")
    if not model:
        raise Inconclusive("no MLX model: set params.model or LBENCH_MLX_MODEL to a local MLX model directory "
                           "(e.g. mlx-community/Llama-3.2-1B-Instruct-4bit, downloaded beforehand)")
    return model


def _probe(ctx: Context, *args: str, timeout: float = 600) -> list[dict]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "harness.repro.mlx_probe", *args], capture_output=True, text=True,
                         timeout=timeout, env=env)
    (ctx.claim_dir / f"mlx_probe-{args[0]}.log").write_text(out.stdout + "\n--- stderr ---\n" + out.stderr)
    if out.returncode != 0:
        raise Inconclusive(f"the mlx probe failed (exit {out.returncode}): {out.stderr.strip()[-300:]}")
    return probe_records(out.stdout)


@scenario("mlx-limit-warning", MlxParams)
def limit_warning(ctx: Context, p: MlxParams) -> Evidence:
    records = _probe(ctx, "warning")
    figures = warning_figures(records)
    lines = [r.get("printed", "").strip() for r in records if r.get("event") == "wired_limit" and r.get("printed")]
    return Evidence(figures, lines[:4])


@scenario("mlx-generate-wiring", MlxParams)
def generate_wiring(ctx: Context, p: MlxParams) -> Evidence:
    records = _probe(ctx, "generate", _mlx_model(p))
    return Evidence(generate_figures(records), [json.dumps(r) for r in records if r.get("event") != "stdout"][:6])


def _model_bytes(model: str) -> int:
    """The weights' size; a model that is not a local directory cannot be measured, so the wiring checks
    (rise >= half the model) would pass vacuously on 0: refused as Inconclusive instead."""
    path = Path(model)
    size = sum(f.stat().st_size for f in path.glob("*.safetensors")) if path.is_dir() else 0
    if size <= 0:
        raise Inconclusive(f"{model}: not a local MLX model directory with .safetensors weights (mlx_lm.server "
                           "runs offline here): give the downloaded folder")
    return size


RESIDENCY_LINES_FROM = (0, 32, 1)  # mlx prints "[residency] created residency set" from v0.32.1 on


def residency_lines_possible(mlx_version: str) -> bool:
    """Whether this mlx can print the ``[residency]`` lines at all (absent in v0.31.0-v0.32.0)."""
    parts = tuple(int(x) for x in re.findall(r"\d+", mlx_version)[:3])
    return parts >= RESIDENCY_LINES_FROM


@scenario("mlx-server-wiring", MlxParams)
def server_wiring(ctx: Context, p: MlxParams) -> Evidence:
    model = _mlx_model(p)
    model_bytes = _model_bytes(model)
    import mlx.core as mx

    # no mlx version guard here: mlx-server-wires-until-exit needs no [residency] line, and
    # mlx-residency-debug-lines is gated by its "mlx-residency" requirement (mlx >= 0.32.1, macOS >= 15)
    log = ctx.claim_dir / "logs" / "mlx_server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    wired: dict[str, int | None] = {"before": read_wired_bytes()}
    old = os.environ.get("MLX_RESIDENCY_DEBUG")
    os.environ["MLX_RESIDENCY_DEBUG"] = "1"  # the engine starts mlx_lm.server with this process's environment
    try:
        with MlxServerEngine().start(Path(model), Setting(), log) as server:
            server.complete_one_token()
            wired["loaded"] = read_wired_bytes()
            time.sleep(p.idle_s)
            wired["idle"] = read_wired_bytes()
    finally:
        if old is None:
            os.environ.pop("MLX_RESIDENCY_DEBUG", None)
        else:
            os.environ["MLX_RESIDENCY_DEBUG"] = old
    time.sleep(2.0)
    wired["exited"] = read_wired_bytes()
    text = log.read_text(errors="replace")
    sets = residency_sets(text)
    figures = server_wiring_figures(wired, model_bytes)
    figures.update(idle_s=p.idle_s, residency_lines=len(sets), first_set=sets[0][0] if sets else None,
                   max_bytes_per_set_mb=sets[0][1] if sets else None)
    try:
        info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()  # the latter deprecated
        figures["expected_set_mb"] = expected_set_mb(int(info["max_recommended_working_set_size"]),
                                                     int(os.environ.get("MLX_RESIDENCY_SET_MAX_PCT", DEFAULT_SET_PCT)))
    except Exception as exc:  # no Metal: the figure stays missing and the check says so
        figures["expected_set_mb_error"] = str(exc)
    lines = [f"wired bytes: {wired}"] + [m.group(0) for m in RESIDENCY_LINE.finditer(text)][:4]
    return Evidence(figures, lines)
