"""Scale of the history archive, as a benchmark (prints figures; not a test).

    python scripts/bench_history.py RUN_DIR [RUN_DIR ...] --sizes 1000,10000 [--work /tmp/bench-history]

From a few measured runs (an idle sweep and a swap storm made by lbench), writes archives of N
runs in the real on-disk format, ``<archive>/<machine id>/<run id>/`` (the manifests rewritten:
new run id, start time, engine build among 20, one of 3 machines; the analysis.json rewritten to
the new id as lbench would have written it for the same tables; Parquet tables hard-linked to one
of 16 variants of the source's, each with its latencies times a lognormal factor, log sd 0.1, so
series carry run-to-run noise; one machine's runs are 1.25x slower from one build on, a known
step).  Then times, for each size:

- ``history add`` of 100 new runs into it (copy, validation, catalog update);
- the catalog built from nothing (every manifest and analysis read once);
- a named series query (idle_warm_p50 of one model on one machine: DuckDB over every idle
  run's samples.parquet);
- the trend site (every series, plots, change points) and change-point detection alone;

and prints each with the peak RSS of this process.  Also prints the false-change-point rate of
Otava on 200 simulated flat series of 20 points (log sd 0.1), the figure docs/history.md states.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MACHINES = ["Apple M1", "Apple M2 Ultra", "Apple M4"]
BUILDS = [9093 + 120 * i for i in range(20)]
VARIANTS = 16


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_variants(src: Path, work: Path, rng: np.random.Generator, slower: float = 1.0) -> list[Path]:
    """Copies of the run's Parquet tables with latencies scaled (one folder per variant)."""
    out = []
    for v in range(VARIANTS):
        d = work / "variants" / f"{src.name}-{v}-x{slower}"
        d.mkdir(parents=True, exist_ok=True)
        factor = float(np.exp(rng.normal(0, 0.1))) * slower
        for table in src.glob("*.parquet"):
            frame = pd.read_parquet(table)
            for col in ("latency_ms", "server_prompt_ms", "ttfb_ms"):
                if col in frame:
                    frame[col] = frame[col] * factor
            frame.to_parquet(d / table.name, index=False)
        out.append(d)
    return out


def write_run(src: Path, variant: Path, mdir_root: Path, n: int, when: datetime, machine: int, build: int) -> Path:
    from harness.record import fingerprint_of

    manifest = json.loads((src / "manifest.json").read_text())
    run_id = f"{when:%Y%m%dT%H%M%SZ}-{manifest['kind']}-{n % 65536:04x}"
    host = dict(manifest["host"])
    host.update(cpu_model=MACHINES[machine], os="Darwin", macos_version="15.1", hostname=f"runner-{machine}")
    host["fingerprint"] = fingerprint_of(host).as_dict()
    manifest.update(run_id=run_id, started_at=when.isoformat(timespec="milliseconds"), host=host)
    manifest["engine"] = {**manifest["engine"], "build_number": build}
    dest = mdir_root / host["fingerprint"]["id"] / run_id
    dest.mkdir(parents=True)
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
    analysis = json.loads((src / "analysis.json").read_text())
    analysis["run_id"] = run_id
    (dest / "analysis.json").write_text(json.dumps(analysis))
    for table in variant.glob("*.parquet"):
        os.link(table, dest / table.name)
    return dest


STEP_MACHINE, STEP_BUILD, STEP = 1, BUILDS[12], 1.25  # a known step: M2 Ultra's latencies x1.25 from there


