"""Checks that need the resolved models and engine, run before any run directory exists.

Exit 2 means nothing was written (issue 12, class 4): everything a run can know to be bad
input before it starts a server is refused here, by ``prepare_idle`` / ``prepare_swap``.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from harness import knob_axes
from harness.engines import server_flags
from harness.engines.base import NO_ARGS
from harness.errors import BadInput
from harness.engines.router import preset_ini, RouterModel

if TYPE_CHECKING:
    from harness.runs.idle import PreparedIdle
    from harness.runs.swap import PreparedSwap


def available_cpus() -> set[int]:
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def cpu_list(text: str) -> set[int]:
    """"0-1,3" (or "0+1") -> {0, 1, 3}; the syntax was checked by the spec."""
    cpus: set[int] = set()
    for part in str(text).replace("+", ",").split(","):
        lo, _, hi = part.partition("-")
        if int(hi or lo) - int(lo) > 4096:
            raise BadInput(f"CPU range {part!r} is too wide", where=text)
        cpus |= set(range(int(lo), int(hi or lo) + 1))
    return cpus


def check_cpus(text: str | None, where: str) -> None:
    """A CPU list must name CPUs this process may run on (taskset and sched_setaffinity fail otherwise)."""
    if text is None:
        return
    wanted = cpu_list(text)
    have = available_cpus()
    missing = sorted(wanted - have)
    if not wanted or missing:
        raise BadInput(f"CPU list {text!r} names CPUs this machine does not offer: "
                       f"{','.join(map(str, missing)) or '(none given)'}", where=where,
                       hint=f"available here: {_ranges(sorted(have))}")


def _ranges(cpus: list[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


def check_idle(prep: PreparedIdle) -> None:
    """``prep``: a PreparedIdle (models resolved, engine made)."""
    # cache states on engines without a local model file are refused by the spec (engine registry)
    spec = prep.spec
    for value in spec.cpus:
        check_cpus(value, "--cpus")
    if any(v is not None for v in spec.cpus) and shutil.which("taskset") is None:
        from harness.engines.llama_server import cpu_placement_hint

        raise BadInput("CPU placement (--cpus) needs taskset (util-linux)", where="--cpus", hint=cpu_placement_hint())
    check_cpus(spec.client_cpus, "--client-cpus")
    if hasattr(prep.engine, "preflight"):  # the engine's own checks (e.g. something answers at --url)
        prep.engine.preflight()
    binary = getattr(prep.engine, "binary", None)  # a llama.cpp server lbench starts: ask it about its flags
    if binary is not None:
        server_flags.check_run(binary.path, spec.ctx_size, list(spec.server_args),
                               [(m.label, m.info.n_ctx_train) for m in prep.models],
                               axis_args=[[a for a in knob_axes.parse_server_args_value(v) if a != NO_ARGS]
                                          for v in spec.server_args_axis],
                               unsafe_args=list(spec.unsafe_server_args))


def check_swap(prep: PreparedSwap) -> None:
    """``prep``: a PreparedSwap. Server flags and context size as for idle; the router preset must
    hold every model name and path."""
    if prep.binary is not None:  # a llama.cpp server lbench starts: ask it about its flags
        server_flags.check_run(prep.binary.path, prep.spec.ctx_size, list(prep.spec.server_args),
                               [(n, m.info.n_ctx_train) for n, m in zip(prep.names, prep.models)],
                               unsafe_args=list(prep.spec.unsafe_server_args))
    if prep.engine is None or not prep.engine.can("router_events"):  # only the router reads a preset
        return

    preset_ini([RouterModel(n, m.path, prep.spec.stop_timeout_s) for n, m in zip(prep.names, prep.models)],
               ctx_size=prep.spec.ctx_size, parallel=prep.spec.parallel)
