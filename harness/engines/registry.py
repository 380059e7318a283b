"""The engines lbench can drive, and what each one can do.

Every engine registers one ``EngineKind`` here: its name, a one-line summary, its
capabilities, how ``--model`` is resolved for it, and factories for the protocols it
implements:

- ``make_server(options)`` returns an ``engines.base.Engine`` (one server, one model):
  the idle-wake sweep and calibration drive it.
- ``make_swap(options, ...)`` returns a ``engines.base.SwapBackend`` (one server that
  swaps models on demand): swap storms drive it.

Specs and commands check capabilities through ``require`` instead of testing engine
names, so a combination an engine cannot do is refused as bad input (exit 2) before a
run directory exists.  Adding an engine = one module with its classes, one
``register(EngineKind(...))`` call below, and its tests (see docs/engines.md).

This module imports no engine module at import time: factories import lazily, so
``lbench --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from harness.errors import BadInput

if TYPE_CHECKING:
    from harness.engines.binary import Binary
    from harness.engines.http_engines import MlxServerEngine, MlxSwapBackend, OllamaEngine, OpenAIEngine
    from harness.engines.llama_server import LlamaServerEngine
    from harness.engines.router import RouterModel, RouterProcess, TimelineEvent

# capability -> what it means (shown by `lbench engine list` and in exit-2 messages)
CAPABILITIES: dict[str, str] = {
    "idle": "serves one model; the idle-wake sweep and calibrate can drive it",
    "swap": "swaps models on demand; swap storms can drive it",
    "cross_check": "in-process reference; joins a llama-server idle sweep as a cross-check",
    "managed": "lbench starts and stops the server process itself",
    "server_timings": "reports its own compute time for each request",
    "local_model": "loads a model file lbench can see (cache states, page-cache probes)",
    "metal_knobs": "honours llama.cpp's Metal residency knobs (--keep-alive)",
    "sleep_idle": "has llama-server's --sleep-idle-seconds",
    "router_events": "reports model loads and unloads (router log and /models/sse) for swap phases",
    "models_max": "caps the number of models loaded at once (--models-max)",
    "knob_axes": "takes --env-axis, --server-args-axis and --prompt-tokens (its environment, flags and prompts)",
}

# how --model is turned into something the engine loads
MODEL_SOURCES = ("gguf", "mlx-dir", "server-name")


@dataclass
class EngineOptions:
    """Everything a factory may need, gathered from the command line or a spec."""

    llama_server: str | None = None  # binary path for llama.cpp engines (None: lbench's lookup order)
    llama_idle: str | None = None
    ctx_size: int = 2048
    server_args: list[str] = field(default_factory=list)
    # passed knowingly (--unsafe-server-arg / --unsafe-server-env): past the allow-list, never the loopback rule
    unsafe_server_args: list[str] = field(default_factory=list)
    unsafe_server_env: dict[str, str] = field(default_factory=dict)
    url: str | None = None  # --engine openai
    ollama_url: str | None = None
    ollama_env: dict[str, str] | None = None
    prompt_cache_size: int | None = None  # mlx_lm.server
    match: str | None = None  # llama-server: "llama-idle" does llama-idle's per-iteration work
    client_spin: bool = False  # llama-server: the client spins instead of sleeping between requests


@dataclass(frozen=True)
class EngineKind:
    name: str
    summary: str
    capabilities: frozenset[str]
    model_source: str
    make_server: Callable[[EngineOptions], Any] | None = None
    make_swap: Callable[..., Any] | None = None
    pairs_with: str | None = None  # for cross_check engines: the server engine they join
    binary: str | None = None  # the llama.cpp program it runs ("llama-server"), located before a run starts
    default_swap_models: tuple[str, ...] = ("tiny-q8", "tiny-q4", "tiny-f16")
    server_name: str = ""  # what reports call its server (e.g. mlx_lm.server); empty: the engine's name
    models_held: int | None = None  # swap engines without a router log: models its server holds at once

    @property
    def display_name(self) -> str:
        return self.server_name or self.name

    def can(self, capability: str) -> bool:
        return capability in self.capabilities


_ENGINES: dict[str, EngineKind] = {}


def register(kind: EngineKind) -> EngineKind:
    unknown = set(kind.capabilities) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"engine {kind.name}: unknown capabilities {sorted(unknown)}")
    if kind.model_source not in MODEL_SOURCES:
        raise ValueError(f"engine {kind.name}: unknown model source {kind.model_source!r}")
    if kind.can("idle") and kind.make_server is None:
        raise ValueError(f"engine {kind.name}: 'idle' needs make_server")
    if kind.can("swap") and kind.make_swap is None:
        raise ValueError(f"engine {kind.name}: 'swap' needs make_swap")
    _ENGINES[kind.name] = kind
    return kind


def names(capability: str | None = None) -> list[str]:
    return [k.name for k in _ENGINES.values() if capability is None or k.can(capability)]


def all_kinds() -> list[EngineKind]:
    return list(_ENGINES.values())


def get(name: str, where: str = "--engine") -> EngineKind:
    try:
        return _ENGINES[name]
    except KeyError:
        raise BadInput(f"unknown engine {name!r}", where=where,
                       hint=f"known engines: {', '.join(_ENGINES)} (see `lbench engine list`)") from None


def require(name: str, capability: str, where: str = "--engine", *, why: str | None = None,
            hint: str | None = None) -> EngineKind:
    """The engine, if it has ``capability``; else exit 2 saying which engines do."""
    kind = get(name, where)
    if not kind.can(capability):
        able = names(capability)
        what = (f"engine {name!r} cannot {why}" if why else
                f"engine {name!r} lacks the {capability!r} capability ({CAPABILITIES[capability]})")
        raise BadInput(what, where=where,
                       hint=hint or ((f"engines that have it: {', '.join(able)}" if able else
                                      f"no registered engine has {capability!r}") + "; see `lbench engine list`"))
    return kind


# ---------------------------------------------------------------- factories
# Each imports its engine module only when called.

class SwapSettings(Protocol):
    """What a swap factory reads of the storm's spec (``harness.spec.SwapSpec``)."""

    @property
    def models_max(self) -> int: ...
    @property
    def sleep_idle_seconds(self) -> int | None: ...
    @property
    def ctx_size(self) -> int: ...
    @property
    def parallel(self) -> int: ...
    def env_pairs(self) -> tuple[tuple[str, str | None], ...]: ...


