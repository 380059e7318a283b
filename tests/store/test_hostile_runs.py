"""Run directories from elsewhere are untrusted: every damaged or hostile one is refused in one line
(BadInput, exit 2) by the commands that name it and skipped, with its reason, by listings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import BadInput
from harness.record import RunRecord, parse_record
from harness.runindex import Skipped, iter_records
from harness.store import RunWriter, open_run


def good_run(root: Path) -> Path:
    w = RunWriter(root, "idle", {"config": {"seed": 1}, "models": [{"label": "m", "sha256": "ab"}], "cells": []})
    for i in range(3):
        w.append({"cell": 0, "model": "m", "setting": "s", "phase": "measure", "pause_requested_s": 0.0,
                  "latency_ms": 1.0 + i, "rep": i, "seq": i})
    w.finish("complete")
    return w.dir


def hostile(root: Path, name: str, manifest: object | str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (d / "manifest.json").write_text(text)
    return d


BASE = {"kind": "idle", "status": "complete", "run_id": "x"}
CASES = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "models-text": {**BASE, "models": "abc"},
    "cells-int": {**BASE, "cells": 5},
    "host-list": {**BASE, "host": [1, 2]},
    "config-list": {**BASE, "config": []},
    "status-object": {**BASE, "status": {}},
    "status-unknown": {**BASE, "status": "pwned"},
    "huge-int": '{"kind": "idle", "status": "complete", "n_samples": ' + "9" * 5000 + "}",
    "int-too-wide": {**BASE, "n_samples": 2 ** 70},
    "kind-missing": {"status": "complete"},
    "not-object": [1, 2, 3],
    "newer-schema": {**BASE, "schema_version": 99},
    "bad-utf8": b"\xff\xfe{}".decode("latin-1"),
    "rows-text": {**BASE, "rows": {"samples": "many"}},
    "argv-ints": {**BASE, "argv": [1, 2]},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_manifest_is_refused_in_one_line(tmp_path, name):
    d = hostile(tmp_path, name, CASES[name])
    if name == "bad-utf8":
        (d / "manifest.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(BadInput) as err:
        open_run(d, tmp_path)
    assert "\n" not in err.value.what and str(d) in (err.value.where or "")


def test_one_bad_run_does_not_break_the_listing(tmp_path):
    ok = good_run(tmp_path)
    for name, manifest in CASES.items():
        hostile(tmp_path, f"20260101T000000Z-idle-{name}", manifest)
    skipped: list[Skipped] = []
    listed = list(iter_records(tmp_path, quiet=True, skipped=skipped))
    assert [e.dir for e in listed] == [ok]
    assert len(skipped) == len(CASES) and all(s.reason and "\n" not in s.reason for s in skipped)


def test_lbench_runs_lists_the_good_and_names_the_bad(tmp_path):
    good_run(tmp_path)
    hostile(tmp_path, "20260101T000000Z-idle-bad", {**BASE, "cells": 5})
    out = subprocess.run([sys.executable, "-m", "harness", "runs", "--results", str(tmp_path)],
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "skipped 20260101T000000Z-idle-bad: the run's manifest field 'manifest.cells'" in " ".join(out.stdout.split())
    assert "3 samples" in out.stdout


def test_a_fifo_or_device_as_a_table_is_refused_not_read(tmp_path):
    d = good_run(tmp_path)
    (d / "samples.parquet").unlink()
    (d / "samples.jsonl").unlink()
    os.mkfifo(d / "samples.jsonl")  # reading it would block forever
    with pytest.raises(BadInput, match="not a regular file"):
        open_run(d, tmp_path).table("samples")
    (d / "samples.jsonl").unlink()
    (d / "samples.jsonl").symlink_to("/dev/zero")  # would grow memory without bound
    with pytest.raises(BadInput, match="symbolic link"):
        open_run(d, tmp_path).table("samples")


def test_a_symlinked_manifest_is_refused(tmp_path):
    d = good_run(tmp_path)
    target = tmp_path / "elsewhere.json"
    target.write_text((d / "manifest.json").read_text())
    (d / "manifest.json").unlink()
    (d / "manifest.json").symlink_to(target)
    with pytest.raises(BadInput, match="symbolic link"):
        open_run(d, tmp_path)


def test_a_mistyped_column_is_refused(tmp_path):
    d = good_run(tmp_path)
    (d / "samples.parquet").unlink()
    with (d / "samples.jsonl").open("a") as fh:
        fh.write(json.dumps({"phase": "measure", "latency_ms": "fast"}) + "\n")
    with pytest.raises(BadInput, match="wrong type"):
        open_run(d, tmp_path).table("samples")


def test_a_huge_manifest_is_refused_without_reading_it(tmp_path, monkeypatch):
    import harness.untrusted as untrusted

    d = good_run(tmp_path)
    monkeypatch.setattr(untrusted, "MAX_JSON_BYTES", 100)
    with pytest.raises(BadInput, match="over lbench's limit"):
        from harness.record import read_record

        read_record(d / "manifest.json")


def test_an_overlong_run_reference_is_a_clear_error(tmp_path):
    good_run(tmp_path)
    with pytest.raises(BadInput, match="no run"):
        open_run("x" * 300, tmp_path)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)
KEYS = st.sampled_from(["kind", "status", "run_id", "host", "engine", "models", "cells", "quality", "config", "rows",
                        "argv", "n_samples", "schema_version", "started_at", "error"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, JSON, max_size=8), st.sampled_from(["idle", "swap", "calibrate", "repro"]))
def test_any_manifest_reads_as_a_record_or_is_refused(manifest, kind):
    manifest.setdefault("kind", kind)
    try:
        record = parse_record(manifest, "manifest.json")
    except BadInput as exc:
        assert exc.what and "\n" not in exc.what
        return
    assert isinstance(record, RunRecord)
    # every typed part reads without raising
    _ = (record.machine.id, record.model_labels, record.settings, record.duration_s, record.to_manifest(),
         [c.self_check for c in record.cells], record.quality.warnings)


def test_a_tampered_analysis_is_recomputed_not_trusted(tmp_path):
    from harness.analysis.persisted import ANALYSIS_FILE, load_analysis, with_analysis

    d = good_run(tmp_path)
    run = open_run(d, tmp_path)
    stored = load_analysis(run)
    tampered = {**stored, "summary_latency": {"columns": ["x"], "records": "not a list"}}
    (d / ANALYSIS_FILE).write_text(json.dumps(tampered))

    def use(analysis):
        return len(analysis["summary_latency"]["records"][0])  # a reader that trusts the shape

    assert with_analysis(run, use) >= 1  # recomputed from the tables, then read
    (d / ANALYSIS_FILE).write_text(json.dumps({**stored, "run_id": "someone-else"}))
    assert load_analysis(run)["run_id"] == run.run_id  # another run's analysis is not taken
