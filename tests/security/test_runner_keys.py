"""Runner keys are checked as ssh checks its keys, and signing another machine's run is a knowing
act (issue 47): a key readable by others, owned by another user, or in a folder another user can
write (not sticky) is refused with what to do; ``history sign`` of a run whose manifest names
another host needs ``--other-machine``; a symlinked key or trust list says what to do about
that file (not about a run)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from conftest import make_history_run, run_cli
from harness.attest import runner_key
from harness.errors import BadInput
from harness.history.trust import trusted_keys

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX owners and modes")


@pytest.fixture
def key_at(tmp_path, monkeypatch):
    def make(folder: Path, mode: int = 0o600) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "runner-key.pem"
        monkeypatch.setenv("LBENCH_RUNNER_KEY", str(path))
        runner_key()  # made 0600 by lbench
        path.chmod(mode)
        return path
    return make


def test_a_private_key_of_mine_is_used(key_at, tmp_path):
    key_at(tmp_path / "keys")
    assert runner_key(create=False) is not None


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_a_key_others_can_read_or_write_is_refused(key_at, tmp_path, mode):
    path = key_at(tmp_path / "keys", mode)
    with pytest.raises(BadInput, match="readable or writable by others") as exc:
        runner_key(create=False)
    assert f"chmod 600 {path}" in str(exc.value)


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_key_owned_by_another_user_is_refused(key_at, tmp_path):
    path = key_at(tmp_path / "keys")
    os.chown(path, 12345, 12345)
    with pytest.raises(BadInput, match="owned by another user"):
        runner_key(create=False)


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_key_in_a_folder_of_another_user_is_refused(key_at, tmp_path):
    key_at(tmp_path / "keys")
    os.chown(tmp_path / "keys", 12345, 12345)
    with pytest.raises(BadInput, match="owned by another user"):
        runner_key(create=False)


def test_a_key_in_a_world_writable_folder_is_refused_unless_sticky(key_at, tmp_path):
    key_at(tmp_path / "shared")
    (tmp_path / "shared").chmod(0o777)
    with pytest.raises(BadInput, match="writable by others"):
        runner_key(create=False)
    (tmp_path / "shared").chmod(0o1777)  # like /tmp: nobody may replace another's entry
    assert runner_key(create=False) is not None


def test_no_key_is_made_in_a_world_writable_folder(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("LBENCH_RUNNER_KEY", str(shared / "runner-key.pem"))
    with pytest.raises(BadInput, match="writable by others"):
        runner_key()
    assert not (shared / "runner-key.pem").exists()


def test_a_symlinked_key_says_what_to_do_with_the_key(key_at, tmp_path, monkeypatch):
    path = key_at(tmp_path / "keys")
    link = tmp_path / "keys" / "link.pem"
    link.symlink_to(path)
    monkeypatch.setenv("LBENCH_RUNNER_KEY", str(link))
    with pytest.raises(BadInput, match="symbolic link") as exc:
        runner_key(create=False)
    assert "run directory" not in exc.value.hint and "chmod 600" in exc.value.hint


def test_a_symlinked_trust_list_says_what_to_do_with_the_list(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"keys": []}))
    (archive / ".trusted-keys.json").symlink_to(real)
    with pytest.raises(BadInput, match="symbolic link") as exc:
        trusted_keys(archive)
    assert "trust list" in exc.value.hint and "copy the run" not in exc.value.hint


def test_signing_another_machines_run_needs_a_flag(lbench_env, tmp_path):
    run = make_history_run(tmp_path / "made", 0)  # its manifest names host "h"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["host"]["hostname"] != socket.gethostname()
    (run / "signature.json").unlink(missing_ok=True)
    r = run_cli("history", "sign", str(run), env=lbench_env)
    assert r.returncode == 2 and "made on host 'h'" in r.stderr and "--other-machine" in r.stderr, r.stderr
    assert not (run / "signature.json").exists()
    r = run_cli("history", "sign", "--other-machine", str(run), env=lbench_env)
    assert r.returncode == 0 and (run / "signature.json").exists(), r.stderr
    manifest["host"]["hostname"] = socket.gethostname()
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert run_cli("history", "sign", str(run), env=lbench_env).returncode == 0
