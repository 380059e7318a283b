"""What Ollama says, read: its API replies (``/api/ps``, ``/api/generate``, ``/api/show``, ``/api/version``)
and its server log, and which llama.cpp build an Ollama release runs.  Each parser is tested on recorded
real output (tests/engines/test_ollama_api.py, tests/fixtures/ollama/); the Ollama claim scenarios
(harness/repro/ollama_scenarios.py) use them.  The durations of a reply are ``http_engines.ollama_timings``."""

from __future__ import annotations

import re
from datetime import datetime

QUEUE_FULL = "server busy, please try again. maximum pending requests exceeded"
RUNNER_STARTED = re.compile(r'^time=(?P<time>\S+) .*msg="llama runner started in (?P<s>[0-9.]+) seconds"', re.M)
SHOW_FROM = re.compile(r"^FROM (?P<path>\S+)", re.M)


def loaded_models(ps: dict) -> list[str]:
    """Model names in a ``GET /api/ps`` reply."""
    return [m.get("name") or m.get("model") for m in ps.get("models", [])]


def is_unload(reply: dict) -> bool:
    """An ``/api/generate`` reply to a request that unloaded the model (``keep_alive`` 0)."""
    return reply.get("done_reason") == "unload"


def is_queue_full(status: int | None, body: str) -> bool:
    """Ollama's answer when its queue (``OLLAMA_MAX_QUEUE``) is full."""
    return status == 503 and QUEUE_FULL in body


