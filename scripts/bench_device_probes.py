"""What device sampling costs, as a benchmark (prints figures; not a test).

    python scripts/bench_device_probes.py [--pid PID] [--probes auto] [--interval 0.5] [--seconds 60]
        [--pause 4]

Reads the chosen device probes (``lbench probes`` lists them) of process ``--pid`` (default:
this process; point it at a running llama-server) through back-to-back pauses of ``--pause``
seconds for ``--seconds`` seconds, exactly as an idle sweep does (the same ``DeviceSampler``,
default interval and guard), and prints the sampler thread's CPU time over the windows' wall
time (the fraction of one core sampling costs; the target is <= 1%), the number of readings
and the slowest reading.
"""

from __future__ import annotations

import argparse
import os
import time

from harness.probes.devices import registry
from harness.probes.devices.sampler import DEFAULT_INTERVAL_S, DeviceSampler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, default=os.getpid())
    ap.add_argument("--probes", default="auto")
    ap.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--pause", type=float, default=4.0)
    args = ap.parse_args()
    status = registry.describe()
    names = registry.select(args.probes, status)
    probes = registry.build(names, args.pid)
    print(f"probes: {', '.join(f'{p.name}:{p.device}' for p in probes) or 'none'} (pid {args.pid}, interval "
          f"{args.interval:g} s)")
    if not probes:
        raise SystemExit("no device probe to sample here")
    n_rows = 0

    def emit(row: dict) -> None:
        nonlocal n_rows
        n_rows += 1

    sampler = DeviceSampler(probes, emit, interval_s=args.interval)
    t_end = time.perf_counter() + args.seconds
    while time.perf_counter() < t_end:
        start = time.perf_counter()
        sampler.window({}, start, start + args.pause)
        time.sleep(args.pause)
        sampler.stop()
    sampler.join()
    cost = sampler.cost()
    print(f"windows {cost['window_s']:.1f} s, readings {cost['n_readings']} ({n_rows} rows), sampler CPU "
          f"{cost['cpu_s'] * 1000:.1f} ms = {100 * (cost['core_fraction'] or 0):.3f}% of one core, slowest reading "
          f"{cost['slowest_reading_ms']:.2f} ms")


if __name__ == "__main__":
    main()
