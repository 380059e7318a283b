"""``lbench baseline save|show``: named baselines, keyed by machine fingerprint."""

from __future__ import annotations

import typer
from rich.table import Table

from harness.cli.options import ResultsDir
from harness.cli.ui import out

app = typer.Typer(help="Save and list baselines (keyed by machine fingerprint).", no_args_is_help=True)


@app.command("save")
def baseline_save(
    run: str = typer.Argument("latest", metavar="RUN", help="Run to keep as the baseline ('latest': the newest "
                                                            "idle or swap run, the kinds compare and gate take)."),
    name: str = typer.Option("main", "--name", help="Baseline name (use as baseline:NAME)."),
    results: ResultsDir = None,
) -> None:
    """Keep a run as a named baseline in the lbench cache.

    Examples:
      lbench baseline save latest --name main
    """
    from harness import baselines, paths
    from harness.kinds import latest_kinds_to_compare

    r = baselines.resolve_run(run, paths.results_dir(results), kinds=latest_kinds_to_compare())
    dest = baselines.save(r, name)
    fp = baselines.fingerprint(r.manifest)
    out.print(f"baseline {name!r} = run {r.run_id} -> {dest} (fingerprint {fp['id']})", markup=False, soft_wrap=True)


@app.command("show")
def baseline_show() -> None:
    """List baselines with their fingerprints.

    Examples:
      lbench baseline show
    """
    from harness import baselines

    t = Table(title=f"baselines in {baselines.root()}")
    for col in ("name", "run", "saved", "fingerprint", "chip", "engine build"):
        t.add_column(col)
    for b in baselines.list_baselines():
        fp = b["fingerprint"]
        t.add_row(b["name"], b["run_id"], b["saved_at"], fp["id"], str(fp.get("chip")), str(fp.get("engine_build")))
    out.print(t)
