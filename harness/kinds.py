"""The kinds of run lbench knows, as objects with one protocol, and the views across runs.

A **kind** measures: ``prepare(spec, options, reporter)`` does everything that can fail on
bad input before a run directory exists, ``execute(prepared, reporter)`` measures and returns
the finished ``Run`` (its lifecycle is ``harness/runs/session.py``), ``summarize(run)`` is the
content of ``analysis.json``, ``derive(tables)`` the columns the analysis adds to the raw
tables, ``report_context(run, analysis)`` what its template shows, ``evidence(...)`` its part
of an evidence bundle.  Commands call every kind the same way (``get_kind(name).prepare``,
``.execute``); dispatchers look a run's kind up here instead of testing ``kind ==``
(``tests/test_kinds.py`` fails if such a test reappears elsewhere).

A **view** reads many runs and measures nothing (a trend across builds): ``VIEWS`` holds them,
each with ``records(root)`` and ``context(...)``; see ``register_view``.

Modules are imported inside the methods, so reading the table costs nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import BadInput

if TYPE_CHECKING:
    import pandas as pd

    from harness.runs.idle import Reporter
    from harness.store import Run


@dataclass(frozen=True)
class RunOptions:
    """What a command passes to every kind's ``prepare`` besides the spec (None: the default)."""

    llama_server: str | None = None  # the engine binary (path, or a build resolved by the command)
    results: str | None = None  # the results root (--results)
    llama_idle: str | None = None  # idle: the in-process reference binary
    engine_options: dict[str, Any] = field(default_factory=dict)  # idle: engine knobs from the command line
    binary: Any = None  # repro: the resolved engine Binary


