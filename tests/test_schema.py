"""One schema per table: applied by the store on write and read; docs/schema.md generated from it."""

import json
from pathlib import Path

import pandas as pd

from harness.analysis.swap import latency_table, summarize_frames
from harness.schema import TABLES
from harness.schema_doc import schema_document
from harness.store import RunWriter, open_run

REPO = Path(__file__).resolve().parents[1]


def test_docs_schema_is_generated_from_the_code():
    committed = (REPO / "docs" / "schema.md").read_text()
    assert committed == schema_document(), \
        "docs/schema.md is stale: regenerate it with `python -m harness.schema_doc > docs/schema.md`"


def test_every_table_documents_every_column():
    assert {"samples", "requests", "events", "memory", "verdicts"} <= set(TABLES)
    for schema in TABLES.values():
        for name, (dtype, doc) in schema.columns.items():
            pd.Series([], dtype=dtype)  # a real pandas dtype
            assert doc.strip(), f"{schema.name}.{name} has no meaning"


def test_store_types_swap_tables_on_write(tmp_path):
    w = RunWriter(tmp_path, "swap", {"config": {}})
    w.append({"index": 0, "model": "a", "resident_at_send": True, "t_send_s": 0.5, "latency_ms": 3,
              "http_status": 200, "error": None, "extra_column": "kept"}, "requests")
    w.append({"t_s": 0.1, "children_alive": 1, "rss_total_bytes": 1000}, "memory")
    w.finish("complete")
    req = pd.read_parquet(w.dir / "requests.parquet")
    assert str(req["index"].dtype) == "Int64" and str(req["resident_at_send"].dtype) == "boolean"
    assert req["latency_ms"].dtype == "float64" and req["extra_column"].iloc[0] == "kept"
    assert list(req.columns)[: len(TABLES["requests"].columns)] == list(TABLES["requests"].columns)
    mem = pd.read_parquet(w.dir / "memory.parquet")
    assert str(mem["children_alive"].dtype) == "Int64" and "mem_available_bytes" in mem


def test_old_run_missing_columns_reads_with_defaults(tmp_path):
    """A run written before a column existed (here: a journal without ttfb_ms, error_kind) reads the same."""
    w = RunWriter(tmp_path, "swap", {"config": {}})
    w.finish("interrupted")
    (w.dir / "requests.jsonl").write_text(json.dumps({"index": 0, "model": "a", "latency_ms": 5.0}) + "\n")
    run = open_run(w.dir, tmp_path)
    req = run.table("requests")
    assert req["ttfb_ms"].isna().all() and req["error_kind"].isna().all()
    assert str(req["http_status"].dtype) == "Int64"
    events = run.table("events")  # never written: empty, with the known columns
    assert events.empty and list(events.columns) == list(TABLES["events"].columns)


def test_unknown_residency_counts_as_cold():
    """Rows with resident_at_send null (e.g. built by a scenario) are cold, not dropped."""
    req = pd.DataFrame([{"index": 0, "model": "a", "latency_ms": 10.0, "resident_at_send": None, "error": None},
                        {"index": 1, "model": "a", "latency_ms": 1.0, "resident_at_send": True, "error": None}])
    table = latency_table(TABLES["requests"].apply(req)).set_index("class")
    assert table.loc["sent: not resident", "n"] == 1 and table.loc["sent: resident", "n"] == 1
    s = summarize_frames(req, pd.DataFrame(), pd.DataFrame(), models_max=1, model_sizes=[10])
    assert s.figures["n_requests"] == 2
    assert s.figures["served_as"]["unknown"] == 2  # no router log: nothing claims what the router did
