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
    assert "| – |" in md  # two reps per pause: no per-pause interval, and the table says so
    # the headline: 2 pauses x 2 reps allow 4 labellings within the reps, so no test can call a step at p <= 0.01
    assert "- tiny-q8 · keep-alive=none: no clear wake step from 0 to 1 s" in md
    assert "no more clearly than with the pause labels shuffled within each repetition" in md  # the findings say why


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
    import re

    run = _run_with(tmp_path, "tiny-q8")
    html = render_report(run).read_text()
    assert html.index("<h2>Findings</h2>") < html.index("Synthetic model") < html.index("<h2>Wake step</h2>")
    headline = html.split("<h2>Findings</h2>")[1].split("</ul>")[0]
    assert "tiny-q8 · keep-alive=none" in headline
    assert re.search(r"takes [\d.]+ ms .* against [\d.]+ ms", headline), headline  # a sentence with numbers
    # every caveat is one line that opens on demand, below the headline
    assert '<details class="banner warn"><summary><b>Synthetic model:</b>' in html
    assert '<details class="banner note"><summary><b>Not applicable here:</b>' in html
    # tables scroll inside their own box: none can widen the page
    assert html.count("<table") == html.count('<div class="scroll"><table')
    assert html.count("Synthetic model") == 1 and "a test shape that copies no real model" in html
    for folded in ("Cells", "Environment"):
        assert f'<summary><h2 style="display:inline">{folded}</h2>' in html


