#!/usr/bin/env python3
"""Benchmark (not a test): wall time of `lbench --help` and of every subcommand's --help,
best of N fresh processes, against `python -c "import typer, rich"` (the floor for a Typer
CLI with rich help), a bare Typer+Rich app's `--help` (one command, Typer's own help
rendering) and `python -c pass`.

Goal (issue 13): every --help <= 0.3 s and <= 2.5x the typer+rich floor, on a quiet machine.
Timed with bytecode caches, as an installed lbench runs (PYTHONDONTWRITEBYTECODE is dropped
for the timed processes, and one warm-up round writes the caches).

    python scripts/bench_help.py                 # best of 10, python -m harness
    python scripts/bench_help.py -n 20 --lbench lbench
    python scripts/bench_help.py --only idle,swap -n 3
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

GOAL_S = 0.3
GOAL_RATIO = 2.5
# a bare Typer+Rich app: one command that prints with rich, its --help rendered by Typer
BARE_APP = """
import sys
import rich
import typer

app = typer.Typer()


@app.command()
def hello(name: str = typer.Option("world", help="Who to greet.")) -> None:
    \"\"\"Say hello.\"\"\"
    rich.print(f"hello {name}")


sys.argv[0] = "bare"
app()
"""


def best_of(argv: list[str], n: int, env: dict[str, str]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
        best = min(best, elapsed)
    return best


def subcommands() -> list[list[str]]:
    import typer

    from harness.cli import app

    def walk(command, path):
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, path + [name])

    return list(walk(typer.main.get_command(app), []))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=10, help="runs per command; the best is kept (default 10)")
    ap.add_argument("--lbench", default=None,
                    help="command that starts lbench (default: this Python with -m harness)")
    ap.add_argument("--only", default=None, help="comma list of subcommands to time (default: all)")
    args = ap.parse_args()
    if args.n < 1:
        ap.error("-n must be >= 1")
    lbench = shlex.split(args.lbench) if args.lbench else [sys.executable, "-m", "harness"]
    # as an installed lbench runs: with bytecode caches (pip compiles them at install; an editable
    # install writes them on first import).  PYTHONDONTWRITEBYTECODE would make every start
    # recompile lbench's modules from source, which is not what a user pays.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["COLUMNS"] = "100"

    paths = subcommands()
    if args.only:
        wanted = {w.strip() for w in args.only.split(",") if w.strip()}
        paths = [p for p in paths if not p or " ".join(p) in wanted or p[0] in wanted]
    runs = {"pass": [sys.executable, "-c", "pass"], "floor": [sys.executable, "-c", "import typer, rich"],
            "bare": [sys.executable, "-c", BARE_APP, "--help"]}
    for path in paths:
        runs["lbench " + " ".join([*path, "--help"])] = [*lbench, *path, "--help"]
    for argv in runs.values():  # warm-up: writes the bytecode caches, fills the OS file cache
        best_of(argv, 1, env)
    # rounds are interleaved (every command once per round), so a noisy spell hits all of them alike
    best = {label: float("inf") for label in runs}
    for _ in range(args.n):
        for label, argv in runs.items():
            best[label] = min(best[label], best_of(argv, 1, env))
    floor = best.pop("floor")
    bare = best.pop("bare")
    print(f"python -c pass:                 {best.pop('pass') * 1e3:7.1f} ms (best of {args.n})")
    print(f'python -c "import typer, rich": {floor * 1e3:7.1f} ms (best of {args.n})  <- the floor')
    print(f"a bare Typer+Rich app --help:   {bare * 1e3:7.1f} ms (best of {args.n})")
    print(f"{'command':<34} {'best ms':>8} {'ratio':>6}  goal (<= {GOAL_S * 1e3:.0f} ms, ratio <= {GOAL_RATIO})")
    worst = 0.0
    for label, t in best.items():
        ratio = t / floor
        worst = max(worst, ratio)
        ok = t <= GOAL_S and ratio <= GOAL_RATIO
        print(f"{label:<34} {t * 1e3:8.1f} {ratio:6.2f}  {'ok' if ok else 'OVER'}")
    top = best["lbench --help"]
    print(f"lbench --help / the bare Typer+Rich app's --help: {top / bare:.2f} (goal <= {GOAL_RATIO})")
    print(f"worst ratio {worst:.2f} over {len(best)} commands; machine: {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} (figures from a busy machine are indicative only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
