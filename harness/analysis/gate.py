"""The regression gate over run-as-unit verdicts (harness.analysis.verdicts, docs/statistics.md).

Exit codes: 0 pass (every gating group ``no change`` or ``faster``), 1 regression (a gating group
``slower`` after Holm; the gating groups are pre-registered, harness.analysis.compare), 2 bad input or a
gating group refused for too few samples (a regression elsewhere still wins: exit 1, and it is
reported), 3 inconclusive (some gating group's interval straddles the band; ``--inconclusive-ok``
maps it to 0).  ``threshold`` is the equivalence margin m (default 5%): band [1/(1+m), 1+m].

    [gate]
    alpha = 0.05
    min_n = 5
    threshold = 0.05
    [thresholds]
    server_prompt_ms = 0.10
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.analysis.gate_config import GateConfig  # defined there (light), used and re-exported here
from harness.errors import BadInput
from harness.toml_input import read_toml
from harness.analysis.verdicts import DETECTABLE_CAP, factor, quantity, ratio_words, runs_needed_words, Verdict, VerdictConfig
from harness.analysis.verdict_labels import group_label


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def load_config(path: Path | None, **overrides: object) -> GateConfig:
    cfg = GateConfig()
    if path is not None:
        data = read_toml(Path(path), "gate config")
        g, per = data.get("gate", {}), data.get("thresholds", {})
        if not isinstance(g, dict) or not isinstance(per, dict):
            raise BadInput("[gate] and [thresholds] must be tables", where=str(path))
        try:
            cfg = GateConfig(_number(g.get("alpha", cfg.alpha)), int(_number(g.get("min_n", cfg.min_n))),
                             _number(g.get("threshold", cfg.threshold)), {str(k): _number(v) for k, v in per.items()},
                             str(g.get("slower_rule", cfg.slower_rule)), _number(g.get("target", cfg.target)))
        except (TypeError, ValueError, OverflowError) as exc:
            raise BadInput(f"gate config values must be numbers: {exc}", where=str(path)) from None
    for k, v in overrides.items():
        if v is not None:
            setattr(cfg, k, v)
    if not 0 < cfg.alpha < 1:
        raise BadInput(f"alpha must be between 0 and 1, got {cfg.alpha}", where="--alpha")
    if not all(math.isfinite(t) and 0 <= t <= 1e6 for t in [cfg.threshold, *cfg.per_metric.values()]):
        raise BadInput("thresholds must be finite numbers >= 0", where=str(path or "--threshold"),
                       hint="e.g. --threshold 0.05 (a 5% margin)")
    if cfg.slower_rule not in ("margin", "zero"):
        raise BadInput(f"slower_rule must be 'margin' or 'zero', got {cfg.slower_rule!r}", where="--slower-rule")
    if not (math.isfinite(cfg.target) and 0 < cfg.target):
        raise BadInput(f"the target slowdown must be a finite number > 0, got {cfg.target}", where="--target")
    if cfg.min_n < 2:
        raise BadInput(f"min_n must be >= 2, got {cfg.min_n}", where="--min-n")
    return cfg


EXIT_CODES = {"pass": 0, "fail": 1, "refuse": 2, "inconclusive": 3}


@dataclass
class GateOutcome:
    status: str  # pass | fail | refuse | inconclusive
    failures: list
    missing: list
    results: list
    config: GateConfig
    inconclusive: list = field(default_factory=list)
    inconclusive_ok: bool = False

    @property
    def exit_code(self) -> int:
        if self.status == "inconclusive" and self.inconclusive_ok:
            return 0
        return EXIT_CODES[self.status]


def verdict_config(cfg: GateConfig, primary: str = "latency_ms") -> VerdictConfig:
    return VerdictConfig(margin=cfg.threshold, alpha=cfg.alpha, min_samples=cfg.min_n, primary=primary,
                         per_metric=dict(cfg.per_metric), slower_rule=cfg.slower_rule, target=cfg.target)


def _gates(r: Verdict) -> bool:
    return getattr(r, "primary", True)


def decide(results: list, cfg: GateConfig, *, inconclusive_ok: bool = False) -> GateOutcome:
    """fail > refuse > inconclusive > pass, over the gating (primary-metric) groups."""
    gating = [r for r in results if _gates(r)]
    missing = [r for r in gating if r.verdict in ("refused", "not enough data")]
    failures = [r for r in gating if r.verdict == "slower"]
    unsure = [r for r in gating if r.verdict == "inconclusive"]
    status = "fail" if failures else "refuse" if missing else "inconclusive" if unsure else "pass"
    return GateOutcome(status, failures, missing, results, cfg, unsure, inconclusive_ok)


def _fmt(x: float, spec: str = ".2f") -> str:
    return "–" if x != x else format(x, spec)


def _role(r: Verdict) -> str:
    return getattr(r, "role", "gating" if _gates(r) else "secondary metric")


def _ratio_cell(r: Verdict) -> str:
    lo, hi = r.ratio_ci
    if r.ratio != r.ratio:
        return "–"
    ci = f" [{factor(lo)}, {factor(hi)}]" if lo == lo and hi == hi and abs(lo) != float("inf") \
        and abs(hi) != float("inf") else " [no interval]"
    return factor(r.ratio) + ci


def _detects_cell(r: Verdict) -> str:
    d = getattr(r, "detectable", float("nan"))
    if d != d and r.verdict == "refused":
        return "–"
    return "not detectable with this data" if not d == d or d > DETECTABLE_CAP else f"+{d:.0%}"


def next_steps(outcome: GateOutcome) -> list[str]:
    """For an inconclusive gate: what would decide each undecided gating group (the runs needed)."""

    return [f"{group_label(r)}: {runs_needed_words(r)}" for r in outcome.inconclusive if hasattr(r, "runs_needed")]


def markdown(outcome: GateOutcome, baseline: str, candidate: str, *, context: list[str] | tuple = ()) -> str:
    """The summary; ``context``: lines about the sides (a history baseline's runs, window, build,
    drift check and pooled spread), listed under the heading."""

    icon = {"pass": "✅ pass", "fail": "❌ regression", "refuse": "⚠️ not enough data",
            "inconclusive": "❔ inconclusive"}[outcome.status]
    lines = [f"## lbench gate: {icon}", "",
             f"baseline `{baseline}` vs candidate `{candidate}` · equivalence margin ±{outcome.config.threshold:.0%} "
             f"(per metric: {outcome.config.per_metric or 'none'}) · alpha {outcome.config.alpha} · "
             f"slower rule: {outcome.config.slower_rule} · B/A below 1 is faster", ""]
    if context:
        lines += [f"- {x}" for x in context] + [""]
    if outcome.status == "inconclusive":
        lines += ["**Next step** (inconclusive" + (", passed by --inconclusive-ok: not evidence of no slowdown"
                                                   if outcome.inconclusive_ok else "") + "):", ""]
        lines += [f"- {x}" for x in next_steps(outcome)]
        lines += ["", "Rerun with that many runs per side (`lbench ab --max-rounds N`, or more `--baseline` / "
                      "`--candidate` runs, or `--history` runs of the baseline); `lbench gate-plan` sizes the design "
                      "from earlier runs.", ""]
    if outcome.missing:
        lines += ["Too few samples (need at least "
                  f"{outcome.config.min_n} per side): " + "; ".join(f"{group_label(r)} (n={r.n_a}/{r.n_b})"
                                                                     for r in outcome.missing), ""]
    lines += ["| group | votes | runs base/cand | n base/cand | centre base | centre cand | B/A [95% CI] | "
              "detects ≥ | p (Holm) | verdict |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in outcome.results:
        flag = " **FAIL**" if r in outcome.failures else ""
        role = _role(r)
        votes = "yes" if role == "gating" else f"no ({role})"
        lines.append(f"| {group_label(r)} | {votes} | {getattr(r, 'n_runs_a', 1)}/{getattr(r, 'n_runs_b', 1)} | "
                     f"{r.n_a}/{r.n_b} | {quantity(r.median_a, r.metric)} | {quantity(r.median_b, r.metric)} | "
                     f"{_ratio_cell(r)} | {_detects_cell(r)} | {_fmt(r.p_value, '.3g')} | {r.verdict}{flag} |")
    return "\n".join(lines) + "\n"


def junit(outcome: GateOutcome, *, properties: dict[str, str] | None = None,
          context: list[str] | tuple = ()) -> str:
    """One testcase per group; the suite's counts are counted from the testcases written.  A group
    that does not vote (reported group or secondary metric) is a skipped testcase saying so.
    ``properties`` (e.g. a history baseline's run ids) become the suite's <properties>, ``context``
    its <system-out>."""

    suite = ET.Element("testsuite", name="lbench-gate")
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=key, value=value)
    failures = skipped = 0
    for r in outcome.results:
        role = _role(r)
        name = f"{r.regime}.{r.metric}" + ("" if role == "gating" else f" ({role}, does not vote)")
        case = ET.SubElement(suite, "testcase", classname=f"lbench.{r.model}.{r.setting}", name=name)
        words = ratio_words(r.ratio, *r.ratio_ci)
        if r in outcome.failures:
            failures += 1
            f = ET.SubElement(case, "failure", message=f"slower: {words}, Holm p={r.p_value:.3g}")
            f.text = json.dumps(_finite(r.as_dict()))
        elif role != "gating":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{role}, does not vote: {r.verdict}: {words}")
        elif r in outcome.missing:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"not enough data: n={r.n_a}/{r.n_b}")
        elif r in outcome.inconclusive:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"inconclusive: {words}; {runs_needed_words(r)}"
                          if hasattr(r, "runs_needed") else f"inconclusive: {words}")
    if context:
        ET.SubElement(suite, "system-out").text = "\n".join(context)
    suite.set("tests", str(len(outcome.results)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def _finite(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (strict parsers reject them)."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def verdict_json(outcome: GateOutcome, baseline: list[str], candidate: list[str], info: dict) -> str:
    return json.dumps(_finite({
        "status": outcome.status, "exit_code": outcome.exit_code, "baseline": baseline, "candidate": candidate,
        "config": {"alpha": outcome.config.alpha, "min_n": outcome.config.min_n,
                   "threshold": outcome.config.threshold, "per_metric": outcome.config.per_metric,
                   "slower_rule": outcome.config.slower_rule, "target": outcome.config.target},
        "failures": [r.key() for r in outcome.failures], "missing": [r.key() for r in outcome.missing],
        "inconclusive": [r.key() for r in outcome.inconclusive], "next_steps": next_steps(outcome),
        "groups": [r.as_dict() for r in outcome.results], "info": info,
    }), indent=2, default=str)
