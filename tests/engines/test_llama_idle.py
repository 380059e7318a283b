from pathlib import Path

from harness.engines.llama_idle import ITERS, PAUSES_S, LlamaIdleParser

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "llama_idle"


def parse_output(text: str) -> tuple[list[tuple[float, int, float]], list[dict]]:
    """The output fed line by line, as llama_idle.run feeds the live stream."""
    p = LlamaIdleParser()
    rows = [r for r in (p.feed(line) for line in text.splitlines()) if r is not None]
    return rows, p.summaries


def test_parses_captured_output():
    rows, summaries = parse_output((FIX / "tiny_q8_cpu.txt").read_text())
    assert len(rows) == len(PAUSES_S) * ITERS
    assert [r[0] for r in rows[::ITERS]] == PAUSES_S
    assert [r[1] for r in rows[:ITERS]] == list(range(ITERS))
    assert [s["pause_s"] for s in summaries] == PAUSES_S
    first = summaries[0]
    mean = sum(r[2] for r in rows[:ITERS]) / ITERS
    assert abs(first["avg_ms"] - mean) < 0.02  # llama-idle's own average agrees with the parsed decodes


def test_tolerates_noise_and_nan_sd():
    text = "load stuff\n  - decode time:     2.00 ms\niters:    1, pause:     0 ms, avg decode time:     2.00 +/- nan ms\n"
    rows, summaries = parse_output(text)
    assert rows == [(0.0, 0, 2.0)] and summaries[0]["iters"] == 1
