"""The gate's settings (a plain dataclass, light to import: the CLI reads its defaults for help texts)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GateConfig:
    alpha: float = 0.05
    min_n: int = 5
    threshold: float = 0.05  # equivalence margin
    per_metric: dict[str, float] = field(default_factory=dict)

    def threshold_for(self, metric: str) -> float:
        return self.per_metric.get(metric, self.threshold)
