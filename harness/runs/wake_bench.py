"""``lbench wake-bench``'s workflow: the recorded cells of idle runs, the calibration on the first,
the simulated cells and the permuted recorded ones (harness/analysis/wake_bench.py), saved to
``<results>/benchmarks/<bench id>/wake-bench.json``.  The command parses options and prints; the
rows reach it through ``on_row`` / ``on_permuted`` as they are computed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.stats import measured
from harness.analysis.wake_bench import Calibration, calibrate, calibration_row, permuted, simulate
from harness.atomic import atomic_write_text
from harness.baselines import check_ref
from harness.errors import BadInput
from harness.runkind import find_kind
from harness.store import open_run

if TYPE_CHECKING:
    import pandas as pd

Cell = tuple[str, "pd.DataFrame"]  # "<run id> <model> · <setting>", its measured samples


def recorded_cells(refs: list[str], root: Path) -> list[Cell]:
    """Every (model, setting) cell of the idle runs ``refs``, measured samples only; a run that is
    not a finished sweep of at least 3 pauses is bad input."""
    cells = []
    for ref in refs:
        run = open_run(check_ref(ref), root, kinds=("idle",))
        kind = find_kind(run.record.kind)
        if kind is None or "pause_sweep" not in kind.features:  # a sweep of pauses: idle (and calibrate) runs
            raise BadInput(f"run {run.run_id} is a {run.record.kind} run", where=ref,
                           hint="give an idle run (lbench runs lists them)")
        good = measured(run.table("samples"))
        if good.empty:
            raise BadInput(f"run {run.run_id} has no measured samples", where=ref, hint="give a finished idle run")
        for (model, setting), g in good.groupby(["model", "setting"]):
            if g["pause_requested_s"].nunique() < 3:
                raise BadInput(f"run {run.run_id}, {model} · {setting}: fewer than 3 pauses", where=ref,
                               hint="the wake model needs a grid of pauses: give a default idle run")
            cells.append((f"{run.run_id} {model} · {setting}", g))
    return cells


def calibrated(cells: list[Cell], given: dict[str, Any]) -> Calibration:
    """The calibration on the first cell, with the figures in ``given`` taking the measured ones' place."""
    cal = calibrate(cells[0][1], cells[0][0])
    return dataclasses.replace(cal, given=tuple(sorted(given)), **given) if given else cal


@dataclass
class WakeBench:
    """What one wake-bench computed, and where it is saved."""

    bench_id: str
    rows: list[dict[str, Any]]
    permuted: list[dict[str, Any]]
    saved: Path


def run_wake_bench(cal: Calibration, cells: list[Cell], bench_id: str, root: Path, *, trials: int,
                   permutations: int, seed: int, place: float | None,
                   on_row: Callable[[dict[str, Any]], None] | None = None,
                   on_permuted: Callable[[str, dict[str, Any]], None] | None = None) -> WakeBench:
    """Simulate ``trials`` cells per condition, permute each recorded cell ``permutations`` times
    (0: none), save both with the calibration."""
    rows = simulate(cal, trials=trials, seed=seed, place_s=place, on_row=on_row)
    perm_rows = []
    for source, g in cells if permutations else []:
        res = permuted(g, source, permutations=permutations, seed=seed)
        perm_rows.append(res)
        if on_permuted is not None:
            on_permuted(source, res)
    out_dir = root / "benchmarks" / bench_id
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = {"schema_version": 1, "bench_id": bench_id, "seed": seed, "trials": trials,
             "calibration": calibration_row(cal), "simulation": rows, "permuted": perm_rows}
    path = atomic_write_text(out_dir / "wake-bench.json", json.dumps(saved, indent=2, default=str))
    return WakeBench(bench_id, rows, perm_rows, path)