def generate(sources: list[Path], variants: dict[tuple[Path, bool], list[Path]], root: Path, count: int,
             start: int, rng: np.random.Generator, total: int) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(start, start + count):
        src = sources[i % len(sources)]
        build = BUILDS[min(len(BUILDS) - 1, i * len(BUILDS) // total)]
        machine = (i // len(sources)) % len(MACHINES)
        slow = machine == STEP_MACHINE and build >= STEP_BUILD
        write_run(src, variants[src, slow][int(rng.integers(VARIANTS))], root, i, t0 + timedelta(minutes=i),
                  machine, build)


def timed(label: str, fn):
    t = time.perf_counter()
    result = fn()
    print(f"  {label}: {time.perf_counter() - t:.2f} s (peak RSS {peak_rss_mb():.0f} MB)", flush=True)
    return result


def bench_size(size: int, args, variants, samples_per_run: dict, rng: np.random.Generator) -> None:
    from harness.history.archive import add_runs
    from harness.history.catalog import catalog_dir, load
    from harness.history.changes import detect_all
    from harness.history.query import connect
    from harness.history.series import all_series, series_rows
    from harness.history.trend import build_site, write_site

    archive = args.work / f"archive-{size}"
    n_samples = sum(samples_per_run[args.runs[i % len(args.runs)]] for i in range(size))
    print(f"\narchive of {size:,} runs ({n_samples:,} samples), load average {os.getloadavg()[0]:.2f}:")
    timed(f"generate {size:,} runs", lambda: generate(args.runs, variants, archive, size, 0, rng, size + 100))
    timed("catalog from nothing (every manifest and analysis read)", lambda: load(archive))
    staged = args.work / f"new-{size}"
    generate(args.runs, variants, staged, 100, size, rng, size + 100)
    new_dirs = [d for m in staged.iterdir() for d in m.iterdir()]
    added, refused = timed("history add of 100 new runs", lambda: add_runs(archive, new_dirs))
    assert len(added) == 100 and not refused, refused[:3]
    machine = sorted(p.name for p in archive.iterdir() if not p.name.startswith("."))[0]
    con = connect(archive)
    rows = timed(f"series idle_warm_p50 of tiny-q8 on machine {machine}",
                 lambda: series_rows(con, "idle_warm_p50", machine=machine, model="tiny-q8"))
    print(f"    {len(rows)} rows")
    every = timed("every named series, every machine", lambda: all_series(con))
    con.close()
    changes = timed(f"change points over {len(every):,} series rows", lambda: detect_all(every))
    print(f"    {len(changes)} change points; the known step (machine {MACHINES[STEP_MACHINE]}, x{STEP} from "
          f"build {STEP_BUILD}):")
    for c in changes[:8]:
        print(f"    - {c.series} {c.model} on {c.machine_label.split(',')[0]}: build {c.build_before} -> "
              f"{c.build_after}, x{c.ratio:.3f} [{c.ratio_lo:.3f}, {c.ratio_hi:.3f}]")
    site = timed("trend site (build and write)",
                 lambda: write_site(build_site(archive), args.work / f"site-{size}"))
    print(f"    {site} ({sum(p.stat().st_size for p in site.parent.iterdir()) / 1e6:.1f} MB)")
    print(f"    catalog: {sum(p.stat().st_size for p in catalog_dir(archive).iterdir()) / 1e6:.2f} MB")
    if not args.keep:
        shutil.rmtree(archive, ignore_errors=True)
        shutil.rmtree(staged, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="measured run directories (an idle run, a swap run)")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-history"))
    parser.add_argument("--keep", action="store_true", help="keep the generated archives")
    args = parser.parse_args()
    from harness.history.changes import detection_rate, false_change_rate

    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    t = time.perf_counter()
    with_any, total = false_change_rate()
    print(f"false change points, 200 flat series x 20 points, log sd 0.1: {with_any} series of 200 "
          f"({total} change points), {time.perf_counter() - t:.1f} s")
    with_any, total = false_change_rate(n_series=100, n_points=200)
    print(f"false change points, 100 flat series x 200 points, log sd 0.1: {with_any} series of 100 "
          f"({total} change points)")
    for step in (1.1, 1.2, 1.3, 1.5):
        exact, anywhere = detection_rate(step)
        print(f"step x{step} halfway through 50 series x 20 points, log sd 0.1: found at its build in {exact} of 50 "
              f"(a change point anywhere in {anywhere})")
    rng = np.random.default_rng(0)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    variants = {(src, slow): make_variants(src, args.work, rng, STEP if slow else 1.0)
                for src in args.runs for slow in (False, True)}
    samples_per_run = {src: len(pd.read_parquet(src / "samples.parquet")) if (src / "samples.parquet").exists()
                       else 0 for src in args.runs}
    for size in (int(s) for s in args.sizes.split(",")):
        bench_size(size, args, variants, samples_per_run, rng)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
