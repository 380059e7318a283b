"""Timed request sequences: "A, then B 100 ms later", sent exactly as written.

A sequence is a list of steps ``MODEL@SECONDS``: send one request for MODEL at SECONDS after
the sequence starts (the router is up, nothing sent yet).  Steps are separated by commas or
new lines; ``#`` starts a comment.  MODEL is a model's router name (``lbench swap`` prints
them) or a capital letter, A for the first ``--model``, B for the second, and so on.  Times
never go backwards: ``A@0,B@0.1`` is "A, then B 100 ms after A was sent".

A *stagger* is the short form of the same thing: every model once, in ``--model`` order,
each ``stagger`` seconds after the one before.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput

MAX_STEPS = 10_000
MAX_AT_S = 3600.0  # an hour: a reproduction, not a soak
MAX_FILE_BYTES = 1 << 20
_STEP = re.compile(r"^(?P<model>[^@]+?)\s*@\s*(?P<at>\S+)$")


@dataclass(frozen=True)
class Step:
    model: str  # as written: a router name or a letter (resolved by ``resolve``)
    at_s: float  # seconds after the sequence starts


def read_source(value: str, where: str) -> str:
    """The sequence text: ``value`` itself, or the contents of the file it names (``@path``)."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise BadInput(f"sequence file {path} is larger than {MAX_FILE_BYTES} bytes", where=where,
                           hint="a sequence is a few steps, one MODEL@SECONDS a line")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read sequence file {path}: {exc}", where=where,
                       hint="give an existing UTF-8 text file, e.g. --sequence @steps.txt") from exc


def parse(text: str, where: str) -> list[Step]:
    """Steps from ``A@0,B@0.1`` (commas or new lines; ``#`` comments).  Bad input: BadInput."""
    steps: list[Step] = []
    tokens = [t.strip() for line in text.splitlines() for t in line.split("#", 1)[0].split(",")]
    for token in filter(None, tokens):
        m = _STEP.match(token)
        if m is None:
            raise BadInput(f"bad sequence step {token!r}"[:200], where=where,
                           hint="write MODEL@SECONDS steps, e.g. --sequence 'A@0,B@0.1' (B 100 ms after A)")
        try:
            at = float(m["at"])
        except ValueError:
            at = math.nan
        if not math.isfinite(at) or not 0 <= at <= MAX_AT_S:
            raise BadInput(f"step {token!r}: the time must be seconds in [0, {MAX_AT_S:g}]"[:200], where=where,
                           hint="e.g. A@0,B@0.1")
        if steps and at < steps[-1].at_s:
            raise BadInput(f"step {token!r} is earlier than the step before it ({steps[-1].at_s:g} s)"[:200],
                           where=where, hint="times count from the sequence's start and never go backwards")
        steps.append(Step(m["model"].strip(), at))
        if len(steps) > MAX_STEPS:
            raise BadInput(f"more than {MAX_STEPS} steps", where=where)
    if not steps:
        raise BadInput("the sequence has no step", where=where, hint="e.g. --sequence 'A@0,B@0.1'")
    return steps


def stagger(n_models: int, seconds: float, where: str) -> list[Step]:
    """Every model once, in order, ``seconds`` apart (letters: resolved like a written sequence)."""
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_AT_S / max(n_models, 1):
        raise BadInput(f"stagger must be seconds in [0, {MAX_AT_S / max(n_models, 1):g}], got {seconds!r}",
                       where=where, hint="e.g. --stagger 0.05 (each model 50 ms after the one before)")
    return [Step(string.ascii_uppercase[i] if i < 26 else str(i), i * seconds) for i in range(n_models)]


def resolve(steps: list[Step], names: list[str], where: str) -> list[Step]:
    """Each step's model as a router name: a name as given, or a letter for the n-th model."""
    out = []
    for s in steps:
        if s.model in names:
            out.append(s)
            continue
        i = string.ascii_uppercase.find(s.model) if len(s.model) == 1 else -1
        if s.model.isdigit() and int(s.model) < len(names):
            i = int(s.model)
        if not 0 <= i < len(names):
            raise BadInput(f"sequence step {s.model!r}@{s.at_s:g}: no such model"[:200], where=where,
                           hint=f"name one of: {', '.join(names)}, or a letter A..{string.ascii_uppercase[len(names) - 1]}"
                                if len(names) <= 26 else f"name one of: {', '.join(names)}")
        out.append(Step(names[i], s.at_s))
    return out
