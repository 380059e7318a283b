"""Scenario names -> (function, parameter class): the one place a claim spec's ``scenario`` and
``[params]`` are looked up.

Each scenario module declares its scenarios with ``@scenario(name, ParamsClass)`` or
``@router_scenario(name, ParamsClass, ...)`` (harness.repro.base); this module imports the
modules and collects them.  ``SCENARIOS[name]`` is a ``Scenario``: called
as ``scenario(ctx, raw_params)`` it validates the raw TOML table into the parameter class
(``BadInput`` on a wrong name or type) and runs the function.  Adding a scenario: write the
function and its ``Params`` dataclass in a scenario module under one of those decorators; add
the module to ``MODULES`` if it is new.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.repro.base import DECLARED, Context, Evidence, Inconclusive, Params

MODULES = ("harness.repro.router_scenarios", "harness.repro.victim_scenarios", "harness.repro.order_scenarios",
           "harness.repro.idle_scenarios", "harness.repro.ollama_scenarios", "harness.repro.metal_scenarios",
           "harness.repro.mlx_scenarios")


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Context, Params], Evidence]
    params: type[Params]
    module: str

    def validate(self, raw: Mapping[str, object], where: str = "params") -> Params:
        return self.params.from_toml(raw, where)

    def __call__(self, ctx: Context, raw: Mapping[str, object] | Params) -> Evidence:
        params = raw if isinstance(raw, Params) else self.validate(raw)
        return self.run(ctx, params)


def _collect() -> dict[str, Scenario]:
    for name in MODULES:
        importlib.import_module(name)
    return {scenario: Scenario(scenario, fn, params, module) for scenario, (fn, params, module) in DECLARED.items()}


SCENARIOS: dict[str, Scenario] = _collect()

__all__ = ["SCENARIOS", "Scenario", "Context", "Evidence", "Inconclusive"]