@dataclass(frozen=True)
class RunKind:
    """One kind of run.  Subclasses implement the protocol; the fields describe it."""

    name: str
    title: str  # what the evidence calls a run of this kind
    template: str  # in reports/templates
    primary_table: str  # the table the runs listing counts
    compare_as: str | None = None  # runs of kinds with the same value can be compared (None: not comparable)
    features: frozenset[str] = frozenset()  # what the executor adds for this kind, e.g. the HTTP floor
    latest_compares: bool = False  # 'latest' in compare/gate may pick it (calibrate runs compare as idle, by id only)

    def spec_class(self) -> type | None:
        return None

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        raise NotImplementedError(f"{self.name} runs are not started by a command")

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        raise NotImplementedError(f"{self.name} runs are not started by a command")

    def summarize(self, run: Run) -> dict:
        return {}

    def derive(self, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
        """The raw tables with the columns this kind's analysis derives from them (none by default)."""
        return tables

    def report_context(self, run: Run, analysis: dict) -> dict:
        raise NotImplementedError

    def evidence(self, run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
        return "", []

    def history_settings(self, record: Any) -> list[str]:
        """The setting labels the history archive files this run's series under (one per cell)."""
        return list(record.settings)


class _Idle(RunKind):
    def spec_class(self) -> type:
        from harness.spec import IdleSpec

        return IdleSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        from harness.runs.idle import prepare_idle

        return prepare_idle(spec, llama_server=options.llama_server, results=options.results, reporter=reporter,
                            kind=self.name, llama_idle_path=options.llama_idle, engine_options=options.engine_options)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.idle import execute_idle

        return execute_idle(prepared, reporter, extra_manifest=extra_manifest)

    def summarize(self, run: Run) -> dict:
        from harness.analysis.idle import summarize_run

        return summarize_run(run)

    def report_context(self, run: Run, analysis: dict) -> dict:
        from harness.report.idle import idle_context

        return idle_context(run, analysis)

    def evidence(self, run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
        from harness.report.evidence import idle_section

        return idle_section(run, analysis, out_dir)


class _Calibrate(_Idle):
    def summarize(self, run: Run) -> dict:
        from harness.analysis.calibration import summarize_run

        return summarize_run(run)

    def report_context(self, run: Run, analysis: dict) -> dict:
        from harness.report.calibrate import calibrate_context

        return calibrate_context(run, analysis)


class _Swap(RunKind):
    def history_settings(self, record: Any) -> list[str]:
        from harness.history.catalog import swap_setting

        return list(record.settings) or [swap_setting(record.config)]  # a storm has no cells

    def spec_class(self) -> type:
        from harness.spec import SwapSpec

        return SwapSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        from harness.runs.swap import prepare_swap

        return prepare_swap(spec, llama_server=options.llama_server, results=options.results, reporter=reporter)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.swap import execute_swap

        return execute_swap(prepared, reporter)

    def summarize(self, run: Run) -> dict:
        from harness.analysis.swap import summarize_run

        return summarize_run(run)

    def derive(self, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
        from harness.analysis.swap_served import derive_tables

        return derive_tables(dict(tables))

    def report_context(self, run: Run, analysis: dict) -> dict:
        from harness.report.swap import swap_context

        return swap_context(run, analysis)

    def evidence(self, run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
        from harness.report.evidence import swap_section

        return swap_section(run, analysis, out_dir)


@dataclass(frozen=True)
class PreparedRepro:
    claims: list
    binary: Any
    results: str | None


class _Repro(RunKind):
    def spec_class(self) -> type:
        from harness.repro.claims import ClaimSpec

        return ClaimSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        """``spec``: the claims to check (ClaimSpec list); ``options.binary``: the engine."""
        if options.binary is None:
            raise BadInput("a repro run needs an engine binary", hint="lbench engine info says which is used")
        return PreparedRepro(list(spec), options.binary, options.results)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.repro import execute_repro

        return execute_repro(prepared.claims, prepared.binary, results=prepared.results, reporter=reporter)

    def summarize(self, run: Run) -> dict:
        from harness.analysis.repro import summarize_run

        return summarize_run(run)

    def report_context(self, run: Run, analysis: dict) -> dict:
        from harness.report.repro import repro_context

        return repro_context(run, analysis)

    def evidence(self, run: Run, analysis: dict, out_dir: Path) -> tuple[str, list[str]]:
        from harness.report.evidence import repro_section

        return repro_section(run, analysis, out_dir)


KINDS: dict[str, RunKind] = {k.name: k for k in (
    _Idle("idle", "idle-wake sweep", "idle.html.j2", "samples", compare_as="idle", latest_compares=True),
    _Calibrate("calibrate", "harness calibration", "calibrate.html.j2", "samples", compare_as="idle",
               features=frozenset({"http_floor"})),
    _Swap("swap", "router swap storm", "swap.html.j2", "requests", compare_as="swap", latest_compares=True),
    _Repro("repro", "claim reproductions", "repro.html.j2", "verdicts"),
)}


def find_kind(name: str | None) -> RunKind | None:
    return KINDS.get(name) if isinstance(name, str) else None


def get_kind(name: str | None, where: str = "") -> RunKind:
    kind = find_kind(name)
    if kind is None:
        raise BadInput(f"unknown run kind {name!r}", where=where or None,
                       hint=f"lbench knows: {', '.join(KINDS)}")
    return kind


def analysis_table(run: Run, name: str) -> pd.DataFrame:
    """A run's table as the analysis reads it: the raw table plus the columns its kind derives
    (a swap run's ``requests.served_as`` from its ``events``).  The store keeps only what was
    measured; a failed derivation leaves the raw table."""
    kind = find_kind(run.record.kind)
    table = run.table(name)
    if kind is None or type(kind).derive is RunKind.derive:
        return table
    tables = {name: table, **{t: run.table(t) for t in ("events",) if t != name}}
    try:
        from harness.schema import apply_schema

        return apply_schema(kind.derive(tables)[name], name)
    except Exception:  # never lose the table to a bug in a derived column
        return table


def latest_kinds_to_compare(other_side: Collection[str] = ()) -> frozenset[str]:
    """The kinds 'latest' may pick on one side of compare or gate: those of the runs the other side
    names (compare an idle baseline with the newest idle run, a swap one with the newest swap
    run), else every kind marked ``latest_compares`` (never a calibrate run by accident)."""
    if other_side:
        return frozenset(other_side)
    return frozenset(k.name for k in KINDS.values() if k.latest_compares)


# ---- views across runs -------------------------------------------------------------------------

class RunView(Protocol):
    """A page or table made from many runs (a trend across builds); it starts no run."""

    name: str
    title: str
    template: str

    def context(self, root: Path, **filters: Any) -> dict: ...


VIEWS: dict[str, RunView] = {}


def register_view(view: RunView) -> RunView:
    if view.name in VIEWS or view.name in KINDS:
        raise ValueError(f"a kind or view named {view.name!r} exists")
    VIEWS[view.name] = view
    return view


def _register_builtin_views() -> None:
    """The views lbench ships, registered here so every lookup of ``VIEWS`` finds them (their
    modules are light; what a view's context needs is imported when it is asked for)."""
    from harness.history.view import TrendView

    register_view(TrendView())


_register_builtin_views()
