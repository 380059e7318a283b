"""Engines other than llama-server, behind the same interface as ``LlamaServerEngine``.

- ``mlx``: lbench starts ``mlx_lm server`` for a model directory (offline: HF_HUB_OFFLINE,
  TRANSFORMERS_OFFLINE, an empty HF_HUB_CACHE).  No server timings: client-side only.
- ``openai``: any OpenAI-compatible server the user runs (LM Studio, llama-swap, vLLM, ...)
  at ``--url``; models are picked with the ``model`` field; client-side timing only.
- ``ollama``: a user's Ollama at ``--ollama-url`` (default 127.0.0.1:11434), or ``ollama
  serve`` started by lbench when it is on PATH; ``/api/generate`` reports
  ``load_duration`` / ``prompt_eval_duration`` / ``eval_duration`` (ns).
Every URL must be loopback: lbench never sends traffic anywhere else.
"""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from harness.engines import processes, reserved
from harness.engines.base import Completion, EngineDefaults, ServerDefaults, Setting
from harness.engines.prompts import IDLE_PROMPT
from harness.engines.readiness import wait_until_ready
from harness.engines.loopback import HOST, free_port
from harness.engines.ollama_api import llama_cpp_facts, served_version
from harness.engines.one_token import OneTokenClient
from harness.errors import BadInput, EngineError

if TYPE_CHECKING:
    from harness.engines.base import RunningServer
    from harness.engines.router import RouterModel

PROMPT = IDLE_PROMPT


def check_loopback(url: str, where: str) -> str:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok or parts.scheme != "http":
        raise BadInput(f"{url!r} is not a loopback http URL", where=where,
                       hint="lbench only talks to servers on this machine: http://127.0.0.1:PORT")
    return f"http://{parts.netloc}"


