"""The ``lbench`` command.  Exit codes: 0 success, 1 run failed, 2 bad input, 130 interrupted."""

from __future__ import annotations

import errno
import signal
import sys

import typer

from harness.cli import ab, bisect, compare, engine, idle, model, repro, runs, swap
from harness.cli.ui import print_error
from harness.engines import processes
from harness.errors import LbenchError

app = typer.Typer(
    name="lbench",
    help="Benchmark idle-wake and model-swap latency of local LLM servers (llama-server).\n\n"
         "Quick start: lbench engine install && lbench idle --model tiny-q8",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(engine.app, name="engine")
app.add_typer(model.app, name="model")
app.command("idle")(idle.idle)
app.command("swap")(swap.swap)
app.command("repro")(repro.repro)
app.command("bisect")(bisect.bisect)
app.command("calibrate")(idle.calibrate)
app.command("report")(runs.report)
app.command("compare")(compare.compare)
app.command("gate")(compare.gate)
app.add_typer(compare.baseline_app, name="baseline")
app.command("evidence")(compare.evidence)
app.command("gate-bench")(compare.gate_bench)
app.command("ab")(ab.ab)
app.command("runs")(runs.runs)


WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def _sigterm(signum, frame):  # turn SIGTERM into the same clean stop as Ctrl-C
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code in this mode
    except LbenchError as exc:
        print_error(exc, exc.exit_code)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        processes.stop_all()
        print("lbench: interrupted; measured samples were kept", file=sys.stderr)
        sys.exit(130)
    except typer.Abort:
        processes.stop_all()
        sys.exit(130)
    except SystemExit:
        raise
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        processes.stop_all()  # e.g. a report or log that could not be written: one line, not a traceback
        print(f"lbench: error: cannot write {exc.filename or ''}: {exc.strerror or exc}".replace("write :", "write:"),
              file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        # usage errors from Typer's (vendored) click carry their own message and exit code 2
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)
