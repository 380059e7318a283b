"""Crafted GGUF headers: bounded time and memory in model info and discovery (issue 12, class 2)."""

import os
import struct
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from harness.errors import BadInput
from harness.models.gguf_bounds import HeaderError, check_header


def header(n_tensors: int, n_kv: int, body: bytes = b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + body


KEY = struct.pack("<Q", 3) + b"abc"
CRAFTED = {
    "huge tensor count": header(2**62, 0),
    "huge kv count": header(0, 2**62),
    "huge string": header(0, 1, struct.pack("<Q", 2**60) + b"ab"),
    "huge u8 array": header(0, 1, KEY + struct.pack("<I", 9) + struct.pack("<IQ", 0, 2**40)),
    "huge string array": header(0, 1, KEY + struct.pack("<I", 9) + struct.pack("<IQ", 8, 2**40)),
    "many dims": header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<I", 2**31) + b"\0" * 16),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_header_is_refused_by_the_bounds_check(tmp_path, name):
    path = tmp_path / "bad.gguf"
    path.write_bytes(CRAFTED[name])
    with pytest.raises(HeaderError):
        check_header(path)


def test_model_info_and_discovery_stay_within_time_and_memory(tmp_path):
    """Run in a child with a 1 GiB address-space limit and a timeout: before the bounds check the
    u8-array case took 17 s and hit MemoryError."""
    folder = tmp_path / "llama-cache"
    folder.mkdir()
    for i, data in enumerate(CRAFTED.values()):
        (folder / f"bad{i}.gguf").write_bytes(data)
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from pathlib import Path
        from harness.errors import BadInput
        from harness.models.gguf_info import read_model_info
        from harness.models.discover import discover
        for p in sorted(Path({str(folder)!r}).glob("*.gguf")):
            try:
                read_model_info(p)
                sys.exit("accepted " + p.name)
            except BadInput as exc:
                assert "GGUF" in exc.what, exc.what
        found = [f for f in discover() if f.path.parent == Path({str(folder)!r})]
        assert len(found) == {len(CRAFTED)} and all(f.note and not f.aliases for f in found), found
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LLAMA_CACHE": str(folder),
           "LBENCH_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_fuzzed_headers_are_read_or_refused_as_bad_input(lbench_env, tmp_path, tail, n_tensors, n_kv):
    from harness.models.gguf_info import read_model_info

    path = tmp_path / "fuzz.gguf"
    path.write_bytes(header(n_tensors, n_kv, tail))
    try:
        read_model_info(path)
    except BadInput:
        pass
