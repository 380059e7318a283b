"""Help is plain text (Typer's rich_markup_mode=None: no rich.markdown/pygments import on
every --help, see scripts/bench_help.py), so what a help string says is what the user reads:
no markup escapes shown raw, example blocks kept line by line, every line within 80 columns
(a terminal's and a CI log's width)."""

from __future__ import annotations

from typer.testing import CliRunner

from harness.cli import app
from harness.cli.reference import walk

RUNNER = CliRunner()


def _helps() -> dict[str, str]:
    out = {}
    for path, _ in walk():
        args = list(path[1:]) + ["--help"]
        result = RUNNER.invoke(app, args, terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        out[" ".join(path)] = result.output
    return out


HELPS = _helps()


def test_every_help_was_rendered():
    for name in ("lbench", "lbench idle", "lbench swap", "lbench gate", "lbench engine install"):
        assert name in HELPS, sorted(HELPS)


def test_no_markup_escape_or_control_character_is_shown():
    bad = [f"{where}: {line!r}" for where, text in HELPS.items() for line in text.splitlines()
           if "\\[" in line or "\b" in line or "[/" in line]
    assert not bad, "plain help shows these raw:\n" + "\n".join(bad)


def test_square_brackets_in_help_survive():
    assert "TOML with [gate] and per-metric [thresholds]." in " ".join(HELPS["lbench gate"].split())


def test_every_line_fits_80_columns():
    wide = [f"{where}: {line!r}" for where, text in HELPS.items() for line in text.splitlines() if len(line) > 80]
    assert not wide, "help lines wider than 80 columns:\n" + "\n".join(wide)


def test_example_blocks_keep_their_lines():
    idle = HELPS["lbench idle"]
    assert "\n    lbench idle --model llama3-8b-q8 --keep-alive default,none\n" in idle
    assert "\n    lbench idle -m tiny-q8 --pauses 0:2:0.25 --reps 10\n" in idle
