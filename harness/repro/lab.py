"""A router under test, with the handles a claim scenario needs.

Wraps a ``workloads.router_session.RouterSession`` over ``RouterProcess`` (the same
session object swap storms use): keeps the timeline in memory (and in the claim's log
files), sends requests with the harness clock, loads and unloads models, finds a
model's child process through /proc (its ``--alias``), freezes it with SIGSTOP,
and waits for timeline events.  Every time is seconds since the lab's t0.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pandas as pd
import psutil

from harness.engines.binary import Binary
from harness.engines.router import RouterModel, RouterProcess, TimelineEvent
from harness import shell
from harness.errors import EngineError
from harness.probes.process_tree import TreeSample
from harness.workloads.router_session import RouterSession


@dataclass
class Reply:
    model: str
    t_send: float
    t_done: float
    status: int | None
    body: str
    error: str | None = None
    n_predict: int | None = None

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
    replies: list[Reply] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # what the harness did, as shell lines

    def __post_init__(self) -> None:
        self.t0 = time.perf_counter()
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.session = RouterSession(self._start_router, [m.name for m in self.models], sample_hz=self.sample_hz,
                                     t0=self.t0)

    def _start_router(self, on_event) -> RouterProcess:
        return RouterProcess(self.binary, self.models, models_max=self.models_max, run_dir=self.run_dir,
                             sleep_idle_seconds=self.sleep_idle_seconds, ctx_size=self.ctx_size,
                             on_event=on_event, extra_env=self.extra_env, preset_global=self.preset_global)

    @property
    def router(self) -> RouterProcess:
        return self.session.backend

    @property
    def events(self) -> list[TimelineEvent]:
        return self.session.events

    @property
    def samples(self) -> list[TreeSample]:
        return self.session.samples

    def __enter__(self) -> "Lab":
        self.session.__enter__()
        self.http = httpx.Client(base_url=self.router.base_url, timeout=120, trust_env=False,
                                 limits=httpx.Limits(max_keepalive_connections=0))
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        self.session.close()
        try:
            write_recipe(self)
        except Exception as exc:  # the recipe must never hide the scenario's own outcome
            (self.run_dir / "recipe.sh").write_text(shell.comment(f"recipe could not be written: {exc}") + "\n")

    def act(self, line: str) -> None:
        """Record a step the harness took, as a shell line for the recipe (with its lab time)."""
        self.actions.append(f"# t={self.now():.3f}s\n{line}")

    def note(self, text: str) -> None:
        """Record a comment for the recipe (one inert comment line whatever ``text`` holds)."""
        self.act(shell.comment(text))

    def environment_set(self) -> dict[str, str]:
        """The variables lbench set or changed for the router (the rest is the caller's environment)."""
        from harness.engines.base import Setting
        from harness.engines.llama_server import LlamaServerEngine

        env, _ = LlamaServerEngine(self.binary).environment(Setting())
        env["LLAMA_CACHE"] = str(self.run_dir / "llama-cache")
        env.update(self.extra_env)
        return {k: v for k, v in env.items() if os.environ.get(k) != v}

    # ---- time and timeline ---------------------------------------------
    def now(self) -> float:
        return time.perf_counter() - self.t0

    def rel(self, t: float) -> float:
        return t - self.t0

    def wait_for(self, kind: str, model: str | None = None, timeout: float = 30.0, after: float = 0.0
                 ) -> TimelineEvent | None:
        """First event of ``kind`` (for ``model``) received after lab time ``after``."""
        return self.session.wait_for(kind, model, timeout, after)

    def event_frame(self) -> pd.DataFrame:
        return self.session.event_frame()

    def memory_frame(self) -> pd.DataFrame:
        return self.session.memory_frame()

    def lines(self, *kinds: str) -> list[str]:
        return [f"t={self.rel(e.t):.3f}s {e.source}: {e.text}" for e in self.events if not kinds or e.kind in kinds]

    # ---- driving ---------------------------------------------------------
    def request(self, model: str, n_predict: int = 1, *, timeout: float = 120.0, ignore_eos: bool = False,
                prompt: str = "Hello world", headers: dict[str, str] | None = None) -> Reply:
        body = {"model": model, "prompt": prompt, "n_predict": n_predict, "cache_prompt": True,
                "ignore_eos": ignore_eos, "response_fields": ["timings"]}
        self.act(_curl("/completion", body, timeout, headers) + (" &" if threading.current_thread() is not
                                                                  threading.main_thread() else ""))
        t_send = time.perf_counter()
        try:
            r = self.http.post("/completion", json=body, timeout=timeout, headers=headers)
            reply = Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500], n_predict=n_predict)
        except httpx.HTTPError as exc:
            reply = Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}",
                          n_predict=n_predict)
        self.replies.append(reply)
        return reply

    def request_in_background(self, model: str, n_predict: int = 1, **kw) -> threading.Thread:
        t = threading.Thread(target=self.request, args=(model, n_predict), kwargs=kw, daemon=True)
        t.start()
        return t

    def post(self, path: str, model: str) -> Reply:
        self.act(_curl(path, {"model": model}, 120))
        t_send = time.perf_counter()
        try:
            r = self.http.post(path, json={"model": model})
            return Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500])
        except httpx.HTTPError as exc:
            return Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}")

    def get(self, path: str, model: str, timeout: float = 120.0) -> Reply:
        """``GET path?model=<model>`` (the router proxies it to the model's child)."""
        self.act(f"curl -sS -m {timeout:g} \"http://127.0.0.1:$PORT{path}?model={model}\"")
        t_send = time.perf_counter()
        try:
            r = self.http.get(path, params={"model": model}, timeout=timeout)
            reply = Reply(model, t_send, time.perf_counter(), r.status_code, r.text[:500])
        except httpx.HTTPError as exc:
            reply = Reply(model, t_send, time.perf_counter(), None, "", f"{type(exc).__name__}: {exc}")
        self.replies.append(reply)
        return reply

    def child_pid(self, model: str, timeout: float = 10.0) -> int | None:
        """PID of the router child serving ``model`` (found by its ``--alias``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                for child in psutil.Process(self.router.pid).children():
                    try:
                        cmd = child.cmdline()
                    except (psutil.NoSuchProcess, psutil.ZombieProcess):
                        continue
                    if "--alias" in cmd and cmd[cmd.index("--alias") + 1] == model:
                        self.__dict__.setdefault("_pid_model", {})[child.pid] = model
                        return child.pid
            except psutil.NoSuchProcess:
                raise EngineError("the router is gone") from None
            time.sleep(0.005)
        return None

    def _pid_sh(self, pid: int) -> str:
        model = getattr(self, "_pid_model", {}).get(pid)
        if not model:
            return str(int(pid))
        return f"$(pgrep -P \"$ROUTER_PID\" -f -- {shell.quote('--alias ' + shell.ere_literal(model) + '( |$)')})"

    def freeze(self, pid: int) -> None:
        self.act(f"kill -STOP {self._pid_sh(pid)}")
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, pid: int) -> None:
        self.act(f"kill -CONT {self._pid_sh(pid)}")
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def sleep(self, seconds: float) -> None:
        self.act(f"sleep {float(seconds):g}")
        time.sleep(seconds)

    def environ(self, pid: int | None) -> dict[str, str]:
        """A child's environment.  ``pid`` None (the lookup timed out) is an error, never the
        harness's own environment (``psutil.Process(None)`` would read that)."""
        if not isinstance(pid, int):
            raise EngineError("no child pid to read the environment of (the child was not found)")
        self.act(f"tr '\\0' '\\n' < /proc/{self._pid_sh(pid)}/environ | grep -E '^LLAMA|^LBENCH'")
        return psutil.Process(pid).environ()

    def peak_children(self) -> int:
        return self.session.peak_children()


