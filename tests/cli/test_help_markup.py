"""Help is plain text (Typer's rich_markup_mode=None: no rich.markdown/pygments import on
every --help, see scripts/bench_help.py), so what a help string says is what the user reads:
no markup escapes shown raw, example blocks kept line by line, every line within 80 columns
(a terminal's and a CI log's width)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.reference import SHOWN_DEFAULT, walk

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


# ---------------------------------------------------------------- one style for defaults, readable metavars


HAND_WRITTEN_DEFAULT = re.compile(r"\(default\b|\bdefault[:=]|\bDefault\b|;\s*default\b|\bdefault\)|\bby default\)")


def _option_texts():
    for path, command in walk():
        for param in command.params:
            yield f"{' '.join(path)} {param.opts[0] if param.opts else param.name}", getattr(param, "help", None) or ""


def test_option_help_shows_defaults_only_the_typer_way():
    """'[default: 5]' (Typer's own, or harness.cli.options.shown at the end), never '(default 5)',
    'Default: x' or '; default x' written into the sentence, and never two defaults."""
    bad = []
    for where, text in _option_texts():
        shown = SHOWN_DEFAULT.search(text)
        rest = text[:shown.start()] if shown else text
        if HAND_WRITTEN_DEFAULT.search(rest) or "[default:" in rest:
            bad.append(f"{where}: {text!r}")
    assert not bad, "use harness.cli.options.shown(value) at the end of the help text:\n" + "\n".join(bad)


def test_the_default_check_catches_hand_written_defaults():
    for text in ("Request budget (default 30).", "Default: tiny-q8.", "as-is (default), warm", "(0 = no cap; default 2)"):
        assert HAND_WRITTEN_DEFAULT.search(text), text
    for text in ("Metal residency: default, none or seconds.", "active, passive or default.", "redacted by default."):
        assert not HAND_WRITTEN_DEFAULT.search(text), text


def _rendered_help(path: str) -> str:
    r = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"},
                           prog_name="lbench")
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in walk()][1:])  # lbench idle, lbench engine install, ...
def test_every_help_page_renders_without_raw_metavars_or_stale_defaults(path):
    text = _rendered_help(path)
    flat = " ".join(text.replace("│", " ").split())
    assert "list[" not in text and "<list" not in text, text  # Python types leaking into metavars
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    raw = re.findall(r"[\[{]([a-z_]+)[\]}]", usage.split("[OPTIONS]", 1)[-1])
    assert not raw, f"{path}: arguments shown by their Python names {raw}; give them a metavar: {usage}"
    assert "[default: (" not in flat and "(default " not in flat, text
    assert "pip install -e" not in flat  # what a user of an installed lbench types is in the hint itself


def test_no_option_shows_its_default_twice():
    """An option with a default of its own gets Typer's ``[default: ...]``; one that also says ``shown(...)``
    in its help must turn Typer's off (``show_default=False``), or --help prints the default twice."""
    doubled = [f"{where}: {m}" for where, text in HELPS.items()
               for m in re.findall(r"\[default: [^\]]*\]\s+\[default:", " ".join(text.split()))]
    assert not doubled, "\n".join(doubled)
