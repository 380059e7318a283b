"""Options shared by several commands, declared once.

Each is an ``Annotated`` type: ``results: ResultsDir = None``.  Defaults of the
experiment itself (reps, models_max, ...) live in the spec classes only; ``default``
reads them, so a help text or an option default never repeats a number.

This module must stay light (typer only): ``lbench --help`` imports it.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional

import typer

from harness.analysis.gate_config import GateConfig

def engines_with(capability: str) -> str:
    """The registered engines that have ``capability``, in words ("llama-server, mlx, openai or ollama"):
    an --engine help names what the registry holds, so a new engine needs no help text edited."""
    from harness.engines import registry

    names = registry.names(capability)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def shown(value: Any) -> str:
    """A default shown the way Typer shows its own (``[default: 5]``), for options whose value is
    None on the command line because it comes from the spec or the environment.  The one style for
    defaults in help texts; tests/cli/test_help_markup.py rejects hand-written "(default 5)"."""
    return f"[default: {value}]"


ResultsDir = Annotated[Optional[str], typer.Option(
    "--results", metavar="DIR",
    help=f"Results directory. {shown('$LBENCH_RESULTS_DIR, else ./results')}")]

LlamaServer = Annotated[Optional[str], typer.Option(
    "--llama-server", metavar="PATH",
    help="llama-server binary to use (see lbench engine info). "
         + shown("$LBENCH_LLAMA_SERVER, then PATH, then lbench's cached build"))]

BackendOpt = Annotated[Optional[str], typer.Option(
    "--backend", metavar="NAME",
    help="Use lbench's cached build for this backend: cpu, vulkan, cuda, hip, sycl or metal (lbench engine "
         "install --backend NAME first), e.g. --backend vulkan. " + shown("the usual lookup (lbench engine info)"))]

DeviceOpt = Annotated[Optional[int], typer.Option(
    "--device", metavar="N",
    help="Raw device index for the backend's selection variable (Vulkan: GGML_VK_VISIBLE_DEVICES=N, which also "
         "admits CPU-type devices such as lavapipe; CUDA/HIP: *_VISIBLE_DEVICES), e.g. --device 0. "
         + shown("the backend's own choice; a GPU build that sees no device is refused"))]


def select_device(backend: str | None, device: int | None, llama_server: str | None,
                  *more_sides: tuple[str | None, str | None]) -> None:
    """``--device N``: set the backend's selection variable in lbench's environment, which every
    server it starts inherits (recorded in the manifest as device_select).  ``more_sides``: further
    (backend, llama-server) pairs of one command (lbench ab's side B); each side whose backend selects
    devices gets the variable, and --device is refused only when no side's backend takes one."""
    if device is None:
        return
    import os

    from harness.engines import devices
    from harness.engines.binary import locate
    from harness.errors import BadInput

    names = [name or locate(server).backend for name, server in ((backend, llama_server), *more_sides)]
    variables = list(dict.fromkeys(v for v in (devices.SELECT_ENV.get(n) for n in names) if v))
    if not variables or device < 0:
        shown_names = " and ".join(dict.fromkeys(names))
        raise BadInput(f"--device {device} cannot select a {shown_names} device" if not variables
                       else f"--device must be >= 0, got {device}", where="--device",
                       hint="drop --device (the cpu and metal backends have one device)" if not variables
                       else "a raw index, e.g. --device 0")
    for var in variables:
        os.environ[var] = str(device)


UnsafeServerArg = Annotated[Optional[list[str]], typer.Option(
    "--unsafe-server-arg", metavar="ARG",
    help="A server argument lbench refuses (it loads code, runs commands or connects off the machine), passed "
         "knowingly; repeat; recorded in the manifest, never read from a spec, e.g. "
         "--unsafe-server-arg=--rpc --unsafe-server-arg=10.0.0.2:50052. " + shown("none"))]

UnsafeServerEnv = Annotated[Optional[list[str]], typer.Option(
    "--unsafe-server-env", metavar="NAME=VALUE",
    help="An environment variable of the server that lbench refuses (it loads code, connects off the machine, or "
         "is not on lbench's list), set knowingly; repeat; recorded in the manifest, never read from a spec; a "
         "variable that sets the address, port or model is refused all the same, e.g. "
         "--unsafe-server-env LD_PRELOAD=/opt/trace/libtrace.so. " + shown("none"))]

Report = Annotated[bool, typer.Option(
    "--report/--no-report", help="Render the HTML report at the end.")]

Builds = Annotated[Optional[list[int]], typer.Option(
    "--build", metavar="N", help="llama.cpp build from the cache; repeat for one run per build (see lbench engine list).")]

InconclusiveOk = Annotated[bool, typer.Option(
    "--inconclusive-ok", help="Exit 0 instead of 3 when inconclusive.")]


def default(spec_class: type, name: str) -> Any:
    """The default of field ``name`` of a spec dataclass (default or default_factory)."""
    for f in dataclasses.fields(spec_class):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{spec_class.__name__}.{name} has no default")
    raise KeyError(f"{spec_class.__name__} has no field {name!r}")


# verdict settings (compare, gate, ab): None = the gate config's value, whose default is GateConfig's
Margin = Annotated[Optional[float], typer.Option(
    "--margin", "--threshold",
    help=f"Equivalence margin m: band [1/(1+m), 1+m]. {shown(default(GateConfig, 'threshold'))}")]

Alpha = Annotated[Optional[float], typer.Option(
    "--alpha", help=f"Two-sided level; Holm across groups. {shown(default(GateConfig, 'alpha'))}")]

MinN = Annotated[Optional[int], typer.Option(
    "--min-n", help=f"Fewest samples per side and group for a verdict. {shown(default(GateConfig, 'min_n'))}")]


# which groups vote, the rule for "slower", and the prior between-run spread (gate, ab, gate-plan)
GateOn = Annotated[Optional[str], typer.Option(
    "--gate-on", metavar="GROUPS",
    help="Which groups vote: 'warm' (A's warm regime, its pauses pooled), 'regimes' (each regime of A) or "
         "pauses, e.g. '0,1.5'; the rest are reported, not voting. " + shown("warm"))]

SlowerRule = Annotated[Optional[str], typer.Option(
    "--slower-rule", metavar="RULE",
    help="'margin': slower when the interval lies above 1+m; 'zero': above 1 (the margin then only "
         "decides 'no change'). Error rates of both: docs/statistics.md. "
         + shown(default(GateConfig, 'slower_rule')))]

History = Annotated[Optional[list[str]], typer.Option(
    "--history", metavar="RUN",
    help="Earlier runs of the baseline (same design); repeat. Their between-run spread is pooled into "
         "the interval, so few new runs can decide.")]