class _Handle(ServerDefaults):
    """A server an engine talks to; closes what lbench started (nothing for external servers).
    No HTTP floor: these engines' health paths are not llama-server's."""

    def __init__(self, base_url: str, client: OneTokenClient, argv: list[str], proc: subprocess.Popen | None = None,
                 log_path: Path | None = None) -> None:
        self.base_url = base_url
        self.client: OneTokenClient = client
        self.argv = argv
        self.port = urlsplit(base_url).port
        self.proc = proc
        self.log_path = log_path

    def complete_one_token(self) -> Completion:
        return self.client.complete_one_token()

    def log_tail(self, n: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def close(self) -> None:
        self.client.close()
        if self.proc is not None:
            processes.stop(self.proc)

    def __enter__(self) -> "_Handle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _wait(url: str, proc: subprocess.Popen | None, timeout_s: float, log_path: Path | None) -> None:
    wait_until_ready(url, what="the server", timeout_s=timeout_s, proc=proc, log_path=log_path, poll_s=0.1)


def openai_timings(data: dict) -> dict:
    """OpenAI responses carry no server timings; keep the cache hint when there is one."""
    usage = data.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return {"cache_n": cached} if cached is not None else {}


def _client_notes(setting: Setting, engine: str) -> list[str]:
    notes = []
    if setting.keep_alive != "default":
        notes.append(f"keep-alive={setting.keep_alive} is a llama.cpp Metal setting; {engine} ignores it")
    if setting.sleep_idle_seconds is not None:
        notes.append(f"sleep-idle is a llama-server option; {engine} has none")
    return notes


class MlxServerEngine(EngineDefaults):
    name = "mlx"

    def __init__(self, *, prompt_cache_size: int | None = None, extra_args: list[str] | None = None,
                 startup_timeout_s: float = 300.0):
        try:
            import mlx.core  # noqa: F401
            import mlx_lm  # noqa: F401
        except ImportError:
            raise BadInput("the mlx engine needs mlx and mlx-lm", where="--engine mlx",
                           hint="pip install 'lbench[mlx]' (from a checkout: pip install '.[mlx]'); on Linux "
                                "this installs mlx[cpu]") from None
        self.prompt_cache_size = prompt_cache_size
        reserved.check_args(extra_args or [], "extra mlx_lm.server arguments")  # the loopback rule, where it starts
        self.extra_args = list(extra_args or [])
        self.startup_timeout_s = startup_timeout_s

    def facts(self) -> dict:
        import mlx.core as mx
        import mlx_lm

        facts = {"engine": self.name, "mlx": getattr(mx, "__version__", "?"), "mlx_lm": getattr(mlx_lm, "__version__", "?"),
                 "python": sys.executable, "device": str(mx.default_device()),
                 "prompt_cache": "default (on)" if self.prompt_cache_size is None
                 else f"--prompt-cache-size {self.prompt_cache_size}" + (" (off)" if self.prompt_cache_size == 0 else ""),
                 "timing": "client-side only (mlx_lm.server has no timing fields)"}
        if platform.system() == "Darwin":
            try:
                info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()  # (deprecated)
                facts["wired_limit_bytes"] = info.get("max_recommended_working_set_size")
            except Exception as exc:  # no Metal (virtual Mac): record why
                facts["wired_limit_bytes"] = f"not available: {exc}"
        return facts

    def setting_notes(self, setting: Setting) -> list[str]:
        return _client_notes(setting, "mlx_lm.server")

    def environment(self, setting: Setting) -> tuple[dict[str, str], dict[str, str]]:
        return dict(os.environ), {}

    def start(self, model_path: Path, setting: Setting, log_path: Path) -> _Handle:
        port = free_port()
        hub = log_path.parent / "hf-hub-empty"
        hub.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_CACHE": str(hub)}
        argv = [sys.executable, "-m", "mlx_lm", "server", "--model", str(model_path), "--host", HOST,
                "--port", str(port)]
        if self.prompt_cache_size is not None:
            argv += ["--prompt-cache-size", str(self.prompt_cache_size)]
        argv += self.extra_args
        log = log_path.open("ab")
        proc = processes.spawn(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://{HOST}:{port}"
        try:
            _wait(base + "/v1/models", proc, self.startup_timeout_s, log_path)
        except BaseException:
            processes.stop(proc)  # SIGTERM, then SIGKILL: SIGINT sometimes aborts mlx_lm.server
            raise
        client = OneTokenClient(base, PROMPT, path="/v1/completions", timings=openai_timings,
                                body={"model": str(model_path), "prompt": PROMPT, "max_tokens": 1, "temperature": 0},
                                timeout_s=self.startup_timeout_s)
        # from mlx-lm 0.31.3 the model loads in the generation thread on the first request, and /v1/models
        # answers before that: ready means one completion answered (a model that cannot load fails the start)
        first = client.complete_one_token()
        if first.error is not None:
            processes.stop(proc)
            raise EngineError(f"mlx_lm.server answered /v1/models but not a first completion (the model did not "
                              f"load?): {first.error}; log: {log_path}")
        return _Handle(base, client, argv, proc, log_path)


class MlxSwapBackend:
    """The swap protocol on mlx_lm.server: one server; a request naming another model makes it reload.

    ``models`` are ``RouterModel``-like (name, path); the server starts on the first.
    """

    request_path = "/v1/completions"
    reports_states = False  # lbench infers them (after_response)

    def __init__(self, models: Sequence[RouterModel], log_path: Path, *, extra_args: list[str] | None = None) -> None:
        self.t_start = time.perf_counter()
        self.paths = {m.name: m.path for m in models}
        self.handle = MlxServerEngine(extra_args=extra_args).start(models[0].path, Setting(), log_path)
        proc = self.handle.proc
        assert proc is not None  # started here: the handle holds the process
        self.proc = proc
        self.pid, self.port, self.argv = self.proc.pid, self.handle.port, self.handle.argv
        self.base_url = self.handle.base_url

    def request_body(self, model: str, prompt: str, n_predict: int) -> dict:
        return {"model": str(self.paths[model]), "prompt": prompt, "max_tokens": n_predict, "temperature": 0}

    def after_response(self, model: str) -> dict[str, str]:
        # mlx_lm.server holds exactly the model it last served
        return {name: "loaded" if name == model else "unloaded" for name in self.paths}

    def answer_complete(self, body: str) -> bool:
        """One JSON object with its choices (not streamed)."""
        try:
            return "choices" in json.loads(body)
        except ValueError:
            return False

    def describe(self) -> dict:
        return {"argv": self.argv, "pid": self.pid, "port": self.port,
                "preset": "(mlx_lm.server keeps one model; a request naming another reloads it)"}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.handle.close()


def check_url_answers(url: str, where: str, timeout_s: float = 3.0) -> None:
    """Something must accept a connection at ``url`` (loopback, checked before)."""
    parts = urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError:
        raise BadInput(f"bad port in {url!r}", where=where, hint="e.g. http://127.0.0.1:8080") from None
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise BadInput(f"nothing answers at {url} ({exc.strerror or exc})", where=where,
                       hint="start the server first, or fix the URL") from None


class OpenAIEngine(EngineDefaults):
    name = "openai"

    def __init__(self, url: str):
        self.base = check_loopback(url, "--url")

    def preflight(self) -> None:
        """Before any run directory: something must answer at --url."""
        check_url_answers(self.base, "--url")

    def facts(self) -> dict:
        return {"engine": self.name, "url": self.base, "timing": "client-side only"}

    def setting_notes(self, setting: Setting) -> list[str]:
        return _client_notes(setting, "an external OpenAI-compatible server")

    def environment(self, setting: Setting) -> tuple[dict[str, str], dict[str, str]]:
        return {}, {}

    def start(self, model: Path | str, setting: Setting, log_path: Path) -> _Handle:
        _wait(self.base + "/v1/models", None, 30, None)
        client = OneTokenClient(self.base, PROMPT, path="/v1/completions", timings=openai_timings,
                                body={"model": str(model), "prompt": PROMPT, "max_tokens": 1, "temperature": 0})
        return _Handle(self.base, client, [f"(external) {self.base}"])


SERVED_LOG_LINES = 20000  # the served log's last lines read for the build line (one load writes a few hundred)
OLLAMA_ENV = ("OLLAMA_KEEP_ALIVE", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_QUEUE")


def ollama_timings(data: dict) -> dict:
    """Ollama's durations (ns) in llama-server's timing names (ms)."""
    ns = 1e-6
    out = {}
    if data.get("prompt_eval_duration") is not None:
        out["prompt_ms"] = data["prompt_eval_duration"] * ns
        out["prompt_n"] = data.get("prompt_eval_count")
    if data.get("eval_duration") is not None:
        out["predicted_ms"] = data["eval_duration"] * ns
        out["predicted_n"] = data.get("eval_count")
    if data.get("load_duration") is not None:
        out["load_ms"] = data["load_duration"] * ns
    return out


def find_ollama(url: str) -> dict:
    """Is a live Ollama answering at ``url``, or is one on PATH?"""
    base = check_loopback(url, "--ollama-url")
    found = {"url": base, "live": False, "binary": shutil.which("ollama")}
    try:
        r = httpx.get(base + "/api/version", timeout=1.0, trust_env=False)
        found.update(live=r.status_code == 200, version=r.json().get("version"))
    except (httpx.HTTPError, ValueError):
        pass
    return found


def settings_cannot_apply(live: bool, env: dict[str, str]) -> str | None:
    """Why OLLAMA_* settings cannot apply: a server already answering was started by someone else (the
    macOS app keeps its own launchctl environment), so lbench's variables never reach it; None if they can."""
    if live and env:
        return (f"an Ollama server is already running, so {', '.join(sorted(env))} cannot reach it: "
                "lbench passes these settings only to an `ollama serve` it starts itself")
    return None


class OllamaEngine(EngineDefaults):
    name = "ollama"

    def __init__(self, url: str = "http://127.0.0.1:11434", env: dict[str, str] | None = None):
        self.base = check_loopback(url, "--ollama-url")
        self.env = {k: v for k, v in (env or {}).items() if k in OLLAMA_ENV}

    def preflight(self) -> None:
        """Before any run directory: Ollama answers at --ollama-url, or lbench can start `ollama serve`;
        and OLLAMA_* settings only where lbench starts the server (docs/mac.md finding 18)."""
        found = find_ollama(self.base)
        if not found["live"] and not found["binary"]:
            raise BadInput(f"no Ollama answers at {self.base} and `ollama` is not on PATH",
                           where="--ollama-url", hint="start Ollama, or pass --ollama-url")
        conflict = settings_cannot_apply(bool(found["live"]), self.env)
        if conflict:
            raise BadInput(conflict, where="--ollama-url",
                           hint="quit the running Ollama (on a Mac: the menu-bar app) so lbench starts "
                                "`ollama serve` with these settings, or drop them and set them on that server yourself")

    def facts(self) -> dict:
        found = find_ollama(self.base)
        # which llama.cpp that Ollama runs, from the version it reports (ollama_api.pinned_llama_cpp; the
        # build line of the llama-server it starts is added to each cell by served_facts)
        return {"engine": self.name, **found, "env": self.env, "llama_cpp": llama_cpp_facts(found.get("version"))}

    def served_facts(self, server: RunningServer) -> dict:
        """Which llama.cpp the `ollama serve` lbench started ran, from its log: the version it logged, the tag
        that release pins and the build line of the llama-server it started (``ollama_api.llama_cpp_facts``).
        An Ollama lbench did not start gives lbench no log: nothing is recorded (the run's engine facts have
        its /api/version and pin)."""
        log = server.log_tail(SERVED_LOG_LINES)
        return {"llama_cpp": llama_cpp_facts(served_version(log), log)} if log else {}

    def setting_notes(self, setting: Setting) -> list[str]:
        notes = []
        if setting.keep_alive == "none":
            notes.append("keep-alive=none is a llama.cpp Metal setting; for Ollama use seconds (per-request keep_alive)")
        if setting.sleep_idle_seconds is not None:
            notes.append("sleep-idle is a llama-server option; Ollama unloads on keep_alive expiry")
        return notes

    def environment(self, setting: Setting) -> tuple[dict[str, str], dict[str, str]]:
        return {**os.environ, **self.env}, dict(self.env)

    def start(self, model: Path | str, setting: Setting, log_path: Path) -> _Handle:
        proc = None
        argv = [f"(external) {self.base}"]
        if not find_ollama(self.base)["live"]:
            binary = shutil.which("ollama")
            if not binary:
                raise EngineError(f"no Ollama answers at {self.base} and `ollama` is not on PATH",
                                  hint="start Ollama, or pass --ollama-url")
            env, _ = self.environment(setting)
            env["OLLAMA_HOST"] = urlsplit(self.base).netloc
            argv = [binary, "serve"]
            proc = processes.spawn(argv, env=env, stdout=log_path.open("ab"), stderr=subprocess.STDOUT)
            _wait(self.base + "/api/version", proc, 60, log_path)
        body = {"model": str(model), "prompt": PROMPT, "stream": False, "options": {"num_predict": 1}}
        if setting.keep_alive.isdigit():
            body["keep_alive"] = f"{setting.keep_alive}s"
        client = OneTokenClient(self.base, PROMPT, path="/api/generate", timings=ollama_timings, body=body)
        return _Handle(self.base, client, argv, proc, log_path if proc else None)
