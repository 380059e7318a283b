"""The regression gate over run-as-unit verdicts (harness.analysis.verdicts, docs/statistics.md).

Exit codes: 0 pass (every gating group ``no change`` or ``faster``), 1 regression (a gating group
``slower`` after Holm, which covers a new or earlier wake step in the candidate), 2 bad input or a
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

from harness.analysis.gate_config import GateConfig  # defined there (light), used and re-exported here
from harness.errors import BadInput


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def load_config(path: Path | None, **overrides) -> GateConfig:
    cfg = GateConfig()
    if path is not None:
        from harness.toml_input import read_toml

        data = read_toml(Path(path), "gate config")
        g, per = data.get("gate", {}), data.get("thresholds", {})
        if not isinstance(g, dict) or not isinstance(per, dict):
            raise BadInput("[gate] and [thresholds] must be tables", where=str(path))
        try:
            cfg = GateConfig(_number(g.get("alpha", cfg.alpha)), int(_number(g.get("min_n", cfg.min_n))),
                             _number(g.get("threshold", cfg.threshold)), {str(k): _number(v) for k, v in per.items()})
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


def verdict_config(cfg: GateConfig, primary: str = "latency_ms"):
    from harness.analysis.verdicts import VerdictConfig

    return VerdictConfig(margin=cfg.threshold, alpha=cfg.alpha, min_samples=cfg.min_n, primary=primary,
                         per_metric=dict(cfg.per_metric))


def _gates(r) -> bool:
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


def markdown(outcome: GateOutcome, baseline: str, candidate: str) -> str:
    from harness.analysis.verdict_labels import group_label
    from harness.analysis.verdicts import quantity

    icon = {"pass": "✅ pass", "fail": "❌ regression", "refuse": "⚠️ not enough data",
            "inconclusive": "❔ inconclusive"}[outcome.status]
    lines = [f"## lbench gate: {icon}", "",
             f"baseline `{baseline}` vs candidate `{candidate}` · equivalence margin ±{outcome.config.threshold:.0%} "
             f"(per metric: {outcome.config.per_metric or 'none'}) · alpha {outcome.config.alpha}", ""]
    if outcome.missing:
        lines += ["Too few samples (need at least "
                  f"{outcome.config.min_n} per side): " + "; ".join(f"{group_label(r)} (n={r.n_a}/{r.n_b})"
                                                                     for r in outcome.missing), ""]
    lines += ["| group | runs base/cand | n base/cand | centre base | centre cand | ratio [95% CI] | "
              "detects ≥ | p (Holm) | verdict |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in outcome.results:
        flag = " **FAIL**" if r in outcome.failures else "" if _gates(r) else " (secondary)"
        lines.append(f"| {group_label(r)} | {getattr(r, 'n_runs_a', 1)}/{getattr(r, 'n_runs_b', 1)} | {r.n_a}/{r.n_b} | "
                     f"{quantity(r.median_a, r.metric)} | {quantity(r.median_b, r.metric)} | "
                     f"{_fmt(r.ratio, '.3f')} [{_fmt(r.ratio_ci[0], '.3f')}, {_fmt(r.ratio_ci[1], '.3f')}] | "
                     f"{_fmt(getattr(r, 'detectable', float('nan')), '.0%')} | {_fmt(r.p_value, '.3g')} | "
                     f"{r.verdict}{flag} |")
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
        elif r in outcome.inconclusive:
            ET.SubElement(case, "skipped", message=f"inconclusive: ratio {r.ratio:.3f} "
                                                   f"[{r.ratio_ci[0]:.3f}, {r.ratio_ci[1]:.3f}]")
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="unicode", xml_declaration=True)


def verdict_json(outcome: GateOutcome, baseline: list[str], candidate: list[str], info: dict) -> str:
    return json.dumps({
        "status": outcome.status, "exit_code": outcome.exit_code, "baseline": baseline, "candidate": candidate,
        "config": {"alpha": outcome.config.alpha, "min_n": outcome.config.min_n,
                   "threshold": outcome.config.threshold, "per_metric": outcome.config.per_metric},
        "failures": [r.key() for r in outcome.failures], "missing": [r.key() for r in outcome.missing],
        "inconclusive": [r.key() for r in outcome.inconclusive],
        "groups": [r.as_dict() for r in outcome.results], "info": info,
    }, indent=2, default=str)
