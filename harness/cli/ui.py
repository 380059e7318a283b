"""Console output shared by the commands: rich progress, messages, error printing."""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from harness.terminal import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


class _LazyConsole:
    """A rich Console made on first use: importing rich.console costs tens of ms that
    `lbench --help` need not pay (tests/cli/test_lazy_imports.py)."""

    def __init__(self, **options: Any) -> None:  # rich Console's options
        self._options = options
        self._console: Console | None = None

    @property
    def real(self) -> "Console":
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:  # whatever the Console has
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
        from rich.table import Column

        # at 80 columns the label wraps onto a second line (fold) and the bar shrinks: the counts
        # and times are never cut to "200/2... 0:00:..."
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}",
                                                             table_column=Column(ratio=1, overflow="fold")),
                                 BarColumn(bar_width=16), MofNCompleteColumn(table_column=Column(no_wrap=True)),
                                 TimeElapsedColumn(table_column=Column(no_wrap=True)), TextColumn("eta"),
                                 TimeRemainingColumn(table_column=Column(no_wrap=True)), console=console.real,
                                 transient=False, auto_refresh=False, expand=True)
        self.bytes = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                              TransferSpeedColumn(), TimeRemainingColumn(), console=console.real)
        self._task: TaskID | None = None
        self._bytes_task: TaskID | None = None
        self._last_redraw = 0.0
        self._left = 0

    REDRAW_EVERY_S = 0.25

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        self.bytes.stop()

    def message(self, text: str) -> None:
        print_wrapped(self.progress.console, "• " + text, rest="  ")

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
        self._left = total
        self._last_redraw = monotonic()
        self.progress.refresh()

    def advance(self) -> None:
        """Count a sample; redraw at most every ``REDRAW_EVERY_S`` (a redraw between two
        back-to-back requests is time the sweep spends neither pausing nor measuring)."""
        if self._task is not None:
            self.progress.advance(self._task)
            self._left -= 1
            now = monotonic()
            if now - self._last_redraw >= self.REDRAW_EVERY_S or self._left <= 0:
                self._last_redraw = now
                self.progress.refresh()


def print_error(exc: Exception, code: int) -> None:
    """``lbench: error (bad input): what`` then its ``where:`` and ``what to do:`` lines, wrapped
    between words at the console's width: a path or run id in them is never cut."""
    from rich.text import Text

    prefix = f"lbench: {'error (bad input)' if code == 2 else 'error'}:"
    width = console.width
    for i, para in enumerate(str(exc).split("\n")):
        if i == 0:
            lines = wrap_words(f"{prefix} {para}", width, rest="    ")
            head = lines[0][len(prefix):] if lines[0].startswith(prefix) else lines[0]
            console.print(Text.assemble((prefix, "bold red"), printable(head)), soft_wrap=True, highlight=False)
            lines = lines[1:]
        else:
            lines = wrap_words(para.strip(), width, first="  " if para.startswith("  ") else "", rest="    ")
        for line in lines:
            console.print(printable(line), markup=False, highlight=False, soft_wrap=True)


def wrap(atoms: list[str], width: int, *, first: str = "", rest: str = "    ") -> list[str]:
    """Lay out phrases that must stay whole (a run id, a path, ``20.0 ms``, a model name) in lines
    of at most ``width`` characters, breaking only between them; a phrase longer than a line gets
    a line of its own rather than being cut."""
    lines: list[str] = []
    line: str | None = None
    for atom in (a for a in atoms if a):
        if line is None:
            line = first + atom
        elif len(line) + 1 + len(atom) > width:
            lines.append(line)
            line = rest + atom
        else:
            line += " " + atom
    if line is not None:
        lines.append(line)
    return lines


class WrapOptions(TypedDict, total=False):
    """``wrap``'s indents, passed on by ``wrap_words`` and ``print_wrapped``."""

    first: str
    rest: str


def wrap_words(text: str, width: int, **kw: Unpack[WrapOptions]) -> list[str]:
    """``wrap`` at spaces: words (paths, run ids) are never broken."""
    return wrap(text.split(" "), width, **kw)


def print_wrapped(console_: "Console | _LazyConsole", text: str | list[str], style: str | None = None,
                  **kw: Unpack[WrapOptions]) -> None:
    """Print at the console's width (80 without a TTY, or $COLUMNS), never cutting a word.  Data in
    ``text`` (labels, a CPU model, paths) is shown, never obeyed: control, bidi and invisible
    characters are escaped, a huge value cut (harness/terminal.py)."""
    lines = wrap_words(text, console_.width, **kw) if isinstance(text, str) else wrap(text, console_.width, **kw)
    for line in lines:
        console_.print(printable(line), style=style, markup=False, highlight=False, soft_wrap=True)
