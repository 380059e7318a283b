"""The history baseline's choice of runs (harness/history/gate_hook.py) on constructed archives of
real-format run directories: the build rule, the window, the drift shrink and the refusals."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import make_history_run, trusted

from harness.errors import BadInput
from harness.history.catalog import add_runs
from harness.history.gate_hook import history_baseline, open_runs

REF = "history:idle_warm_p50"


def archive_of(tmp_path, plan, name="archive"):
    """plan: [(build, scale), ...] in start order; returns (archive, [run dirs in the results])."""
    results = tmp_path / "results"
    dirs = [make_history_run(results, n, build=b, scale=s) for n, (b, s) in enumerate(plan)]
    archive = tmp_path / name
    added, refused = add_runs(trusted(archive), dirs)
    assert refused == [] and len(added) == len(plan)
    return archive, dirs


def test_the_default_build_is_the_newest_before_the_candidates(tmp_path):
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 3 + [(200, 1.0)] * 3 + [(300, 1.0)] * 2)
    ids = [d.name for d in dirs]
    hb = history_baseline(archive, REF, candidate_build=300)
    assert hb.build == 200 and hb.run_ids == tuple(ids[3:6]) and "newest build before" in hb.build_rule
    assert history_baseline(archive, REF, candidate_build=250).build == 200
    assert history_baseline(archive, REF, candidate_build=None).build == 300  # unknown: the newest
    given = history_baseline(archive, REF, candidate_build=300, build=100)
    assert given.run_ids == tuple(ids[:3]) and given.build_rule == "given by --build"
    assert all(d.is_dir() and d.parent.parent == archive for d in given.dirs)
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, candidate_build=100)
    assert "no idle_warm_p50 run on a build before the candidate's build 100" in err.value.what
    assert "--build 100 gates against the earlier runs" in err.value.hint
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, build=150)
    assert err.value.where == "--build" and "100, 200, 300" in err.value.hint


def test_the_window_keeps_the_newest_runs_and_leaves_out_the_candidates(tmp_path):
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 7)
    ids = [d.name for d in dirs]
    hb = history_baseline(archive, REF, window=4, build=100)
    assert hb.run_ids == tuple(ids[3:]) and hb.window == 4 and hb.drift_checked and not hb.drift
    assert 0 < hb.log_sd < 0.1 and len(hb.values) == 4
    hb = history_baseline(archive, REF, window=4, build=100, exclude=[ids[-1]])
    assert hb.run_ids == tuple(ids[2:6]) and hb.excluded == (ids[-1],)
    assert any("the candidate's own runs" in line and ids[-1] in line for line in hb.lines())
    short = history_baseline(archive, REF, window=3, build=100)
    assert not short.drift_checked and any("drift not checked" in line for line in short.lines())
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, window=1)
    assert err.value.where == "--window"


def test_a_change_point_inside_the_window_shrinks_it_to_the_runs_after(tmp_path):
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 8 + [(100, 1.5)] * 5)
    ids = [d.name for d in dirs]
    hb = history_baseline(archive, REF, window=10, build=100)
    assert hb.drifting and hb.run_ids == tuple(ids[8:]) and hb.dropped == tuple(ids[3:8])
    (line,) = [x for x in hb.lines() if x.startswith("drift:")]
    assert f"between runs {ids[7]} and {ids[8]}" in line and "keeps the 5 runs after it, 5 left out" in line
    assert hb.as_dict()["dropped_for_drift"] == list(ids[3:8])
    flat = history_baseline(archive, REF, window=5, build=100)  # the window after the step: no drift
    assert not flat.drifting and flat.run_ids == tuple(ids[8:])


def test_refusals_say_what_where_and_what_to_do(tmp_path):
    with pytest.raises(BadInput) as err:
        history_baseline(tmp_path / "none", REF)
    assert "no history archive" in err.value.what
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 3 + [(200, 1.0)])
    with pytest.raises(BadInput) as err:
        history_baseline(archive, "history:no_such_series")
    assert err.value.where == "--baseline" and "idle_warm_p50" in err.value.hint
    with pytest.raises(BadInput) as err:  # a series that counts failed runs never feeds a gate
        history_baseline(archive, "history:swap_failed_pct")
    assert "counts failed runs" in err.value.what and "swap_load_ms" in err.value.hint
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, build=200)
    assert "only 1 idle_warm_p50 run of build 200" in err.value.what
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, machine="0123456789ab")
    assert "no run of machine 0123456789ab" in err.value.what and "--machine" in err.value.hint
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, model="other")
    assert "model other" in err.value.what and "m · keep-alive=default" in err.value.what
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, build=100, exclude=[d.name for d in dirs])
    assert "besides the candidate's own" in err.value.what


def test_several_matching_series_are_refused_by_name(tmp_path):
    archive, _ = archive_of(tmp_path, [(100, 1.0)] * 2)
    other = make_history_run(tmp_path / "results2", 50, build=100, cpu_model="OtherCPU")
    add_runs(trusted(archive), [other])
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF)
    assert "matches 2 series" in err.value.what and "--machine" in err.value.hint


def test_a_renamed_or_misplaced_run_in_the_archive_is_refused(tmp_path):
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 3)
    (held,) = [p for p in archive.glob(f"*/{dirs[0].name}")]
    held.rename(held.with_name("20260101T000000Z-idle-beef"))  # the folder no longer says the run's id
    hb = history_baseline(archive, REF, build=100)  # its tables are read under the folder's id: not in the series
    assert hb.run_ids == tuple(d.name for d in dirs[1:])
    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 3, name="archive2")
    machine = next(p for p in archive.iterdir() if not p.name.startswith("."))
    moved = archive / "0123456789ab"
    shutil.copytree(machine, moved)  # the same runs under another machine's folder
    shutil.rmtree(machine)
    hb = history_baseline(archive, REF, build=100)
    assert hb.machine_id == "0123456789ab"
    with pytest.raises(BadInput) as err:
        open_runs(hb)
    assert "not what the catalog says" in err.value.what
    manifest = json.loads((hb.dirs[0] / "manifest.json").read_text())
    assert manifest["run_id"] == hb.run_ids[0]


def test_a_catalog_naming_a_directory_outside_the_archive_is_refused(tmp_path, monkeypatch):
    """The catalog is rebuilt from the run directories, but it is a file in an untrusted archive: a
    run directory it names outside ``<archive>/<machine id>/<run id>`` is never opened."""
    from harness.history import query

    archive, dirs = archive_of(tmp_path, [(100, 1.0)] * 3)
    real_connect = query.connect

    class Tampered:
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *args):
            if sql == "SELECT run_id, dir FROM runs":
                rows = self.con.execute(sql).fetchall()
                return type("R", (), {"fetchall": lambda _self: [(r, f"../{r}") for r, _ in rows]})()
            return self.con.execute(sql, *args)

        def close(self):
            self.con.close()

    monkeypatch.setattr(query, "connect", lambda archive, **kw: Tampered(real_connect(archive, **kw)))
    with pytest.raises(BadInput) as err:
        history_baseline(archive, REF, build=100)
    assert "not <machine id>/<run id> inside the archive" in err.value.what and "../" in err.value.what


def test_the_light_copy_of_otavas_minimum_agrees():
    from harness.history import changes, gate_hook

    assert gate_hook.MIN_POINTS == changes.MIN_POINTS
