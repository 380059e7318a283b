"""Claim reproductions (``lbench repro``): each claim's scenario on the real engine, judged."""

from __future__ import annotations

from harness.runkind import RunKind, part

KIND = RunKind(
    name="repro", title="claim reproductions", template="repro.html.j2", primary_table="verdicts",
    spec_class=part("harness.repro.claims:ClaimSpec"), prepare=part("harness.runs.repro:prepare_repro"),
    execute=part("harness.runs.repro:execute_prepared_repro"),
    summarize=part("harness.analysis.repro:summarize_run"), context=part("harness.report.repro:repro_context"),
    section=part("harness.report.evidence:repro_section"),
)
