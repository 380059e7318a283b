import json

import pytest

from harness.errors import BadInput
from harness.schema import SAMPLE_COLUMNS
from harness.runindex import iter_records
from harness.store import Run, RunWriter, new_run_id, open_run


def test_run_ids_sort_by_time():
    from datetime import datetime, timezone

    a = new_run_id("idle", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    b = new_run_id("idle", datetime(2026, 1, 2, 3, 4, 6, tzinfo=timezone.utc))
    assert a.startswith("20260102T030405Z-idle-") and a < b


def test_journal_then_parquet(tmp_path):
    w = RunWriter(tmp_path, "idle", {"config": {}})
    w.append({"phase": "measure", "rep": 0, "latency_ms": 1.5, "error": None})
    # the journal is on disk before the run ends
    lines = (w.dir / "samples.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["latency_ms"] == 1.5
    assert json.loads((w.dir / "manifest.json").read_text())["status"] == "running"
    w.finish("complete")
    run = open_run(w.run_id, tmp_path)
    assert run.complete and run.record.n_samples == 1 and run.record.schema_version == 3
    frame = run.table()
    assert list(frame.columns)[: len(SAMPLE_COLUMNS)] == list(SAMPLE_COLUMNS)
    assert str(frame["rep"].dtype) == "Int64"


def test_killed_run_is_readable_from_the_journal(tmp_path):
    w = RunWriter(tmp_path, "idle", {})
    w.append({"phase": "measure", "latency_ms": 2.0})
    w.append({"phase": "measure", "latency_ms": 3.0})
    w._journals["samples"].flush()
    with open(w.dir / "samples.jsonl", "a") as fh:
        fh.write('{"phase": "meas')  # torn line, as a SIGKILL can leave
    run = open_run(w.dir, tmp_path)
    assert not run.complete
    assert list(run.table()["latency_ms"]) == [2.0, 3.0]


def test_open_run_by_prefix_latest_and_errors(tmp_path):
    a = RunWriter(tmp_path, "idle", {})
    a.finish("complete")
    assert open_run("latest", tmp_path).run_id == a.run_id
    assert open_run(a.run_id[-4:], tmp_path).run_id == a.run_id
    with pytest.raises(BadInput, match="no run"):
        open_run("nope", tmp_path)
    assert [Run(e.dir, e.record).run_id for e in iter_records(tmp_path, quiet=True)] == [a.run_id]


@pytest.mark.parametrize("text,fragment", [
    ("{}", "empty or not a JSON object"), ("[1]", "empty or not a JSON object"), ("{\"x\": 1}", "no 'kind'"),
    ("{\"kind\": \"idle\", \"schema_version\": 99}", "schema_version 99"), ("{not json", "not valid JSON"),
])
def test_damaged_manifest_is_refused_clearly(tmp_path, text, fragment):
    from harness.errors import BadInput
    from harness.store import open_run

    run = tmp_path / "r1"
    run.mkdir()
    (run / "manifest.json").write_text(text)
    with pytest.raises(BadInput, match=fragment.replace("(", r"\(")):
        open_run(run, tmp_path)


WRITER_THEN_WAIT = """
import sys
from pathlib import Path
from harness.store import RunWriter
w = RunWriter(Path(sys.argv[1]), "idle", {"config": {"seed": 0}, "models": [], "cells": []})
for i in range(3):
    w.append({"phase": "measure", "latency_ms": 1.0 + i, "model": "m", "setting": "s", "pause_requested_s": 0.0})
print(w.dir, flush=True)
sys.stdin.read()  # holds the run open until killed
"""


def test_a_killed_writer_reads_abandoned_in_runs_report_and_history_add(lbench_env, tmp_path):
    """The store's own writer in a process SIGKILLed mid-run (the run-store half of
    tests/cli/test_interrupt.py's engine test, which kills a real sweep): its manifest says 'running'
    for ever; every reader on this machine says 'abandoned'."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import REPO, run_cli

    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-c", WRITER_THEN_WAIT, str(results)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, **lbench_env})
    run_dir = results.parent / "results" / os.path.basename(proc.stdout.readline().strip())
    r = run_cli("runs", "--results", str(results), env=lbench_env)
    assert "running" in next(x for x in r.stdout.splitlines() if run_dir.name in x), r.stdout  # alive: running
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"
    r = run_cli("runs", "--results", str(results), env=lbench_env)
    line = next(x for x in r.stdout.splitlines() if run_dir.name in x)
    assert "abandoned" in line and "running" not in line, r.stdout
    assert run_dir.name in run_cli("runs", "--results", str(results), "--status", "abandoned", env=lbench_env).stdout
    r = run_cli("report", run_dir.name, "--results", str(results), env=lbench_env)
    assert r.returncode == 0 and "(status: abandoned)" in (run_dir / "report.html").read_text(), r.stderr
    r = run_cli("history", "add", str(run_dir), "--archive", str(tmp_path / "archive"), env=lbench_env)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and "abandoned" in text and f"pid {proc.pid}" in text, r.stdout + r.stderr


def test_tables_reach_arrow_as_a_buffer_not_a_python_file(tmp_path, monkeypatch):
    """Arrow reads a Python file object from its IO threads, which take the GIL; one still doing so
    when the interpreter exits aborts the process ("terminate called without an active exception",
    exit -6: seen once in three suites under two CPU hogs, after `lbench repro` had written
    everything; apache/arrow#34314). The store hands Arrow the bytes (a native buffer) instead."""
    import pandas as pd
    import pyarrow as pa

    w = RunWriter(tmp_path, "idle", {"config": {}})
    w.append({"phase": "measure", "rep": 0, "latency_ms": 1.5, "error": None})
    w.finish("complete")
    seen: list[object] = []
    real = pd.read_parquet

    def spy(source, *args, **kwargs):
        seen.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pd, "read_parquet", spy)
    frame = open_run(w.run_id, tmp_path).table()
    assert frame["latency_ms"].tolist() == [1.5]
    assert seen and all(isinstance(s, pa.NativeFile) for s in seen), [type(s) for s in seen]
