"""The small interface every engine implements.

A workload gets a ``Server`` and calls ``complete_one_token()``; it never knows
which engine is behind it.  An ``Engine`` knows how to describe itself and how to
start a server for one model under one ``Setting``.  What a server or an engine can do beyond
that is an optional capability in the protocol, ``None`` where it has none (``ServerDefaults``,
``EngineDefaults``): the runs and workloads ask the protocol, never ``getattr``.
"""

from __future__ import annotations

import subprocess  # noqa: F401  (named in RunningServer's and SwapBackend's annotations)
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness.engines.binary import Binary
    from harness.engines.devices import DeviceChoice
    from harness.engines.one_token import OneTokenClient


NO_ARGS = "none"  # the server-args axis value that adds nothing (kept in Setting.server_args to be labelled)


def keep_alive_env(keep_alive: str) -> tuple[tuple[str, str | None], ...]:
    """The Metal residency variables one ``--keep-alive`` value sets (harness/knob_axes.py: the
    keep-alive axis is an env axis): ``none`` -> ``GGML_METAL_NO_RESIDENCY=1``, N seconds ->
    ``GGML_METAL_RESIDENCY_KEEP_ALIVE_S=N``, ``default`` -> nothing."""
    if keep_alive == "default":
        return ()
    if keep_alive == "none":
        return (("GGML_METAL_NO_RESIDENCY", "1"),)
    return (("GGML_METAL_RESIDENCY_KEEP_ALIVE_S", keep_alive),)


@dataclass(frozen=True)
class Setting:
    """Server knobs that form one cell of a run's matrix.

    keep_alive: "default" (engine default), "none" (no residency sets), or seconds
    as a string ("30").  sleep_idle_seconds: None (off) or >= 1.  cache_state: the
    model file's page-cache state at server start: "as-is", "warm" or "cold".

    CPU wake knobs (None = the engine's default, not passed): ``threads`` (-t and -tb),
    ``poll`` (--poll 0-100), ``cpu_strict`` (--cpu-strict 1), ``prio`` (--prio -1..3),
    ``cpu_mask`` (--cpu-mask, hex; placement of the compute threads), ``cpus`` (a CPU
    list such as "1" or "0-1" for the whole server process, via ``taskset -c``) and
    ``omp_wait`` (OMP_WAIT_POLICY of an OpenMP build: "active" or "passive"), ``omp_spincount``
    (GOMP_SPINCOUNT: how long libgomp's idle threads spin before they sleep on a futex).
    """

    keep_alive: str = "default"
    sleep_idle_seconds: int | None = None
    cache_state: str = "as-is"
    threads: int | None = None
    poll: int | None = None
    cpu_strict: bool | None = None
    prio: int | None = None
    cpu_mask: str | None = None
    cpus: str | None = None
    omp_wait: str | None = None
    omp_spincount: int | None = None
    # knob axes (docs/workloads.md): environment variables of the server (value None: removed from its
    # environment, "unset"), extra server arguments, and new prompt tokens each request carries
    env: tuple[tuple[str, str | None], ...] = ()
    server_args: tuple[str, ...] = ()
    prompt_tokens: int = 0

    def knob_env(self) -> tuple[tuple[str, str | None], ...]:
        """Every environment variable the cell's knob axes set (value None: removed from the server's
        environment): the keep-alive axis's, then the env axes'."""
        return keep_alive_env(self.keep_alive) + self.env

    def axis_knobs(self) -> dict:
        """The knob axes that are set (for manifests and samples)."""
        out: dict = {}
        if keep_alive_env(self.keep_alive):
            out["keep_alive"] = dict(keep_alive_env(self.keep_alive))
        if self.env:
            out["env"] = dict(self.env)
        if self.server_args:
            out["server_args"] = self.extra_args()
        if self.prompt_tokens:
            out["prompt_tokens"] = self.prompt_tokens
        return out

    def extra_args(self) -> list[str]:
        """The server-args axis value as arguments (``none``: nothing)."""
        return [a for a in self.server_args if a != NO_ARGS]

    def cpu_knobs(self) -> dict:
        """The CPU wake knobs that are set (for samples, manifests and labels)."""
        return {k: v for k, v in (("threads", self.threads), ("poll", self.poll), ("cpu_strict", self.cpu_strict),
                                  ("prio", self.prio), ("cpu_mask", self.cpu_mask), ("cpus", self.cpus),
                                  ("omp_wait", self.omp_wait), ("omp_spincount", self.omp_spincount))
                if v is not None}

    @property
    def label(self) -> str:
        parts = [f"keep-alive={self.keep_alive}" + ("s" if self.keep_alive.isdigit() else "")]
        if self.sleep_idle_seconds is not None:
            parts.append(f"sleep-idle={self.sleep_idle_seconds}s")
        if self.cache_state != "as-is":
            parts.append(f"cache={self.cache_state}")
        for key, value in self.cpu_knobs().items():
            name = key.replace("_", "-")
            parts.append(name if value is True else f"{name}={int(value) if isinstance(value, bool) else value}")
        for key, value in self.env:
            parts.append(f"{key}={'unset' if value is None else value}")
        if self.server_args:
            parts.append("args=" + " ".join(self.server_args))
        if self.prompt_tokens:
            parts.append(f"prompt={self.prompt_tokens}")
        return ",".join(parts)


@dataclass
class Completion:
    """One request as the client saw it.  Times are ``time.perf_counter()`` seconds."""

    t_send: float
    t_done: float
    http_status: int | None
    error: str | None = None
    timings: dict = field(default_factory=dict)
    client_ms: float | None = None  # the client's own work on the timed path (see engines/timed_http.py)

    @property
    def latency_ms(self) -> float:
        return (self.t_done - self.t_send) * 1000.0


