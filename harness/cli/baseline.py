"""``lbench baseline save|show``: named baselines, keyed by machine fingerprint."""

from __future__ import annotations

import typer

from harness.cli.options import ResultsDir
from harness.cli.ui import console, out, print_wrapped

app = typer.Typer(help="Save and list baselines (keyed by machine fingerprint).", no_args_is_help=True)


@app.command("save")
def baseline_save(
    run: str = typer.Argument("latest", metavar="RUN", help="Run to keep as the baseline ('latest': the newest "
                                                            "idle or swap run, the kinds compare and gate take)."),
    name: str = typer.Option("main", "--name", help="Baseline name (use as baseline:NAME)."),
    results: ResultsDir = None,
) -> None:
    """Keep a run as a named baseline in the lbench cache.

    \b
    Examples:
      lbench baseline save latest --name main
    """
    from harness import baselines, paths
    from harness.kinds import latest_kinds_to_compare

    baselines.check_name(name)
    r = baselines.resolve_run(run, paths.results_dir(results), kinds=latest_kinds_to_compare())
    notes: list[str] = []
    dest = baselines.save(r, name, notes)
    for note in notes:
        print_wrapped(console, f"note: {note}")
    fp = baselines.fingerprint(r.record)
    print_wrapped(out, f"baseline {name!r} = run {r.run_id} (fingerprint {fp['id']}), kept in {dest}")


@app.command("show")
def baseline_show() -> None:
    """List baselines with their fingerprints.

    \b
    Examples:
      lbench baseline show
    """
    from harness import baselines

    # a block per baseline, not a table: names and run ids are never cut at 80 columns
    found = baselines.list_baselines()
    print_wrapped(out, f"{len(found)} baseline(s) in {baselines.root()}")
    for b in found:
        fp = b["fingerprint"]
        print_wrapped(out, f"{b['name']}: run {b['run_id']}, saved {b['saved_at']}", first="  ", rest="      ")
        print_wrapped(out, f"fingerprint {fp['id']}: chip {fp.get('chip')}, engine build {fp.get('engine_build')}",
                      first="    ", rest="      ")
