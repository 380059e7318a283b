"""The idle summary table: a column per cell when they fit, else a small table per cell, so a
model name or setting is never broken into letters at 80 columns."""

import io
import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

from test_render import _stepped_run  # noqa: E402

from harness.cli.idle import _summary_table  # noqa: E402


def _render(renderable, width):
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_cells_side_by_side_when_they_fit_else_a_table_each(tmp_path):
    run = _stepped_run(tmp_path, label="llama3.2-1b-q8")
    wide = _render(_summary_table(run, width=200), 200)
    assert "llama3.2-1b-q8" in wide and "100 [" in wide
    narrow = _render(_summary_table(run, width=30), 48)
    assert "llama3.2-1b-q8 · keep-alive=none" in " ".join(narrow.split())  # whole, wrapped between words
    assert run.run_id in narrow and "100 [" in narrow
