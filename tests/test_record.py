"""The run record: typed fields, one reader per schema version, the machine fingerprint, and the
comparability rule stated once."""

import pytest

from harness.errors import BadInput
from harness.record import SCHEMA_VERSION, check_comparable, fingerprint_of, parse_record

HOST = {"os": "Darwin", "os_release": "24.1", "macos_version": "15.1", "machine": "arm64",
        "cpu_model": "Apple M2 Ultra", "cpu_logical": 24, "ram_bytes": 192 * 2 ** 30, "hostname": "mac-1"}


def manifest(**over):
    base = {"schema_version": 1, "kind": "idle", "status": "complete", "run_id": "r1", "host": HOST,
            "engine": {"engine": "llama-server", "path": "/x/llama-server", "build_number": 11434, "sha256": "ab" * 32},
            "models": [{"label": "llama3-8b-q8", "sha256": "cd" * 32, "bytes": 8_000_000_000, "quant": "Q8_0"}],
            "cells": [{"index": 0, "model": "llama3-8b-q8", "setting": "keep-alive=default", "notes": []}],
            "started_at": "2026-12-01T10:00:00.000+00:00", "ended_at": "2026-12-01T10:03:00.000+00:00",
            "router": {"port": 1234}}
    return {**base, **over}


def test_a_version_1_manifest_reads_as_a_record_with_its_fingerprint():
    r = parse_record(manifest(), "m.json")
    assert r.schema_version == 1 and SCHEMA_VERSION == 3
    assert r.machine.label == "Apple M2 Ultra, 24 CPUs, 192 GiB, Darwin 15.1" and len(r.machine.id) == 12
    assert r.machine == fingerprint_of({**HOST, "hostname": "another-name"})  # the hostname is not the machine
    assert r.engine.build_label == "build 11434" and r.models[0].quant == "Q8_0" and r.models[0]["bytes"] == 8e9
    assert r.cells[0].applicable and r.settings == ("keep-alive=default",) and r.duration_s == 180
    assert r.section("router") == {"port": 1234} and r.section("absent") == {}


def test_fields_of_the_wrong_type_are_named():
    with pytest.raises(BadInput, match=r"'manifest.models' is a str, expected a list of objects"):
        parse_record(manifest(models="abc"), "m.json")
    with pytest.raises(BadInput, match=r"'models\[0\].bytes' is a str, expected an integer"):
        parse_record(manifest(models=[{"label": "m", "bytes": "big"}]), "m.json")
    with pytest.raises(BadInput, match="schema_version 4"):
        parse_record(manifest(schema_version=4), "m.json")


def record(**over):
    return parse_record(manifest(**over), "m.json")


def test_runs_pooled_on_one_side_must_be_repetitions():
    same = [record(run_id="a"), record(run_id="b")]
    assert check_comparable(same, [record(run_id="c")]).refused == ()
    other_machine = record(run_id="d", host={**HOST, "cpu_model": "Apple M1"})
    result = check_comparable([same[0], other_machine])
    assert result.refused == ("baseline runs a and d differ in machine",)
    with pytest.raises(BadInput, match="cannot be pooled"):
        result.raise_if_refused("--baseline")
    other_model = record(run_id="e", models=[{"label": "llama3-8b-q8", "sha256": "ef" * 32}])
    assert "differ in models" in check_comparable([], [same[0], other_model]).refused[0]


def test_differences_between_the_sides_are_flagged_by_name():
    a = record(run_id="a")
    b = record(run_id="b", engine={"engine": "llama-server", "build_number": 11500, "sha256": "ff" * 32},
               host={**HOST, "ram_bytes": 64 * 2 ** 30})
    flags = check_comparable([a], [b]).flags
    assert "ram_gib: 192 vs 64" in flags and "engine_build: 11434 vs 11500" in flags
    assert check_comparable([a], [record(run_id="c")]).flags == ()


def _dead_pid() -> int:
    """The pid of a process that has ended (reaped): nothing runs under it now, or something new."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_running_run_whose_process_is_gone_reads_abandoned():
    """Schema 3 records the process (pid, start, host, boot) a run ran in; a 'running' run whose
    process is provably gone on this machine reads 'abandoned'; one of another host stays 'running'
    (this machine cannot tell); a version-2 manifest has no process and reads as written."""
    from harness.probes.run_process import this_process

    me = this_process()
    alive = parse_record(manifest(schema_version=3, status="running", process=me), "m.json")
    assert alive.status == "running" and alive.abandoned is None and alive.unfinished
    dead = parse_record(manifest(schema_version=3, status="running", process={**me, "pid": _dead_pid()}), "m.json")
    assert dead.status == "abandoned" and "is gone" in (dead.abandoned or "") and dead.unfinished and not dead.complete
    rebooted = parse_record(manifest(schema_version=3, status="running", process={**me, "boot_id": "another-boot"}),
                            "m.json")
    assert rebooted.status == "abandoned" and "booted" in (rebooted.abandoned or "")
    elsewhere = parse_record(manifest(schema_version=3, status="running",
                                      process={**me, "pid": _dead_pid(), "hostname": me["hostname"] + "-other"}),
                             "m.json")
    assert elsewhere.status == "running"
    old = parse_record(manifest(schema_version=2, status="running"), "m.json")
    assert old.status == "running" and old.process == {}
    ended = parse_record(manifest(schema_version=3, status="complete", process={**me, "pid": _dead_pid()}), "m.json")
    assert ended.status == "complete"  # only a run left 'running' can be abandoned
    with pytest.raises(BadInput, match="unknown status 'abandoned'"):  # read, never written
        parse_record(manifest(status="abandoned"), "m.json")
    with pytest.raises(BadInput, match="'manifest.process' is a str"):
        parse_record(manifest(schema_version=3, process="pid 1"), "m.json")