def _log_time(stamp: str) -> float:
    """``time=`` of an Ollama log line (RFC 3339 with ms, e.g. 2026-04-10T21:13:59.427+09:00) in Unix s."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def load_intervals(log_text: str) -> list[tuple[float, float]]:
    """(start, end) in Unix seconds of every runner load in an Ollama server log: each
    ``llama runner started in X seconds`` line ends a load that began X seconds before
    (``loadStart``, llm/server.go)."""
    out = []
    for m in RUNNER_STARTED.finditer(log_text):
        end = _log_time(m.group("time"))
        out.append((end - float(m.group("s")), end))
    return sorted(out)


def model_paths(show_replies: dict[str, dict]) -> dict[str, str]:
    """Model name -> its blob path, from ``POST /api/show`` replies (the modelfile's ``FROM`` line):
    Ollama's ``ByDurationAndName`` breaks keep-alive ties by this path."""
    out = {}
    for name, reply in show_replies.items():
        m = SHOW_FROM.search(reply.get("modelfile", ""))
        if m:
            out[name] = m.group("path")
    return out


# Which llama.cpp each Ollama release runs.  Since v0.30.0 (commit 9db4bdbad, ollama/ollama#16031: "llama-server
# ... is now the sole inference engine for GGUF-based models") Ollama builds llama.cpp's llama-server from the git
# tag in its LLAMA_CPP_VERSION file (llama/server/CMakeLists.txt: FetchContent, plus Ollama's compat patches,
# llama/compat/).  The table is that file at each release tag, read from ollama/ollama's git history (snapshot of
# 2026-08-21, HEAD fb3076099; `git show vX.Y.Z:LLAMA_CPP_VERSION`); v0.32.15 is the last release in it.
OLLAMA_LLAMA_CPP = {
    "0.30.0": "b9452", "0.30.1": "b9479", "0.30.2": "b9479", "0.30.3": "b9479", "0.30.4": "b9493",
    "0.30.5": "b9509", "0.30.6": "b9509", "0.30.7": "b9509", "0.30.8": "b9509", "0.30.9": "b9626",
    "0.30.10": "b9672", "0.30.11": "b9781", "0.31.0": "b9840", "0.31.1": "b9840", "0.31.2": "b9888",
    "0.32.0": "b9888", "0.32.1": "b9888", "0.32.2": "b10069", "0.32.3": "b10091", "0.32.4": "b10091",
    "0.32.5": "b10091", "0.32.6": "b10242", "0.32.7": "b10242", "0.32.8": "b10353", "0.32.9": "b10353",
    "0.32.10": "b10380", "0.32.11": "b10380", "0.32.12": "b10380", "0.32.13": "b10380", "0.32.14": "b10434",
    "0.32.15": "b10488",
}
OLLAMA_LLAMA_CPP_SOURCE = ("ollama/ollama's LLAMA_CPP_VERSION file at the release tag (git history read at "
                           "fb3076099, 2026-08-21)")
FIRST_LLAMA_SERVER_RELEASE = (0, 30, 0)
# llama-server's own build line: "build: N (COMMIT) with COMPILER for TARGET" (older builds, at the default
# verbosity) or "common_params_print_info: build N (COMMIT) with ..." (newer ones, at -lv 4, which Ollama passes)
LLAMA_BUILD_LINE = re.compile(r"\bbuild:? (?P<number>\d+) \((?P<commit>[^)\s]+)\) with (?P<compiler>.+?) "
                              r"for (?P<target>\S.*?)\s*$", re.M)
OLLAMA_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
# what `ollama serve` logs once it listens (server/routes.go: "Listening on %s (version %s)")
LISTENING = re.compile(r'msg="Listening on \S+ \(version (?P<version>[^)\s]+)\)"')


def pinned_llama_cpp(version: str | None) -> tuple[str | None, str]:
    """(the llama.cpp tag an Ollama release runs, where that comes from), from the version ``/api/version``
    reports; (None, why) where no source states it (older than v0.30.0, newer than the table, a pre-release or a
    development build)."""
    if version is None:
        return None, "Ollama's version was not read (no Ollama answered /api/version when this was recorded)"
    m = OLLAMA_VERSION.match(version.strip())
    if m is None:
        return None, (f"Ollama reported version {version!r}, not a release (X.Y.Z): which llama.cpp it runs "
                      "is not known from its version")
    numbers = tuple(int(x) for x in m.groups())
    key = ".".join(str(x) for x in numbers)
    if key in OLLAMA_LLAMA_CPP:
        return OLLAMA_LLAMA_CPP[key], f"{OLLAMA_LLAMA_CPP_SOURCE}, v{key}"
    if numbers < FIRST_LLAMA_SERVER_RELEASE:
        return None, (f"Ollama {key} predates v0.30.0: it runs its own runner (ggml linked into ollama), "
                      "not llama-server")
    return None, (f"Ollama {key} is not in the table of {OLLAMA_LLAMA_CPP_SOURCE} (last release read: "
                  f"v{max(OLLAMA_LLAMA_CPP, key=lambda v: tuple(int(x) for x in v.split('.')))})")


def llama_cpp_build_line(log_text: str) -> dict | None:
    """The first llama.cpp build line in a server log (what llama-server says of itself), or None."""
    m = LLAMA_BUILD_LINE.search(log_text)
    if m is None:
        return None
    return {"build_number": int(m["number"]), "commit": m["commit"], "compiler": m["compiler"],
            "target": m["target"]}


def served_version(log_text: str) -> str | None:
    """The version an `ollama serve` logged when it started listening, or None."""
    m = LISTENING.search(log_text)
    return m["version"] if m else None


def llama_cpp_facts(version: str | None, log_text: str | None = None) -> dict:
    """Which llama.cpp build Ollama runs, for the manifest: the tag its release pins (``pinned_llama_cpp``)
    and, where lbench reads the server log (an ``ollama serve`` it started), the build line of the
    llama-server Ollama started.  That line's build number is not a tag: Ollama builds from a source checkout
    without git history (the logs quoted in tests/engines/test_ollama_api.py say ``build 1``), so its commit is
    what names the source."""
    pinned, pinned_from = pinned_llama_cpp(version)
    out: dict = {"ollama_version": version, "pinned": pinned, "pinned_from": pinned_from}
    if log_text is not None:
        out["log_build"] = llama_cpp_build_line(log_text)
    return out
