"""The A/B gate job (``lbench ab``): A, B (and A/A) runs in interleaved rounds until decided."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.runkind import RunKind, RunOptions, part

if TYPE_CHECKING:
    from harness.runs.idle import Reporter
    from harness.store import Run


def prepare(spec: Any, options: RunOptions, reporter: Reporter, /) -> Any:
    """``spec``: both sides' idle specs and binaries, the rounds' config."""
    from harness.runs.ab import prepare_gate_job  # a part: loaded when a job starts (harness/runkind.py, Part)

    return prepare_gate_job(spec, options.results, reporter)


def execute(prepared: Any, reporter: Reporter, /) -> Run:
    from harness.runs.ab import execute_gate_job

    return execute_gate_job(prepared, reporter).run


KIND = RunKind(
    name="ab", title="A/B gate job", template="ab.html.j2", primary_table="rounds",
    spec_class=part("harness.runs.ab:GateJobSpec"), prepare=prepare, execute=execute,
    summarize=part("harness.analysis.ab:summarize_run"), context=part("harness.report.ab:ab_context"),
    section=part("harness.report.evidence:ab_section"),
)
