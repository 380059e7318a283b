import os
import subprocess
import sys
import time

from harness.probes.process_tree import TreeSampler, read_tree


def test_reads_children_and_rss():
    kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        s = read_tree(os.getpid())
        pids = {k.pid for k in kids}
        assert set(s.children) >= pids
        assert all(s.children[pid] > 1_000_000 for pid in pids)
        assert s.root_rss > 0 and s.total_rss > s.root_rss and s.mem_available and s.mem_available > 0
    finally:
        for k in kids:
            k.kill()
            k.wait()
    assert not ({k.pid for k in kids} & set(read_tree(os.getpid()).children))


def test_zombies_do_not_count():
    kid = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited, not yet reaped: a zombie
    try:
        assert kid.pid not in read_tree(os.getpid()).children
    finally:
        kid.wait()


def test_sampler_runs_at_its_rate_and_stops():
    samples = []
    sampler = TreeSampler(os.getpid(), samples.append, rate_hz=50).start()
    time.sleep(0.5)
    sampler.stop()
    n = len(samples)
    assert n >= 5  # lenient: a loaded 2-core box may be slow
    time.sleep(0.1)
    assert len(samples) == n and sampler.cpu_s >= 0
