"""Claim scenarios for Ollama (run where Ollama answers on loopback) and Metal-only parsers.

The scenarios drive Ollama's HTTP API (``/api/generate``, ``/api/ps``); the parsers they
rely on are tested here against recorded real outputs (tests/fixtures/ollama/, the
shapes in shared/reference/platform-probes.md).  No Ollama runs on the machine these
were written on, so the scenarios themselves have not run against a live Ollama yet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time

import httpx

from harness.engines.llama_server import free_port
from harness.repro import scenarios as _sc  # attributes read at call time (scenarios imports this module)

DEFAULT_URL = "http://127.0.0.1:11434"
QUEUE_FULL = "server busy, please try again. maximum pending requests exceeded"
KEEP_ALIVE_LINE = re.compile(r"creating a residency set collection \(keep_alive = (?P<s>-?\d+) s\)")


# ---- parsers (tested on recorded outputs) ------------------------------------------

def loaded_models(ps: dict) -> list[str]:
    """Model names in a ``GET /api/ps`` reply."""
    return [m.get("name") or m.get("model") for m in ps.get("models", [])]


def load_ms(reply: dict) -> float | None:
    """``load_duration`` (ns) of an ``/api/generate`` reply, in ms."""
    v = reply.get("load_duration")
    return None if v is None else v / 1e6


def is_unload(reply: dict) -> bool:
    return reply.get("done_reason") == "unload"


def is_queue_full(status: int | None, body: str) -> bool:
    return status == 503 and QUEUE_FULL in body


def metal_keep_alive_s(log_text: str) -> int | None:
    """The keep-alive llama.cpp's Metal backend reports at startup (needs ``-lv 4``)."""
    m = KEEP_ALIVE_LINE.search(log_text)
    return int(m.group("s")) if m else None


# ---- scenarios ---------------------------------------------------------------------

def _client(p: dict) -> httpx.Client:
    from harness.engines.http_engines import check_loopback

    url = check_loopback(p.get("url", os.environ.get("LBENCH_OLLAMA_URL", DEFAULT_URL)), "ollama url")
    return httpx.Client(base_url=url, timeout=300, trust_env=False)


def _model(http: httpx.Client, p: dict) -> str:
    if p.get("model", "auto") != "auto":
        return p["model"]
    tags = http.get("/api/tags").json().get("models", [])
    if not tags:
        raise _sc.Inconclusive("Ollama has no model pulled (ollama pull a small one, e.g. llama3.2:1b)")
    return min(tags, key=lambda t: t.get("size", 0))["name"]


def _generate(http: httpx.Client, model: str, **kw) -> dict:
    r = http.post("/api/generate", json={"model": model, "prompt": "Hello", "stream": False,
                                         "options": {"num_predict": 1}, **kw})
    r.raise_for_status()
    return r.json()


def ollama_keep_alive(ctx: "_sc.Context", p: dict) -> "_sc.Evidence":
    """keep_alive "Ns" keeps the runner listed in /api/ps about N s; keep_alive 0 unloads at once."""
    keep = float(p.get("keep_alive_s", 3))
    ev = _sc.Evidence()
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
    ev.figures.update(model=model, keep_alive_s=keep, listed_after_request=listed, unloaded_after_s=gone_after,
                      zero_unloads=is_unload(unload) and gone_now)
    if gone_after is not None:
        ev.figures["expiry_error_s"] = round(abs(gone_after - keep), 3)
    ev.lines = [f"{model}: listed after the request: {listed}; gone from /api/ps after {gone_after} s "
                f"(keep_alive {keep:g}s); keep_alive 0 -> done_reason {unload.get('done_reason')}"]
    return ev


def ollama_reuse(ctx: "_sc.Context", p: dict) -> "_sc.Evidence":
    """Unload, then two requests: the first loads (load_duration large), the second reuses."""
    ev = _sc.Evidence()
    with _client(p) as http:
        model = _model(http, p)
        _generate(http, model, keep_alive=0)
        first, second = _generate(http, model), _generate(http, model)
    ev.figures.update(model=model, first_load_ms=load_ms(first), second_load_ms=load_ms(second))
    if ev.figures["first_load_ms"] and ev.figures["second_load_ms"] is not None:
        ev.figures["second_to_first"] = round(ev.figures["second_load_ms"] / ev.figures["first_load_ms"], 4)
    return ev


def ollama_queue(ctx: "_sc.Context", p: dict) -> "_sc.Evidence":
    """Start `ollama serve` with OLLAMA_MAX_QUEUE small and flood it: overflow must get 503."""
    exe = shutil.which("ollama")
    if exe is None:
        raise _sc.Inconclusive("setting OLLAMA_MAX_QUEUE needs an `ollama` binary to start (none on PATH)")
    port = free_port()
    env = {**os.environ, "OLLAMA_HOST": f"127.0.0.1:{port}", "OLLAMA_MAX_QUEUE": str(p.get("max_queue", 1)),
           "OLLAMA_NUM_PARALLEL": "1"}
    log = (ctx.claim_dir / "ollama.log").open("w")
    proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    results: list[tuple[int | None, str]] = []
    try:
        p = {**p, "url": f"http://127.0.0.1:{port}"}
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(p["url"] + "/api/version", timeout=1, trust_env=False)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise _sc.Inconclusive("ollama serve did not answer within 30 s") from None
                time.sleep(0.2)
        with _client(p) as http:
            model = _model(http, p)

            def one() -> None:
                try:
                    r = http.post("/api/generate", json={"model": model, "prompt": "Hello", "stream": False,
                                                         "options": {"num_predict": int(p.get("n_predict", 64))}})
                    results.append((r.status_code, r.text[:300]))
                except httpx.HTTPError as exc:
                    results.append((None, str(exc)))

            threads = [threading.Thread(target=one) for _ in range(int(p.get("flood", 8)))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    full = [r for r in results if is_queue_full(*r)]
    return _sc.Evidence(figures={"sent": len(results), "queue_full_503": len(full),
                             "ok": sum(1 for s, _ in results if s == 200)},
                    lines=[f"{s}: {b[:160]}" for s, b in results][:10])


def metal_keep_alive_parse(ctx: "_sc.Context", p: dict) -> "_sc.Evidence":
    """Start llama-server with GGML_METAL_RESIDENCY_KEEP_ALIVE_S=<value> and -lv 4; read the
    keep-alive from its startup log, for each value."""
    from harness.engines.base import Setting
    from harness.engines.llama_server import LlamaServerEngine

    model = ctx.resolve(p.get("model", "tiny-q8"))
    ev = _sc.Evidence()
    for value in p.get("values", ["0", "-5", "abc", "30"]):
        log_path = ctx.claim_dir / "logs" / f"server-keepalive-{value}.log"
        engine = LlamaServerEngine(ctx.binary, extra_args=["-lv", "4"])
        with engine.start(model.path, Setting(keep_alive=str(value)), log_path):  # sets the variable
            pass
        ev.figures[f"keep_alive_for_{value}"] = metal_keep_alive_s(log_path.read_text(errors="replace"))
    ev.figures["fallback_180_for_invalid"] = all(
        ev.figures.get(f"keep_alive_for_{v}") == 180 for v in p.get("values", ["0", "-5", "abc"]) if v in ("0", "-5", "abc"))
    return ev


SCENARIOS = {"ollama-keep-alive": ollama_keep_alive, "ollama-reuse": ollama_reuse, "ollama-queue": ollama_queue,
             "metal-keep-alive-parse": metal_keep_alive_parse}
_sc.SCENARIOS.update(SCENARIOS)
