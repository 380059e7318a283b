"""llama-server in router mode: several models behind one port, swapped under ``--models-max``.

lbench writes the preset INI, points ``LLAMA_CACHE`` at an empty directory (so no
model from the user's cache sneaks in), binds 127.0.0.1, and keeps a timeline:
every router stderr line, every child line (re-emitted on stdout as ``[port] ...``)
and every ``/models/sse`` event, each stamped with the harness's receive time
(``time.perf_counter()``).  The processes' own timestamps are relative to their own
starts, so they are kept as text only.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness import shell
from harness.engines import processes, reserved, server_policy
from harness.engines.llama_server import LlamaServerEngine
from harness.engines.binary import Binary
from harness.engines.loopback import HOST, free_port
from harness.engines.base import Setting
from harness.engines.readiness import wait_until_ready
from harness.errors import BadInput, EngineError

INI_FORBIDDEN = set(";#\n[]=")

# router log lines that mark a step of a swap -> (kind, regex); model names may hold spaces
# (the preset INI allows them), so a name runs up to the fixed text after it or the line end
ROUTER_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("queued", re.compile(r"request for name=(?P<model>.+?) queued at position (?P<position>\d+)")),
    ("joined", re.compile(r"request for name=(?P<model>.+?) joined the queue, (?P<waiting>\d+) waiting")),
    # 11434: "... for a queued request"; 10327: "... to make room for name=Y"
    ("evict", re.compile(r"evicting idle LRU name=(?P<model>.+?) (?:for a queued request|to make room for name=)")),
    # 10327: a child that finished its requests gives its slot to the queue at once
    ("evict", re.compile(r"model name=(?P<model>.+?) went idle, giving up its slot to a queued request")),
    ("evict", re.compile(r"models_max limit reached, removing LRU name=(?P<model>.+?)\s*$")),
    # every request the router cannot serve at once (model not running, loading or being stopped)
    ("wait", re.compile(r"waiting until model name=(?P<model>.+?) is fully loaded")),
    ("load_asked", re.compile(r"model name=(?P<model>.+?) is not loaded, loading")),  # builds before the queue
    ("claim", re.compile(r"slot available, loading queued model name=(?P<model>.+?)\s*$")),
    ("spawn", re.compile(r"spawning server instance with name=(?P<model>.+?) on port (?P<port>\d+)")),
    ("stop_sent", re.compile(r"stopping model instance name=(?P<model>.+?)\s*$")),
    ("kill_loading", re.compile(r"model name=(?P<model>.+?) is still loading, force-killing")),
    # 11434: "... after timeout"; 10327: "... after 10 seconds timeout"
    ("kill_timeout", re.compile(r"force-killing model instance name=(?P<model>.+?) after (?:(?P<seconds>\d+) seconds )?"
                                r"timeout")),
    ("exited", re.compile(r"instance name=(?P<model>.+?) exited with status (?P<status>-?\d+)")),
    ("proxy", re.compile(r"proxying request to model (?P<model>.+?) on port (?P<port>\d+)")),
    # inside the JSON error of a waiter whose client left (build 11434), or at the end of a line
    ("cancelled", re.compile(r"cancelled while waiting for model name=(?P<model>[^\"]+?)(?:\"|\s*$)")),
    ("load_failed", re.compile(r"queued load of name=(?P<model>.+?) did not go through: (?P<reason>.*)")),
    # the proxy thread could not reach the child; the client gets the router's own 500 "proxy error: ..."
    # (server-models.cpp, server_http_proxy); the line names no model
    ("proxy_error", re.compile(r"http client error: (?P<reason>.*?)\s*$")),
]
CHILD_LINE = re.compile(r"^\[(?P<port>\d+)\] (?P<text>.*)$")


def parse_router_line(text: str) -> tuple[str, dict] | None:
    for kind, pattern in ROUTER_PATTERNS:
        m = pattern.search(text)
        if m:
            return kind, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


HOLD_KEY = "ui-config-file"
"""The preset key that holds a child at start-up (``Lab.held`` in harness/repro/lab.py): llama-server
reads the file named by ``--ui-config-file`` while parsing its arguments, before it starts its HTTP
server or reports any status to the router, and a FIFO makes that read wait until lbench writes
``{}`` (an empty UI configuration; the children run with ``--no-webui``).  Build 11434 has it."""


@dataclass(frozen=True)
class RouterModel:
    name: str
    path: Path
    stop_timeout_s: int | None = None
    extra: tuple[tuple[str, str], ...] = ()  # more preset keys, e.g. (("load-on-startup", "true"),)


def check_ini_value(value: str, where: str) -> None:
    bad = INI_FORBIDDEN & set(value)
    if bad:
        raise BadInput(f"{where} contains characters the preset INI cannot hold: {''.join(sorted(bad))}",
                       where=value, hint="rename or move the file")


def _env_name_ok(key: object) -> bool:
    try:
        shell.env_name(key)  # type: ignore[arg-type]
        return True
    except ValueError:
        return False


def _bad_env(key: object) -> None:
    raise BadInput(f"not an environment variable name: {key!r}", where="router environment",
                   hint="letters, digits and _, not starting with a digit")


def preset_ini(models: list[RouterModel], *, ctx_size: int, parallel: int,
               global_extra: dict[str, str] | None = None) -> str:
    """The router's preset INI.  Keys lbench sets itself (address, port, model) are refused
    (engines/reserved.py); every key and value must fit on one INI line."""
    reserved.check_preset_keys(global_extra or {}, "preset [*] keys")
    for k, v in (global_extra or {}).items():
        check_ini_value(str(k), "preset key")
        check_ini_value(str(v), "preset value")
    for m in models:
        reserved.check_preset_keys((k for k, _ in m.extra), f"preset keys of {m.name}")
        for k, v in m.extra:
            check_ini_value(str(k), "preset key")
            check_ini_value(str(v), "preset value")
    lines = ["; written by lbench", "[*]", f"c = {ctx_size}", f"np = {parallel}"]
    lines += [f"{k} = {v}" for k, v in (global_extra or {}).items()]
    lines.append("")
    for m in models:
        check_ini_value(m.name, "model name")
        check_ini_value(str(m.path), "model path")
        lines += [f"[{m.name}]", f"model = {m.path}"]
        if m.stop_timeout_s is not None:
            lines.append(f"stop-timeout = {m.stop_timeout_s}")
        lines += [f"{k} = {v}" for k, v in m.extra]
        lines.append("")
    return "\n".join(lines)


def _close_quietly(fh: IO[str]) -> None:
    try:
        fh.close()
    except OSError:
        pass


@dataclass
class TimelineEvent:
    t: float  # perf_counter at receipt
    source: str  # router | child | sse
    kind: str
    model: str | None
    detail: dict
    text: str


BIND_ATTEMPTS = 3


def port_was_taken(router_log_tail: str) -> bool:
    """Whether a router that exited while starting failed to bind its port (another process
    took the port lbench probed as free): then a new port is tried, as for a single server."""
    text = router_log_tail.lower()
    return "bind" in text or "address already in use" in text


def router_argv(binary: Binary, port: int, preset_path: Path, models_max: int | None,
                sleep_idle_seconds: int | None = None, extra_args: list[str] | None = None) -> list[str]:
    """The router's command line (also what ``recipe.sh`` runs for a router that never came up)."""
    argv = [str(binary.path), "--host", HOST, "--port", str(port), "--models-preset", str(preset_path), "--no-webui"]
    if models_max is not None:  # None: leave it to the env var / preset / default
        argv += ["--models-max", str(models_max)]
    if sleep_idle_seconds is not None:
        argv += ["--sleep-idle-seconds", str(sleep_idle_seconds)]
    return argv + list(extra_args or [])


