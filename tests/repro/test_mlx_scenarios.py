"""MLX wiring claims: parsers on real published output where one exists, judges on their inputs
and negations. No Mac has run lbench's MLX probe, so there is no recording of its JSON lines and
no published `[residency]` line: `generate_figures` and `residency_sets` are untested on real
output until a Mac run (docs/mac.md, "MLX parsers")."""

import pytest

from harness.repro.claims import CONTRADICTED, HOLDS, gate_cause, judge, load_claims
from harness.engines.mlx_output import residency_sets, wired_limit_warnings
from harness.repro.mlx_scenarios import (expected_set_mb, generate_figures, probe_records,
                                         server_wiring_figures, warning_figures)

SPECS = {c.id: c for c in load_claims()}

# mlx-lm's wired-limit warning as `mlx_lm.generate --model mlx-community/DeepSeek-R1-Distill-Qwen-32B-3bit
# --prompt "hello"` printed it on a 16 GB M1 Mac mini, quoted in a public notes file ("# mlx-lm", section
# "TOO BIG"). Found by exact-text search of the public code index (find_string "MB which is close to the
# maximum recommended size"), which returns the file's text but not its repository, so only the text can
# be named here. mlx-lm's current URL (mlx-lm/tree/main#large-models).
REAL_WARNING = ("[WARNING] Generating with a model that requires 13671 MB which is close to the maximum "
                "recommended size of 10922 MB. This can be slow. See the documentation for possible "
                "work-arounds: https://github.com/ml-explore/mlx-lm/tree/main#large-models")
# The same warning from an older mlx-lm (mlx-examples URL), in another public notes file found by the same
# search (a comment line "#[WARNING] ..." under "# Ex: error when out of RAM", section "Huggingface", quoted
# here without the leading "#"); repository not returned by the index either.
REAL_WARNING_OLD = ("[WARNING] Generating with a model that requires 134570 MB which is close to the maximum "
                    "recommended size of 98304 MB. This can be slow. See the documentation for possible "
                    "work-arounds: https://github.com/ml-explore/mlx-examples/tree/main/llms#large-models")


def test_the_real_wired_limit_warning_lines_parse():
    assert wired_limit_warnings(REAL_WARNING) == [(13671, 10922)]
    assert wired_limit_warnings(REAL_WARNING_OLD) == [(134570, 98304)]
    assert wired_limit_warnings(REAL_WARNING + "\n" + REAL_WARNING_OLD) == [(13671, 10922), (134570, 98304)]
    assert wired_limit_warnings("nothing here") == []


def test_probe_records_keep_plain_lines():
    # the warning arrives on the probe's stdout around its JSON lines; a line that is not JSON is kept as text
    assert probe_records('{"event": "x"}\n' + REAL_WARNING + "\n") == [
        {"event": "x"}, {"event": "stdout", "text": REAL_WARNING}]


def test_expected_set_size_arithmetic():
    # ResidencySets' size rule (mlx/backend/metal/resident.cpp): pct % of the recommended working set,
    # at least 64 MiB; 0 (one set) for pct <= 0 or >= 100. Round inputs, arithmetic only.
    assert expected_set_mb(10_000 << 20) == 500  # 5 % of 10,000 MiB
    assert expected_set_mb(100 << 20) == 64  # the 64 MiB floor
    assert expected_set_mb(10_000 << 20, pct=0) == 0 and expected_set_mb(10_000 << 20, pct=100) == 0
    assert residency_sets(REAL_WARNING) == []  # no residency line in other real output


def test_wired_limit_warning_claim_on_the_real_line_and_its_negations():
    # The probe's records (harness/repro/mlx_probe.py, `warning`) carry what wired_limit() printed for a
    # stand-in above and one below 0.9 x; here "above" carries the real line, "below" nothing. No device
    # record: no Mac run recorded max_recommended_working_set_size, so the warning cannot be matched to it.
    spec = SPECS["mlx-wired-limit-warning"]
    records = [{"event": "wired_limit", "case": "above", "printed": REAL_WARNING + "\n"},
               {"event": "wired_limit", "case": "below", "printed": ""}]
    figures = warning_figures(records)
    assert figures["warned_above"] and not figures["warned_below"]
    assert figures["warning_recommended_mb"] == 10922 and figures["warning_model_mb"] == 13671
    assert figures["recommended_mb"] is None and figures["warning_names_recommended"] is False
    assert judge(spec, figures)[0] != HOLDS  # the size check cannot pass without the device's figure
    # judge input, not a recording: the same figures with the device check passing
    assert judge(spec, {**figures, "warning_names_recommended": True})[0] == HOLDS
    always = [{**r, "printed": REAL_WARNING} for r in records]  # threshold < 0.85
    assert judge(spec, {**warning_figures(always), "warning_names_recommended": True})[0] == CONTRADICTED
    never = [{**r, "printed": ""} for r in records]  # threshold > 0.95
    assert judge(spec, {**warning_figures(never), "warning_names_recommended": True})[0] == CONTRADICTED


def test_generate_wiring_judge_on_its_inputs():
    # Decision test only: the records follow mlx_probe.py's `generate` output (prev_limit is what
    # mx.set_wired_limit(0) returned); no Mac run has recorded one, so the byte counts are symbols, not data.
    spec = SPECS["mlx-generate-wires-for-the-call"]
    rec = 1 << 30
    records = [{"event": "loaded", "recommended_bytes": rec}, {"event": "after_generate", "prev_limit": 0},
               {"event": "after_server_call", "prev_limit": rec}]
    figures = generate_figures(records)
    assert figures["generate_restored"] and figures["server_call_kept"]
    assert judge(spec, figures)[0] == HOLDS
    kept = [{**r, "prev_limit": rec} if r["event"] == "after_generate" else r for r in records]
    verdict, reason = judge(spec, generate_figures(kept))  # generate() that keeps the limit, like the server
    assert verdict == CONTRADICTED and f"was {rec}, expected 0" in reason


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


def test_residency_debug_judge_on_its_inputs():
    # Decision test only: no published `[residency] created residency set` line exists (the public code
    # index holds the format string in mlx/backend/metal/resident.cpp, no output), so residency_sets() is
    # untested on real output; these are the judge's inputs for one set of 500 MB, and the negations.
    spec = SPECS["mlx-residency-debug-lines"]
    figures = {"residency_lines": 1, "first_set": 0, "max_bytes_per_set_mb": 500,
               "expected_set_mb": expected_set_mb(10_000 << 20)}
    assert judge(spec, figures)[0] == HOLDS
    silent = {"residency_lines": 0, "first_set": -1, "max_bytes_per_set_mb": -1, "expected_set_mb": 500}
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
