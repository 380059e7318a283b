"""The package passes its linter (ruff), its type checker (mypy), its import contracts (import-linter:
the layers, no import circle) and its dead-code check (vulture) as configured in pyproject.toml, so
the typed joints (run record, index, kinds, run lifecycle) stay typed and the layers stay layers."""

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


def test_no_module_skips_type_errors():
    """The mypy ratchet is empty (issue 31 item 4): no override may switch a module's errors off again."""
    import tomllib

    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"].get("overrides", [])
    skipping = [o["module"] for o in overrides if o.get("ignore_errors")]
    assert not skipping, f"mypy ignore_errors is set for {skipping}: fix the type errors instead"


STRICT_FLAGS = ("disallow_untyped_defs", "disallow_incomplete_defs")


def test_every_function_is_annotated_package_wide():
    """Every module at the typed joints' strictness (issue 31 item 4): both flags on in [tool.mypy]
    itself, no override turning either off for some modules, no file doing it with a ``# mypy:``
    comment (mypy leaves the body of an unannotated function unchecked)."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert all(mypy.get(flag) is True for flag in STRICT_FLAGS), \
        f"[tool.mypy] must set {' and '.join(f'{f} = true' for f in STRICT_FLAGS)} for the whole package"
    loosened = [o["module"] for o in mypy.get("overrides", []) if any(o.get(f) is False for f in STRICT_FLAGS)]
    assert not loosened, f"mypy overrides turn off {STRICT_FLAGS} for {loosened}: annotate those modules instead"
    named = ("untyped-defs", "untyped_defs", "incomplete-defs", "incomplete_defs")
    inline = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "harness").rglob("*.py"))
              for n, line in enumerate(p.read_text().splitlines(), start=1)
              if line.lstrip().startswith("# mypy:") and any(k in line for k in named)]
    assert not inline, f"a '# mypy:' comment sets the annotation rule for one file at {inline}: it is the package's"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the package under ``root``, not an installed copy
    return subprocess.run([*_tool("lint-imports"), "--no-cache", "--no-logo"], cwd=root, capture_output=True,
                          text=True, env=env)


def test_import_contracts_hold():
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr


@pytest.mark.parametrize("module, line, broken", [
    ("harness/probes/host.py", "from harness.record import fingerprint_of", "Layers"),  # a lower layer reaching up
    ("harness/history/archive.py", "from harness.history.catalog import load", "No import circle"),
])
def test_the_contracts_see_an_import_inside_a_function(tmp_path, module, line, broken):
    """A copy of the package with one import added inside a function breaks the contract it should."""
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a") as fh:
        fh.write(f"\n\ndef _added_by_the_test():\n    {line}\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0
    assert f"{broken}" in out.stdout and "BROKEN" in out.stdout.split(broken, 1)[1].splitlines()[0], out.stdout


def test_vulture_finds_no_dead_code():
    """Nothing in harness/ that neither the package nor the benchmark scripts use, but what
    tests/vulture_whitelist.py lists with its reason (Typer commands, manifest fields, ...)."""
    out = subprocess.run([*_tool("vulture"), "harness", "scripts", "tests/vulture_whitelist.py", "--ignore-decorators", "@scenario,@router_scenario",
                          "--min-confidence", "60"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, "dead code (remove it, or list it with its reason in tests/vulture_whitelist.py):\n" + \
        out.stdout + out.stderr
@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_mypy_finds_nothing_on_the_other_platforms(platform):
    """The platform layer type-checked as macOS and Windows see it (signals, process groups, clocks,
    locks they do not have): mypy follows ``sys.platform`` checks, so a Linux-only call outside one fails."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lbench" / f"mypy-{platform}"
    out = subprocess.run([*_tool("mypy"), "--cache-dir", str(cache), "--platform", platform], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr
