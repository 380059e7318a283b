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
