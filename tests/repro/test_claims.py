"""Claim specs and the verdict logic, on recorded figures."""

import re
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.repro.claims import (CONTRADICTED, ERROR, HOLDS, INCONCLUSIVE, NOT_CHECKABLE, ClaimSpec, Requirement,
                                  gate, gate_cause, interval, judge, judge_repeats, load_claim, load_claims,
                                  summarize_repeats)


def spec(*checks, requires=(), scenario="storm"):
    return ClaimSpec("c", "text", {"seed": "s", "statement": "t"}, scenario, requires=list(requires),
                     check=list(checks))


def test_holds_and_contradicted_on_recorded_figures():
    s = spec(Requirement("peak_children", "<=", ref="models_max"), Requirement("evictions", ">=", 10))
    verdict, reason = judge(s, {"peak_children": 2, "models_max": 2, "evictions": 28})
    assert verdict == HOLDS and "peak_children was 2, expected at most 2 (models_max): met" in reason
    verdict, reason = judge(s, {"peak_children": 3, "models_max": 2, "evictions": 28})
    assert verdict == CONTRADICTED and "peak_children was 3, expected at most 2 (models_max): NOT met" in reason


def test_every_check_is_evaluated_after_a_failure():
    s = spec(Requirement("a", "==", True, says="the child was killed"), Requirement("b", "<=", 1.0))
    verdict, reason = judge(s, {"a": False, "b": 5.0})
    assert verdict == CONTRADICTED
    assert "the child was killed (a) was no, expected yes: NOT met" in reason
    assert "b was 5, expected at most 1: NOT met" in reason  # the second check still ran


def test_repetitions_decide_holds_contradicted_or_inconclusive():
    s = spec(Requirement("error_s", "<=", 1.0))
    assert judge_repeats(s, [{"error_s": 0.1}, {"error_s": 0.2}, {"error_s": 0.05}])[0] == HOLDS
    assert judge_repeats(s, [{"error_s": 3.0}, {"error_s": 2.0}, {"error_s": 4.0}])[0] == CONTRADICTED
    verdict, reason = judge_repeats(s, [{"error_s": 0.1}, {"error_s": 2.0}, {"error_s": 0.2}])
    assert verdict == INCONCLUSIVE and "met in 2 of 3 repetitions" in reason and "95% interval" in reason
    merged = summarize_repeats([{"error_s": 1.0}, {"error_s": 2.0}, {"error_s": 3.0}])
    assert merged["error_s_reps"] == [1.0, 2.0, 3.0] and merged["error_s_ci"][0] == pytest.approx(2.0)
    mean, lo, hi = interval([1.0, 2.0, 3.0])
    assert lo < mean < hi and hi - lo == pytest.approx(2 * 4.302653 * 1.0 / 3 ** 0.5, rel=1e-4)
    assert interval([1.0]) is None


def test_timing_specs_repeat_three_times_by_default(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "storm"\n'
                 'timing = true\n[params]\nmodels = ["tiny-q8"]\n')
    assert load_claim(f).repeat == 3
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "storm"\n'
                 '[params]\nmodels = ["tiny-q8"]\n')
    assert load_claim(f).repeat == 1
    f.write_text('id = "x"\nclaim = "c"\nsource = {seed = "s", statement = "t"}\nscenario = "storm"\n'
                 'engine = "vllm"\n')
    with pytest.raises(BadInput, match="unknown engine 'vllm'"):
        load_claim(f)


def test_missing_or_incomparable_figures_are_errors():
    s = spec(Requirement("x", "==", True))
    assert judge(s, {})[0] == ERROR
    assert judge(spec(Requirement("x", "<", 1)), {"x": "text"})[0] == ERROR
    assert judge(spec(), {"x": 1})[0] == NOT_CHECKABLE


