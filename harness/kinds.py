"""The kinds of run lbench knows, in one table: what each one is made of.

Every dispatcher (the report, the evidence, the runs listing, compare and gate, the
analysis kept in ``analysis.json``) looks a run's kind up here instead of testing
``kind ==``; ``tests/test_kinds.py`` fails if such a test reappears elsewhere.

Parts are named ``"module:attribute"`` and imported only when used, so reading the
table costs nothing.  Adding a kind = its modules (spec class, executor, summarizer,
report context, template) plus one ``RunKind`` entry below.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from dataclasses import dataclass

from harness.errors import BadInput


@dataclass(frozen=True)
class RunKind:
    name: str
    title: str  # what the evidence calls a run of this kind
    spec_class: str | None  # "module:Class": the declarative spec, its defaults (None: no spec file)
    executor: str  # "module:function" that runs it
    summarizer: str  # "module:function(run) -> dict": the content of analysis.json
    report_context: str  # "module:function(run, analysis) -> dict" for the template
    template: str  # in reports/templates
    primary_table: str  # the table the runs listing counts
    evidence_section: str  # "module:function(run, analysis, out_dir) -> (markdown, files)"
    compare_as: str | None = None  # runs of kinds with the same value can be compared (None: not comparable)
    features: frozenset[str] = frozenset()  # what the executor adds for this kind, e.g. the HTTP floor
    latest_compares: bool = False  # 'latest' in compare/gate may pick it (calibrate runs compare as idle, by id only)

    def part(self, attr: str):
        module, _, name = getattr(self, attr).partition(":")
        return getattr(importlib.import_module(module), name)

    def summarizer_fn(self):
        return self.part("summarizer")

    def executor_fn(self):
        """What runs a run of this kind; the commands (idle, calibrate, swap, repro, bisect) call it."""
        return self.part("executor")


KINDS: dict[str, RunKind] = {k.name: k for k in (
    RunKind("idle", "idle-wake sweep", "harness.spec:IdleSpec", "harness.runs.idle:execute_idle",
            "harness.analysis.idle:summarize_run", "harness.report.idle:idle_context", "idle.html.j2", "samples",
            "harness.report.evidence:idle_section", compare_as="idle", latest_compares=True),
    RunKind("calibrate", "harness calibration", "harness.spec:IdleSpec", "harness.runs.idle:execute_idle",
            "harness.analysis.calibration:summarize_run", "harness.report.calibrate:calibrate_context",
            "calibrate.html.j2",
            "samples", "harness.report.evidence:idle_section", compare_as="idle",
            features=frozenset({"http_floor"})),
    RunKind("swap", "router swap storm", "harness.spec:SwapSpec", "harness.runs.swap:execute_swap",
            "harness.analysis.swap:summarize_run", "harness.report.swap:swap_context", "swap.html.j2", "requests",
            "harness.report.evidence:swap_section", compare_as="swap", latest_compares=True),
    RunKind("repro", "claim reproductions", "harness.repro.claims:ClaimSpec", "harness.runs.repro:execute_repro",
            "harness.analysis.repro:summarize_run", "harness.report.repro:repro_context", "repro.html.j2",
            "verdicts", "harness.report.evidence:repro_section"),
)}


def find_kind(name: str | None) -> RunKind | None:
    return KINDS.get(name) if isinstance(name, str) else None


# What a kind fills in from its own tables when a run ends, "module:function(tables) -> tables":
# harness/store.py writes the result (a swap run's requests.served_as comes from its events).
DERIVED_COLUMNS: dict[str, str] = {"swap": "harness.analysis.swap_served:derive_tables"}


def derive_fn(name: str | None):
    """The kind's derivation of columns from its tables when a run ends, or None."""
    ref = DERIVED_COLUMNS.get(name) if isinstance(name, str) else None
    if ref is None:
        return None
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def get_kind(name: str | None, where: str = "") -> RunKind:
    kind = find_kind(name)
    if kind is None:
        raise BadInput(f"unknown run kind {name!r}", where=where or None,
                       hint=f"lbench knows: {', '.join(KINDS)}")
    return kind


def latest_kinds_to_compare(other_side: Collection[str] = ()) -> frozenset[str]:
    """The kinds 'latest' may pick on one side of compare or gate: those of the runs the other side
    names (compare an idle baseline with the newest idle run, a swap one with the newest swap
    run), else every kind marked ``latest_compares`` (never a calibrate run by accident)."""
    if other_side:
        return frozenset(other_side)
    return frozenset(k.name for k in KINDS.values() if k.latest_compares)
