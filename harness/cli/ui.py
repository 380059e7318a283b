"""Console output shared by the commands: rich progress, messages, error printing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


class _LazyConsole:
    """A rich Console made on first use: importing rich.console costs tens of ms that
    `lbench --help` need not pay (tests/cli/test_lazy_imports.py)."""

    def __init__(self, **options) -> None:
        self._options = options
        self._console: Console | None = None

    @property
    def real(self) -> "Console":
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str):
        return getattr(self.real, name)


console = _LazyConsole(stderr=True, highlight=False)
out = _LazyConsole(highlight=False)  # results go to stdout, chatter to stderr


class RichReporter:
    """Implements harness.runner.Reporter with rich progress bars.

    The sweep bar does not auto-refresh: a refresh thread rendering while a response
    arrives holds the GIL and delayed the timed request by up to 5 ms (the switch
    interval).  It is redrawn on the main thread after each sample instead, outside
    the timed span.
    """

    def __init__(self) -> None:
        from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                   TextColumn, TimeElapsedColumn, TimeRemainingColumn, TransferSpeedColumn)

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), console=console.real, transient=False, auto_refresh=False)
        self.bytes = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                              TransferSpeedColumn(), TimeRemainingColumn(), console=console.real)
        self._task: TaskID | None = None
        self._bytes_task: TaskID | None = None

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        self.bytes.stop()

    def message(self, text: str) -> None:
        self.progress.console.print("• " + text, markup=False, highlight=False)

    def model_progress(self, done: int, total: int) -> None:
        if self._bytes_task is None:
            self.bytes.start()
            self._bytes_task = self.bytes.add_task("writing synthetic model", total=total)
        self.bytes.update(self._bytes_task, completed=done)
        if done >= total:
            self.bytes.stop()
            self._bytes_task = None

    def cell(self, label: str, total: int) -> None:
        if self._task is not None:
            self.progress.update(self._task, visible=True)
        self._task = self.progress.add_task(label, total=total)
        self.progress.refresh()

    def advance(self) -> None:
        if self._task is not None:
            self.progress.advance(self._task)
            self.progress.refresh()


def print_error(exc: Exception, code: int) -> None:
    label = "error (bad input)" if code == 2 else "error"
    console.print(f"[bold red]lbench: {label}:[/bold red] ", end="")
    console.print(str(exc), markup=False, highlight=False)
