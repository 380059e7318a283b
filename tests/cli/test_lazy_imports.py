"""`lbench --help` and every subcommand's --help must not import the heavy libraries
(behaviour, not timing: scripts/bench_help.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

HEAVY = ("pandas", "numpy", "scipy", "matplotlib", "httpx", "gguf", "jinja2",
         "typer.rich_utils", "rich.markdown", "pygments", "rich.console", "rich.table")  # help is plain text

PROBE = r"""
import json, sys
import typer
from typer.testing import CliRunner
from harness.cli import app

def walk(command, path):
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from walk(sub, path + [name])

runner = CliRunner()
paths = list(walk(typer.main.get_command(app), []))
codes = {" ".join(p) or "(root)": runner.invoke(app, p + ["--help"]).exit_code for p in paths}
heavy = sorted(m for m in %r if m in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
""" % (HEAVY,)


def _probe() -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_help_of_every_command_imports_no_heavy_library():
    result = _probe()
    codes = result["codes"]
    # the probe really walked the whole tree (groups and their subcommands)
    for name in ("(root)", "idle", "swap", "repro", "report", "compare", "gate", "gate-bench", "evidence", "ab",
                 "runs", "calibrate", "bisect", "engine install", "model synth", "baseline save"):
        assert name in codes, sorted(codes)
    assert all(code == 0 for code in codes.values()), codes
    assert result["heavy"] == [], f"--help imported {result['heavy']}: import them inside the command instead"


def test_probe_would_see_a_heavy_import():
    """The check can fail: a command module importing pandas at the top shows up."""
    proc = subprocess.run([sys.executable, "-c", "import sys, harness.cli, harness.store; "
                           f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "pandas" in proc.stdout
