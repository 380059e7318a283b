#!/usr/bin/env python3
"""Both servers alive, requests alternating between them: does this design lower the gate's spread?
(A benchmark, not a test; issue 42 asks for it to be measured before the gate job's design is kept.)

Per job: two llama-server processes of the same build and model (an A/A pair) are started and stay
up; after a warm-up, each round sends one warm request (pause 0) to each, in an order balanced across
rounds (AB, BA, BA, AB ...), and the job's contrast is the mean per-round log ratio A2/A with its
t interval. Jobs are repeated on fresh pairs of servers. Two figures decide the design:
  - the spread of the job contrasts ACROSS jobs (what a gate's interval must cover), and
  - the mean half-width of the interval WITHIN a job (what the alive design would claim).
If the first is much larger, each pair's start fixes an offset that more rounds cannot average out,
and an A/A verdict from two alive servers is a false alarm far more often than its level says.

    .venv/bin/python scripts/alive_servers.py [--model llama3.2-1b-q8] [--jobs 12] [--rounds 40] [--out DIR]

Writes DIR/<bench id>/samples.csv (one row per request: job, round, arm, order, latency_ms) and
jobs.csv; prints both figures and the bench id. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy import stats  # noqa: E402

from harness.analysis.gate_plan import sd_interval  # noqa: E402
from harness.engines import registry  # noqa: E402
from harness.engines.base import Setting  # noqa: E402
from harness.engines.registry import EngineOptions  # noqa: E402
from harness.models.resolve import resolve_for_engine  # noqa: E402


def job_contrast(logs: list[float]) -> tuple[float, float]:
    """The mean per-round log ratio and its 99% t half-width (the gate's 1% two-sided level)."""
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    return mean, float(stats.t.ppf(0.995, n - 1)) * sd / math.sqrt(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama3.2-1b-q8")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/alive-servers"))
    args = ap.parse_args()
    if args.jobs < 2 or args.rounds < 2:
        print("error: --jobs and --rounds need 2 or more", file=sys.stderr)
        return 2
    bench_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-alive-" + secrets.token_hex(2)
    out = args.out / bench_id
    out.mkdir(parents=True)
    model = resolve_for_engine(args.model, "llama-server")
    kind = registry.require("llama-server", "idle")
    assert kind.make_server is not None
    engine = kind.make_server(EngineOptions())
    setting = Setting()
    rng = random.Random(args.seed)
    rows: list[dict] = []
    jobs: list[dict] = []
    logdir = Path(tempfile.mkdtemp(prefix="alive-"))
    print(f"{bench_id}: {args.jobs} jobs x {args.rounds} rounds, model {model.path.name}, pause 0, "
          f"build {engine.binary.build_number if engine.binary else '?'}")
    for job in range(1, args.jobs + 1):
        with engine.start(model.path, setting, logdir / f"a-{job}.log") as a, \
                engine.start(model.path, setting, logdir / f"a2-{job}.log") as a2:
            servers = {"A": a, "A2": a2}
            for _ in range(args.warmup):
                a.complete_one_token()
                a2.complete_one_token()
            logs = []
            for r in range(args.rounds):
                block = ["A", "A2"] if (r // 2 + r) % 2 == 0 else ["A2", "A"]  # AB BA BA AB ...
                if r % 4 == 0 and rng.random() < 0.5:
                    block.reverse()
                got = {}
                for position, arm in enumerate(block):
                    c = servers[arm].complete_one_token()
                    if c.error or c.http_status != 200:
                        print(f"error: job {job} round {r}: {arm}: {c.error or c.http_status}", file=sys.stderr)
                        return 1
                    got[arm] = c.latency_ms
                    rows.append({"job": job, "round": r, "arm": arm, "position": position,
                                 "latency_ms": round(c.latency_ms, 4)})
                logs.append(math.log(got["A2"] / got["A"]))
            mean, half = job_contrast(logs)
            jobs.append({"job": job, "rounds": args.rounds, "log_ratio": mean, "half_width_99": half,
                         "ratio": math.exp(mean), "excludes_1": abs(mean) > half})
            print(f"  job {job:2d}: A2/A {math.exp(mean):.4f} [{math.exp(mean - half):.4f}, "
                  f"{math.exp(mean + half):.4f}]{'  <- excludes 1' if abs(mean) > half else ''}")
    for name, table in (("samples.csv", rows), ("jobs.csv", jobs)):
        with (out / name).open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    means = [j["log_ratio"] for j in jobs]
    m = sum(means) / len(means)
    across = math.sqrt(sum((x - m) ** 2 for x in means) / (len(means) - 1))
    lo, hi = sd_interval(across, len(means))
    within_se = sum(j["half_width_99"] for j in jobs) / len(jobs) / float(stats.t.ppf(0.995, args.rounds - 1))
    false = sum(j["excludes_1"] for j in jobs)
    print(f"\n{bench_id} ({len(jobs)} jobs, {args.rounds} rounds each, pause 0):")
    print(f"  across jobs: sd of the job's log contrast {across:.4f} [95% {lo:.4f}, {hi:.4f}]")
    print(f"  within a job: mean standard error the alive design claims {within_se:.4f}")
    print(f"  A/A jobs whose 99% interval excludes 1 (false alarms at a 1% level): {false}/{len(jobs)}")
    print(f"  raw samples: {out}/samples.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