def _llama_server(o: EngineOptions) -> LlamaServerEngine:
    from harness.engines.llama_server import LlamaServerEngine
    from harness.engines.binary import locate

    return LlamaServerEngine(locate(o.llama_server), ctx_size=o.ctx_size, extra_args=o.server_args,
                             match=o.match, client_spin=o.client_spin, unsafe_args=o.unsafe_server_args,
                             unsafe_env=o.unsafe_server_env)


def _llama_router(o: EngineOptions, *, binary: Binary, models: list[RouterModel], spec: SwapSettings, run_dir: Path,
                  on_event: Callable[[TimelineEvent], None]) -> RouterProcess:
    from harness.engines.router import RouterProcess

    return RouterProcess(binary, models, models_max=spec.models_max, run_dir=run_dir,
                         sleep_idle_seconds=spec.sleep_idle_seconds, ctx_size=spec.ctx_size, parallel=spec.parallel,
                         extra_args=o.server_args, on_event=on_event, env_axis=spec.env_pairs(),
                         unsafe_args=o.unsafe_server_args, unsafe_env=o.unsafe_server_env)


def _mlx_server(o: EngineOptions) -> MlxServerEngine:
    from harness.engines.http_engines import MlxServerEngine

    return MlxServerEngine(prompt_cache_size=o.prompt_cache_size, extra_args=[*o.server_args, *o.unsafe_server_args])


def _mlx_swap(o: EngineOptions, *, binary: Binary | None, models: Sequence[RouterModel], spec: SwapSettings,
              run_dir: Path, on_event: Callable[[TimelineEvent], None]) -> MlxSwapBackend:
    from harness.engines.http_engines import MlxSwapBackend

    return MlxSwapBackend(models, run_dir / "logs" / "mlx_server.log",
                          extra_args=[*o.server_args, *o.unsafe_server_args])


def _openai(o: EngineOptions) -> OpenAIEngine:
    from harness.engines.http_engines import OpenAIEngine

    if not o.url:
        raise BadInput("--engine openai needs --url", where="--url", hint="e.g. --url http://127.0.0.1:1234")
    return OpenAIEngine(o.url)


def _ollama(o: EngineOptions) -> OllamaEngine:
    from harness.engines.http_engines import OllamaEngine

    return OllamaEngine(o.ollama_url or "http://127.0.0.1:11434", o.ollama_env)


register(EngineKind(
    "llama-server", "llama.cpp's HTTP server, built by lbench (router mode for swap storms)",
    frozenset({"idle", "swap", "managed", "server_timings", "local_model", "metal_knobs", "sleep_idle",
               "router_events", "models_max", "knob_axes"}),
    "gguf", make_server=_llama_server, make_swap=_llama_router, binary="llama-server"))
register(EngineKind(
    "llama-idle", "llama.cpp's in-process idle benchmark (a reference beside llama-server)",
    frozenset({"cross_check", "managed", "local_model", "metal_knobs"}), "gguf", pairs_with="llama-server",
    binary="llama-idle"))
register(EngineKind(
    "mlx", "mlx_lm.server, started by lbench (a request naming another model reloads)",
    frozenset({"idle", "swap", "managed", "local_model"}), "mlx-dir", make_server=_mlx_server,
    make_swap=_mlx_swap, default_swap_models=("tiny-f16", "tiny-f16", "tiny-f16"), server_name="mlx_lm.server",
    models_held=1))
register(EngineKind(
    "openai", "any OpenAI-compatible server already running on loopback (--url)",
    frozenset({"idle"}), "server-name", make_server=_openai))
register(EngineKind(
    "ollama", "Ollama on loopback (--ollama-url), or `ollama serve` started by lbench",
    frozenset({"idle", "server_timings"}), "server-name", make_server=_ollama))
