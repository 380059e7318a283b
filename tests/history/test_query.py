"""DuckDB over the archive: the views and the named series against answers computed another way."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli
from history_runs import clone_run, real_runs, trusted  # noqa: F401 (a fixture)

from harness.analysis.persisted import load_analysis
from harness.analysis.stats import measured
from harness.analysis.intervals import median_interval
from harness.attest import sign_run
from harness.errors import BadInput
from harness.history.catalog import add_runs
from harness.analysis.intervals import median_ranks
from harness.history.query import connect, run_query
from harness.history.series import SERIES, series_rows
from harness.store import Run
from harness.record import read_record

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def archive(real_runs, tmp_path_factory):  # noqa: F811
    """The two real runs and two copies of the idle run as run on other builds (latencies x2 on 11500)."""
    base = tmp_path_factory.mktemp("history-query")
    staged = base / "staged"
    staged.mkdir()
    clone_run(real_runs["idle"], staged, 1, build=11000)
    clone_run(real_runs["idle"], staged, 2, build=11500, scale=2.0)
    archive = base / "archive"
    added, refused = add_runs(trusted(archive), [real_runs["idle"], real_runs["swap"], staged])
    assert refused == [] and len(added) == 4
    return archive


def test_runs_view_holds_each_record(archive, real_runs):  # noqa: F811
    runs = run_query(archive, "SELECT run_id, machine_id, kind, status, engine_build, models FROM runs ORDER BY run_id")
    assert len(runs) == 4
    record = read_record(real_runs["swap"] / "manifest.json")
    row = runs[runs["run_id"] == record.run_id].iloc[0]
    assert row["machine_id"] == record.machine.id and row["kind"] == "swap"
    assert row["engine_build"] == record.engine.build_number and list(row["models"]) == list(record.model_labels)
    assert sorted(runs["engine_build"].tolist()) == sorted([11000, 11500, record.engine.build_number,
                                                           record.engine.build_number])


def test_samples_view_matches_the_tables(archive, real_runs):  # noqa: F811
    run = Run(real_runs["idle"], read_record(real_runs["idle"] / "manifest.json"))
    table = run.table("samples")
    got = run_query(archive, f"SELECT count(*) AS n, median(latency_ms) AS med FROM samples "
                             f"WHERE run_id = '{run.run_id}' AND phase = 'measure' AND error IS NULL")
    good = measured(table)
    assert got["n"].iloc[0] == len(good)
    assert got["med"].iloc[0] == pytest.approx(float(np.median(good["latency_ms"])))
    # a copy's rows are named by its directory, whatever the file's own run_id column says
    per_run = run_query(archive, "SELECT run_id, count(*) AS n FROM samples GROUP BY run_id")
    assert len(per_run) == 3 and per_run["n"].nunique() == 1
    requests = run_query(archive, "SELECT count(*) AS n FROM requests")
    assert requests["n"].iloc[0] == len(Run(real_runs["swap"], read_record(real_runs["swap"] / "manifest.json"))
                                        .table("requests"))


def test_median_ranks_are_median_interval_s():
    ranks = median_ranks(300).set_index("n")["k"]
    for n in (5, 6, 7, 11, 50, 99, 300):
        x = np.arange(1, n + 1, dtype=float)
        lo, hi, _ = median_interval(x)
        if np.isnan(lo):
            assert pd.isna(ranks[n])
        else:
            assert (x[int(ranks[n]) - 1], x[n - int(ranks[n])]) == (lo, hi)


def test_warm_series_is_the_median_of_warm_requests_with_its_interval(archive, real_runs):  # noqa: F811
    con = connect(archive)
    rows = series_rows(con, "idle_warm_p50", model="tiny-q8")
    assert len(rows) == 3 and set(rows["series"]) == {"idle_warm_p50"}
    run = Run(real_runs["idle"], read_record(real_runs["idle"] / "manifest.json"))
    analysis = load_analysis(run)
    (wake,) = [w for w in analysis["wake"] if w["model"] == "tiny-q8"]
    good = measured(run.table("samples"))
    # the run's own wake model bounds the warm regime (the report's warm median is this one)
    warm = good[good["pause_requested_s"] <= wake["last_warm_s"]] if wake["has_step"] else good
    x = warm["latency_ms"].to_numpy(dtype=float)
    row = rows[rows["run_id"] == run.run_id].iloc[0]
    assert row["value"] == pytest.approx(float(np.median(x)))
    lo, hi, _ = median_interval(x)
    assert row["n"] == x.size
    assert (pd.isna(row["lo"]) and np.isnan(lo)) or (row["lo"], row["hi"]) == pytest.approx((lo, hi))
    by_build = rows.set_index("build")["value"]
    assert by_build[11500] == pytest.approx(2 * by_build[11000])  # the copy scaled x2
    con.close()


def test_swap_series_come_from_the_analysis(archive, real_runs):  # noqa: F811
    con = connect(archive)
    run = Run(real_runs["swap"], read_record(real_runs["swap"] / "manifest.json"))
    analysis = load_analysis(run)
    peak = series_rows(con, "peak_children")
    assert peak["value"].tolist() == [analysis["figures"]["peak_children"]]
    loads = series_rows(con, "swap_load_ms", model="tiny-q8")
    swaps = pd.DataFrame(analysis["swaps"]["records"], columns=analysis["swaps"]["columns"])
    assert loads["value"].iloc[0] == pytest.approx(float(swaps[swaps["model"] == "tiny-q8"]["spawn_to_loaded_ms"]
                                                         .median()))
    failed = series_rows(con, "swap_failed_pct")
    requests = run.table("requests")
    assert failed["value"].tolist() == [pytest.approx(100.0 * requests["error"].notna().mean())]
    assert failed["n"].tolist() == [len(requests)] and failed["lo"].iloc[0] <= failed["value"].iloc[0] \
        <= failed["hi"].iloc[0] and 0 <= failed["lo"].iloc[0] and failed["hi"].iloc[0] <= 100
    for name in SERIES:  # every named series runs and returns its columns
        assert list(series_rows(con, name).columns)[:3] == ["series", "run_id", "machine_id"]
    con.close()


@pytest.mark.parametrize("sql", ["DELETE FROM runs", "CREATE TABLE x AS SELECT 1", "SELECT 1; DROP VIEW runs",
                                 "COPY runs TO '/tmp/x.csv'", "ATTACH 'x.db'", "SET threads = 1",
                                 "PRAGMA version"])
def test_only_select_is_run(archive, sql):
    with pytest.raises(BadInput):
        run_query(archive, sql)


def test_query_command_prints_csv_and_json(archive):
    sql = "WITH r AS (SELECT * FROM runs) SELECT kind, count(*) AS n FROM r GROUP BY kind ORDER BY kind"
    r = run_cli("history", "query", sql, "--archive", str(archive), "--csv")
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(io.StringIO(r.stdout)).to_dict("records") == [{"kind": "idle", "n": 3},
                                                                    {"kind": "swap", "n": 1}]
    r = run_cli("history", "query", "-", "--series", "idle_warm_p50", "--archive", str(archive), "--json")
    assert r.returncode == 0, r.stderr
    assert {row["build"] for row in json.loads(r.stdout)} >= {11000, 11500}
    r = run_cli("history", "query", "DROP VIEW runs", "--archive", str(archive))
    assert r.returncode == 2 and "only SELECT" in r.stderr


def test_a_history_baseline_of_one_run_per_build_is_refused(archive):
    """Each build here has one run: no between-run spread, so no baseline (the window rule and
    the build choice are tested on constructed archives in test_gate_hook.py)."""
    from harness.history.gate_hook import history_baseline

    for build in (None, 11000, 11500):
        with pytest.raises(BadInput, match="2 or more"):
            history_baseline(archive, "history:idle_warm_p50", model="tiny-q8", window=5, build=build)
    with pytest.raises(BadInput):
        history_baseline(archive, "history:no_such_series")
    with pytest.raises(BadInput):
        history_baseline(archive, "baseline:main")


def test_the_failure_series_counts_failed_storms_and_the_others_do_not(real_runs, tmp_path):  # noqa: F811
    """A storm judged failed (all requests failed, a deadline passed) is what swap_failed_pct is for:
    it keeps its point there, and only there; a storm with requests in flight at once is its own
    setting (concurrency in the label)."""
    staged = tmp_path / "staged"
    staged.mkdir()
    failed = clone_run(real_runs["swap"], staged, 7, build=11000)
    manifest = json.loads((failed / "manifest.json").read_text())
    manifest.update(status="failed", error="all 6 requests failed (load_failed x6)")
    (failed / "manifest.json").write_text(json.dumps(manifest, indent=1))
    concurrent = clone_run(real_runs["swap"], staged, 8, build=11000)
    manifest = json.loads((concurrent / "manifest.json").read_text())
    manifest["config"]["concurrency"] = 2
    (concurrent / "manifest.json").write_text(json.dumps(manifest, indent=1))
    for run in (failed, concurrent):
        sign_run(run)  # the runner signs the runs as it wrote them
    archive = tmp_path / "archive"
    added, refused = add_runs(trusted(archive), [staged])
    assert refused == [] and len(added) == 2
    con = connect(archive)
    rows = series_rows(con, "swap_failed_pct")
    assert sorted(rows["run_id"]) == sorted([failed.name, concurrent.name])
    assert set(rows["setting"]) == {"models-max=1,pattern=round-robin",
                                    "models-max=1,pattern=round-robin,concurrency=2"}
    assert failed.name not in set(series_rows(con, "swap_load_ms")["run_id"])
    assert failed.name not in set(series_rows(con, "peak_children")["run_id"])
    con.close()


def test_a_series_too_wide_for_80_columns_prints_one_block_per_row(archive):
    """At 80 columns a named series' 12 columns do not fit: each row is printed as `column | value`
    lines (psql's expanded display), every run id whole; a narrow query stays a table."""
    r = run_cli("history", "query", "-", "--series", "idle_warm_p50", "--archive", str(archive), columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "-[ row 1 ]" in lines[0] and max(len(line) for line in lines) <= 80
    shown = [line.split(" | ", 1)[1] for line in lines if line.startswith("run_id | ")]
    rows = json.loads(run_cli("history", "query", "-", "--series", "idle_warm_p50", "--archive", str(archive),
                              "--json").stdout)
    assert shown == [row["run_id"] for row in rows] and len(shown) >= 2
    r = run_cli("history", "query", "SELECT kind, count(*) AS n FROM runs GROUP BY kind ORDER BY kind",
                "--archive", str(archive), columns=80)
    assert r.returncode == 0 and "-[ row" not in r.stdout and "idle" in r.stdout
