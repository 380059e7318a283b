"""Every help text survives rich markup: `[gate]` in a help string is a markup tag to rich and
vanishes unless escaped (`\\[gate]`), which once printed "TOML with  and per-metric ."."""

from rich.markup import render

from harness.cli.reference import walk


def _texts():
    for path, command in walk():
        yield " ".join(path), command.help or ""
        for param in command.params:
            yield f"{' '.join(path)} {param.opts[0] if param.opts else param.name}", getattr(param, "help", None) or ""


def test_no_help_text_loses_words_to_markup():
    swallowed = []
    for where, text in _texts():
        shown = render(text).plain
        if shown != text.replace("\\[", "["):
            swallowed.append(f"{where}: {text!r} is shown as {shown!r}")
    assert not swallowed, "escape [ as \\[ in help texts:\n" + "\n".join(swallowed)


def test_the_check_catches_a_swallowed_tag():
    assert render("TOML with [gate] and per-metric [thresholds].").plain == "TOML with  and per-metric ."


# ---------------------------------------------------------------- one style for defaults, readable metavars

import re  # noqa: E402

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from harness.cli import app  # noqa: E402
from harness.cli.reference import SHOWN_DEFAULT, command_paths  # noqa: E402

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


@pytest.mark.parametrize("path", command_paths())
def test_every_help_page_renders_without_raw_metavars_or_stale_defaults(path):
    text = _rendered_help(path)
    flat = " ".join(text.replace("│", " ").split())
    assert "list[" not in text and "<list" not in text, text  # Python types leaking into metavars
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    raw = re.findall(r"[\[{]([a-z_]+)[\]}]", usage.split("[OPTIONS]", 1)[-1])
    assert not raw, f"{path}: arguments shown by their Python names {raw}; give them a metavar: {usage}"
    assert "[default: (" not in flat and "(default " not in flat, text
    assert "pip install -e" not in flat  # what a user of an installed lbench types is in the hint itself
