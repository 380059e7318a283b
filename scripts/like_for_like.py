#!/usr/bin/env python3
"""Benchmark read-out (not a test): pool idle runs that crossed llama-server with llama-idle and say,
per model and pause, whether the server's prompt_ms agrees with llama-idle's decode within +/-5%.

The run is the unit: per run, the median of each side; the ratio's 95% interval comes from the
two-level bootstrap compare uses (runs, then samples within runs). llama-idle gives 3 decodes per
pause per run, so pool several runs (issue 15 asks for pause 0 on two model sizes):

    for i in 1 2 3 4 5; do lbench idle -m tiny-q8 -m llama3.2-1b-q8 --engine llama-server \\
        --engine llama-idle --match llama-idle --pauses 0 --reps 6 --no-report; done
    python scripts/like_for_like.py RUN_ID [RUN_ID ...] [--pause 0] [--results DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    from harness import paths
    from harness.analysis.idle import AGREE_MARGIN, cross_check
    from harness.store import open_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="idle run ids (or directories) with a llama-idle cross-check")
    ap.add_argument("--pause", type=float, action="append", help="only these pauses (repeat); default all")
    ap.add_argument("--results", help="results directory (default: $LBENCH_RESULTS_DIR, else ./results)")
    a = ap.parse_args(argv)
    root = paths.results_dir(a.results)
    runs = [open_run(ref, root, kinds=["idle"]) for ref in a.runs]
    samples = pd.concat([r.table("samples").assign(run_id=r.run_id) for r in runs], ignore_index=True)
    matched = {r.run_id: (r.manifest.get("like_for_like") or {}).get("match") for r in runs}
    rows = [r for r in cross_check(samples) if not a.pause or r["pause_s"] in a.pause]
    if not rows:
        print("no pause has both llama-server and llama-idle samples in these runs", file=sys.stderr)
        return 2
    print(f"{len(runs)} runs: {', '.join(matched)}")
    if any(m != "llama-idle" for m in matched.values()):
        print("note: not every run used --match llama-idle; those do different work per iteration")
    print(f"{'model':<18} {'pause':>5} {'runs':>4} {'n srv':>5} {'n idle':>6} {'prompt ms':>9} {'idle ms':>8} "
          f"{'ratio':>6} {'95% CI':>13}  +/-{AGREE_MARGIN:.0%}")
    for r in rows:
        ci = (f"{r['ratio_server_ci_low']:.3f}-{r['ratio_server_ci_high']:.3f}"
              if r["ratio_server_ci_low"] == r["ratio_server_ci_low"] else "-")
        print(f"{r['model']:<18} {r['pause_s']:>5g} {r['n_runs']:>4} {r['n_server']:>5} {r['n_llama_idle']:>6} "
              f"{r['server_prompt_ms']:>9.3f} {r['llama_idle_ms']:>8.3f} {r['ratio_server']:>6.3f} {ci:>13}  "
              f"{r['agreement']}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
