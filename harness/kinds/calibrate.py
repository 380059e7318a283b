"""The harness's calibration (``lbench calibrate``): an idle sweep of the tiny model with the HTTP floor."""

from __future__ import annotations

from harness.analysis.calibration import summarize_run
from harness.kinds.idle import prepare_sweep
from harness.report.calibrate import calibrate_context
from harness.report.evidence import idle_section
from harness.runkind import RunKind
from harness.runs.idle import execute_idle
from harness.spec import IdleSpec

KIND = RunKind(
    name="calibrate", title="harness calibration", template="calibrate.html.j2", primary_table="samples",
    compare_as="idle", features=frozenset({"http_floor", "pause_sweep"}),
    spec_class=IdleSpec, prepare=prepare_sweep("calibrate"), execute=execute_idle,
    summarize=summarize_run, context=calibrate_context, section=idle_section,
)
