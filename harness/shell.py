"""Shell text lbench writes for someone else to run (``recipe.sh``, the command in an evidence
bundle): every value quoted by ``shlex``, every comment made a single inert line.

Values in that text come from files people exchange (claim files, model names, binary paths,
run manifests), so none of them may reach the shell unquoted, and none may end a comment line
early: a newline in a ``# engine: PATH`` comment would turn the rest of the path into a command.
"""

from __future__ import annotations

import math
import numbers
import re
import shlex
from collections.abc import Iterable

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ERE_SPECIAL = re.compile(r"([.\[\\()*+?{|^$])")


def quote(value: object) -> str:
    """One shell word holding ``value`` exactly (``shlex.quote``)."""
    return shlex.quote(str(value))


def join(words: Iterable[object]) -> str:
    """A command line whose words are ``words`` exactly (``shlex.join``)."""
    return shlex.join(str(w) for w in words)


def inert(text: object) -> str:
    """``text`` on one line: control characters (newline, carriage return, NUL, ...) written as
    escapes (``\\n``, ``\\x00``), so the text cannot start a new line of the script."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def comment(text: object) -> str:
    """A comment line (``# text``) that stays one comment whatever ``text`` holds."""
    return "# " + inert(text)


def line(template: str, *values: object) -> str:
    """One line of code: ``template`` (lbench's own text, never data) with each ``{}`` filled by a
    value written as one quoted word (``quote``), e.g. ``line("MODEL=${{MODEL:-{}}}", name)``.  A
    value can hold anything (a newline stays inside its quotes); the template may not hold a line
    break."""
    if _UNPRINTABLE.search(template.replace("\t", "")):
        raise ValueError(f"a code template is one line: {template!r}")
    return template.format(*(quote(v) for v in values))


def number(value: object) -> str:
    """A finite number written for shell or awk text (``%g``): ValueError for anything else, so a
    value read from a file cannot reach code as text."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return str(int(value)) if isinstance(value, numbers.Integral) else f"{float(value):g}"


def script(lines: Iterable[str]) -> str:
    """The text of a generated script from its lines (each made by ``line``, ``comment``, ``join``,
    ``export`` or lbench's own constant text).  Every line is checked: a line break or other control
    character may only stand inside single quotes (where a quoted value puts it), never in code,
    inside double quotes or in a comment; a script that breaks this is a bug in lbench and is
    refused (ValueError) rather than written."""
    out = list(lines)
    for text in out:
        _check_line(text)
    return "\n".join(out) + "\n"


_WORD_START = frozenset(" \t;&|()")


def _check_line(text: str) -> None:
    """Raise ValueError when a control character in ``text`` could end a command or a comment: one
    outside single quotes (in code, in double quotes, in a comment)."""
    state, i, n = "code", 0, len(text)
    while i < n:
        c = text[i]
        if state == "squote":
            if c == "'":
                state = "code"
        elif c in "\t":
            pass
        elif _UNPRINTABLE.match(c):
            raise ValueError(f"control character {c!r} outside single quotes in a script line: {text[:200]!r}")
        elif state == "comment":
            pass
        elif c == "\\":
            i += 1
            if i < n and _UNPRINTABLE.match(text[i]) and text[i] != "\t":
                raise ValueError(f"escaped line break in a script line: {text[:200]!r}")
        elif state == "dquote":
            if c == '"':
                state = "code"
        elif c == "'":
            state = "squote"
        elif c == '"':
            state = "dquote"
        elif c == "#" and (i == 0 or text[i - 1] in _WORD_START):
            state = "comment"
        i += 1
    if state in ("squote", "dquote"):
        raise ValueError(f"unterminated quote in a script line: {text[:200]!r}")


def env_name(name: str) -> str:
    """``name`` if it is a valid environment variable name, else ValueError (an ``export`` line
    with any other text would run it)."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise ValueError(f"not an environment variable name: {name!r}")
    return name


def export(name: str, value: object) -> str:
    """``export NAME='value'``."""
    return f"export {env_name(name)}={quote(value)}"


def ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching exactly ``text`` (for ``pgrep -f``,
    ``grep -E``): every special character escaped with a backslash, as POSIX defines."""
    return _ERE_SPECIAL.sub(r"\\\1", text)


def normalized_command(text: object) -> str | None:
    """A command line read from a file (a manifest's ``command``) rewritten as the one simple
    command its words make, each word quoted: ``;``, ``$(...)``, backticks and redirections
    become plain arguments.  None when the text is not a shell command line (unbalanced quotes,
    empty, not a string)."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError:
        return None
    return join(words) if words else None


def fence(text: str, info: str = "") -> list[str]:
    """``text`` in a Markdown code fence longer than any run of backticks inside it, so the text
    cannot close the fence and continue as Markdown or HTML."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [ticks + info, text, ticks]
