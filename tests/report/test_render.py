"""The HTML report from a run directory (rows written through the real store)."""

from harness.report.render import render_report
from harness.store import RunWriter, open_run


def _run_with(tmp_path, model_label):
    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0}, "host": {"os": "Linux"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": model_label, "synthetic": True, "preset": "tiny", "n_params": 10, "bytes": 100,
                    "path": "/m.gguf", "quant": "Q8_0", "arch": "llama", "sha256": "ab" * 32}],
        "cells": [{"model": model_label, "setting": "keep-alive=none", "notes": ["no Metal <here>"], "error": None,
                   "env_overrides": {"GGML_METAL_NO_RESIDENCY": "1"}, "n_samples": 4, "sweep_wall_s": 1.0,
                   "efficiency": 1.01, "argv": ["llama-server", "-m", "/m.gguf"]}],
    })
    for rep in range(2):
        for pause, ms in ((0.0, 1.0), (1.0, 20.0)):
            w.append({"model": model_label, "setting": "keep-alive=none", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause + 1e-5, "latency_ms": ms + rep,
                      "server_prompt_ms": ms - 0.5, "server_ms": ms - 0.5, "overhead_ms": 0.5,
                      "http_status": 200, "error": None})
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_report_contains_plots_tables_and_run_id(tmp_path):
    run = _run_with(tmp_path, "tiny-q8")
    html = render_report(run).read_text()
    assert run.run_id in html and html.count("data:image/png;base64,") == 2
    assert "Synthetic model" in html and "Not applicable here" in html
    assert "21.00" in html  # max latency at pause 1.0


def test_user_strings_are_escaped(tmp_path):
    run = _run_with(tmp_path, "<script>alert(1)</script>")
    html = render_report(run).read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "no Metal &lt;here&gt;" in html


def test_run_quality_warnings_reach_the_report_and_the_evidence(tmp_path):
    import json

    from harness.report.evidence import write_evidence

    run = _run_with(tmp_path, "tiny-q8")
    manifest = json.loads((run.dir / "manifest.json").read_text())
    manifest["quality"] = {"warnings": ["load average 3.5 before the run on 2 CPUs: timings are <noisy>"]}
    (run.dir / "manifest.json").write_text(json.dumps(manifest))
    run = open_run(run.dir, tmp_path)
    html = render_report(run).read_text()
    assert "Run quality:" in html and "timings are &lt;noisy&gt;" in html
    md = write_evidence([run], tmp_path / "ev", redact=False).read_text()
    assert "**Run quality**" in md and "> - load average 3.5 before the run" in md


def test_evidence_carries_synthetic_and_not_applicable_marks_and_intervals(tmp_path):
    from harness.report.evidence import write_evidence

    run = _run_with(tmp_path, "tiny-q8")
    md = write_evidence([run], tmp_path / "ev", redact=False).read_text()
    assert "**Synthetic model(s)**" in md and "tiny test shape: copies no real model" in md
    assert "**Not applicable on this host**" in md and "no Metal &lt;here&gt;" in md
    assert "(n=2, too few for a 95% CI)" in md  # two reps per pause: no interval, and the line says so


def test_evidence_markdown_makes_user_strings_inert(tmp_path):
    from harness.report.evidence import write_evidence

    run = _run_with(tmp_path, "a|b<img src=x onerror=alert(1)>")
    md = write_evidence([run], tmp_path / "ev", redact=False).read_text()
    outside_code = md.split("<details><summary>Environment")[0].split("```sh")[0] + \
        md.split("<details><summary>Environment")[0].split("```")[-1]
    assert "<img" not in outside_code and "a\\|b&lt;img" in md
    table_rows = [line for line in md.splitlines() if line.startswith("| a")]
    assert table_rows and all(line.count(" | ") == 6 for line in table_rows)  # 7 cells: the name did not split one


def test_idle_report_opens_with_findings_and_folds_reference_tables(tmp_path):
    run = _run_with(tmp_path, "tiny-q8")
    html = render_report(run).read_text()
    assert html.index("<h2>Findings</h2>") < html.index("Synthetic model") < html.index("<h2>Wake step</h2>")
    assert "tiny-q8 · keep-alive=none" in html.split("<h2>Findings</h2>")[1].split("</ul>")[0]
    assert html.count("Synthetic model") == 1 and "a test shape that copies no real model" in html
    for folded in ("Cells", "Environment"):
        assert f'<summary><h2 style="display:inline">{folded}</h2>' in html
