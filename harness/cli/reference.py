"""Generate docs/cli.md, the command reference, from the Typer app itself.

    python -m harness.cli.reference --write     # regenerate docs/cli.md
    python -m harness.cli.reference             # print it

It walks every command and group the ``lbench`` app exposes (through the same click
objects ``lbench --help`` uses) and writes, per command, its help text and a table of
its arguments and options: name, type, default and help.  tests/test_docs.py compares
the committed file to this output, so the reference cannot drift from the code.

Not imported by ``lbench`` itself.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from typer._click import Command, Context, Parameter  # the click Typer runs on (its own copy since 0.20)

REGENERATE = "python -m harness.cli.reference --write"
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
SHOWN_DEFAULT = re.compile(r"\s*\[default: (.*)\]\s*$")

_HEADER = f"""# Command reference

Every `lbench` command with all its arguments and options. **Generated** from the
Typer app by `{REGENERATE}` (from the repository root); do not edit by hand:
`tests/test_docs.py` fails when this file differs from the code.

The default column is what `--help` shows as `[default: ...]`. For options of `idle` and
`swap` it is the spec's own default: a value given in `--spec` wins over it, an option given
on the command line over both. `–` means no default (the option is off unless given).
Options marked *repeatable* may be given several times; many also take a comma list.
Exit codes: 0 success, 1 the run failed (or, for `gate`/`ab`, a regression), 2 bad input
(nothing is written to `results/`), 3 inconclusive (`gate`, `ab`), 130 interrupted
(measured samples are kept).
"""


def _click_command() -> Command:
    import typer

    from harness.cli import app

    return typer.main.get_command(app)


def _context(command: Command) -> Context:
    """A click context for ``command`` (Typer vendors click in newer versions)."""
    import typer

    click: Any = getattr(typer, "_click", None)  # a module: Typer's own click, else the click package
    if click is None or not hasattr(click, "Context"):
        import click  # noqa: F811  (Typer < 0.20 uses the click package)
    return click.Context(command, info_name="lbench")


def walk(command: Command | None = None, path: tuple[str, ...] = ("lbench",)) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group, depth first, in the order ``--help`` lists them."""
    command = command if command is not None else _click_command()
    yield path, command
    if hasattr(command, "list_commands") and hasattr(command, "get_command"):  # a group
        ctx = _context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from walk(sub, path + (name,))


def _type_name(param: Parameter) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    annotation = None
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        annotation = getattr(descriptor, "annotation", None)
        if getattr(descriptor, "is_choice", False) and getattr(descriptor, "choices", None):
            return " \\| ".join(f"`{c}`" for c in descriptor.choices)
    elif getattr(param, "type", None) is not None:
        choices = getattr(param.type, "choices", None)
        if choices:
            return " \\| ".join(f"`{c}`" for c in choices)
        return {"text": "text", "str": "text", "integer": "integer", "int": "integer", "float": "float",
                "path": "path", "boolean": "boolean", "bool": "boolean"}.get(param.type.name.lower(),
                                                                             param.type.name.lower())
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) in (list, tuple):
        annotation = args[0]
    names = {str: "text", int: "integer", float: "float", bool: "boolean"}
    if annotation in names:
        return names[annotation]
    if isinstance(annotation, type) and annotation.__name__ in ("Path", "PosixPath", "WindowsPath"):
        return "path"
    return getattr(annotation, "__name__", str(annotation) if annotation is not None else "text").lower()


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(param: Parameter) -> str:
    default = param.default
    if callable(default):
        return "(computed)"
    if getattr(param, "is_flag", False) and getattr(param, "secondary_opts", None):
        if default is None:
            return "–"
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    if default is None or default == () or default == []:
        return "–"
    if getattr(param, "is_flag", False):
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        return ", ".join(f"`{d}`" for d in default)
    return f"`{default}`"


def _param_row(param: Parameter) -> str | None:
    if getattr(param, "hidden", False):
        return None
    if param.param_type_name == "argument":
        name = f"`{(param.metavar or param.name or '').upper()}`"
        kind = "argument, required" if param.required else "argument"
        if param.nargs == -1:
            kind += ", one or more" if param.required else ", any number"
    else:
        opts = sorted(param.opts, key=lambda o: (not o.startswith("--"), o))
        name = ", ".join(f"`{o}`" for o in opts)
        if param.secondary_opts:
            name = f"`{opts[0]}/{'/'.join(param.secondary_opts)}`" + "".join(f", `{o}`" for o in opts[1:])
        kind = "option, required" if param.required else "option"
        if param.multiple:
            kind += ", repeatable"
    help_text = getattr(param, "help", None) or ""
    default = _default(param)
    shown = SHOWN_DEFAULT.search(help_text)  # harness.cli.options.shown: a default that is None here
    if shown:
        help_text = help_text[:shown.start()].rstrip()
        value = shown.group(1)
        default = f"`{value}`" if " " not in value else value
    envvar = param.envvar
    if envvar:
        envs = envvar if isinstance(envvar, (list, tuple)) else [envvar]
        help_text += " (env: " + ", ".join(f"`${e}`" for e in envs) + ")"
    return f"| {name} | {_type_name(param)} ({kind}) | {_cell(default)} | {_cell(help_text)} |"


def _help_markdown(text: str) -> str:
    """A command's docstring: prose as paragraphs, indented lines (examples) as sh blocks."""
    lines = inspect.cleandoc(text or "").replace("\b\n", "").splitlines()
    out: list[str] = []
    code: list[str] = []
    for line in lines + [""]:
        if line.startswith(("  ", "\t")):
            code.append(line.strip("\n")[2:] if line.startswith("  ") else line[1:])
            continue
        if code:
            out += ["", "```sh", *code, "```", ""]
            code = []
        out.append(line)
    text = "\n".join(out).strip()
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def render() -> str:
    entries = list(walk())
    parts = [_HEADER, "## Commands\n"]
    for path, command in entries[1:]:
        name = " ".join(path)
        summary = _cell(inspect.cleandoc(command.help or "").split("\n\n")[0])
        indent = "  " * (len(path) - 2)
        anchor = name.replace(" ", "-")
        parts.append(f"{indent}- [`{name}`](#{anchor}): {summary}")
    parts.append("")
    root_rows = [r for r in (_param_row(p) for p in entries[0][1].params) if r]
    if root_rows:  # options of `lbench` itself, e.g. --version
        parts.append("## Options of `lbench` itself\n")
        parts.append("| name | type | default | help |\n|---|---|---|---|")
        parts.append("\n".join(root_rows) + "\n")
    for path, command in entries[1:]:
        name = " ".join(path)
        parts.append(f'<a id="{name.replace(" ", "-")}"></a>\n')
        parts.append(f"## `{name}`\n")
        parts.append(_help_markdown(command.help or "") + "\n")
        if hasattr(command, "list_commands"):
            subs = command.list_commands(_context(command))
            parts.append("Subcommands: " + ", ".join(f"`{name} {s}`" for s in subs) + ".\n")
        rows = [r for r in (_param_row(p) for p in command.params) if r]
        if rows:
            parts.append("| name | type | default | help |\n|---|---|---|---|")
            parts.append("\n".join(rows) + "\n")
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--write" in argv:
        DOC_PATH.write_text(text)
        print(f"wrote {DOC_PATH} ({len(text)} bytes)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
