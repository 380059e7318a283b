"""The regression gate: fail only when a slowdown is both practically large and
statistically clear; refuse to judge with too few samples.

A group *fails* when: ratio > 1 + threshold(metric), the ratio's 95% interval
lies above 1, and Mann-Whitney p < alpha.  Thresholds default to 10% and can be
set per metric in a TOML file::

    [gate]
    alpha = 0.05
    min_n = 5
    threshold = 0.10
    [thresholds]
    server_prompt_ms = 0.15
"""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis.compare import GroupResult
from harness.errors import BadInput


@dataclass
class GateConfig:
    alpha: float = 0.05
    min_n: int = 5
    threshold: float = 0.10
    per_metric: dict[str, float] = field(default_factory=dict)

    def threshold_for(self, metric: str) -> float:
        return self.per_metric.get(metric, self.threshold)


def load_config(path: Path | None, **overrides) -> GateConfig:
    cfg = GateConfig()
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise BadInput(f"cannot read gate config: {exc}", where=str(path)) from None
        g = data.get("gate", {})
        cfg = GateConfig(float(g.get("alpha", cfg.alpha)), int(g.get("min_n", cfg.min_n)),
                         float(g.get("threshold", cfg.threshold)),
                         {k: float(v) for k, v in data.get("thresholds", {}).items()})
    for k, v in overrides.items():
        if v is not None:
            setattr(cfg, k, v)
    if not 0 < cfg.alpha < 1:
        raise BadInput(f"alpha must be between 0 and 1, got {cfg.alpha}", where="--alpha")
    if cfg.threshold < 0 or any(t < 0 for t in cfg.per_metric.values()):
        raise BadInput("thresholds must be >= 0", where=str(path or "--threshold"))
    if cfg.min_n < 2:
        raise BadInput(f"min_n must be >= 2, got {cfg.min_n}", where="--min-n")
    return cfg


@dataclass
class GateOutcome:
    status: str  # pass | fail | refuse
    failures: list[GroupResult]
    missing: list[GroupResult]
    results: list[GroupResult]
    config: GateConfig

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1, "refuse": 2}[self.status]


def is_regression(r: GroupResult, cfg: GateConfig) -> bool:
    return (r.verdict == "slower" and r.ratio > 1 + cfg.threshold_for(r.metric) and r.ratio_ci[0] > 1
            and r.p_value < cfg.alpha)


def decide(results: list[GroupResult], cfg: GateConfig) -> GateOutcome:
    missing = [r for r in results if r.verdict == "not enough data"]
    failures = [r for r in results if is_regression(r, cfg)]
    status = "refuse" if missing else ("fail" if failures else "pass")
    return GateOutcome(status, failures, missing, results, cfg)


def _fmt(x: float, spec: str = ".2f") -> str:
    return "–" if x != x else format(x, spec)


def markdown(outcome: GateOutcome, baseline: str, candidate: str) -> str:
    icon = {"pass": "✅ pass", "fail": "❌ regression", "refuse": "⚠️ not enough data"}[outcome.status]
    lines = [f"## lbench gate: {icon}", "",
             f"baseline `{baseline}` vs candidate `{candidate}` · threshold {outcome.config.threshold:.0%} "
             f"(per metric: {outcome.config.per_metric or 'none'}) · alpha {outcome.config.alpha}", ""]
    if outcome.missing:
        lines += ["Too few samples (need at least "
                  f"{outcome.config.min_n} per side): " + "; ".join(f"{r.key()} (n={r.n_a}/{r.n_b})"
                                                                     for r in outcome.missing), ""]
    lines += ["| group | n base/cand | median base | median cand | ratio [95% CI] | HL shift | p | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for r in outcome.results:
        flag = " **FAIL**" if r in outcome.failures else ""
        lines.append(f"| {r.key()} | {r.n_a}/{r.n_b} | {_fmt(r.median_a)} | {_fmt(r.median_b)} | "
                     f"{_fmt(r.ratio, '.3f')} [{_fmt(r.ratio_ci[0], '.3f')}, {_fmt(r.ratio_ci[1], '.3f')}] | "
                     f"{_fmt(r.hl_shift)} | {_fmt(r.p_value, '.3g')} | {r.verdict}{flag} |")
    return "\n".join(lines) + "\n"


def junit(outcome: GateOutcome) -> str:
    suite = ET.Element("testsuite", name="lbench-gate", tests=str(len(outcome.results)),
                       failures=str(len(outcome.failures)), skipped=str(len(outcome.missing)))
    for r in outcome.results:
        case = ET.SubElement(suite, "testcase", classname=f"lbench.{r.model}.{r.setting}", name=f"{r.regime}.{r.metric}")
        if r in outcome.failures:
            f = ET.SubElement(case, "failure", message=f"slower: ratio {r.ratio:.3f} "
                                                       f"[{r.ratio_ci[0]:.3f}, {r.ratio_ci[1]:.3f}], p={r.p_value:.3g}")
            f.text = json.dumps(r.as_dict())
        elif r in outcome.missing:
            ET.SubElement(case, "skipped", message=f"not enough data: n={r.n_a}/{r.n_b}")
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="unicode", xml_declaration=True)


def verdict_json(outcome: GateOutcome, baseline: list[str], candidate: list[str], info: dict) -> str:
    return json.dumps({
        "status": outcome.status, "exit_code": outcome.exit_code, "baseline": baseline, "candidate": candidate,
        "config": {"alpha": outcome.config.alpha, "min_n": outcome.config.min_n,
                   "threshold": outcome.config.threshold, "per_metric": outcome.config.per_metric},
        "failures": [r.key() for r in outcome.failures], "missing": [r.key() for r in outcome.missing],
        "groups": [r.as_dict() for r in outcome.results], "info": info,
    }, indent=2, default=str)
