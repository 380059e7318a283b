"""MLX wiring claims: parsers and judges on recorded outputs (tests/fixtures/mlx/, in the
formats of mlx-lm's and MLX's own messages) and on their negations."""

from pathlib import Path

import pytest

from harness.repro.claims import CONTRADICTED, HOLDS, gate_cause, judge, load_claims
from harness.repro.mlx_scenarios import (expected_set_mb, generate_figures, probe_records, residency_sets,
                                         server_wiring_figures, warning_figures, wired_limit_warnings)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mlx"
SPECS = {c.id: c for c in load_claims()}


def test_warning_and_residency_lines_parse():
    records = probe_records((FIXTURES / "probe_warning.jsonl").read_text())
    above = next(r for r in records if r.get("case") == "above")
    assert wired_limit_warnings(above["printed"]) == [(20753, 21845)]
    assert wired_limit_warnings("nothing here") == []
    log = (FIXTURES / "server_residency_debug.log").read_text()
    assert residency_sets(log) == [(0, 1092), (1, 1092)]
    assert expected_set_mb(22906503168) == 1092
    assert expected_set_mb(100 << 20) == 64  # the 64 MiB floor
    assert expected_set_mb(22906503168, pct=0) == 0 and expected_set_mb(22906503168, pct=100) == 0
    assert probe_records('{"event": "x"}\nplain text\n') == [{"event": "x"}, {"event": "stdout", "text": "plain text"}]


def test_wired_limit_warning_claim_on_the_recording_and_its_negations():
    spec = SPECS["mlx-wired-limit-warning"]
    records = probe_records((FIXTURES / "probe_warning.jsonl").read_text())
    figures = warning_figures(records)
    assert figures["warned_above"] and not figures["warned_below"] and figures["warning_recommended_mb"] == 21845
    assert judge(spec, figures)[0] == HOLDS, judge(spec, figures)[1]
    above_printed = next(r for r in records if r.get("case") == "above")["printed"]
    always = [r if r.get("case") != "below" else {**r, "printed": above_printed} for r in records]  # threshold < 0.85
    assert judge(spec, warning_figures(always))[0] == CONTRADICTED
    never = [r if r.get("case") != "above" else {**r, "printed": ""} for r in records]  # threshold > 0.95
    assert judge(spec, warning_figures(never))[0] == CONTRADICTED


def test_generate_wiring_claim_on_the_recording_and_its_negation():
    spec = SPECS["mlx-generate-wires-for-the-call"]
    records = probe_records((FIXTURES / "probe_generate.jsonl").read_text())
    figures = generate_figures(records)
    assert figures["generate_restored"] and figures["server_call_kept"]
    assert judge(spec, figures)[0] == HOLDS
    kept = [{**r, "prev_limit": 22906503168} if r["event"] == "after_generate" else r for r in records]
    verdict, reason = judge(spec, generate_figures(kept))  # generate() that keeps the limit, like the server
    assert verdict == CONTRADICTED and "was 22906503168, expected 0" in reason


def test_server_wiring_claim_and_its_negations():
    spec = SPECS["mlx-server-wires-until-exit"]
    gb = 1 << 30
    rule = server_wiring_figures({"before": 3 * gb, "loaded": 5 * gb, "idle": 5 * gb, "exited": 3 * gb}, 2 * gb)
    assert judge(spec, rule)[0] == HOLDS
    like_one_shot = server_wiring_figures({"before": 3 * gb, "loaded": 5 * gb, "idle": 3 * gb, "exited": 3 * gb},
                                          2 * gb)  # unwired between requests
    assert judge(spec, like_one_shot)[0] == CONTRADICTED
    kept_after_exit = server_wiring_figures({"before": 3 * gb, "loaded": 5 * gb, "idle": 5 * gb, "exited": 5 * gb},
                                            2 * gb)
    assert judge(spec, kept_after_exit)[0] == CONTRADICTED
    assert server_wiring_figures({"before": None, "idle": 1, "exited": 1}, 1) == {"wired_measured": False}


def test_residency_debug_claim_on_the_recording_and_its_negation():
    spec = SPECS["mlx-residency-debug-lines"]
    sets = residency_sets((FIXTURES / "server_residency_debug.log").read_text())
    figures = {"residency_lines": len(sets), "first_set": sets[0][0], "max_bytes_per_set_mb": sets[0][1],
               "expected_set_mb": expected_set_mb(22906503168)}
    assert judge(spec, figures)[0] == HOLDS
    silent = {"residency_lines": 0, "first_set": -1, "max_bytes_per_set_mb": -1, "expected_set_mb": 1092}
    assert judge(spec, silent)[0] == CONTRADICTED
    one_set = {**figures, "max_bytes_per_set_mb": 0}  # MLX_RESIDENCY_SET_MAX_PCT ignored or >= 100
    assert judge(spec, one_set)[0] == CONTRADICTED


@pytest.mark.parametrize("claim_id", ["mlx-wired-limit-warning", "mlx-generate-wires-for-the-call",
                                      "mlx-server-wires-until-exit", "mlx-residency-debug-lines"])
def test_mlx_claims_are_not_checkable_without_mlx_on_metal(claim_id, monkeypatch):
    import harness.repro.claims as claims_mod

    claims_mod._mlx_metal.cache_clear()
    monkeypatch.setattr(claims_mod, "_mlx_metal", lambda: (False, "needs mlx with Metal on Apple Silicon; this host: "
                                                                  "Linux x86_64"))
    cause, sentence = gate_cause(SPECS[claim_id], "cpu")
    assert cause == "platform" and sentence.startswith("platform lacks mlx: needs mlx with Metal")


def test_the_real_wired_limit_warning_line_parses():
    # mlx-lm's warning as printed on a Mac, quoted in a public notes file (found by code search):
    real = ("[WARNING] Generating with a model that requires 134570 MB which is close to the maximum recommended "
            "size of 98304 MB. This can be slow. See the documentation for possible work-arounds: "
            "https://github.com/ml-explore/mlx-examples/tree/main/llms#large-models")
    assert wired_limit_warnings(real) == [(134570, 98304)]


def test_residency_lines_need_mlx_0_32_1():
    # mlx/backend/metal/resident.cpp prints "[residency] created residency set" from v0.32.1 (audit row 10c)
    from harness.repro.mlx_scenarios import residency_lines_possible

    assert not residency_lines_possible("0.31.0") and not residency_lines_possible("0.32.0")
    assert residency_lines_possible("0.32.1") and residency_lines_possible("0.33.0.dev20261201")


def test_a_model_that_is_not_a_local_directory_is_inconclusive(tmp_path):
    from harness.repro.base import Inconclusive
    from harness.repro.mlx_scenarios import _model_bytes

    with pytest.raises(Inconclusive, match="not a local MLX model directory"):
        _model_bytes("mlx-community/Llama-3.2-1B-Instruct-4bit")
    with pytest.raises(Inconclusive):
        _model_bytes(str(tmp_path))  # a folder without weights
