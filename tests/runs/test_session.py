"""RunSession: the lifecycle every kind shares (manifest, quality, Ctrl-C, failure, finish, analysis)."""

import json

import pytest

from harness.runs.session import INTERRUPTED, RunSession


def rows(session, n=3):
    for i in range(n):
        session.writer.append({"phase": "measure", "latency_ms": 1.0 + i, "model": "m", "setting": "s",
                               "pause_requested_s": 0.0})


def manifest_of(session):
    return json.loads((session.dir / "manifest.json").read_text())


def test_a_run_that_ends_normally_is_complete_with_quality_and_analysis(tmp_path):
    with RunSession(tmp_path, "idle", {"config": {}, "models": [], "cells": []}) as session:
        assert manifest_of(session)["status"] == "running" and manifest_of(session)["host"]["fingerprint"]["id"]
        rows(session)
    m = manifest_of(session)
    assert m["status"] == "complete" and m["quality"]["after"] is not None and m["schema_version"] == 3
    assert session.run is not None and (session.dir / "analysis.json").is_file()


def test_a_failure_reason_makes_the_run_failed_but_keeps_measuring(tmp_path):
    with RunSession(tmp_path, "swap", {"config": {}}) as session:
        session.fail("the server died (exit status -9)")
        session.writer.append({"index": 0, "model": "a", "latency_ms": 1.0}, table="requests")
    m = manifest_of(session)
    assert m["status"] == "failed" and m["error"] == "the server died (exit status -9)" and m["rows"]["requests"] == 1


def test_ctrl_c_and_exceptions_finish_the_manifest_then_propagate(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with RunSession(tmp_path, "idle", {"config": {}}) as interrupted:
            rows(interrupted, 2)
            raise KeyboardInterrupt
    m = manifest_of(interrupted)
    assert m["status"] == "interrupted" and m["error"] == INTERRUPTED and m["n_samples"] == 2
    with pytest.raises(RuntimeError):
        with RunSession(tmp_path, "repro", {"config": {"claims": []}}) as broken:
            raise RuntimeError("scenario bug")
    assert manifest_of(broken)["status"] == "failed" and "RuntimeError: scenario bug" in manifest_of(broken)["error"]


def test_a_signal_during_the_end_is_held_until_the_manifest_is_final(tmp_path, monkeypatch):
    """LBENCH_TEST_SIGNAL_AT_END sends the signal as the end phase starts and again before the final
    manifest: the run still ends complete, with its Parquet copy and analysis, and the signal stops
    the caller afterwards (KeyboardInterrupt, as the CLI's handlers make of SIGINT and SIGTERM)."""
    import signal

    def to_interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, to_interrupt)  # what lbench's main installs
    try:
        for name in ("SIGINT", "SIGTERM"):
            monkeypatch.setenv("LBENCH_TEST_SIGNAL_AT_END", name)
            with pytest.raises(KeyboardInterrupt):
                with RunSession(tmp_path, "idle", {"config": {}, "models": [], "cells": []}) as session:
                    rows(session)
            m = manifest_of(session)
            assert m["status"] == "complete" and m["n_samples"] == 3, name
            assert (session.dir / "samples.parquet").is_file() and (session.dir / "analysis.json").is_file()
            assert (session.dir / "signature.json").is_file()
            # a run stopped by the user, then signalled again while it ends: interrupted, with what it kept
            with pytest.raises(KeyboardInterrupt):
                with RunSession(tmp_path, "idle", {"config": {}}) as stopped:
                    rows(stopped, 2)
                    raise KeyboardInterrupt
            m = manifest_of(stopped)
            assert m["status"] == "interrupted" and m["n_samples"] == 2 and (stopped.dir / "samples.parquet").is_file()
    finally:
        signal.signal(signal.SIGTERM, old)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are back
