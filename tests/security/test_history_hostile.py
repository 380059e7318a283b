"""The history archive as an attack surface (issue 35): forged runs, tables that expand without
bound or carry the wrong types, queries that reach past the archive.  Every hostile input ends in
exit 2 with what, where and what to do, and the archive unchanged; a real regression stays exit 1.

The runs are made by the store's own writer (``conftest.make_history_run``: the run-directory
format lbench writes, signed by this test session's runner key); forged runs are copies of them
with host facts kept and latencies scaled, as the issue's attacker made them."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_history_run, run_cli, trusted

from harness.attest import sign_run, verify_run
from harness.errors import BadInput
from harness.history.archive import add_run, run_dirs
from harness.history.catalog import add_runs

REF = "history:idle_warm_p50"


def _gate(env, archive, cands):
    return run_cli("gate", "--baseline", REF, *[x for c in cands for x in ("--candidate", str(c))],
                   "--archive", str(archive), env=env)


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if ".catalog" not in p.parts
                  and p.name != ".gate-state.json")


@pytest.fixture
def genuine(lbench_env, tmp_path):
    """8 genuine runs of build 100 in a trusted archive, and 3 candidate runs of build 102 that are
    6x slower (a real regression)."""
    made = tmp_path / "made"
    dirs = [make_history_run(made, n, build=100, seed=3) for n in range(8)]
    archive = trusted(tmp_path / "archive")
    assert add_runs(archive, dirs)[1] == []
    root = Path(lbench_env["LBENCH_RESULTS_DIR"])
    cands = [make_history_run(root, 100 + i, build=102, scale=6.0, seed=9) for i in range(3)]
    return archive, dirs, cands


def _forge(src: Path, dest_root: Path, n: int, *, build: int, scale: float) -> Path:
    """A copy of a genuine run, host facts kept, newer start time, latencies scaled, new id."""
    manifest = json.loads((src / "manifest.json").read_text())
    run_id = f"20260101T0{5 + n // 60}{n % 60:02d}00Z-idle-f{n:03x}"
    dest = dest_root / run_id
    shutil.copytree(src, dest)
    for name in ("signature.json", "analysis.json"):
        (dest / name).unlink(missing_ok=True)
    manifest.update(run_id=run_id, started_at=f"2026-01-01T0{5 + n // 60}:{n % 60:02d}:00.000+00:00")
    manifest["engine"]["build_number"] = build
    (dest / "manifest.json").write_text(json.dumps(manifest))
    frame = pd.read_parquet(dest / "samples.parquet")
    frame["run_id"] = run_id
    frame["latency_ms"] = frame["latency_ms"] * scale
    frame.to_parquet(dest / "samples.parquet", index=False)
    (dest / "samples.jsonl").unlink(missing_ok=True)
    return dest


def test_the_issues_baseline_poisoning_keeps_the_regression(genuine, lbench_env, tmp_path):
    archive, dirs, cands = genuine
    first = _gate(lbench_env, archive, cands)
    assert first.returncode == 1, first.stdout + first.stderr  # the 6x regression, against the genuine runs
    forged = [_forge(dirs[-1], tmp_path / "forged", n, build=100, scale=6.0) for n in range(7)]
    before = _tree(archive)
    # unsigned forgeries: refused, exit 2, nothing written
    r = run_cli("history", "add", *map(str, forged), "--archive", str(archive), env=lbench_env)
    assert r.returncode == 2 and "not signed by a runner" in r.stderr and "--allow-unsigned" in r.stderr, r.stderr
    assert _tree(archive) == before
    # let in on purpose: marked untrusted, never a baseline
    r = run_cli("history", "add", *map(str, forged), "--archive", str(archive), "--allow-unsigned", env=lbench_env)
    assert r.returncode == 0 and "UNSIGNED" in r.stdout, r.stdout + r.stderr
    second = _gate(lbench_env, archive, cands)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "not signed by a runner the archive trusts" in " ".join(second.stdout.split())


def test_runs_a_trusted_runner_adds_after_a_gate_never_become_the_whole_baseline(genuine, lbench_env, tmp_path):
    """An insider (a trusted key) adds two runs claiming the build just below the candidate's: both
    are new since the last gate, so they do not replace the runs it had (exit 2, said why)."""
    archive, dirs, cands = genuine
    assert _gate(lbench_env, archive, cands).returncode == 1
    forged = [_forge(dirs[-1], tmp_path / "forged", n, build=101, scale=6.0) for n in range(2)]
    for d in forged:
        sign_run(d)
    assert add_runs(archive, forged)[1] == []
    r = _gate(lbench_env, archive, cands)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stdout + r.stderr
    assert "build 101 is held only by runs added since the last gate" in text and "--build" in text, text
    assert _gate(lbench_env, archive, cands).returncode == 2  # a refused gate moves no mark
    named = run_cli("gate", "--baseline", REF, *[x for c in cands for x in ("--candidate", str(c))], "--archive",
                    str(archive), "--build", "100", env=lbench_env)  # a person names the genuine build
    assert named.returncode == 1, named.stdout + named.stderr


def test_the_drift_check_never_drops_the_genuine_runs_for_new_ones(genuine, lbench_env, tmp_path):
    """Seven trusted forgeries of the genuine build, newer start times, 6x slower: the drift check
    finds the change and would keep only them; refused instead (exit 2), or still the regression."""
    archive, dirs, cands = genuine
    assert _gate(lbench_env, archive, cands).returncode == 1
    forged = [_forge(dirs[-1], tmp_path / "forged", n, build=100, scale=6.0) for n in range(7)]
    for d in forged:
        sign_run(d)
    assert add_runs(archive, forged)[1] == []
    r = _gate(lbench_env, archive, cands)
    text = " ".join(r.stderr.split())
    assert r.returncode in (1, 2), r.stdout + r.stderr
    if r.returncode == 2:
        assert "the drift check would drop" in text and "runs added since the last gate" in text, text


def _set_catalog_version(archive: Path, version: str) -> None:
    """The catalog files as an older lbench wrote them (their version stamp), so the next read rebuilds them."""
    for name in ("runs.parquet", "metrics.parquet"):
        path = archive / ".catalog" / name
        table = pq.read_table(path)
        pq.write_table(table.replace_schema_metadata({b"lbench_catalog": version.encode()}), path)


@pytest.mark.parametrize("rebuild", ["catalog deleted", "catalog version bumped"])
def test_the_gate_decides_as_before_after_a_catalog_rebuild(genuine, lbench_env, tmp_path, rebuild):
    """docs/history.md tells archive keepers to delete .catalog/ after signing old runs, and an
    upgrade rebuilds it: the runs it had are still the runs the last gate had, not new ones."""
    archive, dirs, cands = genuine
    first = _gate(lbench_env, archive, cands)
    assert first.returncode == 1, first.stdout + first.stderr  # the regression, against the genuine runs
    times = {r["run_id"]: r["cataloged_at"] for r in pq.read_table(archive / ".catalog" / "runs.parquet").to_pylist()}
    if rebuild == "catalog deleted":
        shutil.rmtree(archive / ".catalog")
    else:
        _set_catalog_version(archive, "5")
    again = _gate(lbench_env, archive, cands)
    assert again.returncode == 1, again.stdout + again.stderr  # the same decision, not "added since the last gate"
    assert "added since the last gate" not in again.stderr
    rebuilt = {r["run_id"]: r["cataloged_at"] for r in pq.read_table(archive / ".catalog" / "runs.parquet").to_pylist()}
    assert rebuilt == times  # each run keeps the time it first entered the catalog
    # and the rule still holds after the rebuild: runs added now are new to the gate
    forged = [_forge(dirs[-1], tmp_path / "forged", n, build=101, scale=6.0) for n in range(2)]
    for d in forged:
        sign_run(d)
    assert add_runs(archive, forged)[1] == []
    shutil.rmtree(archive / ".catalog")
    r = _gate(lbench_env, archive, cands)
    assert r.returncode == 2 and "build 101 is held only by runs added since the last gate" in " ".join(
        r.stderr.split()), r.stdout + r.stderr


def test_a_changed_signed_run_is_refused(genuine, tmp_path):
    archive, dirs, _ = genuine
    copy = tmp_path / "copy" / "20260101T090000Z-idle-beef"
    shutil.copytree(dirs[0], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["run_id"] = copy.name
    (copy / "manifest.json").write_text(json.dumps(manifest))  # the signature covers the old bytes
    before = _tree(archive)
    with pytest.raises(BadInput, match="changed after the run was signed"):
        add_run(archive, copy)
    assert _tree(archive) == before
    assert verify_run(dirs[0]) is not None


def test_an_unknown_runner_is_refused_until_trusted(lbench_env, tmp_path):
    run = make_history_run(tmp_path / "made", 0)
    archive = tmp_path / "fresh"
    r = run_cli("history", "add", str(run), "--archive", str(archive), env=lbench_env)
    assert r.returncode == 2 and "which the archive does not trust" in r.stderr and "trust add" in r.stderr
    assert not list(run_dirs(archive))
    key = run_cli("history", "key", env=lbench_env).stdout.strip()
    assert run_cli("history", "trust", "add", key, "--label", "ci", "--archive", str(archive),
                   env=lbench_env).returncode == 0
    assert run_cli("history", "add", str(run), "--archive", str(archive), env=lbench_env).returncode == 0
    assert run_cli("history", "trust", "add", "not-a-key", "--archive", str(archive), env=lbench_env).returncode == 2


def _resign_with_table(run: Path, table: pa.Table, **write) -> None:
    pq.write_table(table, run / "samples.parquet", **write)
    (run / "samples.jsonl").unlink(missing_ok=True)
    (run / "analysis.json").unlink(missing_ok=True)
    sign_run(run)  # signed by a trusted runner: the bounds hold anyway


def test_a_small_table_that_declares_millions_of_rows_is_refused_before_it_is_read(lbench_env, tmp_path):
    run = make_history_run(tmp_path / "made", 0)
    rows = 3_000_000  # over the bound; a run-length-encoded column compresses to almost nothing
    big = pa.table({"run_id": pa.array([run.name] * 1, pa.string()).take(pa.array([0] * rows)),
                    "latency_ms": pa.array([1.0] * rows)})
    _resign_with_table(run, big, compression="zstd")
    assert (run / "samples.parquet").stat().st_size < 2_000_000
    archive = trusted(tmp_path / "archive")
    r = run_cli("history", "add", str(run), "--archive", str(archive), env=lbench_env)
    assert r.returncode == 2 and "declares 3,000,000 rows" in r.stderr, r.stderr
    assert not list(run_dirs(archive)) and not list(archive.glob("*/.adding-*"))
    assert run_cli("history", "list", "--archive", str(archive), env=lbench_env).returncode == 0


def test_a_wrong_typed_table_is_refused_and_queries_over_the_archive_still_work(lbench_env, tmp_path):
    good = make_history_run(tmp_path / "made", 0)
    bad = make_history_run(tmp_path / "made", 1)
    frame = pd.read_parquet(bad / "samples.parquet")
    frame["latency_ms"] = frame["latency_ms"].astype(str)
    _resign_with_table(bad, pa.Table.from_pandas(frame, preserve_index=False))
    archive = trusted(tmp_path / "archive")
    added, refused = add_runs(archive, [good, bad])
    assert [a.run_id for a in added] == [good.name]
    assert len(refused) == 1 and "column latency_ms of table samples is large_string" in refused[0].reason
    r = run_cli("history", "query", "SELECT count(*) AS n, avg(latency_ms) AS mean FROM samples", "--archive",
                str(archive), "--csv", env=lbench_env)
    assert r.returncode == 0 and r.stdout.splitlines()[1].startswith("20,"), r.stdout + r.stderr


@pytest.mark.parametrize("sql, said", [
    ("SELECT * FROM read_text('/etc/passwd')", "no other file, URL or extension"),
    ("SELECT * FROM runs, read_text('../../../etc/passwd')", "no other file, URL or extension"),
    ("SELECT * FROM read_csv('/etc/passwd', sep=':')", "no other file, URL or extension"),
    ("SELECT * FROM read_blob('/etc/hostname')", "no other file, URL or extension"),
    ("SELECT * FROM glob('/home/**')", "no other file, URL or extension"),
    ("SELECT * FROM read_parquet('/tmp/*.parquet')", "no other file, URL or extension"),
    ("SELECT * FROM read_csv('https://example.com/x.csv')", "no other file, URL or extension"),
    ("SELECT length(repeat('x', 2000000000)) AS n", "memory"),
    ("SELECT * FROM range(60000000) t(i) ORDER BY random()", "Out of Memory|time bound"),  # whichever comes first
    ("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t", "time bound of 3 s"),
    ("DROP VIEW runs", "SELECT"),
])
def test_a_query_reaches_nothing_but_the_archive(lbench_env, tmp_path, sql, said):
    archive = trusted(tmp_path / "archive")
    assert add_runs(archive, [make_history_run(tmp_path / "made", 0)])[1] == []
    cwd = tmp_path / "caller"
    cwd.mkdir()
    home = Path(lbench_env.get("HOME", str(Path.home()))) / ".duckdb"
    had_home = home.exists()
    r = run_cli("history", "query", sql, "--archive", str(archive), "--timeout", "3", env=lbench_env, cwd=cwd)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(said, " ".join(r.stderr.split())) and "Traceback" not in r.stderr, r.stderr
    assert list(cwd.iterdir()) == []  # no spill, nothing written where it was called
    assert home.exists() == had_home  # no extension installed


def _wait_for_query_child(p) -> None:
    """Until the query's child process ignores SIGINT (its first step, harness/history/confined.py):
    from then on a Ctrl-C to the group reaches the parent only.  Read from /proc (SigIgn), an event."""
    import psutil

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        for child in psutil.Process(p.pid).children():
            try:
                if "resource_tracker" in " ".join(child.cmdline()):  # multiprocessing's helper ignores SIGINT too
                    continue
                status = Path(f"/proc/{child.pid}/status").read_text()
            except (OSError, psutil.Error):
                continue
            ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
            if ignored & (1 << (signal.SIGINT - 1)):
                return
        time.sleep(0.05)
    raise AssertionError("the query's child never started")


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_query_stops_on_a_signal_with_a_clean_exit(lbench_env, tmp_path, how):
    import os
    import signal
    import subprocess
    import sys
    import time

    archive = trusted(tmp_path / "archive")
    archive.mkdir(exist_ok=True)
    sql = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    env = {**os.environ, **lbench_env}
    p = subprocess.Popen([sys.executable, "-m", "harness", "history", "query", sql, "--archive", str(archive),
                          "--timeout", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    _wait_for_query_child(p)
    if how == "SIGTERM":
        p.send_signal(signal.SIGTERM)
    else:  # a terminal's Ctrl-C: SIGINT to the whole foreground group, the query's process too
        os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "the query was stopped" in err and "Traceback" not in err


def test_a_table_without_run_id_is_refused_so_the_views_still_build(lbench_env, tmp_path):
    """Found by scripts/fuzz_inputs.py (archive class): an idle run holding a requests.parquet of one
    column made the archive's requests view fail to build, for every query."""
    good = make_history_run(tmp_path / "made", 0)
    bad = make_history_run(tmp_path / "made", 1)
    pq.write_table(pa.table({"rep": [1, 2]}), bad / "requests.parquet")
    sign_run(bad)
    archive = trusted(tmp_path / "archive")
    added, refused = add_runs(archive, [good, bad])
    assert [a.run_id for a in added] == [good.name] and "has no run_id column" in refused[0].reason
    r = run_cli("history", "query", "SELECT count(*) AS n FROM requests", "--archive", str(archive), "--csv",
                env=lbench_env)
    assert r.returncode == 0, r.stdout + r.stderr
