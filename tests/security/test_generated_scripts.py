"""Every kind of script lbench generates, fed values that would run a command if any of them
reached the shell as code (issue 47, class 1): the evidence rerun scripts (idle cell and swap
storm) from a hostile run directory, and the one writer they share (``shell.script``).  Claim
recipes (``recipe.sh``, idle-equivalence recipes) are run the same way in
test_shell_generators.py and tests/repro/test_recipe.py.

Each script is checked with ``bash -n`` and ``sh -n``, then run by ``sh`` in a sandbox folder whose
PATH holds stand-ins for ``curl`` and ``sha256sum`` and whose ``LLAMA_SERVER`` is a stand-in that
records its argv: no ``pwned`` file may appear, and every hostile value must reach the program as
the one word it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness import shell
from harness.record import parse_record
from harness.report.rerun import idle_script, swap_script

HOSTILE = [
    "x\ntouch pwned",
    "x\rtouch pwned\n",
    "x\n#\ntouch pwned",
    "a'$(touch pwned)'b",
    'a"$(touch pwned)"b',
    "$(touch pwned)",
    "`touch pwned`",
    "x; touch pwned",
    "x\u2028touch pwned",
    "x\\\ntouch pwned",
    "x'\ntouch pwned\n'",
]
BASH, SH = shutil.which("bash"), shutil.which("sh")
pytestmark = pytest.mark.skipif(BASH is None or SH is None, reason="needs bash and sh")


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _engine(hostile: str) -> dict:
    return {"path": f"/opt/{hostile}/llama-server", "build_number": 11434, "commit": hostile, "backend": "cpu",
            "device_select": {}, "device_used": [hostile],
            "backend_devices": [{"name": hostile, "description": hostile}]}


def _model(hostile: str, synthetic: bool) -> dict:
    return {"label": hostile, "name": hostile, "path": f"/m/{hostile}.gguf", "quant": hostile,
            "n_params": 7, "bytes": 9, "sha256": hostile, "synthetic": synthetic,
            "preset": hostile}


def _idle_text(hostile: str) -> str:
    manifest = {
        "kind": "idle", "engine": _engine(hostile), "config": {"warmup": 1},
        "models": [_model(hostile, synthetic=False)],
        "cells": [{"index": 0, "model": hostile, "setting": hostile, "engine": "llama-server",
                   "argv": [f"/opt/{hostile}/llama-server", "-m", f"/m/{hostile}.gguf", "--port", "9", "-t", hostile,
                            f"--server-args-axis={hostile}"],
                   "env_overrides": {"GGML_VK_KEEPALIVE_MS": hostile, "BAD NAME": hostile},
                   "request_body": json.dumps({"prompt": hostile, "n_predict": 1})}]}
    record = parse_record(manifest, "manifest.json")
    samples = pd.DataFrame({"model": [hostile] * 4, "setting": [hostile] * 4, "phase": ["measure"] * 4,
                            "seq": [0, 1, 2, 3], "pause_requested_s": [0.0, 0.0, 0.01, 0.01],
                            "latency_ms": [1.0, 1.1, 1.0, 1.2]})
    wake = {"has_step": True, "last_warm_s": 0.0, "first_woken_s": 0.01, "second_first_s": None,
            "warm_median_ms": 1.0, "woken_median_ms": 1.1}
    return idle_script(hostile, record, record.cells[0], samples, wake, f"headline {hostile}")


def _swap_text(hostile: str) -> str:
    manifest = {
        "kind": "swap", "engine": _engine(hostile),
        "config": {"models_max": 1, "pattern": hostile, "concurrency": hostile, "n_predict": 1},
        "models": [_model(hostile, synthetic=True), _model("b", synthetic=False)],
        "router": {"argv": [f"/opt/{hostile}/llama-server", "--port", "9", "--models-preset", "/r/preset.ini",
                            "--alias", hostile],
                   "preset": f"[{hostile}]\nmodel = /m/{hostile}.gguf\n{hostile} = 1\n"}}
    requests = pd.DataFrame({"index": [0, 1, 2], "model": [hostile, "b", hostile]})
    return swap_script(hostile, parse_record(manifest, "manifest.json"), requests, [f"finding {hostile}"] * 4)


def _run(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess, Path]:
    script = tmp_path / "rerun.sh"
    script.write_text(text)
    for shell_bin in (BASH, SH):
        check = subprocess.run([shell_bin, "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, (shell_bin, check.stderr, text)
    box, stubs, record = tmp_path / "box", tmp_path / "stubs", tmp_path / "record"
    for d in (box, stubs, record):
        d.mkdir()
    # curl: the health check succeeds; a timed request prints what its -w format asks for
    _stub(stubs / "curl", 'for a in "$@"; do last="$a"; done\n'
                          'case "$*" in *http_code*) echo "200 0.001";; *time_total*) echo 0.001;; '
                          '*/models*) echo \'"value": "loaded"\';; esac\nexit 0\n')
    _stub(stubs / "sha256sum", 'echo "0  $1"\n')
    server = stubs / "server"
    _stub(server, 'printf "%s\\0" "$@" > "$RECORD_DIR/server.argv"; exec sleep 30\n')
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "RECORD_DIR": str(record), "HOME": str(box), "LLAMA_SERVER": str(server),
           "TMPDIR": str(box), "MODEL": "m.gguf", "MODEL_1": "m1.gguf", "MODEL_2": "m2.gguf"}
    done = subprocess.run([SH, str(script)], cwd=box, env=env, capture_output=True, text=True, timeout=120)
    return done, record


def _no_pwned(*roots: Path) -> None:
    found = [p for r in roots for p in r.rglob("pwned")]
    assert not found, f"the script ran an injected command: {found}"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_idle_rerun_script_runs_hostile_values_as_data(tmp_path, hostile):
    done, record = _run(tmp_path, _idle_text(hostile))
    _no_pwned(tmp_path, Path.cwd())
    assert "verdict:" in done.stdout, (done.stdout, done.stderr)
    argv = (record / "server.argv").read_bytes().decode().split("\0")[:-1]
    assert argv[argv.index("-t") + 1] == hostile and f"--server-args-axis={hostile}" in argv
    assert json.loads((tmp_path / "box" / "request.json").read_text())["prompt"] == hostile


@pytest.mark.parametrize("hostile", HOSTILE)
def test_swap_rerun_script_runs_hostile_values_as_data(tmp_path, hostile):
    done, record = _run(tmp_path, _swap_text(hostile))
    _no_pwned(tmp_path, Path.cwd())
    assert "verdict:" in done.stdout, (done.stdout, done.stderr)
    argv = (record / "server.argv").read_bytes().decode().split("\0")[:-1]
    assert argv[-1] == hostile
    preset = (tmp_path / "box" / "preset.ini").read_text()
    want = f"[{hostile}]\nmodel = /m/{hostile}.gguf\n{hostile} = 1\n".splitlines()
    got = preset.splitlines()
    assert got[0] == want[0] and got[-1] == want[-1] and len(got) == len(want)


@pytest.mark.parametrize("bad", ["echo 'open", 'echo "a\nb"', "x=1\ntouch pwned", "# a\nb", "echo a\\\nb",
                                 "echo a # c\rd"])
def test_the_script_writer_refuses_a_line_that_could_break(bad):
    with pytest.raises(ValueError):
        shell.script(["#!/bin/sh", bad])


def test_the_script_writer_keeps_a_quoted_value_with_a_newline():
    text = shell.script([shell.line("printf '%s' {} > out", "a\nb'c"), shell.comment("x\ny")])
    assert text.count("\n") == 3 and "# x\\ny" in text


@pytest.mark.parametrize("bad", ["1; touch pwned", float("nan"), float("inf"), None, True, "1"])
def test_a_number_in_code_must_be_one(bad):
    with pytest.raises(ValueError):
        shell.number(bad)
