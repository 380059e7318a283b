"""The scenario registry: every spec's scenario is registered with a parameter class, the
scenario modules import the base only, and a call validates its parameters."""

import ast
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.repro.base import Params
from harness.repro.claims import load_claims
from harness.repro.registry import MODULES, SCENARIOS

REPRO = Path(__file__).resolve().parents[2] / "harness" / "repro"


def test_every_spec_names_a_registered_scenario_whose_params_validate():
    for spec in load_claims():
        scenario = SCENARIOS[spec.scenario]
        assert issubclass(scenario.params, Params)
        assert isinstance(scenario.validate(spec.params), scenario.params), spec.id


def test_scenario_modules_import_the_base_not_the_registry():
    for name in MODULES:
        tree = ast.parse((REPRO / f"{name.rsplit('.', 1)[1]}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert "harness.repro.registry" not in imported and "harness.repro.scenarios" not in imported, name


def test_calling_a_scenario_validates_its_params_first():
    with pytest.raises(BadInput, match="params.k has the wrong type: it must be an integer"):
        SCENARIOS["same-model-burst"](None, {"models": ["a", "b"], "k": "many"})


def test_the_repro_modules_import_one_another_without_a_circle():
    """Counting imports inside functions and type-only ones (the old module ``__getattr__`` of
    lab.py closed a circle through recipe.py and claims.py)."""
    imports = {}
    for path in REPRO.glob("*.py"):
        tree = ast.parse(path.read_text())
        imports[f"harness.repro.{path.stem}"] = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                                                 and n.module and n.module.startswith("harness.repro.")}

    def reaches(start: str, node: str, seen: set[str]) -> bool:
        for nxt in imports.get(node, ()):
            if nxt == start or (nxt not in seen and reaches(start, nxt, seen | {nxt})):
                return True
        return False

    assert [m for m in imports if reaches(m, m, {m})] == []
