"""``lbench wake-bench``: the wake model's error rates, by simulation calibrated on a real idle run
and on that run with its pause labels permuted (harness/analysis/wake_bench.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer

from harness import paths
from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out
from harness.errors import BadInput


def _pct(r: dict[str, Any]) -> str:
    if not r["n"]:
        return "-"
    lo, hi = r["ci"]
    return f"{100 * r['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({r['k']}/{r['n']})"


def wake_bench(
    runs: list[str] = typer.Option(None, "--runs", metavar="RUN", help="Idle run(s) to calibrate on and to "
                                   "permute (run id, directory or 'latest'); repeat. " + shown("latest")),
    trials: int = typer.Option(200, "--trials", help="Simulated cells per condition (e.g. --trials 50 for a quick "
                                                     "look)."),
    permutations: int = typer.Option(100, "--permutations", help="Label permutations per recorded cell (e.g. "
                                                                 "--permutations 20); 0 skips them."),
    place: float = typer.Option(None, "--place", help="Simulated step's first woken pause in seconds (e.g. --place "
                                                      "1.1). " + shown("the grid's middle pause")),
    grid: str = typer.Option(None, "--grid", help="Simulate this pause grid instead of a run's: 'default' (lbench "
                             "idle's 18 pauses) or seconds as --pauses takes them; needs --within-sd, reads no run "
                             "and permutes nothing (e.g. --grid default --reps 6 --within-sd 0.228). "
                             + shown("the first run's")),
    reps: int = typer.Option(6, "--reps", help="Repetitions per pause with --grid (e.g. --reps 12)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulation and the permutations (e.g. --seed 1)."),
    within_sd: float = typer.Option(None, "--within-sd", help="Simulate this within-pause log sd instead of the "
                                    "run's (e.g. --within-sd 0.05). " + shown("measured on the first run")),
    pause_sd: float = typer.Option(None, "--pause-sd", help="Simulate this pause-to-pause log sd instead of the "
                                   "run's (e.g. --pause-sd 0). " + shown("measured on the first run")),
    stall_p: float = typer.Option(None, "--stall-p", help="Simulate this stall rate instead of the run's (e.g. "
                                  "--stall-p 0.028). " + shown("measured on the first run")),
    stall_sizes: str = typer.Option(None, "--stall-sizes", help="Simulated stall sizes, x the pause's median, "
                                    "drawn at random (e.g. --stall-sizes 3.6,11.4). "
                                    + shown("those measured on the first run")),
    results: ResultsDir = None,
) -> None:
    """Measure the wake model's error rates (a benchmark that prints figures, not a test):
    simulated cells calibrated on a real idle run (its grid, within-pause spread, pause-to-pause
    scatter, stall rate and stall sizes, all measured through the wake model itself) with no step
    and with steps of +10%, +25%, +50% and +100%, with and without stalls; and the recorded cells with
    their pause labels permuted (no step can be there: every step found is a false one). Saved
    to results/benchmarks/<bench id>/wake-bench.json.

    \b
    Examples:
      lbench idle && lbench wake-bench
      lbench wake-bench --runs 20261203T120000Z-idle-1a2b --trials 50
      lbench wake-bench --permutations 0 --place 1.1 --seed 1
      lbench wake-bench --grid default --reps 6 --within-sd 0.228 \\
          --stall-p 0.028 --stall-sizes 3.6,11.4
    """
    from harness.runs.wake_bench import calibrated, recorded_cells, run_wake_bench
    from harness.store import new_run_id

    if trials < 10:
        raise BadInput(f"--trials must be >= 10, got {trials}", where="--trials")
    if permutations < 0:
        raise BadInput(f"--permutations must be >= 0, got {permutations}", where="--permutations")
    root = paths.results_dir(results)
    cells: list[tuple[str, Any]] = []
    if grid is not None:
        from harness.analysis.wake_bench import Calibration
        from harness.spec import DEFAULT_PAUSES_S, parse_pauses

        if runs:
            raise BadInput("--grid and --runs both given", where="--grid", hint="give one: a run, or a grid by hand")
        if within_sd is None:
            raise BadInput("--grid needs --within-sd (there is no run to measure it on)", where="--grid",
                           hint="e.g. --grid default --within-sd 0.228")
        if not 2 <= reps <= 100:
            raise BadInput(f"--reps must be in [2, 100], got {reps}", where="--reps")
        pauses = sorted(set(DEFAULT_PAUSES_S if grid.strip() == "default" else parse_pauses(grid, "--grid")))
        if len(pauses) < 3:
            raise BadInput(f"--grid needs at least 3 pauses, got {len(pauses)}", where="--grid")
        # the level only sets the ms scale of the penalty: every rate is the same at any level
        cal = Calibration("a grid given by hand", tuple(pauses), reps, 100.0, within_sd, 0.0, 0.0,
                          given=("grid", "reps"))
    else:
        cells = recorded_cells(runs or ["latest"], root)
        cal = calibrated(cells, {})
    given: dict[str, Any] = {}
    if within_sd is not None:
        if not 0 < within_sd <= 3:
            raise BadInput(f"--within-sd must be in (0, 3], got {within_sd}", where="--within-sd")
        given["within_sd"] = within_sd
    if pause_sd is not None:
        if not 0 <= pause_sd <= 3:
            raise BadInput(f"--pause-sd must be in [0, 3], got {pause_sd}", where="--pause-sd")
        given["pause_sd"] = pause_sd
    if stall_p is not None:
        if not 0 <= stall_p < 0.5:
            raise BadInput(f"--stall-p must be in [0, 0.5) (stalls are the sparse mode), got {stall_p}",
                           where="--stall-p")
        given["stall_p"] = stall_p
    if stall_sizes is not None:
        try:
            sizes = tuple(float(s) for s in stall_sizes.split(",") if s.strip())
        except ValueError:
            sizes = ()
        if not sizes or not all(1 < s <= 1000 for s in sizes):
            raise BadInput(f"--stall-sizes must be numbers in (1, 1000], comma-separated, got {stall_sizes!r}",
                           where="--stall-sizes", hint="e.g. --stall-sizes 3.6,11.4")
        given["stall_sizes"] = sizes
    if given:
        cal = dataclasses.replace(cal, given=tuple(sorted({*cal.given, *given})), **given)
    if place is not None and not (min(cal.pauses_s) < place <= max(cal.pauses_s) and place in cal.pauses_s):
        raise BadInput(f"--place {place:g} is not a pause of the grid after its first",
                       where="--place", hint="one of " + ", ".join(f"{p:g}" for p in cal.pauses_s[1:]))
    bench_id = new_run_id("wake-bench")
    out.print(f"wake-bench {bench_id}: calibrated on {cal.source}: {len(cal.pauses_s)} pauses x {cal.reps} reps, "
              f"bulk median {cal.level_ms:.3g} ms, within-pause log sd {cal.within_sd:.3f}, pause-to-pause log sd "
              f"{cal.pause_sd:.3f}, stalls {cal.n_stalls} of {cal.n_samples} measured, simulated at rate "
              f"{cal.stall_p:.3g} "
              f"({', '.join(f'{s:.3g}x' for s in cal.stall_sizes) or 'none'}); given instead of measured: "
              f"{', '.join(cal.given) or 'nothing'}; {trials} simulated cells per "
              f"condition, seed {seed} (simulated cells, not timings).", markup=False, soft_wrap=True)
    out.print(f"{'step':>6} {'stalls':>6} {'no clear step':>28} {'step at its place':>28} "
              f"{'place interval holds it':>28} {'coverage (reported)':>28} {'false stall flags/sample':>28} "
              f"{'stalls caught':>28} shapes", markup=False, soft_wrap=True)

    def show(r: dict[str, Any]) -> None:
        out.print(f"{'+' + format(r['step'], '.0%') if r['step'] else 'flat':>6} {'yes' if r['stalls'] else 'no':>6} "
                  f"{_pct(r['no_clear_step']):>28} {_pct(r['step_at_place']):>28} "
                  f"{_pct(r['place_interval_holds_place']):>28} {_pct(r['coverage_when_reported']):>28} "
                  f"{_pct(r['false_flag_per_sample']):>28} "
                  f"{_pct(r['stalls_flagged']):>28} {r['shapes']}", markup=False, soft_wrap=True)

    def show_permuted(source: str, res: dict[str, Any]) -> None:
        out.print(f"permuted {source}: false shapes {_pct(res['false_shape'])} {res['shapes']}; unpermuted: "
                  f"{res['original']}", markup=False, soft_wrap=True)

    bench = run_wake_bench(cal, cells, bench_id, root, trials=trials, permutations=permutations, seed=seed,
                           place=place, on_row=show, on_permuted=show_permuted)
    out.print(f"saved: {bench.saved.parent}/wake-bench.json", markup=False, soft_wrap=True)
