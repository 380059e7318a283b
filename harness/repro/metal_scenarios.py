"""Metal residency claims (seed 002), run where llama-server has a Metal backend (macOS on Apple
Silicon); on other hosts the specs' ``requires = ["metal"]`` makes them "not checkable here".

- ``metal-keep-alive-window``: with ``GGML_METAL_RESIDENCY_KEEP_ALIVE_S`` short (5 s: minutes,
  not hours), pauses past the ~1 s collector but inside the keep-alive must cost nothing, and
  pauses past the keep-alive must pay the re-wire penalty; several server starts, the start as
  the unit (the equivalence design of idle-equivalence).
- ``metal-no-residency``: ``GGML_METAL_NO_RESIDENCY=1`` against the default at two model sizes:
  the penalty after > ~1 s appears only without residency sets and grows with the model.
- ``metal-keep-alive-parse``: the keep-alive each ``GGML_METAL_RESIDENCY_KEEP_ALIVE_S`` value gives,
  read from the server's startup log (``metal_keep_alive_s``, tested on a recorded line).

The figures come from pure functions over the samples table (``window_figures``,
``no_residency_figures``); tests/repro/test_metal_scenarios.py runs them on synthetic timelines
of each rule and its negation.  These scenarios have not run on a Mac yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine
from harness.repro.base import Context, Evidence, Inconclusive, Params, scenario, write_evidence_table
from harness.repro.idle_scenarios import add_row, equivalence_groups
from harness.workloads.idle import run_idle_sweep
from harness.analysis.verdicts import VerdictConfig, decide_groups

if TYPE_CHECKING:
    from harness.analysis.verdicts import Verdict


@dataclass(frozen=True)
class KeepAliveParseParams(Params):
    model: str = "tiny-q8"
    values: list[str] = field(default_factory=lambda: ["0", "-5", "abc", "30"])


@dataclass(frozen=True)
class WindowParams(Params):
    model: str = "llama3.2-1b-q4"
    keep_alive_s: str = "5"  # GGML_METAL_RESIDENCY_KEEP_ALIVE_S; "default" is 180 s
    short_pauses_s: list[float] = field(default_factory=lambda: [0.0, 0.5])
    inside_pauses_s: list[float] = field(default_factory=lambda: [2.0, 3.5])
    outside_pauses_s: list[float] = field(default_factory=lambda: [9.0, 12.0])
    starts: int = 3
    reps: int = 4
    margin: float = 0.10


@dataclass(frozen=True)
class NoResidencyParams(Params):
    models: list[str] = field(default_factory=lambda: ["llama3.2-1b-q4", "llama3.2-3b-q8"])  # two sizes
    short_pauses_s: list[float] = field(default_factory=lambda: [0.0, 0.5])
    long_pauses_s: list[float] = field(default_factory=lambda: [1.4, 3.0])
    starts: int = 2
    reps: int = 4
    margin: float = 0.10


KEEP_ALIVE_LINE = re.compile(r"creating a residency set collection \(keep_alive = (?P<s>-?\d+) s\)")


def metal_keep_alive_s(log_text: str) -> int | None:
    """The keep-alive llama.cpp's Metal backend reports at startup (needs ``-lv 4``)."""
    m = KEEP_ALIVE_LINE.search(log_text)
    return int(m.group("s")) if m else None


def _verdicts(samples: pd.DataFrame, short: list[float], long: list[float], margin: float) -> list:
    return decide_groups(equivalence_groups(samples, short, long), VerdictConfig(margin=margin))


def _pause_of(verdict: Verdict) -> float:
    return float(verdict.regime.removeprefix("pause=").removesuffix("s"))


