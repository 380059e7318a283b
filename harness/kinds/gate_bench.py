"""The gate benchmark (``lbench gate-bench``): the gate's error rates on real runs, or simulated."""

from __future__ import annotations

from harness.runkind import RunKind, part

KIND = RunKind(
    name="gate-bench", title="gate benchmark", template="gate_bench.html.j2", primary_table="decisions",
    spec_class=part("harness.runs.gate_bench:GateBenchSpec"), prepare=part("harness.runs.gate_bench:prepare_gate_bench"),
    execute=part("harness.runs.gate_bench:execute_gate_bench"),
    summarize=part("harness.analysis.gate_bench:summarize_run"),
    context=part("harness.report.gate_bench:gate_bench_context"),
    section=part("harness.report.evidence:gate_bench_section"),
)
