"""A claim's figures, each declared once: one object computes the figure's value in Python
(what lbench judges) and renders the shell command ``recipe.sh`` computes it with (what the
script judges), so the two cannot drift apart by being written in two places.

A scenario declares its figures with ``harness.repro.base.measure(ev, lab, name=Figure, ...)``
after its steps.  The kinds:

- ``LogCount`` / ``LogHas``: router log lines of a kind (for a model): lbench counts them on its
  timeline (the same log, read as it is written), the script greps the log file; ``LogBetween``
  between two log marks, ``LogBefore`` the order of two lines, ``LogCountBefore`` lines before
  another, ``FirstEvicted`` the model the first eviction line names, ``TickEvictions`` the lines
  of one scheduler tick, ``LruRounds`` the victims of lru-order's rounds.
- ``SseBefore`` / ``SseSent``: the order of two statuses on /models/sse after a time mark / one status.
- ``Answered`` / ``OkCount``: replies with HTTP 200 (for a model, or any of several).
- ``GaveUp`` / ``ReplyHas`` / ``ReplyStatus``: one reply's status ``000`` (the client gave up) / its
  body text / its status.
- ``AnyOf``: whether any of several true/false figures is true.
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
from typing import Protocol

from harness import shell
from harness.engines.router import TimelineEvent
from harness.repro.lab import Lab, Reply, line_ere

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


def _stop(lab: Lab) -> float:
    """When the router was told to stop (what the recipe sees ends there), seconds since t0."""
    return float("inf") if lab.t_stop is None else lab.t_stop


def _router_lines(lab: Lab, after: str | None = None, until: str | None = None) -> list[TimelineEvent]:
    """The router log's lines lbench received between log marks ``after`` (None: from the start) and
    ``until`` (None: until the router was told to stop), in the log's order: the lines the script's
    ``Lab.sh_log_lines(after, until)`` reads (those numbered above ``L_after``, up to ``L_until``)."""
    since = lab.log_marks[after] if after else float("-inf")
    end = lab.log_marks[until] if until else _stop(lab)
    return [e for e in lab.events if e.source == "router" and since <= lab.rel(e.t) < end]


@dataclass(frozen=True)
class LogCount:
    """Router log lines of ``kind`` (one kind or several) for ``model`` (any when None), less ``minus``."""
    kind: str | tuple[str, ...]
    model: str | None = None
    how: str = ""
    minus: int = 0

    def value(self, lab: Lab) -> object:
        return sum(1 for e in _router_lines(lab) if _matches(self.kind, self.model, e.kind, e.model)) - self.minus

    def shell(self, lab: Lab) -> str:
        count = lab.sh_log_count(self.kind, self.model)
        return f"echo $(( $({count}) - {int(self.minus)} ))" if self.minus else count


@dataclass(frozen=True)
class LogHas(LogCount):
    """Whether the router log has a line of ``kind`` for ``model``."""

    def value(self, lab: Lab) -> object:
        return any(_matches(self.kind, self.model, e.kind, e.model) for e in _router_lines(lab))

    def shell(self, lab: Lab) -> str:
        return lab.sh_log_has(self.kind, self.model)


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


def _first_at(lines: list[TimelineEvent], kind: str | tuple[str, ...], model: str | None) -> int | None:
    """The position of the first ``kind`` line (for ``model``) in ``lines``, None when there is none."""
    return next((i for i, e in enumerate(lines) if _matches(kind, model, e.kind, e.model)), None)


@dataclass(frozen=True)
class LogBefore:
    """Whether the first ``kind`` line for ``model`` of ``first`` comes no later than the first of
    ``then`` in the router log, both after log mark ``after`` (None: the whole log), by the log's
    own line order; ``first`` needs a line, ``then`` too unless ``then_needed`` is False."""
    first: tuple[str | tuple[str, ...], str | None]
    then: tuple[str | tuple[str, ...], str | None]
    how: str = ""
    after: str | None = None
    then_needed: bool = True

    def value(self, lab: Lab) -> object:
        lines = _router_lines(lab, self.after)
        a, b = _first_at(lines, *self.first), _first_at(lines, *self.then)
        return a is not None and (a <= b if b is not None else not self.then_needed)

    def shell(self, lab: Lab) -> str:
        a, b = lab.sh_log_line_of(*self.first, self.after), lab.sh_log_line_of(*self.then, self.after)
        order = '[ -n "$b" ] && [ "$a" -le "$b" ]' if self.then_needed else '{ [ -z "$b" ] || [ "$a" -le "$b" ]; }'
        return lab.sh_flag(f'a=$({a}); b=$({b}); [ -n "$a" ] && {order}')


@dataclass(frozen=True)
class LogCountBefore:
    """``kind`` lines for ``model`` in the router log up to the first ``before`` line (kind, model)
    after log mark ``after`` (the whole log when there is no such line)."""
    kind: str | tuple[str, ...]
    model: str | None
    before: tuple[str | tuple[str, ...], str | None]
    after: str | None = None
    how: str = ""

    def value(self, lab: Lab) -> object:
        lines, later = _router_lines(lab), _router_lines(lab, self.after)
        at = _first_at(later, *self.before)
        end = len(lines) if at is None else next(i for i, e in enumerate(lines) if e is later[at])
        return sum(1 for e in lines[:end] if _matches(self.kind, self.model, e.kind, e.model))

    def shell(self, lab: Lab) -> str:
        ere = shell.quote(line_ere(self.kind, self.model))
        return (f"p=$({lab.sh_log_line_of(*self.before, self.after)}); RE={ere} awk -v p=\"${{p:-0}}\" "
                "'$0 ~ ENVIRON[\"RE\"] && (p == 0 || NR < p) {n++} END {print n + 0}' \"$WORK/router.stderr.log\"")


def _first_evicted(lab: Lab, after: str | None) -> str | None:
    first = next((e for e in _router_lines(lab, after) if e.kind == "evict"), None)
    return first.model if first else None


@dataclass(frozen=True)
class FirstEvicted:
    """The model the router log's first eviction line after log mark ``after`` (None: from the
    start) names, in any of the forms the builds write (None when there is none); with ``is_``:
    whether it is that model."""
    after: str | None = None
    is_: str | None = None
    how: str = ""

    def value(self, lab: Lab) -> object:
        model = _first_evicted(lab, self.after)
        return model if self.is_ is None else model == self.is_

    def shell(self, lab: Lab) -> str:
        command = lab.sh_log_first_evicted(after=self.after)
        return command if self.is_ is None else lab.sh_flag(f'[ "$({command})" = {shell.quote(self.is_)} ]')


def tick_lines(lab: Lab, after: str, until: str) -> tuple[list[TimelineEvent], list[TimelineEvent]]:
    """The router's 'evicting idle LRU ... for a queued request' lines (``tick()``) between log marks
    ``after`` and ``until`` that come before the first exit line there (a line after an exit may come
    from that exit's tick), and the exit lines there."""
    window = _router_lines(lab, after, until)
    exits = [e for e in window if e.kind == "exited"]
    end = _first_at(window, "exited", None)
    return ([e for e in window[:end] if e.kind == "evict" and "for a queued request" in e.text], exits)


@dataclass(frozen=True)
class TickEvictions:
    """``tick_lines``: how many, or (``names``) the models they name, comma-joined in log order."""
    after: str
    until: str
    names: bool = False
    how: str = ""

    def value(self, lab: Lab) -> object:
        lines, _ = tick_lines(lab, self.after, self.until)
        return ",".join(str(e.model) for e in lines) if self.names else len(lines)

    def shell(self, lab: Lab) -> str:
        window = (f"{lab.sh_log_lines(self.after, self.until)} | awk -v x={shell.quote(line_ere('exited', None))} "
                  "'$0 ~ x {exit} {print}' | grep -E -- 'for a queued request' | grep -E -- "
                  + shell.quote(line_ere("evict", None)))
        if self.names:
            return (f"{window} | sed -E 's/.*evicting idle LRU name=(.*) for a queued request.*$/\\1/' "
                    "| paste -sd, -")
        return f"{window} | wc -l | tr -d ' '"


@dataclass(frozen=True)
class LruRounds:
    """lru-order's rounds, each ``(log mark, the least recently used model of its use order, whether
    that model is neither first by name, nor longest resident, nor most recent)``, judged by each
    round's first eviction line after its mark; ``stat``: ``victims`` (the models named, comma-joined),
    ``rounds`` (rounds that ended in an eviction), ``non_lru`` (rounds whose victim was not the least
    recently used model) or ``distinguishing`` (rounds that evicted and tell LRU from the wrong rules)."""
    plan: tuple[tuple[str, str, bool], ...]
    stat: str
    how: str = ""

    def victims(self, lab: Lab) -> list[str | None]:
        return [_first_evicted(lab, mark) for mark, _, _ in self.plan]

    def value(self, lab: Lab) -> object:
        victims = self.victims(lab)
        if self.stat == "victims":
            return ",".join(str(v) for v in victims if v)
        if self.stat == "non_lru":
            return sum(v != lru for v, (_, lru, _) in zip(victims, self.plan))
        return sum(bool(v) and (self.stat == "rounds" or telling) for v, (_, _, telling) in zip(victims, self.plan))

    def shell(self, lab: Lab) -> str:
        victims = " ".join(f'"$({lab.sh_log_first_evicted(after=mark)})"' for mark, _, _ in self.plan)
        if self.stat == "victims":
            return f"set -- {victims}; printf '%s\\n' \"$@\" | grep . | paste -sd, -"
        lru = " ".join(shell.quote(lru) for _, lru, _ in self.plan)
        telling = " ".join("1" if t else "0" for _, _, t in self.plan)
        total = {"rounds": "$n", "non_lru": "$bad", "distinguishing": "$dist"}[self.stat]
        return (f"set -- {victims}; e=({lru}); d=({telling}); i=0; n=0; bad=0; dist=0; for v in \"$@\"; do "
                '[ -n "$v" ] && { n=$((n + 1)); dist=$((dist + d[i])); }; [ "$v" = "${e[i]}" ] || bad=$((bad + 1)); '
                f"i=$((i + 1)); done; echo {total}")


def _sse_first(lab: Lab, model: str, status: str, after: str) -> int | None:
    """The position in the stream of the first /models/sse event ``status`` for ``model`` after time
    mark ``after`` and before the router was told to stop (None: there is none)."""
    since, until = lab.marks[after], _stop(lab)
    stream = [e for e in lab.events if e.source == "sse" and since <= lab.rel(e.t) < until]
    return next((i for i, e in enumerate(stream) if e.kind == f"status:{status}" and e.model == model), None)


@dataclass(frozen=True)
class SseBefore:
    """Whether /models/sse sent ``first`` (model, status) no later than ``then``, both after time
    mark ``after`` (``Lab.mark``) and before the router was told to stop: one stream, in the
    router's order (lbench: the events' order; the script: its capture's line order)."""
    first: tuple[str, str]
    then: tuple[str, str]
    after: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        u, t = _sse_first(lab, *self.first, self.after), _sse_first(lab, *self.then, self.after)
        return u is not None and t is not None and u <= t

    def shell(self, lab: Lab) -> str:
        return lab.sh_sse_before(self.first, self.then, self.after)


@dataclass(frozen=True)
class SseSent:
    """Whether /models/sse sent ``status`` for ``model`` after time mark ``after`` (and before the
    router was told to stop)."""
    model: str
    status: str
    after: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        return _sse_first(lab, self.model, self.status, self.after) is not None

    def shell(self, lab: Lab) -> str:
        return lab.sh_flag(f'[ -n "$({lab.sh_sse_first(self.model, self.status, self.after)})" ]')


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
class ReplyStatus:
    """``reply``'s HTTP status (None, the script's ``000``: no answer); with ``is_``: whether it is
    that status.  ``reply`` None: a request sent in the background that had not returned."""
    reply: Reply | None
    is_: int | None = None
    how: str = ""

    def value(self, lab: Lab) -> object:
        status = self.reply.status if self.reply is not None else None
        return status if self.is_ is None else status == self.is_

    def shell(self, lab: Lab) -> str:
        if self.reply is None:
            return "echo false" if self.is_ is not None else "echo"
        path = f"\"$WORK/reply-{self.reply.sh_n}.status\""
        return f"grep -vx 000 {path}" if self.is_ is None else lab.sh_flag(f"grep -qx {int(self.is_)} {path}")


@dataclass(frozen=True)
class AnyOf:
    """Whether any of ``figures`` (each true or false) is true."""
    figures: tuple[Figure, ...]
    how: str = ""

    def value(self, lab: Lab) -> object:
        return any(bool(f.value(lab)) for f in self.figures)

    def shell(self, lab: Lab) -> str:
        return lab.sh_flag(" || ".join(f'[ "$({f.shell(lab)})" = true ]' for f in self.figures))


@dataclass(frozen=True)
class TimeToLine:
    """Time from ``since`` to the router log line ``Lab.watch`` waited for as ``watched`` (the next
    line of its kind and model after those seen when the watch began): ``since`` is a time mark
    (``Lab.mark``; seconds, 3 decimals) or a reply sent in the background (from its end;
    milliseconds, 1 decimal).  The script notes when its log got the line (polled every 20 ms);
    lbench, when it received it."""
    since: str | Reply
    watched: str
    how: str = ""

    def value(self, lab: Lab) -> object:
        kind, model, seen = lab.watches[self.watched]
        hits = [e for e in _router_lines(lab) if _matches(kind, model, e.kind, e.model)]
        if len(hits) <= seen:
            return None
        if isinstance(self.since, str):
            return round(lab.rel(hits[seen].t) - lab.marks[self.since], 3)
        return round((hits[seen].t - self.since.t_done) * 1000, 1)

    def shell(self, lab: Lab) -> str:
        if isinstance(self.since, str):
            return lab.sh_seconds_between(self.since, self.watched)
        return lab.sh_ms_from_reply_end(self.since, self.watched)


@dataclass(frozen=True)
class ChildEnv:
    """Whether the child environment lbench read (``Lab.environ``; the script's copy is
    ``$WORK/child-env.txt``) holds each of ``variables``: a name, with its value where one is given."""
    env: dict[str, str]
    variables: tuple[tuple[str, str | None], ...]
    how: str = ""

    def value(self, lab: Lab) -> object:
        return all(name in self.env and (want is None or self.env[name] == want) for name, want in self.variables)

    def shell(self, lab: Lab) -> str:
        lines = [f"^{shell.ere_literal(name)}=" + ("" if want is None else f"{shell.ere_literal(want)}$")
                 for name, want in self.variables]
        return lab.sh_flag(" && ".join(f"grep -qE -- {shell.quote(ere)} \"$WORK/child-env.txt\"" for ere in lines)
                           or "true")


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