def window_figures(samples: pd.DataFrame, *, short: list[float], inside: list[float], outside: list[float],
                   margin: float) -> tuple[dict, list[str]]:
    """Per long pause, the decode latency against the short pauses (per server start): inside
    the keep-alive no group may be slower, past it every group must be."""
    verdicts = _verdicts(samples, short, inside + outside, margin)
    ins = [v for v in verdicts if _pause_of(v) in inside]
    outs = [v for v in verdicts if _pause_of(v) in outside]
    figures = {"inside_groups": len(ins), "inside_slower": sum(v.verdict == "slower" for v in ins),
               "outside_groups": len(outs), "outside_slower": sum(v.verdict == "slower" for v in outs)}
    figures["outside_not_slower"] = figures["outside_groups"] - figures["outside_slower"]
    worst_in = max(ins, key=lambda v: v.ratio, default=None)
    least_out = min(outs, key=lambda v: v.ratio, default=None)
    figures["inside_worst_ratio"] = round(worst_in.ratio, 4) if worst_in else None
    figures["outside_least_ratio"] = round(least_out.ratio, 4) if least_out else None
    return figures, [v.line() for v in verdicts]


def no_residency_figures(samples: pd.DataFrame, *, short: list[float], long: list[float], margin: float,
                         sizes: dict[str, int]) -> tuple[dict, list[str]]:
    """``samples`` has a ``keep_alive`` column (``none`` = GGML_METAL_NO_RESIDENCY, ``default``):
    groups per (model, long pause) for each; the penalty (median long - median short, ms) per
    model without residency sets must grow with the model's size, each larger model's by more
    than ``margin`` over the next smaller one's."""
    figures: dict = {}
    lines: list[str] = []
    for setting, tag in (("none", "no_residency"), ("default", "default")):
        part = samples[samples["keep_alive"] == setting]
        verdicts = _verdicts(part, short, long, margin)
        figures[f"{tag}_groups"] = len(verdicts)
        figures[f"{tag}_slower"] = sum(v.verdict == "slower" for v in verdicts)
        lines += [f"{setting}: {v.line()}" for v in verdicts]
    figures["no_residency_not_slower"] = figures["no_residency_groups"] - figures["no_residency_slower"]
    m = samples[(samples["phase"] == "measure") & samples["error"].isna() & (samples["keep_alive"] == "none")]
    penalty = {}
    for model, g in m.groupby("model"):
        penalty[model] = float(g[g["pause_requested_s"].isin(long)]["latency_ms"].median()
                               - g[g["pause_requested_s"].isin(short)]["latency_ms"].median())
    by_size = sorted(penalty, key=lambda k: sizes.get(k, 0))
    figures["penalty_ms_by_size"] = ", ".join(f"{k}: {penalty[k]:.1f}" for k in by_size)
    figures["models"] = len(by_size)
    figures["penalty_grows_with_size"] = len(by_size) >= 2 and all(  # by more than the margin, not by noise
        penalty[b] > penalty[a] * (1 + margin) and penalty[b] > 0 for a, b in zip(by_size, by_size[1:]))
    return figures, lines


def _sweep(ctx: Context, model_ref: str, keep_alive: str, pauses: list[float], starts: int, reps: int,
           rows: list[dict]) -> tuple[str, list[int | None]]:
    """``starts`` fresh servers of one model with one keep-alive setting, each one idle sweep;
    the keep-alive each server's startup log reported (-lv 4)."""
    model = ctx.resolve(model_ref)
    logged = []
    for start in range(1, starts + 1):
        log = ctx.claim_dir / "logs" / f"server-{model.label}-{keep_alive}-{start}.log"
        engine = LlamaServerEngine(ctx.binary, extra_args=["-lv", "4"])
        with engine.start(model.path, Setting(keep_alive=keep_alive), log) as server:
            run_idle_sweep(server, pauses, reps=reps, seed=start, warmup=3,
                           emit=partial(add_row, rows, {"model": model.label, "start": start, "keep_alive": keep_alive}))
        logged.append(metal_keep_alive_s(log.read_text(errors="replace")))
    return model.label, logged


