"""The router swap storm (``lbench swap``): requests across more models than may be resident."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.runkind import HistoryView, RunKind, RunOptions, part

if TYPE_CHECKING:
    from harness.runs.idle import Reporter


def prepare(spec: Any, options: RunOptions, reporter: Reporter, /) -> Any:
    from harness.runs.swap import prepare_swap  # a part: loaded when a run starts (harness/runkind.py, Part)

    return prepare_swap(spec, llama_server=options.llama_server, results=options.results, reporter=reporter)


KIND = RunKind(
    name="swap", title="router swap storm", template="swap.html.j2", primary_table="requests",
    compare_as="swap", latest_compares=True,
    spec_class=part("harness.spec:SwapSpec"), prepare=prepare, execute=part("harness.runs.swap:execute_swap"),
    summarize=part("harness.analysis.swap:summarize_run"), derive=part("harness.analysis.swap_served:derive_tables"),
    context=part("harness.report.swap:swap_context"), section=part("harness.report.evidence:swap_section"),
    history=HistoryView(metrics=part("harness.history.catalog:swap_metrics"),
                        settings=part("harness.history.catalog:swap_settings")),
)