def test_gate_by_platform_and_engine(monkeypatch):
    import harness.repro.claims as claims_mod

    monkeypatch.setattr(claims_mod, "_ollama_reachable", lambda: False)
    assert gate(spec(requires=["metal"]), "cpu").startswith("platform lacks metal: needs macOS on Apple Silicon")
    assert gate(spec(requires=["cuda"]), "cpu").startswith("platform lacks cuda: needs a CUDA build")
    assert gate(spec(requires=["not-metal"]), "cpu") is None
    assert gate_cause(spec(scenario="none"), "cpu")[0] == "scenario"
    assert gate_cause(spec(requires=["metal"]), "cpu")[0] == "platform"
    ollama = spec()
    ollama.engine = "ollama"  # the engine field gates too, not only `requires`
    assert gate_cause(ollama, "cpu")[1].startswith("platform lacks ollama")


def test_proc_events_requirement_probes_only_when_needed(monkeypatch):
    import harness.repro.claims as claims_mod

    calls = []
    monkeypatch.setattr(claims_mod, "_proc_events", lambda: calls.append(1) or (False, "no events arrived"))
    assert gate(spec(), "cpu") is None and calls == []  # a claim without the requirement never probes
    assert gate(spec(requires=["proc-events"]), "cpu") == (
        "platform lacks proc-events: needs the kernel's process events: no events arrived")


def normalise(text: str) -> str:
    """Whitespace collapsed, backticks and typographic quotes plain, for quote matching."""
    text = text.replace("`", "").replace("“", '"').replace("”", '"').replace("’", "'")
    text = text.replace("—", "-").replace("–", "-").replace("→", "->")
    return re.sub(r"\s+", " ", text).strip()


def quote_found(statement: str, document: str) -> bool:
    """Whether ``statement`` really appears in ``document`` (whitespace normalised); ``...`` in the
    statement stands for omitted text: its pieces must appear in order."""
    doc = normalise(document)
    pos = 0
    for piece in normalise(statement).split("..."):
        piece = piece.strip().rstrip(".,;")  # a quote may end where the source's sentence goes on
        if not piece:
            continue
        at = doc.find(piece, pos)
        if at < 0:
            return False
        pos = at + len(piece)
    return True


def test_quote_must_really_appear():
    doc = "The router   sends the stop command\nand the monitor force-kills after `stop_timeout` (default 10 s)."
    assert quote_found("the monitor force-kills after stop_timeout (default 10 s).", doc)
    assert quote_found("The router sends ... force-kills after", doc)
    assert not quote_found("the monitor force-kills after stop_timeout (default 20 s)", doc)
    assert not quote_found("force-kills ... The router", doc)  # pieces in order
    # the old test passed this: three long words of the quote appear somewhere
    assert not quote_found("monitor command default router", doc)


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
            assert quote_found(c.source["statement"], doc.read_text()), c.id


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


def test_shared_entry_claim_is_contradicted_by_a_second_entry_not_by_late_requests():
    """router-queue-shared-entry: requests that arrive after B's load began never see the queue, so
    they must not count against the claim; a second queue entry for B must."""
    from harness import resources

    s = load_claim(resources.claims_dir() / "router-queue-shared-entry.toml")

    def figures(queued, joined, k=4):
        return {"k": k, "spawns_b": 1, "proxied_b": k, "ok_b": k, "queued_b": queued, "joined_b": joined,
                "queue_hits_b": queued + joined, "queue_hits_b_minus_1": queued + joined - 1}

    assert judge(s, figures(1, 1))[0] == HOLDS  # two requests shared the entry, two came during the load
    assert judge(s, figures(1, 3))[0] == HOLDS
    verdict, reason = judge(s, figures(2, 1))  # a second entry for the same model
    assert verdict == CONTRADICTED and "queued_b) was 2, expected 1" in reason
    verdict, reason = judge(s, figures(0, 0))  # no queue at all (build 9093: every request evicted A itself)
    assert verdict == CONTRADICTED and "queued_b) was 0, expected 1" in reason


