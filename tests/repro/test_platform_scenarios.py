"""Ollama and Metal claim scenarios: judges on recorded outputs, driving logic on the stand-in.

No Ollama and no Metal GPU exist on this machine; the scenarios run for real where they do.
The Ollama driving logic is exercised here against tests/standins/ollama_standin.py only.
"""

import json
from pathlib import Path

from standins.ollama_standin import OllamaStandIn

from harness.repro.claims import HOLDS, judge, load_claims
from harness.repro.metal_scenarios import metal_keep_alive_s
from harness.repro.base import Context
from harness.repro.registry import SCENARIOS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_metal_keep_alive_line():
    # the line as shared/reference/llama-server.md quotes it (-lv 4 startup log)
    log = "ggml_metal_init: use residency sets = true\ncreating a residency set collection (keep_alive = 180 s)\n"
    assert metal_keep_alive_s(log) == 180
    assert metal_keep_alive_s("creating a residency set collection (keep_alive = 30 s)") == 30
    assert metal_keep_alive_s("no such line") is None


def test_reuse_scenario_drives_the_api(tmp_path):
    with OllamaStandIn() as standin:
        ev = SCENARIOS["ollama-reuse"](Context(None, tmp_path, lambda r: None),
                                       {"model": "qwen2.5-coder:7b", "url": standin.url})
        bodies = standin.requests
    assert [b.get("keep_alive") for b in bodies] == [0, None, None]  # unload first, then two requests
    assert ev.figures["first_load_ms"] == 250.0 and ev.figures["second_load_ms"] == 0.0
    # which llama.cpp that Ollama runs: the stand-in's version is no release, so no tag is claimed; an Ollama
    # lbench did not start gives no log, so no commit either
    assert (ev.figures["ollama_version"], ev.figures["llama_cpp_pinned"], ev.figures["llama_cpp_commit"]) == (
        "0.0.0-standin", None, None)
    spec = next(c for c in load_claims() if c.id == "ollama-reuse-loaded")
    assert judge(spec, ev.figures)[0] == HOLDS


def test_platform_specs_have_real_scenarios_and_checks():
    specs = {c.id: c for c in load_claims()}
    for cid in ("ollama-reuse-loaded", "ollama-keep-alive-expiry", "ollama-bounded-queue",
                "idle-metal-keepalive-env-parse"):
        assert specs[cid].scenario != "none" and specs[cid].check, cid


def test_ollama_load_intervals_from_a_real_log():
    from harness.engines.ollama_api import load_intervals
    from harness.repro.ollama_scenarios import overlap_figures

    # tests/fixtures/ollama/runner_started_issue14028.log: the lines of ollama/ollama issue #14028
    # (https://github.com/ollama/ollama/issues/14028, "what does mean by 'llama runner started in XXX
    # seconds' in ollama logs?", 2026-02-02), quoted as the issue shows them (log viewer stamp, level, line).
    # They come from 8 Ollama replicas whose logs were read together, so loads that overlap there
    # ran on different servers: the file tests the parser and the judge's arithmetic, not Ollama.
    spec = next(c for c in load_claims() if c.id == "ollama-one-load-at-a-time")
    intervals = load_intervals((FIXTURES / "ollama" / "runner_started_issue14028.log").read_text())
    assert len(intervals) == 7
    first, last = intervals[0], intervals[-1]  # "started in 29.96 seconds" at 12:27:12.038Z and 12:29:02.735Z
    assert abs((first[1] - first[0]) - 29.96) < 1e-6 and abs((last[1] - last[0]) - 29.96) < 1e-6
    # those two, one after the other: the second began 80.737 s after the first ended
    serial = {**overlap_figures([first, last]), "loads_wanted": 2}
    assert serial["overlapping_loads"] == 0 and serial["min_gap_ms"] == 80737.0
    assert judge(spec, serial)[0] == HOLDS
    # the four loads that ended at 12:28:06.367-.812 (30.22-30.46 s) all ran at once: 6 pairs overlap
    together = {**overlap_figures(intervals[1:5]), "loads_wanted": 2}
    assert together["loads"] == 4 and together["overlapping_loads"] == 6
    verdict, reason = judge(spec, together)
    assert verdict == "contradicted" and "pairs of loads whose intervals overlap" in reason
    few = {**overlap_figures(intervals[:1]), "loads_wanted": 2}  # the log lacks a load: cannot decide
    assert judge(spec, few)[0] == "inconclusive"
    # one line of a single Windows server's log, ollama/ollama#12027 ("model switch not performed.",
    # https://github.com/ollama/ollama/issues/12027, 2025-08-24), another Ollama version (server.go:1272)
    line = 'time=2025-08-24T08:28:12.657Z level=INFO source=server.go:1272 msg="llama runner started in 9.41 seconds"'
    (start, end), = load_intervals(line)
    assert abs((end - start) - 9.41) < 1e-6 and abs(end - 1756024092.657) < 1e-6


def test_ollama_eviction_figures_and_the_negations():
    from harness.engines.ollama_api import model_paths
    from harness.repro.ollama_scenarios import eviction_figures

    spec = next(c for c in load_claims() if c.id == "ollama-vram-eviction")
    paths = model_paths({"a": {"modelfile": "# Modelfile\nFROM /m/blobs/sha256-ffff\n"},
                         "b": {"modelfile": "FROM /m/blobs/sha256-1111\n"}})
    assert paths == {"a": "/m/blobs/sha256-ffff", "b": "/m/blobs/sha256-1111"}

    def figures(idle_victim, busy_victim):
        idle = eviction_figures(["a", "b"], [x for x in ["a", "b", "c"] if x != idle_victim], ["a", "b"], paths,
                                set())
        busy = eviction_figures(["a", "b"], [x for x in ["a", "b", "c"] if x != busy_victim], ["a", "b"], paths,
                                {"a"})
        return {**{f"idle_{k}": v for k, v in idle.items()}, **{f"busy_{k}": v for k, v in busy.items()}}

    rule = figures("a", "b")  # the oldest idle goes; with a busy, the idle b goes
    assert rule["idle_distinguishing"] and judge(spec, rule)[0] == HOLDS
    by_path = figures("b", "b")  # ByDurationAndName's tie-break: first by model path, not the oldest
    verdict, reason = judge(spec, by_path)
    assert verdict == "contradicted" and "the oldest idle one" in reason
    busy_first = figures("a", "a")  # a busy runner evicted while an idle one exists
    assert judge(spec, busy_first)[0] == "contradicted"


def test_ollama_platform_claims_have_scenarios():
    specs = {c.id: c for c in load_claims()}
    for cid in ("ollama-one-load-at-a-time", "ollama-vram-eviction"):
        assert specs[cid].scenario != "none" and specs[cid].check and specs[cid].engine == "ollama"
    assert not [c.id for c in specs.values() if c.scenario == "none"]
