"""``lbench gate``'s workflow: both sides resolved (named runs, or a window of the history archive),
the backend and comparability checks, the verdicts with the runs as units, the outcome, and the
three artefacts' texts (redacted).  The command parses options, calls ``decide_gate`` and
``harness.runs.gate_output.write_gate_outputs``, and prints; a CI script or a test calls the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.analysis.compare import judge_runs
from harness.analysis.gate import GateConfig, GateOutcome, decide, junit, markdown, verdict_config, verdict_json
from harness.analysis.gate_config import GateOn
from harness.analysis.verdicts import Verdict
from harness.baselines import refuse_same_runs
from harness.engines import backends
from harness.errors import BadInput
from harness.history.gate_hook import is_history_ref
from harness.probes.host import virtual_status
from harness.record import backend_of
from harness.report.redact import Redactor
from harness.runs.sides import resolve_runs, resolve_sides, side_warnings
from harness.store import Run
from harness.runs.gate_history import history_sides, pooled_lines


@dataclass(frozen=True)
class GateRequest:
    """What ``lbench gate`` was asked: the sides (run refs; a ``history:<series>`` baseline), earlier runs
    of the baseline, the results folder, the config, which groups vote, the backend every run must have,
    the history filters (``archive``, ``window``, ``build``, ``machine``, ``model``, ``setting``: only with
    a history baseline) and whether the artefacts are redacted."""

    baseline: list[str]
    candidate: list[str]
    cfg: GateConfig
    history: list[str] = field(default_factory=list)
    results: str | None = None
    gate_on: GateOn = None
    backend: str | None = None
    filters: dict[str, Any] = field(default_factory=dict)  # option name -> value (None: not given)
    redact: bool = True
    inconclusive_ok: bool = False


@dataclass
class GateDecision:
    outcome: GateOutcome
    verdicts: list[Verdict]
    info: dict[str, Any]
    baseline_runs: list[Run]
    candidate_runs: list[Run]
    warnings: list[str]  # said before the verdict
    context: list[str]  # printed and written beside the verdict (history window, virtual machine)
    markdown: str
    junit: str
    json: str


def decide_gate(req: GateRequest) -> GateDecision:
    """The gate's decision and its artefacts' texts (bad input: ``BadInput``, exit 2)."""
    hb = None
    if any(is_history_ref(b) for b in req.baseline):
        f = req.filters
        ra, rb, hb = history_sides(req.baseline, req.candidate, req.results, history=req.history,
                                   archive=f.get("--archive"), window=f.get("--window"), build=f.get("--build"),
                                   machine=f.get("--machine"), model=f.get("--model"), setting=f.get("--setting"))
    else:
        given = [k for k, v in req.filters.items() if v is not None]
        if given:
            raise BadInput(f"{', '.join(given)} only apply to a history baseline", where=given[0],
                           hint="give --baseline history:<series> (docs/history.md), or leave them out")
        ra, rb = resolve_sides(req.baseline, req.candidate, req.results)
    rh = resolve_runs(req.history, req.results)
    if req.backend is not None:  # every run must have used that backend: exit 2 naming the others
        backends.get(req.backend)
        other = [f"{r.run_id} ({backend_of(r.record)})" for r in [*ra, *rb, *rh] if backend_of(r.record) != req.backend]
        if other:
            raise BadInput(f"runs of another backend than {req.backend}: {', '.join(other)}", where="--backend",
                           hint="give runs of one backend (lbench runs shows each run's engine), or drop --backend")
    refuse_same_runs(ra, rb)  # a run against itself: exit 2, not a verdict
    warnings = side_warnings(ra, rb)
    cfg = req.cfg
    vcfg = verdict_config(cfg)
    vcfg.pool_spread = hb is not None  # the window is the baseline and its spread: each run counted once
    res, info = judge_runs(ra, rb, vcfg, gate_on=req.gate_on, history=rh)
    outcome = decide(res, cfg, inconclusive_ok=req.inconclusive_ok)
    names_a, names_b = [r.run_id for r in ra], [r.run_id for r in rb]
    context: list[str] = []
    props: dict[str, str] = {}
    if hb is not None:
        context = hb.lines() + pooled_lines(res)
        info["history_baseline"] = hb.as_dict()
        props = {"history_baseline": f"history:{hb.series}", "history_runs": ",".join(names_a),
                 "history_build": str(hb.build), "history_window": str(hb.window),
                 "history_dropped_for_drift": ",".join(hb.dropped)}
    info["virtual"] = virtual_status([r.record.host.facts for r in ra + rb])  # on every verdict, virtual or not
    if info["virtual"]["note"]:
        context = [info["virtual"]["note"], *context]
    red, red_xml = Redactor(req.redact, runs=ra + rb), Redactor(req.redact, runs=ra + rb, xml=True)
    label_a = f"history:{hb.series} ({', '.join(names_a)})" if hb is not None else ", ".join(names_a)
    return GateDecision(outcome, res, info, ra, rb, warnings, context,
                        markdown=red(markdown(outcome, label_a, ", ".join(names_b), context=context)),
                        junit=red_xml(junit(outcome, properties=props, context=context)),
                        json=red(verdict_json(outcome, names_a, names_b, info)))
