"""A claim's figures, each declared once: one object computes the figure's value in Python
(what lbench judges) and renders the shell command ``recipe.sh`` computes it with (what the
script judges), so the two cannot drift apart by being written in two places.

A scenario declares its figures with ``harness.repro.base.measure(ev, lab, name=Figure, ...)``
after its steps.  The kinds:

- ``LogCount`` / ``LogHas``: router log lines of a kind (for a model): lbench counts them on its
  timeline (the same log, read as it is written), the script greps the log file; ``LogBetween``
  between two log marks, ``LogBefore`` the order of two lines.
- ``SseBefore``: the order of two statuses on /models/sse after a time mark.
- ``Answered`` / ``OkCount``: replies with HTTP 200 (for a model, or any of several).
- ``GaveUp`` / ``ReplyHas``: one reply's status ``000`` (the client gave up) / its body text.
- ``Given``: a setting of the experiment (``models_max``), printed by the script, not measured.
- ``Unmeasured``: lbench's value; the script says why it cannot measure it.
- ``Measured``: a value the scenario computed and the shell command that computes the same from
  the script's captures, written side by side (timeline orders, times between marks).

Where the script cannot measure exactly what lbench measures, the object says how they differ
(``differs``); the recipe prints it next to the figure and docs/claims.md lists every such
figure (``DIFFERS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harness import shell

if TYPE_CHECKING:
    from harness.repro.lab import Lab, Reply

# figures a recipe measures differently from lbench, and how (each named in docs/claims.md)
PS_VS_PROC = ("the script samples the router's tree with ps every 20 ms; lbench reads /proc/<pid>/statm and the "
              "children lists at 100 Hz: the same processes and resident pages, sampled half as often, so a "
              "peak shorter than 20 ms can be missed by the script")
DIFFERS = {"peak_children": PS_VS_PROC, "peak_rss_over_cap_children": PS_VS_PROC}


class Figure(Protocol):
    """What a figure is, how lbench computes it, how the script computes it."""

    @property
    def how(self) -> str: ...

    def value(self, lab: Lab) -> object: ...

    def shell(self, lab: Lab) -> str: ...


def _matches(kind: str | tuple[str, ...], model: str | None, event_kind: str, event_model: str | None) -> bool:
    kinds = (kind,) if isinstance(kind, str) else kind
    return event_kind in kinds and (model is None or event_model == model)


@dataclass(frozen=True)
class LogCount:
    """Router log lines of ``kind`` (one kind or several) for ``model`` (any when None)."""
    kind: str | tuple[str, ...]
    model: str | None = None
    how: str = ""

    def value(self, lab: Lab) -> object:
        return sum(1 for e in lab.events if _matches(self.kind, self.model, e.kind, e.model))

    def shell(self, lab: Lab) -> str:
        return lab.sh_log_count(self.kind, self.model)


@dataclass(frozen=True)
class LogHas(LogCount):
    """Whether the router log has a line of ``kind`` for ``model``."""

    def value(self, lab: Lab) -> object:
        return any(_matches(self.kind, self.model, e.kind, e.model) for e in lab.events)

    def shell(self, lab: Lab) -> str:
        return lab.sh_log_has(self.kind, self.model)


def _stop(lab: Lab) -> float:
    """When the router was told to stop (what the recipe sees ends there), seconds since t0."""
    return float("inf") if lab.t_stop is None else lab.t_stop


@dataclass(frozen=True)
class LogBetween:
    """Whether the router logged a ``kind`` line for ``model`` between log marks ``start`` and
    ``end`` (``Lab.log_mark``; None: until the router was told to stop): lbench by when it received
    the line, the script by the log's line count at each mark."""
    kind: str | tuple[str, ...]
    model: str
    start: str
    end: str | None = None
    how: str = ""

    def value(self, lab: Lab) -> object:
        since, until = lab.log_marks[self.start], lab.log_marks[self.end] if self.end else _stop(lab)
        return any(_matches(self.kind, self.model, e.kind, e.model) and since <= lab.rel(e.t) < until
                   for e in lab.events if e.source == "router")

    def shell(self, lab: Lab) -> str:
        count = lab.sh_log_count_between(self.start, self.end, self.kind, self.model)
        return lab.sh_flag(f'[ "$({count})" -gt 0 ]')


