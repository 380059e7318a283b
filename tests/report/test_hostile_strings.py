"""Names with every character class survive plots and router log parsing (issue 12, class 5)."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.router import INI_FORBIDDEN, parse_router_line
from harness.report.plots import latency_vs_pause

NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20)
INI_NAMES = NAMES.map(lambda s: "".join(c for c in s if c not in INI_FORBIDDEN).strip()).filter(bool)


@settings(max_examples=15, deadline=None)
@given(NAMES, NAMES)
def test_plot_takes_any_model_and_setting_name(model, setting):
    samples = pd.DataFrame({"model": [model] * 4, "setting": [setting] * 4, "pause_requested_s": [0, 0, 1, 1],
                            "latency_ms": [1.0, 2.0, 3.0, 4.0]})
    summary = pd.DataFrame({"model": [model] * 2, "setting": [setting] * 2, "pause_requested_s": [0, 1],
                            "median": [1.5, 3.5], "ci_low": [1, 3], "ci_high": [2, 4]})
    png = latency_vs_pause(samples, summary, model, "run-$x$")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_dollar_pairs_do_not_crash_the_plot():
    name = r"a$\frac{$b"
    samples = pd.DataFrame({"model": [name] * 2, "setting": [name] * 2, "pause_requested_s": [0, 1],
                            "latency_ms": [1.0, 2.0]})
    summary = pd.DataFrame({"model": [name] * 2, "setting": [name] * 2, "pause_requested_s": [0, 1],
                            "median": [1.0, 2.0], "ci_low": [1.0, 2.0], "ci_high": [1.0, 2.0]})
    assert latency_vs_pause(samples, summary, name, "r")[:4] == b"\x89PNG"


@settings(max_examples=200, deadline=None)
@given(INI_NAMES)
def test_router_events_keep_names_with_spaces_and_symbols(name):
    lines = {
        f"I srv load: spawning server instance with name={name} on port 40643": ("spawn", {"port": "40643"}),
        f"I srv join: request for name={name} queued at position 2": ("queued", {"position": "2"}),
        f"I srv unload: stopping model instance name={name}": ("stop_sent", {}),
        f"I srv load: instance name={name} exited with status -9": ("exited", {"status": "-9"}),
        f"I srv tick: evicting idle LRU name={name} for a queued request": ("evict", {}),
    }
    for line, (kind, detail) in lines.items():
        parsed = parse_router_line(line)
        assert parsed is not None and parsed[0] == kind, line
        assert parsed[1]["model"] == name and all(parsed[1][k] == v for k, v in detail.items())
