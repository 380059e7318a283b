"""The idle-wake sweep (``lbench idle``): pauses of growing length, one request after each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.runkind import HistoryView, Prepare, RunKind, RunOptions, part

if TYPE_CHECKING:
    from harness.runs.idle import Reporter


def prepare_sweep(name: str) -> Prepare:
    """``prepare`` of a sweep run of the kind ``name`` (idle, and calibrate: the same sweep with the HTTP floor)."""
    def prepare(spec: Any, options: RunOptions, reporter: Reporter, /) -> Any:
        from harness.runs.idle import prepare_idle  # a part: loaded when a run starts (harness/runkind.py, Part)

        return prepare_idle(spec, llama_server=options.llama_server, results=options.results, reporter=reporter,
                            kind=name, llama_idle_path=options.llama_idle, engine_options=options.engine_options)

    return prepare


KIND = RunKind(
    name="idle", title="idle-wake sweep", template="idle.html.j2", primary_table="samples",
    compare_as="idle", latest_compares=True, features=frozenset({"pause_sweep"}),
    spec_class=part("harness.spec:IdleSpec"), prepare=prepare_sweep("idle"),
    execute=part("harness.runs.idle:execute_idle"),
    summarize=part("harness.analysis.idle:summarize_run"), context=part("harness.report.idle:idle_context"),
    section=part("harness.report.evidence:idle_section"),
    history=HistoryView(metrics=part("harness.history.catalog:idle_metrics"),
                        table_metrics=part("harness.history.run_medians:idle_medians")),
)
