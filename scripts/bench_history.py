"""Scale of the history archive, as a benchmark (prints figures; not a test).

    python scripts/bench_history.py RUN_DIR [RUN_DIR ...] --sizes 1000,10000,100000 \
        [--work /tmp/bench-history] [--repeat 3] [--skip-rates] [--keep] [--builds N] [--points N] [--jobs N]

From a few measured runs (an idle sweep and a swap storm made by lbench), writes archives of N
runs in the real on-disk format, ``<archive>/<machine id>/<run id>/`` (the manifests rewritten:
new run id, start time, engine build among 20, one of 3 machines; analysis.json as this lbench
writes it for the source's tables, under the new id; Parquet tables hard-linked to one of 16
variants of the source's, each with its latencies times a lognormal factor, log sd 0.1, so
series carry run-to-run noise; one machine's runs are 1.25x slower from one build on, a known
step).  Then, for each size, each step in a fresh Python process (its seconds timed around the
call, imports excluded; its peak RSS the whole process's, imports included), the median of
``--repeat``:

- ``catalog``: the catalog built from nothing (every manifest and analysis read, every idle
  run's samples read once for its medians); once, not repeated;
- ``add``: ``history add`` of 100 new runs (copy, validation, catalog update), a fresh batch each time;
- ``series``: a named series query (idle_warm_p50 of one model on one machine);
- ``changes``: every named series of every machine, and change-point detection over them;
- ``site cold`` / ``site warm``: the trend site built and written, its plot cache emptied first /
  kept from the build before (a nightly publish redraws only the series whose points changed);
  ``--builds``, ``--points`` and ``--jobs`` are ``lbench trend``'s options for these two steps.

Prints the archive's size on disk, a table of seconds and peak RSS per step and size, and the
growth exponent of each step between sizes (log t2/t1 over log n2/n1: 1 = linear in the runs,
0 = flat).  Also prints Otava's false-change-point and detection rates on simulated series
(``--skip-rates`` leaves them out), the figures docs/history.md states.
"""

from __future__ import annotations

import argparse
import json
import os
import math
import resource
import subprocess
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

    manifest = json.loads(_source_text(src, "manifest.json"))
    run_id = f"{when:%Y%m%dT%H%M%SZ}-{manifest['kind']}-{n % 65536:04x}"
    host = dict(manifest["host"])
    host.update(cpu_model=MACHINES[machine], os="Darwin", macos_version="15.1", hostname=f"runner-{machine}")
    host["fingerprint"] = fingerprint_of(host).as_dict()
    manifest.update(run_id=run_id, started_at=when.isoformat(timespec="milliseconds"), host=host)
    manifest["engine"] = {**manifest["engine"], "build_number": build}
    dest = mdir_root / host["fingerprint"]["id"] / run_id
    dest.mkdir(parents=True)
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (dest / "analysis.json").write_text(current_analysis_text(src).replace(RUN_ID_MARK, run_id, 1))
    for table in variant.glob("*.parquet"):
        os.link(table, dest / table.name)
    return dest


_ANALYSES: dict[Path, str] = {}
_TEXTS: dict[tuple[Path, str], str] = {}
RUN_ID_MARK = "@@RUN_ID@@"


def _source_text(src: Path, name: str) -> str:
    if (src, name) not in _TEXTS:
        _TEXTS[src, name] = (src / name).read_text()
    return _TEXTS[src, name]


def current_analysis_text(src: Path) -> str:
    """The source run's analysis.json as this lbench writes it, its run id a mark to replace (a
    stored analysis.json of an older schema would make every copy recomputed when the catalog
    reads it)."""
    if src not in _ANALYSES:
        from harness.analysis.persisted import analyze
        from harness.record import read_record
        from harness.store import Run

        analysis = {**analyze(Run(src, read_record(src / "manifest.json"))), "run_id": RUN_ID_MARK}
        _ANALYSES[src] = json.dumps(analysis, indent=1, default=str, allow_nan=False)
    return _ANALYSES[src]


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


STEPS = ["catalog", "add", "series", "changes", "site cold", "site warm"]
STEP_LABELS = {
    "catalog": "catalog from nothing (every manifest, analysis and idle run's samples read once)",
    "add": "history add of 100 new runs (copy, validate, catalog update)",
    "series": "named series idle_warm_p50, one model on one machine",
    "changes": "every named series + change points (every machine)",
    "site cold": "trend site, built and written, plot cache empty",
    "site warm": "trend site, built and written, plot cache kept",
}


