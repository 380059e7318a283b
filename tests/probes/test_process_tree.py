import os
import subprocess
import sys
import time

from harness.probes.process_tree import TreeSampler, read_tree


def test_reads_children_and_rss():
    kids = [subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)"],
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for k in kids:
            assert k.stdout.readline() == "up\n"  # started: the interpreter runs (an event, not a delay)
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
    os.waitid(os.P_PID, kid.pid, os.WEXITED | os.WNOWAIT)  # wait for its exit without reaping it: a zombie
    try:
        assert kid.pid not in read_tree(os.getpid()).children
    finally:
        kid.wait()


def test_sampler_runs_at_its_rate_and_stops():
    samples = []
    sampler = TreeSampler(os.getpid(), samples.append, rate_hz=50).start()
    deadline = time.monotonic() + 120  # 5 samples take 0.1 s at 50 Hz; a loaded box may take much longer
    while len(samples) < 5:
        assert time.monotonic() < deadline, f"only {len(samples)} samples"
        time.sleep(0.02)
    sampler.stop()
    n = len(samples)
    assert not sampler._thread.is_alive()  # stopped: nothing can append any more
    assert len(samples) == n and sampler.cpu_s >= 0
