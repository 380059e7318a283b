"""Values from a run directory or an engine that used to crash or escape (issue 35, "still open"):
every value that reaches a path, an attribute or a listing is untrusted; a value the tables cannot
hold never leaves a run ``running``; an answer other than HTTP 200 is never a measurement; engine
output that is not UTF-8 is read.  Runs are written by the store's own writer (the real format)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from harness.engines.binary import _probe_version
from harness.engines.one_token import http_error
from harness.errors import BadInput
from harness.report.repro import evidence_links
from harness.spec import parse_cpu_knob
from harness.store import RunWriter, open_run


def _repro_run(root: Path, evidence_dir: str, engine: dict | None = None) -> Path:
    w = RunWriter(root, "repro", {"config": {"claims": ["c"]}, "host": {"os": "Linux", "cpu_model": "TestCPU"},
                                  "engine": engine if engine is not None else {"build_number": 1}, "cells": []})
    w.append({"claim_id": "c", "claim": "a claim", "seed": "s", "statement": "st", "verdict": "holds", "cause": "",
              "reason": "r", "checks": "[]", "repeats": 1, "source_ref": "", "models": "[]",
              "figures": "{not json", "evidence": "[]", "notes": "[]", "seconds": 1.0,
              "evidence_dir": evidence_dir}, table="verdicts")
    w.finish("complete")
    return w.dir


@pytest.mark.parametrize("value", ["/", "/etc", "../", "../../root/.cache", "claims/../../x", "javascript:alert(1)",
                                   "claims/c/..", "", None, 5, "x" * 600, "claims\\c"])
def test_an_evidence_folder_from_a_run_table_is_listed_only_inside_the_run(tmp_path, value):
    run = _repro_run(tmp_path / "results", "claims/c")
    assert evidence_links(run, value) == []


def test_evidence_links_are_bounded_relative_and_never_follow_a_link(tmp_path):
    run = _repro_run(tmp_path / "results", "claims/c")
    d = run / "claims" / "c"
    d.mkdir(parents=True)
    for i in range(250):
        (d / f"f{i:03d}.log").write_text("x")
    os.symlink("/", d / "root")
    os.symlink("/etc/passwd", d / "passwd")
    os.mkfifo(d / "fifo")
    (run / "claims" / "out").symlink_to(tmp_path)
    links = evidence_links(run, "claims/c")
    assert len(links) == 200 and all(h.startswith("claims/c/f") and ":" not in h for h, _ in links)
    assert evidence_links(run, "claims/out") == []  # a folder that is a link out of the run


def test_a_repro_report_without_an_engine_backend_or_with_damaged_json_renders(tmp_path):
    from harness.report.render import render_report

    root = tmp_path / "results"
    run = _repro_run(root, "javascript:alert(1)", engine={})
    page = render_report(open_run(run, root)).read_text()
    assert "engine backend unknown" in page and "javascript:" not in page


def test_a_knob_the_samples_table_cannot_hold_is_refused_up_front():
    with pytest.raises(BadInput, match="GOMP_SPINCOUNT"):
        parse_cpu_knob("omp_spincount", "99999999999999999999", "spec: omp_spincount")
    assert parse_cpu_knob("omp_spincount", "300000", "x") == 300000


def test_a_table_that_cannot_be_converted_ends_the_run_failed_never_running(tmp_path):
    w = RunWriter(tmp_path / "results", "idle", {"config": {}, "host": {"os": "Linux"}, "engine": {}, "cells": []})
    w.append({"model": "m", "setting": "s", "phase": "measure", "rep": 2**70, "latency_ms": 1.0, "error": None})
    w.finish("complete")
    manifest = json.loads((w.dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "cannot convert samples.jsonl" in manifest["error"], manifest
    assert (w.dir / "samples.jsonl").stat().st_size > 0 and not list(w.dir.glob(".*.tmp"))


@pytest.mark.parametrize("status, body", [(302, b""), (204, b""), (301, b"<a href=x>moved</a>"), (500, None)])
def test_an_answer_other_than_200_is_an_error_with_its_status(status, body):
    text = http_error(status, body)
    assert text.startswith(f"HTTP {status}") and text.strip()


def test_an_engine_whose_version_is_not_utf8_is_read(tmp_path):
    exe = tmp_path / "llama-server"
    exe.write_bytes(b"#!/bin/sh\nprintf 'version: 11434 (build \\377\\376 \\n' >&2\nprintf '\\377\\300 junk\\n'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    version, build, commit = _probe_version(exe)
    assert isinstance(version, str) and isinstance(commit, str)
