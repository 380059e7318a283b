"""history add / list: real run directories into the archive, idempotent, refusing what it must."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import run_cli
from history_runs import real_runs, trusted  # noqa: F401 (a fixture)

from harness.errors import BadInput
from harness.history import archive as archive_mod
from harness.history.archive import add_run, run_dirs
from harness.history.catalog import add_runs, list_machines
from harness.probes.run_process import this_process
from harness.record import read_record

pytestmark = pytest.mark.engine


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_add_is_idempotent_and_keyed_by_machine(real_runs, tmp_path):
    archive = tmp_path / "archive"
    added, refused = add_runs(trusted(archive), [real_runs["idle"].parent])  # a results folder: every run in it
    assert refused == [] and sorted(a.outcome for a in added) == ["added", "added"]
    for name, src in real_runs.items():
        record = read_record(src / "manifest.json")
        dest = archive / record.machine.id / record.run_id
        assert dest.is_dir(), name
        assert (dest / "manifest.json").read_bytes() == (src / "manifest.json").read_bytes()
        assert _tree(dest) == _tree(src)
    again, refused = add_runs(trusted(archive), [real_runs["idle"], real_runs["swap"]])
    assert refused == [] and [a.outcome for a in again] == ["already there", "already there"]
    (machine,) = list_machines(archive)
    assert machine.runs == 2 and machine.kinds == {"idle": 1, "swap": 1}
    assert machine.machine_id == read_record(real_runs["idle"] / "manifest.json").machine.id
    assert not list(archive.glob("*/.adding-*"))


def test_another_run_under_the_same_id_is_refused_with_exit_2(real_runs, tmp_path):
    archive = tmp_path / "archive"
    assert run_cli("history", "add", str(real_runs["idle"]), "--archive", str(trusted(archive))).returncode == 0
    other = tmp_path / "other" / real_runs["idle"].name
    shutil.copytree(real_runs["idle"], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["command"] = "lbench idle --something-else"
    (other / "manifest.json").write_text(json.dumps(manifest))
    r = run_cli("history", "add", str(other), "--archive", str(trusted(archive)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "another run with the id" in r.stderr and real_runs["idle"].name in r.stderr
    held = next(archive.glob(f"*/{real_runs['idle'].name}"))
    assert (held / "manifest.json").read_bytes() == (real_runs["idle"] / "manifest.json").read_bytes()


def test_a_damaged_run_is_refused_and_the_others_are_added(real_runs, tmp_path):
    bad = tmp_path / "in" / "20260101T000000Z-idle-dead"
    shutil.copytree(real_runs["idle"], bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["run_id"] = bad.name
    manifest["host"] = "not an object"
    (bad / "manifest.json").write_text(json.dumps(manifest))
    running = tmp_path / "in" / "20260101T000001Z-idle-beef"
    shutil.copytree(real_runs["idle"], running)
    manifest = json.loads((running / "manifest.json").read_text())
    manifest.update(run_id=running.name, status="running", process=this_process())  # this process: alive
    (running / "manifest.json").write_text(json.dumps(manifest))
    shutil.copytree(real_runs["swap"], tmp_path / "in" / real_runs["swap"].name)
    archive = tmp_path / "archive"
    r = run_cli("history", "add", str(tmp_path / "in"), "--archive", str(trusted(archive)))
    assert r.returncode == 2
    assert "refused" in r.stderr and "'manifest.host'" in r.stderr and "still running" in r.stderr
    assert "1 added" in r.stdout
    assert [d.name for _, d in run_dirs(archive)] == [real_runs["swap"].name]


def test_only_regular_files_are_copied(real_runs, tmp_path):
    src = tmp_path / "run"
    shutil.copytree(real_runs["idle"], src)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of the run")
    (src / "logs" / "link.txt").symlink_to(secret)
    (src / "outside").symlink_to(tmp_path)
    os.mkfifo(src / "pipe")
    added = add_run(trusted(tmp_path / "archive"), src)
    assert added.outcome == "added"
    assert sorted(added.skipped_files) == ["logs/link.txt", "outside", "pipe"]
    assert not (added.dest / "logs" / "link.txt").exists() and not (added.dest / "pipe").exists()
    assert not any(p.is_symlink() for p in added.dest.rglob("*"))


def test_a_failed_copy_leaves_nothing_half_copied(real_runs, tmp_path, monkeypatch):
    archive = tmp_path / "archive"
    calls = []

    def failing_copy(src, dst, length=0):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        dst.write(src.read())

    monkeypatch.setattr(archive_mod.shutil, "copyfileobj", failing_copy)
    with pytest.raises(OSError):
        add_run(trusted(archive), real_runs["idle"])
    record = read_record(real_runs["idle"] / "manifest.json")
    assert not (archive / record.machine.id / record.run_id).exists()
    assert list((archive / record.machine.id).iterdir()) == []  # no temporary folder left either
    monkeypatch.undo()
    assert add_run(trusted(archive), real_runs["idle"]).outcome == "added"


def test_not_a_run_directory_is_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    added, refused = add_runs(trusted(tmp_path / "archive"), [tmp_path / "empty", tmp_path / "missing"])
    assert added == [] and len(refused) == 2
    assert "holds no run directory" in refused[0].reason and "not a directory" in refused[1].reason
    with pytest.raises(BadInput):
        add_run(trusted(tmp_path / "archive"), tmp_path / "empty")


def test_a_linked_manifest_or_run_is_refused(real_runs, tmp_path):
    src = tmp_path / "run"
    shutil.copytree(real_runs["idle"], src)
    (src / "manifest.json").unlink()
    (src / "manifest.json").symlink_to(real_runs["idle"] / "manifest.json")
    with pytest.raises(BadInput, match="symbolic link"):
        add_run(trusted(tmp_path / "archive"), src)
    (tmp_path / "linked").symlink_to(real_runs["idle"])
    added, refused = add_runs(trusted(tmp_path / "archive"), [tmp_path / "linked"])
    assert added == [] and "symbolic links are not followed" in refused[0].reason


def test_two_adds_of_one_run_racing_make_one_run(real_runs, tmp_path, monkeypatch):
    """The second add finds the run renamed into place under it: the same run, already there."""
    archive = tmp_path / "archive"
    real_rename = archive_mod.os.rename

    def rename_after_another_add(src, dst):
        monkeypatch.setattr(archive_mod.os, "rename", real_rename)
        add_run(trusted(archive), real_runs["idle"])  # the other add wins the race
        real_rename(src, dst)

    monkeypatch.setattr(archive_mod.os, "rename", rename_after_another_add)
    assert add_run(trusted(archive), real_runs["idle"]).outcome == "already there"
    assert [d.name for _, d in run_dirs(archive)] == [real_runs["idle"].name]
    assert not list(archive.glob("*/.adding-*"))
