"""Idle claims decided as equivalence tests: "a decode after a long pause is as fast as after a
short one" needs evidence of *no effect*, not the absence of a large one.

Design (the spec fixes it in advance): every model in ``models`` (more than one size and
quantization), ``starts`` fresh servers per model, each running the short and long pauses
(up to minutes) in shuffled order with ``reps`` repetitions.  One group per (model, long
pause): the samples at that pause against the short-pause samples, with each server start
as the unit (harness.analysis.verdicts: two-level bootstrap, Holm over the groups).  Each
group is ``no change`` only when its 95% interval lies inside the band [1/(1+margin),
1+margin]; ``slower`` when it lies above; otherwise ``inconclusive`` (or ``refused`` when
too few samples).  Figures count the groups; the claim's checks decide from the counts.
"""

from __future__ import annotations

import pandas as pd

from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from harness.repro.base import Context, Evidence, Params, scenario, write_evidence_table
from harness.workloads.idle import pause_schedule, run_idle_sweep
from harness.analysis.verdicts import ALPHA, GroupData, MIN_SAMPLES, VerdictConfig, decide_groups
from harness.models.gguf_info import file_sha256, read_model_info
from harness.repro.idle_recipe import body_text, write_equivalence_recipe
from harness.repro.lab import changed_env

if TYPE_CHECKING:
    from harness.models.resolve import ResolvedModel
    from harness.repro.recipe import ClaimSpec


@dataclass(frozen=True)
class EquivalenceParams(Params):
    models: list[str] = field(default_factory=lambda: ["tiny-q8"])
    short_pauses_s: list[float] = field(default_factory=lambda: [0.0, 0.05])
    long_pauses_s: list[float] = field(default_factory=lambda: [1.4, 3.0])
    starts: int = 2
    reps: int = 5
    margin: float = 0.10


def equivalence_groups(samples: pd.DataFrame, short: list[float], long: list[float]) -> list:
    """GroupData per (model, long pause): per start, short-pause latencies vs that pause's."""
    m = samples[(samples["phase"] == "measure") & samples["error"].isna()]
    groups = []
    for model, g in m.groupby("model", sort=False):
        starts = sorted(g["start"].unique())
        a = [g[(g["start"] == s) & g["pause_requested_s"].isin(short)]["latency_ms"].to_numpy() for s in starts]
        for pause in long:
            b = [g[(g["start"] == s) & (g["pause_requested_s"] == pause)]["latency_ms"].to_numpy() for s in starts]
            groups.append(GroupData(model, "cpu", f"pause={pause:g}s", "latency_ms", a, b))
    return groups


def equivalence_figures(verdicts: list, *, margin: float, models: list[str], starts: int, long: list[float]) -> dict:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in ("no change", "slower", "faster", "inconclusive",
                                                                 "refused")}
    worst = max(verdicts, key=lambda v: v.ratio_ci[1] if v.ratio_ci[1] == v.ratio_ci[1] else float("inf"))
    return {"groups": len(verdicts), "groups_no_change": counts["no change"], "groups_slower": counts["slower"],
            "groups_faster": counts["faster"],
            "groups_undecided": counts["inconclusive"] + counts["refused"],
            "margin": margin, "models": ", ".join(models), "starts_per_model": starts, "max_pause_s": max(long),
            "worst_group": worst.key(), "worst_ratio": round(worst.ratio, 4),
            "worst_ratio_ci_high": round(worst.ratio_ci[1], 4)}


WARMUP = 3


def add_row(rows: list[dict[str, object]], extra: dict[str, object], row: dict[str, object]) -> None:
    """``emit`` of a sweep: each row, with ``extra`` columns, into ``rows``."""
    rows.append({**row, **extra})


def _recipe_model(model: ResolvedModel, server: Any, engine: LlamaServerEngine) -> dict[str, Any]:
    """What the recipe needs of one model: how to get it, the server's command line, the request."""
    try:
        info = read_model_info(model.path).as_dict()
    except Exception:  # the recipe names it by hash all the same
        info = {}
    env, _ = engine.environment(Setting())
    return {**info, "label": model.label, "path": str(model.path), "sha256": file_sha256(model.path),
            "argv": list(server.argv), "body": body_text(server.client.body), "env": changed_env(env)}


@scenario("idle-equivalence", EquivalenceParams)
def idle_equivalence(ctx: Context, p: EquivalenceParams) -> Evidence:
    """Fresh servers per model; per (model, long pause) an equivalence verdict against the short pauses."""
    refs = list(p.models)
    short = [float(x) for x in p.short_pauses_s]
    long = [float(x) for x in p.long_pauses_s]
    starts, reps, margin = p.starts, p.reps, p.margin
    rows: list[dict] = []
    labels = []
    recipe_models: list[dict] = []
    for ref in refs:
        model = ctx.resolve(ref)
        labels.append(model.label)
        engine = LlamaServerEngine(ctx.binary)
        for start in range(1, starts + 1):
            log = ctx.claim_dir / "logs" / f"server-{model.label}-{start}.log"
            with engine.start(model.path, Setting(), log) as server:
                if start == 1:
                    recipe_models.append(_recipe_model(model, server, engine))
                run_idle_sweep(server, short + long, reps=reps, seed=start, warmup=WARMUP,
                               emit=partial(add_row, rows, {"model": model.label, "start": start}))
    frame = pd.DataFrame(rows)
    write_evidence_table(frame, ctx.claim_dir, "samples")

    def recipe(spec: ClaimSpec, verdict: str) -> None:  # recipe.sh, once lbench's verdict is known

        schedules = {s: [p for _, p in pause_schedule(short + long, reps, s)] for s in range(1, starts + 1)}
        write_equivalence_recipe(ctx.claim_dir / "recipe.sh", spec=spec, lbench_verdict=verdict, binary=ctx.binary,
                                 models=recipe_models, short=short, long=long, starts=starts, reps=reps,
                                 margin=margin, alpha=ALPHA, min_samples=MIN_SAMPLES, warmup=WARMUP,
                                 schedules=schedules)

    ctx.recipe_writers.append(recipe)
    verdicts = decide_groups(equivalence_groups(frame, short, long), VerdictConfig(margin=margin))
    ev = Evidence(figures=equivalence_figures(verdicts, margin=margin, models=labels, starts=starts, long=long))
    ev.lines = [v.line() for v in verdicts]
    ev.notes = [f"design fixed in the spec: {len(labels)} models x {starts} server starts, short pauses {short} s, "
                f"long pauses {long} s, {reps} reps each, margin +/-{margin:.0%}; the unit is the server start"]
    return ev

