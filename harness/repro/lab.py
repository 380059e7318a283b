"""A router under test, with the handles a claim scenario needs.

Wraps a ``workloads.router_session.RouterSession`` over ``RouterProcess`` (the same
session object swap storms use): keeps the timeline in memory (and in the claim's log
files), sends requests with the harness clock, loads and unloads models, finds a
model's child process through /proc (its ``--alias``), freezes it with SIGSTOP,
and waits for timeline events.  Every time is seconds since the lab's t0.

Every step is also recorded as shell text for ``recipe.sh`` (harness/repro/recipe.py), and
the recorded steps capture what a scenario decides on: each request's reply into
``$WORK/reply-N.status`` / ``reply-N.body``, the router log, time marks, the children count.
A scenario declares each figure once (harness/repro/figures.py, ``base.measure``): one object
gives the value lbench computes and the command the recipe computes the same figure with from
those captures (recorded here by ``figure(name, shell_command)``; the ``sh_*`` helpers build the
commands), or marks it a setting rather than an observation (``given``); the claim's
``[[check]]`` requirements are then evaluated once in Python (the verdict) and once by the
recipe in shell on what it observed.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from pathlib import Path

import httpx
import pandas as pd
import psutil

from harness.engines.binary import Binary
from harness.engines.devices import is_selection_var
from harness.engines.router import HOLD_KEY, RouterModel, RouterProcess, TimelineEvent, router_argv
from harness import shell
from harness.errors import EngineError
from harness.probes.process_tree import TreeSample
from harness.workloads.router_session import RouterSession
from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine

EVENT_WAIT_S = 120.0
"""How long the lab waits for an event its own steps made certain (a request queued, a child
spawned for a request): the request causing it has a 120 s deadline (``Lab.request``), so the
event comes within that or the request has failed.  On a quiet machine each comes within
milliseconds; the 10 s these waits had was a guess that a loaded machine can outlast.  The wait
ends on the event, so a long deadline costs nothing when the event comes."""
GONE_KINDS = ("evict", "stop_sent", "kill_loading", "kill_timeout", "exited")  # a child's end in the router log


@dataclass
class Reply:
    model: str
    t_send: float
    t_done: float
    status: int | None
    body: str
    error: str | None = None
    n_predict: int | None = None
    sh_n: int | None = None  # the reply's number in recipe.sh ($WORK/reply-N.status, reply-N.body)

    @property
    def latency_ms(self) -> float:
        return (self.t_done - self.t_send) * 1000


@dataclass
class Lab:
    """A claim's router: a ``RouterSession`` (router, sampler, timeline) plus the harness's own
    steps (requests, freezes, sleeps) recorded for ``recipe.sh``."""

    binary: Binary
    models: list[RouterModel]
    run_dir: Path
    models_max: int | None = 2
    sleep_idle_seconds: int | None = None
    ctx_size: int = 512
    extra_env: dict[str, str] = field(default_factory=dict)
    preset_global: dict[str, str] = field(default_factory=dict)
    sample_hz: float = 100.0
    held: tuple[str, ...] = ()  # models whose child waits at start-up until ``release`` (``HOLD_KEY``)
    replies: list[Reply] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # what the harness did, as shell lines
    shell_figures: dict[str, tuple[str, str]] = field(default_factory=dict)  # figure -> (shell command, how)
    given: dict[str, object] = field(default_factory=dict)  # figures that are settings of the experiment
    unmeasured: dict[str, str] = field(default_factory=dict)  # figures no shell tool can measure -> why
    marks: dict[str, float] = field(default_factory=dict)  # time marks (``mark``), seconds since t0
    log_marks: dict[str, float] = field(default_factory=dict)  # router log marks (``log_mark``), seconds since t0
    watches: dict[str, tuple[str | tuple[str, ...], str | None, int]] = field(default_factory=dict)  # ``watch``
    t_stop: float | None = None  # when the steps ended and the router was told to stop (seconds since t0)
    start_may_fail: bool = False  # the claim is about whether the router starts: the recipe goes on when it does not
    start_failed: bool = False  # the router never came up (EngineError at the start)

    @property
    def names(self) -> list[str]:
        """The models' names in the router, in the spec's order."""
        return [m.name for m in self.models]

    def __post_init__(self) -> None:
        self.t0 = time.perf_counter()
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.holds: dict[str, Path] = {}  # held model -> its FIFO, until released
        for n, model in enumerate(self.held, 1):
            if sys.platform == "win32":  # no FIFOs: the scenarios that hold a child do not run there (docs/windows.md)
                raise OSError("holding a router child at start-up needs a FIFO, which Windows does not have")
            fifo = self.run_dir / f"hold-{n}.fifo"
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo, 0o600)
            self.holds[model] = fifo
        self.models = [replace(m, extra=(*m.extra, (HOLD_KEY, str(self.holds[m.name])))) if m.name in self.holds else m
                       for m in self.models]
        self.session = RouterSession(self._start_router, [m.name for m in self.models], sample_hz=self.sample_hz,
                                     t0=self.t0)

    def _start_router(self, on_event: Callable[[TimelineEvent], None]) -> RouterProcess:
        return RouterProcess(self.binary, self.models, models_max=self.models_max, run_dir=self.run_dir,
                             sleep_idle_seconds=self.sleep_idle_seconds, ctx_size=self.ctx_size,
                             on_event=on_event, extra_env=self.extra_env, preset_global=self.preset_global)

    @property
    def router(self) -> RouterProcess:
        """The running router; for one that never came up, its command line and preset (the ones
        RouterProcess wrote and ran) so its recipe can still start it."""
        if self.session.backend is not None:
            return self.session.backend
        from types import SimpleNamespace

        preset = self.run_dir / "preset.ini"
        return SimpleNamespace(argv=router_argv(self.binary, 0, preset, self.models_max, self.sleep_idle_seconds),
                               preset_path=preset)  # type: ignore[return-value]

    @property
    def events(self) -> list[TimelineEvent]:
        return self.session.events

    @property
    def samples(self) -> list[TreeSample]:
        return self.session.samples

    def __enter__(self) -> "Lab":
        try:
            self.session.__enter__()
        except EngineError:
            self.start_failed = True
            self._drop_holds()
            raise
        except BaseException:
            self._drop_holds()
            raise
        self.http = httpx.Client(base_url=self.router.base_url, timeout=120, trust_env=False,
                                 limits=httpx.Limits(max_keepalive_connections=0))
        return self

    def __exit__(self, *exc: object) -> None:
        self.t_stop = self.now()  # the recipe computes its figures here, before the router stops
        self._drop_holds()  # a held child still waiting would make the router wait to stop it
        self.http.close()
        self.session.close()

    def _drop_holds(self) -> None:
        """Release every held child that is waiting and remove the FIFOs (none stays in the run folder)."""
        for model in list(self.holds):
            self._open_hold(model, timeout=0.0)

    def act(self, *lines: str) -> None:
        """Record a step the harness took, as shell lines for the recipe (with its lab time); each
        line is one line (``shell.script`` checks it)."""
        self.actions += [f"# t={self.now():.3f}s", *lines]

    def note(self, text: str) -> None:
        """Record a comment for the recipe (one inert comment line whatever ``text`` holds)."""
        self.act(shell.comment(text))

    # ---- what the recipe observes (harness/repro/recipe.py evaluates the claim's checks on it) ----
    def figure(self, name: str, command: str, how: str = "") -> None:
        """The recipe computes figure ``name`` with the shell ``command`` (its stdout, one value:
        a number, ``true``/``false`` or a word), run after the steps, before the router stops."""
        self.shell_figures[name] = (command, how)

    def given_figure(self, name: str, value: object) -> None:
        """Figure ``name`` is a setting of the experiment (``models_max``), not an observation."""
        self.given[name] = value

    def unmeasurable(self, name: str, why: str) -> None:
        """Figure ``name`` cannot be measured by a shell script; ``why`` is printed by the recipe."""
        self.unmeasured[name] = why

    def mark(self, name: str) -> None:
        """A time mark in the recipe (``T_<name>``, seconds from ``now``) and here (``marks``)."""
        self.marks[name] = self.now()
        self.act(f"T_{shell.env_name(name)}=$(now)")

    def watch(self, name: str, kind: str | tuple[str, ...], model: str | None, timeout: float) -> None:
        """From here on, the recipe notes in ``$WORK/T_<name>`` when the router log gets its next
        ``kind`` line (for ``model``): a background wait (``wait_log``), so the steps go on."""
        ere = line_ere(kind, model)
        seen = self.lines_seen(kind, model)
        self.watches[name] = (kind, model, seen)
        self.act(f"( wait_log {shell.quote(ere)} {int(seen)} {float(timeout):g} > /dev/null && "
                 f"now > \"$WORK/T_{shell.env_name(name)}\" ) &")

    @staticmethod
    def sh_ms_from_reply_end(reply: Reply, watched: str) -> str:
        """Milliseconds from the end of background ``reply`` to the line ``watch`` noted as ``watched``."""
        return (f"awk -v a=\"$(cat \"$WORK/reply-{reply.sh_n}.done\" 2>/dev/null)\" "
                f"-v b=\"$(cat \"$WORK/T_{shell.env_name(watched)}\" 2>/dev/null)\" "
                "'BEGIN {if (a != \"\" && b != \"\") printf \"%.1f\\n\", (b - a) * 1000}'")

    @staticmethod
    def sh_seconds_between(start_mark: str, watched: str) -> str:
        """Seconds from time mark ``start_mark`` (``mark``) to the line ``watch`` noted as ``watched``."""
        return (f"awk -v a=\"$T_{shell.env_name(start_mark)}\" -v b=\"$(cat \"$WORK/T_{shell.env_name(watched)}\" "
                "2>/dev/null)\" 'BEGIN {if (b != \"\") printf \"%.3f\\n\", b - a}'")

    def log_mark(self, name: str) -> None:
        """A mark in the router log (``L_<name>``: the lines it holds now), for ``sh_log_count_between``;
        here, the time (``log_marks``): the router lines lbench received after it."""
        self.log_marks[name] = self.now()
        self.act(f"L_{shell.env_name(name)}=$(wc -l < \"$WORK/router.stderr.log\" | tr -d ' ')")

    @staticmethod
    def sh_log_count_between(start: str, end: str | None, kind: str | tuple[str, ...], model: str | None) -> str:
        """``kind`` lines (for ``model``) the router logged between log marks ``start`` and ``end``
        (None: to the end of the log)."""
        ere = line_ere(kind, model)
        return f"{Lab.sh_log_lines(start, end)} | grep -cE -- {shell.quote(ere)}"

    @staticmethod
    def sh_log_first_evicted(after: str | None = None) -> str:
        """The model named by the router log's first eviction line (after log mark ``after``), in any
        of the forms the builds write (empty when there is none)."""
        forms = ["s/.*evicting idle LRU name=(.*) (for a queued request|to make room for name=).*$/\\1/",
                 "s/.*model name=(.*) went idle, giving up its slot.*$/\\1/",
                 "s/.*removing LRU name=(.*[^[:space:]])[[:space:]]*$/\\1/"]
        return (f"{Lab.sh_log_lines(after)} | grep -m 1 -E -- {shell.quote(line_ere('evict', None))} | sed -E "
                + " ".join(f"-e {shell.quote(f)}" for f in forms))

    @staticmethod
    def sh_log_lines(after: str | None = None, until: str | None = None) -> str:
        """The router log's lines after log mark ``after`` (None: from the start) up to mark ``until``
        (None: to the end); none when the two marks hold the same count."""
        if after is None and until is None:
            return "cat \"$WORK/router.stderr.log\""
        first = f"$L_{shell.env_name(after)}" if after else "0"
        if until is None:
            return f"awk -v s=\"{first}\" 'NR > s' \"$WORK/router.stderr.log\""
        return f"awk -v s=\"{first}\" -v e=\"$L_{shell.env_name(until)}\" 'NR > s && NR <= e' \"$WORK/router.stderr.log\""

    @staticmethod
    def sh_log_line_of(kind: str | tuple[str, ...], model: str | None, after: str | None = None) -> str:
        """The log line number (the whole log's) of the first ``kind`` line for ``model`` after
        log mark ``after``; empty when there is none."""
        ere = line_ere(kind, model)
        start = f"$((L_{shell.env_name(after)} + 1))" if after else "1"
        return (f"RE={shell.quote(ere)} awk -v s=\"{start}\" 'NR >= s && $0 ~ ENVIRON[\"RE\"] {{print NR; exit}}' "
                "\"$WORK/router.stderr.log\"")

    # ---- the recipe's /models/sse capture: "time<TAB>model<TAB>status" lines in $WORK/sse.txt ----
    @staticmethod
    def sh_sse_first(model: str, status: str, after_mark: str | None = None) -> str:
        """The recipe's time of the first ``status`` event of ``model`` on /models/sse (after time
        mark ``after_mark``); empty when there is none."""
        since = f"$T_{shell.env_name(after_mark)}" if after_mark else "0"
        return (f"M={shell.quote(model)} S={shell.quote(status)} awk -F '\\t' -v a=\"{since}\" "
                "'$2 == ENVIRON[\"M\"] && $3 == ENVIRON[\"S\"] && $1 >= a {print $1; exit}' \"$WORK/sse.txt\"")

    @staticmethod
    def sh_sse_before(first: tuple[str, str], then: tuple[str, str], after_mark: str) -> str:
        """``true`` when /models/sse sent ``first`` (model, status) no later than ``then`` after time
        mark ``after_mark``, by the capture's line order (one stream: the router's order)."""
        return Lab.sh_flag(
            f"M1={shell.quote(first[0])} S1={shell.quote(first[1])} M2={shell.quote(then[0])} S2={shell.quote(then[1])} "
            f"awk -F '\\t' -v a=\"$T_{shell.env_name(after_mark)}\" '$1 >= a && !u && $2 == ENVIRON[\"M1\"] && "
            "$3 == ENVIRON[\"S1\"] {u = NR} $1 >= a && !l && $2 == ENVIRON[\"M2\"] && $3 == ENVIRON[\"S2\"] {l = NR} "
            "END {exit !(u && l && u <= l)}' \"$WORK/sse.txt\"")

    @staticmethod
    def sh_log_order(kind: str, models: list[str]) -> str:
        """The models of ``kind`` lines among ``models``, in the router log's order, comma-joined."""
        before, after = _LOG_TEXT[kind]
        names = "(" + "|".join(shell.ere_literal(m) for m in models) + ")"
        strip = shell.quote("s/^" + before + "(.*)" + after + "$/\\1/")
        return (f"grep -oE -- {shell.quote(before + names + after)} \"$WORK/router.stderr.log\" | "
                f"sed -E {strip} | paste -sd, -")

    @staticmethod
    def sh_flag(test: str) -> str:
        """``true``/``false``: whether the shell ``test`` command succeeds."""
        return f"if {test}; then echo true; else echo false; fi"

    @staticmethod
    def _sh_log(function: str, kind: str | tuple[str, ...], model: str | None) -> str:
        ere = line_ere(kind, model)
        return f"{function} {shell.quote(ere)}"

    @classmethod
    def sh_log_count(cls, kind: str | tuple[str, ...], model: str | None = None) -> str:
        """Lines of ``kind`` (for ``model``) in the router log so far."""
        return cls._sh_log("log_count", kind, model)

    @classmethod
    def sh_log_has(cls, kind: str | tuple[str, ...], model: str | None = None) -> str:
        return cls.sh_flag(f'[ "$({cls.sh_log_count(kind, model)})" -gt 0 ]')

    def sh_ok(self, model: str | list[str] | None = None) -> str:
        """How many of the recipe's replies (for ``model``, or any of a list) had HTTP status 200."""
        wanted = [model] if isinstance(model, str) else model
        files = [f'"$WORK/reply-{r.sh_n}.status"' for r in self.replies
                 if r.sh_n is not None and (wanted is None or r.model in wanted)]
        return f"cat {' '.join(files)} 2>/dev/null | grep -c '^200$'" if files else "echo 0"

    @staticmethod
    def sh_reply_has(reply: Reply, text: str) -> str:
        return Lab.sh_flag(f"grep -qF -- {shell.quote(text)} \"$WORK/reply-{reply.sh_n}.body\"")

    @staticmethod
    def sh_gave_up(reply: Reply) -> str:
        """``true`` when the client gave up on ``reply`` (curl's status ``000``: no answer in time)."""
        return Lab.sh_flag(f"grep -qx '000' \"$WORK/reply-{reply.sh_n}.status\"")

    def environment_set(self) -> dict[str, str]:
        """The variables lbench set or changed for the router (the rest is the caller's environment), and
        the device selection variable --device set (GGML_VK_VISIBLE_DEVICES), so a recipe drives the same device."""
        env, _ = LlamaServerEngine(self.binary).environment(Setting())
        env["LLAMA_CACHE"] = str(self.run_dir / "llama-cache")
        env.update(self.extra_env)
        return changed_env(env)

    # ---- time and timeline ---------------------------------------------
    def now(self) -> float:
        return time.perf_counter() - self.t0

    def rel(self, t: float) -> float:
        return t - self.t0

    def wait_for(self, kind: str, model: str | None = None, timeout: float = 30.0, after: float = 0.0
                 ) -> TimelineEvent | None:
        """First event of ``kind`` (for ``model``) received after lab time ``after``.  Recorded for
        the recipe as a wait until the router log holds more such lines than the lab had seen
        before ``after`` (kinds without a fixed log text are recorded as a comment)."""
        seen = sum(1 for e in list(self.events)
                   if e.kind == kind and (model is None or e.model == model) and self.rel(e.t) < after)
        ere = log_ere(kind, model)
        if kind.startswith("status:") and model is not None:  # the recipe's /models/sse capture
            self.act(f"wait_sse {shell.quote(model)} {shell.quote(kind[7:])} {int(seen)} {float(timeout):g}")
        elif ere is None:
            self.note(f"(lbench waited up to {timeout:g} s for a {kind} event here)")
        else:
            self.act(f"wait_log {shell.quote(ere)} {int(seen)} {float(timeout):g}")
        return self.session.wait_for(kind, model, timeout, after)

    def lines_seen(self, kind: str | tuple[str, ...], model: str | None, at_least: int = 0,
                   timeout: float = 10.0) -> int:
        """How many ``kind`` lines (one kind or several) for ``model`` the timeline holds; with
        ``at_least``, once it holds that many or ``timeout`` has passed (lines logged before now may
        still be on their way through the log reader).  Not recorded: the recipe reads its log file."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if at_least > 0:
            self.session.wait_for_nth(kinds, model, at_least, timeout)
        return sum(1 for e in list(self.events) if e.kind in kinds and (model is None or e.model == model))

    def wait_for_next(self, kind: str, model: str, seen: int, timeout: float = 30.0) -> TimelineEvent | None:
        """The next ``kind`` event for ``model`` after the first ``seen`` ones (counted, not timed:
        ``RouterSession.wait_for_nth``).  Recorded for the recipe as a wait until the router log
        holds more than ``seen`` such lines."""
        self.act(f"wait_log {shell.quote(line_ere(kind, model))} {int(seen)} {float(timeout):g}")
        return self.session.wait_for_nth(kind, model, seen + 1, timeout)

    def event_frame(self) -> pd.DataFrame:
        return self.session.event_frame()

    def memory_frame(self) -> pd.DataFrame:
        return self.session.memory_frame()

    def lines(self, *kinds: str) -> list[str]:
        return [f"t={self.rel(e.t):.3f}s {e.source}: {e.text}" for e in self.events if not kinds or e.kind in kinds]

    # ---- driving ---------------------------------------------------------
    def request(self, model: str, n_predict: int = 1, *, timeout: float = 120.0, ignore_eos: bool = False,
                prompt: str = "Hello world", headers: dict[str, str] | None = None) -> Reply:
        """A /completion request for ``model``, answered or failed (its reply is kept in ``replies``)."""
        return self._send_completion(*self._completion(model, n_predict, timeout, ignore_eos, prompt, headers, False))

    def request_in_background(self, model: str, n_predict: int = 1, *, timeout: float = 120.0,
                              ignore_eos: bool = False, prompt: str = "Hello world",
                              headers: dict[str, str] | None = None) -> threading.Thread:
        """``request`` on a thread of its own; its recipe line is recorded here, before the steps that
        follow it (a line recorded by the thread could come after them)."""
        call = self._completion(model, n_predict, timeout, ignore_eos, prompt, headers, True)
        t = threading.Thread(target=self._send_completion, args=call, daemon=True)
        t.start()
        return t

    def _completion(self, model: str, n_predict: int, timeout: float, ignore_eos: bool, prompt: str,
                    headers: dict[str, str] | None, background: bool
                    ) -> tuple[str, dict[str, Any], float, dict[str, str] | None, int]:
        """Record a /completion request's recipe line; the arguments of ``_send_completion``."""
        body = {"model": model, "prompt": prompt, "n_predict": n_predict, "cache_prompt": True,
                "ignore_eos": ignore_eos, "response_fields": ["timings"]}
        return model, body, timeout, headers, self._curl_line("/completion", body, timeout, headers, background)

    def _curl_line(self, path: str, body: dict[str, Any], timeout: float, headers: dict[str, str] | None,
                   background: bool) -> int:
        """Record the recipe's curl line for a POST (in the background: its end noted in
        ``$WORK/reply-N.done``); the reply's number."""
        n = self._next_reply()
        line = _curl(path, body, timeout, headers, n)
        self.act(f"{{ {line}; now > \"$WORK/reply-{n}.done\"; }} &" if background else line)
        return n

    def _send_completion(self, model: str, body: dict[str, Any], timeout: float, headers: dict[str, str] | None,
                         n: int) -> Reply:
        n_predict = int(body["n_predict"])
        t_send = time.perf_counter()
        try:
            r = self.http.post("/completion", json=body, timeout=timeout, headers=headers)
            reply = Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500], n_predict=n_predict,
                          sh_n=n)
        except httpx.HTTPError as exc:
            reply = Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}",
                          n_predict=n_predict, sh_n=n)
        self.replies.append(reply)
        return reply

    def _next_reply(self) -> int:
        with _COUNTER_LOCK:
            n = self.__dict__.get("_n_replies", 0) + 1
            self.__dict__["_n_replies"] = n
        return n

    def post(self, path: str, model: str) -> Reply:
        """``POST path`` with ``{"model": model}`` (``/models/load``, ``/models/unload``)."""
        return self._send_post(path, model, self._curl_line(path, {"model": model}, 120, None, False))

    def post_in_background(self, path: str, model: str, into: list[Reply] | None = None) -> threading.Thread:
        """``post`` on a thread of its own, its recipe line recorded here (``request_in_background``);
        its reply is appended to ``into``."""
        n = self._curl_line(path, {"model": model}, 120, None, True)

        def send() -> None:
            reply = self._send_post(path, model, n)
            if into is not None:
                into.append(reply)
        t = threading.Thread(target=send, daemon=True)
        t.start()
        return t

    def _send_post(self, path: str, model: str, n: int) -> Reply:
        t_send = time.perf_counter()
        try:
            r = self.http.post(path, json={"model": model})
            return Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500], sh_n=n)
        except httpx.HTTPError as exc:
            return Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}", sh_n=n)

    def get(self, path: str, model: str, timeout: float = 120.0) -> Reply:
        """``GET path?model=<model>`` (the router proxies it to the model's child)."""
        n = self._next_reply()
        self.act(f"curl -sS -m {float(timeout):g} -G --data-urlencode {shell.quote('model=' + model)} "
                 f"{_capture(n)} \"http://127.0.0.1:$PORT\"{shell.quote(path)}")
        t_send = time.perf_counter()
        try:
            r = self.http.get(path, params={"model": model}, timeout=timeout)
            reply = Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500], sh_n=n)
        except httpx.HTTPError as exc:
            reply = Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}", sh_n=n)
        self.replies.append(reply)
        return reply

    def wave(self, models: list[str], prompt: str) -> None:
        """One storm wave for the recipe (the storm driver sends it here): its requests sent together,
        every body a quoted word; the next wave starts when they are done (``wait_jobs``: every job
        but the router's)."""
        self.actions.append(" & ".join(
            f"curl -sS -o /dev/null -H 'Content-Type: application/json' -d "
            f"{shell.quote(json.dumps(self.router.request_body(m, prompt, 1)))} "
            f"\"http://127.0.0.1:$PORT\"{shell.quote(self.router.request_path)}" for m in models) + " & wait_jobs")

    def timed(self, plan: list[list[str]], offsets: list[float], prompt: str) -> None:
        """A timed sequence for the recipe (the storm driver sends it here): each request in the
        background at its time after the first, then every job but the router's is waited for."""
        lines = [f"( sleep {shell.quote(f'{at:.3f}')}; curl -sS -o /dev/null -H 'Content-Type: application/json' -d "
                 f"{shell.quote(json.dumps(self.router.request_body(w[0], prompt, 1)))} "
                 f"\"http://127.0.0.1:$PORT\"{shell.quote(self.router.request_path)} ) &"
                 for w, at in zip(plan, offsets, strict=True)]
        self.actions.append(" ".join(lines) + " wait_jobs")  # one script line: a line break belongs to no action

    def models_loaded(self, names: list[str], timeout: float) -> int:
        """How many of ``names`` GET /models lists as loaded, polled until all are or ``timeout``
        (a startup load can finish before /models/sse is subscribed, so its event may be missed);
        recorded as the same poll into ``$WORK/models.json``.  A router that never came up: recorded
        only (a router that starts after all is polled by the recipe), 0."""
        words = " ".join(shell.quote(n) for n in names)
        self.act(f"for _ in $(seq {max(1, int(timeout * 10))}); do curl -sS \"http://127.0.0.1:$PORT/models\" > "
                 f"\"$WORK/models.json\"; [ \"$(models_loaded {words})\" -ge {len(names)} ] && break; sleep 0.1; done")
        deadline = time.monotonic() + timeout
        while not self.start_failed:
            data = self.http.get("/models").json().get("data", [])
            n = sum(1 for m in data if m.get("id") in names and (m.get("status") or {}).get("value") == "loaded")
            if n == len(names) or time.monotonic() > deadline:
                return n
            time.sleep(0.1)
        return 0

    def child_pid(self, model: str, timeout: float = EVENT_WAIT_S, poll_s: float = 0.005,
                  gone_after: float | None = None) -> int | None:
        """PID of the router child serving ``model`` (found by its ``--alias`` among the router's
        children in /proc), polled every ``poll_s`` (0.0002 finds a child within a millisecond of its
        spawn, early enough to stop it before its first status message).  None after ``timeout``, or
        at once when ``gone_after`` (lab time) is given and the router has logged since then that the
        model's child was evicted, stopped or exited (``child_gone``): a child that is gone is not
        waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid, argv in self._children():
                if "--alias" in argv[:-1] and argv[argv.index("--alias") + 1] == model:
                    self.__dict__.setdefault("_pid_model", {})[pid] = model
                    return pid
            if gone_after is not None and self.child_gone(model, gone_after) is not None:
                return None
            time.sleep(poll_s)
        return None

    def child_gone(self, model: str, after: float) -> TimelineEvent | None:
        """The router's first line since lab time ``after`` saying ``model``'s child was evicted,
        told to stop, force-killed or exited; None when there is none (yet)."""
        return next((e for e in list(self.events) if e.kind in GONE_KINDS and e.model == model
                     and self.rel(e.t) >= after), None)

    def _children(self) -> Iterator[tuple[int, list[str]]]:
        """The router's children and their command lines: from its ``/proc/<pid>/task/*/children``
        lists where Linux has them (no scan of every process), else psutil's."""
        root = self.router.pid
        tasks = Path(f"/proc/{root}/task")
        if tasks.is_dir():
            for children in tasks.glob("*/children"):
                try:
                    pids = children.read_text().split()
                except OSError:
                    continue
                for pid in pids:
                    try:
                        yield int(pid), Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                    except OSError:
                        continue
            return
        try:
            for child in psutil.Process(root).children():
                try:
                    yield child.pid, child.cmdline()
                except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                    continue
        except psutil.NoSuchProcess:
            raise EngineError("the router is gone") from None

    def _pid_sh(self, pid: int) -> str:
        model = getattr(self, "_pid_model", {}).get(pid)
        if not model:
            return str(int(pid))
        return f"$(find_child {shell.quote('--alias ' + shell.ere_literal(model) + '( |$)')})"

    def release(self, model: str, timeout: float = EVENT_WAIT_S) -> bool:
        """Let ``model``'s held child go on with its start (it was waiting in ``open`` of its FIFO,
        before its first status message to the router): write its UI config (``{}``) to the FIFO.
        False when no child had the FIFO open within ``timeout`` (its child was never spawned, or
        exited)."""
        self.act(f'{{ exec 3<>"$WORK"/{shell.quote(self.holds[model].name)}; printf \'{{}}\' >&3; exec 3>&-; }}')
        return self._open_hold(model, timeout)

    def _open_hold(self, model: str, timeout: float) -> bool:
        """Write ``{}`` to ``model``'s FIFO once its child has it open (a non-blocking open for writing
        fails with ENXIO until a reader has it: waited for up to ``timeout``); the FIFO is removed after."""
        fifo = self.holds.pop(model)
        if sys.platform == "win32":  # never held there (``__post_init__`` refuses): nothing to release
            return False
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                        return False
                    time.sleep(0.005)
                    continue
                try:
                    os.write(fd, b"{}")
                finally:
                    os.close(fd)
                return True
        finally:
            fifo.unlink(missing_ok=True)  # the child has it open already, or never will

    def retry_when(self, test: str, why: str, attempts: int) -> None:
        """When shell ``test`` succeeds after the steps, the recipe's attempt could not create the
        situation (``why``): it runs again, ``attempts`` times in all, as lbench does."""
        self.__dict__["retry"] = (test, why, int(attempts))

    def freeze(self, pid: int) -> None:
        self.act(f"kill -STOP {self._pid_sh(pid)}")
        self.freeze_pid(pid)

    @staticmethod
    def freeze_pid(pid: int) -> None:
        if sys.platform == "win32":  # no SIGSTOP: the freezing claims cannot run there (docs/windows.md)
            raise OSError("freezing a process (SIGSTOP) is not possible on Windows")
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, pid: int) -> None:
        self.act(f"kill -CONT {self._pid_sh(pid)}")
        if sys.platform == "win32":
            return
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def sleep(self, seconds: float) -> None:
        self.act(f"sleep {float(seconds):g}")
        time.sleep(seconds)

    def settle(self, seconds: float = 1.0) -> None:
        """Wait until the router has ended the requests whose replies were read.  It counts a
        proxied request in flight (``req_count``) until the reply's cleanup, which can run after the
        client has the whole body, and ``pick_victim`` skips a model with one in flight: a step that
        needs the last model used to be idle (a victim candidate) waits here first.  The router
        shows ``req_count`` nowhere, so this is a wait, not an observation."""
        self.note("the router ends a request after its reply was read: wait until it has")
        self.sleep(seconds)

    def environ(self, pid: int | None) -> dict[str, str]:
        """A child's environment.  ``pid`` None (the lookup timed out) is an error, never the
        harness's own environment (``psutil.Process(None)`` would read that)."""
        if not isinstance(pid, int):
            raise EngineError("no child pid to read the environment of (the child was not found)")
        self.act(f"tr '\\0' '\\n' < /proc/{self._pid_sh(pid)}/environ > \"$WORK/child-env.txt\"  # Linux's /proc",
                 "grep -E '^LLAMA|^LBENCH' \"$WORK/child-env.txt\"")
        return psutil.Process(pid).environ()

    def peak_children(self) -> int:
        return self.session.peak_children()


