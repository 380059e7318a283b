"""The wake-bench workflow called as a script would (``harness.runs.wake_bench``): cells of a run the
store wrote, the calibration with given figures, the rows handed over as computed and saved."""

import json

import pytest
from test_gate_cli import make_idle_run  # tests/cli is on pythonpath (pyproject)

from harness.errors import BadInput
from harness.runs.wake_bench import calibrated, recorded_cells, run_wake_bench


def test_the_workflow_returns_what_it_saves_and_hands_each_row_over(tmp_path):
    run_id = make_idle_run(tmp_path, reps=6)
    cells = recorded_cells([run_id], tmp_path)
    assert [source for source, _ in cells] == [f"{run_id} m · keep-alive=default"]
    cal = calibrated(cells, {"stall_p": 0.03, "stall_sizes": (4.0, 10.0)})
    assert cal.given == ("stall_p", "stall_sizes") and cal.stall_p == 0.03 and cal.reps == 6
    seen, permuted = [], []
    bench = run_wake_bench(cal, cells, "B1", tmp_path, trials=10, permutations=2, seed=0, place=None,
                           on_row=seen.append, on_permuted=lambda source, res: permuted.append(source))
    assert bench.saved == tmp_path / "benchmarks" / "B1" / "wake-bench.json"
    saved = json.loads(bench.saved.read_text())
    assert seen == bench.rows and len(bench.rows) == 10  # flat, +10% .. +100% (5), with and without stalls
    assert saved["simulation"] == json.loads(json.dumps(bench.rows, default=str))
    assert permuted == [cells[0][0]] and saved["permuted"][0]["permutations"] == 2


def test_no_idle_run_is_bad_input_and_nothing_is_written(tmp_path):
    with pytest.raises(BadInput, match="no run 'latest'"):
        recorded_cells(["latest"], tmp_path)
    assert not (tmp_path / "benchmarks").exists()
