"""A claim's figures, each declared once: one object computes the figure's value in Python
(what lbench judges) and renders the shell command ``recipe.sh`` computes it with (what the
script judges), so the two cannot drift apart by being written in two places.

A scenario declares its figures with ``harness.repro.base.measure(ev, lab, name=Figure, ...)``
after its steps.  The kinds:

- ``LogCount`` / ``LogHas``: router log lines of a kind (for a model): lbench counts them on its
  timeline (the same log, read as it is written), the script greps the log file.
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