def test_evictions_are_counted_in_every_build_s_log_format():
    """Build 10327 logs a scheduler eviction only as 'unload: stopping model instance' (no reason
    line): router-cap once said 'evictions was 0' there and called itself contradicted."""
    import pandas as pd

    from harness.repro.base import scheduler_evictions

    def frame(rows):
        return pd.DataFrame(rows, columns=["kind", "text"])

    new = [("evict", "srv  unload_lru: evicting idle LRU name=a for a queued request")] * 3
    old_10327 = [("stop_sent", "srv        unload: stopping model instance name=a"),
                 ("stop_sent", "srv    operator(): stopping model instance name=a")] * 4
    old_9093 = [("evict", "srv unload_lru: models_max limit reached, removing LRU name=a")] + old_10327[:2]
    assert scheduler_evictions(frame(new)) == 3
    assert scheduler_evictions(frame(old_10327)) == 4
    assert scheduler_evictions(frame(old_9093)) == 1
    assert scheduler_evictions(frame([])) == 0
    # with the timeline, one child evicted through three lines (10327) counts once
    timeline = pd.DataFrame([
        (0.10, "spawn", "a", ""), (0.20, "spawn", "b", ""),
        (0.30, "evict", "b", "on_model_idl: model name=b went idle, giving up its slot to a queued request"),
        (0.30, "stop_sent", "b", "unload: stopping model instance name=b"),
        (0.31, "evict", "b", "ensure_model: evicting idle LRU name=b to make room for name=c"),
        (0.32, "evict", "b", "ensure_model: evicting idle LRU name=b to make room for name=c"),
        (0.40, "exited", "b", ""), (0.41, "spawn", "c", ""),
        (0.50, "stop_sent", "a", "unload: stopping model instance name=a"),  # only the stop line: inferred
        (0.60, "exited", "a", "")], columns=["t_s", "kind", "model", "text"])
    assert scheduler_evictions(timeline) == 2


def test_residency_claims_are_not_checkable_where_the_sets_cannot_exist(monkeypatch):
    """N1: on macOS 14, or with an engine SDK < 15, llama.cpp's residency claims are "not checkable here",
    never "contradicted"; the decision is the one idle cells use (probes/residency.py claim_gate). No Mac
    here: the host facts are stood in for."""
    from harness.probes import residency

    import harness.repro.claims as claims_mod

    monkeypatch.setattr(claims_mod.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(residency, "apple_silicon", lambda machine=None, translated=None: True)
    monkeypatch.setattr(claims_mod, "_paravirtual", lambda: None)
    claim = spec(requires=["metal", "metal-residency"])
    engine = Path("/opt/llama/bin/llama-server")
    for macos, sdk, checkable in (("14.6.1", "15.2", False), ("15.6", "14.5", False), ("15.6", "15.2", True)):
        monkeypatch.setattr(residency, "claim_gate_here",
                            lambda binary, m=macos, s=sdk: residency.claim_gate(m, s, "arm64"))
        cause = gate_cause(claim, "metal", engine)
        if checkable:
            assert cause is None
        else:
            assert cause is not None and cause[0] == "platform"
            assert "llama.cpp's Metal residency sets do not exist here" in cause[1]
    assert gate_cause(claim, "metal", None)[1].startswith("platform lacks metal-residency")  # no engine: undecided


def test_the_mlx_version_guard_gates_only_the_residency_line_claim(monkeypatch):
    """N4: mlx < 0.32.1 makes mlx-residency-debug-lines not checkable; mlx-server-wires-until-exit (same
    scenario) needs no [residency] line and is not gated by it."""
    from harness.repro.claims import load_claim
    from harness.resources import claims_dir

    lines = load_claim(claims_dir() / "mlx-residency-debug-lines.toml")
    wires = load_claim(claims_dir() / "mlx-server-wires-until-exit.toml")
    assert "mlx-residency" in lines.requires and "mlx-residency" not in wires.requires
    assert lines.scenario == wires.scenario == "mlx-server-wiring"
