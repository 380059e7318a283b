"""The gate benchmark (``lbench gate-bench``): the gate's error rates on real runs, or simulated."""

from __future__ import annotations

from harness.analysis.gate_bench import summarize_run
from harness.report.evidence import gate_bench_section
from harness.report.gate_bench import gate_bench_context
from harness.runkind import RunKind
from harness.runs.gate_bench import GateBenchSpec, execute_gate_bench, prepare_gate_bench

KIND = RunKind(
    name="gate-bench", title="gate benchmark", template="gate_bench.html.j2", primary_table="decisions",
    spec_class=GateBenchSpec, prepare=prepare_gate_bench, execute=execute_gate_bench,
    summarize=summarize_run, context=gate_bench_context, section=gate_bench_section,
)
