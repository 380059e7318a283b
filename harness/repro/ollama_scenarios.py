"""Claim scenarios for Ollama (run where Ollama answers on loopback).

The scenarios drive Ollama's HTTP API (``/api/generate``, ``/api/ps``); what it says is read by
harness/engines/ollama_api.py, tested against recorded real outputs (tests/fixtures/ollama/, the
shapes in shared/reference/platform-probes.md).  No Ollama runs on the machine these
were written on, so the scenarios themselves have not run against a live Ollama yet.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from harness.engines.base import Setting
from harness.engines.http_engines import OllamaEngine, check_loopback, ollama_timings
from harness.engines.ollama_api import (is_queue_full, is_unload, llama_cpp_facts, load_intervals, loaded_models,
                                       model_paths)
from harness.engines.loopback import free_port
from harness.errors import EngineError

from harness.repro.base import Context, Evidence, Inconclusive, Params, scenario

DEFAULT_URL = "http://127.0.0.1:11434"


@dataclass(frozen=True)
class OneLoadParams(Params):
    models: list[str] = field(default_factory=list)  # empty: the two smallest pulled
    rounds: int = 3


@dataclass(frozen=True)
class EvictionParams(Params):
    models: list[str] = field(default_factory=list)  # empty: the three smallest pulled
    busy_predict: int = 2000  # tokens of the long generation that keeps a runner busy


@dataclass(frozen=True)
class OllamaParams(Params):
    model: str = "auto"  # "auto": the smallest model Ollama has pulled
    url: str | None = None  # default: $LBENCH_OLLAMA_URL, else 127.0.0.1:11434
    keep_alive_s: float = 3.0
    max_queue: int = 1
    flood: int = 8
    n_predict: int = 64


# ---- scenarios ---------------------------------------------------------------------

def _client(p: OllamaParams) -> httpx.Client:
    url = check_loopback(p.url if p.url is not None else os.environ.get("LBENCH_OLLAMA_URL", DEFAULT_URL), "ollama url")
    return httpx.Client(base_url=url, timeout=300, trust_env=False)


def _llama_cpp(http: httpx.Client, log_path: Path | None = None) -> dict:
    """Which llama.cpp the Ollama under test runs, as figures (engines/ollama_api.py ``llama_cpp_facts``): the
    version ``/api/version`` reports, the llama.cpp tag that release pins, and, where lbench started `ollama
    serve` and so has its log, the commit of the llama-server it started."""
    try:
        version = http.get("/api/version").json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        version = None
    log = log_path.read_text(errors="replace") if log_path is not None and log_path.exists() else None
    facts = llama_cpp_facts(version if isinstance(version, str) else None, log)
    return {"ollama_version": facts["ollama_version"], "llama_cpp_pinned": facts["pinned"],
            "llama_cpp_commit": (facts.get("log_build") or {}).get("commit")}


def _model(http: httpx.Client, p: OllamaParams) -> str:
    if p.model != "auto":
        return p.model
    tags = http.get("/api/tags").json().get("models", [])
    if not tags:
        raise Inconclusive("Ollama has no model pulled (ollama pull a small one, e.g. llama3.2:1b)")
    return min(tags, key=lambda t: t.get("size", 0))["name"]


def _unload(http: httpx.Client, model: str) -> None:
    """Unload ``model`` without loading it first (a generate request with no prompt and
    keep_alive 0; one with a prompt would load the model to answer it)."""
    http.post("/api/generate", json={"model": model, "keep_alive": 0}).raise_for_status()


def _generate(http: httpx.Client, model: str, **kw: Any) -> dict[str, Any]:
    r = http.post("/api/generate", json={"model": model, "prompt": "Hello", "stream": False,
                                         "options": {"num_predict": 1}, **kw})
    r.raise_for_status()
    return r.json()


@scenario("ollama-keep-alive", OllamaParams)
def ollama_keep_alive(ctx: Context, p: OllamaParams) -> Evidence:
    """keep_alive "Ns" keeps the runner listed in /api/ps about N s; keep_alive 0 unloads at once."""
    keep = float(p.keep_alive_s)
    ev = Evidence()
    with _client(p) as http:
        model = _model(http, p)
        _generate(http, model, keep_alive=0)
        t0 = time.monotonic()
        _generate(http, model, keep_alive=f"{keep:g}s")
        listed = model in loaded_models(http.get("/api/ps").json())
        gone_after = None
        while time.monotonic() - t0 < keep + 30:
            if model not in loaded_models(http.get("/api/ps").json()):
                gone_after = round(time.monotonic() - t0, 3)
                break
            time.sleep(0.25)
        _generate(http, model)
        unload = _generate(http, model, keep_alive=0)
        gone_now = model not in loaded_models(http.get("/api/ps").json())
        ev.figures.update(_llama_cpp(http))
    ev.figures.update(model=model, keep_alive_s=keep, listed_after_request=listed, unloaded_after_s=gone_after,
                      zero_unloads=is_unload(unload) and gone_now)
    if gone_after is not None:
        ev.figures["expiry_error_s"] = round(abs(gone_after - keep), 3)
    ev.lines = [f"{model}: listed after the request: {listed}; gone from /api/ps after {gone_after} s "
                f"(keep_alive {keep:g}s); keep_alive 0 -> done_reason {unload.get('done_reason')}"]
    return ev


@scenario("ollama-reuse", OllamaParams)
def ollama_reuse(ctx: Context, p: OllamaParams) -> Evidence:
    """Unload, then two requests: the first loads (load_duration large), the second reuses."""
    ev = Evidence()
    with _client(p) as http:
        model = _model(http, p)
        _generate(http, model, keep_alive=0)
        first, second = _generate(http, model), _generate(http, model)
        ev.figures.update(_llama_cpp(http))
    ev.figures.update(model=model, first_load_ms=ollama_timings(first).get("load_ms"),
                      second_load_ms=ollama_timings(second).get("load_ms"))
    if ev.figures["first_load_ms"] and ev.figures["second_load_ms"] is not None:
        ev.figures["second_to_first"] = round(ev.figures["second_load_ms"] / ev.figures["first_load_ms"], 4)
    return ev


@scenario("ollama-queue", OllamaParams)
def ollama_queue(ctx: Context, p: OllamaParams) -> Evidence:
    """Start `ollama serve` with OLLAMA_MAX_QUEUE small and flood it: overflow must get 503."""
    results: list[tuple[int | None, str]] = []
    with _ollama_serve(ctx, {"OLLAMA_MAX_QUEUE": str(p.max_queue), "OLLAMA_NUM_PARALLEL": "1"}) as (url, log_path):
        with _client(replace(p, url=url)) as http:
            model = _model(http, p)

            def one() -> None:
                try:
                    r = http.post("/api/generate", json={"model": model, "prompt": "Hello", "stream": False,
                                                         "options": {"num_predict": int(p.n_predict)}})
                    results.append((r.status_code, r.text[:300]))
                except httpx.HTTPError as exc:
                    results.append((None, str(exc)))

            _together([one] * int(p.flood), 300)
            llama_cpp = _llama_cpp(http, log_path)
    full = [r for r in results if is_queue_full(*r)]
    return Evidence(figures={"sent": len(results), "queue_full_503": len(full),
                             "ok": sum(1 for s, _ in results if s == 200), **llama_cpp},
                    lines=[f"{s}: {b[:160]}" for s, b in results][:10])


def _together(calls: list[Callable[[], object]], timeout: float) -> None:
    """``calls`` in threads started together; returns when all have ended (or ``timeout`` s each)."""
    threads = [threading.Thread(target=c) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)


# ---- one load at a time; eviction (judges tested on recorded lines) -------------

def overlap_figures(intervals: list[tuple[float, float]], resolution_s: float = 0.01) -> dict:
    """Loads whose intervals overlap (one began before the other ended, beyond the log's 1 ms
    stamps and the 2-decimal duration: ``resolution_s``), and the smallest gap between the end
    of a load and the start of the next."""
    pairs = sum(1 for i, a in enumerate(intervals) for b in intervals[i + 1:] if b[0] < a[1] - resolution_s)
    gaps = [b[0] - a[1] for a, b in zip(intervals, intervals[1:])]
    return {"loads": len(intervals), "overlapping_loads": pairs,
            "min_gap_ms": round(min(gaps) * 1000, 1) if gaps else None}


def eviction_figures(before: list[str], after: list[str], loaded_order: list[str], paths: dict[str, str],
                     busy: set[str]) -> dict:
    """One eviction: the residents ``before`` the new model's request and ``after`` it; which
    went, whether it was busy, whether it was the oldest idle (first loaded) or the first by
    model path (the tie-break of Ollama's sort)."""
    gone = [m for m in before if m not in after]
    victim = gone[0] if len(gone) == 1 else None
    idle = [m for m in loaded_order if m in before and m not in busy]
    oldest_idle = idle[0] if idle else None
    first_by_path = min(idle, key=lambda m: paths.get(m, m)) if idle else None
    return {"evicted": len(gone), "victim": victim, "victim_was_busy": victim in busy if victim else None,
            "oldest_idle": oldest_idle, "first_idle_by_path": first_by_path,
            "victim_is_oldest_idle": victim is not None and victim == oldest_idle,
            "distinguishing": oldest_idle != first_by_path}


@contextmanager
def _ollama_serve(ctx: Context, env_extra: dict[str, str], name: str = "ollama.log") -> Iterator[tuple[str, Path]]:
    """``ollama serve`` with ``env_extra`` on a free loopback port, started and stopped by the Ollama
    engine (harness/engines/http_engines.py); yields (url, log path)."""
    if shutil.which("ollama") is None:
        raise Inconclusive(f"setting {', '.join(env_extra)} needs an `ollama` binary to start (none on PATH)")
    log_path = ctx.claim_dir / name
    try:
        server = OllamaEngine(f"http://127.0.0.1:{free_port()}", env_extra).start("", Setting(), log_path)
    except EngineError as exc:
        raise Inconclusive(f"ollama serve did not come up: {exc}") from None
    with server:
        yield server.base_url, log_path


def _smallest(http: httpx.Client, n: int, given: list[str]) -> list[str]:
    if given:
        return list(given)
    tags = sorted(http.get("/api/tags").json().get("models", []), key=lambda t: t.get("size", 0))
    if len(tags) < n:
        raise Inconclusive(f"Ollama has {len(tags)} model(s) pulled; this scenario needs {n} "
                               "(ollama pull small ones, e.g. qwen2.5:0.5b, llama3.2:1b, smollm2:360m)")
    return [t["name"] for t in tags[:n]]


@scenario("ollama-one-load", OneLoadParams)
def ollama_one_load(ctx: Context, p: OneLoadParams) -> Evidence:
    """Two models requested together (both unloaded first), ``rounds`` times; each load's
    interval from Ollama's own log: the second load must begin after the first ended."""
    ev = Evidence()
    with _ollama_serve(ctx, {"OLLAMA_MAX_LOADED_MODELS": "2", "OLLAMA_NUM_PARALLEL": "1"}) as (url, log_path):
        with httpx.Client(base_url=url, timeout=300, trust_env=False) as http:
            models = _smallest(http, 2, p.models)
            for _ in range(p.rounds):
                for m in models:
                    _unload(http, m)
                _together([partial(_generate, http, m) for m in models], 300)
            ev.figures.update(_llama_cpp(http, log_path))
        text = log_path.read_text(errors="replace")
    intervals = load_intervals(text)
    ev.figures.update(overlap_figures(intervals), models=", ".join(models), loads_wanted=2 * p.rounds)
    ev.lines = [f"load {i + 1}: {b - a:.2f} s, ended {b:.3f}" for i, (a, b) in enumerate(intervals)][:12]
    return ev


@scenario("ollama-eviction", EvictionParams)
def ollama_eviction(ctx: Context, p: EvictionParams) -> Evidence:
    """OLLAMA_MAX_LOADED_MODELS=2 (count pressure: the same findRunnerToUnload as VRAM pressure).
    Round 1: two idle residents, loaded so that the oldest is not the first by model path; the
    third model's request evicts one.  Round 2: the oldest is busy with a long generation."""
    ev = Evidence()
    with _ollama_serve(ctx, {"OLLAMA_MAX_LOADED_MODELS": "2", "OLLAMA_NUM_PARALLEL": "1"}) as (url, log_path):
        with httpx.Client(base_url=url, timeout=600, trust_env=False) as http:
            models = _smallest(http, 3, p.models)
            paths = model_paths({m: http.post("/api/show", json={"model": m}).json() for m in models})
            a, b = sorted(models[:2], key=lambda m: paths.get(m, m), reverse=True)  # oldest = later by path
            third = models[2]
            rounds = []
            for with_busy in (False, True):
                for m in models:
                    _unload(http, m)
                _generate(http, a)
                _generate(http, b)
                busy: set[str] = set()
                long_thread = None
                if with_busy:
                    long_thread = threading.Thread(target=_generate, args=(http, a),
                                                   kwargs={"options": {"num_predict": p.busy_predict}})
                    long_thread.start()
                    time.sleep(1.0)
                    busy = {a}
                before = loaded_models(http.get("/api/ps").json())
                _generate(http, third)
                after = loaded_models(http.get("/api/ps").json())
                if long_thread is not None:
                    still_busy = long_thread.is_alive()
                    long_thread.join(600)
                    if not still_busy:
                        raise Inconclusive(f"{a}'s long generation ended before {third} was loaded; "
                                               "raise busy_predict")
                rounds.append(eviction_figures(before, after, [a, b], paths, busy))
            ev.figures.update(_llama_cpp(http, log_path))
    idle_round, busy_round = rounds
    ev.figures.update({f"idle_{k}": v for k, v in idle_round.items()})
    ev.figures.update({f"busy_{k}": v for k, v in busy_round.items()})
    ev.lines = [f"idle round: residents {a} (older), {b}; {third} evicted {idle_round['victim']}",
                f"busy round: {a} busy, {b} idle; {third} evicted {busy_round['victim']}"]
    ev.notes = ["pressure from OLLAMA_MAX_LOADED_MODELS=2 (the runner count), not VRAM: both go through "
                "findRunnerToUnload; with equal keep-alives Ollama's sort breaks ties by model path, so the "
                "scenario loads the two residents in an order where the oldest is not first by path"]
    return ev
