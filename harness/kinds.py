"""The kinds of run lbench knows, as plain facts: a leaf that imports nothing of lbench.

Each kind (idle, calibrate, swap, repro, gate-bench, ab) has a name, a title, a report template, the table
the runs listing counts, what it compares as, and a few flags.  What each layer does with a
kind lives beside that layer's functions, in a table keyed by the kind's name:

- starting runs: ``harness/runs/executors.py`` (``EXECUTORS``: spec class, prepare, execute);
- the analysis: ``harness/analysis/kinds.py`` (``SUMMARIZERS`` for ``analysis.json``, ``DERIVED``
  for the columns the analysis adds to the raw tables);
- reports: ``harness/report/render.py`` (``CONTEXTS``) and ``harness/report/evidence.py``
  (``SECTIONS``);
- the history archive: ``harness/history/catalog.py`` (``SETTINGS_OF_KIND``, ``METRICS_OF_KIND``).

``tests/test_kinds.py`` checks that every table names known kinds and that nothing tests a
run's kind by name (``kind ==``) outside these tables.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class RunKind:
    """One kind of run, as facts."""

    name: str
    title: str  # what the evidence calls a run of this kind
    template: str  # in reports/templates
    primary_table: str  # the table the runs listing counts
    compare_as: str | None = None  # runs of kinds with the same value can be compared (None: not comparable)
    features: frozenset[str] = frozenset()  # the HTTP floor (http_floor); a sweep of pauses with wake figures (pause_sweep)
    latest_compares: bool = False  # 'latest' in compare/gate may pick it (calibrate runs compare as idle, by id only)


KINDS: dict[str, RunKind] = {k.name: k for k in (
    RunKind("idle", "idle-wake sweep", "idle.html.j2", "samples", compare_as="idle", latest_compares=True,
            features=frozenset({"pause_sweep"})),
    RunKind("calibrate", "harness calibration", "calibrate.html.j2", "samples", compare_as="idle",
            features=frozenset({"http_floor", "pause_sweep"})),
    RunKind("swap", "router swap storm", "swap.html.j2", "requests", compare_as="swap", latest_compares=True),
    RunKind("repro", "claim reproductions", "repro.html.j2", "verdicts"),
    RunKind("gate-bench", "gate benchmark", "gate_bench.html.j2", "decisions"),
    RunKind("ab", "A/B gate job", "ab.html.j2", "rounds"),
)}


def find_kind(name: object) -> RunKind | None:
    """The kind named ``name`` (a manifest's ``kind``: any value), or None when lbench knows none."""
    return KINDS.get(name) if isinstance(name, str) else None


def unknown_kind(name: object) -> tuple[str, str]:
    """What a ``BadInput`` for an unknown kind says: (what, hint)."""
    return f"unknown run kind {name!r}", f"lbench knows: {', '.join(KINDS)}"


def latest_kinds_to_compare(other_side: Collection[str] = ()) -> frozenset[str]:
    """The kinds 'latest' may pick on one side of compare or gate: those of the runs the other side
    names (compare an idle baseline with the newest idle run, a swap one with the newest swap
    run), else every kind marked ``latest_compares`` (never a calibrate run by accident)."""
    if other_side:
        return frozenset(other_side)
    return frozenset(k.name for k in KINDS.values() if k.latest_compares)