def _curl(path: str, body: dict, timeout: float, headers: dict[str, str] | None = None) -> str:
    import json

    extra = "".join(f"-H {shell.quote(f'{k}: {v}')} " for k, v in (headers or {}).items())
    return (f"curl -sS -m {float(timeout):g} -H 'Content-Type: application/json' {extra}"
            f"-d {shell.quote(json.dumps(body))} \"http://127.0.0.1:$PORT\"{shell.quote(path)}")


def _heredoc_delimiter(text: str, base: str = "INI") -> str:
    """A here-document delimiter that no line of ``text`` equals (so ``text`` cannot end it)."""
    lines = set(text.splitlines())
    n = 0
    while (delimiter := base + (f"_{n}" if n else "")) in lines:
        n += 1
    return delimiter


def write_recipe(lab: Lab) -> None:
    """``recipe.sh``: the same experiment as a standalone shell script (no lbench needed).  Every
    value in it is a shell word quoted by ``shlex`` (harness/shell.py); comments are one line."""
    router = lab.router
    words = [shell.quote(a) for a in router.argv]
    words[router.argv.index("--port") + 1] = '"$PORT"'
    preset_at = router.argv.index("--models-preset") + 1
    words[preset_at] = '"$WORK/preset.ini"'
    preset = router.preset_path.read_text() if router.preset_path.exists() else ""
    delimiter = _heredoc_delimiter(preset)
    env = lab.environment_set()
    b = lab.binary
    lines = ["#!/usr/bin/env bash",
             "# Rerun of this claim's experiment without lbench: the router command, its environment,",
             "# the preset INI, then the harness's steps in order (times are seconds after the lab start).",
             shell.comment(f"engine: {b.path} (version {b.version}, build {b.build_number})"),
             "set -u", "PORT=${PORT:-18080}", "WORK=$(mktemp -d)", "mkdir -p \"$WORK/llama-cache\"",
             f"cat > \"$WORK/preset.ini\" <<'{delimiter}'", preset.rstrip("\n"), delimiter]
    for k, v in sorted(env.items()):
        if k == "LLAMA_CACHE":
            lines.append(f'export {k}="$WORK/llama-cache"')
        else:
            lines.append(shell.export(k, v))
    lines += [" ".join(words) + " 2> \"$WORK/router.stderr.log\" > \"$WORK/router.stdout.log\" &", "ROUTER_PID=$!",
              'until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 0.1; done',
              "wait_jobs() { for j in $(jobs -p); do [ \"$j\" = \"$ROUTER_PID\" ] || wait \"$j\"; done; }"]
    lines += lab.actions
    lines += ["wait_jobs", 'kill "$ROUTER_PID"; wait "$ROUTER_PID"', 'echo "logs in $WORK"']
    (lab.run_dir / "recipe.sh").write_text("\n".join(lines) + "\n")
