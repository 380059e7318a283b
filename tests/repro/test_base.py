"""Typed scenario parameters and evidence tables in the store's schema (harness/repro/base.py)."""

from dataclasses import dataclass, field

import pandas as pd
import pytest

from harness.errors import BadInput
from harness.repro.base import ModelsParams, Params, RouterParams, write_evidence_table
from harness.schema import TABLES


@dataclass(frozen=True)
class Example(Params):
    models: list[str]
    k: int = 4
    margin: float = 0.1
    note: str | None = None
    reserved: dict[str, str] = field(default_factory=dict)


def test_shared_params_bases_keep_models_first_and_the_long_generation_default():
    @dataclass(frozen=True)
    class Knob(ModelsParams):
        hold_s: float = 3.0

    assert Knob.from_toml({"models": ["a"], "hold_s": 1}) == Knob(["a"], 1.0)
    with pytest.raises(BadInput, match="models"):
        Knob.from_toml({"hold_s": 1})  # models has no default
    assert RouterParams().long_n() == 4000 and RouterParams().long_n(6000) == 6000
    assert RouterParams(n_predict=50).long_n(6000) == 50


def test_params_are_checked_by_name_and_type():
    p = Example.from_toml({"models": ["a", "b"], "margin": 1, "reserved": {"X": "1"}})
    assert p.models == ["a", "b"] and p.k == 4 and p.margin == 1.0 and isinstance(p.margin, float)
    assert p.note is None and not hasattr(p, "get")  # fields only: no dict-style reads
    with pytest.raises(BadInput, match=r"params.k has the wrong type: it must be an integer, not 'four'"):
        Example.from_toml({"models": ["a"], "k": "four"})
    with pytest.raises(BadInput, match=r"params.k has the wrong type: it must be an integer, not True"):
        Example.from_toml({"models": ["a"], "k": True})
    with pytest.raises(BadInput, match=r"params.models has the wrong type: params.models\[1\] must be a string, not 3"):
        Example.from_toml({"models": ["a", 3]})
    with pytest.raises(BadInput, match="unknown parameter\\(s\\) modles") as exc:
        Example.from_toml({"modles": ["a"]})
    assert "known: models, k, margin, note, reserved" in str(exc.value)
    with pytest.raises(BadInput, match="missing parameter\\(s\\) models"):
        Example.from_toml({})


def test_a_shipped_spec_with_a_bad_param_type_is_bad_input(tmp_path):
    from harness.repro.claims import load_claim

    f = tmp_path / "x.toml"
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "same-model-burst"\n'
                 '[params]\nmodels = ["tiny-q8", "tiny-q4"]\nk = "4"\n')
    with pytest.raises(BadInput, match="params.k has the wrong type: it must be an integer") as exc:
        load_claim(f)
    assert exc.value.exit_code == 2
    assert "[params]" in str(exc.value)


def test_evidence_tables_are_written_in_the_schema(tmp_path):
    claim_dir = tmp_path / "20261201T000000Z-repro-abcd" / "claims" / "router-cap"
    claim_dir.mkdir(parents=True)
    events = pd.DataFrame([{"t_s": 0.1, "source": "router", "kind": "spawn", "model": "a", "detail": {"port": 1},
                            "text": "spawning"}])
    out = write_evidence_table(events, claim_dir, "events")
    assert out.name == "events.parquet"
    back = pd.read_parquet(out)
    assert list(back.columns)[:len(TABLES["events"].columns)] == list(TABLES["events"].columns)
    assert back.loc[0, "run_id"] == "20261201T000000Z-repro-abcd" and back.loc[0, "detail"] == '{"port": 1}'
    memory = write_evidence_table(pd.DataFrame([{"t_s": 0.2, "children_alive": 2, "rss_total_bytes": 10}]),
                                  claim_dir, "memory")
    mem = pd.read_parquet(memory)
    assert mem.loc[0, "children_alive"] == 2 and "rss_router_bytes" in mem.columns  # schema columns added
    with pytest.raises(ValueError):
        write_evidence_table(events, claim_dir, "verdicts")
