"""The ``lbench`` command.  Exit codes: 0 success, 1 run failed, 2 bad input, 130 interrupted.

The command modules import only typer, rich and light harness modules at the top;
numeric libraries, HTTP clients and templates are imported inside the commands, so
``lbench --help`` starts at once (tests/cli/test_lazy_imports.py checks it).
"""

from __future__ import annotations

import errno
import signal
import sys
from types import FrameType
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand

from harness.cli import (ab, baseline, bisect, compare, engine, evidence, export, gate, gate_bench, gate_plan, history,
                         idle, model, probes, repro, runs, swap, wake_bench)
from harness.cli.ui import print_error
from harness.cli.version import version_callback
from harness.errors import BadInput, LbenchError

app = typer.Typer(
    name="lbench",
    help="Benchmark idle-wake and model-swap latency of local LLM servers (llama-server).\n\n"
         "Quick start (as in the README, from a checkout): bash scripts/setup.sh && .venv/bin/lbench idle "
         "(setup.sh installs lbench and runs `lbench engine install`; then `lbench idle` measures).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print lbench's version and the engine build it would use, then exit."),
) -> None:
    """Benchmark idle-wake and model-swap latency of local LLM servers (llama-server)."""


app.add_typer(engine.app, name="engine")
app.add_typer(model.app, name="model")
app.command("idle")(idle.idle)
app.command("swap")(swap.swap)
app.command("repro")(repro.repro)
app.command("bisect")(bisect.bisect)
app.command("calibrate")(idle.calibrate)
app.command("report")(runs.report)
app.command("compare")(compare.compare)
app.command("gate")(gate.gate)
app.add_typer(baseline.app, name="baseline")
app.command("evidence")(evidence.evidence)
app.command("gate-bench")(gate_bench.gate_bench)
app.command("gate-plan")(gate_plan.gate_plan)
app.command("wake-bench")(wake_bench.wake_bench)
app.command("ab")(ab.ab)
app.command("runs")(runs.runs)
app.command("export")(export.export)
app.command("probes")(probes.probes)
app.add_typer(history.app, name="history")
app.command("trend")(history.trend)


class RunsCommand(TyperCommand):
    """A command that reads or starts runs: lbench's kinds of run (harness/kinds/) are installed as it
    starts, after its options are parsed, so its ``--help`` loads none of them."""

    def invoke(self, ctx: Any) -> Any:  # Typer's click Context (Typer >= 0.20 carries its own click)
        from harness import kinds

        kinds.install()
        return super().invoke(ctx)


NO_RUNS = ("engine", "model", "probes")  # commands that read no run: they start without the kinds


def _install_kinds_first(group: typer.Typer) -> None:
    for info in group.registered_commands:
        if info.name not in NO_RUNS:
            info.cls = RunsCommand
    for sub in group.registered_groups:
        if sub.name not in NO_RUNS and sub.typer_instance is not None:
            _install_kinds_first(sub.typer_instance)


_install_kinds_first(app)


WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def _stop_children() -> None:
    """Stop every child process lbench started (none if no command got as far as importing processes)."""
    processes = sys.modules.get("harness.engines.processes")
    if processes is not None:
        processes.stop_all()


def _sigterm(signum: int, frame: FrameType | None) -> NoReturn:  # turn SIGTERM into the same clean stop as Ctrl-C
    raise KeyboardInterrupt


def _interrupted_text() -> str:
    """What Ctrl-C kept: per run this process started, the rows kept, where, and how the run ended
    (a run whose end was under way when the signal came ended first: complete, failed or interrupted)."""
    store = sys.modules.get("harness.store")
    started = list(getattr(store, "STARTED", []))
    if not started:
        return "lbench: interrupted before any run started; nothing was written"
    parts = []
    for w in started:
        kept = ", ".join(f"{n} {table}" for table, n in sorted(w.counts.items())) or "no samples"
        status = w.manifest.get("status")
        ended = ("" if status == "interrupted" else " (its end was not written; lbench runs shows it abandoned)"
                 if status == "running" else f" (the run had ended {status})")
        parts.append(f"{kept} kept in {w.dir}{ended} (lbench report {w.run_id} renders them)")
    return "lbench: interrupted; " + "; ".join(parts)


def main() -> None:
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        code = app(standalone_mode=False, prog_name="lbench")  # returns typer.Exit's code in this mode
    except LbenchError as exc:
        print_error(exc, exc.exit_code)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _stop_children()
        print(_interrupted_text(), file=sys.stderr)
        sys.exit(130)
    except typer.Abort:  # click's name for a Ctrl-C it caught itself
        _stop_children()
        print(_interrupted_text(), file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a path given by someone (a model file, a run): bad input, one line
            _stop_children()
            name = str(exc.filename or "")
            print_error(BadInput(f"file name too long ({len(name):,} characters): {name[:80]}"
                                 + ("…" if len(name) > 80 else ""),
                                 hint="a name is at most 255 bytes per folder level (4096 in all); rename the file "
                                      "or give a shorter path"), 2)
            sys.exit(2)
        if exc.errno not in WRITE_ERRNOS:
            raise
        _stop_children()  # e.g. a report or log that could not be written: one line, not a traceback
        print(f"lbench: error: cannot write {exc.filename or ''}: {exc.strerror or exc}".replace("write :", "write:"),
              file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        # usage errors from Typer's (vendored) click carry their own message and exit code 2
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(exit_code, int):
            exc.show()
            sys.exit(exit_code)
        raise
    if code == 130:  # Typer turned a Ctrl-C into its exit code: say what was kept, as above
        _stop_children()
        print(_interrupted_text(), file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 0)
