"""lbench wake-bench on run directories written by the store: bad input exits 2 and writes nothing;
a small run prints its figures and saves them under a bench id."""

import json

from conftest import run_cli
from test_gate_cli import make_idle_run


def test_wake_bench_without_an_idle_run_is_bad_input(tmp_path):
    res = run_cli("wake-bench", "--results", str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert not (tmp_path / "benchmarks").exists()


def test_wake_bench_refuses_bad_options_before_writing(tmp_path):
    run_id = make_idle_run(tmp_path, reps=6)
    for args, where in ((["--trials", "3"], "--trials"), (["--stall-p", "0.7"], "--stall-p"),
                        (["--stall-sizes", "0.5,x"], "--stall-sizes"), (["--place", "0.7"], "--place"),
                        (["--pause-sd", "-1"], "--pause-sd")):
        res = run_cli("wake-bench", "--runs", run_id, "--results", str(tmp_path), *args)
        assert res.returncode == 2 and where in res.stdout + res.stderr, args
    assert not (tmp_path / "benchmarks").exists()


def test_wake_bench_prints_and_saves_its_figures(tmp_path):
    run_id = make_idle_run(tmp_path, reps=6)
    res = run_cli("wake-bench", "--runs", run_id, "--results", str(tmp_path), "--trials", "10",
                  "--permutations", "3", "--stall-p", "0.03", "--stall-sizes", "4,10", "--pause-sd", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"calibrated on {run_id} m · keep-alive=default: 4 pauses x 6 reps" in " ".join(res.stdout.split())
    (saved,) = (tmp_path / "benchmarks").glob("*-wake-bench-*/wake-bench.json")
    data = json.loads(saved.read_text())
    assert data["calibration"]["given"] == ["pause_sd", "stall_p", "stall_sizes"] and data["calibration"]["pause_sd"] == 0
    assert len(data["simulation"]) == 10 and all(sum(r["shapes"].values()) == 10 for r in data["simulation"])
    (perm,) = data["permuted"]
    assert perm["permutations"] == 3 and perm["source"].startswith(run_id)


def test_wake_bench_on_a_grid_given_by_hand_reads_no_run(tmp_path):
    for args, where in ((["--grid", "default"], "--within-sd"), (["--grid", "0,1", "--within-sd", "0.1"], "--grid"),
                        (["--grid", "default", "--within-sd", "0.1", "--reps", "1"], "--reps")):
        res = run_cli("wake-bench", "--results", str(tmp_path), *args)
        assert res.returncode == 2 and where in res.stdout + res.stderr, args
    res = run_cli("wake-bench", "--results", str(tmp_path), "--grid", "0,0.5,1,1.5", "--reps", "4",
                  "--within-sd", "0.05", "--trials", "10")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "calibrated on a grid given by hand: 4 pauses x 4 reps" in " ".join(res.stdout.split())
    (saved,) = (tmp_path / "benchmarks").glob("*-wake-bench-*/wake-bench.json")
    data = json.loads(saved.read_text())
    assert data["calibration"]["given"] == ["grid", "reps", "within_sd"] and data["permuted"] == []
    assert data["calibration"]["pauses_s"] == [0.0, 0.5, 1.0, 1.5] and len(data["simulation"]) == 5
