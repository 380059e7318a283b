"""llama-idle (llama.cpp examples/idle): the in-process reference for idle wake.

It sleeps 0, 0.8, ..., 4.0 s (3 iterations each) and decodes its prompt after each
pause, printing ``  - decode time: %8.2f ms`` per iteration and
``iters: %4d, pause: %5d ms, avg decode time: ...`` per pause.  lbench runs it on
the same model and turns its output into the same tidy rows as the HTTP sweep
(``engine = llama-idle``; ``latency_ms`` = in-process decode time), so a report can
set the two side by side.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.engines import processes, provision
from harness.errors import BadInput, EngineError

PAUSES_S = [0.0, 0.8, 1.6, 2.4, 3.2, 4.0]
ITERS = 3
DECODE = re.compile(r"^\s*-\s*decode time:\s*([\d.]+)\s*ms")
SUMMARY = re.compile(r"^iters:\s*(\d+),\s*pause:\s*(\d+)\s*ms,\s*avg decode time:\s*([\d.]+)\s*\+/-\s*([\d.]+|nan)\s*ms")


class LlamaIdleParser:
    """Feed lines; get (pause_s, iteration, decode_ms) rows as soon as each decode is printed."""

    def __init__(self) -> None:
        self.block = 0
        self.iteration = 0
        self.summaries: list[dict] = []

    def feed(self, line: str) -> tuple[float, int, float] | None:
        m = DECODE.match(line)
        if m:
            row = (PAUSES_S[self.block] if self.block < len(PAUSES_S) else 0.8 * self.block, self.iteration,
                   float(m.group(1)))
            self.iteration += 1
            return row
        s = SUMMARY.match(line.strip())
        if s:
            pause_s = int(s.group(2)) / 1000
            self.summaries.append({"pause_s": pause_s, "iters": int(s.group(1)), "avg_ms": float(s.group(3)),
                                   "sd_ms": float(s.group(4))})
            self.block += 1
            self.iteration = 0
        return None


def locate(explicit: str | None, server_binary: Path | None) -> Path:
    if explicit:
        path = Path(explicit)
    elif os.environ.get("LBENCH_LLAMA_IDLE"):
        path = Path(os.environ["LBENCH_LLAMA_IDLE"])
    elif server_binary is not None and (server_binary.parent / "llama-idle").is_file():
        path = server_binary.parent / "llama-idle"
    elif provision.plan_build().is_built():
        path = provision.plan_build().binary("llama-idle")
    elif found := shutil.which("llama-idle"):
        path = Path(found)
    else:
        raise EngineError("no llama-idle found", hint="run `lbench engine install` or pass --llama-idle PATH")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise BadInput(f"llama-idle not found or not executable: {path}", where="--llama-idle / LBENCH_LLAMA_IDLE")
    provision.verify_cached(path)
    return path.resolve()


def run(binary: Path, model: Path, env: dict[str, str], log_path: Path,
        emit: Callable[[tuple[float, int, float]], None], extra_args: list[str] | None = None) -> list[dict]:
    """Run llama-idle to the end; each decode goes to ``emit`` as printed.  Returns its own summaries."""
    parser = LlamaIdleParser()
    with log_path.open("a") as log:
        proc = processes.spawn([str(binary), "-m", str(model), *(extra_args or [])], env=env,
                               stdout=subprocess.PIPE, stderr=log)
        assert proc.stdout is not None
        try:
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                row = parser.feed(line)
                if row is not None:
                    emit(row)
            rc = proc.wait()
        finally:
            processes.stop(proc)
    if rc != 0:
        raise EngineError(f"llama-idle exited with status {rc}", where=str(log_path))
    return parser.summaries