_COUNTER_LOCK = threading.Lock()


# the router's log lines by kind (harness/engines/router.py ROUTER_PATTERNS) as POSIX EREs around
# the model's name: (text before the name, text after it)
_LOG_TEXT = {
    "queued": ("request for name=", " queued at position"),
    "joined": ("request for name=", " joined the queue,"),
    "evict": ("", ""),  # three forms (log_ere)
    "spawn": ("spawning server instance with name=", " on port"),
    "stop_sent": ("stopping model instance name=", " *$"),
    "kill_loading": ("model name=", " is still loading, force-killing"),
    "kill_timeout": ("force-killing model instance name=", " after timeout"),
    "exited": ("instance name=", " exited with status"),
    "proxy": ("proxying request to model ", " on port"),
    "cancelled": ("cancelled while waiting for model name=", "(\"|[[:space:]]*$)"),  # inside a JSON error
}


def changed_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that lbench set or changed (the rest is the caller's environment), and
    the device selection variable --device set (GGML_VK_VISIBLE_DEVICES), so a recipe drives the same device."""
    return {k: v for k, v in env.items() if os.environ.get(k) != v or is_selection_var(k)}


def line_ere(kind: str | tuple[str, ...], model: str | None) -> str:
    """``log_ere``, for a kind that must have a fixed log text (ValueError otherwise)."""
    ere = log_ere(kind, model)
    if ere is None:
        raise ValueError(f"no fixed router log text for {kind!r}")
    return ere


def log_ere(kind: str | tuple[str, ...], model: str | None) -> str | None:
    """A POSIX ERE for the router's log lines of ``kind`` (for ``model``; several kinds: any of
    them), None when a kind has no fixed text.  The name is matched literally (``shell.ere_literal``)."""
    if isinstance(kind, tuple):
        parts = [log_ere(k, model) for k in kind]
        return None if None in parts else "|".join(f"({p})" for p in parts)
    if kind not in _LOG_TEXT:
        return None
    before, after = _LOG_TEXT[kind]
    if kind == "evict":  # three forms, each with its own text after the name
        name = shell.ere_literal(model) if model is not None else ".+"
        return (f"evicting idle LRU name={name} (for a queued request|to make room for name=)|"
                f"model name={name} went idle, giving up its slot|removing LRU name={name}[[:space:]]*$")
    return before + (shell.ere_literal(model) if model is not None else ".+") + after


def _capture(n: int | None) -> str:
    """curl options writing reply ``n``'s body and HTTP status to ``$WORK/reply-N.*``."""
    if n is None:
        return ""
    return f"-o \"$WORK/reply-{n}.body\" -w '%{{http_code}}\\n' >\"$WORK/reply-{n}.status\""


def _curl(path: str, body: dict, timeout: float, headers: dict[str, str] | None = None, n: int | None = None) -> str:
    extra = "".join(f"-H {shell.quote(f'{k}: {v}')} " for k, v in (headers or {}).items())
    return (f"curl -sS -m {float(timeout):g} -H 'Content-Type: application/json' {extra}"
            f"-d {shell.quote(json.dumps(body))} {_capture(n) + ' ' if n is not None else ''}"
            f"\"http://127.0.0.1:$PORT\"{shell.quote(path)}")