class RouterProcess:
    """A running router.  ``on_event`` is called (from reader threads) for every event."""

    def __init__(self, binary: Binary, models: list[RouterModel], *, models_max: int | None, run_dir: Path,
                 sleep_idle_seconds: int | None = None, ctx_size: int = 512, parallel: int = 1,
                 extra_args: list[str] | None = None, on_event: Callable[[TimelineEvent], None] = lambda e: None,
                 startup_timeout_s: float = 60.0, extra_env: dict[str, str] | None = None,
                 preset_global: dict[str, str] | None = None,
                 env_axis: tuple[tuple[str, str | None], ...] = (), unsafe_args: list[str] | None = None,
                 unsafe_env: dict[str, str] | None = None):
        reserved.check_args(extra_args or [], "extra router arguments")  # the loopback rule, where it starts
        reserved.check_env(extra_env, "router environment")
        for key in extra_env or {}:
            if not _env_name_ok(key):
                _bad_env(key)
        # defence in depth: what came from outside passes the allow-list here too (the recorded
        # --unsafe-server-arg / --unsafe-server-env only the loopback rule), or nothing is written or started
        server_policy.check_start(extra_args or [], [*(k for k, v in env_axis if v is not None), *(extra_env or {})],
                                  unsafe_args=unsafe_args or [], unsafe_env=unsafe_env, what="router")
        self.models = models
        self.models_max = models_max
        self.on_event = on_event
        self.preset_path = run_dir / "preset.ini"
        self.preset_path.write_text(preset_ini(models, ctx_size=ctx_size, parallel=parallel,
                                               global_extra=preset_global))
        cache = run_dir / "llama-cache"
        cache.mkdir(exist_ok=True)
        env, _ = LlamaServerEngine(binary).environment(Setting(env=env_axis))  # the swap's env axis value
        env["LLAMA_CACHE"] = str(cache)
        env.update(extra_env or {})
        env.update(unsafe_env or {})
        self.log_paths = {"router": run_dir / "logs" / "router.stderr.log",
                          "child": run_dir / "logs" / "router.stdout.log"}
        self._port_to_model: dict[int, str] = {}
        self._stop = threading.Event()
        self._sse_ready = threading.Event()
        self.t_start = time.perf_counter()
        for attempt in range(1, BIND_ATTEMPTS + 1):  # a free port can be taken between probe and bind
            self.port = free_port()
            self.base_url = f"http://{HOST}:{self.port}"
            self.argv = router_argv(binary, self.port, self.preset_path, models_max, sleep_idle_seconds,
                                    [*(extra_args or []), *(unsafe_args or [])])
            self.proc = processes.spawn(self.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        stdin=subprocess.PIPE)  # children exit when the router's stdin closes
            self.pid = self.proc.pid
            self._threads = [
                threading.Thread(target=self._read, args=(self.proc.stderr, "router"), daemon=True),
                threading.Thread(target=self._read, args=(self.proc.stdout, "child"), daemon=True),
            ]
            for t in self._threads:
                t.start()
            try:
                self._wait_ready(startup_timeout_s)
                break
            except EngineError:
                self.close()  # joins the log readers, so the log is complete
                if attempt == BIND_ATTEMPTS or not port_was_taken(self._log_tail()):
                    raise
                self._stop.clear()
            except BaseException:
                self.close()
                raise
        self.port_attempts = attempt
        sse = threading.Thread(target=self._sse, daemon=True)
        sse.start()
        self._threads.append(sse)
        self._sse_ready.wait(10)

    # ---- readers -------------------------------------------------------
    def _read(self, stream: IO[bytes], source: str) -> None:
        """Log and dispatch every line.  A log that cannot be written (full or read-only disk) is
        given up, never the reading: the router would block on a full pipe."""
        try:
            log = open(self.log_paths[source], "a")
        except OSError:
            log = None
        for raw in iter(stream.readline, b""):
            t = time.perf_counter()
            text = raw.decode(errors="replace").rstrip("\n")
            if log is not None:
                try:
                    log.write(f"{t - self.t_start:12.6f} {text}\n")
                    log.flush()
                except OSError:
                    _close_quietly(log)
                    log = None
            self._dispatch_line(t, source, text)
        if log is not None:
            _close_quietly(log)

    def _dispatch_line(self, t: float, source: str, text: str) -> None:
        if source == "router":
            parsed = parse_router_line(text)
            if parsed:
                kind, detail = parsed
                if kind == "spawn":
                    self._port_to_model[int(detail["port"])] = detail["model"]
                self.on_event(TimelineEvent(t, "router", kind, detail.get("model"), detail, text))
            return
        m = CHILD_LINE.match(text)
        if m and "model loaded" in m["text"]:
            model = self._port_to_model.get(int(m["port"]))
            self.on_event(TimelineEvent(t, "child", "child_loaded", model, {"port": int(m["port"])}, text))

    def _sse(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(5.0, read=None), trust_env=False) as c:
                with c.stream("GET", "/models/sse") as resp:
                    self._sse_ready.set()
                    for line in resp.iter_lines():
                        if self._stop.is_set():
                            return
                        if not line.startswith("data:"):
                            continue
                        t = time.perf_counter()
                        try:
                            data = json.loads(line[5:].strip())
                        except ValueError:
                            continue
                        payload = data.get("data") or {}
                        status = payload.get("status")
                        detail = {"status": status, "event": data.get("event")}
                        if "exit_code" in payload:
                            detail["exit_code"] = payload["exit_code"]
                        if isinstance(payload.get("progress"), dict):  # load stages (11434: text_model ...)
                            detail["progress"] = payload["progress"].get("value")
                            stage = payload["progress"].get("current") or payload["progress"].get("stage")
                            if isinstance(stage, str):
                                detail["stage"] = stage[:40]
                        self.on_event(TimelineEvent(t, "sse", f"status:{status}", data.get("model"), detail,
                                                    line[5:].strip()[:300]))
        except (httpx.HTTPError, OSError):
            self._sse_ready.set()
            return

    def _log_tail(self, n: int = 3000) -> str:
        path = self.log_paths["router"]
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def _wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(f"{self.base_url}/models", what="the router", timeout_s=timeout_s, proc=self.proc,
                         log_path=self.log_paths["router"],
                         ready=lambda r: r.status_code == 200 and len(r.json().get("data", [])) >= len(self.models))

    # ---- the swap protocol (engines.base.SwapBackend) ---------------------
    request_path = "/completion"
    reports_states = True  # /models/sse

    def request_body(self, model: str, prompt: str, n_predict: int) -> dict:
        """llama-server's native completion, streamed, with the server's own timings."""
        return {"model": model, "prompt": prompt, "n_predict": n_predict, "cache_prompt": True, "stream": True,
                "response_fields": ["timings"]}

    def after_response(self, model: str) -> dict[str, str]:
        return {}  # the router reports states itself on /models/sse

    def answer_complete(self, body: str) -> bool:
        """A streamed completion ends with the event that carries the timings."""
        return any(line.startswith("data:") and '"timings"' in line for line in body.splitlines()[-4:])

    def describe(self) -> dict:
        return {"argv": self.argv, "pid": self.pid, "port": self.port, "port_attempts": self.port_attempts,
                "preset": self.preset_path.read_text()}

    # ---- control -------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self._stop.set()
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        processes.stop(self.proc, timeout_s=15)
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> "RouterProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
