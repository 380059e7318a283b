"""Compare a baseline with a candidate, group by group, within regimes.

Groups: idle runs -> (model, setting, regime, metric) for metrics ``latency_ms``
and ``server_prompt_ms``; swap runs -> (models, class warm/cold, ``latency_ms``).
Regimes are fitted on the *baseline* and applied to both sides, so the same
populations are compared (a moved threshold shows up as a slower regime).

Per group: both medians, ratio candidate/baseline with a 95% bootstrap interval
(each side resampled independently, ratio of medians), Hodges-Lehmann shift
(median of all pairwise differences), two-sided Mann-Whitney U p-value, verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.derived import analysis_table
from harness.analysis.regimes import classify, step_changes, wake_model, wake_thresholds
from harness.analysis.stats import measured
from harness.analysis.swap import compare_classes, warm_mask
from harness.analysis.gate_config import GateOn
from harness.analysis.verdicts import GroupData, Verdict, VerdictConfig, decide_groups
from harness.errors import BadInput
from harness.runkind import find_kind, registered
from harness.store import Run

IDLE_METRICS = ("latency_ms", "server_prompt_ms")
# a group's rows of one run's frame (a boolean mask)
Select = Callable[[pd.DataFrame], pd.Series]


SWAP_FAMILY = "swap"


def compare_family(runs: list[Run]) -> str:
    """What the runs are compared as (its kind's ``compare_as``, harness/runkind.py: calibrate runs compare as idle)."""
    where = ", ".join(r.run_id for r in runs)
    families = set()
    for r in runs:
        kind = find_kind(r.record.kind)
        if kind is None or kind.compare_as is None:
            comparable = sorted(k.name for k in registered().values() if k.compare_as)
            raise BadInput(f"runs of kind {r.record.kind!r} cannot be compared", where=where,
                           hint=f"compare runs of these kinds: {', '.join(comparable)}")
        families.add(kind.compare_as)
    if len(families) != 1:
        raise BadInput(f"cannot compare runs of different kinds: {sorted(families)}", where=where)
    return families.pop()


# --------------------------------------------------------------------------- run-as-unit verdicts (issue #10, #22)

def _per_run(frames: list[pd.DataFrame], sel: Select, metric: str) -> list[np.ndarray]:
    return [f.loc[sel(f), metric].to_numpy(dtype=float) for f in frames if metric in f]


def _per_run_strata(frames: list[pd.DataFrame], sel: Select, metric: str, pauses: list[float]) -> list[list[np.ndarray]]:
    """Per run, one array per pause: the run's level is the mean of its per-pause log medians."""
    return [[f.loc[sel(f) & (f["pause_requested_s"] == p), metric].to_numpy(dtype=float) for p in pauses]
            for f in frames if metric in f]


def _gates_regime(gate_on: GateOn, regime: str) -> bool:
    return (gate_on is None or gate_on == "warm") and regime == "warm" or gate_on == "regimes"


def judge_runs(baseline: list[Run], candidate: list[Run], cfg: VerdictConfig | None = None, *,
               metrics: tuple[str, ...] | None = None, gate_on: GateOn = None,
               history: list[Run] | None = None) -> tuple[list[Verdict], dict[str, Any]]:
    """Verdicts per group with each run as a unit (harness.analysis.verdicts).  See build_groups."""
    groups, info = build_groups(baseline, candidate, metrics=metrics, gate_on=gate_on, history=history)
    return decide_groups(groups, cfg or VerdictConfig()), info


def build_groups(baseline: list[Run], candidate: list[Run], *, metrics: tuple[str, ...] | None = None,
                 gate_on: GateOn = None, history: list[Run] | None = None
                 ) -> tuple[list[GroupData], dict[str, Any]]:
    """The groups of a comparison and which of them vote (the pre-registered gating family).

    Idle: per (model, setting), regimes from A's shape fit (warm, woken, cold: disjoint sets of
    pauses), each regime's run level pooled over its pauses (mean of per-pause log medians); one
    group per pause; for a new or earlier wake step in B, the pauses where B is newly woken.
    Which groups vote (``gate_on``, from harness.analysis.gate_config.parse_gate_on): ``None`` /
    ``"warm"``: the warm regime only (default); ``"regimes"``: every regime of A (disjoint); a tuple of
    pauses: those pause groups (disjoint).  Everything else is reported, not voting, and the new-step
    group never votes: it is chosen after looking at B.  Swap: warm / cold (disjoint), both vote.
    ``history``: earlier runs of the baseline; each group's between-run variance is pooled from them.
    Returns (groups, info) where info holds both sides' shape fits and step changes.
    """
    history = list(history or [])
    groups: list[GroupData] = []
    if compare_family(baseline + candidate + history) == SWAP_FAMILY:
        fa = [analysis_table(r, "requests") for r in baseline]
        fb = [analysis_table(r, "requests") for r in candidate]
        fh = [analysis_table(r, "requests") for r in history]
        if all(f.empty for f in fa) or all(f.empty for f in fb):
            raise BadInput("a side has no requests")
        label = ",".join(sorted({str(m) for f in fa if "model" in f for m in f["model"].unique()}))
        # both sides must group alike: served_as only when every run of both sides has it
        class_names = {compare_classes(f)[1] for f in fa + fb + fh if not f.empty}
        by_served = class_names == {("served resident", "waited for a load")}
        classes = ("served resident", "waited for a load") if by_served else ("warm", "cold")
        for cls, first in ((classes[0], True), (classes[1], False)):
            def sel_class(f: pd.DataFrame, first: bool = first) -> pd.Series:
                mask = compare_classes(f)[0] if by_served else warm_mask(f)
                return f["error"].isna() & (mask == first)
            groups.append(GroupData(label, "router", cls, "latency_ms", _per_run(fa, sel_class, "latency_ms"),
                                    _per_run(fb, sel_class, "latency_ms"),
                                    history_runs=_per_run([f for f in fh if not f.empty], sel_class, "latency_ms")))
        return groups, {"kind": "swap", "shapes_a": {}, "shapes_b": {}, "step_changes": [], "gate_on": "swap classes"}
    fa = [measured(r.table("samples")) for r in baseline]
    fb = [measured(r.table("samples")) for r in candidate]
    fh = [f for f in (measured(r.table("samples")) for r in history) if not f.empty]
    if all(f.empty for f in fa) or all(f.empty for f in fb):
        raise BadInput("a side has no measured samples", where="baseline" if all(f.empty for f in fa) else "candidate")
    fa, fb = [f for f in fa if not f.empty], [f for f in fb if not f.empty]
    pool_a, pool_b = pd.concat(fa, ignore_index=True), pd.concat(fb, ignore_index=True)
    cells_a, cells_b = set(zip(pool_a["model"], pool_a["setting"])), set(zip(pool_b["model"], pool_b["setting"]))
    if not cells_a & cells_b:
        def names(cells: Iterable[tuple[str, str]]) -> str:
            return "; ".join(f"{m} · {s}" for m, s in sorted(cells))
        raise BadInput("baseline and candidate have no model and setting in common, so nothing can be compared",
                       where=f"baseline: {names(cells_a)} | candidate: {names(cells_b)}",
                       hint="compare runs of the same model and setting (lbench runs lists them)")
    shapes_a, shapes_b = wake_model(pool_a), wake_model(pool_b)
    changes = step_changes(shapes_a, shapes_b)
    thresholds = wake_thresholds(shapes_a)
    for f in fa + fb + fh:
        f["regime"] = classify(f, thresholds)
    metrics = metrics or IDLE_METRICS
    pause_gates = tuple(gate_on) if isinstance(gate_on, (tuple, list)) else ()
    cells = sorted(set(zip(pool_a["model"], pool_a["setting"])) | set(zip(pool_b["model"], pool_b["setting"])))
    for model, setting in cells:
        def cell(f: pd.DataFrame, model: str = model, setting: str = setting) -> pd.Series:
            return (f["model"] == model) & (f["setting"] == setting)
        regimes = sorted({r for f in fa + fb for r in f.loc[cell(f), "regime"].unique()})
        pauses = sorted({p for f in fa + fb for p in f.loc[cell(f), "pause_requested_s"].unique()})
        for metric in metrics:
            for regime in regimes:
                def sel(f: pd.DataFrame, regime: str = regime) -> pd.Series:
                    return cell(f) & (f["regime"] == regime)
                # pauses every run of both sides has in this regime: the pooled level compares like with like
                held = [set(f.loc[sel(f), "pause_requested_s"].unique()) for f in fa + fb]
                common = sorted(set.intersection(*held)) if held else []
                groups.append(GroupData(model, setting, regime, metric,
                                        _per_run_strata(fa, sel, metric, common), _per_run_strata(fb, sel, metric, common),
                                        gates=_gates_regime(gate_on, regime) and not pause_gates,
                                        history_runs=_per_run_strata(fh, sel, metric, common)))
            for pause in pauses:
                def sel_pause(f: pd.DataFrame, pause: float = pause) -> pd.Series:
                    return cell(f) & (f["pause_requested_s"] == pause)
                groups.append(GroupData(model, setting, f"pause={pause:g}s", metric, _per_run(fa, sel_pause, metric),
                                        _per_run(fb, sel_pause, metric),
                                        gates=any(math.isclose(pause, p) for p in pause_gates),
                                        history_runs=_per_run(fh, sel_pause, metric)))
            for ch in changes:
                if (ch["model"], ch["setting"]) != (model, setting) or ch["change"] == "later":
                    continue
                lo, hi = ch["from_s"], ch["to_s"]

                def sel_step(f: pd.DataFrame, lo: float = lo, hi: float | None = hi) -> pd.Series:
                    p = f["pause_requested_s"]
                    return cell(f) & (p >= lo) & (p < hi if hi is not None else True)
                label = f"new step pauses>={lo:g}s" + (f",<{hi:g}s" if hi is not None else "")
                groups.append(GroupData(model, setting, label, metric, _per_run(fa, sel_step, metric),
                                        _per_run(fb, sel_step, metric), gates=False,
                                        history_runs=_per_run(fh, sel_step, metric),
                                        note="chosen after looking at B, so it does not vote; to gate on these "
                                             "pauses name them with --gate-on"))
    if pause_gates:
        known = {float(p) for f in fa for p in f["pause_requested_s"].unique()}
        missing = [p for p in pause_gates if not any(math.isclose(p, k) for k in known)]
        if missing:
            raise BadInput(f"--gate-on names pauses the baseline does not have: {', '.join(f'{p:g}' for p in missing)}",
                           where="--gate-on", hint=f"the baseline's pauses: {', '.join(f'{p:g}' for p in sorted(known))}")
    info = {"kind": "idle", "shapes_a": {f"{m} · {s}": v for (m, s), v in shapes_a.items()},
            "shapes_b": {f"{m} · {s}": v for (m, s), v in shapes_b.items()}, "step_changes": changes,
            "gate_on": gate_label(gate_on)}
    return groups, info


def gate_label(gate_on: GateOn) -> str:
    if isinstance(gate_on, (tuple, list)):
        return "pauses " + ", ".join(f"{p:g}" for p in gate_on) + " s"
    return "every regime of A" if gate_on == "regimes" else "the warm regime, pauses pooled"