def _stepped_run(tmp_path, label="m"):
    """A run with a clear wake step at 1.5 s (8 reps per pause, little noise)."""
    import numpy as np

    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0, "warmup": 2}, "host": {"os": "Linux"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": label, "synthetic": True, "preset": "tiny", "n_params": 10, "bytes": 132_832,
                    "path": "/c/synthetic-tiny-q8-seed3.gguf", "quant": "Q8_0", "arch": "llama", "sha256": "ab" * 32}],
        "cells": [{"index": 0, "model": label, "setting": "keep-alive=none", "notes": [], "error": None,
                   "env_overrides": {"GGML_METAL_NO_RESIDENCY": "1"}, "n_samples": 40, "sweep_wall_s": 1.0, "efficiency": 1.0,
                   "argv": ["/x/llama-server", "-m", "/c/synthetic-tiny-q8-seed3.gguf", "--host", "127.0.0.1",
                            "--port", "4321", "-c", "256"],
                   "request_body": '{"prompt": "it\'s $(rm -rf ~)", "n_predict": 1}'}],
    })
    rng = np.random.default_rng(0)
    seq = 0
    for rep in range(8):
        for pause in (0.0, 0.5, 1.0, 1.5, 2.0):
            ms = (100.0 if pause >= 1.5 else 10.0) * float(rng.lognormal(0, 0.02))
            w.append({"model": label, "setting": "keep-alive=none", "phase": "measure", "rep": rep, "seq": seq,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": ms,
                      "server_prompt_ms": ms - 0.5, "server_ms": ms - 0.5, "overhead_ms": 0.5,
                      "http_status": 200, "error": None})
            seq += 1
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_one_wake_model_headline_table_findings_and_json_agree(tmp_path):
    """The headline, the wake table and analysis.json give one answer (a step between 1 and 1.5 s),
    and analysis.json is strict JSON (no NaN)."""
    import json

    run = _stepped_run(tmp_path)
    html = render_report(run).read_text()
    analysis = json.loads((run.dir / "analysis.json").read_text(),
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    (wake,) = analysis["wake"]
    assert wake["shape"] == "step" and wake["last_warm_s"] == 1.0 and wake["first_woken_s"] == 1.5
    (headline,) = analysis["headline"]
    assert "after a pause of 1.5 s or more the first token takes 100 ms [" in headline
    assert "against 9.97 ms [" in headline and "after pauses up to 1 s" in headline and "a wake step between 1 s and 1.5 s" in headline
    assert 'data-shape="step"' in html.split("<h2>Findings</h2>")[1].split("</ul>")[0]
    table = html.split('<table class="wake">')[1].split("</table>")[0]
    assert 'data-shape="step"' in table and "a wake step between 1 s and 1.5 s" in table
    from harness.analysis.regimes import wake_model, wake_thresholds
    from harness.analysis.stats import measured

    samples = measured(run.table("samples"))  # compare reads A's shape from the same model (build_groups)
    assert wake_thresholds(wake_model(samples)) == {("m", "keep-alive=none"): 1.5}


def test_evidence_rerun_script_is_quoted_and_checks_itself(tmp_path):
    import shlex
    import subprocess

    from harness.report.evidence import write_evidence

    run = _stepped_run(tmp_path, label="m'; touch pwned #")
    out = tmp_path / "ev"
    md = write_evidence([run], out, redact=False).read_text()
    (script,) = out.glob("rerun-*.sh")
    text = script.read_text()
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0  # it parses
    assert "export GGML_METAL_NO_RESIDENCY=1" in text
    assert '"$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -c 256' in text
    assert "lbench model synth tiny --quant q8 --seed 3 --out " + shlex.quote("m'; touch pwned #.gguf") in text
    assert "printf '%s' " + shlex.quote('{"prompt": "it\'s $(rm -rf ~)", "n_predict": 1}') in text
    assert "set -- 0 0.5 1 1.5 2" in text and "verdict:" in text
    assert "Rerun m" in md and "drag each file into the comment box" in md and "![" not in md
    assert (out / f"{run.run_id}-report.html").is_file()


def test_sizes_in_a_unit_that_shows_them():
    from harness.units import size_text

    assert size_text(132_832) == "133 KB" and size_text(8_530_000_000) == "8.53 GB" and size_text(512) == "512 B"


def test_swap_rerun_script_quotes_names_and_checks_the_cap():
    import json
    import shlex
    import subprocess
    import tempfile

    import pandas as pd

    from harness.report.rerun import swap_script

    name = "it's $(x)"
    manifest = {"engine": {"path": "/x/llama-server", "build_number": 1}, "config": {"models_max": 1,
                                                                                   "pattern": "ping-pong"},
                "models": [{"label": name, "path": "/c/a.gguf", "sha256": "ab" * 32, "synthetic": False,
                            "name": "Real Model", "quant": "Q4_K_M"}],
                "router": {"argv": ["/x/llama-server", "--port", "9", "--models-preset", "/r/preset.ini"],
                           "preset": f"[{name}]\nmodel = /c/a.gguf\n"}}
    requests = pd.DataFrame({"index": [0, 1], "model": [name, name]})
    from harness.record import parse_record

    record = parse_record({"kind": "swap", **manifest}, "manifest.json")
    text = swap_script("20260101T000000Z-swap-abcd", record, requests, ["the cap held"])
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as fh:
        fh.write(text)
        fh.flush()
        assert subprocess.run(["sh", "-n", fh.name]).returncode == 0
    body = json.dumps({"model": name, "prompt": "Hello", "n_predict": 1, "cache_prompt": True, "stream": True})
    assert f"BODY_1={shlex.quote(body)}" in text and "set -- 1 1" in text
    assert "printf 'model = %s\\n' \"$MODEL_1\" >> preset.ini" in text
    assert '"$LLAMA_SERVER" --port "$PORT" --models-preset preset.ini' in text
    assert "Real Model, Q4_K_M" in text and 'if [ "$peak" -le 1 ]' in text


def test_every_report_carries_the_virtual_machine_flag(tmp_path):
    """Every page rendered from runs (swap, repro, gate-bench, compare, idle, calibrate: base.html.j2) says when
    a run behind it was measured on a virtual machine; the idle and calibrate pages keep their own virtual-Mac
    banner instead of a second one."""
    import json

    run = _run_with(tmp_path, "tiny-q8")
    assert "Virtual machine:" not in render_report(run).read_text()  # a host that does not say: no banner
    manifest = json.loads((run.dir / "manifest.json").read_text())
    manifest["host"] = {"os": "Linux", "cpu_model": "AMD EPYC", "virtual": True}
    (run.dir / "manifest.json").write_text(json.dumps(manifest))
    html = render_report(open_run(run.dir, tmp_path)).read_text()
    assert "<b>Virtual machine:</b> measured on a virtual machine (Linux AMD EPYC)" in html
    manifest["host"] = {"os": "Darwin", "cpu_model": "Apple M1 (Virtual)", "virtual": True,
                        "mac_gpu_model": "Apple Paravirtual device"}
    (run.dir / "manifest.json").write_text(json.dumps(manifest))
    html = render_report(open_run(run.dir, tmp_path)).read_text()
    assert "Virtual Mac:" in html and "<b>Virtual machine:</b>" not in html


def test_evidence_carries_the_residency_decision_and_the_fit_warning(tmp_path):
    """A Mac cell's record (as runs/idle.py writes it: startup_metal.residency from probes/residency.py, fit from
    engine_log.fit) reaches the evidence bundle; the values are decision inputs, no Mac ran here."""
    import json

    from harness.probes.engine_log import fit
    from harness.probes.residency import decide
    from harness.report.evidence import write_evidence

    run = _run_with(tmp_path, "tiny-q8")
    manifest = json.loads((run.dir / "manifest.json").read_text())
    decision = decide("none", macos="14.6.1", sdk="15.2", arch="arm64")
    manifest["cells"][0]["startup_metal"] = {"residency": decision.as_dict()}
    manifest["cells"][0]["fit"] = fit({"offloaded_layers": "20/33"}, "tiny-q8")
    (run.dir / "manifest.json").write_text(json.dumps(manifest))
    md = write_evidence([open_run(run.dir, tmp_path)], tmp_path / "ev", redact=False).read_text()
    assert "**Metal residency sets** (decided from the machine, not the log):" in md
    assert "macOS 14.6.1 (&lt; 15): no residency set is ever created" in md
    assert "**Not wholly on the GPU**:" in md and "put 20 of 33 layers on the GPU (61%)" in md


def test_memory_through_each_pause_sits_beside_the_per_gb_slope(tmp_path):
    """Three model sizes with a wake step whose penalty grows with bytes (a re-wire), and wired memory
    (a Mac's apple probe) falling by the model's size in the pauses past the step: one section holds
    the slope, the wired-memory figure and the change per pause, with the sentence that reads them
    together."""
    import numpy as np

    sizes = {"m1": 1e9, "m2": 2e9, "m4": 4e9}
    w = RunWriter(tmp_path, "idle", {
        "config": {"seed": 0}, "host": {"os": "Darwin"}, "engine": {"path": "/x/llama-server"},
        "models": [{"label": m, "bytes": int(b), "path": f"/c/{m}.gguf", "quant": "Q8_0", "arch": "llama"}
                   for m, b in sizes.items()],
        "cells": [{"index": i, "model": m, "setting": "keep-alive=none", "notes": [], "error": None,
                   "env_overrides": {}, "n_samples": 40, "sweep_wall_s": 1.0, "efficiency": 1.0,
                   "argv": ["llama-server"]} for i, m in enumerate(sizes)],
    })
    rng = np.random.default_rng(0)
    seq = 0
    for m, b in sizes.items():
        for rep in range(8):
            for pause in (0.0, 0.5, 1.0, 1.5, 2.0):
                ms = (10.0 + (50.0 * b / 1e9 if pause >= 1.5 else 0.0)) * float(rng.lognormal(0, 0.02))
                w.append({"model": m, "setting": "keep-alive=none", "phase": "measure", "rep": rep, "seq": seq,
                          "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": ms,
                          "server_prompt_ms": ms - 0.5, "server_ms": ms - 0.5, "overhead_ms": 0.5,
                          "http_status": 200, "error": None})
                for t in (0.1, 0.6, 1.1):
                    if pause - t >= 0.25:  # the sampler's guard before the request
                        wired = 6e9 - (b if pause >= 1.5 and t > 1.0 else 0.0)
                        w.append({"model": m, "setting": "keep-alive=none", "rep": rep, "seq": seq,
                                  "pause_requested_s": pause, "probe": "apple", "device": "apple-gpu",
                                  "t_since_pause_start_s": t, "t_before_send_s": pause - t, "left_alone": False,
                                  "wired_bytes": int(wired)}, table="device_samples")
                seq += 1
    w.finish("complete")
    html = render_report(open_run(w.dir, tmp_path)).read_text()
    section = html.split('<h2 id="size-and-memory">')[1].split("<h2")[0]
    import re

    slope = re.search(r"Penalty per GB across 3 models, keep-alive=none: <b>([\d.]+) ms/GB</b>", section)
    assert slope and 45 < float(slope.group(1)) < 55  # 50 ms per GB, give or take the 2% noise
    assert "a re-wire" in section.lower() and "clock ramp" in section
    assert 'alt="wired_bytes through each pause"' in section and "macOS wired memory (vm_stat)" in section
    assert "This run has no wired-memory reading" not in section
    # m4 after the 2 s pause: 6 GB wired at 0.1 s, 2 GB at 1.1 s: -4e9 bytes = -3,814.7 MiB
    assert "5,722.0 MiB → 1,907.3 MiB (change -3,814.7 MiB, 95% CI -3,814.7 to -3,814.7)" in section
