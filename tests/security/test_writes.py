"""Writes that cannot be redirected (issue 26, class 4): temporary files created exclusively with
unpredictable names, bundles (evidence, baselines, gate outputs) swapped in whole, links in a
run directory never followed, file names built from a manifest confined to their folder."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from conftest import run_cli

from harness import atomic, baselines
from harness.errors import BadInput
from harness.report import evidence
from harness.store import RunWriter, open_run


def _idle_run(root: Path, model: str = "tiny-q8") -> Path:
    w = RunWriter(root, "idle", {
        "config": {"seed": 0}, "host": {"os": "Linux", "cpu_model": "TestCPU"}, "engine": {"build_number": 1},
        "models": [{"label": model, "synthetic": True, "preset": "tiny", "bytes": 100, "sha256": "ab" * 32}],
        "cells": []})
    for rep in range(3):
        for pause, ms in ((0.0, 1.0), (1.0, 20.0)):
            w.append({"model": model, "setting": "keep-alive=none", "phase": "measure", "rep": rep,
                      "pause_requested_s": pause, "pause_actual_s": pause, "latency_ms": ms + rep,
                      "server_prompt_ms": ms, "server_ms": ms, "overhead_ms": 0.5, "http_status": 200,
                      "error": None})
    w.finish("complete")
    return w.dir


def _tamper(run_dir: Path, **changes) -> None:
    m = run_dir / "manifest.json"
    m.write_text(json.dumps({**json.loads(m.read_text()), **changes}))


# ---- atomic files -------------------------------------------------------------------------------------

def test_a_link_at_the_old_predictable_temp_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "out" / "m.json"
    target.parent.mkdir()
    os.symlink(victim, target.parent / f".m.json.{os.getpid()}.tmp")
    atomic.atomic_write_json(target, {"a": 1})
    assert victim.read_text() == "keep me" and json.loads(target.read_text()) == {"a": 1}


def test_concurrent_writers_never_share_a_temp_file(tmp_path):
    target = tmp_path / "m.txt"
    errors = []

    def write(i):
        try:
            for _ in range(50):
                atomic.atomic_write_text(target, f"{i}" * 1000)
        except Exception as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = target.read_text()
    assert not errors and len(set(text)) == 1 and len(text) == 1000
    assert [p.name for p in tmp_path.iterdir()] == ["m.txt"]


def test_gate_outputs_are_staged_together(tmp_path, monkeypatch):
    paths = [tmp_path / n for n in ("gate.md", "gate.xml", "gate.json")]
    for p in paths:
        p.write_text("old")
    real = atomic.tempfile.mkstemp
    calls = []

    def fail_on_third(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", fail_on_third)
    with pytest.raises(OSError):
        atomic.atomic_write_many({p: b"new" for p in paths})
    assert [p.read_text() for p in paths] == ["old"] * 3  # none new beside the old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)


# ---- evidence bundles --------------------------------------------------------------------------------

@pytest.mark.parametrize("run_id", ["../../escaped", "/tmp/escaped-abs", "a/../../b", ".hidden", "x" * 300])
def test_evidence_png_names_from_a_manifest_stay_in_the_bundle(tmp_path, run_id):
    run_dir = _idle_run(tmp_path / "results")
    _tamper(run_dir, run_id=run_id)
    out = tmp_path / "deep" / "ev"
    md = evidence.write_evidence([open_run(run_dir, tmp_path / "results")], out, redact=False)
    pngs = [p for p in out.iterdir() if p.suffix == ".png"]
    assert md.parent == out and pngs, list(out.iterdir())
    assert all(p.parent == out and not p.name.startswith(".") and len(p.name) < 200 for p in pngs)
    assert not list((tmp_path / "deep").glob("*escaped*")) and not Path("/tmp/escaped-abs-tiny-q8.png").exists()
    assert sorted(x.name for x in (tmp_path / "deep").iterdir()) == ["ev"]  # no temp folders left
    assert all(p.parent == out for p in out.rglob("*")) and not Path("/tmp/escaped-abs-report.html").exists()
    assert any(p.name.endswith("-report.html") for p in out.iterdir())  # the report copy too, inside -o


def test_evidence_bundle_is_swapped_in_whole(tmp_path, monkeypatch):
    run_dir = _idle_run(tmp_path / "results")
    run = open_run(run_dir, tmp_path / "results")
    out = tmp_path / "ev"
    out.mkdir()
    (out / "evidence.md").write_text("old bundle")
    (out / "old-run-tiny.png").write_bytes(b"old png")
    evidence.write_evidence([run], out, redact=False)
    assert not (out / "old-run-tiny.png").exists() and "old bundle" not in (out / "evidence.md").read_text()
    before = sorted((p.name, p.read_bytes()) for p in out.iterdir())
    import harness.report.plots as plots

    def interrupted(*a, **k):
        raise KeyboardInterrupt  # Ctrl-C or SIGTERM while the PNGs are drawn

    monkeypatch.setattr(plots, "latency_vs_pause", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evidence.write_evidence([run], out, redact=False)
    assert sorted((p.name, p.read_bytes()) for p in out.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev", "results"]


def test_evidence_refuses_to_replace_a_folder_of_other_files(tmp_path):
    run = open_run(_idle_run(tmp_path / "results"), tmp_path / "results")
    out = tmp_path / "project"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="not an evidence bundle"):
        evidence.write_evidence([run], out)
    assert (out / "notes.txt").read_text() == "mine"


def test_a_recipe_that_is_a_link_or_a_fifo_is_not_pasted(tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    os.symlink(secret, tmp_path / "recipe.sh")
    assert evidence._recipe_text(tmp_path / "recipe.sh") is None
    os.mkfifo(tmp_path / "fifo.sh")
    assert evidence._recipe_text(tmp_path / "fifo.sh") is None  # and it did not block
    (tmp_path / "ok.sh").write_text("echo hi\n")
    assert evidence._recipe_text(tmp_path / "ok.sh") == "echo hi\n"


def test_hostile_manifest_text_cannot_leave_its_code_block(tmp_path):
    run_dir = _idle_run(tmp_path / "results")
    _tamper(run_dir, command="lbench idle\n```\n<img src=x onerror=alert(1)>\n$(touch pwned)")
    text = evidence.write_evidence([open_run(run_dir, tmp_path / "results")], tmp_path / "ev", redact=False).read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("```") and line.endswith("sh"))
    fence = lines[at][:-2]
    assert len(fence) > 3 and lines[at + 2] == fence  # longer than the ``` inside: the text cannot close it
    assert lines[at + 1].startswith("lbench idle ") and "$(touch pwned)" not in lines[at + 1].replace("'$(touch'", "")
    outside = "\n".join(lines[:at] + lines[at + 3:])
    assert "<img" not in outside


# ---- baselines ------------------------------------------------------------------------------------------

def test_baseline_save_copies_regular_files_only(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path / "cache"))
    run_dir = _idle_run(tmp_path / "results")
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    os.symlink("/dev/zero", logs / "zero")
    os.symlink("..", logs / "loop")
    os.symlink("/etc/passwd", logs / "passwd")
    os.mkfifo(logs / "fifo")
    (logs / "server.log").write_text("real log")
    notes: list[str] = []
    dest = baselines.save(open_run(run_dir, tmp_path / "results"), "main", tmp_path / "results", notes)
    copied = dest / run_dir.name
    assert (copied / "logs" / "server.log").read_text() == "real log"
    assert sorted(p.name for p in (copied / "logs").iterdir()) == ["server.log"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert len(notes) == 4 and all(n.startswith("skipped ") for n in notes), notes
    assert json.loads((dest / "baseline.json").read_text())["run_id"] == run_dir.name
    assert sorted(p.name for p in dest.parent.iterdir() if not p.name.endswith(".lock")) == ["main"]
    assert baselines.load("main", tmp_path / "results").dir == copied


def test_concurrent_baseline_saves_of_one_name(lbench_env):
    run_dir = _idle_run(Path(lbench_env["LBENCH_RESULTS_DIR"]))
    results: list = [None] * 3

    def save(i):
        results[i] = run_cli("baseline", "save", run_dir.name, "--name", "main", env=lbench_env, timeout=120)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results), [r.stderr[-500:] for r in results]
    root = baselines.root(Path(lbench_env["LBENCH_RESULTS_DIR"]))  # beside the results
    assert sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock")) == ["main"]
    assert baselines.load("main", Path(lbench_env["LBENCH_RESULTS_DIR"])).run_id == run_dir.name
