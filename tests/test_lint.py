"""The package passes its linter (ruff) and its type checker (mypy) as configured in pyproject.toml,
so the typed joints (run record, index, kinds, run lifecycle) stay typed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    exe = Path(sys.executable).with_name(name)
    if exe.exists():
        return [str(exe)]
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: it is in the test extras (pip install -e '.[test]')")
    return [found]


def test_ruff_finds_nothing():
    out = subprocess.run([*_tool("ruff"), "check", "--no-cache", "harness"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_finds_nothing():
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lbench" / "mypy"
    out = subprocess.run([*_tool("mypy"), "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_mypy_finds_nothing_on_the_other_platforms(platform):
    """The platform layer type-checked as macOS and Windows see it (signals, process groups, clocks,
    locks they do not have): mypy follows ``sys.platform`` checks, so a Linux-only call outside one fails."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lbench" / f"mypy-{platform}"
    out = subprocess.run([*_tool("mypy"), "--cache-dir", str(cache), "--platform", platform], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr
