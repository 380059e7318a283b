"""An archive with no runs yet (a fleet's first night), and one that does not exist."""

from __future__ import annotations

from conftest import run_cli


def test_an_empty_archive_lists_queries_and_plots(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    r = run_cli("history", "list", "--archive", str(archive))
    assert r.returncode == 0 and "0 runs on 0 machines" in r.stdout
    r = run_cli("history", "query", "SELECT count(*) AS n FROM samples", "--archive", str(archive), "--csv")
    assert r.returncode == 0 and r.stdout.split() == ["n", "0"]
    r = run_cli("trend", "--archive", str(archive), "--out", str(tmp_path / "site"))
    assert r.returncode == 0 and "No change point" in r.stdout
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_missing_archive_is_bad_input(tmp_path):
    for args in (("history", "list"), ("history", "query", "SELECT 1"), ("trend",)):
        r = run_cli(*args, "--archive", str(tmp_path / "none"))
        assert r.returncode == 2 and "no history archive there" in r.stderr, args
    r = run_cli("history", "add", str(tmp_path / "none"), "--archive", str(tmp_path / "archive"))
    assert r.returncode == 2 and "not a directory" in r.stderr
