"""Where lbench's own data files are: experiment specs, claim specs, report templates.

They live at the top of the repository (``experiments/``, ``reports/``) and ship in
the wheel as the packages ``harness.bundled.experiments`` and
``harness.bundled.reports``, so an editable install, a wheel and pipx all find them
through the import system.  Users can point lbench at their own copies:
``$LBENCH_TEMPLATES`` (a templates folder) and ``$LBENCH_CLAIMS`` (a claims folder).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


_SOURCE_TREE = Path(__file__).resolve().parent.parent  # the repository root, when run from a checkout
_SOURCE_FOLDERS = {"harness.bundled.experiments": "experiments", "harness.bundled.reports": "reports"}


def _package_dir(package: str) -> Path:
    """The folder of a bundled data package: from the installed package (wheel, editable
    install), else from the source checkout this module sits in (``PYTHONPATH=.``).

    The data folders have no ``__init__.py``, so installed they are namespace packages, for
    which ``importlib.resources.files`` gives a MultiplexedPath, not a folder: the import
    spec's search locations are used instead (a zipped install is not supported)."""
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    folder = _SOURCE_TREE / _SOURCE_FOLDERS[package]
    if folder.is_dir():
        return folder
    raise ModuleNotFoundError(f"lbench's data package {package} is missing (a broken install?)", name=package)


def experiments_dir() -> Path:
    """The bundled experiment specs (``idle/``, ``claims/``)."""
    return _package_dir("harness.bundled.experiments")


def idle_specs_dir() -> Path:
    return experiments_dir() / "idle"


def bundled_idle_specs() -> list[str]:
    """Names of the bundled idle specs (``lbench idle --spec NAME``)."""
    try:
        return sorted(p.stem for p in idle_specs_dir().glob("*.toml"))
    except (ModuleNotFoundError, OSError):
        return []


def claims_dir() -> Path:
    explicit = os.environ.get("LBENCH_CLAIMS")
    return Path(explicit).expanduser() if explicit else experiments_dir() / "claims"


def templates_dir() -> Path:
    explicit = os.environ.get("LBENCH_TEMPLATES")
    return Path(explicit).expanduser() if explicit else _package_dir("harness.bundled.reports") / "templates"


def find_spec(ref: str | os.PathLike[str], kind: str = "idle") -> Path:
    """A spec path as given, or a bundled spec by name: ``default`` -> experiments/<kind>/default.toml."""
    path = Path(ref).expanduser()
    if path.exists() or path.suffix == ".toml" or os.sep in str(ref):
        return path
    for candidate in (experiments_dir() / kind / f"{ref}.toml", experiments_dir() / f"{ref}.toml"):
        if candidate.is_file():
            return candidate
    return path
