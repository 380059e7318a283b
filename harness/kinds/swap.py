"""The router swap storm (``lbench swap``): requests across more models than may be resident."""

from __future__ import annotations

from harness.analysis.swap import summarize_run
from harness.analysis.swap_served import derive_tables
from harness.history.catalog import swap_metrics, swap_settings
from harness.report.evidence import swap_section
from harness.report.swap import swap_context
from harness.runkind import HistoryView, RunKind, RunOptions
from harness.runs.idle import Reporter
from harness.runs.swap import PreparedSwap, execute_swap, prepare_swap
from harness.spec import SwapSpec


def prepare(spec: SwapSpec, options: RunOptions, reporter: Reporter, /) -> PreparedSwap:
    return prepare_swap(spec, llama_server=options.llama_server, results=options.results, reporter=reporter)


KIND = RunKind(
    name="swap", title="router swap storm", template="swap.html.j2", primary_table="requests",
    compare_as="swap", latest_compares=True,
    spec_class=SwapSpec, prepare=prepare, execute=execute_swap,
    summarize=summarize_run, derive=derive_tables, context=swap_context, section=swap_section,
    history=HistoryView(metrics=swap_metrics, settings=swap_settings),
)