def peak_rss_self_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_step(step: str, archive: Path, extra: str) -> dict:
    """One step, in this process (the child): seconds around the call and what it found."""
    t0 = time.perf_counter()
    info = ""
    if step == "catalog":
        from harness.history.catalog import load

        cat = load(archive)
        info = f"{len(cat.runs):,} runs, {len(cat.metrics):,} metric rows, {len(cat.skipped)} skipped"
    elif step == "add":
        from harness.history.catalog import add_runs

        # the generated runs carry no runner's signature (their manifests are rewritten here): added as
        # unsigned runs, so this times the copy, the tables' bounds and the catalog, not the signature check
        added, refused = add_runs(archive, [Path(extra)], allow_unsigned=True)
        if len(added) != 100 or refused:
            raise SystemExit(f"add: {len(added)} added, refused {refused[:3]}")
        info = f"{len(added)} added"
    elif step == "series":
        from harness.history.query import connect
        from harness.history.series import series_rows

        con = connect(archive, tables=False)
        rows = series_rows(con, "idle_warm_p50", machine=extra, model="tiny-q8")
        con.close()
        info = f"{len(rows):,} rows"
    elif step == "changes":
        from harness.history.changes import detect_all
        from harness.history.query import connect
        from harness.history.series import all_series

        con = connect(archive, tables=False)
        every = all_series(con)
        con.close()
        t1 = time.perf_counter()
        changes = detect_all(every)
        known = [c for c in changes if c.machine_label.startswith(MACHINES[STEP_MACHINE])
                 and c.build_after == STEP_BUILD and c.series == "idle_warm_p50"]
        info = (f"{len(every):,} series rows read in {t1 - t0:.2f} s, {len(changes)} change points; the known "
                f"x{STEP} step at build {STEP_BUILD}: " + (", ".join(f"x{c.ratio:.3f} [{c.ratio_lo:.3f}, "
                                                                    f"{c.ratio_hi:.3f}]" for c in known) or "not found"))
    elif step.startswith("site"):
        from harness.history.catalog import catalog_dir
        from harness.history.plot_cache import PLOT_DIR
        from harness.history.trend import build_site, write_site

        if step == "site cold":
            shutil.rmtree(catalog_dir(archive) / PLOT_DIR, ignore_errors=True)
            t0 = time.perf_counter()
        options = json.loads(os.environ.get("BENCH_SITE_OPTIONS") or "{}")
        site = build_site(archive, out=Path(extra), **options)
        index = write_site(site, Path(extra))
        info = (f"{sum(p.stat().st_size for p in index.parent.iterdir()) / 1e6:.1f} MB of pages, "
                f"{site.plots_drawn} plots drawn, {site.plots_cached} from the cache"
                + (f" ({', '.join(f'{k} {v}' for k, v in options.items())})" if options else ""))
    else:
        raise SystemExit(f"unknown step {step!r}")
    return {"seconds": time.perf_counter() - t0, "rss_mb": peak_rss_self_mb(), "info": info}


def child(step: str, archive: Path, extra: str = "") -> dict:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--step", step, "--archive", str(archive), "--extra", extra],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"step {step} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - t
    return result


def disk_mb(path: Path) -> float:
    """Space the folder takes on disk (du: a hard-linked file counted once)."""
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def bench_size(size: int, args, variants, samples_per_run: dict, rng: np.random.Generator) -> dict:
    archive = args.work / f"archive-{size}"
    n_samples = sum(samples_per_run[args.runs[i % len(args.runs)]] for i in range(size))
    print(f"\narchive of {size:,} runs ({n_samples:,} samples), load average {os.getloadavg()[0]:.2f}:", flush=True)
    total = size + 100 * args.repeat
    t = time.perf_counter()
    generate(args.runs, variants, archive, size, 0, rng, total)
    print(f"  generated in {time.perf_counter() - t:.1f} s: {disk_mb(archive):,.0f} MB on disk", flush=True)
    batches = []
    for b in range(args.repeat):
        staged = args.work / f"new-{size}-{b}"
        generate(args.runs, variants, staged, 100, size + 100 * b, rng, total)
        batches.append(staged)
    machine = sorted(p.name for p in archive.iterdir() if not p.name.startswith("."))[0]
    site = args.work / f"site-{size}"
    results: dict[str, list[dict]] = {}
    plan = [("catalog", [""])] + [("add", [str(b) for b in batches])] + [
        (step, [extra] * args.repeat) for step, extra in
        (("series", machine), ("changes", ""), ("site cold", str(site)), ("site warm", str(site)))]
    for step, extras in plan:
        results[step] = [child(step, archive, extra) for extra in extras]
        r = results[step]
        secs = sorted(x["seconds"] for x in r)
        print(f"  {STEP_LABELS[step]}: median {float(np.median(secs)):.2f} s of {len(r)} ({', '.join(f'{x:.2f}' for x in secs)}), "
              f"peak RSS {max(x['rss_mb'] for x in r):.0f} MB; {r[-1]['info']}", flush=True)
    from harness.history.catalog import catalog_dir

    sizes = {"archive_mb": disk_mb(archive), "catalog_mb": disk_mb(catalog_dir(archive)),
             "site_mb": disk_mb(site), "samples": n_samples}
    print(f"  on disk: archive {sizes['archive_mb']:,.0f} MB (catalog {sizes['catalog_mb']:.1f} MB), "
          f"site {sizes['site_mb']:.1f} MB", flush=True)
    if not args.keep:
        shutil.rmtree(archive, ignore_errors=True)
        for b in batches:
            shutil.rmtree(b, ignore_errors=True)
    return {"steps": {k: {"seconds": float(np.median([x["seconds"] for x in v])),
                          "rss_mb": max(x["rss_mb"] for x in v), "n": len(v)} for k, v in results.items()}, **sizes}


