"""Windows' stop path (``processes.stop_windows``: the tree read before the parent ends, then every
descendant killed), run here on real processes with the interrupt replaced by terminate(): Windows
itself never ran it (docs/windows.md)."""

import subprocess
import sys
import time

import psutil

from harness.engines import processes

PARENT = ("import subprocess, sys, time\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
          "time.sleep(60)\n")


def test_stop_windows_ends_the_whole_tree():
    proc = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        deadline = time.monotonic() + 20
        while not processes.descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = processes.descendants(proc.pid)
        assert len(tree) == 1  # the grandchild a router would have started
        processes.stop_windows(proc, 5.0, interrupt=proc.terminate)
        assert proc.returncode is not None
        gone, alive = psutil.wait_procs(tree, timeout=5)
        assert alive == []  # the orphaned child was killed too, not left behind
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_descendants_of_a_gone_process_is_empty():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert processes.descendants(proc.pid) == []