@scenario("metal-keep-alive-window", WindowParams)
def keep_alive_window(ctx: Context, p: WindowParams) -> Evidence:
    """Fresh servers with a short keep-alive; pauses inside and past it, per start."""
    keep = p.keep_alive_s
    if not (keep == "default" or keep.isdigit()):
        raise Inconclusive(f"keep_alive_s must be a number of seconds or 'default', not {keep!r}")
    expected = 180 if keep == "default" else int(keep)
    if max(p.inside_pauses_s) >= expected or min(p.outside_pauses_s) <= expected:
        raise Inconclusive(f"the pauses do not straddle the keep-alive of {expected} s")
    rows: list[dict] = []
    pauses = p.short_pauses_s + p.inside_pauses_s + p.outside_pauses_s
    label, logged = _sweep(ctx, p.model, keep, pauses, p.starts, p.reps, rows)
    frame = pd.DataFrame(rows)
    write_evidence_table(frame, ctx.claim_dir, "samples")
    figures, lines = window_figures(frame, short=p.short_pauses_s, inside=p.inside_pauses_s,
                                    outside=p.outside_pauses_s, margin=p.margin)
    figures.update(model=label, keep_alive_set=expected, starts=p.starts,
                   keep_alive_logged=logged[0] if len(set(logged)) == 1 else None)
    return Evidence(figures, lines, [
        f"{p.starts} server starts with GGML_METAL_RESIDENCY_KEEP_ALIVE_S={keep}; pauses {p.short_pauses_s} s "
        f"(reference), {p.inside_pauses_s} s (past the ~1 s collector, inside the keep-alive), "
        f"{p.outside_pauses_s} s (past it), {p.reps} reps each, shuffled; the start is the unit",
        f"startup logs reported keep_alive = {logged} s"])


@scenario("metal-no-residency", NoResidencyParams)
def no_residency(ctx: Context, p: NoResidencyParams) -> Evidence:
    """Each model with GGML_METAL_NO_RESIDENCY=1 and with the default, fresh servers each."""
    rows: list[dict] = []
    sizes = {}
    for ref in p.models:
        sizes[ctx.resolve(ref).label] = ctx.resolve(ref).path.stat().st_size
        for keep in ("none", "default"):
            _sweep(ctx, ref, keep, p.short_pauses_s + p.long_pauses_s, p.starts, p.reps, rows)
    frame = pd.DataFrame(rows)
    write_evidence_table(frame, ctx.claim_dir, "samples")
    figures, lines = no_residency_figures(frame, short=p.short_pauses_s, long=p.long_pauses_s, margin=p.margin,
                                          sizes=sizes)
    return Evidence(figures, lines, [f"{len(p.models)} models x (no residency, default) x {p.starts} starts; "
                                     f"pauses {p.short_pauses_s} vs {p.long_pauses_s} s, {p.reps} reps"])


@scenario("metal-keep-alive-parse", KeepAliveParseParams)
def metal_keep_alive_parse(ctx: Context, p: KeepAliveParseParams) -> Evidence:
    """Start llama-server with GGML_METAL_RESIDENCY_KEEP_ALIVE_S=<value> and -lv 4; read the
    keep-alive from its startup log, for each value."""
    model = ctx.resolve(p.model)
    ev = Evidence()
    for value in p.values:
        log_path = ctx.claim_dir / "logs" / f"server-keepalive-{value}.log"
        engine = LlamaServerEngine(ctx.binary, extra_args=["-lv", "4"])
        with engine.start(model.path, Setting(keep_alive=str(value)), log_path):  # sets the variable
            pass
        ev.figures[f"keep_alive_for_{value}"] = metal_keep_alive_s(log_path.read_text(errors="replace"))
    ev.figures["fallback_180_for_invalid"] = all(
        ev.figures.get(f"keep_alive_for_{v}") == 180 for v in p.values if v in ("0", "-5", "abc"))
    return ev

