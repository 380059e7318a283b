"""Where lbench keeps things.

- cache (engine builds, generated models): ``$LBENCH_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/lbench``, else ``~/.cache/lbench``.
- user catalog of model aliases: ``$LBENCH_CATALOG``, else
  ``$XDG_CONFIG_HOME/lbench/models.toml``, else ``~/.config/lbench/models.toml``.
- results: ``--results DIR``, else ``$LBENCH_RESULTS_DIR``, else ``./results``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("LBENCH_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "lbench"


def engines_dir() -> Path:
    return cache_dir() / "engines"


def sources_dir() -> Path:
    return cache_dir() / "src"


def models_dir() -> Path:
    return cache_dir() / "models"


def config_dir() -> Path:
    """lbench's configuration folder: ``$XDG_CONFIG_HOME/lbench``, else ``~/.config/lbench``."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "lbench"


def catalog_path() -> Path:
    explicit = os.environ.get("LBENCH_CATALOG")
    if explicit:
        return Path(explicit).expanduser()
    return config_dir() / "models.toml"


def results_dir(override: str | os.PathLike[str] | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    env = os.environ.get("LBENCH_RESULTS_DIR")
    if env:
        return Path(env).expanduser()
    return Path.cwd() / "results"
