"""Full or read-only disk: writing stops cleanly with exit 1 and one message, the manifest says
``failed`` with the cause where it can still be written, nothing journaled is lost, and no
reader or sampler thread prints a traceback (issue 12, class 7).

A full disk is a small tmpfs filled mid-run (skipped where mounting is not allowed).  A read-only
directory is ``chmod`` 0555; root ignores file modes, so as root the lbench process runs with
CAP_DAC_OVERRIDE dropped (``setpriv``)."""

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO

from harness.errors import WriteFailed
from harness.store import RunWriter, open_run


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 16 MiB (room for a run, not for the filler)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path) -> None:
    """Take every free byte of ``disk``."""
    chunk = bytes(64 * 1024)
    with open(disk / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    with open(disk / "filler2", "wb", buffering=0) as fh:  # the last partial block
        try:
            while True:
                fh.write(b"x")
        except OSError:
            pass


def unprivileged() -> list[str]:
    """A command prefix under which file modes bind (root bypasses them)."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    if shutil.which("setpriv") is None or subprocess.run([*prefix, "true"]).returncode != 0:
        pytest.skip("running as root without setpriv: file modes cannot make a directory read-only for lbench")
    return prefix


def journal_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]  # every line whole JSON


def test_writer_on_a_full_disk(small_disk):
    w = RunWriter(small_disk, "idle", {"config": {}})
    for i in range(5):
        w.append({"phase": "measure", "seq": i, "latency_ms": 1.0})
    fill(small_disk)
    with pytest.raises(WriteFailed, match="No space left"):
        for i in range(5, 10_000):  # the first row that does not fit stops the run
            w.append({"phase": "measure", "seq": i, "latency_ms": 1.0, "pad": "x" * 200})
    w.append({"phase": "measure", "seq": -1})  # raised once; later rows are dropped quietly
    errors = []
    t = threading.Thread(target=lambda: _catch(errors, w.append, {"t_s": 1.0}, "memory"))
    t.start()
    t.join()
    assert not errors, "a reader/sampler thread must never raise"
    w.finish("complete")
    rows = journal_rows(w.dir / "samples.jsonl")
    assert [r["seq"] for r in rows[:5]] == [0, 1, 2, 3, 4] and len(rows) == w.counts["samples"]
    run = open_run(w.dir, small_disk)
    assert run.record.status == "failed" and "No space left" in run.record.error
    assert run.record.sections["rows_dropped"] >= 2 and not (w.dir / ".reserve").exists()
    assert len(run.table("samples")) == len(rows)


def _catch(errors, fn, *args):
    try:
        fn(*args)
    except BaseException as exc:
        errors.append(exc)


def _cli(args: list[str], env: dict, prefix: list[str] = ()) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-m", "harness", *args], cwd=REPO,
                            env={**os.environ, **env, "COLUMNS": "200"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_rows(results: Path, table: str, n: int, cli: subprocess.Popen, phase: str | None = None) -> Path:
    give_up = time.monotonic() + 300
    while time.monotonic() < give_up and cli.poll() is None:
        for journal in results.glob(f"*/{table}.jsonl"):
            lines = journal.read_text().splitlines()
            if len([line for line in lines if phase is None or f'"phase": "{phase}"' in line]) >= n:
                return journal
        time.sleep(0.05)
    cli.kill()
    raise AssertionError(f"the run ended before {n} {table} rows: {cli.communicate()}")


def _one_clean_error(stderr: str, fragment: str) -> None:
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr
    assert stderr.count("lbench: error") == 1 and fragment in stderr, stderr


@pytest.mark.engine
def test_idle_run_on_a_disk_that_fills_up(engine_env, small_disk):
    env = {**engine_env, "LBENCH_RESULTS_DIR": str(small_disk / "results")}
    cli = _cli(["idle", "-m", "tiny-q8", "--pauses", "0.05", "--reps", "300", "--warmup", "1", "--self-check", "0",
                "--ctx-size", "256"], env)
    journal = _wait_rows(small_disk / "results", "samples", 3, cli, phase="measure")
    fill(small_disk)
    _, stderr = cli.communicate(timeout=300)
    assert cli.returncode == 1
    _one_clean_error(stderr, "No space left on device")
    manifest = json.loads((journal.parent / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "cannot write samples.jsonl: No space left" in manifest["error"]
    rows = journal_rows(journal)
    assert len([r for r in rows if r["phase"] == "measure"]) >= 3 and len(rows) == manifest["n_samples"]


@pytest.mark.engine
def test_swap_storm_on_a_disk_that_fills_up(engine_env, small_disk):
    env = {**engine_env, "LBENCH_RESULTS_DIR": str(small_disk / "results")}
    cli = _cli(["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--requests", "3000", "--no-report"], env)
    journal = _wait_rows(small_disk / "results", "requests", 4, cli)
    fill(small_disk)  # the sampler, event readers and router log readers all hit it
    _, stderr = cli.communicate(timeout=300)
    assert cli.returncode == 1
    _one_clean_error(stderr, "No space left on device")
    run_dir = journal.parent
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "No space left" in manifest["error"]
    for table in ("requests", "events", "memory"):
        assert len(journal_rows(run_dir / f"{table}.jsonl")) == manifest["rows"].get(table, 0)
    assert not [p for p in psutil_children_of(manifest["router"]["pid"])]


def psutil_children_of(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True) + [psutil.Process(pid)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.engine
def test_read_only_results_dir(engine_env, tmp_path):
    prefix = unprivileged()
    results = tmp_path / "ro"
    results.mkdir(mode=0o555)
    results.chmod(0o555)
    cli = _cli(["idle", "-m", "tiny-q8", "--pauses", "0", "--reps", "1"], {**engine_env,
                                                                          "LBENCH_RESULTS_DIR": str(results)}, prefix)
    _, stderr = cli.communicate(timeout=300)
    assert cli.returncode == 1
    _one_clean_error(stderr, "cannot create the run directory (Permission denied)")
    assert not any(results.iterdir())


@pytest.mark.engine
def test_results_dir_made_read_only_mid_run(engine_env, tmp_path):
    prefix = unprivileged()
    results = tmp_path / "results"
    cli = _cli(["idle", "-m", "tiny-q8", "--keep-alive", "default,none", "--pauses", "0.05", "--reps", "40",
                "--warmup", "1", "--self-check", "0", "--ctx-size", "256"],
               {**engine_env, "LBENCH_RESULTS_DIR": str(results)}, prefix)
    journal = _wait_rows(results, "samples", 3, cli, phase="measure")
    before = journal_rows(journal)
    journal.parent.chmod(0o555)  # the open journal still takes rows; nothing new can be created
    try:
        _, stderr = cli.communicate(timeout=300)
    finally:
        journal.parent.chmod(0o755)
    assert cli.returncode == 1
    _one_clean_error(stderr, "Permission denied")
    rows = journal_rows(journal)
    assert rows[:len(before)] == before  # nothing journaled was lost
    # as far as writable: the final manifest could not be written, so it still says running, and with its
    # process gone it reads abandoned (harness/record.py)
    assert open_run(journal.parent, results).record.status in ("failed", "abandoned")