@dataclass(frozen=True)
class LogBefore:
    """Whether the first ``kind`` line for ``model`` of ``first`` comes no later than the first of
    ``then`` in the router log (both present)."""
    first: tuple[str | tuple[str, ...], str]
    then: tuple[str | tuple[str, ...], str]
    how: str = ""

    def value(self, lab: Lab) -> object:
        a = next((e for e in lab.events if _matches(*self.first, e.kind, e.model)), None)
        b = next((e for e in lab.events if _matches(*self.then, e.kind, e.model)), None)
        return bool(a and b and b.t >= a.t)

    def shell(self, lab: Lab) -> str:
        return lab.sh_log_before(self.first, self.then)


@dataclass(frozen=True)
class SseBefore:
    """Whether /models/sse sent ``first`` (model, status) no later than ``then``, both after time
    mark ``after`` (``Lab.mark``) and before the router was told to stop: one stream, in the
    router's order."""
    first: tuple[str, str]
    then: tuple[str, str]
    after: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        since, until = lab.marks[self.after], _stop(lab)

        def first_of(model: str, status: str) -> float | None:
            return next((e.t for e in lab.events if e.kind == f"status:{status}" and e.model == model
                         and since <= lab.rel(e.t) < until), None)
        u, t = first_of(*self.first), first_of(*self.then)
        return u is not None and t is not None and t >= u

    def shell(self, lab: Lab) -> str:
        u = lab.sh_sse_first(self.first[0], self.first[1], self.after)
        t = lab.sh_sse_first(self.then[0], self.then[1], self.after)
        return lab.sh_flag(f'u=$({u}); l=$({t}); [ -n "$u" ] && [ -n "$l" ] && '
                           'awk -v u="$u" -v l="$l" \'BEGIN {exit !(u <= l)}\'')


@dataclass(frozen=True)
class OkCount:
    """Replies with HTTP 200 (for ``models``; every reply when None)."""
    models: tuple[str, ...] | None = None
    how: str = "requests answered with HTTP 200"

    def value(self, lab: Lab) -> object:
        return sum(1 for r in lab.replies if r.status == 200 and (self.models is None or r.model in self.models))

    def shell(self, lab: Lab) -> str:
        return lab.sh_ok(None if self.models is None else list(self.models))


@dataclass(frozen=True)
class Answered:
    """Whether a request for ``model`` got HTTP 200."""
    model: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        return any(r.model == self.model and r.status == 200 for r in lab.replies)

    def shell(self, lab: Lab) -> str:
        return lab.sh_flag(f'[ "$({lab.sh_ok(self.model)})" -gt 0 ]')


def answered(model: str) -> Answered:
    return Answered(model, f"a request for {model} got HTTP 200")


@dataclass(frozen=True)
class GaveUp:
    """The client gave up on ``reply`` (no answer in time; curl's status ``000``)."""
    reply: Reply
    how: str = ""

    def value(self, lab: Lab) -> object:
        return self.reply.error is not None

    def shell(self, lab: Lab) -> str:
        return lab.sh_gave_up(self.reply)


@dataclass(frozen=True)
class ReplyHas:
    """``reply``'s body holds ``text``."""
    reply: Reply
    text: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        return self.text in self.reply.body

    def shell(self, lab: Lab) -> str:
        return lab.sh_reply_has(self.reply, self.text)


@dataclass(frozen=True)
class Given:
    """A setting of the experiment: the same value for lbench and the script."""
    setting: object
    how: str = "a setting of the experiment"

    def value(self, lab: Lab) -> object:
        return self.setting

    def shell(self, lab: Lab) -> str:
        return f"echo {shell.quote(str(self.setting))}"


@dataclass(frozen=True)
class Unmeasured:
    """lbench's value; no shell tool measures it (``how``: why, printed by the script)."""
    measured: object
    how: str

    def value(self, lab: Lab) -> object:
        return self.measured

    def shell(self, lab: Lab) -> str:
        raise ValueError("an unmeasured figure has no shell command")


@dataclass(frozen=True)
class Measured:
    """A value the scenario computed and the script's command for the same figure."""
    measured: object
    command: str
    how: str = ""
    differs: str = ""  # how the script's measurement differs from lbench's ("" when it does not)

    def value(self, lab: Lab) -> object:
        return self.measured

    def shell(self, lab: Lab) -> str:
        return self.command


@dataclass(frozen=True)
class PeakChildren:
    """The most children of the router alive at once (lbench: /proc at the lab's sampling rate)."""
    how: str = "the most children of the router alive at once, sampled every 20 ms"
    differs: str = PS_VS_PROC

    def value(self, lab: Lab) -> object:
        return lab.peak_children()

    def shell(self, lab: Lab) -> str:
        return "awk 'NR == 1 || $1 > m {m = $1} END {if (NR) print m}' \"$WORK/children.txt\" 2>/dev/null"


PEAK_CHILDREN = PeakChildren()
