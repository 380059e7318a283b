"""``lbench baseline save|show``: named baselines, keyed by machine fingerprint."""

from __future__ import annotations

import typer

from harness.cli.options import ResultsDir
from harness.cli.ui import console, out, print_wrapped

app = typer.Typer(help="Save and list baselines (kept in <results>/.baselines, keyed by machine fingerprint).",
                  no_args_is_help=True)


@app.command("save")
def baseline_save(
    run: str = typer.Argument("latest", metavar="RUN", help="Run to keep as the baseline ('latest': the newest "
                                                            "run of --kind)."),
    name: str = typer.Option("main", "--name", help="Baseline name (use as baseline:NAME)."),
    kind: str = typer.Option("idle", "--kind", help="What 'latest' picks: the newest idle or swap run."),
    results: ResultsDir = None,
) -> None:
    """Keep a run as a named baseline, in <results>/.baselines beside the runs.

    \b
    Examples:
      lbench baseline save latest --name main      # the newest idle run
      lbench baseline save latest --kind swap --name storm
    """
    from harness import baselines, paths
    from harness.errors import BadInput
    from harness.runkind import latest_kinds_to_compare

    baselines.check_name(name)
    allowed = sorted(latest_kinds_to_compare())
    if kind not in allowed:
        raise BadInput(f"--kind must be one of {', '.join(allowed)}, got {kind!r}", where="--kind")
    root = paths.results_dir(results)
    r = baselines.resolve_run(run, root, kinds={kind})
    notes: list[str] = []
    dest = baselines.save(r, name, root, notes)
    for note in notes:
        print_wrapped(console, f"note: {note}")
    fp = baselines.fingerprint(r.record)
    print_wrapped(out, f"baseline {name!r} = run {r.run_id} (fingerprint {fp['id']}), kept in {dest}")


@app.command("show")
def baseline_show(results: ResultsDir = None) -> None:
    """List baselines with their fingerprints.

    \b
    Examples:
      lbench baseline show
    """
    from harness import baselines, paths

    # a block per baseline, not a table: names and run ids are never cut at 80 columns
    root = paths.results_dir(results)
    found = baselines.list_baselines(root)
    print_wrapped(out, f"{len(found)} baseline(s) in {baselines.root(root)}"
                  + (f" and {baselines.old_root()} (older lbench)" if any(b["old_location"] for b in found) else ""))
    for b in found:
        fp = b["fingerprint"]
        print_wrapped(out, f"{b['name']}: run {b['run_id']}, saved {b['saved_at']}"
                      + (" (old location)" if b["old_location"] else ""), first="  ", rest="      ")
        print_wrapped(out, f"fingerprint {fp['id']}: chip {fp.get('chip')}, engine build {fp.get('engine_build')}",
                      first="    ", rest="      ")
