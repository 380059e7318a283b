"""The idle-wake sweep (``lbench idle``): pauses of growing length, one request after each."""

from __future__ import annotations

from harness.analysis.idle import summarize_run
from harness.history.catalog import idle_metrics
from harness.history.run_medians import idle_medians
from harness.report.evidence import idle_section
from harness.report.idle import idle_context
from harness.runkind import HistoryView, Prepare, RunKind, RunOptions
from harness.runs.idle import PreparedIdle, Reporter, execute_idle, prepare_idle
from harness.spec import IdleSpec


def prepare_sweep(name: str) -> Prepare:
    """``prepare`` of a sweep run of the kind ``name`` (idle, and calibrate: the same sweep with the HTTP floor)."""
    def prepare(spec: IdleSpec, options: RunOptions, reporter: Reporter, /) -> PreparedIdle:
        return prepare_idle(spec, llama_server=options.llama_server, results=options.results, reporter=reporter,
                            kind=name, llama_idle_path=options.llama_idle, engine_options=options.engine_options)

    return prepare


KIND = RunKind(
    name="idle", title="idle-wake sweep", template="idle.html.j2", primary_table="samples",
    compare_as="idle", latest_compares=True, features=frozenset({"pause_sweep"}),
    spec_class=IdleSpec, prepare=prepare_sweep("idle"), execute=execute_idle,
    summarize=summarize_run, context=idle_context, section=idle_section,
    history=HistoryView(metrics=idle_metrics, table_metrics=idle_medians),
)
