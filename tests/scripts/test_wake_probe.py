"""scripts/wake_probe.py's /proc readers, on this process (Linux only)."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def load():
    path = Path(__file__).resolve().parents[2] / "scripts" / "wake_probe.py"
    spec = importlib.util.spec_from_file_location("wake_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_threads_and_steal_read_proc():
    probe = load()
    threads = probe.threads(os.getpid())
    assert os.getpid() in threads
    run_ns, wait_ns, slices, cpu, comm = threads[os.getpid()]
    assert run_ns > 0 and wait_ns >= 0 and slices >= 1 and 0 <= cpu < os.cpu_count() and comm
    steal = probe.steal()
    assert len(steal) == os.cpu_count() and all(s >= 0 for s in steal)
