"""``lbench history add|list|query`` and ``lbench trend``: runs from many machines, kept and read
across builds (docs/history.md)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from harness.cli.options import ResultsDir, shown
from harness.cli.ui import out, print_wrapped
from harness.errors import BadInput
from harness.history import require_extra

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(help="Keep runs from many machines in one archive, and query it (needs the history extra: "
                       "pip install 'lbench[history]').", no_args_is_help=True)


@app.callback()
def _history_extra(ctx: typer.Context) -> None:
    """Every history command needs the history extra; --help does not."""
    require_extra(f"lbench history {ctx.invoked_subcommand or ''}".strip())

Archive = Annotated[Optional[str], typer.Option(
    "--archive", metavar="DIR",
    help=f"History archive. {shown('$LBENCH_HISTORY_DIR, else history/ next to the results directory')}")]


def _archive(archive: str | None, results: str | None = None) -> Path:
    from harness.history.archive import archive_dir

    return archive_dir(archive, results)


@app.command("add")
def history_add(
    dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="Run directories, or folders of runs (a results "
                                                                  "directory, another archive)."),
    archive: Archive = None,
    results: ResultsDir = None,
    allow_unsigned: bool = typer.Option(
        False, "--allow-unsigned",
        help="Add runs that no trusted runner signed too, marked untrusted: never a gate baseline "
             "(e.g. lbench history add old-results/ --allow-unsigned)."),
) -> None:
    """Copy runs into the archive, <archive>/<machine id>/<run id>/ (append-only).

    Each run is read through the run record; a damaged or still-running run is refused with the
    reason, the others are added. Each run must be signed by a runner the archive trusts (lbench
    history trust add KEY); its tables must be within the archive's bounds (rows, decoded size,
    column types), checked from their metadata before they are read. A run added twice is one run
    (its manifest's sha256 matches); another run under an id the archive holds is refused. Only
    regular files the signature covers are copied, into a hidden folder checked there and renamed
    into place: nothing is half-copied. Exit 2 if any run was refused.

    \b
    Examples:
      lbench history add results/
      lbench history add ci-artefacts/m2-ultra/ --archive /srv/lbench-history
    """
    from harness.history.catalog import add_runs

    where = _archive(archive, results)
    added, refused = add_runs(where, dirs, allow_unsigned=allow_unsigned)
    from harness.history.trust import trusted_keys

    trusted = trusted_keys(where) if added else {}
    for a in added:
        note = (f" (left out: not regular files, or not covered by its signature: {', '.join(a.skipped_files)})"
                if a.skipped_files else "")
        signed = "" if a.outcome != "added" else (
            f", signed by {a.signer[:16]}…" + ("" if a.signer in trusted else " (a key this archive does not trust: "
                                               "untrusted, never a gate baseline)") if a.signer
            else ", UNSIGNED: untrusted, never a gate baseline")
        print_wrapped(out, f"{a.outcome}: {a.run_id} -> {a.machine_id}/{a.run_id}{signed}{note}")
    new = sum(a.outcome == "added" for a in added)
    print_wrapped(out, f"{new} added, {len(added) - new} already there, {len(refused)} refused; archive {where}")
    if refused:
        for r in refused:
            print(f"lbench: {r.line()}", file=sys.stderr)
        raise typer.Exit(2)


trust_app = typer.Typer(help="The runner keys an archive trusts (whose signed runs it takes in).",
                        no_args_is_help=True)
app.add_typer(trust_app, name="trust")


@app.command("key")
def history_key() -> None:
    """Print this runner's public key (made the first time): what an archive trusts.

    The private key stays in $LBENCH_RUNNER_KEY, else ~/.config/lbench/runner-key.pem (mode 0600);
    lbench signs every run it makes with it (signature.json in the run directory).

    \b
    Examples:
      lbench history key
      lbench history trust add "$(lbench history key)" --label m2-ultra \\
          --archive /srv/lbench-history
    """
    from harness.attest import key_id, runner_key

    print(key_id(runner_key()))


@app.command("sign")
def history_sign(
    dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories this runner made."),
    other_machine: bool = typer.Option(False, "--other-machine",
                                       help="Also sign runs whose manifest names another host (or none), knowingly: "
                                            "this runner then vouches for files it did not make, e.g. "
                                            "lbench history sign --other-machine DIR. " + shown("refused")),
) -> None:
    """Sign runs this runner made before lbench signed runs (writes signature.json into each).

    Sign only runs this machine made: a signature says "this runner vouches for these files". A run
    whose manifest names another host (or no host) is refused unless --other-machine is given.

    \b
    Examples:
      lbench history sign results/20261201T061512Z-idle-a07e
    """
    import socket

    from harness.attest import key_id, runner_key, sign_run
    from harness.record import parse_record
    from harness.untrusted import read_json

    key = runner_key()
    for d in dirs:
        manifest = d / "manifest.json"
        if d.is_symlink() or not d.is_dir():
            raise BadInput("not a run directory", where=str(d), hint="give run directories (folders with manifest.json)")
        record = parse_record(read_json(manifest, what="run's manifest"), str(manifest), manifest)
        if record.unfinished:
            raise BadInput(f"the run is {record.status_shown} (its manifest says 'running')", where=str(d),
                           hint="sign it once it has ended; an abandoned run never ends")
        made_on, here = record.host.hostname, socket.gethostname()
        if made_on != here and not other_machine:
            raise BadInput(f"the run was made on {'host ' + repr(made_on) if made_on else 'an unnamed host'}, "
                           f"not on this one ({here!r}): a signature says this runner vouches for its files",
                           where=str(d), hint="sign it on the runner that made it; or, knowingly, "
                                              "lbench history sign --other-machine DIR")
        sign_run(d, key)
        print_wrapped(out, f"signed {record.run_id} with {key_id(key)[:16]}…")


@trust_app.command("add")
def trust_add(
    key: str = typer.Argument(..., metavar="KEY", help="A runner's public key (lbench history key on that runner)."),
    label: Optional[str] = typer.Option(None, "--label", help="Which runner it is (e.g. --label m2-ultra-ci). "
                                                  f"{shown('none')}"),
    archive: Archive = None,
    results: ResultsDir = None,
) -> None:
    """Trust a runner: its signed runs may be added, and used as gate baselines.

    \b
    Examples:
      lbench history trust add "$KEY" --label m2-ultra   # its history key
    """
    from harness.history.trust import trust_key

    entry = trust_key(_archive(archive, results), key, label or "")
    print_wrapped(out, f"trusted {entry.key} ({entry.label or 'no label'})")


@trust_app.command("remove")
def trust_remove(
    key: str = typer.Argument(..., metavar="KEY", help="A trusted runner key."),
    archive: Archive = None,
    results: ResultsDir = None,
) -> None:
    """Stop trusting a runner: the runs it signed stay, untrusted (never a gate baseline).

    \b
    Examples:
      lbench history trust remove "$KEY"   # as trust list shows it
    """
    from harness.history.trust import untrust_key

    entry = untrust_key(_archive(archive, results), key)
    print_wrapped(out, f"no longer trusted: {entry.key} ({entry.label or 'no label'})")


@trust_app.command("list")
def trust_list(archive: Archive = None, results: ResultsDir = None) -> None:
    """The runner keys the archive trusts.

    \b
    Examples:
      lbench history trust list --archive /srv/lbench-history
    """
    from harness.history.trust import trust_path, trusted_keys

    where = _archive(archive, results)
    keys = trusted_keys(where)
    for k in keys.values():
        print_wrapped(out, f"{k.key}  label \"{k.label or '-'}\"  trusted {k.added_at}")
    print_wrapped(out, f"{len(keys)} trusted runner keys in {trust_path(where)}")


@app.command("list")
def history_list(archive: Archive = None, results: ResultsDir = None) -> None:
    """Machines in the archive with their run counts and builds.

    \b
    Examples:
      lbench history list --archive /srv/lbench-history
    """
    from rich.table import Table
    from rich.text import Text

    from harness.history.catalog import list_machines
    from harness.terminal import printable

    where = _archive(archive, results)
    if not where.is_dir():
        raise BadInput("no history archive there", where=str(where), hint="add runs first: lbench history add DIR")
    machines = list_machines(where)
    table = Table(show_edge=False)
    for col in ("machine", "label", "runs", "kinds", "builds", "first run", "last run"):
        table.add_column(col, overflow="fold")
    for m in machines:
        builds = (", ".join(map(str, m.builds)) if len(m.builds) <= 6
                  else f"{m.builds[0]}…{m.builds[-1]} ({len(m.builds)})")
        table.add_row(*(Text(printable(c)) for c in (  # data, never rich markup
            m.machine_id, m.label, str(m.runs), " ".join(f"{k}:{v}" for k, v in m.kinds.items()), builds,
            m.first or "", m.last or "")))
    out.print(table)
    print_wrapped(out, f"{sum(m.runs for m in machines)} runs on {len(machines)} machines in {where}")


@app.command("query")
def history_query(
    sql: str = typer.Argument(..., metavar="SQL", help="One SELECT (or WITH ... SELECT) statement."),
    archive: Archive = None,
    csv: bool = typer.Option(False, "--csv", help="Print CSV instead of a table."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
    series: Optional[str] = typer.Option(None, "--series", help="Print a named series instead of SQL's rows "
                                                                "(give '-' as SQL)."),
    machine: Optional[str] = typer.Option(None, "--machine", help="With --series: machine id or part of its label."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="With --series: model label."),
    setting: Optional[str] = typer.Option(None, "--setting", help="With --series: setting label."),
    results: ResultsDir = None,
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS",
                                  help="Stop the query after this long, exit 2 (e.g. --timeout 300)."),
) -> None:
    """Ad-hoc SQL over the archive (DuckDB, read-only): views runs, metrics, samples, requests,
    events, memory, median_k (docs/history.md); or a named series with --series.

    The query reaches the archive's views only (no other file, URL or extension; nothing written),
    in a child process bounded in memory and time; Ctrl-C or SIGTERM stops it.

    \b
    Examples:
      lbench history query "SELECT kind, count(*) FROM runs GROUP BY ALL"
      lbench history query - --series idle_warm_p50 -m tiny-q8 --csv
    """
    where = _archive(archive, results)
    if series:
        from harness.history.query import connect
        from harness.history.series import series_rows

        con = connect(where, tables=False)
        try:
            frame = series_rows(con, series, machine=machine, model=model, setting=setting)
        finally:
            con.close()
    else:
        from harness import kinds
        from harness.history.confined import run_confined

        frame = run_confined(where, sql, timeout_s=timeout, install=kinds.install)
    if csv:
        sys.stdout.write(frame.to_csv(index=False))
    elif json_out:
        sys.stdout.write(frame.to_json(orient="records", indent=1, date_format="iso") + "\n")
    else:
        _print_rows(frame)


def _cell(v: object) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else f"{v:.6g}" if isinstance(v, float) else str(v)


def _print_rows(frame: pd.DataFrame) -> None:
    """A table when its columns fit the terminal; else one block of ``column: value`` lines per row
    (psql's expanded display), so that no id or label is folded into pieces at 80 columns."""
    from rich.table import Table

    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    columns = [str(c) for c in frame.columns]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    if cells and sum(widths) + 3 * len(columns) > out.width:
        for n, row in enumerate(cells, start=1):
            print_wrapped(out, f"-[ row {n} ]" + "-" * max(0, min(out.width, 40) - 12))
            for col, value in zip(columns, row):
                print_wrapped(out, f"{col} | {value}")
    elif cells:
        table = Table(show_edge=False)
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in cells:
            table.add_row(*row)
        out.print(table)
    print_wrapped(out, f"{len(frame)} rows")


def trend(
    archive: Archive = None,
    out_dir: Path = typer.Option(None, "--out", metavar="DIR", help=f"Where the site goes. "
                                                                     f"{shown('<archive>/site')}"),
    machine: Optional[str] = typer.Option(None, "--machine", help="Only this machine (id or part of its label)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Only this model."),
    points: int = typer.Option(50, "--points", metavar="N", min=0,
                               help="Runs listed in the table under each plot (the newest; the page names the "
                                    "command that lists them all)."),
    builds: Optional[int] = typer.Option(None, "--builds", metavar="N", min=1,
                                         help="Only each machine's newest N engine builds (change points also see "
                                              "the runs just before them, as many as Otava's window). "
                                              + shown("all")),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", metavar="N", min=1,
                                       help="Processes drawing the plots not in the plot cache. "
                                            + shown("the CPUs, at most 4")),
    bisect: bool = typer.Option(False, "--bisect", help="Run the bisect of a change point (the newest, or "
                                                        "--change K; builds engines: minutes per step)."),
    change: int = typer.Option(1, "--change", min=1, metavar="K", help="With --bisect: the K-th change point "
                                                                        "with a bisect, as numbered in the output."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --bisect: print the command, run nothing."),
    results: ResultsDir = None,
) -> None:
    """Write the trend site (one page per machine, a series per model, setting and metric across
    engine builds, every point with its interval and run id) and state each change point, newest
    first, with the `lbench bisect` command that finds its build.

    Each machine is read, plotted and written in turn (memory bounded by one machine's page); plots
    whose points did not change come from the archive's plot cache. Needs the history extra
    (pip install 'lbench[history]').

    \b
    Examples:
      lbench trend --archive /srv/lbench-history --out site/
      lbench trend --builds 20 --points 30   # each machine's newest 20 builds
      lbench trend --bisect --dry-run
      lbench trend --bisect --change 2
    """
    require_extra("lbench trend")
    from harness.history.series import SERIES
    from harness.history.trend import build_site, write_site

    where = _archive(archive, results)
    if not where.is_dir():
        raise BadInput("no history archive there", where=str(where), hint="add runs first: lbench history add DIR")
    out_dir = out_dir or where / "site"
    site = build_site(where, machine=machine, model=model, points=points, builds=builds, jobs=jobs, out=out_dir)
    index = write_site(site, out_dir)
    for line in site.index["findings"][:1]:
        print_wrapped(out, line)
    numbered = 0
    for c in site.changes:
        if c.is_bisect:
            numbered += 1
        print_wrapped(out, (f"{numbered}. " if c.is_bisect else "- ") + c.sentence(SERIES[c.series].unit))
        if c.command:
            print_wrapped(out, f"  {'to find the build' if c.is_bisect else 'to compare the builds'}: {c.command}")
    print_wrapped(out, f"trend site: {index}")
    if bisect:
        runnable = [c for c in site.changes if c.is_bisect]
        if not runnable:
            print_wrapped(out, "nothing to bisect: no change point with a bisect lies between two builds")
            return
        if change > len(runnable):
            raise BadInput(f"--change {change}: there are {len(runnable)} change point(s) with a bisect",
                           where="--change", hint=f"give a number from 1 to {len(runnable)}, as numbered above")
        command = runnable[change - 1].command or ""
        print_wrapped(out, f"bisect: {command}")
        if dry_run:
            return
        argv = [sys.executable, "-m", "harness", *shlex.split(command)[1:]]
        if results:
            argv += ["--results", results]
        raise typer.Exit(subprocess.run(argv).returncode)
