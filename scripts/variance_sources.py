#!/usr/bin/env python3
"""Where the between-run spread comes from (a benchmark report, not a test): for every design
folder under ROOT (scripts/design_spread.sh writes them), the sd of the per-run log median and its
95% interval per pause, by design, gating metric, reps per run and fresh process vs same process
(harness/analysis/variance_sources.py).  Prints a table with every run id, writes spreads.csv.

    python scripts/variance_sources.py results/design-spread [--pauses 0,1.5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.variance_sources import table, within_run  # noqa: E402
from harness.store import open_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--pauses", default="0,1.5")
    args = ap.parse_args()
    pauses = [float(p) for p in args.pauses.split(",")]
    designs, ids = {}, {}
    for folder in sorted(p for p in args.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        runs = [open_run(d, folder) for d in sorted(folder.iterdir()) if (d / "manifest.json").is_file()]
        runs = [r for r in runs if r.record.status == "complete"]
        if len(runs) >= 2:
            designs[folder.name] = [r.table("samples") for r in runs]
            ids[folder.name] = [r.run_id for r in runs]
    frame = table(designs, pauses)
    frame.to_csv(args.root / "spreads.csv", index=False)
    print(f"sd of the per-run log median [95% chi-square interval], runs per design in parentheses; {args.root}")
    for (factor, pause), g in frame.groupby(["factor", "pause_s"], sort=False):
        print(f"\n{factor}, pause {pause:g} s")
        for r in g.itertuples():
            print(f"  {r.design:<18} {r.variant:<44} {r.sd_log:6.3f} [{r.sd_ci_low:.3f}, {r.sd_ci_high:.3f}] "
                  f"({r.runs})  median {r.median_ms:7.2f} ms")
    print("\nwithin a run (for gate-bench --simulate --within-sd --stall-p): robust log sd, stalls > 1.5x median")
    for name, runs in designs.items():
        for pause in pauses:
            w = within_run(name, runs, pause)
            print(f"  {name:<18} pause {pause:g} s: within-sd {w.within_sd:.3f}, stall-p {w.stall_p:.3f} ({w.runs} runs)")
    print("\nruns:")
    for name, run_ids in ids.items():
        print(f"  {name}: {' '.join(run_ids)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
