"""The harness's calibration (``lbench calibrate``): an idle sweep of the tiny model with the HTTP floor."""

from __future__ import annotations

from harness.kinds.idle import prepare_sweep
from harness.runkind import RunKind, part

KIND = RunKind(
    name="calibrate", title="harness calibration", template="calibrate.html.j2", primary_table="samples",
    compare_as="idle", features=frozenset({"http_floor", "pause_sweep"}),
    spec_class=part("harness.spec:IdleSpec"), prepare=prepare_sweep("calibrate"),
    execute=part("harness.runs.idle:execute_idle"),
    summarize=part("harness.analysis.calibration:summarize_run"),
    context=part("harness.report.calibrate:calibrate_context"), section=part("harness.report.evidence:idle_section"),
)
