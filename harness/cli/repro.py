"""``lbench repro``: check the source documents' claims on the engine at hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from harness.cli.options import Builds, LlamaServer, Report, ResultsDir, shown
from harness.cli.ui import RichReporter, out, print_wrapped

if TYPE_CHECKING:
    from harness.engines.binary import Binary
    from harness.repro.claims import ClaimSpec

COLOURS = {"holds": "green", "contradicted": "red", "not checkable here": "yellow", "error": "magenta",
           "inconclusive": "cyan"}


def repro(
    claims: list[str] = typer.Argument(None, metavar="CLAIM...", help="Claim ids (or prefixes). "
                                       + shown("all bundled claims (experiments/claims/, or $LBENCH_CLAIMS)")),
    list_only: bool = typer.Option(False, "--list", help="List the claims and exit."),
    results: ResultsDir = None,
    llama_server: LlamaServer = None,
    report: Report = True,
    build: Builds = None,
) -> None:
    """Reproduce the seeds' claims on the real engine: holds / contradicted / not checkable here.

    Each claim is a spec in experiments/claims/ (text, source, scenario, check). Evidence
    for each (router logs, events.parquet, memory.parquet) lands in results/<run>/claims/<id>/.

    \b
    Examples:
      lbench repro --list
      lbench repro                       # every claim checkable here
      lbench repro router-cap router-stop-timeout
      lbench repro router-env-models-max --build 11434 --build 10500
    """
    from harness.repro.claims import load_claims

    specs = load_claims(claims or None)
    if list_only:
        from harness.cli.ui import print_wrapped

        # a block per claim, not a table: the id (what one types) is never cut at 80 columns
        print_wrapped(out, f"{len(specs)} claims (lbench repro ID...):")
        for c in specs:
            out.print(c.id, markup=False, highlight=False, soft_wrap=True)
            print_wrapped(out, f"scenario {c.scenario} · requires {','.join(c.requires) or '-'} · {c.claim}",
                          first="    ", rest="    ")
        return
    from harness.engines.builds import binaries

    failed = False
    for binary in binaries(build, llama_server):
        failed |= _run_one(specs, binary, results, report)
    if failed:
        raise typer.Exit(1)


def _run_one(specs: list[ClaimSpec], binary: Binary, results: str | None, report: bool) -> bool:
    from harness.report.render import render_report
    from harness.kinds import get
    from harness.runkind import RunOptions

    repro = get("repro")
    with RichReporter() as reporter:
        run = repro.execute(repro.prepare(specs, RunOptions(binary=binary, results=results), reporter), reporter)
    if report:
        print_wrapped(out, f"report: {render_report(run)}")
    from rich.table import Table
    table = Table(title=f"claims · run {run.run_id}")
    for col in ("claim", "verdict", "why / measured"):
        table.add_column(col)
    for row in run.table("verdicts").to_dict("records"):
        colour = COLOURS.get(row["verdict"], "white")
        table.add_row(row["claim_id"], f"[{colour}]{row['verdict']}[/{colour}]", str(row["reason"]))
    out.print(table)
    print_wrapped(out, f"run: {run.run_id} in {run.dir} (llama.cpp build {binary.build_number})")
    verdicts = run.table("verdicts")
    return bool((verdicts["verdict"] == "error").any())
