"""Claim reproductions (``lbench repro``): each claim's scenario on the real engine, judged."""

from __future__ import annotations

from harness.analysis.repro import summarize_run
from harness.report.evidence import repro_section
from harness.report.repro import repro_context
from harness.repro.claims import ClaimSpec
from harness.runkind import RunKind
from harness.runs.repro import execute_prepared_repro, prepare_repro

KIND = RunKind(
    name="repro", title="claim reproductions", template="repro.html.j2", primary_table="verdicts",
    spec_class=ClaimSpec, prepare=prepare_repro, execute=execute_prepared_repro,
    summarize=summarize_run, context=repro_context, section=repro_section,
)
