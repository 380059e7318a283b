"""Claim specs and the verdict logic, on recorded figures."""

from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.repro.claims import (CONTRADICTED, ERROR, HOLDS, NOT_CHECKABLE, ClaimSpec, Requirement, gate, judge,
                                  load_claim, load_claims)


def spec(*checks, requires=(), scenario="storm"):
    return ClaimSpec("c", "text", {"seed": "s", "statement": "t"}, scenario, requires=list(requires),
                     check=list(checks))


def test_holds_and_contradicted_on_recorded_figures():
    s = spec(Requirement("peak_children", "<=", ref="models_max"), Requirement("evictions", ">=", 10))
    verdict, reason = judge(s, {"peak_children": 2, "models_max": 2, "evictions": 28})
    assert verdict == HOLDS and "peak_children=2 <= 2" in reason
    verdict, reason = judge(s, {"peak_children": 3, "models_max": 2, "evictions": 28})
    assert verdict == CONTRADICTED and "expected peak_children <= models_max, measured peak_children=3" in reason


def test_missing_or_incomparable_figures_are_errors():
    s = spec(Requirement("x", "==", True))
    assert judge(s, {})[0] == ERROR
    assert judge(spec(Requirement("x", "<", 1)), {"x": "text"})[0] == ERROR
    assert judge(spec(), {"x": 1})[0] == NOT_CHECKABLE


def test_gate_by_platform_and_engine():
    assert gate(spec(requires=["metal"]), "cpu").startswith("needs macOS on Apple Silicon")
    assert gate(spec(requires=["cuda"]), "cpu").startswith("needs a CUDA build")
    assert gate(spec(requires=["not-metal"]), "cpu") is None
    assert gate(spec(scenario="none"), "cpu") == "no experiment for this claim can run on this engine yet"


def test_every_shipped_claim_loads_and_covers_the_seeds():
    claims = load_claims()
    assert len(claims) >= 20
    seeds = {c.source["seed"] for c in claims if "seed" in c.source}
    assert seeds == {"000_8a4f772c82ebbd36.txt", "001_8426f1ffeedb81e7.txt", "002_2cb27210bd1007e6.txt"}
    assert all(c.claim and c.source["statement"] for c in claims)
    shared = Path(__file__).resolve().parents[3] / "shared"
    if shared.is_dir():  # each statement is quoted from its source
        for c in claims:
            doc = shared / "seeds" / c.source["seed"] if "seed" in c.source else shared / c.source["document"]
            text = doc.read_text()
            words = [w for w in c.source["statement"].replace("`", "").split() if len(w) > 6][:3]
            assert all(w.strip('".,()') in text.replace("`", "") for w in words), c.id


def test_bad_specs(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "nope"\n')
    with pytest.raises(BadInput, match="unknown scenario 'nope'"):
        load_claim(f)
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "storm"\n'
                 '[[check]]\nfigure = "a"\nop = "~"\nvalue = 1\n')
    with pytest.raises(BadInput, match="bad check"):
        load_claim(f)
    with pytest.raises(BadInput, match="unknown claim 'zzz'"):
        load_claims(["zzz"])
