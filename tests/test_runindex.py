"""The index of runs: summaries cached by manifest identity, filters, damaged caches ignored."""

import json

from harness import runindex
from harness.runindex import INDEX_FILE, iter_records
from harness.store import RunWriter


def make(root, kind="idle", model="m", status="complete", build=11434, samples=2):
    w = RunWriter(root, kind, {"config": {}, "models": [{"label": model}], "engine": {"build_number": build},
                               "cells": [{"model": model, "setting": "keep-alive=default"}]})
    for i in range(samples):
        w.append({"phase": "warmup" if i == 0 else "measure", "latency_ms": 1.0, "model": model})
    w.finish(status)
    return w


def test_filters_select_by_kind_model_status_build_and_machine(tmp_path):
    a = make(tmp_path, model="a")
    b = make(tmp_path, kind="swap", model="b", build=11500)
    c = make(tmp_path, model="a", status="failed")
    ids = lambda **f: [e.run_id for e in iter_records(tmp_path, **f)]  # noqa: E731
    assert ids() == [a.run_id, b.run_id, c.run_id]
    assert ids(kind="idle") == [a.run_id, c.run_id] and ids(model="b") == [b.run_id]
    assert ids(status="failed") == [c.run_id] and ids(build=11500) == [b.run_id]
    assert ids(setting="keep-alive=default") == [a.run_id, b.run_id, c.run_id]
    machine = next(iter_records(tmp_path)).summary.machine_id
    assert len(ids(machine=machine)) == 3 and ids(machine="no-such-machine") == []
    assert ids(since=b.run_id[:16]) and ids(until="2000") == []


def test_a_listing_reads_each_unchanged_manifest_once(tmp_path, monkeypatch):
    make(tmp_path)
    make(tmp_path)
    assert len(list(iter_records(tmp_path))) == 2  # builds the cache
    reads = []
    real = runindex.read_record
    monkeypatch.setattr(runindex, "read_record", lambda p: reads.append(p) or real(p))
    entries = list(iter_records(tmp_path))
    assert len(entries) == 2 and reads == []  # summaries from the cache
    assert entries[0].summary.sample_counts == {"measure": 1, "warmup": 1, "failed": 0}
    manifest = entries[0].dir / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "status": "failed"}))
    assert [e.summary.status for e in iter_records(tmp_path)] == ["failed", "complete"] and len(reads) == 1


def test_a_tampered_cache_is_ignored_entry_by_entry(tmp_path):
    w = make(tmp_path)
    list(iter_records(tmp_path))
    cache = tmp_path / INDEX_FILE
    data = json.loads(cache.read_text())
    data["runs"][w.run_id]["summary"]["models"] = "not a list"
    cache.write_text(json.dumps(data))
    (entry,) = iter_records(tmp_path)
    assert entry.summary.models == ("m",)  # read from the manifest again
    cache.write_text("[" * 10_000)
    assert [e.run_id for e in iter_records(tmp_path)] == [w.run_id]


def test_lbench_runs_shows_the_newest_and_says_how_many_are_hidden(tmp_path):
    import os
    import subprocess
    import sys

    runs = [make(tmp_path) for _ in range(3)]
    out = subprocess.run([sys.executable, "-m", "harness", "runs", "--results", str(tmp_path), "--limit", "2"],
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert runs[0].run_id not in out.stdout and runs[2].run_id in out.stdout
    text = " ".join(out.stdout.split())
    assert "1 older run not shown" in text and "1 samples" in text and "warm-up)" in text
