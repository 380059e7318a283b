"""Swap storms: request patterns over several models, sent through one endpoint.

A pattern turns (models, n_requests, seed) into *waves*: lists of model names sent
together.  Every pattern but ``burst`` makes waves of one request; a pool of
``concurrency`` workers sends them in order.  ``burst`` makes waves of K distinct
models sent at once, the next wave after the last one ends.

The driver knows only a backend's base URL, request path and request body (the
backend builds it for a model name), never which engine is behind it.  Each request decodes ``n_predict``
tokens; its send / first byte / done times are ``time.perf_counter()`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx
import numpy as np

from harness.engines.prompts import SWAP_PROMPT
from harness.errors import BadInput

PATTERNS = ("round-robin", "uniform", "zipf", "ping-pong", "burst")


@dataclass(frozen=True)
class Pattern:
    name: str
    zipf_s: float = 1.1
    burst_k: int = 3

    def validate(self, n_models: int) -> "Pattern":
        if self.name not in PATTERNS:
            raise BadInput(f"unknown pattern {self.name!r}", where="--pattern", hint=f"use one of: {', '.join(PATTERNS)}")
        if self.name == "ping-pong" and n_models < 2:
            raise BadInput("ping-pong needs at least 2 models", where="--model")
        if self.name == "burst" and not 1 <= self.burst_k <= n_models:
            raise BadInput(f"--burst-k must be between 1 and the number of models ({n_models}), got {self.burst_k}",
                           where="--burst-k")
        if self.name == "zipf" and not 0 < self.zipf_s <= 100:  # nan and inf fail too
            raise BadInput(f"--zipf-s must be in (0, 100], got {self.zipf_s}", where="--zipf-s")
        return self


def waves(pattern: Pattern, models: list[str], n_requests: int, seed: int) -> list[list[str]]:
    """The request plan: ``n_requests`` model names grouped into waves."""
    rng = random.Random(seed)
    m = len(models)
    if pattern.name == "round-robin":
        names = [models[i % m] for i in range(n_requests)]
    elif pattern.name == "uniform":
        names = [rng.choice(models) for _ in range(n_requests)]
    elif pattern.name == "zipf":
        weights = 1.0 / np.arange(1, m + 1) ** pattern.zipf_s
        names = rng.choices(models, weights=list(weights), k=n_requests)
    elif pattern.name == "ping-pong":
        names = [models[i % 2] for i in range(n_requests)]
    elif pattern.name == "burst":
        out: list[list[str]] = []
        left = n_requests
        while left > 0:
            k = min(pattern.burst_k, left)
            out.append(rng.sample(models, k))
            left -= k
        return out
    else:  # validated earlier
        raise BadInput(f"unknown pattern {pattern.name!r}")
    return [[name] for name in names]


@dataclass
class RequestRecord:
    index: int
    wave: int
    model: str
    t_send: float
    t_first_byte: float | None = None
    t_done: float | None = None
    http_status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    status_at_send: str | None = None
    server_prompt_ms: float | None = None
    extra: dict | None = None  # what the before_send hook recorded


def _error_kind(status: int | None, body: str | None, exc: BaseException | None) -> str:
    if exc is not None:
        if isinstance(exc, httpx.RemoteProtocolError):
            return "disconnected"
        if isinstance(exc, httpx.TimeoutException):
            return "timeout"
        if isinstance(exc, httpx.ConnectError):
            return "connect"
        return type(exc).__name__
    text = (body or "").lower()
    if "proxy error" in text:  # the router's own 500: it could not reach the child (server-models.cpp)
        return "proxy_error"
    if "limit reached" in text:
        return "limit_reached"
    if "failed to load" in text:
        return "load_failed"
    if "cancelled" in text:
        return "cancelled"
    return f"http_{status}"


DEADLINE = "deadline"  # error_kind of a request cut off at its deadline
TRUNCATED = "truncated"  # error_kind of an HTTP 200 whose body stopped short


def mark_past_deadline(rec: RequestRecord, timeout_s: float) -> None:
    """A request cut off at its deadline: failed, cause ``deadline``, whatever it had received."""
    rec.t_done = time.perf_counter()
    got = "no first byte" if rec.t_first_byte is None else "an unfinished answer"
    rec.error = f"deadline: {got} within the {timeout_s:g} s request deadline"
    rec.error_kind = DEADLINE


class Backend(Protocol):
    """What the driver needs of a swap backend (``engines.base.SwapBackend``)."""

    base_url: str
    request_path: str

    def request_body(self, model: str, prompt: str, n_predict: int) -> dict: ...

    def answer_complete(self, body: str) -> bool: ...


async def _one(client: httpx.AsyncClient, rec: RequestRecord, path: str, body: dict,
               complete: Callable[[str], bool] = lambda text: True) -> None:
    try:
        async with client.stream("POST", path, json=body) as resp:
            rec.http_status = resp.status_code
            chunks = []
            async for chunk in resp.aiter_bytes():
                if rec.t_first_byte is None:
                    rec.t_first_byte = time.perf_counter()
                chunks.append(chunk)
            rec.t_done = time.perf_counter()
            text = b"".join(chunks).decode(errors="replace")
            if resp.status_code != 200:
                rec.error = text[:500]
                rec.error_kind = _error_kind(resp.status_code, text, None)
                return
            if not complete(text):  # e.g. the child serving it died mid-answer
                rec.error = f"truncated: the answer stopped after {len(text)} bytes: {text[-200:]!r}"[:500]
                rec.error_kind = TRUNCATED
                return
            for line in reversed(text.splitlines()):  # a streamed response's last event may carry server timings
                if line.startswith("data:") and '"timings"' in line:
                    try:
                        rec.server_prompt_ms = json.loads(line[5:]).get("timings", {}).get("prompt_ms")
                    except ValueError:
                        pass
                    break
    except httpx.HTTPError as exc:
        rec.t_done = time.perf_counter()
        rec.error = f"{type(exc).__name__}: {exc}"[:500]
        rec.error_kind = _error_kind(None, None, exc)


async def drive(
    backend: Backend,
    plan: list[list[str]],
    *,
    concurrency: int,
    n_predict: int = 1,
    prompt: str = SWAP_PROMPT,
    deadline: float | None = None,
    status_of: Callable[[str], str | None] = lambda m: None,
    emit: Callable[[RequestRecord], None],
    should_stop: Callable[[], bool] = lambda: False,
    timeout_s: float = 600.0,
    reuse_connections: bool = False,
    before_send: Callable[[str], dict] | None = None,
    stop_on_deadline: bool = False,
    offsets: list[float] | None = None,
) -> int:
    """Send the plan; returns how many requests were sent.  Records go to ``emit`` as they finish.

    ``timeout_s`` is each request's deadline, from send to its last byte (connect, queueing
    behind swaps, load, decode): a request past it is cut off and recorded as failed with
    ``error_kind`` ``"deadline"``, never as a slow sample.  With ``stop_on_deadline`` the first
    such request also stops sending (a frozen router or child would make every later request
    to it wait out its deadline); requests already in flight finish or hit their own.

    Each request goes to ``backend.request_path`` with ``backend.request_body(model, prompt,
    n_predict)``: the backend, not the driver, knows its engine's request format.

    By default every request opens its own loopback connection: llama-server's HTTP
    pool serves overflow connections on threads that close them after one request,
    and a client reusing such a connection gets "Server disconnected" before the
    router ever sees the request (seen for 12% of requests at concurrency 32).
    That is a transport artifact, not a swap; ``reuse_connections`` keeps it.

    ``offsets`` (a timed sequence, ``harness.workloads.sequence``): request i is sent
    ``offsets[i]`` seconds after the first, whatever is in flight (``concurrency`` does not apply);
    its record's ``extra`` holds the planned offset and how late the send was.
    """
    in_flight = max(concurrency, max(map(len, plan), default=1), len(plan) if offsets is not None else 0)
    limits = httpx.Limits(max_connections=in_flight + 2,
                          max_keepalive_connections=None if reuse_connections else 0)
    sent = 0
    past_deadline = 0
    complete = backend.answer_complete
    async with httpx.AsyncClient(base_url=backend.base_url, timeout=timeout_s, limits=limits, trust_env=False) as client:

        async def send(index: int, wave_no: int, model: str, planned: dict | None = None) -> None:
            nonlocal past_deadline
            status = status_of(model)
            extra = before_send(model) if before_send is not None else None  # e.g. cache control: untimed
            if planned is not None:
                extra = {**planned, **(extra or {})}
            rec = RequestRecord(index, wave_no, model, time.perf_counter(), status_at_send=status, extra=extra)
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
                # lands as the request finishes (gh-86296), and then Ctrl-C would not stop the storm
                async with asyncio.timeout(timeout_s):
                    await _one(client, rec, backend.request_path, backend.request_body(model, prompt, n_predict),
                               complete)
            except (asyncio.TimeoutError, TimeoutError):
                past_deadline += 1
                mark_past_deadline(rec, timeout_s)
            finally:
                emit(rec)

        def stopping() -> bool:
            return should_stop() or (deadline is not None and time.perf_counter() >= deadline) \
                or (stop_on_deadline and past_deadline > 0)

        if offsets is not None:  # a timed sequence: each request at its own time, none waits for another
            loop = asyncio.get_running_loop()
            start = loop.time()

            async def timed(index: int, model: str, at: float) -> None:
                nonlocal sent
                await asyncio.sleep(max(0.0, start + at - loop.time()))
                if stopping():
                    return
                late_ms = (loop.time() - start - at) * 1000
                sent += 1
                await send(index, index, model, {"t_planned_s": at, "send_late_ms": round(late_ms, 3)})

            await asyncio.gather(*(timed(i, w[0], at) for i, (w, at) in enumerate(zip(plan, offsets, strict=True))))
            return sent

        if any(len(w) > 1 for w in plan):  # bursts: one wave at a time, all of it at once
            for wave_no, wave in enumerate(plan):
                if stopping():
                    break
                await asyncio.gather(*(send(sent + i, wave_no, m) for i, m in enumerate(wave)))
                sent += len(wave)
            return sent

        queue = [(i, w[0]) for i, w in enumerate(plan)]
        position = 0

        async def worker() -> None:
            nonlocal position, sent
            while position < len(queue) and not stopping():
                index, model = queue[position]
                position += 1
                sent += 1
                await send(index, index, model)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent
