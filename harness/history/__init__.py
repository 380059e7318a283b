"""History across builds and machines (docs/history.md).

- ``archive.py``: the archive of runs from many machines, ``<archive>/<machine id>/<run id>/``,
  append-only; ``catalog.add_runs`` copies runs in idempotently, each validated by the record reader.
- ``catalog.py``: one row per archived run (and per run metric from its analysis) kept as Parquet
  in ``<archive>/.catalog/``, rebuilt from the run directories whenever it is missing or stale.
- ``query.py``: DuckDB (in-process) over the catalog and the runs' Parquet tables, as views.
- ``series.py``: the named series (idle warm / woken p50, wake threshold and penalty, swap load
  and eviction time, peak children / RSS), tidy rows with an interval and the run id.
- ``changes.py``: change points (Apache Otava's E-divisive with the Hunter split/merge), each with
  the builds before and after, its size and interval, and the ``lbench bisect`` command.
- ``trend.py``: the static trend site (``lbench trend``), registered as a view across runs.
- ``gate_hook.py``: the gate's history baseline (``lbench gate --baseline history:<series>``): a
  window of one machine, model, setting and build, shrunk past a change point inside it.
"""

from __future__ import annotations

import importlib.util

from harness.errors import BadInput

# the modules the history extra brings (pyproject's ``history`` extra), by the distribution that holds each
EXTRA_MODULES = {"duckdb": "duckdb", "cryptography": "cryptography", "otava": "apache-otava"}
INSTALL_EXTRA = "pip install 'lbench[history]'"


def missing_extra() -> list[str]:
    """The distributions of the history extra that are not installed (none when it is)."""
    return [dist for module, dist in EXTRA_MODULES.items() if importlib.util.find_spec(module) is None]


def require_extra(command: str) -> None:
    """Exit 2, saying how to install it, when the history extra is absent: the core install
    (``pip install lbench``) measures, reports and gates without it."""
    missing = missing_extra()
    if missing:
        raise BadInput(f"{command} needs lbench's history extra ({', '.join(missing)} not installed)",
                       where=command, hint=f"{INSTALL_EXTRA} (or, from a checkout, pip install -e '.[history]')")