class Server(Protocol):
    base_url: str

    def complete_one_token(self) -> Completion: ...

    def close(self) -> None: ...

    @property
    def client(self) -> "OneTokenClient | None":
        """The keep-alive client the requests go through (its body, its per-request deadline, its
        connection's reconnects), or None (a server whose requests cannot be bounded or shown)."""
        ...

    @property
    def floor(self) -> "Callable[[str], Completion] | None":
        """One GET of a path on the requests' connection, timed like a completion (the HTTP floor),
        or None where the server has none to compare with."""
        ...


class ServerDefaults:
    """The optional capabilities a server without them declares: no client to bound, no HTTP floor."""

    client: "OneTokenClient | None" = None
    floor: "Callable[[str], Completion] | None" = None


class Engine(Protocol):
    name: str
    binary: "Binary | None"  # the llama.cpp program lbench runs (None: an engine lbench does not build)

    def facts(self) -> dict:
        """Path, version, build, sha256 ... for the manifest."""
        ...

    def setting_notes(self, setting: Setting) -> list[str]:
        """Why parts of ``setting`` have no effect here (empty when all apply)."""
        ...

    def environment(self, setting: Setting) -> tuple[dict[str, str], dict[str, str]]:
        """(the server's full environment, the variables lbench set for ``setting``)."""
        ...

    def start(self, model: Path | str, setting: Setting, log_path: Path) -> "RunningServer":
        """``model`` is a local file or directory, or a server-side model name."""
        ...

    def compute_threads(self, setting: Setting) -> int | None:
        """The compute threads a cell's server runs, when known (None: the server's default)."""
        ...

    def like_for_like(self) -> dict | None:
        """The work an in-process reference (llama-idle) and this server do, side by side, or None."""
        ...

    def startup_facts_log(self, model: Path, setting: Setting, log_path: Path) -> str | None:
        """A start-up log with facts the measured server does not print (Metal residency at -lv 4),
        from a short separate start, or None when the engine has none on this host."""
        ...

    def set_context_size(self, n_ctx: int) -> None:
        """The context size its servers start with (the run's default fitted to the model)."""
        ...

    def device_choice(self) -> "DeviceChoice | None":
        """The accelerator devices its servers use, checked (None: not an engine lbench builds)."""
        ...

    def residency(self, setting: Setting) -> dict | None:
        """Whether Metal residency sets are in effect for a cell, from the machine (None: not a
        Metal engine on this host)."""
        ...

    def preflight(self) -> None:
        """The engine's own checks before any run directory (something answers at --url ...);
        raises ``BadInput``.  Engines without any do nothing."""
        ...

    def served_facts(self, server: "RunningServer") -> dict:
        """Facts a started server's log holds only once a model has loaded (Ollama: the build line of the
        llama-server it started), added to the cell's ``startup`` after its sweep; empty when there are none."""
        ...


class EngineDefaults:
    """What an engine does when it declares nothing else: no binary of lbench's, the setting's
    thread count, no like-for-like reference, no separate start-up log."""

    binary: "Binary | None" = None

    def compute_threads(self, setting: Setting) -> int | None:
        return setting.threads

    def like_for_like(self) -> dict | None:
        return None

    def startup_facts_log(self, model: Path, setting: Setting, log_path: Path) -> str | None:
        return None

    def set_context_size(self, n_ctx: int) -> None:
        """The context every server of the run gets (engines that take none ignore it)."""

    def device_choice(self) -> "DeviceChoice | None":
        """The accelerator devices its servers use (None: an engine lbench does not build)."""
        return None

    def residency(self, setting: Setting) -> dict | None:
        return None

    def preflight(self) -> None:
        """No checks of its own."""

    def served_facts(self, server: "RunningServer") -> dict:
        return {}


class RunningServer(Server, Protocol):
    """A started server; also a context manager that stops it on exit."""

    argv: list[str]
    port: int | None

    @property
    def proc(self) -> "subprocess.Popen | None":
        """The server process lbench started (its exit status, state and loaded libraries), or None
        (a server lbench talks to but did not start)."""
        ...

    def log_tail(self, n: int = 40) -> str: ...

    def __enter__(self) -> "RunningServer": ...

    def __exit__(self, *exc: object) -> None: ...


class SwapBackend(Protocol):
    """One server that swaps models on demand; swap storms drive it, whatever it is.

    Implemented by ``engines.router.RouterProcess`` (llama-server's router) and
    ``engines.http_engines.MlxSwapBackend`` (mlx_lm.server reloading on demand).
    """

    pid: int  # the server process (its tree is sampled for memory)
    port: int
    argv: list[str]
    base_url: str
    proc: "subprocess.Popen"  # for the exit status when it dies mid-storm
    t_start: float  # time.perf_counter() when it was started
    request_path: str  # where requests go ("/completion", "/v1/completions")
    reports_states: bool  # whether it streams model states itself (llama-server's /models/sse)

    def request_body(self, model: str, prompt: str, n_predict: int) -> dict:
        """The JSON body of one request for ``model`` in the engine's own format (the swap
        driver only posts it): llama-server's streamed /completion, OpenAI's /v1/completions ..."""
        ...

    def after_response(self, model: str) -> dict[str, str]:
        """Model states the backend knows after a successful response (empty when it reports them itself)."""
        ...

    def answer_complete(self, body: str) -> bool:
        """Whether an HTTP 200 answer's body is whole: a router child that dies mid-answer leaves a
        200 whose stream just stops (the driver records it as failed, ``truncated``)."""
        ...

    def describe(self) -> dict:
        """The manifest's ``router`` entry: argv, pid, port, preset or what stands for it."""
        ...

    def alive(self) -> bool: ...

    def close(self) -> None: ...
