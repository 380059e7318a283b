"""The A/B gate job (``lbench ab``): A, B (and A/A) runs in interleaved rounds until decided."""

from __future__ import annotations

from harness.analysis.ab import summarize_run
from harness.report.ab import ab_context
from harness.report.evidence import ab_section
from harness.runkind import RunKind, RunOptions
from harness.runs.ab import GateJobSpec, PreparedGateJob, execute_gate_job, prepare_gate_job
from harness.runs.idle import Reporter
from harness.store import Run


def prepare(spec: GateJobSpec, options: RunOptions, reporter: Reporter, /) -> PreparedGateJob:
    """``spec``: both sides' idle specs and binaries, the rounds' config."""
    return prepare_gate_job(spec, options.results, reporter)


def execute(prepared: PreparedGateJob, reporter: Reporter, /) -> Run:
    return execute_gate_job(prepared, reporter).run


KIND = RunKind(
    name="ab", title="A/B gate job", template="ab.html.j2", primary_table="rounds",
    spec_class=GateJobSpec, prepare=prepare, execute=execute,
    summarize=summarize_run, context=ab_context, section=ab_section,
)
