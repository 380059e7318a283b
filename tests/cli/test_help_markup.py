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