def summary(by_size: dict[int, dict]) -> None:
    sizes = sorted(by_size)
    print("\nsummary: median seconds (peak RSS MB) per step; growth exponent k in t ~ runs^k between sizes")
    head = " | ".join(f"{s:,} runs" for s in sizes)
    grow = " | ".join(f"k {a:,}->{b:,}" for a, b in zip(sizes, sizes[1:]))
    print(f"| step | {head} |" + (f" {grow} |" if grow else ""))
    print("|---" * (1 + len(sizes) + max(len(sizes) - 1, 0)) + "|")
    for step in STEPS:
        cells = [f"{by_size[s]['steps'][step]['seconds']:.2f} s ({by_size[s]['steps'][step]['rss_mb']:.0f} MB)"
                 for s in sizes]
        ks = []
        for a, b in zip(sizes, sizes[1:]):
            ta, tb = by_size[a]["steps"][step]["seconds"], by_size[b]["steps"][step]["seconds"]
            ks.append(f"{math.log(tb / ta) / math.log(b / a):.2f}" if ta > 0 and tb > 0 else "–")
        print(f"| {step} | " + " | ".join(cells) + " |" + (" " + " | ".join(ks) + " |" if ks else ""))
    print("| archive on disk | " + " | ".join(f"{by_size[s]['archive_mb']:,.0f} MB" for s in sizes) + " |")
    print("| samples | " + " | ".join(f"{by_size[s]['samples']:,}" for s in sizes) + " |")


def rates() -> None:
    from harness.history.changes import detection_rate, false_change_rate

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


def main() -> None:
    from harness import kinds

    kinds.install()  # the analysis and the catalog read each run's kind (harness/kinds/), as the lbench command does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="measured run directories (an idle run, a swap run)")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-history"))
    parser.add_argument("--repeat", type=int, default=3, help="runs of each step (the median is printed)")
    parser.add_argument("--keep", action="store_true", help="keep the generated archives")
    parser.add_argument("--skip-rates", action="store_true", help="leave out Otava's rates on simulated series")
    parser.add_argument("--builds", type=int, help="site steps: lbench trend --builds N (each machine's newest N "
                                                   "builds; default all)")
    parser.add_argument("--points", type=int, help="site steps: lbench trend --points N (runs listed per plot)")
    parser.add_argument("--jobs", type=int, help="site steps: lbench trend --jobs N (plot-drawing processes)")
    parser.add_argument("--step", help=argparse.SUPPRESS)  # a child: run one step, print its JSON
    parser.add_argument("--archive", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--extra", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(run_step(args.step, args.archive, args.extra)))
        return
    if len(args.runs) < 1:
        parser.error("give the measured run directories (an idle run and a swap run)")
    site_options = {k: getattr(args, k) for k in ("builds", "points", "jobs") if getattr(args, k) is not None}
    os.environ["BENCH_SITE_OPTIONS"] = json.dumps(site_options)  # read by the site steps' children
    if site_options:
        print(f"trend site options: {site_options}")
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    if not args.skip_rates:
        rates()
    rng = np.random.default_rng(0)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    variants = {(src, slow): make_variants(src, args.work, rng, STEP if slow else 1.0)
                for src in args.runs for slow in (False, True)}
    samples_per_run = {src: len(pd.read_parquet(src / "samples.parquet")) if (src / "samples.parquet").exists()
                       else 0 for src in args.runs}
    by_size = {}
    for size in sorted(int(s) for s in args.sizes.split(",")):
        by_size[size] = bench_size(size, args, variants, samples_per_run, rng)
    summary(by_size)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
