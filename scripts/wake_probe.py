"""Where does the after-pause penalty go?  Per request, the server's threads' scheduler statistics.

Starts llama-server (lbench's engine path) on a model, then for each pause: sleeps, reads every server
thread's /proc/<pid>/task/<tid>/schedstat (on-CPU ns, runqueue-wait ns, slices) and the per-CPU steal
counters of /proc/stat, sends one cached one-token completion, reads them again.  Prints one line per
request: prompt_ms, and per thread the on-CPU and runqueue-wait milliseconds spent during the request,
plus the CPU it last ran on.  If the penalty shows as runqueue wait of a compute thread, the guest
scheduler held it; if not (and steal grows), the time went to the host (vCPU wake).  Linux only.

    python scripts/wake_probe.py -m tiny-q8 --pauses 0,0.5 --reps 5 [--threads 2] [--omp-wait active]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def threads(pid: int) -> dict[int, tuple[int, int, int, int, str]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns, wait_ns, slices = (int(x) for x in (task / "schedstat").read_text().split())
            stat = (task / "stat").read_text()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            cpu = int(stat[stat.rindex(")") + 2:].split()[36])
        except (OSError, ValueError):
            continue
        out[int(task.name)] = (run_ns, wait_ns, slices, cpu, comm)
    return out


def steal() -> list[int]:
    return [int(line.split()[8]) for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("cpu") and line[3].isdigit()]


def main() -> None:
    from harness.engines.base import Setting
    from harness.engines.llama_server import LlamaServerEngine, locate
    from harness.models.resolve import resolve

    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="tiny-q8")
    ap.add_argument("--pauses", default="0,0.5")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--omp-wait")
    ap.add_argument("--out", help="write the rows as JSON lines here")
    a = ap.parse_args()
    pauses = [float(p) for p in a.pauses.split(",")]
    model = resolve(a.model)
    setting = Setting(threads=a.threads, omp_wait=a.omp_wait)
    log = Path("/tmp/wake_probe_server.log")
    rows = []
    with LlamaServerEngine(locate(), ctx_size=512).start(model.path, setting, log) as server:
        for _ in range(5):
            server.complete_one_token()
        for rep in range(a.reps):
            for pause in pauses:
                time.sleep(pause)
                before, s0 = threads(server.pid), steal()
                c = server.complete_one_token()
                after, s1 = threads(server.pid), steal()
                per = {}
                for tid, (run, wait, sl, cpu, comm) in after.items():
                    r0, w0, sl0, _, _ = before.get(tid, (run, wait, sl, cpu, comm))
                    if run - r0 or wait - w0:
                        per[f"{comm}/{tid}"] = {"on_cpu_ms": round((run - r0) / 1e6, 3),
                                                "rq_wait_ms": round((wait - w0) / 1e6, 3), "slices": sl - sl0,
                                                "cpu": cpu}
                row = {"rep": rep, "pause_s": pause, "prompt_ms": c.timings.get("prompt_ms"),
                       "latency_ms": round(c.latency_ms, 3), "steal_ticks": [b - x for x, b in zip(s0, s1)],
                       "threads": per}
                rows.append(row)
                busiest = sorted(per.items(), key=lambda kv: -kv[1]["rq_wait_ms"])[:3]
                print(f"pause {pause:4.2f} prompt_ms {row['prompt_ms']:7.2f} steal {row['steal_ticks']} "
                      + " ".join(f"{k}:cpu{v['cpu']} run {v['on_cpu_ms']} wait {v['rq_wait_ms']}"
                                 for k, v in busiest), flush=True)
    if a.out:
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
