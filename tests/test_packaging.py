"""The package as users install it: every module and data file in the wheel, and a wheel
installed without the source tree runs a sweep, lists the claims and renders a report."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
DATA_ROOTS = {"experiments": "harness.bundled.experiments", "reports": "harness.bundled.reports"}


def _tracked_files(folder: str) -> list[Path]:
    return [p for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def test_every_harness_package_is_listed():
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "harness").rglob("__init__.py")}
    missing = sorted(found - set(SETUPTOOLS["packages"]))
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


@pytest.mark.parametrize("folder", sorted(DATA_ROOTS))
def test_every_data_folder_and_file_ships(folder):
    package = DATA_ROOTS[folder]
    assert SETUPTOOLS["package-dir"][package] == folder
    patterns = SETUPTOOLS["package-data"][package]
    files = _tracked_files(folder)
    assert files, f"{folder}/ is empty"
    for path in files:
        rel = path.relative_to(REPO / folder)
        sub = ".".join((package, *rel.parent.parts)) if rel.parent.parts else package
        assert sub in SETUPTOOLS["packages"], f"{path.parent} is not packaged: add {sub!r} to packages"
        # setuptools matches package-data globs against the path inside the package's own folder
        inner = Path(*rel.parts[len(rel.parent.parts):])
        assert any(fnmatch.fnmatch(str(inner), pat.removeprefix("**/")) for pat in patterns), \
            f"{path} matches no package-data pattern of {package}: {patterns}"


def test_version_is_single_sourced():
    import harness

    assert "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "harness.__version__"}
    assert harness.__version__


def _main_site_packages() -> list[str]:
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


def _build_wheel(tmp: Path) -> Path:
    """Copy the source (not the repository's build leftovers) and build a wheel from the copy."""
    src = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("harness", "experiments", "reports"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    dist = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 and "Could not find a version that satisfies the requirement setuptools" in proc.stderr:
        pytest.skip("pip cannot get setuptools for the isolated build here (no index reachable)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(dist.glob("lbench-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A venv holding only the wheel; its dependencies come from this interpreter's site-packages
    through a .pth file (a .pth inside a .pth-added folder is not run, so lbench's own editable
    install there stays invisible)."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "_lbench_test_deps.pth").write_text("\n".join(_main_site_packages()) + "\n")
    proc = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv


@pytest.mark.engine
def test_wheel_without_source_tree_runs_sweep_repro_list_and_report(tmp_path, engine_env):
    wheel = _build_wheel(tmp_path)
    venv = _fresh_venv(tmp_path, wheel)
    work = tmp_path / "elsewhere"
    work.mkdir()
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LBENCH_TEMPLATES", "LBENCH_CLAIMS")}
    env.update(engine_env, COLUMNS="200", PYTHONUNBUFFERED="1")
    lbench = str(venv / "bin" / "lbench")

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, env=env, cwd=work, timeout=timeout)

    where = run(str(venv / "bin" / "python"), "-c", "import harness, harness.resources as r; "
                "print(harness.__file__); print(r.templates_dir()); print(r.claims_dir())")
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).resolve().is_relative_to(venv.resolve()), f"{line} is not inside the fresh venv"

    version = run(lbench, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines()[0] == f"lbench {_wheel_version(wheel)}"
    assert "llama-server build" in version.stdout

    claims = run(lbench, "repro", "--list")
    assert claims.returncode == 0, claims.stderr
    assert "router-cap" in claims.stdout

    sweep = run(lbench, "idle", "-m", "tiny-q8", "--pauses", "0,0.2", "--reps", "2", "--warmup", "1",
                "--self-check", "0", "--results", str(results), "--no-report")
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert not (run_dir / "report.html").exists()

    report = run(lbench, "report", run_dir.name, "--results", str(results))
    assert report.returncode == 0, report.stdout + report.stderr
    html = (run_dir / "report.html").read_text()
    assert run_dir.name in html and "<html" in html.lower()
    assert not (work / "results").exists(), "nothing may land in the cwd when --results is given"


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]
