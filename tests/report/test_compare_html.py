"""compare --html: what differs between A's and B's environment (only that), and a log-scale plot
per metric."""

import re
import sys
from html import unescape
from pathlib import Path

from conftest import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
from test_compare_output import SETTINGS, make_run  # noqa: E402

from harness.report.compare import environment_differences, metric_figure  # noqa: E402
from harness.store import open_run  # noqa: E402


def test_compare_html_lists_only_the_environment_differences_and_plots_each_metric(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a = make_run(root)
    b = make_run(root, scale=1.2, seed=1, build=11500, ctx_size=1024)
    out = tmp_path / "compare.html"
    r = run_cli("compare", a, b, "--html", str(out), env=lbench_env)
    assert r.returncode == 0, r.stderr
    # the fingerprints differ (engine build and binary): said once, on stderr (this once crashed)
    assert "different machines or engines" in r.stderr and "engine_build: 11434 vs 11500" in " ".join(r.stderr.split())
    html = out.read_text()
    section = html[html.index("<h2>Environment differences</h2>"):html.index("<h2>Verdicts</h2>")]
    keys = re.findall(r"<code>([^<]+)</code>", section)
    # what differs, and only that: not the OS or chip both share, not the load average of the moment
    assert {"engine.build_number", "engine.sha256", "config.ctx_size", "config.seed"} <= set(keys)
    assert not {"host.os", "host.cpu_model", "host.load_avg_1m"} & set(keys), keys
    assert "11434" in section and "11500" in section
    # one plot per metric, each said to be on a log scale; both settings named whole in the table
    plots = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', html)
    assert plots == ["latency_ms: A and B, log scale", "server_prompt_ms: A and B, log scale"]
    assert all(s in unescape(html) for s in SETTINGS)
    assert "nan" not in section


def test_metric_plots_use_a_log_axis_and_one_panel_per_cell(lbench_env):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = open_run(make_run(root), root), open_run(make_run(root, scale=1.2, seed=1), root)
    fig = metric_figure([a], [b], "latency_ms")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(SETTINGS) and all(ax.get_yscale() == "log" for ax in panels)
    assert [ax.get_title().split("\n")[1] for ax in panels] == list(SETTINGS)
    assert environment_differences([a], [b]) == [{"key": "config.seed", "a": "0", "b": "1"}]  # all else equal


def _swap_run(root: Path, scale: float, seed: int, served: bool = False) -> str:
    import numpy as np

    from harness.store import RunWriter

    rng = np.random.default_rng(seed)
    w = RunWriter(root, "swap", {"config": {"seed": seed}, "host": {"os": "Linux"},
                                 "engine": {"build_number": 11434}, "models": []})
    for i in range(30):
        warm = i % 3 != 0
        row = {"request_id": i, "model": ("tiny-q8", "tiny-q4")[i % 2], "resident_at_send": warm,
               "latency_ms": (5.0 if warm else 400.0) * scale * rng.lognormal(0, 0.05), "error": None,
               "http_status": 200}
        if served:  # what the router did: every fourth "warm" request really waited behind an eviction
            row["served_as"] = "behind_eviction" if (warm and i % 4 == 1) or not warm else "resident"
        w.append(row, table="requests")
    w.finish("complete")
    return w.run_id


def test_swap_runs_compare_warm_and_cold_on_a_log_axis(lbench_env, tmp_path):
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = _swap_run(root, 1.0, 0), _swap_run(root, 1.4, 1)
    out = tmp_path / "swap.html"
    r = run_cli("compare", a, "latest", "--html", str(out), env=lbench_env, columns=80)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"B: {b} (1 run)" in text and "tiny-q4,tiny-q8 · router" in text
    # one run per side: no between-run spread, so no interval and no verdict but inconclusive
    assert re.search(r"warm: B/A 1\.\d+ \[no interval\], B slower by \d+% \(p50 latency_ms [\d.]+ vs [\d.]+ ms\): "
                     r"inconclusive", text), text
    html = out.read_text()
    assert "bars the p50 of each group of requests" in html and "a secondary metric" not in html
    fig = metric_figure([open_run(a, root)], [open_run(b, root)], "latency_ms")
    assert fig.axes[0].get_yscale() == "log"


def test_swap_runs_with_served_as_are_compared_by_what_the_router_did(lbench_env):
    from harness.analysis.compare import judge_runs

    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = _swap_run(root, 1.0, 0, served=True), _swap_run(root, 1.4, 1, served=True)
    verdicts, _ = judge_runs([open_run(a, root)], [open_run(b, root)])
    assert {v.regime for v in verdicts} == {"served resident", "waited for a load"}
    old = _swap_run(root, 1.0, 2)  # recorded before requests were classed: both sides fall back to residency
    verdicts, _ = judge_runs([open_run(old, root)], [open_run(b, root)])
    assert {v.regime for v in verdicts} == {"warm", "cold"}


def test_compare_html_carries_the_virtual_flag_of_any_run_behind_it(lbench_env, tmp_path):
    import json

    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    a, b = make_run(root), make_run(root, scale=1.2, seed=1)
    out = tmp_path / "compare.html"
    assert run_cli("compare", a, b, "--html", str(out), env=lbench_env).returncode == 0
    assert "Virtual machine:" not in out.read_text()  # neither host said it was virtual
    manifest_path = root / a / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["host"]["virtual"] = True  # A only: the page still says so
    manifest_path.write_text(json.dumps(manifest))
    assert run_cli("compare", a, b, "--html", str(out), env=lbench_env).returncode == 0
    assert "<b>Virtual machine:</b> measured on a virtual machine (Linux TestCPU)" in out.read_text()
